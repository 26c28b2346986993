/* SPDX-License-Identifier: MIT */
/*
 * CCID 2, TCP-like congestion control (RFC 4341), as the two half-connection
 * modules of ccid.h.
 *
 * Sender: a window in packets (RFC 4341 §5): slow start from the RFC 3390
 * initial window, congestion avoidance (+1 per window of acked packets),
 * growth only while at least half the window is in use (RFC 2861),
 * the window halved at most once per window of data on loss or ECN marks,
 * a TCP retransmission timeout (RFC 6298, 200 ms floor) that empties the
 * pipe and restarts at one packet without writing off what was out, and
 * loss probes before it (probe_timeout()).  Ack Vectors are walked over a
 * bounded record of what we sent: a packet is acked when a vector says
 * received (or ECN-marked), lost when NUMDUPACK = 3 packets sent after it
 * have been acked (§5), and each data packet is reported exactly once to
 * env->acked or env->lost.
 *
 * Ack Ratio (§6.1.2): the RFC's rule (double after a window with lost
 * Acks, -1 after cwnd / (R^2 - R) clean windows; here never below 2) and a
 * floor of cwnd / ACKS_PER_WINDOW, so that a large window is not clocked by
 * an Ack per two packets; at most cwnd / 4, at least 1 (see ratio_floor(),
 * ratio_max()).
 *
 * Receiver: the state of every packet in a window of CCID2_RX_WINDOW
 * sequence numbers, one byte each, and the Ack Vector built from it on
 * demand (newest first, run-length coded by dccp_ackvec_rle).  Keeping the
 * per-packet truth and encoding afresh avoids the classic pitfall of
 * patching a run-length buffer in place (Linux's ackvec kept overlapping
 * records and reported packets twice).  An ack goes every Ack Ratio data
 * packets, at once when a hole opens or closes, and after DELACK_NS at the
 * latest.  Ack of Ack (§11.4) moves the window's low edge up.
 *
 * Every number from the peer is untrusted: an ack for a packet we never
 * sent, or an Ack Vector reaching below ISS, is ignored as a whole (it is
 * validated before anything is applied) and counted; runs only touch the
 * part of the record they overlap, so the work per ack is bounded by the
 * option bytes (64 packets per byte) and by CCID2_RECORD.
 */
#include <stdlib.h>
#include <string.h>

#include "dccp/ccid2.h"
#include "dccp/feature.h"

#define NUMDUPACK 3
#define RTO_INIT_NS 1000000000ull /* RFC 6298 (2.1) */
#define RTO_MIN_NS 200000000ull	  /* as Linux and most TCPs, not RFC 6298's 1 s */
#define RTO_MAX_NS 64000000000ull
#define DELACK_NS 10000000ull  /* longest an unacked data packet waits at the receiver */
#define PTO_EXTRA_NS DELACK_NS /* the probe timer: 2 x SRTT + a delayed Ack (probe_timeout()) */
#define PROBES_MAX 4	       /* probes an episode may send, each PTO twice the last */
#define NONDATA_RESERVE 64     /* record slots budget() keeps for Acks, Syncs... */
#define SEQWIN_MIN 100	       /* RFC 4340 §7.5.2 default Sequence Window */
#define ACKS_PER_WINDOW 32     /* Ack Ratio floor: cwnd / this (ratio_floor()) ... */
#define ACKS_PEER_WINDOW_DIV 4 /* ... or cwnd / (the peer's Sequence Window / this) */
#define MS 1000000ull

/* F_RTO: still open when an RTO fired: out of the pipe, but not lost until
 * an Ack Vector says so (or the connection ends, dccp_ccid2_tx_finish()) */
enum { F_SENT = 1, F_DATA = 2, F_ACKED = 4, F_LOST = 8, F_LATE = 16, F_RTO = 32 };

struct slot {
	uint64_t t; /* when it went out */
	uint8_t f;
};

struct ccid2_tx {
	struct dccp_ccid_env env;
	/* the record holds seqs [una, head]; una == head + 1 when nothing is open */
	uint64_t head, una;
	uint64_t high_ack; /* highest seq acked (valid if have_high) */
	bool have_high;
	uint32_t cwnd, ssthresh, pipe, ca_acc;
	uint64_t recover; /* a loss of a packet up to here is part of the last reduction */
	bool grow;	  /* the window was in use when this ack came (RFC 2861) */
	/* Ack Ratio (RFC 4341 §6.1.2), judged once per window of data */
	uint32_t ratio, ok_windows;
	uint32_t acks_per_window;   /* ratio_floor()'s K */
	uint32_t fixed;		    /* the application's Ack Ratio (0: cwnd / K) */
	uint64_t win_end;	    /* the window ends when a packet after this is acked */
	bool acks_lost;		    /* the peer's Acks were lost in the current window */
	struct ccid2_ratio_neg neg; /* its negotiation with the peer (feature_update()) */
	uint64_t srtt, rttvar, rto, rto_at;
	bool have_rtt;
	/* loss probes (probe_timeout()): when the next may go, how many this
	 * episode sent, and whether one data packet may go beyond the window now */
	uint64_t probe_at;
	uint32_t probes; /* sent in this episode */
	bool probe_due;
	struct ccid2_tx_counters c;
	struct slot rec[CCID2_RECORD];
};

static struct slot *slot_of(struct ccid2_tx *t, uint64_t seq)
{
	return &t->rec[seq & (CCID2_RECORD - 1)];
}

static bool tx_empty(const struct ccid2_tx *t)
{
	return t->una == dccp_seq_add(t->head, 1);
}

static uint64_t tx_span(const struct ccid2_tx *t)
{
	return dccp_seq_sub(dccp_seq_add(t->head, 1), t->una);
}

/* A data packet not yet acked or lost holds the record at una. */
static bool open_data(const struct slot *s)
{
	return (s->f & F_DATA) && !(s->f & (F_ACKED | F_LOST));
}

static void advance_una(struct ccid2_tx *t)
{
	while (!tx_empty(t) && !open_data(slot_of(t, t->una)))
		t->una = dccp_seq_add(t->una, 1);
}

static void rtt_sample(struct ccid2_tx *t, uint64_t r)
{
	if (!t->have_rtt) { /* RFC 6298 (2.2) */
		t->srtt = r;
		t->rttvar = r / 2;
		t->have_rtt = true;
	} else { /* (2.3) */
		uint64_t d = t->srtt > r ? t->srtt - r : r - t->srtt;
		t->rttvar = (3 * t->rttvar + d) / 4;
		t->srtt = (7 * t->srtt + r) / 8;
	}
	uint64_t rto = t->srtt + 4 * t->rttvar;
	t->rto = rto < RTO_MIN_NS ? RTO_MIN_NS : rto > RTO_MAX_NS ? RTO_MAX_NS : rto;
}

static void *tx_init(const struct dccp_ccid_env *env)
{
	struct ccid2_tx *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->env = *env;
	t->head = env->iss & DCCP_SEQ_MASK; /* the Request; the CCID sees what follows */
	t->una = dccp_seq_add(t->head, 1);
	t->recover = t->head;
	uint32_t mps = env->mps ? env->mps : 1;
	/* RFC 3390 initial window, in packets: min(4, max(2, 4380 / MPS)) */
	uint32_t w = 4380 / mps;
	t->cwnd = w < 2 ? 2 : w > 4 ? 4 : w;
	t->ssthresh = CCID2_MAX_CWND;
	t->rto = RTO_INIT_NS;
	t->ratio = 2; /* the feature's default (RFC 4340 §11.3) */
	t->neg.in_force = 2;
	t->acks_per_window = ACKS_PER_WINDOW;
	t->win_end = t->head;
	if (env->ack_ratio)
		dccp_ccid2_tx_set_ratio(t, env->ack_ratio);
	if (env->hs_rtt_ns)
		rtt_sample(t, env->hs_rtt_ns);
	return t;
}

static void tx_free(void *tx)
{
	free(tx);
}

/*
 * Loss probe (after the TLP of RACK-TLP, RFC 8985 §7, for a protocol that
 * sends no retransmissions): when no Ack has brought progress for the PTO,
 * 2 x SRTT plus a delayed Ack, since the last data packet went, one new data
 * packet may go beyond the window.  Its Ack carries the whole Ack Vector:
 * lost Acks cost a PTO instead of an RTO (at least 200 ms, then cwnd 1 and
 * a backed-off timer), and lost data is found by the §5 rule as usual.  A
 * window of a few packets meets this often: at 10 % loss each way one
 * packet's Ack fails to come back 19 % of the time, a window of three 0.7 %
 * of the time, hundreds of times a second on a short path.  Unlike TCP's
 * single TLP, an episode (until progress or the RTO) may send up to
 * PROBES_MAX, each PTO twice the last: no more than the one packet per
 * backed-off timer that RTO recovery sends, but without emptying the window.
 */
static uint64_t probe_timeout(const struct ccid2_tx *t)
{
	return 2 * t->srtt + PTO_EXTRA_NS;
}

/* Congestion (loss or ECN) of seq: halve once per window of data. */
static void congestion(struct ccid2_tx *t, uint64_t seq)
{
	if (!dccp_seq_after(seq, t->recover))
		return;
	t->ssthresh = t->cwnd / 2 < 2 ? 2 : t->cwnd / 2;
	t->cwnd = t->ssthresh;
	t->ca_acc = 0;
	t->recover = t->head;
	t->c.halvings++;
}

static void declare_lost(struct ccid2_tx *t, uint64_t seq)
{
	struct slot *s = slot_of(t, seq);

	if (!(s->f & F_RTO)) /* what an RTO wrote off left the pipe then */
		t->pipe--;
	s->f |= F_LOST;
	t->c.lost++;
	if (t->env.lost)
		t->env.lost(t->env.arg, seq);
}

static void sent(void *tx, uint64_t seq, size_t len, bool data, uint64_t now_ns, uint8_t *ccval)
{
	struct ccid2_tx *t = tx;

	(void)len;
	if (ccval)
		*ccval = 0;
	seq &= DCCP_SEQ_MASK;
	if (!dccp_seq_after(seq, t->head))
		return; /* not new: the connection never reuses a number */
	uint64_t gap = dccp_seq_sub(seq, t->head);
	/* Make room: what falls out of the record while still open is lost. */
	while (!tx_empty(t) && dccp_seq_sub(seq, t->una) >= CCID2_RECORD) {
		if (open_data(slot_of(t, t->una))) {
			declare_lost(t, t->una);
			t->c.overflow++;
		}
		t->una = dccp_seq_add(t->una, 1);
	}
	/* Numbers the connection used without telling us: not data. */
	uint64_t fill = gap - 1 < CCID2_RECORD ? gap - 1 : CCID2_RECORD;
	for (uint64_t i = fill; i > 0; i--)
		*slot_of(t, dccp_seq_sub(seq, i)) = (struct slot){ now_ns, F_SENT };
	bool was_empty = tx_empty(t);
	t->head = seq;
	if (was_empty)
		t->una = seq;
	*slot_of(t, seq) = (struct slot){ now_ns, (uint8_t)(F_SENT | (data ? F_DATA : 0)) };
	if (data) {
		t->pipe++;
		t->c.sent_data++;
		if (!t->rto_at)
			t->rto_at = now_ns + t->rto;
		if (t->probe_due) /* this was a probe: the next waits twice as long */
			t->probes++, t->probe_due = false;
		if (t->have_rtt && t->probes < PROBES_MAX)
			t->probe_at = now_ns + (probe_timeout(t) << t->probes);
	}
	advance_una(t);
}

static uint32_t budget(void *tx, uint64_t now_ns, uint64_t *wake_ns)
{
	struct ccid2_tx *t = tx;
	uint64_t room = CCID2_RECORD - NONDATA_RESERVE;

	(void)now_ns;
	if (wake_ns)
		*wake_ns = 0; /* only an ack (or the RTO) opens the window */
	room = tx_span(t) < room ? room - tx_span(t) : 0;
	uint32_t w = t->cwnd > t->pipe ? t->cwnd - t->pipe : 0;
	if (!w && t->probe_due)
		w = 1;
	return w < room ? w : (uint32_t)room;
}

static bool in_record(const struct ccid2_tx *t, uint64_t seq)
{
	return !tx_empty(t) && dccp_seq_between(seq, t->una, t->head);
}

/* The peer says it received seq (ecn: with a CE mark).  Returns true if new. */
static bool mark_received(struct ccid2_tx *t, uint64_t seq, bool ecn)
{
	struct slot *s = slot_of(t, seq);

	if (s->f & F_ACKED)
		return false;
	if (s->f & F_LOST) { /* final: reported once, never after */
		if (!(s->f & F_LATE))
			t->c.late_ack++;
		s->f |= F_LATE;
		return false;
	}
	s->f |= F_ACKED;
	if (!t->have_high || dccp_seq_after(seq, t->high_ack))
		t->high_ack = seq;
	t->have_high = true;
	if (ecn) /* RFC 4341 §5: an ECN mark is a loss for congestion control */
		t->c.ecn++, congestion(t, seq);
	if (!(s->f & F_DATA))
		return true;
	t->c.acked++;
	if (t->env.acked)
		t->env.acked(t->env.arg, seq);
	if (s->f & F_RTO) { /* out of the pipe since the RTO; as Linux, no growth */
		t->c.acked_after_rto++;
		return true;
	}
	t->pipe--;
	if (!t->grow)
		return true;
	if (t->cwnd < t->ssthresh) {
		t->cwnd++;
	} else if (++t->ca_acc >= t->cwnd) {
		t->cwnd++;
		t->ca_acc = 0;
	}
	if (t->cwnd > CCID2_MAX_CWND)
		t->cwnd = CCID2_MAX_CWND;
	return true;
}

/* §5: lost once NUMDUPACK packets sent after it were acked. */
static void detect_losses(struct ccid2_tx *t)
{
	if (!t->have_high || !in_record(t, t->high_ack))
		return;
	uint64_t s = t->high_ack;
	unsigned n = 0;
	for (;;) {
		if ((slot_of(t, s)->f & F_ACKED) && ++n == NUMDUPACK)
			break;
		if (s == t->una)
			return;
		s = dccp_seq_sub(s, 1);
	}
	for (uint64_t q = t->una; q != s; q = dccp_seq_add(q, 1))
		if (open_data(slot_of(t, q))) {
			declare_lost(t, q);
			congestion(t, q);
		}
}

/*
 * The highest Ack Ratio we ask for.  RFC 4341 §6.1.2 allows up to
 * ceil(cwnd / 2), two Acks a window; the application's fixed ratio keeps
 * that bound.  Our own choice keeps four Acks a window (cwnd / 4, at least
 * 1): a receiver without a delayed-ack timer (Linux 6.1 acks every R data
 * packets and at no other time) leaves a window unacknowledged when a loss
 * keeps its count below R after the last packet the window allowed, and
 * the sender waits for its RTO; with two Acks a window, a lost data packet
 * or a lost Ack (10 % each way) did that several times a second, and every
 * RTO took the window back to one packet.  An Ack per packet below cwnd 8
 * costs the peer a few hundred small Acks a second at most.
 */
static uint32_t ratio_max(const struct ccid2_tx *t)
{
	if (t->fixed)
		return (t->cwnd + 1) / 2; /* ceil(cwnd / 2) */
	return t->cwnd / 4 ? t->cwnd / 4 : 1;
}

/*
 * The lowest Ack Ratio we ask for: cwnd / K, at least 2, where K is
 * ACKS_PER_WINDOW = 32, or the peer's Sequence Window / 4 if smaller.
 *
 * RFC 4341 §6.1.2 leaves the value to the HC-Sender within bounds: at most
 * ceil(cwnd / 2) (at least two Acks a window), doubled after a window whose
 * Acks were lost, decreased by 1 after cwnd / (R^2 - R) clean windows,
 * renegotiated at most once per RTT; the sender "MAY enforce a minimum Ack
 * Ratio of two".  The decrease rule says how fast a ratio raised by Ack
 * loss comes back, not that a clean path needs an Ack per two packets.  A
 * window of 1024 packets clocked by 512 Acks made our sender read an Ack
 * per two packets and send runs of a few packets (bench/results/ring/dccp
 * perf.md); K = 32 Acks a window still gives:
 * - a window that opens in steps of cwnd / 32 packets: a burst of about
 *   1/32 of the window per Ack, what a TCP receiver behind GRO does too
 *   (one ACK per coalesced super-packet of up to 64 KB);
 * - loss detection at most cwnd / 32 packets (1/32 of an RTT) later than
 *   with an Ack per packet: a loss is declared once 3 later packets are
 *   acked (§5), and our receiver acks at once when a hole opens;
 * - 32 RTT samples a window (RFC 6298 asks for one per RTT), each from the
 *   packet that drew the Ack (not delayed by the ratio, unless the
 *   receiver's delayed-ack timer drew it);
 * - few Acks of the peer per RTT.  The peer drops a packet of ours whose
 *   Acknowledgement Number is below its GSS + 1 - W (RFC 4340 §7.5.1), W
 *   its Sequence Window for its own numbers, and it sends about cwnd / R
 *   Acks while one of ours travels: at R = 2 and cwnd 1024, 512, far more
 *   than Linux's default W of 100 (or its smallest, 32), so the Changes
 *   that raise R would never get through.  Hence K is also at most W / 4
 *   (dccp_ccid2_tx_peer_window()): twice that while the ratio lags a
 *   window that doubles in slow start, and twice again of margin.
 * K from 8 to 128 cost the same within this machine's noise in the P1
 * bench (reading Acks no longer matters at any of them); below 32 only
 * loss detection gets later; above it a peer's default window of 100 would
 * be too small in slow start.
 *
 * When the data stops, up to R - 1 packets stay unacked: our receiver acks
 * them after its delayed-ack timer (DELACK_NS); a receiver without one
 * (Linux 6.1) leaves them to our RTO, as it already does for an odd last
 * packet at R = 2.  ceil(cwnd / 2) keeps R at 1 for windows of 1 or 2.
 */
static uint32_t ratio_floor(const struct ccid2_tx *t)
{
	if (t->fixed) /* the application chose (gc_dccp_opts.ack_ratio) */
		return t->fixed;
	uint32_t f = t->cwnd / t->acks_per_window;
	return f < 2 ? 2 : f;
}

/* The ratio we want in force: the RFC's rule, the floor, ceil(cwnd / 2). */
static uint32_t ratio_now(const struct ccid2_tx *t)
{
	uint32_t r = t->ratio > ratio_floor(t) ? t->ratio : ratio_floor(t);
	return r > ratio_max(t) ? ratio_max(t) : r;
}

/*
 * RFC 4341 §6.1.2 at the end of each window of data: Ack Ratio doubles
 * after a window in which the peer's Acks were lost, and falls by 1 after
 * cwnd / (R^2 - R) windows without (not below 2, the feature's default:
 * below it only doubles the receiver's Acks); never above ceil(cwnd / 2).
 * t->ratio is this rule's value; ratio_now() adds the floor.
 */
static void ack_ratio_window(struct ccid2_tx *t)
{
	uint32_t r = t->ratio, lo = t->fixed ? t->fixed : 2;

	if (t->acks_lost) {
		r = 2 * ratio_now(t);
		t->ok_windows = 0;
	} else if (r > lo && ++t->ok_windows >= t->cwnd / (r * r - r)) {
		r--;
		t->ok_windows = 0;
	}
	if (r > ratio_max(t))
		r = ratio_max(t);
	t->ratio = r < lo ? lo : r;
	t->acks_lost = false;
	t->win_end = t->head;
}

static bool has_ackvec(const struct dccp_opts *o)
{
	for (unsigned k = 0; k < o->n; k++)
		if (o->opt[k].type == DCCP_OPT_ACKVEC0 || o->opt[k].type == DCCP_OPT_ACKVEC1)
			return true;
	return false;
}

static void recv_ack(void *tx, uint64_t ackno, const struct dccp_opts *o, uint64_t now_ns)
{
	struct ccid2_tx *t = tx;
	struct dccp_vec_iter it;
	struct dccp_run r;

	ackno &= DCCP_SEQ_MASK;
	if (dccp_seq_after(ackno, t->head) || dccp_seq_before(ackno, t->env.iss)) {
		t->c.bad_ackno++;
		return;
	}
	uint32_t pipe0 = t->pipe;
	uint64_t acked0 = t->c.acked;
	bool sample = false;
	/* RFC 4341 §5.1 / RFC 2861: an application that keeps less than half
	 * the window in flight has not tested it; growing it anyway would let
	 * a data-limited sender (one packet every 30 ms, say) build a window
	 * it could later dump on the path at once. */
	t->grow = 2 * (uint64_t)pipe0 >= t->cwnd;
	if (!has_ackvec(o)) { /* the Acknowledgement Number itself was received */
		sample = in_record(t, ackno) && mark_received(t, ackno, false);
	} else {
		dccp_ackvec_iter(&it, o, ackno, t->env.iss);
		while (dccp_vec_next(&it, &r)) {
			/* the part of [lo, hi] still in the record, at most 64 packets */
			if (tx_empty(t) || dccp_seq_before(r.hi, t->una))
				continue;
			uint64_t q = dccp_seq_before(r.lo, t->una) ? t->una : r.lo;
			bool rcvd = r.state == DCCP_ACK_RECEIVED || r.state == DCCP_ACK_ECN_MARKED;
			for (;; q = dccp_seq_add(q, 1)) {
				if (rcvd) {
					bool fresh = mark_received(t, q, r.state == DCCP_ACK_ECN_MARKED);
					if (fresh && q == ackno)
						sample = true;
				} else if (slot_of(t, q)->f & F_ACKED) {
					t->c.contradiction++;
				}
				if (q == r.hi)
					break;
			}
		}
		if (it.clipped)
			t->c.clipped_vector++;
	}
	if (sample) /* the packet acked first-hand: its age is one RTT (+ ack delay) */
		rtt_sample(t, now_ns - slot_of(t, ackno)->t);
	detect_losses(t);
	advance_una(t);
	if (t->have_high && dccp_seq_after(t->high_ack, t->win_end))
		ack_ratio_window(t);
	if (t->pipe == 0)
		t->rto_at = 0;
	else if (t->pipe < pipe0) /* progress restarts the timer (RFC 6298 (5.3)) */
		t->rto_at = now_ns + t->rto;
	if (t->c.acked != acked0 || t->pipe < pipe0) { /* progress: a new episode */
		t->probes = 0;
		t->probe_due = false;
		t->probe_at = t->pipe && t->have_rtt ? now_ns + probe_timeout(t) : 0;
	}
}

static uint64_t tx_next_timer(void *tx)
{
	struct ccid2_tx *t = tx;

	if (t->probe_at && (!t->rto_at || t->probe_at < t->rto_at))
		return t->probe_at;
	return t->rto_at;
}

static void tx_timer(void *tx, uint64_t now_ns)
{
	struct ccid2_tx *t = tx;

	if (t->probe_at && now_ns >= t->probe_at) {
		t->probe_at = 0;
		if (t->pipe && !t->probe_due) {
			t->probe_due = true; /* budget() lets one data packet go */
			t->c.probes++;
		}
	}
	if (!t->rto_at || now_ns < t->rto_at)
		return;
	t->rto_at = 0;
	t->probe_due = false; /* the RTO starts a new episode */
	t->probes = 0;
	t->probe_at = 0;
	if (t->pipe == 0)
		return;
	/*
	 * No feedback for an RTO: restart at one packet (RFC 4341 §5, RFC 6298
	 * (5.5)-(5.7)).  What is out leaves the pipe, as Linux's
	 * ccid2_hc_tx_rto_expire() empties it, but it is not lost: it may
	 * have arrived, and a receiver that acks every R data packets (Linux
	 * 6.1: no delayed-ack timer) tells so only with its next Ack.  A later
	 * Ack Vector settles each packet, received or (NUMDUPACK) lost; what
	 * none settles is lost when the connection ends (dccp_ccid2_tx_finish()).
	 */
	t->c.rto++;
	for (uint64_t q = t->una; in_record(t, q); q = dccp_seq_add(q, 1)) {
		struct slot *s = slot_of(t, q);
		if (open_data(s))
			s->f |= F_RTO;
		if (q == t->head)
			break;
	}
	t->pipe = 0;
	t->ssthresh = t->cwnd / 2 < 2 ? 2 : t->cwnd / 2;
	t->cwnd = 1;
	t->ca_acc = 0;
	t->recover = t->head;
	t->rto = 2 * t->rto > RTO_MAX_NS ? RTO_MAX_NS : 2 * t->rto; /* (5.5) back off */
}

static uint64_t seq_window(void *tx)
{
	uint64_t w = 5 * (uint64_t)((struct ccid2_tx *)tx)->cwnd;
	return w < SEQWIN_MIN ? SEQWIN_MIN : w;
}

static void tx_stats(void *tx, struct dccp_ccid_tx_stats *st)
{
	struct ccid2_tx *t = tx;

	memset(st, 0, sizeof(*st));
	st->cwnd = t->cwnd;
	st->pipe = t->pipe;
	st->rtt_ns = t->have_rtt ? t->srtt : 0;
	st->p = t->c.sent_data ? (double)t->c.lost / (double)t->c.sent_data : 0;
	st->lost = t->c.lost;
}

uint32_t dccp_ccid2_tx_ack_ratio(void *tx)
{
	return ratio_now(tx); /* follows cwnd at once, both ways */
}

void dccp_ccid2_tx_peer_window(void *tx, uint64_t w)
{
	struct ccid2_tx *t = tx;
	uint64_t k = w / ACKS_PEER_WINDOW_DIV;
	k = k < 2 ? 2 : k; /* RFC 4340 §7.5.2: W >= 32, so 8 at least in practice */
	t->acks_per_window = k < ACKS_PER_WINDOW ? (uint32_t)k : ACKS_PER_WINDOW;
}

void dccp_ccid2_tx_set_ratio(void *tx, uint32_t r)
{
	struct ccid2_tx *t = tx;

	t->fixed = r;
	t->ratio = r ? r : 2;
}

void dccp_ccid2_tx_acks_lost(void *tx, uint64_t n)
{
	if (n)
		((struct ccid2_tx *)tx)->acks_lost = true;
}

void dccp_ccid2_tx_finish(void *tx)
{
	struct ccid2_tx *t = tx;

	for (uint64_t q = t->una; in_record(t, q); q = dccp_seq_add(q, 1)) {
		if (open_data(slot_of(t, q))) {
			declare_lost(t, q);
			t->c.unknown_at_end++;
		}
		if (q == t->head)
			break;
	}
	t->rto_at = t->probe_at = 0;
	t->probe_due = false;
	advance_una(t);
}

/*
 * The Ack Ratio negotiation (RFC 4341 §6.1.2), through the feature hooks of
 * ccid.h: ratio_now() says which value we want; the connection sends our
 * Change L(Ack Ratio) and the peer's Confirm R puts it in force.  §6.1.2:
 * "the sender SHOULD NOT attempt to renegotiate the Ack Ratio more than
 * once per round-trip time", so a higher value waits an RTT after the last
 * Change.  A lower one goes at once when it is below both the ratio in
 * force and the one pending (after a loss or an RTO the window may no
 * longer draw an Ack: Linux 6.1's receiver acks only every R data
 * packets).  An unconfirmed Change goes again after 2 RTTs + 20 ms (the
 * Confirm rides on the peer's next Ack, which a large ratio delays), and
 * on the first packet after each RTO or loss probe (rto: the sender's
 * timer fired, no Ack came; after an RTO that packet alone is out, and the
 * peer acks it only once it has the Change), with the value wanted then.
 *
 * Where the Change goes: the peer drops a packet whose Acknowledgement
 * Number is below its GSS + 1 - W (RFC 4340 §7.5.1), W its Sequence Window
 * for its own numbers (Linux: 100 by default, sysctl down to 32), and while
 * our packet travels it sends about pipe / R Acks.  While twice that (+ 8
 * for Acks on holes and timers) fits in W, the Change rides on our next
 * data packet (a DataAck).  Otherwise it goes at once on an Ack of its own
 * (DCCP_CCID_CHANGE_NOW), mostly right after one of the peer's Acks
 * arrived, when our GSR is freshest; if the peer drops it anyway (and
 * answers with a Sync, which re-aligns us), no data is lost with it.  Not
 * always an Ack: a data sender's Ack lost next to a lost data packet makes
 * the receiver count two data packets lost (the NDP Count rode on the lost
 * one, §7.7).
 */
static enum dccp_ccid_change feature_update(void *tx, uint64_t peer_window, bool rto, uint64_t now_ns)
{
	struct ccid2_tx *t = tx;
	struct ccid2_ratio_neg *n = &t->neg;
	struct dccp_ccid_tx_stats st;
	tx_stats(tx, &st);
	uint64_t rtt = st.rtt_ns ? st.rtt_ns : 100 * MS;
	dccp_ccid2_tx_peer_window(tx, peer_window);
	uint32_t want = dccp_ccid2_tx_ack_ratio(tx);
	bool lower = want < n->in_force && (!n->pending || want < n->pending);
	if (n->pending) {
		/* unconfirmed: again, with what we want now (even the value in
		 * force: the peer may have taken the last Change, Confirm lost) */
		if (!rto && !lower && now_ns < n->at + 2 * rtt + 20 * MS)
			return DCCP_CCID_CHANGE_NONE;
	} else if (want == n->in_force || (!lower && now_ns < n->at + rtt)) {
		return DCCP_CCID_CHANGE_NONE;
	}
	n->pending = want;
	n->at = now_ns;
	n->due = true; /* feature_take() hands it to the next DataAck or Ack */
	uint64_t r = n->in_force ? n->in_force : 1;
	return 2 * (st.pipe / r + 8) > peer_window ? DCCP_CCID_CHANGE_NOW : DCCP_CCID_CHANGE_DUE;
}

static bool feature_due(void *tx)
{
	return ((struct ccid2_tx *)tx)->neg.due;
}

/* once; again only if unconfirmed (feature_update()) */
static bool feature_take(void *tx, uint8_t *feat, uint64_t *value)
{
	struct ccid2_ratio_neg *n = &((struct ccid2_tx *)tx)->neg;

	if (!n->due)
		return false;
	*feat = DCCP_F_ACK_RATIO;
	*value = n->pending;
	n->due = false;
	return true;
}

static void feature_confirmed(void *tx, uint8_t feat, uint64_t value)
{
	struct ccid2_ratio_neg *n = &((struct ccid2_tx *)tx)->neg;

	if (feat != DCCP_F_ACK_RATIO || !value || value != n->pending)
		return; /* not the Change we are waiting for */
	n->in_force = (uint32_t)value;
	n->pending = 0;
	n->due = false;
}

struct ccid2_ratio_neg *dccp_ccid2_tx_ratio_neg(void *tx)
{
	return &((struct ccid2_tx *)tx)->neg;
}

void dccp_ccid2_tx_counters(void *tx, struct ccid2_tx_counters *c)
{
	*c = ((struct ccid2_tx *)tx)->c;
}

const struct dccp_ccid_tx_ops dccp_ccid2_tx_ops = {
	.id = DCCP_CCID2,
	.init = tx_init,
	.free = tx_free,
	.budget = budget,
	.sent = sent,
	.recv_ack = recv_ack,
	.next_timer = tx_next_timer,
	.timer = tx_timer,
	.seq_window = seq_window,
	.stats = tx_stats,
	.feature_update = feature_update,
	.feature_due = feature_due,
	.feature_take = feature_take,
	.feature_confirmed = feature_confirmed,
	.acks_lost = dccp_ccid2_tx_acks_lost,
	.finish = dccp_ccid2_tx_finish,
};

/* ---- receiver ------------------------------------------------------------ */

struct ccid2_rx {
	struct dccp_ccid_env env;
	uint64_t lo, gsr; /* the vector describes [lo, gsr] */
	uint32_t ratio, since_ack;
	uint64_t first_unacked; /* arrival of the oldest data packet not yet acked */
	bool due;
	struct ccid2_rx_counters c;
	uint8_t st[CCID2_RX_WINDOW]; /* enum dccp_ackstate by seq */
};

static uint8_t *st_of(struct ccid2_rx *x, uint64_t seq)
{
	return &x->st[seq & (CCID2_RX_WINDOW - 1)];
}

static void *rx_init(const struct dccp_ccid_env *env)
{
	struct ccid2_rx *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->env = *env;
	x->lo = x->gsr = env->isr & DCCP_SEQ_MASK; /* the peer's Request */
	*st_of(x, x->gsr) = DCCP_ACK_RECEIVED;
	x->ratio = 2; /* the Ack Ratio feature's default (RFC 4340 §11.3) */
	return x;
}

static void rx_free(void *rx)
{
	free(rx);
}

static void want_ack(struct ccid2_rx *x)
{
	if (!x->due)
		x->c.acks_due++;
	x->due = true;
}

static bool rx_recv(void *rx, uint8_t type, uint64_t seq, uint8_t ccval, const struct dccp_opts *o,
		    size_t len, uint64_t now_ns)
{
	struct ccid2_rx *x = rx;
	bool data = type == DCCP_DATA || type == DCCP_DATAACK;

	(void)ccval, (void)o, (void)len;
	seq &= DCCP_SEQ_MASK;
	if (dccp_seq_after(seq, x->gsr)) {
		uint64_t gap = dccp_seq_sub(seq, x->gsr);
		if (gap >= CCID2_RX_WINDOW) {
			x->c.jumps++;
			x->lo = seq;
		} else {
			for (uint64_t q = dccp_seq_add(x->gsr, 1); q != seq; q = dccp_seq_add(q, 1))
				*st_of(x, q) = DCCP_ACK_NOT_RECEIVED;
			if (dccp_seq_sub(seq, x->lo) >= CCID2_RX_WINDOW)
				x->lo = dccp_seq_sub(seq, CCID2_RX_WINDOW - 1);
		}
		*st_of(x, seq) = DCCP_ACK_RECEIVED;
		x->gsr = seq;
		if (gap > 1 && data) /* a hole: tell the sender soon (its dupack count) */
			want_ack(x);
	} else if (dccp_seq_between(seq, x->lo, x->gsr)) {
		uint8_t *s = st_of(x, seq);
		if (*s == DCCP_ACK_RECEIVED) {
			x->c.dup++;
			return x->due;
		}
		*s = DCCP_ACK_RECEIVED;
		if (data) /* a hole closed: late, but the sender may still count it */
			want_ack(x);
	} else {
		x->c.old++;
		return x->due;
	}
	if (data) {
		if (x->since_ack++ == 0)
			x->first_unacked = now_ns;
		if (x->since_ack >= x->ratio)
			want_ack(x);
	}
	return x->due;
}

/*
 * How many packets from q down (q first) are in state s, at most max: a run
 * of the Ack Vector.  The window is mostly one long run (every packet
 * received), and every Ack walks all of it: eight states are compared at a
 * time where the array does not wrap (perf: the byte-by-byte walk was a
 * quarter of a receiving engine's time at 100k Acks/s).
 */
static uint64_t run_down(struct ccid2_rx *x, uint64_t q, uint8_t s, uint64_t max)
{
	const uint64_t pat = 0x0101010101010101ull * s;
	uint64_t n = 0;

	while (n < max) {
		size_t i = (size_t)(dccp_seq_sub(q, n) & (CCID2_RX_WINDOW - 1));
		if (i >= 7 && max - n >= 8) { /* st[i-7..i], none past max */
			uint64_t w;
			memcpy(&w, &x->st[i - 7], sizeof(w));
			if (w == pat) {
				n += 8;
				continue;
			}
		}
		if (x->st[i] != s)
			break;
		n++;
	}
	return n;
}

static void put_feedback(void *rx, struct dccp_obuf *b, uint64_t now_ns, uint64_t *ackno)
{
	struct ccid2_rx *x = rx;
	uint8_t vec[DCCP_MAX_HDR];
	size_t n = 0;

	(void)now_ns;
	*ackno = x->gsr;
	x->since_ack = 0;
	x->due = false;
	if (b->overflow || b->cap <= b->len)
		return;
	/* Vector bytes that fit: options of up to 253 bytes, 2 bytes of header each. */
	size_t avail = b->cap - b->len;
	size_t cap = avail / 255 * 253 + (avail % 255 > 2 ? avail % 255 - 2 : 0);
	if (cap > sizeof(vec))
		cap = sizeof(vec);
	/* Newest first; a truncated vector is still true, just shorter. */
	uint64_t q = x->gsr, left = dccp_seq_sub(x->gsr, x->lo) + 1;
	while (left) {
		uint8_t state = *st_of(x, q);
		uint64_t count = run_down(x, q, state, left);
		if (!dccp_ackvec_rle(vec, &n, cap, state, count))
			break;
		left -= count;
		q = dccp_seq_sub(q, count);
	}
	dccp_opt_put_vector(b, DCCP_OPT_ACKVEC0, vec, n);
}

/* seq: the Acknowledgement Number that our acknowledged Ack carried. */
static void ack_of_ack(void *rx, uint64_t seq)
{
	struct ccid2_rx *x = rx;

	seq &= DCCP_SEQ_MASK;
	if (dccp_seq_between(seq, x->lo, x->gsr))
		x->lo = seq;
}

static uint64_t rx_next_timer(void *rx)
{
	struct ccid2_rx *x = rx;

	return x->since_ack && !x->due ? x->first_unacked + DELACK_NS : 0;
}

static void rx_timer(void *rx, uint64_t now_ns)
{
	struct ccid2_rx *x = rx;

	if (x->since_ack && now_ns >= x->first_unacked + DELACK_NS)
		want_ack(x);
}

static bool feedback_due(void *rx)
{
	return ((struct ccid2_rx *)rx)->due;
}

void dccp_ccid2_rx_set_ack_ratio(void *rx, uint32_t r)
{
	if (r >= 1 && r <= 0xffff) /* a 2-byte feature; 0 is invalid (RFC 4340 §11.3) */
		((struct ccid2_rx *)rx)->ratio = r;
}

/* The peer's Change L(Ack Ratio): what our receiver obeys (ccid.h). */
static void rx_feature_changed(void *rx, uint8_t feat, uint64_t value)
{
	if (feat == DCCP_F_ACK_RATIO)
		dccp_ccid2_rx_set_ack_ratio(rx, (uint32_t)value);
}

void dccp_ccid2_rx_counters(void *rx, struct ccid2_rx_counters *c)
{
	*c = ((struct ccid2_rx *)rx)->c;
}

const struct dccp_ccid_rx_ops dccp_ccid2_rx_ops = {
	.id = DCCP_CCID2,
	.init = rx_init,
	.free = rx_free,
	.recv = rx_recv,
	.put_feedback = put_feedback,
	.ack_of_ack = ack_of_ack,
	.next_timer = rx_next_timer,
	.timer = rx_timer,
	.feedback_due = feedback_due,
	.feature_changed = rx_feature_changed,
};
