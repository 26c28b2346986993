/* SPDX-License-Identifier: MIT */
/*
 * CCID 3 (lib/dccp/ccid3.c) on a simulated path (ccid_sim.h) and against
 * hand-made packets and feedback.  (The RFC 5348 §3.1 equation and the
 * §5.4 average themselves are checked in test_dccp_tfrc.c.)
 *   - with every 100th packet lost, 100 ms RTT and s = 1000: p = 0.01 and X
 *     converges to the equation's 1000 / (0.1 * f(0.01)) = 112332.2344 B/s
 *     (f(0.01) = 0.0890216424, see test_dccp_tfrc.c);
 *   - the nofeedback timer halves X, in slow start and after loss;
 *   - at 100 us RTT the send interval is at least 1 ns, never 0;
 *   - the receiver: losses after 3 later packets, NDP Count gaps are not
 *     losses, losses within one RTT are one event, Receive Rate covers at
 *     least an RTT, and the Loss Intervals /
 *     Loss Event Rate it sends weigh the intervals as worked out below;
 *   - a drop-tail bottleneck is filled, one overflow burst is one loss event;
 *   - random loss both ways: X stays positive and finite, every ack reported once;
 *   - hostile feedback: unsent Acknowledgement Numbers, Elapsed Time longer
 *     than the packet's age, Loss Intervals of length 0.
 *
 * Weighting by hand (RFC 5348 §5.4, weights 1 1 1 1 .8 .6 .4 .2, sum 6):
 * closed intervals newest first 80 70 60 50 40 30 20 10, open interval 5:
 *   I_tot1 = 80+70+60+50 + .8*40 + .6*30 + .4*20 + .2*10 = 260+32+18+8+2 = 320
 *   I_tot0 = 5+80+70+60 + .8*50 + .6*40 + .4*30 + .2*20 = 215+40+24+12+4 = 295
 *   I_mean = max(295, 320) / 6 = 53.3333..., p = 0.01875,
 *   Loss Event Rate = ceil(1 / p) = 54.
 * With the open interval at 400 instead: I_tot0 = 400+210+40+24+12+4 = 690,
 *   I_mean = 115, p = 1/115.
 */
#include <math.h>

#include "check.h"
#include "ccid_sim.h"
#include "dccp/ccid3.h"
#include "dccp/tfrc.h"

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull

static struct dccp_ccid_tx_stats txs(const struct dccp_ccid_tx_ops *o, void *tx)
{
	struct dccp_ccid_tx_stats st;
	o->stats(tx, &st);
	return st;
}

static bool near(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void convergence(void)
{
	struct sim s;

	sim_init(&s, DCCP_CCID3, 1000, 7);
	s.owd_ns = 50 * MS;
	s.drop_every = 100;
	sim_run(&s, 100 * SEC);
	/* X is the equation's except for the RTT after each loss event, when
	 * §4.3 caps it at 0.85 X_recv: look at the median of 200 samples */
	static double xs[200];
	for (int k = 0; k < 200; k++) {
		sim_run(&s, s.now + 100 * MS);
		xs[k] = (double)txs(s.txo, s.tx).x_bps;
	}
	qsort(xs, 200, sizeof(xs[0]), cmp_double);
	struct dccp_ccid_tx_stats st = txs(s.txo, s.tx);
	double want = tfrc_x_bps(1000, 0.1, 0.01);
	bool ok = EXPECT(near(st.p, 0.01, 1e-9));
	ok &= EXPECT(near((double)st.rtt_ns, 100e6, 0.01));
	ok &= EXPECT(near(xs[100], want, 0.01));
	if (!ok)
		fprintf(stderr, "  p %.5f rtt %.3f ms median X %.0f B/s, want %.1f\n", st.p,
			(double)st.rtt_ns / 1e6, xs[100], want);
	EXPECT(near(want, 112332.234362993, 1e-9));
	/* the rate the path carried over the last 60 s agrees */
	uint64_t b0 = s.delivered_bytes;
	sim_run(&s, s.now + 60 * SEC);
	double got = (double)(s.delivered_bytes - b0) / 60.0;
	if (!EXPECT(near(got, want * 0.99, 0.05)))
		fprintf(stderr, "  delivered %.1f B/s\n", got);
	EXPECT_EQ(s.dup_reports + s.wrong_reports, 0);
	struct ccid3_rx_counters rc;
	dccp_ccid3_rx_counters(s.rx, &rc);
	EXPECT(rc.lost <= s.dropped_n && rc.lost + 1 >= s.dropped_n); /* the last may be pending */
	EXPECT_EQ(rc.loss_events, rc.lost);	     /* 100 packets apart: always > 1 RTT */
	EXPECT(near((double)rc.rtt_ns, 100e6, 0.1)); /* the receiver's, from CCVal */

	/* nofeedback: X halves at each expiry while nothing comes back */
	uint64_t x0 = txs(s.txo, s.tx).x_bps;
	uint64_t at = s.txo->next_timer(s.tx);
	EXPECT(at > s.now && at <= s.now + 400 * MS); /* max(4R, 2s/X) = 400 ms */
	s.txo->timer(s.tx, at - 1);
	EXPECT_EQ(txs(s.txo, s.tx).x_bps, x0);
	s.txo->timer(s.tx, at);
	uint64_t x1 = txs(s.txo, s.tx).x_bps;
	if (!EXPECT(near((double)x1, (double)x0 / 2.0, 0.02)))
		fprintf(stderr, "  X %llu -> %llu\n", (unsigned long long)x0, (unsigned long long)x1);
	s.txo->timer(s.tx, s.txo->next_timer(s.tx));
	EXPECT(near((double)txs(s.txo, s.tx).x_bps, (double)x1 / 2.0, 0.02));
	struct ccid3_tx_counters tc;
	dccp_ccid3_tx_counters(s.tx, &tc);
	EXPECT_EQ(tc.nofeedback, 2);
	sim_free(&s);
}

static void slow_start_nofeedback(void)
{
	const struct dccp_ccid_tx_ops *o = dccp_ccid_tx(DCCP_CCID3);
	struct dccp_ccid_env env = { .mps = 1000, .iss = SIM_ISS, .isr = SIM_ISR };
	void *tx = o->init(&env);
	uint64_t wake;

	CHECK(tx);
	EXPECT_EQ(o->budget(tx, 0, &wake), 1);
	o->sent(tx, SIM_ISS + 1, 1000, true, 0, NULL);
	/* §4.2: one packet per second before feedback */
	EXPECT_EQ(o->budget(tx, 0, &wake), 0);
	EXPECT_EQ(wake, SEC);
	EXPECT_EQ(txs(o, tx).x_bps, 1000);
	EXPECT_EQ(o->next_timer(tx), 2 * SEC); /* no RTT yet: 2 s */
	o->timer(tx, 2 * SEC);
	EXPECT_EQ(txs(o, tx).x_bps, 500);
	EXPECT_EQ(o->budget(tx, 2 * SEC - 1, &wake), 0); /* 500 B/s: 2 s after the last packet */
	EXPECT_EQ(o->budget(tx, 2 * SEC, &wake), 1);
	o->free(tx);
}

/* CCVal moves before any feedback (RFC 4342 §8.1, on the handshake's RTT or
 * RFC 4340 §3.4's 0.2 s): a receiver sends periodic feedback only when
 * CCVal moved more than 3 windows (§10.3), so a counter standing still until
 * the first feedback left a sender whose initial feedback was lost halving X
 * forever (seen against Linux 6.1 at 5 % loss). */
static void window_counter_before_feedback(void)
{
	const struct dccp_ccid_tx_ops *o = dccp_ccid_tx(DCCP_CCID3);
	struct dccp_ccid_env env = { .mps = 1000, .iss = SIM_ISS, .isr = SIM_ISR };
	uint8_t cc[4];

	void *tx = o->init(&env); /* the server: no handshake RTT, 0.2 s */
	CHECK(tx);
	o->sent(tx, SIM_ISS + 1, 1000, true, 5 * SEC, &cc[0]);
	o->sent(tx, SIM_ISS + 2, 1000, true, 5 * SEC + 50 * MS, &cc[1]);
	o->sent(tx, SIM_ISS + 3, 1000, true, 5 * SEC + 60 * MS, &cc[2]);
	o->sent(tx, SIM_ISS + 4, 1000, true, 6 * SEC, &cc[3]); /* 1 pps: a jump of 5 */
	EXPECT_EQ(cc[0], 0);
	EXPECT_EQ(cc[1], 1);
	EXPECT_EQ(cc[2], 1);
	EXPECT_EQ(cc[3], 6);
	o->free(tx);

	env.hs_rtt_ns = 4 * MS; /* the client: the handshake's 4 ms */
	tx = o->init(&env);
	CHECK(tx);
	o->sent(tx, SIM_ISS + 1, 1000, true, 0, &cc[0]);
	o->sent(tx, SIM_ISS + 2, 1000, true, 3 * MS, &cc[1]);
	o->sent(tx, SIM_ISS + 3, 1000, true, 1 * SEC, &cc[2]);
	EXPECT_EQ(cc[0], 0);
	EXPECT_EQ(cc[1], 3);
	EXPECT_EQ(cc[2], 8);
	o->free(tx);
}

/* Feedback options as the receiver module writes them, parsed back. */
static void parse_area(const uint8_t *area, size_t len, struct dccp_opts *op)
{
	struct dccp_hdr h = { .type = DCCP_ACK, .has_ack = true, .x = true };

	h.opt_len = (uint16_t)len;
	memset(op, 0, sizeof(*op));
	CHECK(dccp_opts_parse(&h, area, DCCP_PF_ESTABLISHED, op, NULL) == DCCP_OK);
}

static void put_opts(struct dccp_obuf *b, uint8_t *area, uint32_t elapsed, uint32_t inv_p, uint32_t xrecv)
{
	dccp_obuf_init(b, area, 256);
	dccp_opt_put_elapsed(b, elapsed);
	dccp_opt_put_u32(b, DCCP_OPT_LOSS_EVENT_RATE, inv_p);
	dccp_opt_put_u32(b, DCCP_OPT_RECEIVE_RATE, xrecv);
}

static void tiny_interval(void)
{
	const struct dccp_ccid_tx_ops *o = dccp_ccid_tx(DCCP_CCID3);
	struct dccp_ccid_env env = { .mps = 100, .iss = SIM_ISS, .isr = SIM_ISR };
	void *tx = o->init(&env);
	uint8_t area[256];
	struct dccp_obuf b;
	struct dccp_opts op;
	uint64_t wake, t = 0;

	CHECK(tx);
	/* 100 us RTT, p = 1 / (2^32 - 2), X_recv 4 GB/s, 1-byte packets:
	 * s / X is a fraction of a nanosecond (0 in microseconds) */
	o->sent(tx, SIM_ISS + 1, 1, true, t, NULL);
	put_opts(&b, area, 0, UINT32_MAX - 1, UINT32_MAX);
	parse_area(area, b.len, &op);
	uint64_t seq = SIM_ISS + 1;
	for (int i = 0; i < 40; i++) {
		t += 100 * US;
		o->recv_ack(tx, seq, &op, t);
		EXPECT_EQ(o->budget(tx, t, &wake), 1);
		o->sent(tx, ++seq, 1, true, t, NULL);
	}
	struct dccp_ccid_tx_stats st = txs(o, tx);
	EXPECT(near((double)st.rtt_ns, 100e3, 1e-3));
	EXPECT(st.x_bps > 100000000ull);
	uint64_t ipi = tfrc_send_interval_ns(1, (double)st.x_bps);
	EXPECT((uint64_t)(1e6 / (double)st.x_bps) == 0); /* in microseconds: 0 */
	EXPECT(ipi >= 1 && ipi < 1000);
	/* right after a packet: not yet, and the wake-up is in the future */
	EXPECT_EQ(o->budget(tx, t, &wake), 0);
	EXPECT(wake > t && wake - t <= ipi + 1);
	EXPECT_EQ(o->budget(tx, wake, &wake), 1);
	o->free(tx);

	/* the same through the simulated path: a 100 Mbit/s link, 100 us RTT */
	struct sim s;
	sim_init(&s, DCCP_CCID3, 1000, 9);
	s.owd_ns = 50 * US;
	s.bw = 12.5e6;
	s.qlimit_ns = 2 * MS;
	sim_run(&s, 2 * SEC);
	uint64_t b0 = s.delivered_bytes;
	sim_run(&s, 4 * SEC);
	double util = (double)(s.delivered_bytes - b0) / (2.0 * s.bw);
	if (!EXPECT(util > 0.5))
		fprintf(stderr, "  100 us RTT: utilisation %.3f\n", util);
	EXPECT(txs(s.txo, s.tx).rtt_ns < 2 * MS);
	sim_free(&s);
}

/* A 10 Mbit/s link with a 40 ms drop-tail queue: TFRC fills it, and the
 * drops of one queue overflow (a burst within an RTT) are one loss event. */
static void bottleneck(void)
{
	struct sim s;

	sim_init(&s, DCCP_CCID3, 1000, 12);
	s.bw = 1.25e6;
	s.owd_ns = 10 * MS;
	s.qlimit_ns = 40 * MS;
	sim_run(&s, 10 * SEC);
	uint64_t b0 = s.delivered_bytes;
	sim_run(&s, 40 * SEC);
	double util = (double)(s.delivered_bytes - b0) / (30.0 * s.bw);
	struct ccid3_rx_counters rc;
	dccp_ccid3_rx_counters(s.rx, &rc);
	bool ok = EXPECT(util > 0.9);
	ok &= EXPECT(rc.loss_events > 0 && 2 * rc.loss_events < s.dropped_n);
	if (!ok)
		fprintf(stderr, "  utilisation %.3f, %llu drops, %llu loss events\n", util,
			(unsigned long long)s.dropped_n, (unsigned long long)rc.loss_events);
	EXPECT(txs(s.txo, s.tx).rtt_ns > 20 * MS && txs(s.txo, s.tx).rtt_ns < 60 * MS);
	sim_free(&s);
}

static void random_loss(void)
{
	struct sim s;

	sim_init(&s, DCCP_CCID3, 1200, 11);
	s.bw = 2.5e6;
	s.owd_ns = 20 * MS;
	s.qlimit_ns = 80 * MS;
	s.loss = 0.03;
	s.rev_loss = 0.2;
	sim_run(&s, 60 * SEC);
	struct dccp_ccid_tx_stats st = txs(s.txo, s.tx);
	EXPECT(st.x_bps > 1000 && st.x_bps < 2 * 2500000ull);
	EXPECT(st.p > 0.005 && st.p < 0.1);
	EXPECT_EQ(s.dup_reports + s.wrong_reports, 0);
	struct ccid3_rx_counters rc;
	dccp_ccid3_rx_counters(s.rx, &rc);
	EXPECT(rc.loss_events > 20 && rc.loss_events <= rc.lost);
	EXPECT(rc.lost >= s.dropped_n - 3 && rc.lost <= s.dropped_n);
	sim_free(&s);
}

/* ---- receiver ------------------------------------------------------------ */

static void *fresh_rx(void)
{
	struct dccp_ccid_env env = { .mps = 1000, .iss = SIM_ISS, .isr = SIM_ISR };
	void *rx = dccp_ccid_rx(DCCP_CCID3)->init(&env);
	CHECK(rx);
	return rx;
}

/* seq ISR + i arrives at i ms with CCVal (i / 2) mod 16: an RTT is 8 ms */
static bool arrive(void *rx, uint64_t i, const struct dccp_opts *o)
{
	return dccp_ccid_rx(DCCP_CCID3)
		->recv(rx, DCCP_DATA, SIM_ISR + i, (uint8_t)((i / 2) & 15), o, 1000, i * MS);
}

static unsigned feedback(void *rx, uint64_t now, struct dccp_opts *op, uint8_t *area,
			 struct dccp_loss_interval *li, uint64_t *ackno)
{
	struct dccp_obuf b;
	uint8_t skip;

	dccp_obuf_init(&b, area, 512);
	dccp_ccid_rx(DCCP_CCID3)->put_feedback(rx, &b, now, ackno);
	EXPECT(!b.overflow);
	parse_area(area, b.len, op);
	return dccp_loss_intervals(op, li, 9, &skip);
}

static void receiver(void)
{
	const struct dccp_ccid_rx_ops *o = dccp_ccid_rx(DCCP_CCID3);
	static struct dccp_opts none, op;
	static uint8_t area[512];
	struct dccp_loss_interval li[9];
	struct ccid3_rx_counters c;
	uint64_t ackno;
	void *rx = fresh_rx();

	/* the first data packet asks for feedback at once */
	EXPECT(arrive(rx, 1, &none));
	EXPECT_EQ(feedback(rx, 1 * MS, &op, area, li, &ackno), 1);
	EXPECT_EQ(ackno, SIM_ISR + 1);
	EXPECT_EQ(li[0].data, 1);
	EXPECT(op.has_loss_rate && op.loss_rate == UINT32_MAX); /* no loss yet */
	/* losses starting closed intervals of 10, 20, ..., 80, then 5 more */
	uint64_t i = 2, next_loss = 20;
	for (unsigned len = 10; len <= 90; len += 10) {
		for (; i < next_loss; i++)
			arrive(rx, i, &none);
		i++; /* lost */
		if (len < 90)
			next_loss += len;
	}
	for (unsigned j = 0; j < 4; j++, i++)
		arrive(rx, i, &none);
	dccp_ccid3_rx_counters(rx, &c);
	EXPECT_EQ(c.lost, 9);
	EXPECT_EQ(c.loss_events, 9);
	EXPECT(near((double)c.rtt_ns, 8e6, 0.15));
	EXPECT(o->feedback_due(rx));
	unsigned n = feedback(rx, i * MS, &op, area, li, &ackno);
	EXPECT_EQ(n, 9);
	EXPECT_EQ(ackno, SIM_ISR + i - 1);
	EXPECT_EQ(li[0].data, 5);
	EXPECT_EQ(li[0].loss, 1);
	EXPECT_EQ(li[0].lossless, 4);
	for (unsigned k = 1; k < 9; k++) {
		EXPECT_EQ(li[k].data, 90 - 10 * k);
		EXPECT_EQ(li[k].loss + li[k].lossless, 90 - 10 * k);
	}
	EXPECT(op.has_loss_rate);
	EXPECT_EQ(op.loss_rate, 54);
	EXPECT(op.has_recv_rate && op.has_elapsed);
	/* the sender's p from these Loss Intervals */
	const struct dccp_ccid_tx_ops *to = dccp_ccid_tx(DCCP_CCID3);
	struct dccp_ccid_env tenv = { .mps = 1000, .iss = SIM_ISS, .isr = SIM_ISR };
	void *tx = to->init(&tenv);
	CHECK(tx);
	to->sent(tx, SIM_ISS + 1, 1000, true, 0, NULL);
	to->recv_ack(tx, SIM_ISS + 1, &op, 10 * MS);
	struct dccp_ccid_tx_stats st = txs(to, tx);
	if (!EXPECT(fabs(st.p - 0.01875) < 1e-12))
		fprintf(stderr, "  p %.12f\n", st.p);
	to->free(tx);
	/* the open interval grows to 400: it now raises the average */
	for (unsigned j = 0; j < 395; j++, i++)
		arrive(rx, i, &none);
	feedback(rx, i * MS, &op, area, li, &ackno);
	EXPECT_EQ(li[0].data, 400);
	EXPECT_EQ(op.loss_rate, 115);
	/* feedback once per RTT (8 ms) while data arrives */
	EXPECT_EQ(o->next_timer(rx), 0);
	arrive(rx, i, &none);
	dccp_ccid3_rx_counters(rx, &c);
	EXPECT_EQ(o->next_timer(rx), i * MS + c.rtt_ns);
	o->free(rx);

	/* Receive Rate over at least one RTT: feedback at 40 and 48 ms (8000 B
	 * between), then a loss event makes feedback due at 52 ms after 300 B:
	 * 4 ms is less than the RTT, so the rate covers both periods:
	 * 8300 B / 12 ms = 691666 B/s (300 B / 4 ms alone would be 75000) */
	rx = fresh_rx();
	for (i = 1; i <= 40; i++)
		arrive(rx, i, &none);
	feedback(rx, 40 * MS, &op, area, li, &ackno);
	for (i = 41; i <= 48; i++)
		arrive(rx, i, &none);
	feedback(rx, 48 * MS, &op, area, li, &ackno);
	for (i = 50; i <= 52; i++)
		o->recv(rx, DCCP_DATA, SIM_ISR + i, (uint8_t)((i / 2) & 15), &none, 100, i * MS);
	EXPECT(o->feedback_due(rx));
	feedback(rx, 52 * MS, &op, area, li, &ackno);
	EXPECT(op.has_recv_rate);
	EXPECT_EQ(op.recv_rate, 691666);
	/* a feedback with no data since the last one (the connection acks for
	 * another reason) 10 ms later: the rate of the last period with data,
	 * spread over the time since, never 0 (which would pin the sender to
	 * s/t_mbi): 300 B / (4 + 10 ms) here, then 300 B / (4 + 10 + 10 ms) */
	feedback(rx, 62 * MS, &op, area, li, &ackno);
	EXPECT_EQ(op.recv_rate, 21428);
	feedback(rx, 72 * MS, &op, area, li, &ackno);
	EXPECT_EQ(op.recv_rate, 12500);
	/* a batch of packets read with one clock reading, each with its
	 * feedback at that instant: periods of 0 ns join the last one, and the
	 * rate is never 0 (1300 B over the 4 + 10 + 10 ms since 48 ms) */
	for (i = 53; i <= 56; i++) {
		o->recv(rx, DCCP_DATA, SIM_ISR + i, (uint8_t)((i / 2) & 15), &none, 250, 72 * MS);
		feedback(rx, 72 * MS, &op, area, li, &ackno);
		EXPECT(op.has_recv_rate && op.recv_rate > 0);
	}
	o->free(rx);
	/* the same without an RTT (CCVal never moved: the receiver has none) */
	rx = fresh_rx();
	for (i = 1; i <= 10; i++)
		o->recv(rx, DCCP_DATA, SIM_ISR + i, 0, &none, 1000, i * MS);
	feedback(rx, 10 * MS, &op, area, li, &ackno);
	for (i = 11; i <= 14; i++) {
		o->recv(rx, DCCP_DATA, SIM_ISR + i, 0, &none, 1000, 12 * MS);
		feedback(rx, 12 * MS, &op, area, li, &ackno);
		EXPECT(op.has_recv_rate && op.recv_rate > 0);
	}
	o->free(rx);

	/* two losses two packets apart (the same window): one event */
	rx = fresh_rx();
	for (i = 1; i < 40; i++)
		if (i != 30 && i != 32)
			arrive(rx, i, &none);
	dccp_ccid3_rx_counters(rx, &c);
	EXPECT_EQ(c.lost, 2);
	EXPECT_EQ(c.loss_events, 1);
	feedback(rx, 40 * MS, &op, area, li, &ackno);
	EXPECT_EQ(li[0].loss, 3);  /* 30..32 */
	EXPECT_EQ(li[0].data, 10); /* 30..39 */
	/* reordering by 2: not a loss */
	arrive(rx, 41, &none);
	arrive(rx, 42, &none);
	arrive(rx, 40, &none);
	arrive(rx, 43, &none);
	dccp_ccid3_rx_counters(rx, &c);
	EXPECT_EQ(c.lost, 2);
	/* a gap that NDP Count explains: 45 was not data */
	struct dccp_opts ndp = { .has_ndp = true, .ndp_count = 1 };
	arrive(rx, 44, &none);
	arrive(rx, 46, &ndp);
	for (i = 47; i < 52; i++)
		arrive(rx, i, &none);
	dccp_ccid3_rx_counters(rx, &c);
	EXPECT_EQ(c.lost, 2);
	/* duplicates (here, above a hole at 52) and stale numbers are counted, nothing else */
	arrive(rx, 53, &none);
	arrive(rx, 53, &none);
	arrive(rx, 3, &none);
	dccp_ccid3_rx_counters(rx, &c);
	EXPECT_EQ(c.dup, 1);
	EXPECT_EQ(c.old, 1);
	EXPECT_EQ(c.lost, 2);
	/* a Timestamp is echoed with the time it was held */
	struct dccp_opts ts = { .has_ts = true, .ts = 12345 };
	o->recv(rx, DCCP_DATA, SIM_ISR + 54, 11, &ts, 100, 54 * MS);
	feedback(rx, 54 * MS + 250 * US, &op, area, li, &ackno);
	EXPECT(op.has_ts_echo && op.ts_echo == 12345 && op.ts_echo_elapsed == 25);
	EXPECT(op.has_elapsed && op.elapsed == 25);
	o->free(rx);
}

static void hostile(void)
{
	const struct dccp_ccid_tx_ops *o = dccp_ccid_tx(DCCP_CCID3);
	struct dccp_ccid_env env = { .mps = 1000, .iss = SIM_ISS, .isr = SIM_ISR };
	uint8_t area[256];
	struct dccp_obuf b;
	struct dccp_opts op;
	struct ccid3_tx_counters c;
	void *tx = o->init(&env);

	CHECK(tx);
	o->sent(tx, SIM_ISS + 1, 1000, true, 0, NULL);
	put_opts(&b, area, 0, UINT32_MAX, 1000000);
	parse_area(area, b.len, &op);
	o->recv_ack(tx, SIM_ISS + 2, &op, 10 * MS); /* never sent */
	o->recv_ack(tx, SIM_ISS - 1, &op, 10 * MS);
	/* held for 50 ms by a packet 10 ms old */
	put_opts(&b, area, 5000, UINT32_MAX, 1000000);
	parse_area(area, b.len, &op);
	o->recv_ack(tx, SIM_ISS + 1, &op, 10 * MS);
	dccp_ccid3_tx_counters(tx, &c);
	EXPECT_EQ(c.bad_ackno, 2);
	EXPECT_EQ(c.bad_elapsed, 1);
	EXPECT_EQ(txs(o, tx).rtt_ns, 0);
	EXPECT_EQ(txs(o, tx).x_bps, 1000);
	/* an Ack without CCID 3 options: an RTT sample, not feedback */
	uint64_t nofb = o->next_timer(tx);
	memset(&op, 0, sizeof(op));
	o->recv_ack(tx, SIM_ISS + 1, &op, 12 * MS);
	dccp_ccid3_tx_counters(tx, &c);
	EXPECT_EQ(c.not_feedback, 1);
	EXPECT_EQ(c.feedback, 1);
	EXPECT_EQ(txs(o, tx).rtt_ns, 12 * MS);
	EXPECT_EQ(o->next_timer(tx), nofb);
	EXPECT_EQ(txs(o, tx).x_bps, 1000);
	/* Loss Intervals of length 0: p = 1 at most, X at its floor, interval bounded */
	o->sent(tx, SIM_ISS + 2, 1000, true, 20 * MS, NULL);
	struct dccp_loss_interval li[3] = { { 0, 0, 0, false }, { 0, 1, 1, false }, { 0, 1, 1, false } };
	dccp_obuf_init(&b, area, sizeof(area));
	dccp_opt_put_loss_intervals(&b, 0, li, 3);
	dccp_opt_put_u32(&b, DCCP_OPT_RECEIVE_RATE, 0);
	parse_area(area, b.len, &op);
	o->recv_ack(tx, SIM_ISS + 2, &op, 30 * MS);
	struct dccp_ccid_tx_stats st = txs(o, tx);
	EXPECT_EQ(st.rtt_ns, (uint64_t)(0.9 * 12 * MS + 0.1 * 10 * MS));
	EXPECT(st.p > 0 && st.p <= 1);
	EXPECT(st.x_bps >= 1000 / 64 && st.x_bps < 1000000);
	uint64_t wake;
	o->budget(tx, 30 * MS, &wake);
	EXPECT(wake <= 30 * MS + TFRC_T_MBI_NS);
	o->free(tx);
}

int main(void)
{
	EXPECT(dccp_ccid_tx(DCCP_CCID3) && dccp_ccid_tx(DCCP_CCID3)->id == DCCP_CCID3);
	EXPECT(dccp_ccid_rx(DCCP_CCID3) && dccp_ccid_rx(DCCP_CCID3)->id == DCCP_CCID3);
	EXPECT_EQ(dccp_ccid_tx(DCCP_CCID3)->seq_window(NULL), 0);
	receiver();
	hostile();
	slow_start_nofeedback();
	window_counter_before_feedback();
	tiny_interval();
	convergence();
	bottleneck();
	random_loss();
	return check_done("ccid3");
}
