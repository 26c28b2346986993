/* SPDX-License-Identifier: MIT */
/*
 * CCID 3, TFRC congestion control (RFC 4342, RFC 5348), as the two
 * half-connection modules of ccid.h; the arithmetic is tfrc.c's.
 *
 * Sender (RFC 5348 §4): the allowed rate X, 1 packet per second until the
 * first feedback, then slow start from tfrc_initial_rate() doubling at most
 * once per RTT, limited by 2 x X_recv; after the first loss event X is the
 * throughput equation's, limited by X_recv.  RTT samples are the age of the
 * acknowledged packet minus the receiver's Elapsed Time, smoothed with
 * q = 0.9 (§4.3).  Packets leave one at a time, t_ipi = s / X apart, and
 * t_ipi is never 0 (tfrc_send_interval_ns): at 100 us RTT X is huge, and a
 * microsecond interval would round to 0 (Linux 6.1's pitfall).  The
 * nofeedback timer, max(4R, 2s/X) but at least 100 ms, halves the rate
 * (§4.4).  CCVal is the window counter of RFC 4342 §8.1: +1 per quarter
 * RTT, at most +5 at once, mod 16; before the first RTT sample on the
 * handshake's RTT or the 0.2 s fallback (wc_rtt_ns()).  s is the mean payload of the data
 * packets sent over the last loss intervals (tfrc.h), which RFC 4342 §5.3
 * allows; the MPS before the first packet.
 *
 * Receiver (RFC 5348 §5-6, RFC 4342 §6, §8): a packet is lost when 3
 * packets with higher numbers have arrived (reordering tolerance) unless
 * an NDP Count says it was not data; losses within one RTT (by CCVal: at
 * most 4 quarter-RTT windows apart, RFC 4342 §10.2) form one loss event.
 * Loss intervals count data packets from one loss event's first loss to
 * the next (the open one up to the newest packet); the first is
 * synthesised from X_recv (§6.3.1).  The receiver's RTT comes from CCVal
 * (the time from window c - 4 to window c).  Feedback goes once per RTT
 * when data arrived, at once on the first data packet and on a new loss
 * event, and carries Elapsed Time (and Timestamp Echo when the sender sent
 * a Timestamp), Loss Intervals (193), Loss Event Rate (192, which Linux's
 * CCID 3 sender reads) and Receive Rate (194) measured over at least one
 * RTT.
 *
 * Loss Intervals fields: each interval starts with its loss event, so Loss
 * Length is the span of that event (first to last lost packet) and Lossless
 * Length the rest of the interval; Data Length, the number the sender's p
 * comes from, counts the data packets of the whole interval.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dccp/ccid3.h"
#include "dccp/tfrc.h"

#define RTT_Q 0.9 /* RFC 5348 §4.3: R = q*R + (1-q)*R_sample */
#define NS 1e9

/* ---- sender -------------------------------------------------------------- */

struct txrec {
	uint64_t seq, t;
	bool data, acked, used;
};

struct xrecv {
	double v;
	uint64_t t;
};

struct ccid3_tx {
	struct dccp_ccid_env env;
	struct tfrc_s_mean sm;
	double x, x_calc, x_recv, p, r; /* B/s, B/s, B/s, -, s (0: no sample) */
	struct xrecv set[3];		/* X_recv_set (§4.3), 0-valued entries unused */
	uint64_t head, last_ackno, t_ld, t_nom, t_last, nofb_at, t_wc;
	uint8_t wc;
	bool wc_started, sent_any, any_feedback;
	unsigned last_k;  /* closed loss intervals in the previous feedback */
	uint32_t last_i0; /* and its open interval */
	struct ccid3_tx_counters c;
	struct txrec rec[CCID3_TX_RECORD];
};

static double s_of(const struct ccid3_tx *t)
{
	return tfrc_s_get(&t->sm, t->env.mps ? t->env.mps : 1);
}

static double x_min(const struct ccid3_tx *t)
{
	return s_of(t) / (TFRC_T_MBI_NS / NS);
}

static void *tx_init(const struct dccp_ccid_env *env)
{
	struct ccid3_tx *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->env = *env;
	t->head = t->last_ackno = env->iss & DCCP_SEQ_MASK;
	t->x = s_of(t); /* §4.2: one packet per second until feedback */
	return t;
}

static void tx_free(void *tx)
{
	free(tx);
}

/* The next packet may go t_ipi after the last one (X may have changed since). */
static void set_tnom(struct ccid3_tx *t)
{
	if (t->sent_any)
		t->t_nom = t->t_last + tfrc_send_interval_ns(s_of(t), t->x);
}

static void arm_nofeedback(struct ccid3_tx *t, uint64_t now)
{
	t->nofb_at = now + tfrc_nofeedback_ns(t->r, s_of(t), t->x, t->r > 0);
}

static uint32_t budget(void *tx, uint64_t now_ns, uint64_t *wake_ns)
{
	struct ccid3_tx *t = tx;

	if (wake_ns)
		*wake_ns = 0;
	if (!t->sent_any || now_ns >= t->t_nom)
		return 1;
	if (wake_ns)
		*wake_ns = t->t_nom;
	return 0;
}

/*
 * The RTT the window counter runs on: the smoothed RTT once there is one;
 * before the first feedback the handshake's (the client's), else DCCP's
 * fallback RTT of 0.2 s (RFC 4340 §3.4), as Linux's CCID 3 does.  A
 * counter that stood still until feedback would deadlock: a receiver (Linux
 * 6.1's too) sends its periodic feedback only when CCVal has moved more
 * than 3 windows (RFC 4342 §10.3), so one lost initial feedback left the
 * sender halving X on the nofeedback timer, never hearing back.
 */
#define FALLBACK_RTT_NS 200000000ull

static uint64_t wc_rtt_ns(const struct ccid3_tx *t)
{
	if (t->r > 0)
		return (uint64_t)(t->r * NS);
	return t->env.hs_rtt_ns ? t->env.hs_rtt_ns : FALLBACK_RTT_NS;
}

/* RFC 4342 §8.1: the window counter moves one per quarter RTT, at most 5 at once. */
static uint8_t window_counter(struct ccid3_tx *t, uint64_t now)
{
	if (!t->wc_started) { /* the first packet opens window 0 */
		t->wc_started = true;
		t->t_wc = now;
		return t->wc;
	}
	if (now <= t->t_wc)
		return t->wc;
	uint64_t quarter = wc_rtt_ns(t) / 4;
	if (quarter == 0)
		quarter = 1;
	uint64_t n = (now - t->t_wc) / quarter;
	if (n >= 5) {
		t->wc = (uint8_t)((t->wc + 5) & 15);
		t->t_wc = now;
	} else if (n > 0) {
		t->wc = (uint8_t)((t->wc + n) & 15);
		t->t_wc += n * quarter;
	}
	return t->wc;
}

static void sent(void *tx, uint64_t seq, size_t len, bool data, uint64_t now_ns, uint8_t *ccval)
{
	struct ccid3_tx *t = tx;

	seq &= DCCP_SEQ_MASK;
	uint8_t cc = window_counter(t, now_ns);
	if (ccval)
		*ccval = cc;
	if (dccp_seq_after(seq, t->head))
		t->head = seq;
	t->rec[seq & (CCID3_TX_RECORD - 1)] = (struct txrec){ seq, now_ns, data, false, true };
	if (!data)
		return;
	tfrc_s_add(&t->sm, len);
	t->t_last = now_ns;
	t->sent_any = true;
	set_tnom(t);
	if (!t->nofb_at)
		arm_nofeedback(t, now_ns);
}

static double set_max(const struct ccid3_tx *t)
{
	double m = 0;
	for (unsigned i = 0; i < 3; i++)
		if (t->set[i].v > m)
			m = t->set[i].v;
	return m;
}

/* §4.3 step 4: X from p (or slow start) within recv_limit. */
static void update_x(struct ccid3_tx *t, double recv_limit, uint64_t now)
{
	double s = s_of(t);

	if (t->p > 0) {
		t->x_calc = tfrc_x_bps(s, t->r, t->p);
		t->x = fmax(fmin(t->x_calc, recv_limit), x_min(t));
	} else if ((double)(now - t->t_ld) >= t->r * NS) {
		t->x = fmax(fmin(2 * t->x, recv_limit), tfrc_initial_rate(s, t->r));
		t->t_ld = now;
	}
}

static void recv_ack(void *tx, uint64_t ackno, const struct dccp_opts *o, uint64_t now_ns)
{
	struct ccid3_tx *t = tx;

	ackno &= DCCP_SEQ_MASK;
	if (dccp_seq_after(ackno, t->head) || dccp_seq_before(ackno, t->env.iss)) {
		t->c.bad_ackno++;
		return;
	}
	if (dccp_seq_after(ackno, t->last_ackno))
		t->last_ackno = ackno;
	/* RTT: the acked packet's age less the time the receiver held it */
	struct txrec *e = &t->rec[ackno & (CCID3_TX_RECORD - 1)];
	if (e->used && e->seq == ackno) {
		uint64_t age = now_ns - e->t;
		uint64_t held = (uint64_t)(o->has_elapsed	    ? o->elapsed
						   : o->has_ts_echo ? o->ts_echo_elapsed
								    : 0) *
			10000;
		if (held < age) {
			double sample = (double)(age - held) / NS;
			t->r = t->r > 0 ? RTT_Q * t->r + (1 - RTT_Q) * sample : sample;
		} else if (held > age) {
			t->c.bad_elapsed++;
		}
		if (e->data && !e->acked && t->env.acked)
			t->env.acked(t->env.arg, ackno);
		e->acked = true;
	}
	/* p: from the Loss Intervals if any, else from Loss Event Rate */
	struct dccp_loss_interval li[TFRC_NINTERVAL + 1];
	uint8_t skip;
	unsigned n = dccp_loss_intervals(o, li, TFRC_NINTERVAL + 1, &skip);
	/* A DataAck of the peer's own data without CCID 3 options is not
	 * feedback (RFC 4342 §6): its RTT sample counts, nothing else. */
	if (n == 0 && !o->has_loss_rate && !o->has_recv_rate) {
		t->c.not_feedback++;
		return;
	}
	t->c.feedback++;
	double p = t->p;
	bool new_event = false;
	if (n > 0) {
		uint32_t I[TFRC_NINTERVAL + 1];
		for (unsigned i = 0; i < n; i++)
			I[i] = li[i].data;
		p = tfrc_p(I, n - 1);
		/* a new event: more intervals, or the open one started again */
		new_event = n - 1 > t->last_k || (n > 1 && I[0] < t->last_i0);
		t->last_k = n - 1;
		t->last_i0 = I[0];
	} else if (o->has_loss_rate) {
		p = o->loss_rate == 0 || o->loss_rate == UINT32_MAX ? 0 : 1.0 / o->loss_rate;
		new_event = p > t->p;
	}
	if (!(p <= 1)) /* I_mean < 1 from a hostile peer: still a probability */
		p = 1;
	if (p > 0 && t->p == 0)
		new_event = true;
	t->p = p;
	if (new_event) {
		t->c.loss_events++;
		tfrc_s_loss_interval(&t->sm);
	}
	if (o->has_recv_rate)
		t->x_recv = o->recv_rate;
	if (t->r <= 0) { /* no RTT yet: nothing to compute a rate with */
		t->any_feedback = true;
		return;
	}
	/* §4.3 step 3: X_recv_set and recv_limit */
	double recv_limit;
	if (new_event) {
		double m = 0;
		for (unsigned i = 0; i < 3; i++)
			m = fmax(m, t->set[i].v / 2);
		m = fmax(m, 0.85 * t->x_recv);
		memset(t->set, 0, sizeof(t->set));
		t->set[0] = (struct xrecv){ m, now_ns };
		recv_limit = m;
	} else {
		unsigned old = 0;
		for (unsigned i = 0; i < 3; i++) {
			if (t->set[i].v > 0 && (double)(now_ns - t->set[i].t) > 2 * t->r * NS)
				t->set[i].v = 0; /* older than two RTTs */
			if (t->set[i].v == 0 || t->set[i].t < t->set[old].t)
				old = i;
		}
		t->set[old] = (struct xrecv){ t->x_recv, now_ns };
		recv_limit = 2 * set_max(t);
	}
	if (!t->any_feedback && t->p == 0) { /* §4.2: the first feedback */
		t->x = tfrc_initial_rate(s_of(t), t->r);
		t->t_ld = now_ns;
	} else {
		update_x(t, recv_limit, now_ns);
	}
	t->any_feedback = true;
	arm_nofeedback(t, now_ns);
	set_tnom(t);
}

/* §4.4: the limit becomes timer_limit / 2 and X is recomputed. */
static void update_limits(struct ccid3_tx *t, double timer_limit, uint64_t now)
{
	timer_limit = fmax(timer_limit, x_min(t));
	memset(t->set, 0, sizeof(t->set));
	t->set[0] = (struct xrecv){ timer_limit / 2, now };
	update_x(t, timer_limit, now);
}

static uint64_t tx_next_timer(void *tx)
{
	return ((struct ccid3_tx *)tx)->nofb_at;
}

static void tx_timer(void *tx, uint64_t now_ns)
{
	struct ccid3_tx *t = tx;

	if (!t->nofb_at || now_ns < t->nofb_at)
		return;
	t->c.nofeedback++;
	if (t->r <= 0 || !t->any_feedback || t->p == 0)
		t->x = fmax(t->x / 2, x_min(t));
	else if (t->x_calc > 2 * set_max(t)) /* X_recv limited X: halve that */
		update_limits(t, set_max(t), now_ns);
	else
		update_limits(t, t->x_calc / 2, now_ns);
	arm_nofeedback(t, now_ns);
	set_tnom(t);
}

static uint64_t seq_window(void *tx)
{
	(void)tx;
	return 0; /* no opinion: the connection's default */
}

static void tx_stats(void *tx, struct dccp_ccid_tx_stats *st)
{
	struct ccid3_tx *t = tx;

	memset(st, 0, sizeof(*st));
	st->pipe = (uint32_t)dccp_seq_sub(t->head, t->last_ackno);
	/* rounded up: a rate below 1 B/s (tiny packets at the t_mbi floor) is not 0 */
	st->x_bps = t->x >= 1.8e19 ? UINT64_MAX : (uint64_t)ceil(t->x);
	st->rtt_ns = (uint64_t)(t->r * NS);
	st->p = t->p;
}

void dccp_ccid3_tx_counters(void *tx, struct ccid3_tx_counters *c)
{
	*c = ((struct ccid3_tx *)tx)->c;
}

const struct dccp_ccid_tx_ops dccp_ccid3_tx_ops = {
	.id = DCCP_CCID3,
	.init = tx_init,
	.free = tx_free,
	.budget = budget,
	.sent = sent,
	.recv_ack = recv_ack,
	.next_timer = tx_next_timer,
	.timer = tx_timer,
	.seq_window = seq_window,
	.stats = tx_stats,
};

/* ---- receiver ------------------------------------------------------------ */

enum { R_UNKNOWN, R_DATA, R_NONDATA_RCVD, R_NONDATA, R_LOST };

struct rxent {
	uint64_t seq, t;
	uint8_t st, ccval;
};

struct interval {
	uint32_t data, len, loss; /* data packets, all packets, lossy part */
};

struct ccid3_rx {
	struct dccp_ccid_env env;
	uint64_t hi, base;   /* packets [base, hi] are kept; below base all is decided */
	uint64_t t_hi;	     /* arrival of hi (Elapsed Time) */
	uint64_t data_total; /* data packets received */
	uint64_t bytes_total;
	uint64_t lost_total;
	uint64_t cnt; /* data packets (received or lost) below base */
	/* loss events: the open interval starts at ev_start */
	bool have_event;
	uint64_t ev_start, ev_end, ev_pos, ev_t;
	uint8_t ev_cc;
	struct interval closed[TFRC_NINTERVAL]; /* newest first */
	unsigned k;
	/* RTT from CCVal */
	uint64_t t_cc[16];
	uint16_t cc_valid;
	uint8_t last_cc;
	bool have_cc;
	uint64_t rtt;
	/* Receive Rate: the current feedback period and the one before */
	uint64_t t_fb, bytes_fb, prev_bytes, prev_dur;
	uint32_t data_since_fb;
	bool fb_sent, due;
	uint32_t ts;
	uint64_t t_ts;
	bool have_ts;
	struct ccid3_rx_counters c;
	struct rxent w[CCID3_RX_WINDOW];
};

static struct rxent *ent(struct ccid3_rx *x, uint64_t seq)
{
	return &x->w[seq & (CCID3_RX_WINDOW - 1)];
}

static void *rx_init(const struct dccp_ccid_env *env)
{
	struct ccid3_rx *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->env = *env;
	x->hi = env->isr & DCCP_SEQ_MASK;
	x->base = dccp_seq_add(x->hi, 1);
	return x;
}

static void rx_free(void *rx)
{
	free(rx);
}

static void want_feedback(struct ccid3_rx *x)
{
	x->due = true;
}

static double mean_s(const struct ccid3_rx *x)
{
	return x->data_total ? (double)x->bytes_total / (double)x->data_total
			     : (x->env.mps ? x->env.mps : 1);
}

/* Receive Rate over the current feedback period, or over it and the one
 * before when it is shorter than an RTT (a loss event's early feedback) or
 * of no time at all (the receiver may have no RTT: it comes from CCVal). */
static double recv_rate(const struct ccid3_rx *x, uint64_t now)
{
	uint64_t dur = x->fb_sent && now > x->t_fb ? now - x->t_fb : 0, bytes = x->bytes_fb;

	/* Shorter than an RTT, or without data (feedback the connection sends
	 * for another reason: a Confirm, a loss seen on a non-data packet):
	 * measured together with the last period that had data.  A Receive
	 * Rate of 0 would make the sender's recv_limit 0 and its rate s/t_mbi
	 * (RFC 5348 §4.3), one packet a minute, until its nofeedback timer. */
	if (dur == 0 || dur < x->rtt || bytes == 0) {
		dur += x->prev_dur;
		bytes += x->prev_bytes;
	}
	return dur ? (double)bytes * NS / (double)dur : 0;
}

/* §6.3.1: the interval before the first loss, from the rate seen so far. */
static uint32_t first_interval(const struct ccid3_rx *x, uint64_t now, uint64_t pos)
{
	double xr = recv_rate(x, now), R = (double)x->rtt / NS, s = mean_s(x);

	if (!(xr > 0) || !(R > 0))
		return pos > 0xffffff ? 0xffffff : pos ? (uint32_t)pos : 1;
	/* the p for which the equation gives X_recv: X falls as p grows */
	double lo = 1e-9, hi = 1;
	for (int i = 0; i < 60; i++) {
		double mid = sqrt(lo * hi);
		if (tfrc_x_bps(s, R, mid) > xr)
			lo = mid;
		else
			hi = mid;
	}
	double len = round(1 / hi);
	return len > 0xffffff ? 0xffffff : len < 1 ? 1 : (uint32_t)len;
}

static void loss(struct ccid3_rx *x, uint64_t seq, uint64_t t, uint8_t cc, uint64_t now)
{
	x->lost_total++;
	x->c.lost++;
	if (x->have_event) {
		/* RFC 4342 §10.2: within 4 windows (one RTT) of the event's start */
		unsigned dist = (unsigned)(cc - x->ev_cc) & 15;
		bool wrapped = x->rtt && t - x->ev_t > 2 * x->rtt;
		if (dist <= 4 && !wrapped) {
			x->ev_end = seq;
			return;
		}
	}
	struct interval iv;
	if (x->have_event) {
		iv.data = (uint32_t)(x->cnt - x->ev_pos);
		iv.len = (uint32_t)dccp_seq_sub(seq, x->ev_start);
		iv.loss = (uint32_t)dccp_seq_sub(x->ev_end, x->ev_start) + 1;
	} else {
		iv.data = first_interval(x, now, x->cnt);
		iv.len = (uint32_t)dccp_seq_sub(seq, x->env.isr);
		iv.loss = 0;
	}
	memmove(&x->closed[1], &x->closed[0], sizeof(x->closed[0]) * (TFRC_NINTERVAL - 1));
	x->closed[0] = iv;
	if (x->k < TFRC_NINTERVAL)
		x->k++;
	x->have_event = true;
	x->ev_start = x->ev_end = seq;
	x->ev_pos = x->cnt;
	x->ev_t = t;
	x->ev_cc = cc;
	x->c.loss_events++;
	want_feedback(x); /* §6.1: a new loss event is reported at once */
}

/* Decide what can be decided at base, oldest first. */
static void settle(struct ccid3_rx *x, uint64_t now, bool force_one)
{
	while (!dccp_seq_after(x->base, x->hi)) {
		struct rxent *e = ent(x, x->base);
		if (e->st == R_UNKNOWN) {
			/* lost once NDUPACK later packets arrived; its time and CCVal
			 * are those of the first packet that did arrive after it */
			unsigned later = 0;
			struct rxent *next = NULL;
			for (uint64_t q = dccp_seq_add(x->base, 1);
			     !dccp_seq_after(q, x->hi) && later < CCID3_NDUPACK;
			     q = dccp_seq_add(q, 1)) {
				struct rxent *f = ent(x, q);
				if (f->st == R_DATA || f->st == R_NONDATA_RCVD) {
					later++;
					if (!next)
						next = f;
				}
			}
			if (later < CCID3_NDUPACK && !force_one)
				return;
			loss(x, x->base, next ? next->t : now, next ? next->ccval : x->last_cc, now);
			e->st = R_LOST;
		}
		force_one = false;
		if (e->st == R_DATA || e->st == R_LOST)
			x->cnt++;
		x->base = dccp_seq_add(x->base, 1);
	}
}

/* RFC 4342 §8.1: the time from the first packet of window c - 4 to that of c is an RTT. */
static void cc_rtt(struct ccid3_rx *x, uint8_t cc, uint64_t now)
{
	unsigned d = (unsigned)(cc - x->last_cc) & 15;

	if (x->have_cc && d == 0)
		return;
	if (!x->have_cc || d > 5) {
		x->cc_valid = 0;
	} else {
		for (unsigned i = 1; i < d; i++)
			x->cc_valid &= (uint16_t) ~(1u << ((x->last_cc + i) & 15));
	}
	x->have_cc = true;
	x->last_cc = cc;
	x->t_cc[cc] = now;
	x->cc_valid |= (uint16_t)(1u << cc);
	unsigned b = (cc - 4u) & 15;
	if (x->cc_valid & (1u << b)) {
		uint64_t r = now - x->t_cc[b];
		x->rtt = x->rtt ? (x->rtt * 9 + r) / 10 : r;
		x->c.rtt_ns = x->rtt;
	}
}

static bool rx_recv(void *rx, uint8_t type, uint64_t seq, uint8_t ccval, const struct dccp_opts *o,
		    size_t len, uint64_t now_ns)
{
	struct ccid3_rx *x = rx;
	bool data = type == DCCP_DATA || type == DCCP_DATAACK;

	seq &= DCCP_SEQ_MASK;
	ccval &= 15;
	if (dccp_seq_after(seq, x->hi)) {
		uint64_t gap = dccp_seq_sub(seq, x->hi);
		if (gap > CCID3_RX_WINDOW) { /* a hole wider than the window: one loss event */
			settle(x, now_ns, false);
			x->hi = dccp_seq_sub(seq, 1);
			x->base = x->hi;
			*ent(x, x->base) = (struct rxent){ x->base, now_ns, R_UNKNOWN, ccval };
			settle(x, now_ns, true);
		} else {
			for (uint64_t q = dccp_seq_add(x->hi, 1); q != seq; q = dccp_seq_add(q, 1)) {
				while (dccp_seq_sub(q, x->base) >= CCID3_RX_WINDOW)
					settle(x, now_ns, true);
				*ent(x, q) = (struct rxent){ q, 0, R_UNKNOWN, 0 };
				x->hi = q; /* so that settle() can always move base */
			}
		}
		while (dccp_seq_sub(seq, x->base) >= CCID3_RX_WINDOW)
			settle(x, now_ns, true);
		x->hi = seq;
		x->t_hi = now_ns;
		*ent(x, seq) = (struct rxent){ seq, now_ns, data ? R_DATA : R_NONDATA_RCVD, ccval };
		if (data)
			cc_rtt(x, ccval, now_ns);
	} else if (dccp_seq_between(seq, x->base, x->hi)) {
		struct rxent *e = ent(x, seq);
		if (e->st != R_UNKNOWN && e->st != R_NONDATA) {
			x->c.dup++;
			return x->due;
		}
		*e = (struct rxent){ seq, now_ns, data ? R_DATA : R_NONDATA_RCVD, ccval };
	} else {
		x->c.old++; /* below the window, or after we declared it lost */
		return x->due;
	}
	/* RFC 4342 §6.1: the NDP Count run before this packet was not data */
	if (o && o->has_ndp) {
		uint64_t n = o->ndp_count < CCID3_RX_WINDOW ? o->ndp_count : CCID3_RX_WINDOW;
		for (uint64_t i = 1; i <= n; i++) {
			uint64_t q = dccp_seq_sub(seq, i);
			if (!dccp_seq_between(q, x->base, x->hi))
				break;
			if (ent(x, q)->st == R_UNKNOWN)
				ent(x, q)->st = R_NONDATA;
		}
	}
	if (o && o->has_ts) {
		x->ts = o->ts;
		x->t_ts = now_ns;
		x->have_ts = true;
	}
	if (data) {
		x->data_total++;
		x->bytes_total += len;
		x->bytes_fb += len;
		x->data_since_fb++;
		/* §6.3: the first data packet is acknowledged at once; without an
		 * RTT the receiver cannot pace its feedback, so every data packet */
		if (!x->fb_sent || !x->rtt)
			want_feedback(x);
	}
	settle(x, now_ns, false);
	return x->due;
}

static uint32_t clamp24(uint64_t v, uint32_t max)
{
	return v > max ? max : (uint32_t)v;
}

static void put_feedback(void *rx, struct dccp_obuf *b, uint64_t now_ns, uint64_t *ackno)
{
	struct ccid3_rx *x = rx;
	struct dccp_loss_interval li[TFRC_NINTERVAL + 1];
	uint32_t I[TFRC_NINTERVAL + 1];

	*ackno = x->hi;
	/* Elapsed Time since hi arrived, in hundredths of ms (RFC 4340 §13.2) */
	uint64_t held = now_ns > x->t_hi ? (now_ns - x->t_hi) / 10000 : 0;
	dccp_opt_put_elapsed(b, held > UINT32_MAX ? UINT32_MAX : (uint32_t)held);
	if (x->have_ts) {
		uint64_t e = now_ns > x->t_ts ? (now_ns - x->t_ts) / 10000 : 0;
		dccp_opt_put_ts_echo(b, x->ts, e > UINT32_MAX ? UINT32_MAX : (uint32_t)e);
		x->have_ts = false;
	}
	/* the open interval, then the closed ones, newest first */
	uint64_t open_data = x->data_total + x->lost_total - (x->have_event ? x->ev_pos : 0);
	/* packets in the open interval: [ev_start, hi], or (ISR, hi] before any loss */
	uint64_t open_len = x->have_event ? dccp_seq_sub(x->hi, x->ev_start) + 1
					  : dccp_seq_sub(x->hi, x->env.isr);
	uint64_t open_loss = x->have_event ? dccp_seq_sub(x->ev_end, x->ev_start) + 1 : 0;
	li[0] = (struct dccp_loss_interval){ .lossless = clamp24(open_len - open_loss, 0xffffff),
					     .loss = clamp24(open_loss, 0x7fffff),
					     .data = clamp24(open_data, 0xffffff) };
	I[0] = li[0].data;
	for (unsigned i = 0; i < x->k; i++) {
		const struct interval *iv = &x->closed[i];
		li[i + 1] = (struct dccp_loss_interval){ .lossless = clamp24(iv->len - iv->loss, 0xffffff),
							 .loss = clamp24(iv->loss, 0x7fffff),
							 .data = clamp24(iv->data, 0xffffff) };
		I[i + 1] = li[i + 1].data;
	}
	dccp_opt_put_loss_intervals(b, 0, li, x->k + 1);
	double p = tfrc_p(I, x->k);
	double inv = p > 0 ? ceil(1 / p - 1e-9) : 0; /* rounded up (RFC 4342 §8.5), not 1 ulp over */
	dccp_opt_put_u32(b, DCCP_OPT_LOSS_EVENT_RATE,
			 p > 0 ? (inv >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)inv) : UINT32_MAX);
	double xr = recv_rate(x, now_ns);
	dccp_opt_put_u32(b, DCCP_OPT_RECEIVE_RATE, xr >= UINT32_MAX ? UINT32_MAX : (uint32_t)xr);
	/* a new feedback period; one without data extends the last one with
	 * data instead (recv_rate()), and so does one of no time at all (the
	 * engine reads a batch of packets with one clock reading, and each may
	 * make feedback due): a period of 0 ns would leave recv_rate() nothing
	 * to divide by, and a Receive Rate of 0 pins the sender at s/t_mbi */
	uint64_t d = x->fb_sent && now_ns > x->t_fb ? now_ns - x->t_fb : 0;
	if (x->fb_sent && x->bytes_fb && d) {
		x->prev_dur = d;
		x->prev_bytes = x->bytes_fb;
	} else if (x->fb_sent) {
		x->prev_dur += d;
		x->prev_bytes += x->bytes_fb;
	}
	x->t_fb = now_ns;
	x->bytes_fb = 0;
	x->data_since_fb = 0;
	x->fb_sent = true;
	x->due = false;
}

static void ack_of_ack(void *rx, uint64_t seq)
{
	(void)rx, (void)seq; /* CCID 3 keeps no per-ack state */
}

/* §6.2: feedback once per RTT while data arrives. */
static uint64_t rx_next_timer(void *rx)
{
	struct ccid3_rx *x = rx;

	return x->fb_sent && x->rtt && x->data_since_fb && !x->due ? x->t_fb + x->rtt : 0;
}

static void rx_timer(void *rx, uint64_t now_ns)
{
	struct ccid3_rx *x = rx;
	uint64_t at = rx_next_timer(rx);

	if (at && now_ns >= at)
		want_feedback(x);
}

static bool feedback_due(void *rx)
{
	return ((struct ccid3_rx *)rx)->due;
}

void dccp_ccid3_rx_counters(void *rx, struct ccid3_rx_counters *c)
{
	*c = ((struct ccid3_rx *)rx)->c;
}

const struct dccp_ccid_rx_ops dccp_ccid3_rx_ops = {
	.id = DCCP_CCID3,
	.init = rx_init,
	.free = rx_free,
	.recv = rx_recv,
	.put_feedback = put_feedback,
	.ack_of_ack = ack_of_ack,
	.next_timer = rx_next_timer,
	.timer = rx_timer,
	.feedback_due = feedback_due,
};
