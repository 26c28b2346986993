/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the DCCP connection state machine (RFC 4340 §8); the stateless
 * listener (§8.1.4 Init Cookie) is in listener.c.  See conn.h.
 *
 * Holds, in order: output (packet building, the options every packet
 * carries), feature processing, the CCID glue (ccid.h ops only), life
 * cycle, input (loss accounting and delivery, then dccp_conn_input() in
 * the steps of RFC 4340 §8.5: sequence checks, features, one handler per
 * state that needs one, by packet type, and the dispatch), timers, sending
 * data, and dccp_conn_accept(), where the listener hands over.
 *
 * Simplifications, on purpose: a packet's options are processed in one
 * pass after the §7.5 checks; the only features we negotiate actively are
 * CCID (both half-connections, SP), Sequence Window (NN, ours, also
 * mid-connection) and Send NDP Count at the peer (SP, Change R(1) on the
 * Request and on the Response, §7.7.2: its NDP Counts tell its lost pure
 * Acks from lost data); every other Change the peer sends is confirmed with
 * its own first preference (SP) or value (NN), or with an empty Confirm if
 * unknown, so a peer like Linux gets an answer to everything it asks.  We
 * send NDP Count whenever a run of non-data packets precedes a packet,
 * whatever our Send NDP Count (§7.7.2 allows it), so a peer that asks for
 * it gets it.
 *
 * RFC 4340 §13.3: each Timestamp the peer sends is echoed once, with the
 * time held, on our next packet of any type (the listener's Response for
 * the Request's).  §11.4: an incoming Acknowledgement Number that names one
 * of our feedback Acks lets the receiver CCID prune its state (an Ack
 * Vector: dccp_aoa_find(), ccid.h).  RFC 5596: a DCCP-Listen never draws a
 * Reset.
 *
 * The CCIDs are reached only through the ops of ccid.h: features a CCID
 * negotiates itself (Ack Ratio) through its feature hooks, gaps in the
 * peer's Acks through acks_lost(), the end through finish().
 */
#include "dccp/conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dccp/feature.h"

#define MS 1000000ull
#define PARTOPEN_NS (200 * MS) /* §8.1.5: PARTOPEN timer starts at 200 ms */
#define REQUEST_NS \
	(1000 * MS) /* §8.1.1: the first Request retransmission "after approximately one second" */
#define CLOSE_NS (200 * MS)
#define TIMEWAIT_NS (2000 * MS) /* short 2 MSL: ports are ours alone in practice */
#define MAX_BACKOFF_NS (8000 * MS)
#define CLOSE_TRIES 6
#define OPT_CAP 512

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* ---- output ------------------------------------------------------------ */

/* Build and emit one packet of type from c with opts and data.  The
 * Acknowledgement Number is GSR (the CCIDs' feedback uses GSR too). */
static int emit(struct dccp_conn *c, uint8_t type, const uint8_t *opts, size_t optlen,
		const void *data, size_t dlen, uint8_t ccval, uint8_t reset_code)
{
	uint8_t pkt[DCCP_MAX_HDR + 65536];
	struct dccp_hdr h = { .sport = c->p.sport,
			      .dport = c->p.dport,
			      .type = type,
			      .x = true,
			      .ccval = ccval,
			      .service = c->p.service,
			      .reset_code = reset_code };
	c->s.gss = dccp_seq_add(c->s.gss, 1);
	h.seq = c->s.gss;
	h.has_ack = dccp_type_has_ack(type);
	h.ack = c->s.gsr;
	/* DCCP-UDP: the header does not depend on the payload (no checksum
	 * of ours, no length field), so it is built alone for emitv() */
	bool split = c->p.udp && c->env.emitv && dlen;
	ssize_t n = dccp_build(pkt, sizeof(pkt), &h, opts, optlen, split ? NULL : data,
			       split ? 0 : dlen, c->p.udp ? NULL : &c->p.ph_out);
	if (n < 0)
		return (int)n;
	if (split && (size_t)n + dlen > 65535)
		return -EMSGSIZE; /* as dccp_build() of the whole packet says */
	if (type == DCCP_DATA || type == DCCP_DATAACK)
		c->ndp_run = 0;
	else
		c->ndp_run++;
	if (split)
		return c->env.emitv(c->env.arg, pkt, (size_t)n, data, dlen);
	return c->env.emit(c->env.arg, pkt, (size_t)n);
}

/* Options every packet of ours carries when it can: NDP Count (§7.7, so the
 * peer can tell lost data from lost acks), pending Confirms and our pending
 * Sequence Window Change (both need an Acknowledgement Number), and the
 * sender CCID's Change when one is due (ccid_feature_update()). */
static void common_opts(struct dccp_conn *c, struct dccp_obuf *b, bool has_ack, bool confirms)
{
	if (c->state == DCCP_S_PARTOPEN && c->cookie_len)
		dccp_opt_put(b, DCCP_OPT_INIT_COOKIE, c->cookie, c->cookie_len);
	if (c->ndp_run)
		dccp_opt_put_ndp(b, c->ndp_run);
	if (!has_ack)
		return;
	if (confirms && c->confirm_len && c->confirm_len <= b->cap - b->len) {
		memcpy(b->p + b->len, c->confirm_buf, c->confirm_len);
		b->len += c->confirm_len;
		/* PARTOPEN repeats the Response's Confirms (conn.h) */
		c->confirm_len = c->state == DCCP_S_PARTOPEN ? c->confirm_partopen : 0;
	}
	if (c->seqwin_pending)
		dccp_feat_put_nn(b, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, c->seqwin_pending);
	uint8_t feat;
	uint64_t value;
	if (c->tx && c->txo->feature_take && c->txo->feature_take(c->tx, &feat, &value))
		dccp_feat_put_nn(b, DCCP_OPT_CHANGE_L, feat, value);
}

/* Does the options area b hold a Timestamp Echo of ts (CCID 3's feedback
 * echoes the Timestamps it saw itself)? */
static bool has_ts_echo(const struct dccp_obuf *b, uint32_t ts)
{
	for (size_t i = 0; i < b->len;) {
		uint8_t t = b->p[i];
		if (t < 32) {
			i++;
			continue;
		}
		if (i + 1 >= b->len || b->p[i + 1] < 2)
			return false;
		size_t n = b->p[i + 1];
		if (t == DCCP_OPT_TS_ECHO && n >= 6 && i + 6 <= b->len &&
		    ((uint32_t)b->p[i + 2] << 24 | (uint32_t)b->p[i + 3] << 16 |
		     (uint32_t)b->p[i + 4] << 8 | b->p[i + 5]) == ts)
			return true;
		i += n;
	}
	return false;
}

/*
 * RFC 4340 §13.3: the receiver of a Timestamp "SHOULD generate a Timestamp
 * Echo option", one per Timestamp, with the time it held it as Elapsed Time
 * (hundredths of ms; omitted when 0).  It goes on whichever packet of ours
 * comes next, data or not (as Linux 6.1: dccp_insert_options()).  Linux's
 * CCID 3 sender takes its first RTT from the echo of its Request's or
 * Response's Timestamp; without it, it starts at one packet a second.
 */
static void put_ts_echo(struct dccp_conn *c, struct dccp_obuf *b, uint64_t now_ns)
{
	if (!c->ts_pending || b->overflow)
		return;
	if (!has_ts_echo(b, c->ts_val)) {
		uint64_t e = now_ns > c->ts_at ? (now_ns - c->ts_at) / 10000 : 0;
		dccp_opt_put_ts_echo(b, c->ts_val, e > UINT32_MAX ? UINT32_MAX : (uint32_t)e);
	}
	c->ts_pending = b->overflow;
}

/* A control packet (Ack, Sync, Close...) with the common options and, for
 * Ack/DataAck in OPEN, the receiver CCID's feedback. */
static int send_ctl(struct dccp_conn *c, uint8_t type, uint64_t now_ns, uint8_t reset_code)
{
	uint8_t ob[OPT_CAP];
	struct dccp_obuf b;
	dccp_obuf_init(&b, ob, sizeof(ob));
	bool has_ack = dccp_type_has_ack(type);
	common_opts(c, &b, has_ack && type != DCCP_SYNC && type != DCCP_SYNCACK, true);
	if (c->rx && c->st.received && (type == DCCP_ACK || type == DCCP_DATAACK) &&
	    c->state >= DCCP_S_PARTOPEN) {
		uint64_t ackno;
		c->rxo->put_feedback(c->rx, &b, now_ns, &ackno);
		if (!b.overflow) /* for ack_of_ack(), when the peer acknowledges this Ack */
			dccp_aoa_note(&c->aoa, dccp_seq_add(c->s.gss, 1), ackno);
	}
	put_ts_echo(c, &b, now_ns);
	dccp_obuf_pad(&b);
	if (b.overflow)
		b.len = 0; /* options did not fit: send the bare packet rather than none */
	uint8_t ccval = 0;
	if (c->tx)
		c->txo->sent(c->tx, dccp_seq_add(c->s.gss, 1), 0, false, now_ns, &ccval);
	if (type == DCCP_SYNC)
		c->st.syncs++;
	return emit(c, type, ob, b.len, NULL, 0, ccval, reset_code);
}

/* The Sync of §7.5.4 acknowledges the invalid packet's seq, not GSR. */
static int send_sync(struct dccp_conn *c, uint8_t type, uint64_t ack)
{
	uint8_t pkt[64];
	struct dccp_hdr h = {
		.sport = c->p.sport, .dport = c->p.dport, .type = type, .x = true, .has_ack = true, .ack = ack
	};
	c->s.gss = dccp_seq_add(c->s.gss, 1);
	h.seq = c->s.gss;
	c->ndp_run++;
	if (type == DCCP_SYNC)
		c->st.syncs++;
	ssize_t n = dccp_build(pkt, sizeof(pkt), &h, NULL, 0, NULL, 0, c->p.udp ? NULL : &c->p.ph_out);
	return n < 0 ? (int)n : c->env.emit(c->env.arg, pkt, (size_t)n);
}

/* Change R(Send NDP Count, 1), §7.7.2: "DCCP A sends a Change R(Send NDP
 * Count, 1) option to ask DCCP B to send NDP Count options".  The client
 * puts it on its Request, the (stateless) listener on its Response: a peer
 * processes Changes during the handshake, Linux 6.1 only then for SP
 * features (net/dccp/feat.c, dccp_feat_parse_options). */
void dccp_conn_put_ndp_change(struct dccp_obuf *b)
{
	const uint8_t one = 1;
	dccp_feat_put_sp(b, DCCP_OPT_CHANGE_R, DCCP_F_SEND_NDP_COUNT, &one, 1);
}

static void send_request(struct dccp_conn *c, uint64_t now_ns)
{
	uint8_t ob[64];
	struct dccp_obuf b;
	uint8_t ccid = c->p.ccid;
	dccp_obuf_init(&b, ob, sizeof(ob));
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_CCID, &ccid, 1);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_CCID, &ccid, 1);
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, c->p.seq_window);
	dccp_conn_put_ndp_change(&b);
	dccp_obuf_pad(&b);
	/* each Request gets a fresh number; ISS stays the first one, so a
	 * Response to any of them acknowledges something in [ISS, GSS] */
	emit(c, DCCP_REQUEST, ob, b.len, NULL, 0, 0, 0);
	if (!c->tries)
		c->s.iss = c->s.gss;
	c->req_at = now_ns;
}

/* ---- features ---------------------------------------------------------- */

static void nn_peer_note(struct dccp_nn_seen *nn, uint8_t feat, uint64_t value)
{
	unsigned i = 0;
	while (i < nn->npeer && nn->peer[i].feat != feat)
		i++;
	if (i == DCCP_NN_PEER)
		return; /* more NN features than feature.h knows */
	nn->peer[i].feat = feat;
	nn->peer[i].value = value;
	if (i == nn->npeer)
		nn->npeer++;
}

/*
 * Answer the peer's Change options into out (Confirms), apply the Confirms
 * that answer ours (the sender CCID's, tx, to it: feature_confirmed()).  Only
 * options on packets that pass §6.6.4 (in order) reach here.  Returns false
 * when a Reset is needed (code in *reset).
 */
bool dccp_conn_features(const struct dccp_opts *o, struct dccp_obuf *out, uint8_t our_ccid,
			struct dccp_nn_seen *nn, uint64_t pending, const struct dccp_ccid_tx_ops *txo,
			void *tx, uint8_t *reset, struct dccp_counters *err)
{
	for (unsigned i = 0; i < o->n; i++) {
		const struct dccp_opt *op = &o->opt[i];
		if (op->type < DCCP_OPT_CHANGE_L || op->type > DCCP_OPT_CONFIRM_R)
			continue;
		struct dccp_feat_opt f;
		enum dccp_drop e = dccp_feat_decode(op, &f, err);
		bool change = op->type == DCCP_OPT_CHANGE_L || op->type == DCCP_OPT_CHANGE_R;
		uint8_t ctype = op->type == DCCP_OPT_CHANGE_L ? DCCP_OPT_CONFIRM_R : DCCP_OPT_CONFIRM_L;
		if (e != DCCP_OK) {
			if (change && f.mandatory) {
				*reset = DCCP_RESET_MANDATORY_ERROR;
				return false;
			}
			if (change)
				dccp_feat_put_empty_confirm(out, ctype, op->data ? op->data[0] : 0);
			continue;
		}
		const struct dccp_feat_info *fi = dccp_feat_info(f.feat);
		if (!change) {
			if (f.feat == DCCP_F_SEQ_WINDOW && op->type == DCCP_OPT_CONFIRM_R &&
			    !f.empty && f.value == pending)
				nn->our_seqwin_confirmed = f.value;
			if (op->type == DCCP_OPT_CONFIRM_R && !f.empty && tx && txo->feature_confirmed)
				txo->feature_confirmed(tx, f.feat, f.value);
			if (f.feat == DCCP_F_CCID && !f.empty && f.value != our_ccid) {
				*reset = DCCP_RESET_OPTION_ERROR;
				return false;
			}
			continue;
		}
		if (fi->rule == DCCP_RULE_NN) {
			if (f.feat == DCCP_F_SEQ_WINDOW)
				nn->peer_seqwin = f.value;
			/* e.g. the peer's Ack Ratio for its data: our receiver obeys it */
			else if (op->type == DCCP_OPT_CHANGE_L)
				nn_peer_note(nn, f.feat, f.value);
			dccp_feat_put_nn(out, ctype, f.feat, f.value);
			continue;
		}
		uint8_t sel[2];
		if (f.feat == DCCP_F_CCID) {
			if (!memchr(f.prefs, our_ccid, f.nprefs)) {
				/* §6.3.1: no value both accept.  §6.6.9: a Mandatory
				 * Change that fails resets (6); else an empty Confirm
				 * (§6.6.7, as Linux 6.1), and our CCID stays in force:
				 * the peer decides whether to go on (Linux resets) */
				if (f.mandatory) {
					*reset = DCCP_RESET_MANDATORY_ERROR;
					return false;
				}
				dccp_feat_put_empty_confirm(out, ctype, f.feat);
				continue;
			}
			sel[0] = sel[1] = our_ccid;
		} else {
			sel[0] = sel[1] = f.prefs[0]; /* their first choice is ours too */
		}
		dccp_feat_put_sp(out, ctype, f.feat, sel, 2);
	}
	return true;
}

/* ---- CCIDs ------------------------------------------------------------- */

static void ccid_acked(void *arg, uint64_t seq)
{
	struct dccp_conn *c = arg;
	if (c->env.acked)
		c->env.acked(c->env.arg, seq);
}

static void ccid_lost(void *arg, uint64_t seq)
{
	struct dccp_conn *c = arg;
	if (c->env.lost)
		c->env.lost(c->env.arg, seq);
}

static int ccid_start(struct dccp_conn *c, uint64_t now_ns, uint64_t hs_rtt_ns)
{
	struct dccp_ccid_env env = { .mps = c->p.mps,
				     .iss = c->s.iss,
				     .isr = c->s.isr,
				     .now_ns = now_ns,
				     .hs_rtt_ns = hs_rtt_ns,
				     .ack_ratio = c->p.ack_ratio,
				     .acked = ccid_acked,
				     .lost = ccid_lost,
				     .arg = c };
	c->txo = dccp_ccid_tx(c->p.ccid);
	c->rxo = dccp_ccid_rx(c->p.ccid);
	if (!c->txo || !c->rxo)
		return -EPROTONOSUPPORT;
	c->tx = c->txo->init(&env);
	c->rx = c->rxo->init(&env);
	if (!c->tx || !c->rx)
		return -ENOMEM;
	return 0;
}

/*
 * A feature the sender CCID negotiates itself (CCID 2's Ack Ratio, RFC 4341
 * §6.1.2): after each acknowledgement and each sender timer (rto) in OPEN,
 * once data went (only a data sender has a say), it may want a Change L.
 * It rides on our next packet with an Ack (common_opts()), or on an Ack of
 * its own at once when the CCID says the peer's Sequence Window for its
 * numbers (w_rx) might not let a later one through.
 */
static void ccid_feature_update(struct dccp_conn *c, uint64_t now_ns, bool rto)
{
	if (!c->tx || !c->txo->feature_update || c->state != DCCP_S_OPEN || !c->st.sent)
		return;
	enum dccp_ccid_change ch = c->txo->feature_update(c->tx, c->s.w_rx, rto, now_ns);
	if (ch == DCCP_CCID_CHANGE_NONE)
		return;
	c->st.ack_ratio_changes++;
	if (ch == DCCP_CCID_CHANGE_NOW)
		send_ctl(c, DCCP_ACK, now_ns, 0);
}

static bool ccid_feature_due(const struct dccp_conn *c)
{
	return c->tx && c->txo->feature_due && c->txo->feature_due(c->tx);
}

/* The peer's Changes of NN features at it, other than Sequence Window. */
static void ccid_feature_changed(struct dccp_conn *c, const struct dccp_nn_seen *nn)
{
	if (!c->rx || !c->rxo->feature_changed)
		return;
	for (unsigned i = 0; i < nn->npeer; i++)
		if (nn->peer[i].value)
			c->rxo->feature_changed(c->rx, nn->peer[i].feat, nn->peer[i].value);
}

/* ---- life cycle -------------------------------------------------------- */

/* No Ack can come any more: the sender CCID settles what is open (ccid.h). */
static void tx_finish(struct dccp_conn *c)
{
	if (c->tx && c->txo->finish)
		c->txo->finish(c->tx);
}

static void enter(struct dccp_conn *c, enum dccp_state st, uint64_t now_ns)
{
	c->state = st;
	c->tries = 0;
	c->t_retx = 0;
	switch (st) {
	case DCCP_S_REQUEST:
		c->backoff_ns = REQUEST_NS;
		c->t_retx = now_ns + c->backoff_ns;
		break;
	case DCCP_S_PARTOPEN:
		c->backoff_ns = PARTOPEN_NS;
		c->t_retx = now_ns + c->backoff_ns;
		break;
	case DCCP_S_CLOSEREQ:
	case DCCP_S_CLOSING:
		c->backoff_ns = CLOSE_NS;
		c->t_retx = now_ns + c->backoff_ns;
		break;
	case DCCP_S_TIMEWAIT:
		c->t_close = now_ns + TIMEWAIT_NS;
		c->peer_closed = true;
		tx_finish(c);
		break;
	case DCCP_S_CLOSED:
		c->peer_closed = true;
		c->t_close = c->t_ack = 0;
		tx_finish(c);
		break;
	default: break;
	}
}

int dccp_conn_connect(struct dccp_conn *c, const struct dccp_conn_params *p,
		      const struct dccp_conn_env *env, uint64_t iss, uint64_t now_ns)
{
	memset(c, 0, sizeof(*c));
	c->now_max = now_ns;
	c->p = *p;
	c->env = *env;
	c->s.gss = dccp_seq_sub(iss & DCCP_SEQ_MASK, 1);
	c->s.w_rx = c->s.w_tx = 100;
	c->s.initial = true;
	enter(c, DCCP_S_REQUEST, now_ns);
	send_request(c, now_ns);
	return 0;
}

void dccp_conn_free(struct dccp_conn *c)
{
	if (c->tx)
		c->txo->free(c->tx);
	if (c->rx)
		c->rxo->free(c->rx);
	c->tx = c->rx = NULL;
	struct dccp_rxpkt r;
	while (dccp_conn_pop(c, &r))
		free(r.data);
}

/*
 * The connection's clock: now_ns, or the latest time an entry point was
 * given when now_ns is older.  The engine's threads take their time before
 * they wait for the connection's lock (the ring engine's event and budget
 * hooks), so a packet can come in with a time before the feedback another
 * thread just sent; the CCIDs subtract times (CCID 3's Receive Rate over
 * now - last feedback), and an unsigned difference that went back would
 * wrap: a Receive Rate of 0 pins the peer's CCID 3 sender at s/t_mbi.
 */
static uint64_t conn_clock(struct dccp_conn *c, uint64_t now_ns)
{
	if (now_ns < c->now_max)
		return c->now_max;
	c->now_max = now_ns;
	return now_ns;
}

void dccp_conn_reset(struct dccp_conn *c, uint8_t code, uint64_t now_ns)
{
	now_ns = conn_clock(c, now_ns);
	if (c->state == DCCP_S_CLOSED || c->state == DCCP_S_TIMEWAIT)
		return;
	c->st.reset_code_tx = code;
	send_ctl(c, DCCP_RESET, now_ns, code);
	enter(c, DCCP_S_CLOSED, now_ns);
}

void dccp_conn_close(struct dccp_conn *c, uint64_t now_ns)
{
	now_ns = conn_clock(c, now_ns);
	switch (c->state) {
	case DCCP_S_OPEN:
	case DCCP_S_PARTOPEN:
		/* §8.3: either side may send Close; the server's CloseReq asks the
		 * client to hold TIMEWAIT, which we do not need: both send Close. */
		send_ctl(c, DCCP_CLOSE, now_ns, 0);
		enter(c, DCCP_S_CLOSING, now_ns);
		break;
	case DCCP_S_REQUEST: dccp_conn_reset(c, DCCP_RESET_CLOSED, now_ns); break;
	default: break;
	}
}

/* ---- input ------------------------------------------------------------- */

/*
 * The peer's non-data positions after its last data packet (§7.7): the
 * packet at seq itself when it is not data, and the run of ndp non-data
 * packets its NDP Count says came right before it.  Kept as at most
 * DCCP_RX_ND intervals (a hostile peer's NDP Counts cost nothing more).
 */
static void note_nondata(struct dccp_conn *c, uint64_t seq, uint64_t ndp, bool self)
{
	int64_t hi = dccp_seq_delta(seq, c->rx_last_data) - (self ? 0 : 1);
	if (!c->rx_any || hi < 1 || (!ndp && !self) || c->rx_nd_n >= DCCP_RX_ND + (self ? 0u : 1u))
		return;
	int64_t lo = dccp_seq_delta(seq, c->rx_last_data) -
		(int64_t)(ndp > (1ull << 47) ? (1ull << 47) : ndp);
	c->rx_nd[c->rx_nd_n].lo = (uint64_t)(lo < 1 ? 1 : lo);
	c->rx_nd[c->rx_nd_n].hi = (uint64_t)hi;
	c->rx_nd_n++;
}

/*
 * Data packets lost between the last data packet and the packet at seq
 * (ndp: its NDP Count): the sequence numbers in between less those known
 * not to be data (the union of the runs noted).  Exact unless non-data
 * packets of the peer were lost where no NDP Count names them (a lost Ack
 * followed by lost data): those count as data.  Clears the runs.
 */
static uint64_t gap_lost(struct dccp_conn *c, uint64_t seq, uint64_t ndp)
{
	int64_t d = dccp_seq_delta(seq, c->rx_last_data);
	note_nondata(c, seq, ndp, false);
	unsigned n = c->rx_nd_n;
	c->rx_nd_n = 0;
	if (d <= 1)
		return 0;
	uint64_t g = (uint64_t)d - 1, known = 0, end = 0; /* covered: offsets [1, end] */
	/* union of the intervals clipped to [1, g]: repeatedly take the one
	 * with the smallest lo (n <= DCCP_RX_ND + 1) */
	bool used[DCCP_RX_ND + 1] = { false };
	for (unsigned k = 0; k < n; k++) {
		unsigned best = n;
		for (unsigned i = 0; i < n; i++)
			if (!used[i] && (best == n || c->rx_nd[i].lo < c->rx_nd[best].lo))
				best = i;
		used[best] = true;
		uint64_t lo = c->rx_nd[best].lo, hi = c->rx_nd[best].hi < g ? c->rx_nd[best].hi : g;
		if (lo <= end)
			lo = end + 1;
		if (lo > hi)
			continue;
		known += hi - lo + 1;
		end = hi;
	}
	return g - known;
}

/* Queue a payload for the application; lost = data packets missing before it. */
static void deliver(struct dccp_conn *c, const struct dccp_hdr *h, const uint8_t *pkt,
		    const struct dccp_opts *o)
{
	uint64_t lost = 0;
	if (c->rx_any) {
		int64_t gap = dccp_seq_delta(h->seq, c->rx_last_data);
		if (gap <= 0)
			return; /* duplicate or reordered behind a newer one: DCCP does not reorder */
		lost = gap_lost(c, h->seq, o->has_ndp ? o->ndp_count : 0);
	}
	c->rx_any = true;
	c->rx_last_data = h->seq;
	c->st.received++;
	c->st.rx_lost += lost;
	if (c->rxq_n == DCCP_RX_QUEUE) {
		c->rx_dropped++;
		c->st.rx_lost++; /* the application did not keep up: a loss it will see */
		struct dccp_rxpkt *old = &c->rxq[c->rxq_head];
		uint64_t carried = old->lost + 1;
		free(old->data);
		c->rxq_head = (c->rxq_head + 1) % DCCP_RX_QUEUE;
		c->rxq_n--;
		if (c->rxq_n)
			c->rxq[c->rxq_head].lost += carried;
		else
			lost += carried;
	}
	struct dccp_rxpkt *r = &c->rxq[(c->rxq_head + c->rxq_n) % DCCP_RX_QUEUE];
	r->seq = h->seq;
	r->lost = lost;
	r->len = h->data_len;
	r->data = malloc(h->data_len ? h->data_len : 1);
	if (!r->data) {
		c->st.rx_lost++;
		return;
	}
	memcpy(r->data, pkt + h->data_off, h->data_len);
	c->rxq_n++;
}

/* Data lost after the last delivered packet, told by a final packet (Close,
 * Reset) with its NDP Count: counted as an empty record with lost set. */
static void tail_loss(struct dccp_conn *c, const struct dccp_hdr *h, const struct dccp_opts *o)
{
	if (!c->rx_any || c->peer_closed)
		return;
	uint64_t lost = gap_lost(c, h->seq, o->has_ndp ? o->ndp_count : 0);
	if (!lost)
		return;
	c->st.rx_lost += lost;
	if (c->rxq_n < DCCP_RX_QUEUE) {
		struct dccp_rxpkt *r = &c->rxq[(c->rxq_head + c->rxq_n) % DCCP_RX_QUEUE];
		r->seq = h->seq;
		r->lost = lost;
		r->len = 0;
		r->data = NULL; /* marks "no payload, just the losses" */
		c->rxq_n++;
	}
}

bool dccp_conn_pop(struct dccp_conn *c, struct dccp_rxpkt *out)
{
	if (!c->rxq_n)
		return false;
	*out = c->rxq[c->rxq_head];
	c->rxq_head = (c->rxq_head + 1) % DCCP_RX_QUEUE;
	c->rxq_n--;
	return true;
}

static void reset_no_conn(struct dccp_conn *c, const struct dccp_hdr *h)
{
	if (!dccp_draws_reset(h->type))
		return;
	/* §8.3.1: a Reset acknowledging the offending packet */
	uint8_t pkt[64];
	struct dccp_hdr r = { .sport = c->p.sport,
			      .dport = c->p.dport,
			      .type = DCCP_RESET,
			      .x = true,
			      .has_ack = true,
			      .ack = h->seq,
			      .reset_code = DCCP_RESET_NO_CONNECTION };
	r.seq = dccp_seq_add(h->has_ack ? h->ack : 0, 1);
	ssize_t n = dccp_build(pkt, sizeof(pkt), &r, NULL, 0, NULL, 0, c->p.udp ? NULL : &c->p.ph_out);
	if (n > 0)
		c->env.emit(c->env.arg, pkt, (size_t)n);
}

/*
 * dccp_conn_input() follows RFC 4340 §8.5: the checks of steps 1-3 (ours?
 * a connection still?) and the options' syntax, the sequence checks of
 * steps 4-7 (seq_check()) and moving GSR/GAR (seq_accept()), a Reset
 * (step 9, in_reset()), the feature options (step 8, in_features(); after
 * the Reset here, as a Reset's options change nothing), the states that
 * need a packet of their own (steps 10 and 12: in_request(),
 * in_partopen()), then the packet by type (steps 13-16: in_by_type()).
 */

/* §8.5 steps 4-7: is h's sequence (and Acknowledgement) Number acceptable?
 * false: dropped, after the Reset (REQUEST) or Sync (§7.5.4) it draws. */
static bool seq_check(struct dccp_conn *c, const struct dccp_hdr *h, uint64_t now_ns)
{
	if (c->state == DCCP_S_REQUEST) {
		if ((h->type != DCCP_RESPONSE && h->type != DCCP_RESET) ||
		    !dccp_seq_between(h->ack, c->s.iss, c->s.gss)) {
			c->st.invalid++;
			reset_no_conn(c, h); /* §8.5 step 7: Reset, keep REQUEST (none to Reset, Listen) */
			return false;
		}
		return true;
	}
	enum dccp_seqcheck mode = DCCP_SEQCHK_NORMAL;
	if (dccp_seq_valid(&c->s, h, mode, false) != DCCP_SEQ_VALID) {
		uint64_t ack;
		c->st.invalid++;
		if (dccp_invalid_response(&c->s, h, &ack) && dccp_sync_allow(&c->sync_limit, now_ns))
			send_sync(c, DCCP_SYNC, ack);
		return false;
	}
	return true;
}

/* The packet passed the checks: move GSR/GAR (Sync/SyncAck too, §7.5.4:
 * they re-align us), note it for the Timestamp echo and the NDP-based loss
 * count.  Returns GSR as it was before. */
static uint64_t seq_accept(struct dccp_conn *c, const struct dccp_hdr *h, const struct dccp_opts *o,
			   uint64_t now_ns)
{
	const uint64_t gsr0 = c->s.gsr;
	if (c->state == DCCP_S_REQUEST) {
		c->s.isr = h->seq;
		c->s.gsr = h->seq;
		c->s.gar = h->ack;
	} else {
		if (dccp_seq_after(h->seq, c->s.gsr))
			c->s.gsr = h->seq;
		if (h->has_ack && dccp_seq_after(h->ack, c->s.gar))
			c->s.gar = h->ack;
	}
	if (c->s.initial && dccp_seq_delta(c->s.gsr, c->s.isr) > (int64_t)c->s.w_rx &&
	    dccp_seq_delta(c->s.gss, c->s.iss) > (int64_t)c->s.w_tx)
		c->s.initial = false;
	c->last_valid_ns = now_ns;
	if (o->has_ts) { /* echoed on our next packet (put_ts_echo()) */
		c->ts_pending = true;
		c->ts_val = o->ts;
		c->ts_at = now_ns;
	}
	if (h->type != DCCP_DATA && h->type != DCCP_DATAACK && h->type != DCCP_RESET && h->type != DCCP_CLOSE)
		note_nondata(c, h->seq, o->has_ndp ? o->ndp_count : 0, true);
	return gsr0;
}

/* §8.5 step 9: the peer's Reset ends the connection (TIMEWAIT if we were
 * closing, else CLOSED). */
static void in_reset(struct dccp_conn *c, const struct dccp_hdr *h, const struct dccp_opts *o,
		     uint64_t now_ns)
{
	c->st.resets_rx++;
	c->st.reset_code_rx = h->reset_code;
	tail_loss(c, h, o);
	enter(c, c->state == DCCP_S_CLOSING ? DCCP_S_TIMEWAIT : DCCP_S_CLOSED, now_ns);
}

/* §8.5 step 8, the feature options (§6.6.4: only in-order Changes and
 * Confirms): Confirms queued for our next packet, the values applied.
 * false: the connection was reset. */
static bool in_features(struct dccp_conn *c, const struct dccp_hdr *h, const struct dccp_opts *o,
			uint64_t now_ns)
{
	bool feat_ok = true;
	uint8_t reset = 0;
	if (c->state == DCCP_S_REQUEST ||
	    dccp_feat_in_order(DCCP_OPT_CONFIRM_L, h->seq, h->has_ack, h->ack, c->fgsr, c->fgss)) {
		struct dccp_obuf b;
		dccp_obuf_init(&b, c->confirm_buf + c->confirm_len,
			       sizeof(c->confirm_buf) - c->confirm_len);
		struct dccp_nn_seen nn = { 0 };
		feat_ok = dccp_conn_features(o, &b, c->p.ccid, &nn, c->seqwin_pending, c->txo,
					     c->tx, &reset, &c->err);
		if (!b.overflow)
			c->confirm_len += b.len;
		if (nn.peer_seqwin)
			c->s.w_rx = nn.peer_seqwin;
		if (nn.our_seqwin_confirmed) {
			c->s.w_tx = nn.our_seqwin_confirmed;
			c->seqwin_pending = 0;
		}
		ccid_feature_changed(c, &nn);
		c->fgsr = h->seq;
		if (h->has_ack)
			c->fgss = h->ack;
	}
	if (!feat_ok) {
		dccp_conn_reset(c, reset, now_ns);
		return false;
	}
	return true;
}

/* §8.5 step 10: the Response to our Request (checked by seq_check()):
 * the CCIDs start, the cookie is kept for PARTOPEN, and our Ack goes. */
static bool in_request(struct dccp_conn *c, const struct dccp_hdr *h, const struct dccp_opts *o,
		       uint64_t now_ns)
{
	if (h->service != c->p.service) {
		dccp_conn_reset(c, DCCP_RESET_BAD_SERVICE_CODE, now_ns);
		return false;
	}
	c->s.w_tx = c->p.seq_window; /* the Response confirmed it (or we reset above) */
	/* Each Request has its own number, so a Response that acknowledges the
	 * latest one times it exactly, retransmitted or not (no Karn ambiguity);
	 * one that answers an earlier Request gives no sample. */
	uint64_t hs_rtt = h->ack == c->s.gss && now_ns > c->req_at ? now_ns - c->req_at : 0;
	if (ccid_start(c, now_ns, hs_rtt) < 0) {
		dccp_conn_reset(c, DCCP_RESET_ABORTED, now_ns);
		return false;
	}
	for (unsigned i = 0; i < o->n; i++)
		if (o->opt[i].type == DCCP_OPT_INIT_COOKIE) {
			memcpy(c->cookie, o->opt[i].data, o->opt[i].len);
			c->cookie_len = o->opt[i].len;
		}
	c->rx_any = true; /* losses count from the Response on */
	c->rx_last_data = h->seq;
	c->confirm_partopen = c->confirm_len;
	enter(c, DCCP_S_PARTOPEN, now_ns);
	send_ctl(c, DCCP_ACK, now_ns, 0); /* echoes the cookie (common_opts) */
	return true;
}

/* §8.5 step 12 (PARTOPEN).  true: the packet was a repeated Response, now
 * answered; else we are OPEN and the packet goes on as any other. */
static bool in_partopen(struct dccp_conn *c, const struct dccp_hdr *h, uint64_t now_ns)
{
	if (h->type == DCCP_RESPONSE) {
		send_ctl(c, DCCP_ACK, now_ns, 0); /* our Ack was lost: repeat it */
		return true;
	}
	/* the server has our Confirms: it answered a packet carrying them;
	 * keep only those for Changes in this packet */
	memmove(c->confirm_buf, c->confirm_buf + c->confirm_partopen,
		c->confirm_len - c->confirm_partopen);
	c->confirm_len -= c->confirm_partopen;
	c->confirm_partopen = 0;
	enter(c, DCCP_S_OPEN, now_ns); /* §8.1.5: any other valid packet */
	return false;
}

/* §8.5 steps 13-16 by packet type: CloseReq, Close, Sync, and the data and
 * acknowledgements (the CCIDs', Acks of Acks, delivery). */
static bool in_by_type(struct dccp_conn *c, const struct dccp_hdr *h, const uint8_t *pkt,
		       const struct dccp_opts *o, uint64_t gsr0, uint64_t now_ns)
{
	switch (h->type) {
	case DCCP_SYNC: send_sync(c, DCCP_SYNCACK, h->seq); break;
	case DCCP_CLOSEREQ:
		if (c->server) {
			c->st.invalid++; /* only servers may ask; §8.5 step 7 */
			dccp_conn_reset(c, DCCP_RESET_PACKET_ERROR, now_ns);
			return false;
		}
		send_ctl(c, DCCP_CLOSE, now_ns, 0);
		enter(c, DCCP_S_CLOSING, now_ns);
		break;
	case DCCP_CLOSE:
		tail_loss(c, h, o);
		c->st.reset_code_tx = DCCP_RESET_CLOSED;
		send_ctl(c, DCCP_RESET, now_ns, DCCP_RESET_CLOSED);
		enter(c, DCCP_S_CLOSED, now_ns);
		break;
	case DCCP_DATA:
	case DCCP_DATAACK:
	case DCCP_ACK:
		/* RFC 4341 §6.1.2: a data sender's peer sends little but Acks, so a
		 * gap before one of its Acks is Acks lost on the reverse path */
		if (h->type == DCCP_ACK && c->tx && c->txo->acks_lost && c->state == DCCP_S_OPEN &&
		    dccp_seq_sub(h->seq, gsr0) > 1 && dccp_seq_after(h->seq, gsr0))
			c->txo->acks_lost(c->tx, dccp_seq_sub(h->seq, gsr0) - 1);
		if (h->has_ack && c->tx) {
			c->txo->recv_ack(c->tx, h->ack, o, now_ns);
			ccid_feature_update(c, now_ns, false);
		}
		/* Ack of Ack (RFC 4340 §11.4, RFC 4341 §6.1.1): h->ack names one
		 * of our packets; if it was an Ack with feedback, the peer has
		 * the state that Ack described, up to the Acknowledgement Number
		 * it carried, and the receiver may stop describing it (its Ack
		 * Vector stays short).  A peer acknowledges our Acks when it
		 * sends DataAcks (Linux does); our own sender sends Data. */
		uint64_t carried;
		if (h->has_ack && c->rx && dccp_aoa_find(&c->aoa, h->ack, &carried))
			c->rxo->ack_of_ack(c->rx, carried);
		/* Feedback only for a half-connection that carries data: a data
		 * sender's own pure Acks would blur the receiver's NDP-based loss
		 * count (a lost Ack next to a lost data packet reads as two) */
		if (c->rx && c->rxo->recv(c->rx, h->type, h->seq, h->ccval, o, h->data_len, now_ns) &&
		    (c->st.received || h->type != DCCP_ACK))
			send_ctl(c, DCCP_ACK, now_ns, 0);
		if (h->type != DCCP_ACK && c->state >= DCCP_S_OPEN && c->state <= DCCP_S_CLOSING)
			deliver(c, h, pkt, o);
		break;
	default: break;
	}
	return true;
}

bool dccp_conn_input(struct dccp_conn *c, const uint8_t *pkt, size_t len, const struct dccp_hdr *h,
		     uint64_t now_ns)
{
	(void)len;
	if (h->sport != c->p.dport || h->dport != c->p.sport)
		return false; /* not ours (a raw socket sees every DCCP packet) */
	now_ns = conn_clock(c, now_ns);
	if (c->state == DCCP_S_CLOSED || c->state == DCCP_S_TIMEWAIT) {
		c->st.invalid++;
		reset_no_conn(c, h);
		return false;
	}
	struct dccp_opts o;
	unsigned flags = c->state >= DCCP_S_OPEN ? DCCP_PF_ESTABLISHED : 0;
	if (dccp_opts_parse(h, pkt, flags, &o, &c->err) != DCCP_OK && !o.reset_code) {
		c->st.invalid++;
		return false;
	}
	/* A Response to another of our Requests (the listener is stateless and
	 * answered each with its own ISS): we went on with the first, so this
	 * one is no sequence error worth a Sync, just stale. */
	if (c->state == DCCP_S_PARTOPEN && h->type == DCCP_RESPONSE && h->seq != c->s.isr)
		return false;
	if (!seq_check(c, h, now_ns))
		return false;
	if (o.reset_code) {
		c->st.invalid++;
		dccp_conn_reset(c, o.reset_code, now_ns);
		return false;
	}
	const uint64_t gsr0 = seq_accept(c, h, &o, now_ns);
	if (h->type == DCCP_RESET) {
		in_reset(c, h, &o, now_ns);
		return true;
	}
	if (!in_features(c, h, &o, now_ns))
		return false;
	if (c->state == DCCP_S_REQUEST)
		return in_request(c, h, &o, now_ns);
	if (c->state == DCCP_S_PARTOPEN && in_partopen(c, h, now_ns))
		return true;
	return in_by_type(c, h, pkt, &o, gsr0, now_ns);
}

/* ---- timers ------------------------------------------------------------ */

uint64_t dccp_conn_next_timer(const struct dccp_conn *c)
{
	uint64_t t = 0;
	uint64_t cand[5] = { c->t_retx, c->t_close, c->t_ack, c->tx ? c->txo->next_timer(c->tx) : 0,
			     c->rx ? c->rxo->next_timer(c->rx) : 0 };
	for (int i = 0; i < 5; i++)
		if (cand[i] && (!t || cand[i] < t))
			t = cand[i];
	return t;
}

uint64_t dccp_conn_timer(struct dccp_conn *c, uint64_t now_ns)
{
	now_ns = conn_clock(c, now_ns);
	if (c->t_retx && c->t_retx <= now_ns) {
		c->tries++;
		c->backoff_ns = c->backoff_ns * 2 > MAX_BACKOFF_NS ? MAX_BACKOFF_NS : c->backoff_ns * 2;
		c->t_retx = now_ns + c->backoff_ns;
		switch (c->state) {
		case DCCP_S_REQUEST:
			if (c->tries > DCCP_REQUEST_TRIES) {
				dccp_conn_reset(c, DCCP_RESET_ABORTED, now_ns);
				break;
			}
			send_request(c, now_ns);
			break;
		case DCCP_S_PARTOPEN:
			if (c->tries > DCCP_REQUEST_TRIES) {
				dccp_conn_reset(c, DCCP_RESET_ABORTED, now_ns);
				break;
			}
			send_ctl(c, DCCP_ACK, now_ns, 0);
			break;
		case DCCP_S_CLOSING:
		case DCCP_S_CLOSEREQ:
			if (c->tries > CLOSE_TRIES) {
				enter(c, DCCP_S_CLOSED, now_ns); /* the peer is gone */
				break;
			}
			send_ctl(c, c->state == DCCP_S_CLOSING ? DCCP_CLOSE : DCCP_CLOSEREQ, now_ns, 0);
			break;
		default: c->t_retx = 0; break;
		}
	}
	if (c->t_close && c->t_close <= now_ns) {
		c->t_close = 0;
		enter(c, DCCP_S_CLOSED, now_ns);
	}
	if (c->tx) {
		uint64_t t = c->txo->next_timer(c->tx);
		if (t && t <= now_ns) {
			c->txo->timer(c->tx, now_ns);
			ccid_feature_update(c, now_ns, true); /* an RTO shrinks the window to 1; a probe */
		}
	}
	if (c->rx) {
		uint64_t t = c->rxo->next_timer(c->rx);
		if (t && t <= now_ns)
			c->rxo->timer(c->rx, now_ns);
		if (c->rxo->feedback_due(c->rx) && c->st.received && c->state >= DCCP_S_OPEN &&
		    c->state <= DCCP_S_CLOSING)
			send_ctl(c, DCCP_ACK, now_ns, 0);
	}
	/* §7.5.2 / RFC 4341 §6.1.1: keep the peer's window for our numbers
	 * near what the CCID wants (about 5 x cwnd), renegotiated mid-connection
	 * when it is off by more than 2x */
	if (c->tx && c->state == DCCP_S_OPEN && !c->seqwin_pending) {
		/* only ever grow it: a window shrinking under packets in flight
		 * makes them invalid at the peer */
		uint64_t want = max_u64(c->txo->seq_window(c->tx), c->p.seq_window);
		if (want > 2 * c->s.w_tx)
			c->seqwin_pending = want;
	}
	return dccp_conn_next_timer(c);
}

uint32_t dccp_conn_budget(struct dccp_conn *c, uint64_t now_ns, uint64_t *wake_ns)
{
	now_ns = conn_clock(c, now_ns);
	*wake_ns = 0;
	if (c->state != DCCP_S_OPEN && c->state != DCCP_S_PARTOPEN)
		return 0;
	return c->txo->budget(c->tx, now_ns, wake_ns);
}

int dccp_conn_send(struct dccp_conn *c, const void *data, size_t len, uint64_t now_ns, uint64_t *seq)
{
	now_ns = conn_clock(c, now_ns);
	if (c->state != DCCP_S_OPEN && c->state != DCCP_S_PARTOPEN)
		return -ENOTCONN;
	uint8_t ob[OPT_CAP];
	struct dccp_obuf b;
	dccp_obuf_init(&b, ob, sizeof(ob));
	/* PARTOPEN: DataAck (§8.1.5); OPEN: DataAck only when Confirms or a
	 * Change must go, else plain Data.  The options never push a packet
	 * past the MPS: if they would, they go on an Ack of their own first. */
	bool ack = c->state == DCCP_S_PARTOPEN || c->confirm_len || c->seqwin_pending ||
		ccid_feature_due(c);
	bool confirms = true;
	if (ack) {
		size_t want = c->confirm_len + 16 + (c->ndp_run ? 8 : 0) + (c->ts_pending ? 10 : 0);
		if (len + want > c->p.mps + 64) {
			send_ctl(c, DCCP_ACK, now_ns, 0);
			ack = c->state == DCCP_S_PARTOPEN;
			confirms = false; /* they went on that Ack */
		}
	}
	common_opts(c, &b, ack, confirms);
	put_ts_echo(c, &b, now_ns);
	dccp_obuf_pad(&b);
	if (b.overflow)
		b.len = 0;
	uint8_t ccval = 0;
	*seq = dccp_seq_add(c->s.gss, 1);
	c->txo->sent(c->tx, *seq, len, true, now_ns, &ccval);
	c->st.sent++;
	return emit(c, ack ? DCCP_DATAACK : DCCP_DATA, ob, b.len, data, len, ccval, 0);
}

/* ---- the server side (listener.c) --------------------------------------- */

int dccp_conn_accept(struct dccp_conn *c, const struct dccp_conn_params *p,
		     const struct dccp_conn_env *env, const struct dccp_hdr *h, const uint8_t *pkt,
		     const struct dccp_opts *o, uint64_t iss, uint64_t isr, uint64_t w_rx, uint64_t now_ns)
{
	memset(c, 0, sizeof(*c));
	c->now_max = now_ns;
	c->server = true;
	c->p = *p;
	c->env = *env;
	c->s.iss = iss;
	c->s.isr = isr;
	c->s.gss = c->s.iss;
	c->s.gsr = h->seq;
	c->s.gar = h->ack;
	c->s.w_rx = w_rx;
	c->s.w_tx = 100;
	c->s.initial = true;
	c->fgsr = h->seq;
	c->fgss = h->ack;
	c->last_valid_ns = now_ns;
	c->ndp_run = 1;	 /* our Response, a non-data packet, came before */
	if (o->has_ts) { /* §13.3, on our first packet */
		c->ts_pending = true;
		c->ts_val = o->ts;
		c->ts_at = now_ns;
	}
	/* losses count from the handshake on: the first data packet may be lost */
	c->rx_any = true;
	c->rx_last_data = dccp_seq_sub(h->seq, h->type == DCCP_DATAACK ? 1 : 0);
	int err = ccid_start(c, now_ns, 0); /* the listener keeps no Response time */
	if (err < 0) {
		dccp_conn_free(c);
		return err;
	}
	enter(c, DCCP_S_OPEN, now_ns);
	/* our Sequence Window: in force if the Ack confirmed the Response's
	 * Change, else negotiated again now that we have a connection */
	if (p->seq_window != 100) {
		c->seqwin_pending = p->seq_window;
		for (unsigned i = 0; i < o->n; i++) {
			struct dccp_feat_opt f;
			if (o->opt[i].type == DCCP_OPT_CONFIRM_R &&
			    dccp_feat_decode(&o->opt[i], &f, NULL) == DCCP_OK &&
			    f.feat == DCCP_F_SEQ_WINDOW && !f.empty && f.value == p->seq_window) {
				c->s.w_tx = f.value;
				c->seqwin_pending = 0;
			}
		}
	}
	if (h->type == DCCP_DATAACK)
		deliver(c, h, pkt, o); /* its payload is the first data */
	/* leave PARTOPEN at the client at once (§8.1.5) */
	send_ctl(c, DCCP_ACK, now_ns, 0);
	return 0;
}
