/* SPDX-License-Identifier: MIT */
/*
 * lib/dccp/conn.c driven by packets, no sockets: a client connection and a
 * listener exchange packets through queues (native IPv4, checksums over the
 * pseudo-header), and crafted packets play the attacker.
 *
 *   handshake         REQUEST -> PARTOPEN -> OPEN at the client, the server
 *                     connection created only by a valid cookie Ack
 *   cookies           a forged, altered, expired, wrong-tuple or replayed
 *                     cookie opens nothing (Reset 10 where one is due)
 *   Request flood     thousands of Requests: the listener's memory does not
 *                     grow, Responses stay small and are rate limited per
 *                     source
 *   windows           out-of-window packets dropped and counted, answered by
 *                     rate-limited Syncs; a SyncAck re-aligns
 *   Sync recovery     after a burst of lost packets (more than the window)
 *                     the receiver resynchronises through Sync/SyncAck
 *   close, reset      Close -> Reset(Closed) -> CLOSED/TIMEWAIT; a Reset tears
 *                     down; losses before the Close are reported
 *   Ack Ratio         the CCID 2 data sender negotiates it (Change L on a
 *                     DataAck or, if the peer's window for its numbers is
 *                     small, an Ack; Confirm R), the receiver obeys it; it rises
 *                     with the window, doubles when Acks are lost, falls to 1
 *                     after an RTO
 */
#include "check.h"
#include "dccp/ccid2.h"
#include "dccp/conn.h"
#include "dccp/feature.h"

#define MS 1000000ull
/* the client sender's Ack Ratio negotiation (CCID 2 keeps it, ccid2.h) */
#define AR dccp_ccid2_tx_ratio_neg(C.tx)

struct pkt {
	uint8_t b[2048];
	size_t len;
};
struct queue {
	struct pkt p[4096];
	unsigned n;
	size_t max_len;
};

static struct queue to_server, to_client;
static struct dccp_pseudo ph_c2s, ph_s2c; /* src, dst of each direction */

static int q_push(void *arg, const uint8_t *p, size_t len)
{
	struct queue *q = arg;
	CHECK(len <= sizeof(q->p[0].b));
	if (len > q->max_len)
		q->max_len = len;
	if (q->n < 4096) {
		memcpy(q->p[q->n].b, p, len);
		q->p[q->n++].len = len;
	}
	return 0;
}

static struct pkt q_pop(struct queue *q)
{
	CHECK(q->n > 0);
	struct pkt p = q->p[0];
	memmove(q->p, q->p + 1, (q->n - 1) * sizeof(q->p[0]));
	q->n--;
	return p;
}

static uint64_t acked_n;
static void on_acked(void *arg, uint64_t seq)
{
	(void)arg, (void)seq;
	acked_n++;
}

static struct dccp_conn_env cenv = { .emit = q_push, .acked = on_acked, .arg = &to_server };
static struct dccp_conn_env senv = { .emit = q_push, .acked = on_acked, .arg = &to_client };

static struct dccp_conn_params params(uint16_t sport, uint16_t dport)
{
	struct dccp_conn_params p = {
		.ccid = 2, .mps = 1400, .seq_window = 500, .sport = sport, .dport = dport
	};
	return p;
}

static void setup_addrs(void)
{
	memset(&ph_c2s, 0, sizeof(ph_c2s));
	ph_c2s.family = AF_INET;
	uint8_t a[4] = { 10, 0, 0, 1 }, b[4] = { 10, 0, 0, 2 };
	memcpy(ph_c2s.src, a, 4);
	memcpy(ph_c2s.dst, b, 4);
	ph_s2c = ph_c2s;
	memcpy(ph_s2c.src, b, 4);
	memcpy(ph_s2c.dst, a, 4);
}

static bool parse(const struct pkt *p, const struct dccp_pseudo *ph, struct dccp_hdr *h)
{
	return dccp_parse(p->b, p->len, ph, h, NULL) == DCCP_OK;
}

/* Deliver everything queued for the client to it. */
static void to_c(struct dccp_conn *c, uint64_t now)
{
	while (to_client.n) {
		struct pkt p = q_pop(&to_client);
		struct dccp_hdr h;
		CHECK(parse(&p, &ph_s2c, &h));
		dccp_conn_input(c, p.b, p.len, &h, now);
	}
}

/* Deliver everything queued for the server side: to s if it exists, else
 * to the listener (which may create *s). */
static bool to_s(struct dccp_listener *l, struct dccp_conn *s, bool *have_s, uint64_t now)
{
	bool made = false;
	while (to_server.n) {
		struct pkt p = q_pop(&to_server);
		struct dccp_hdr h;
		CHECK(parse(&p, &ph_c2s, &h));
		if (*have_s) {
			dccp_conn_input(s, p.b, p.len, &h, now);
		} else if (dccp_listener_input(l, p.b, p.len, &h, &ph_c2s, &ph_s2c, false, now,
					       q_push, &to_client, s, &senv)) {
			*have_s = made = true;
		}
	}
	return made;
}

static struct dccp_listener L;
static struct dccp_conn C, S;
static bool have_s;

static uint32_t client_ack_ratio; /* the client's dccp_conn_params.ack_ratio */
static uint8_t pair_ccid = 2;	  /* open_pair()'s CCID */

static void open_pair(uint64_t now)
{
	to_server.n = to_client.n = 0;
	have_s = false;
	struct dccp_conn_params lp = params(5001, 0);
	lp.ph_out = ph_s2c;
	lp.ccid = pair_ccid;
	dccp_listener_init(&L, &lp);
	struct dccp_conn_params cp = params(40000, 5001);
	cp.ph_out = ph_c2s;
	cp.ccid = pair_ccid;
	cp.ack_ratio = client_ack_ratio;
	CHECK_OK(dccp_conn_connect(&C, &cp, &cenv, 1000, now));
	EXPECT_EQ(C.state, DCCP_S_REQUEST);
	EXPECT_EQ(to_server.n, 1u);
	to_s(&L, &S, &have_s, now);
	EXPECT(!have_s); /* a Request makes no connection */
	to_c(&C, now + MS);
	EXPECT_EQ(C.state, DCCP_S_PARTOPEN);
	CHECK(to_s(&L, &S, &have_s, now + 2 * MS));
	EXPECT_EQ(S.state, DCCP_S_OPEN);
	EXPECT(S.server);
	to_c(&C, now + 3 * MS);
	EXPECT_EQ(C.state, DCCP_S_OPEN);
	/* both windows as negotiated: the client's in the Request, the server's
	 * on the Response */
	EXPECT_EQ(S.s.w_rx, 500u);
	EXPECT_EQ(C.s.w_tx, 500u);
	EXPECT_EQ(C.s.w_rx, 500u);
	EXPECT_EQ(S.s.w_tx, 500u);
}

static void close_pair(void)
{
	dccp_conn_free(&C);
	if (have_s)
		dccp_conn_free(&S);
	have_s = false;
}

static void test_handshake_and_data(void)
{
	uint64_t now = 1000 * MS;
	open_pair(now);
	/* 20 data packets, every other one lost: the receiver counts them */
	for (int i = 0; i < 20; i++) {
		uint64_t seq;
		char d[100];
		memset(d, i, sizeof(d));
		CHECK_OK(dccp_conn_send(&C, d, sizeof(d), now + 10 * MS, &seq));
		if (i % 2)
			to_server.n = 0;
		else
			to_s(&L, &S, &have_s, now + 10 * MS);
		to_c(&C, now + 10 * MS);
	}
	struct dccp_rxpkt r;
	uint64_t got = 0, lost = 0;
	while (dccp_conn_pop(&S, &r)) {
		EXPECT_EQ(r.len, 100u);
		EXPECT(r.data && r.data[0] == (uint8_t)(2 * got));
		got++;
		lost += r.lost;
		free(r.data);
	}
	EXPECT_EQ(got, 10u);
	/* the last one lost is only known at the close */
	EXPECT_EQ(lost, 9u);
	dccp_conn_close(&C, now + 20 * MS);
	EXPECT_EQ(C.state, DCCP_S_CLOSING);
	to_s(&L, &S, &have_s, now + 20 * MS);
	EXPECT_EQ(S.state, DCCP_S_CLOSED);
	EXPECT_EQ(S.st.reset_code_tx, DCCP_RESET_CLOSED);
	EXPECT(dccp_conn_pop(&S, &r));
	EXPECT(r.data == NULL && r.lost == 1); /* the tail loss, told by the Close */
	to_c(&C, now + 21 * MS);
	EXPECT_EQ(C.state, DCCP_S_TIMEWAIT);
	dccp_conn_timer(&C, now + 5000 * MS);
	EXPECT_EQ(C.state, DCCP_S_CLOSED);
	EXPECT(acked_n > 0);
	close_pair();
}

/* A listener on port 5001 and a client whose Request to it is queued in
 * to_server. */
static void listener_and_request(uint64_t now, uint64_t iss)
{
	to_server.n = to_client.n = 0;
	struct dccp_conn_params lp = params(5001, 0);
	lp.ph_out = ph_s2c;
	dccp_listener_init(&L, &lp);
	struct dccp_conn_params cp = params(40000, 5001);
	cp.ph_out = ph_c2s;
	CHECK_OK(dccp_conn_connect(&C, &cp, &cenv, iss, now));
	have_s = false;
}

/* The client's Ack (with the cookie) as the listener would see it. */
static struct pkt handshake_ack(uint64_t now)
{
	listener_and_request(now, 77);
	to_s(&L, &S, &have_s, now);
	to_c(&C, now);
	CHECK(to_server.n == 1);
	return q_pop(&to_server);
}

static bool feed_listener(const struct pkt *p, const struct dccp_pseudo *ph_in,
			  const struct dccp_pseudo *ph_out, uint64_t now)
{
	struct dccp_hdr h;
	CHECK(parse(p, ph_in, &h));
	struct dccp_conn s;
	bool ok = dccp_listener_input(&L, p->b, p->len, &h, ph_in, ph_out, false, now, q_push,
				      &to_client, &s, &senv);
	if (ok)
		dccp_conn_free(&s);
	return ok;
}

/* The packet with a correct checksum over ph (full coverage, CsCov 0). */
static struct pkt resum(struct pkt p, const struct dccp_pseudo *ph)
{
	p.b[6] = p.b[7] = 0;
	uint16_t cs = dccp_csum(p.b, p.len, dccp_csum_cov(0, (size_t)p.b[4] * 4, p.len), ph);
	p.b[6] = (uint8_t)(cs >> 8);
	p.b[7] = (uint8_t)cs;
	return p;
}

/* Byte i of the packet (a cookie byte) changed, checksum still right. */
static struct pkt altered(struct pkt p, size_t i, const struct dccp_pseudo *ph)
{
	p.b[i] ^= 0x40;
	return resum(p, ph);
}

static size_t cookie_at(const struct pkt *p)
{
	for (size_t i = 24; i + 2 < p->len; i++)
		if (p->b[i] == DCCP_OPT_INIT_COOKIE && p->b[i + 1] == DCCP_COOKIE_LEN + 2)
			return i + 2;
	CHECK(!"no cookie in the Ack");
	return 0;
}

static void test_cookies(void)
{
	uint64_t now = 50000 * MS;
	/* the genuine one opens a connection, once */
	struct pkt ack = handshake_ack(now);
	EXPECT(feed_listener(&ack, &ph_c2s, &ph_s2c, now + MS));
	to_client.n = 0;
	EXPECT(!feed_listener(&ack, &ph_c2s, &ph_s2c, now + 2 * MS)); /* replay */
	EXPECT_EQ(L.replays, 1u);
	EXPECT_EQ(to_client.n, 0u);
	dccp_conn_free(&C);

	/* every cookie byte altered: refused with Reset 10 */
	ack = handshake_ack(now);
	size_t at = cookie_at(&ack);
	for (size_t i = 0; i < DCCP_COOKIE_LEN; i++) {
		to_client.n = 0;
		struct pkt bad = altered(ack, at + i, &ph_c2s);
		EXPECT(!feed_listener(&bad, &ph_c2s, &ph_s2c, now + MS));
		CHECK(to_client.n == 1);
		struct dccp_hdr h;
		CHECK(parse(&to_client.p[0], &ph_s2c, &h));
		EXPECT_EQ(h.type, DCCP_RESET);
		EXPECT_EQ(h.reset_code, DCCP_RESET_BAD_INIT_COOKIE);
	}
	EXPECT_EQ(L.bad_cookies, (uint64_t)DCCP_COOKIE_LEN);
	/* from another address (same bytes, valid checksum for that source) */
	struct dccp_pseudo other = ph_c2s;
	other.src[3] = 9;
	struct pkt moved = resum(ack, &other);
	EXPECT(!feed_listener(&moved, &other, &ph_s2c, now + MS));
	/* too late */
	EXPECT(!feed_listener(&ack, &ph_c2s, &ph_s2c, now + (DCCP_COOKIE_LIFE_S + 2) * 1000 * MS));
	/* from another listener (another key) */
	struct dccp_listener keep = L;
	dccp_listener_init(&L, &keep.p);
	EXPECT(!feed_listener(&ack, &ph_c2s, &ph_s2c, now + MS));
	L = keep;
	/* and still good in time, once */
	EXPECT(feed_listener(&ack, &ph_c2s, &ph_s2c, now + MS));
	dccp_conn_free(&C);
}

static void test_request_flood(void)
{
	uint64_t now = 90000 * MS;
	struct dccp_conn_params lp = params(5001, 0);
	lp.ph_out = ph_s2c;
	dccp_listener_init(&L, &lp);
	struct dccp_listener before = L;
	size_t req_len = 0;
	to_client.n = 0;
	to_client.max_len = 0;
	for (unsigned i = 0; i < 3000; i++) {
		struct dccp_conn c;
		struct dccp_conn_params cp = params((uint16_t)(1024 + i), 5001);
		cp.ph_out = ph_c2s;
		to_server.n = 0;
		dccp_conn_connect(&c, &cp, &cenv, i * 1000, now);
		struct pkt p = q_pop(&to_server);
		req_len = p.len;
		feed_listener(&p, &ph_c2s, &ph_s2c, now + i * 1000); /* 3000 in 3 ms */
		dccp_conn_free(&c);
	}
	/* one source: 16 Responses a second, the rest cost nothing */
	EXPECT_EQ(L.requests, 3000u);
	EXPECT_EQ(L.responses, (uint64_t)L.per_source_rate);
	EXPECT_EQ(to_client.n, L.per_source_rate);
	/* a Response is the Request's size plus what §8.1.4 and feature
	 * negotiation need: the cookie, the Ack Number, the Confirms, our
	 * Sequence Window and Change R(Send NDP Count) (here 44 -> 96 bytes) */
	EXPECT(to_client.max_len <= req_len + DCCP_COOKIE_LEN + 2 + 24);
	/* the listener has no per-connection state: only its fixed struct */
	EXPECT(memcmp(before.key, L.key, sizeof(L.key)) == 0);
	EXPECT_EQ(sizeof(L), sizeof(before));

	/* Requests spoofed from 5000 addresses in one second: at most
	 * per_source_rate per bucket in all (sources that collide in a bucket
	 * share it and cannot reset each other's count) */
	dccp_listener_init(&L, &lp);
	to_client.n = 0;
	for (unsigned i = 0; i < 5000; i++) {
		struct dccp_pseudo src = ph_c2s, back = ph_s2c;
		src.src[2] = back.dst[2] = (uint8_t)(i >> 8);
		src.src[3] = back.dst[3] = (uint8_t)i;
		struct dccp_conn c;
		struct dccp_conn_params cp = params(40000, 5001);
		cp.ph_out = src;
		to_server.n = 0;
		dccp_conn_connect(&c, &cp, &cenv, i, now + 2000 * MS);
		struct pkt p = q_pop(&to_server);
		to_client.n = 0; /* the queue holds 4096: count by the listener's own */
		feed_listener(&p, &src, &back, now + 2000 * MS + i * 100);
		dccp_conn_free(&c);
	}
	EXPECT_EQ(L.requests, 5000u);
	EXPECT(L.responses <= (uint64_t)DCCP_RL_BUCKETS * L.per_source_rate);
	EXPECT(L.responses >= (uint64_t)DCCP_RL_BUCKETS * L.per_source_rate * 3 / 4);
}

static void test_windows_and_sync(void)
{
	uint64_t now = 200000 * MS;
	open_pair(now);
	/* a Data packet far beyond the window: dropped, counted, one Sync back */
	uint64_t gss = C.s.gss;
	C.s.gss = dccp_seq_add(C.s.gss, 100000);
	uint64_t seq;
	CHECK_OK(dccp_conn_send(&C, "x", 1, now + MS, &seq));
	uint64_t inv = S.st.invalid;
	to_client.n = 0;
	to_s(&L, &S, &have_s, now + MS);
	EXPECT_EQ(S.st.invalid, inv + 1);
	EXPECT_EQ(S.st.received, 0u);
	EXPECT_EQ(S.st.syncs, 1u);
	/* the client answers the Sync with a SyncAck (its own numbers are fine
	 * there), which moves the server's GSR up: data flows again */
	to_c(&C, now + 2 * MS);
	to_s(&L, &S, &have_s, now + 2 * MS);
	CHECK_OK(dccp_conn_send(&C, "y", 1, now + 3 * MS, &seq));
	to_s(&L, &S, &have_s, now + 3 * MS);
	EXPECT_EQ(S.st.received, 1u);
	(void)gss;
	/* a flood of invalid packets: Syncs rate limited (§7.5.4) */
	uint64_t syncs = S.st.syncs;
	for (int i = 0; i < 100; i++) {
		C.s.gss = dccp_seq_add(C.s.gss, 1000000);
		CHECK_OK(dccp_conn_send(&C, "z", 1, now + 4 * MS, &seq));
		C.s.gss = dccp_seq_sub(C.s.gss, 1000000);
	}
	to_client.n = 0;
	to_s(&L, &S, &have_s, now + 4 * MS);
	EXPECT(S.st.syncs - syncs <= DCCP_SYNC_RATE);
	EXPECT(S.st.invalid >= inv + 100);
	close_pair();
}

static void test_midconnection_seqwin(void)
{
	uint64_t now = 250000 * MS;
	open_pair(now);
	/* the client's CCID wants a larger window: Change L on its packets
	 * (DataAcks), Confirm R back, both ends switch */
	C.seqwin_pending = 4000;
	uint64_t seq;
	CHECK_OK(dccp_conn_send(&C, "a", 1, now + MS, &seq));
	to_s(&L, &S, &have_s, now + MS);
	EXPECT_EQ(S.s.w_rx, 4000u);
	EXPECT_EQ(C.s.w_tx, 500u);	     /* not before the Confirm */
	dccp_conn_timer(&S, now + 100 * MS); /* the server's delayed ack carries it */
	if (!to_client.n)
		CHECK_OK(dccp_conn_send(&S, "b", 1, now + 100 * MS, &seq));
	to_c(&C, now + 100 * MS);
	EXPECT_EQ(C.s.w_tx, 4000u);
	EXPECT_EQ(C.seqwin_pending, 0u);
	/* the window is in force: a packet 2000 ahead (beyond the old 3/4 x 500)
	 * is valid at the server now */
	C.s.gss = dccp_seq_add(C.s.gss, 2000);
	uint64_t inv = S.st.invalid;
	CHECK_OK(dccp_conn_send(&C, "c", 1, now + 101 * MS, &seq));
	to_s(&L, &S, &have_s, now + 101 * MS);
	EXPECT_EQ(S.st.invalid, inv);
	close_pair();
}

/* A listener and a client up to PARTOPEN: the client's Ack of the Response
 * is queued in to_server. */
static void to_partopen(uint64_t now, uint64_t iss)
{
	listener_and_request(now, iss);
	to_s(&L, &S, &have_s, now);
	to_c(&C, now);
	CHECK(C.state == DCCP_S_PARTOPEN);
}

/* Confirms pending in PARTOPEN never push a DataAck past the MPS: they go
 * on an Ack of their own first. */
static void test_partopen_mps(void)
{
	uint64_t now = 260000 * MS;
	to_partopen(now, 9);
	to_server.n = 0;
	memset(C.confirm_buf, 0, sizeof(C.confirm_buf)); /* 64 bytes of (padding) options */
	C.confirm_len = sizeof(C.confirm_buf);
	static char full[1400];
	uint64_t seq;
	CHECK_OK(dccp_conn_send(&C, full, sizeof(full), now + MS, &seq));
	for (unsigned i = 0; i < to_server.n; i++) {
		struct dccp_hdr h;
		CHECK(parse(&to_server.p[i], &ph_c2s, &h));
		EXPECT(h.opt_len + h.data_len <= C.p.mps + 64);
	}
	EXPECT_EQ(to_server.n, 2u); /* an Ack with the Confirms, then the DataAck */
	dccp_conn_free(&C);
}

/* Count the Confirm options of a packet of the client's. */
static unsigned confirms_in(const struct pkt *p)
{
	struct dccp_hdr h;
	struct dccp_opts o;
	CHECK(parse(p, &ph_c2s, &h));
	CHECK(dccp_opts_parse(&h, p->b, 0, &o, NULL) == DCCP_OK);
	unsigned n = 0;
	for (unsigned i = 0; i < o.n; i++)
		n += o.opt[i].type == DCCP_OPT_CONFIRM_L || o.opt[i].type == DCCP_OPT_CONFIRM_R;
	return n;
}

/* The handshake's Ack lost: the DataAck behind it carries the Confirms too
 * (Linux resets a connection whose first Ack/DataAck lacks them), and once
 * OPEN they are not repeated. */
static void test_partopen_confirms_repeat(void)
{
	uint64_t now = 270000 * MS;
	to_partopen(now, 11);
	CHECK_EQ(to_server.n, 1u);
	unsigned in_ack = confirms_in(&to_server.p[0]);
	EXPECT(in_ack > 0); /* the Response's Changes are answered */
	to_server.n = 0;    /* the Ack is lost */
	static char data[200];
	uint64_t seq;
	CHECK_OK(dccp_conn_send(&C, data, sizeof(data), now + 2 * MS, &seq));
	CHECK_OK(dccp_conn_send(&C, data, sizeof(data), now + 2 * MS, &seq));
	CHECK_EQ(to_server.n, 2u);
	EXPECT_EQ(confirms_in(&to_server.p[0]), in_ack);
	EXPECT_EQ(confirms_in(&to_server.p[1]), in_ack);
	/* the first DataAck completes the server's handshake */
	CHECK(to_s(&L, &S, &have_s, now + 3 * MS));
	EXPECT_EQ(S.state, DCCP_S_OPEN);
	CHECK_OK(dccp_conn_send(&S, data, sizeof(data), now + 4 * MS, &seq));
	to_c(&C, now + 5 * MS);
	EXPECT_EQ(C.state, DCCP_S_OPEN);
	EXPECT_EQ(C.confirm_len, 0u);
	CHECK_OK(dccp_conn_send(&C, data, sizeof(data), now + 6 * MS, &seq));
	EXPECT_EQ(confirms_in(&to_server.p[to_server.n - 1]), 0u);
	close_pair();
}

/* The option (type, feature) of packet p with its values (count returned, -1: absent). */
static int feat_opt(const struct pkt *p, const struct dccp_pseudo *ph, uint8_t type, uint8_t feat,
		    uint8_t *vals)
{
	struct dccp_hdr h;
	struct dccp_opts o;
	CHECK(parse(p, ph, &h));
	CHECK(dccp_opts_parse(&h, p->b, 0, &o, NULL) == DCCP_OK);
	for (unsigned i = 0; i < o.n; i++)
		if (o.opt[i].type == type && o.opt[i].len >= 1 && o.opt[i].data[0] == feat) {
			memcpy(vals, o.opt[i].data + 1, o.opt[i].len - 1u);
			return o.opt[i].len - 1;
		}
	return -1;
}

/* Send NDP Count (RFC 4340 §7.7.2): each side asks the other with Change
 * R(7, 1) during the handshake and confirms the other's ask; the peer's
 * NDP Counts then keep its pure Acks out of the loss count. */
static void test_ndp_count(void)
{
	uint64_t now = 280000 * MS;
	uint8_t v[8];
	listener_and_request(now, 3000);
	CHECK(to_server.n == 1);
	EXPECT_EQ(feat_opt(&to_server.p[0], &ph_c2s, DCCP_OPT_CHANGE_R, 7, v), 1);
	EXPECT_EQ(v[0], 1);
	to_s(&L, &S, &have_s, now);
	CHECK(to_client.n == 1); /* the Response: Confirm L(7, 1 [1]) and its own Change R(7, 1) */
	EXPECT_EQ(feat_opt(&to_client.p[0], &ph_s2c, DCCP_OPT_CONFIRM_L, 7, v), 2);
	EXPECT(v[0] == 1 && v[1] == 1);
	EXPECT_EQ(feat_opt(&to_client.p[0], &ph_s2c, DCCP_OPT_CHANGE_R, 7, v), 1);
	EXPECT_EQ(v[0], 1);
	to_c(&C, now + MS);
	CHECK(to_server.n == 1); /* the client's Ack confirms it */
	EXPECT_EQ(feat_opt(&to_server.p[0], &ph_c2s, DCCP_OPT_CONFIRM_L, 7, v), 2);
	EXPECT(v[0] == 1 && v[1] == 1);
	CHECK(to_s(&L, &S, &have_s, now + 2 * MS));
	/* the server's first packet, an Ack after its Response, says so */
	CHECK(to_client.n >= 1);
	struct dccp_hdr h;
	struct dccp_opts o;
	CHECK(parse(&to_client.p[0], &ph_s2c, &h));
	CHECK(dccp_opts_parse(&h, to_client.p[0].b, 0, &o, NULL) == DCCP_OK);
	EXPECT(o.has_ndp && o.ndp_count == 1);
	to_c(&C, now + 3 * MS);
	EXPECT_EQ(C.state, DCCP_S_OPEN);

	/* The client's pure Acks (for the server's data) between its data
	 * packets, with losses; the server's count of lost data must be exact:
	 *   0: Acks all lost, then data       (the data's NDP Count covers them)
	 *   1: Acks, one data lost, data      (the Acks that arrived, with
	 *      their own NDP Counts, cover the ones lost)
	 *   2: data lost between Acks that arrived and Acks lost
	 * (Acks lost, then data lost, then data: no NDP Count tells which of
	 * the lost was data, §7.7; counted as data, the count's one blind spot) */
	uint64_t seq;
	to_server.n = 0;
	CHECK_OK(dccp_conn_send(&C, "a", 1, now + 4 * MS, &seq));
	to_s(&L, &S, &have_s, now + 4 * MS);
	uint64_t t = now + 5 * MS;
	to_client.n = 0;
	for (unsigned round = 0; round < 3; round++) {
		unsigned sent_acks = 0;
		for (unsigned part = 0; part < 2; part++) {
			uint64_t before = C.ndp_run;
			for (int i = 0; i < 6; i++, t += MS) {
				CHECK_OK(dccp_conn_send(&S, "s", 1, t, &seq));
				to_c(&C, t);
				dccp_conn_timer(&C, t);
			}
			EXPECT(C.ndp_run > before);
			EXPECT_EQ(to_server.n, (unsigned)(C.ndp_run - before));
			sent_acks += to_server.n;
			if (round == 0 || (round == 2 && part == 1))
				to_server.n = 0; /* lost */
			else
				to_s(&L, &S, &have_s, t);
			if (round > 0 && part == 0) { /* a data packet between, lost */
				CHECK_OK(dccp_conn_send(&C, "b", 1, t, &seq));
				to_server.n = 0;
			}
		}
		EXPECT(sent_acks >= 2);
		CHECK_OK(dccp_conn_send(&C, "c", 1, t, &seq));
		to_s(&L, &S, &have_s, t);
		EXPECT_EQ(S.st.received, (uint64_t)round + 2);
		EXPECT_EQ(S.st.rx_lost, (uint64_t)round);
	}
	close_pair();
}

static void test_reset(void)
{
	uint64_t now = 300000 * MS;
	open_pair(now);
	dccp_conn_reset(&S, DCCP_RESET_ABORTED, now + MS);
	EXPECT_EQ(S.state, DCCP_S_CLOSED);
	to_c(&C, now + MS);
	EXPECT_EQ(C.state, DCCP_S_CLOSED);
	EXPECT_EQ(C.st.reset_code_rx, DCCP_RESET_ABORTED);
	/* a closed connection answers with Reset 3 and accepts nothing */
	uint64_t seq;
	EXPECT_EQ(dccp_conn_send(&C, "x", 1, now, &seq), -ENOTCONN);
	close_pair();

	/* no listener answer: the Request is repeated with backoff, then given up */
	to_server.n = 0;
	struct dccp_conn_params cp = params(40000, 5001);
	cp.ph_out = ph_c2s;
	dccp_conn_connect(&C, &cp, &cenv, 5, now);
	uint64_t t = now, gaps[3];
	for (int i = 0; i < 3; i++) {
		uint64_t next = dccp_conn_next_timer(&C);
		gaps[i] = next - t;
		t = next;
		dccp_conn_timer(&C, t);
	}
	EXPECT(gaps[1] == 2 * gaps[0] && gaps[2] == 2 * gaps[1]);
	/* RFC 4340 §8.1.1: the first retransmission "after approximately one second" */
	EXPECT_EQ(gaps[0], 1000 * MS);
	EXPECT_EQ(to_server.n, 4u);
	for (int i = 0; i < 20 && C.state == DCCP_S_REQUEST; i++)
		dccp_conn_timer(&C, dccp_conn_next_timer(&C));
	EXPECT_EQ(C.state, DCCP_S_CLOSED);
	dccp_conn_free(&C);
}

/*
 * One round of the Ack Ratio test: the client sends what its window allows
 * (at most 1024 packets), the server reads them and acks; drop_acks: every
 * second of the server's Acks is lost, silent: all are.  Counts the
 * client's data packets, its DataAcks and the server's Acks.
 */
struct ar_count {
	uint64_t data, dataacks, acks, client_acks;
	uint64_t changes_on_data, changes_on_acks; /* the client's Change L(Ack Ratio) */
	uint64_t changes_to_1;			   /* ... of them Change L(Ack Ratio, 1) */
};

/* The value of the packet's Change L(Ack Ratio) (-1: none). */
static int64_t ratio_change(const struct pkt *p, const struct dccp_hdr *h)
{
	struct dccp_opts o;
	if (dccp_opts_parse(h, p->b, 0, &o, NULL) != DCCP_OK)
		return -1;
	for (unsigned i = 0; i < o.n; i++)
		if (o.opt[i].type == DCCP_OPT_CHANGE_L && o.opt[i].len >= 1 &&
		    o.opt[i].data[0] == DCCP_F_ACK_RATIO) {
			int64_t v = 0;
			for (unsigned k = 1; k < o.opt[i].len; k++)
				v = v << 8 | o.opt[i].data[k];
			return v;
		}
	return -1;
}

static void ar_round(uint64_t now, bool drop_acks, bool silent, struct ar_count *n)
{
	static const char d[100];
	uint64_t wake, seq;
	dccp_conn_timer(&C, now);
	uint32_t b = dccp_conn_budget(&C, now, &wake);
	for (uint32_t i = 0; i < b && i < 1024; i++)
		CHECK_OK(dccp_conn_send(&C, d, sizeof(d), now, &seq));
	for (unsigned i = 0; i < to_server.n; i++) { /* in order, without q_pop()'s memmove */
		struct dccp_hdr h;
		CHECK(parse(&to_server.p[i], &ph_c2s, &h));
		n->data += h.type == DCCP_DATA || h.type == DCCP_DATAACK;
		n->dataacks += h.type == DCCP_DATAACK;
		n->client_acks += h.type == DCCP_ACK;
		int64_t v = ratio_change(&to_server.p[i], &h);
		if (v >= 0) {
			n->changes_on_data += h.type == DCCP_DATAACK;
			n->changes_on_acks += h.type == DCCP_ACK;
			n->changes_to_1 += v == 1;
		}
		dccp_conn_input(&S, to_server.p[i].b, to_server.p[i].len, &h, now);
	}
	to_server.n = 0;
	struct dccp_rxpkt r;
	while (dccp_conn_pop(&S, &r))
		free(r.data);
	dccp_conn_timer(&S, now + MS / 2); /* the delayed-ack timer, if it is due */
	for (unsigned i = 0; i < to_client.n; i++) {
		struct dccp_hdr h;
		CHECK(parse(&to_client.p[i], &ph_s2c, &h));
		n->acks += h.type == DCCP_ACK;
		if (!silent && !(drop_acks && i % 2))
			dccp_conn_input(&C, to_client.p[i].b, to_client.p[i].len, &h, now + MS / 2);
	}
	to_client.n = 0;
}

static void test_ack_ratio(void)
{
	uint64_t now = 400000 * MS;
	open_pair(now);
	EXPECT_EQ(AR->in_force, 2u); /* the feature's default (RFC 4340 §11.3) */
	/* a clean path: the window grows to its maximum, the ratio with it
	 * (cwnd / 32), renegotiated a few times only */
	struct ar_count n = { 0 };
	for (int i = 0; i < 300; i++)
		ar_round(now += MS, false, false, &n);
	struct dccp_ccid_tx_stats st;
	C.txo->stats(C.tx, &st);
	EXPECT_EQ(st.cwnd, 1024u);
	if (!EXPECT(AR->in_force == 32 && AR->pending == 0))
		fprintf(stderr, "  clean: ack ratio %u (pending %u)\n", AR->in_force, AR->pending);
	if (!EXPECT(C.st.ack_ratio_changes >= 3 && C.st.ack_ratio_changes <= 12))
		fprintf(stderr, "  %llu changes\n", (unsigned long long)C.st.ack_ratio_changes);
	/* each Change on one packet: a DataAck (the peer's window for its
	 * numbers, 500, is more than twice the ~pipe / R Acks it sends an RTT) */
	if (!EXPECT(n.client_acks == 0 && n.changes_on_data == C.st.ack_ratio_changes))
		fprintf(stderr, "  %llu Acks, %llu DataAcks with a Change, %llu Changes\n",
			(unsigned long long)n.client_acks, (unsigned long long)n.changes_on_data,
			(unsigned long long)C.st.ack_ratio_changes);
	/* obeyed: about one Ack per 32 data packets now */
	n = (struct ar_count){ 0 };
	for (int i = 0; i < 20; i++)
		ar_round(now += MS, false, false, &n);
	if (!EXPECT(n.data >= 10000 && n.acks * 28 <= n.data && n.acks * 36 >= n.data))
		fprintf(stderr, "  clean: %llu Acks for %llu packets\n", (unsigned long long)n.acks,
			(unsigned long long)n.data);
	/* half the Acks lost for 3 rounds (RTTs): §6.1.2 doubles the ratio
	 * after each such window (above the floor) */
	uint32_t most = 0;
	for (int i = 0; i < 3; i++) {
		ar_round(now += MS, true, false, &n);
		most = AR->in_force > most ? AR->in_force : most;
	}
	if (!EXPECT(most >= 64))
		fprintf(stderr, "  lossy: ack ratio up to %u\n", most);
	/* clean again: -1 a window (cwnd / (R^2 - R) < 1) back to the floor */
	for (int i = 0; i < 300; i++)
		ar_round(now += MS, false, false, &n);
	if (!EXPECT_EQ(AR->in_force, 32u))
		fprintf(stderr, "  clean again: ratio %u\n", AR->in_force);
	/* the peer's window for its numbers is 32 now (Linux's smallest): at
	 * most 32 / 4 = 8 Acks a window (1024 / 8 = 128), and the Change goes
	 * on an Ack of its own (a DataAck's Acknowledgement Number could be
	 * older than the ~32 Acks the peer sends an RTT allow) */
	uint64_t w_rx = C.s.w_rx;
	C.s.w_rx = 32;
	n = (struct ar_count){ 0 };
	for (int i = 0; i < 10; i++)
		ar_round(now += MS, false, false, &n);
	if (!EXPECT(AR->in_force == 128 && n.changes_on_acks >= 1 && n.changes_on_data == 0))
		fprintf(stderr, "  peer window 32: ratio %u, Changes on %llu Acks, %llu DataAcks\n",
			AR->in_force, (unsigned long long)n.changes_on_acks,
			(unsigned long long)n.changes_on_data);
	C.s.w_rx = w_rx;
	for (int i = 0; i < 10; i++)
		ar_round(now += MS, false, false, &n);
	EXPECT_EQ(AR->in_force, 32u);
	/* the receiver goes silent: the RTO takes the window to 1 and the
	 * ratio wanted to 1 (ceil(cwnd / 2)) at once, without waiting an RTT,
	 * so that a single packet draws an Ack again */
	for (int i = 0; i < 1500 && AR->pending != 1; i++)
		ar_round(now += MS, false, true, &n);
	C.txo->stats(C.tx, &st);
	EXPECT_EQ(st.cwnd, 1u);
	EXPECT_EQ(AR->pending, 1u);
	/* the path is back: the single packets of the restart draw Acks (the
	 * Confirm rides on one) and the window grows again */
	n = (struct ar_count){ 0 };
	for (int i = 0; i < 2000 && AR->in_force != 1; i++)
		ar_round(now += MS, false, false, &n);
	if (!EXPECT(AR->in_force == 1 && n.acks >= 1))
		fprintf(stderr, "  after RTO: ratio %u, %llu Acks\n", AR->in_force,
			(unsigned long long)n.acks);
	for (int i = 0; i < 10; i++)
		ar_round(now += MS, false, false, &n);
	C.txo->stats(C.tx, &st);
	EXPECT(st.cwnd > 4);
	close_pair();
}

/*
 * Issue 19: after an RTO the window is one packet, and a receiver that acks
 * every R data packets (Linux 6.1: no delayed-ack timer) acks it only once
 * it has our Change L(Ack Ratio 1).  That Change goes on the first packet
 * after the RTO even when another Change went less than 2 RTTs + 20 ms ago
 * and is still unconfirmed (it waited for that before).
 */
static void test_ack_ratio_after_rto(void)
{
	uint64_t now = 500000 * MS;
	open_pair(now);
	struct ar_count n = { 0 };
	for (int i = 0; i < 300; i++)
		ar_round(now += MS, false, false, &n);
	EXPECT_EQ(AR->in_force, 32u);
	/* silent: every round a Change has just gone out, unconfirmed */
	n = (struct ar_count){ 0 };
	struct dccp_ccid_tx_stats st = { .cwnd = 2 };
	for (int i = 0; i < 3000 && st.cwnd != 1; i++) {
		AR->pending = 64;
		AR->at = now;
		ar_round(now += MS, false, true, &n);
		C.txo->stats(C.tx, &st);
	}
	EXPECT_EQ(st.cwnd, 1u);
	if (!EXPECT(n.changes_to_1 >= 1 && n.changes_on_data >= 1))
		fprintf(stderr, "  after the RTO: %llu Changes to 1 on %llu DataAcks\n",
			(unsigned long long)n.changes_to_1, (unsigned long long)n.changes_on_data);
	close_pair();
}

/* gc_dccp_opts.ack_ratio: the application's ratio replaces cwnd / 32 on a
 * clean path; lost Acks still raise it, and it comes back to it. */
static void test_ack_ratio_fixed(void)
{
	uint64_t now = 800000 * MS;
	struct ar_count n = { 0 };

	/* 2, the feature's default: never renegotiated, an Ack per 2 */
	client_ack_ratio = 2;
	open_pair(now);
	for (int i = 0; i < 300; i++)
		ar_round(now += MS, false, false, &n);
	EXPECT_EQ(AR->in_force, 2u);
	EXPECT_EQ(C.st.ack_ratio_changes, 0u);
	n = (struct ar_count){ 0 };
	for (int i = 0; i < 20; i++)
		ar_round(now += MS, false, false, &n);
	if (!EXPECT(n.data >= 10000 && n.acks * 2 <= n.data + 20 && n.acks * 2 >= n.data - 20))
		fprintf(stderr, "  ratio 2: %llu Acks for %llu packets\n",
			(unsigned long long)n.acks, (unsigned long long)n.data);
	close_pair();

	/* 4: asked for once the window allows it, obeyed, raised by lost
	 * Acks and back to 4 */
	client_ack_ratio = 4;
	open_pair(now += 1000 * MS);
	for (int i = 0; i < 300; i++)
		ar_round(now += MS, false, false, &n);
	EXPECT_EQ(AR->in_force, 4u);
	n = (struct ar_count){ 0 };
	for (int i = 0; i < 20; i++)
		ar_round(now += MS, false, false, &n);
	if (!EXPECT(n.data >= 10000 && n.acks * 4 <= n.data + 40 && n.acks * 4 >= n.data - 40))
		fprintf(stderr, "  ratio 4: %llu Acks for %llu packets\n",
			(unsigned long long)n.acks, (unsigned long long)n.data);
	uint32_t most = 0;
	for (int i = 0; i < 3; i++) {
		ar_round(now += MS, true, false, &n);
		most = AR->in_force > most ? AR->in_force : most;
	}
	EXPECT(most >= 8);
	for (int i = 0; i < 300; i++)
		ar_round(now += MS, false, false, &n);
	EXPECT_EQ(AR->in_force, 4u);
	close_pair();
	client_ack_ratio = 0;
}

/* ---- issue 19: what Linux 6.1 showed ------------------------------------ */

/* A packet of type from the client's side, built by hand with the client
 * connection's numbers (a peer that is not ours: Timestamps, DataAcks). */
static struct pkt client_pkt(uint8_t type, const uint8_t *opts, size_t optlen, const void *d, size_t dlen)
{
	struct pkt p;
	struct dccp_hdr h = { .sport = 40000,
			      .dport = 5001,
			      .type = type,
			      .x = true,
			      .has_ack = dccp_type_has_ack(type),
			      .ack = C.s.gsr };
	C.s.gss = dccp_seq_add(C.s.gss, 1);
	h.seq = C.s.gss;
	ssize_t n = dccp_build(p.b, sizeof(p.b), &h, opts, optlen, d, dlen, &ph_c2s);
	CHECK(n > 0);
	p.len = (size_t)n;
	return p;
}

/* A listener on port 5001 (CCID 2), nothing queued. */
static void fresh_listener(void)
{
	struct dccp_conn_params lp = params(5001, 0);
	lp.ph_out = ph_s2c;
	dccp_listener_init(&L, &lp);
	to_client.n = to_server.n = 0;
}

/* A client packet of type with a Timestamp (ts) and a 1-byte payload d. */
static struct pkt ts_pkt(uint8_t type, uint32_t ts, const char *d)
{
	uint8_t ob[8];
	struct dccp_obuf b;
	dccp_obuf_init(&b, ob, sizeof(ob));
	dccp_opt_put_timestamp(&b, ts);
	dccp_obuf_pad(&b);
	return client_pkt(type, ob, b.len, d, 1);
}

/* A Request from port 40000 with the options in b (padded here). */
static struct pkt request_with(struct dccp_obuf *b, uint64_t seq)
{
	struct pkt p;
	dccp_obuf_pad(b);
	CHECK(!b->overflow);
	struct dccp_hdr h = { .sport = 40000, .dport = 5001, .type = DCCP_REQUEST, .x = true, .seq = seq };
	ssize_t n = dccp_build(p.b, sizeof(p.b), &h, b->p, b->len, NULL, 0, &ph_c2s);
	CHECK(n > 0);
	p.len = (size_t)n;
	return p;
}

static void deliver_s(const struct pkt *p, uint64_t now)
{
	struct dccp_hdr h;
	CHECK(parse(p, &ph_c2s, &h));
	dccp_conn_input(&S, p->b, p->len, &h, now);
}

/* The Timestamp Echo options of p: how many, the last one's value and elapsed. */
static unsigned ts_echoes(const struct pkt *p, const struct dccp_pseudo *ph, uint32_t *echo,
			  uint32_t *elapsed)
{
	struct dccp_hdr h;
	struct dccp_opts o;
	unsigned n = 0;
	CHECK(parse(p, ph, &h));
	CHECK(dccp_opts_parse(&h, p->b, DCCP_PF_ESTABLISHED, &o, NULL) == DCCP_OK);
	for (unsigned i = 0; i < o.n; i++)
		n += o.opt[i].type == DCCP_OPT_TS_ECHO;
	*echo = o.ts_echo;
	*elapsed = o.ts_echo_elapsed;
	return n;
}

/*
 * RFC 4340 §13.3: every Timestamp is echoed once, with the time it was held,
 * on whichever packet answers it: the listener's Response (Linux's CCID 3
 * client needs it for its first RTT, or it starts at 1 packet a second),
 * the connection's next packet (data or Ack), CCID 3's feedback once only.
 */
static void test_timestamp_echo(void)
{
	uint64_t now = 900000 * MS;
	uint8_t ob[128], v[8];
	struct dccp_obuf b;
	uint32_t echo, el;

	/* a Request with a Timestamp, as Linux's: the Response echoes it */
	fresh_listener();
	dccp_obuf_init(&b, ob, sizeof(ob));
	uint8_t two = 2;
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_CCID, &two, 1);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_CCID, &two, 1);
	dccp_opt_put_timestamp(&b, 0x11223344);
	struct pkt req = request_with(&b, 7000);
	to_client.n = 0;
	feed_listener(&req, &ph_c2s, &ph_s2c, now);
	CHECK(to_client.n == 1);
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 1u);
	EXPECT(echo == 0x11223344 && el == 0);
	EXPECT_EQ(feat_opt(&to_client.p[0], &ph_s2c, DCCP_OPT_CONFIRM_L, DCCP_F_CCID, v), 2);
	/* no Timestamp, no echo */
	dccp_obuf_init(&b, ob, sizeof(ob));
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_CCID, &two, 1);
	req = request_with(&b, 7100);
	to_client.n = 0;
	feed_listener(&req, &ph_c2s, &ph_s2c, now);
	CHECK(to_client.n == 1);
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 0u);

	/* in a connection: the next packet echoes it with the time held, once:
	 * the Ack the first data packet draws at once (held 0) */
	open_pair(now);
	struct pkt p = ts_pkt(DCCP_DATAACK, 0xabcdef00, "d");
	to_client.n = 0;
	deliver_s(&p, now + 10 * MS);
	CHECK(to_client.n == 1);
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 1u);
	EXPECT(echo == 0xabcdef00 && el == 0);
	/* (the Ack that draws carries no Ack Vector yet: the server acks a
	 * data packet before it counts it received; the next packet makes
	 * up for it) */
	p = client_pkt(DCCP_ACK, NULL, 0, NULL, 0);
	deliver_s(&p, now + 10 * MS);
	/* a Timestamp on a data packet that draws no Ack at once (Ack Ratio
	 * 2), answered by data 3.5 ms later (350 hundredths of ms), once */
	p = ts_pkt(DCCP_DATAACK, 0xabcdef01, "e");
	to_client.n = 0;
	deliver_s(&p, now + 10 * MS);
	EXPECT_EQ(to_client.n, 0u);
	uint64_t seq;
	CHECK_OK(dccp_conn_send(&S, "s", 1, now + 10 * MS + 3500 * 1000, &seq));
	CHECK_OK(dccp_conn_send(&S, "t", 1, now + 11 * MS + 3500 * 1000, &seq));
	CHECK(to_client.n == 2);
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 1u);
	EXPECT(echo == 0xabcdef01 && el == 350);
	EXPECT_EQ(ts_echoes(&to_client.p[1], &ph_s2c, &echo, &el), 0u);
	/* the Timestamp of the Ack that completes the handshake: echoed on
	 * the server's first packet */
	close_pair();
	listener_and_request(now, 4000);
	to_s(&L, &S, &have_s, now);
	to_c(&C, now + MS);
	CHECK(to_server.n == 1);
	struct pkt ack = q_pop(&to_server);
	C.s.gss = dccp_seq_sub(C.s.gss, 1); /* the same Ack again, with a Timestamp */
	dccp_obuf_init(&b, ob, sizeof(ob));
	dccp_opt_put(&b, DCCP_OPT_INIT_COOKIE, C.cookie, C.cookie_len);
	dccp_opt_put_timestamp(&b, 0x5555);
	dccp_obuf_pad(&b);
	ack = client_pkt(DCCP_ACK, ob, b.len, NULL, 0);
	to_client.n = 0;
	CHECK(feed_listener(&ack, &ph_c2s, &ph_s2c, now + 2 * MS));
	CHECK(to_client.n == 1); /* the server's Ack that leaves PARTOPEN */
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 1u);
	EXPECT_EQ(echo, 0x5555u);
	dccp_conn_free(&C);

	/* CCID 3: the receiver's feedback echoes the Timestamp itself; the
	 * connection adds no second echo */
	pair_ccid = 3;
	open_pair(now + 1000 * MS);
	p = ts_pkt(DCCP_DATAACK, 0x777, "d");
	to_client.n = 0;
	deliver_s(&p, now + 1010 * MS);
	CHECK(to_client.n >= 1); /* the first data packet draws feedback at once */
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 1u);
	EXPECT_EQ(echo, 0x777u);
	pair_ccid = 2;
	close_pair();
}

/*
 * Acks of Acks (RFC 4340 §11.4): a peer that acknowledges our Acks (Linux
 * sends DataAcks whose Acknowledgement Number is the last of our packets
 * it saw) lets our CCID 2 receiver forget what those Acks described, so
 * each Ack Vector covers about the packets since the last Ack the peer got.
 * Without it, every Ack described the whole 4096-packet window.  Every
 * vector stays true (checked packet by packet against what was delivered).
 */
static void test_ack_vector_pruned(void)
{
	uint64_t now = 1000000 * MS;
	enum { N = 6000 };
	static uint8_t got[N];
	open_pair(now);
	uint64_t first = dccp_seq_add(C.s.gss, 1), most = 0, acks = 0, wrong = 0;
	memset(got, 0, sizeof(got));
	for (unsigned i = 0; i < N; i++) {
		uint64_t t = now + (i + 1) * MS;
		struct pkt p = client_pkt(DCCP_DATAACK, NULL, 0, "data", 4);
		if (i % 10 != 3) { /* every tenth lost */
			got[i] = 1;
			deliver_s(&p, t);
		}
		dccp_conn_timer(&S, t);
		struct dccp_rxpkt r;
		while (dccp_conn_pop(&S, &r))
			free(r.data);
		for (unsigned k = 0; k < to_client.n; k++) {
			struct dccp_hdr h;
			struct dccp_opts o;
			CHECK(parse(&to_client.p[k], &ph_s2c, &h));
			CHECK(dccp_opts_parse(&h, to_client.p[k].b, DCCP_PF_ESTABLISHED, &o, NULL) ==
			      DCCP_OK);
			if (dccp_seq_after(h.seq, C.s.gsr))
				C.s.gsr = h.seq; /* the next DataAck acknowledges it */
			if (h.type != DCCP_ACK)
				continue;
			acks++;
			struct dccp_vec_iter it;
			struct dccp_run run;
			uint64_t span = 0;
			dccp_ackvec_iter(&it, &o, h.ack, first);
			while (dccp_vec_next(&it, &run)) {
				span += run.len;
				for (uint64_t q = run.lo;; q = dccp_seq_add(q, 1)) {
					int64_t at = dccp_seq_delta(q, first);
					if (at >= 0 && at < N &&
					    got[at] != (run.state == DCCP_ACK_RECEIVED))
						wrong++;
					if (q == run.hi)
						break;
				}
			}
			most = span > most ? span : most;
		}
		to_client.n = 0;
	}
	EXPECT(acks >= N / 4);
	EXPECT_EQ(wrong, 0u);
	/* Ack Ratio 2: an Ack about every 2 packets, each acknowledged by the
	 * next DataAck: a vector spans a few packets, not thousands */
	if (!EXPECT(most <= 16))
		fprintf(stderr, "  an Ack Vector described %llu packets\n", (unsigned long long)most);
	close_pair();
}

/*
 * RFC 5596 §3.1 (§8.5 step 2 updated): a DCCP-Listen draws no Reset, from
 * the listener, a closed connection, or a client in REQUEST (Linux 6.1
 * drops it silently as an unknown type).
 */
static void test_listen_packet_silent(void)
{
	uint64_t now = 1100000 * MS;
	struct pkt p;
	struct dccp_hdr h = { .sport = 40000, .dport = 5001, .type = DCCP_LISTEN, .x = true, .seq = 9 };
	ssize_t n = dccp_build(p.b, sizeof(p.b), &h, NULL, 0, NULL, 0, &ph_c2s);
	CHECK(n > 0);
	p.len = (size_t)n;
	fresh_listener();
	to_client.n = 0;
	EXPECT(!feed_listener(&p, &ph_c2s, &ph_s2c, now));
	EXPECT_EQ(to_client.n, 0u);
	EXPECT_EQ(L.resets, 0u);
	/* but a Data packet there still gets its Reset(No Connection) */
	struct dccp_hdr hd = { .sport = 40000, .dport = 5001, .type = DCCP_DATA, .x = true, .seq = 10 };
	struct pkt pd;
	n = dccp_build(pd.b, sizeof(pd.b), &hd, NULL, 0, "x", 1, &ph_c2s);
	CHECK(n > 0);
	pd.len = (size_t)n;
	EXPECT(!feed_listener(&pd, &ph_c2s, &ph_s2c, now));
	EXPECT_EQ(to_client.n, 1u);
	/* a client in REQUEST, and one CLOSED */
	listener_and_request(now, 500);
	to_server.n = 0;
	struct pkt lc;
	struct dccp_hdr hl = { .sport = 5001, .dport = 40000, .type = DCCP_LISTEN, .x = true, .seq = 77 };
	n = dccp_build(lc.b, sizeof(lc.b), &hl, NULL, 0, NULL, 0, &ph_s2c);
	CHECK(n > 0);
	lc.len = (size_t)n;
	to_client.n = 0;
	memcpy(&to_client.p[0], &lc, sizeof(lc));
	to_client.n = 1;
	to_c(&C, now + MS);
	EXPECT_EQ(C.state, DCCP_S_REQUEST);
	EXPECT_EQ(to_server.n, 0u);
	dccp_conn_reset(&C, DCCP_RESET_CLOSED, now + 2 * MS);
	to_server.n = 0;
	to_client.p[0] = lc;
	to_client.n = 1;
	to_c(&C, now + 3 * MS);
	EXPECT_EQ(to_server.n, 0u);
	dccp_conn_free(&C);
}

/*
 * A Change R(CCID) with no value we accept (RFC 4340 §6.3.1): an empty
 * Confirm L(CCID) (§6.6.7, as Linux 6.1), not Reset(7); a Mandatory one
 * draws Reset(6) (§6.6.9).  The Response stays within the bound of the
 * Request flood test, however many such Changes and Timestamps the
 * Request carries (no amplification).
 */
static void test_ccid_no_agreement(void)
{
	uint64_t now = 1200000 * MS;
	uint8_t ob[512], v[8];
	struct dccp_obuf b;
	fresh_listener();
	dccp_obuf_init(&b, ob, sizeof(ob));
	uint8_t three = 3;
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_CCID, &three, 1);
	struct pkt req = request_with(&b, 100);
	to_client.n = 0;
	feed_listener(&req, &ph_c2s, &ph_s2c, now);
	CHECK(to_client.n == 1);
	struct dccp_hdr h;
	CHECK(parse(&to_client.p[0], &ph_s2c, &h));
	EXPECT_EQ(h.type, DCCP_RESPONSE);
	EXPECT_EQ(feat_opt(&to_client.p[0], &ph_s2c, DCCP_OPT_CONFIRM_L, DCCP_F_CCID, v), 0);
	EXPECT_EQ(L.resets, 0u);
	/* Mandatory: Reset(6) */
	dccp_obuf_init(&b, ob, sizeof(ob));
	dccp_opt_put(&b, DCCP_OPT_MANDATORY, NULL, 0);
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_CCID, &three, 1);
	req = request_with(&b, 200);
	to_client.n = 0;
	feed_listener(&req, &ph_c2s, &ph_s2c, now);
	CHECK(to_client.n == 1);
	CHECK(parse(&to_client.p[0], &ph_s2c, &h));
	EXPECT(h.type == DCCP_RESET && h.reset_code == DCCP_RESET_MANDATORY_ERROR);
	/* many of them, and many Timestamps: one echo, small Confirms */
	dccp_obuf_init(&b, ob, sizeof(ob));
	for (int i = 0; i < 30; i++) {
		dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_R, DCCP_F_CCID, &three, 1);
		dccp_opt_put_timestamp(&b, (uint32_t)i);
	}
	req = request_with(&b, 300);
	to_client.n = 0;
	to_client.max_len = 0;
	feed_listener(&req, &ph_c2s, &ph_s2c, now);
	CHECK(to_client.n == 1);
	uint32_t echo, el;
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 1u);
	EXPECT_EQ(echo, 29u);
	EXPECT(to_client.max_len <= req.len + DCCP_COOKIE_LEN + 2 + 24);
}

/*
 * RFC 4340 §5.8: an option whose length makes no sense for its type is
 * ignored (and counted), the packet is not: a Timestamp of 5 bytes is
 * neither echoed nor a reason to drop the data it came with.
 */
static void test_bad_option_length_ignored(void)
{
	uint64_t now = 1300000 * MS;
	open_pair(now);
	uint8_t ob[8] = { DCCP_OPT_TIMESTAMP, 7, 1, 2, 3, 4, 5, 0 };
	uint64_t before = S.err.n[DCCP_DROP_OPT_SIZE];
	struct pkt p = client_pkt(DCCP_DATAACK, ob, sizeof(ob), "data", 4);
	deliver_s(&p, now + MS);
	EXPECT_EQ(S.st.received, 1u);
	EXPECT_EQ(S.err.n[DCCP_DROP_OPT_SIZE], before + 1);
	EXPECT(!S.ts_pending);
	uint64_t seq;
	uint32_t echo, el;
	to_client.n = 0;
	CHECK_OK(dccp_conn_send(&S, "s", 1, now + 2 * MS, &seq));
	CHECK(to_client.n == 1);
	EXPECT_EQ(ts_echoes(&to_client.p[0], &ph_s2c, &echo, &el), 0u);
	close_pair();
}

/*
 * The connection's clock never goes back.  The engine's threads take their
 * time before they wait for the connection's lock, so a packet can be fed
 * in with a time before the feedback another thread just sent.  CCID 3's
 * receiver measures its Receive Rate over now - the last feedback: a time
 * that went back wrapped to a rate of 0, which pins the sender's rate at
 * s/t_mbi (8 B/s for 500 B packets) until the connection times out.
 */
static unsigned cc3_feedbacks; /* packets with a Receive Rate the client got */

static unsigned cc3_feedback_to_c(uint64_t now)
{
	unsigned zero = 0;
	while (to_client.n) {
		struct pkt p = q_pop(&to_client);
		struct dccp_hdr h;
		struct dccp_opts o;
		CHECK(parse(&p, &ph_s2c, &h));
		CHECK(dccp_opts_parse(&h, p.b, DCCP_PF_ESTABLISHED, &o, NULL) == DCCP_OK);
		cc3_feedbacks += o.has_recv_rate;
		zero += o.has_recv_rate && o.recv_rate == 0;
		dccp_conn_input(&C, p.b, p.len, &h, now);
	}
	return zero;
}

static void test_clock_never_goes_back(void)
{
	uint64_t now = 1000 * MS, t = now + 10 * MS, seq;
	char d[500] = { 0 };
	unsigned zero = 0;
	pair_ccid = 3;
	open_pair(now);
	for (int i = 0; i < 40; i++) { /* the receiver learns an RTT */
		t += MS;
		CHECK_OK(dccp_conn_send(&C, d, sizeof(d), t, &seq));
		to_s(&L, &S, &have_s, t);
		dccp_conn_timer(&S, t);
		cc3_feedback_to_c(t);
	}
	/* one more packet; another thread's timer sends its feedback 5 ms on */
	t += MS;
	CHECK_OK(dccp_conn_send(&C, d, sizeof(d), t, &seq));
	to_s(&L, &S, &have_s, t);
	dccp_conn_timer(&S, t + 5 * MS);
	zero += cc3_feedback_to_c(t + 5 * MS);
	/* then a loss and three packets, read with the time taken before that
	 * feedback: the loss event's feedback goes at once */
	for (int i = 0; i < 4; i++) {
		CHECK_OK(dccp_conn_send(&C, d, sizeof(d), t + MS, &seq));
		if (i == 0)
			to_server.n = 0;
		to_s(&L, &S, &have_s, t + MS);
	}
	unsigned before = cc3_feedbacks;
	dccp_conn_timer(&S, t + MS);
	zero += cc3_feedback_to_c(t + 5 * MS);
	EXPECT(cc3_feedbacks > before);
	EXPECT_EQ(zero, 0u);
	close_pair();
	pair_ccid = 2;
}

/*
 * The client times its handshake, Request to Response, and CCID 2 takes it
 * as its first RTT sample: its first RTO is not the blind 1 s (what made a
 * lossy start stall for 1 + 2 + 4 s).  A Response to the latest Request times
 * it, retransmitted or not (each Request has its own number); one that
 * answers an earlier Request gives no sample.
 */
static uint64_t client_rtt(void)
{
	struct dccp_ccid_tx_stats st = { 0 };
	C.txo->stats(C.tx, &st);
	return st.rtt_ns;
}

static void handshake_rtt_case(bool answer_first)
{
	const uint64_t t0 = 5000 * MS;
	to_server.n = to_client.n = 0;
	have_s = false;
	struct dccp_conn_params lp = params(5001, 0);
	lp.ph_out = ph_s2c;
	dccp_listener_init(&L, &lp);
	struct dccp_conn_params cp = params(40000, 5001);
	cp.ph_out = ph_c2s;
	CHECK_OK(dccp_conn_connect(&C, &cp, &cenv, 1000, t0));
	if (answer_first) /* the listener answers Request 1 ... */
		to_s(&L, &S, &have_s, t0 + MS);
	else /* ... or Request 1 is lost */
		to_server.n = 0;
	uint64_t t1 = dccp_conn_timer(&C, t0 + 1000 * MS) ? t0 + 1000 * MS : 0;
	CHECK(t1 && C.state == DCCP_S_REQUEST);
	if (answer_first)
		to_server.n = 0; /* Request 2 lost; Request 1's Response arrives */
	else
		to_s(&L, &S, &have_s, t1 + 3 * MS);
	to_c(&C, t1 + 7 * MS);
	EXPECT_EQ(C.state, DCCP_S_PARTOPEN);
	EXPECT_EQ(client_rtt(), answer_first ? 0 : 7 * MS);
	dccp_conn_free(&C);
}

static void test_handshake_rtt(void)
{
	handshake_rtt_case(false);
	handshake_rtt_case(true);
	open_pair(0); /* the plain handshake: Response 1 ms after the Request */
	EXPECT_EQ(client_rtt(), MS);
	close_pair();
}

int main(void)
{
	setup_addrs();
	test_handshake_and_data();
	test_cookies();
	test_request_flood();
	test_windows_and_sync();
	test_midconnection_seqwin();
	test_partopen_mps();
	test_partopen_confirms_repeat();
	test_ndp_count();
	test_reset();
	test_ack_ratio();
	test_ack_ratio_after_rto();
	test_ack_ratio_fixed();
	test_timestamp_echo();
	test_ack_vector_pruned();
	test_listen_packet_silent();
	test_ccid_no_agreement();
	test_bad_option_length_ignored();
	test_clock_never_goes_back();
	test_handshake_rtt();
	return check_done("dccp_conn");
}
