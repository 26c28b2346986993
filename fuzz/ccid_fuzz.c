/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: both CCIDs (lib/dccp/ccid2.c, ccid3.c) fed arbitrary
 * feedback options, acknowledgement numbers, arrivals and clock steps.
 * The input is a list of operations, one byte each plus their arguments:
 *   0 n      the senders send n % 16 + 1 data packets (as their budgets
 *            allow) and, if n & 0x80, one pure Ack
 *   1 d l .. feedback: Acknowledgement Number head - d, then l bytes of
 *            option area (parsed as on an established connection) given
 *            to both senders
 *   2 a b    the clock moves (a << 8 | b) x 10 us; due timers run
 *   3 d t c  an arrival at both receivers: seq hi + (int8_t)d, type t,
 *            CCVal c, NDP Count c >> 4 when t & 0x80; feedback if due
 *   4 d      Ack of Ack for hi - d;  5 r  Ack Ratio r at the CCID 2 receiver,
 *            and lost Acks reported to the CCID 2 sender if r is odd
 * Whatever the bytes:
 *   - CCID 2 reports each data packet at most once, only packets it sent,
 *     and acked + lost + pipe == sent; cwnd stays in [1, CCID2_MAX_CWND];
 *   - CCID 3's X stays positive and finite, its send interval in
 *     [1 ns, t_mbi], a budget of 0 always names a future wake-up;
 *   - the receivers' feedback fits the space given and parses back, and a
 *     CCID 2 Ack Vector never reaches below ISS or past its ackno.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target ccid_fuzz
 *   build-fuzz/fuzz/ccid_fuzz -max_total_time=300 fuzz/corpus/ccid
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccp/ccid2.h"
#include "dccp/ccid3.h"
#include "dccp/tfrc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                         \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "ccid_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                           \
		}                                                                          \
	} while (0)

#define ISS 0xfffffffff000ull /* near the 48-bit wrap */
#define ISR 0xffffffffff80ull /* the receivers wrap too */
#define MAXSENT 8192

struct side {
	const struct dccp_ccid_tx_ops *o;
	void *tx;
	uint64_t head, sent;
	uint8_t seen[MAXSENT]; /* 1: data, 2: acked, 4: lost */
	uint64_t reports;
};

static void on_report(struct side *s, uint64_t seq, uint8_t what)
{
	uint64_t i = dccp_seq_sub(seq, ISS + 1);

	REQUIRE(i < s->sent);
	REQUIRE(s->seen[i] & 1);	  /* a data packet */
	REQUIRE(!(s->seen[i] & (2 | 4))); /* reported once */
	s->seen[i] |= what;
	s->reports++;
}
static void on_acked(void *arg, uint64_t seq)
{
	on_report(arg, seq, 2);
}
static void on_lost(void *arg, uint64_t seq)
{
	on_report(arg, seq, 4);
}

static void check_tx(struct side *s, uint64_t now)
{
	struct dccp_ccid_tx_stats st;
	uint64_t wake;

	s->o->stats(s->tx, &st);
	if (s->o->id == DCCP_CCID2) {
		struct ccid2_tx_counters c;
		dccp_ccid2_tx_counters(s->tx, &c);
		REQUIRE(st.cwnd >= 1 && st.cwnd <= CCID2_MAX_CWND);
		REQUIRE(c.acked + c.lost == s->reports);
		REQUIRE(c.acked + c.lost + st.pipe == c.sent_data);
	} else {
		REQUIRE(st.x_bps > 0);
		REQUIRE(st.p >= 0 && st.p <= 1);
	}
	if (s->o->budget(s->tx, now, &wake) == 0 && s->o->id == DCCP_CCID3)
		REQUIRE(wake > now && wake <= now + TFRC_T_MBI_NS);
}

static void parse_area(const uint8_t *area, size_t len, struct dccp_opts *op, bool must)
{
	struct dccp_hdr h = { .type = DCCP_ACK, .has_ack = true, .x = true };

	h.opt_len = (uint16_t)len;
	memset(op, 0, sizeof(*op));
	enum dccp_drop e = dccp_opts_parse(&h, area, DCCP_PF_ESTABLISHED, op, NULL);
	REQUIRE(!must || e == DCCP_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct side sd[2];
	static struct dccp_opts op;
	static uint8_t area[DCCP_MAX_HDR];
	void *rx[2];
	const struct dccp_ccid_rx_ops *ro[2] = { dccp_ccid_rx(DCCP_CCID2), dccp_ccid_rx(DCCP_CCID3) };
	uint64_t now = 1000000, rx_hi = ISR;
	size_t i = 0;

	for (int k = 0; k < 2; k++) {
		struct side *s = &sd[k];
		memset(s, 0, sizeof(*s));
		s->o = dccp_ccid_tx(k ? DCCP_CCID3 : DCCP_CCID2);
		struct dccp_ccid_env env = {
			.mps = 1400, .iss = ISS, .isr = ISR, .acked = on_acked, .lost = on_lost, .arg = s
		};
		s->tx = s->o->init(&env);
		s->head = ISS;
		struct dccp_ccid_env renv = { .mps = 1400, .iss = ISS, .isr = ISR };
		rx[k] = ro[k]->init(&renv);
		REQUIRE(s->tx && rx[k]);
	}
#define NEXT() (uint8_t)(i < size ? data[i++] : 0)
	while (i < size) {
		uint8_t opc = (uint8_t)(NEXT() % 6);
		if (opc == 0) {
			uint8_t n = NEXT();
			for (int k = 0; k < 2; k++) {
				struct side *s = &sd[k];
				uint64_t wake;
				for (unsigned j = 0; j < (n & 15) + 1u && s->sent < MAXSENT; j++) {
					if (!s->o->budget(s->tx, now, &wake))
						break;
					s->head = dccp_seq_add(s->head, 1);
					s->seen[dccp_seq_sub(s->head, ISS + 1)] = 1;
					s->sent++;
					uint8_t cc = 0xff;
					s->o->sent(s->tx, s->head, 1 + (n * 37u + j) % 1400, true,
						   now, &cc);
					REQUIRE(cc < 16);
				}
				if ((n & 0x80) && s->sent < MAXSENT) {
					s->head = dccp_seq_add(s->head, 1);
					s->sent++; /* not data: seen stays 0 */
					s->o->sent(s->tx, s->head, 0, false, now, NULL);
				}
			}
		} else if (opc == 1) {
			uint8_t d = NEXT(), l = NEXT();
			size_t len = l < size - i ? l : size - i;
			memcpy(area, data + i, len);
			i += len;
			parse_area(area, len, &op, false);
			for (int k = 0; k < 2; k++)
				sd[k].o->recv_ack(sd[k].tx, dccp_seq_sub(sd[k].head, d), &op, now);
		} else if (opc == 2) {
			uint64_t a = NEXT(), b = NEXT();
			now += ((a << 8) | b) * 10000;
			for (int k = 0; k < 2; k++) {
				uint64_t t = sd[k].o->next_timer(sd[k].tx);
				if (t && t <= now)
					sd[k].o->timer(sd[k].tx, now);
				t = ro[k]->next_timer(rx[k]);
				if (t && t <= now)
					ro[k]->timer(rx[k], now);
			}
		} else if (opc == 3) {
			int8_t d = (int8_t)NEXT();
			uint8_t t = NEXT(), c = NEXT();
			uint64_t seq = dccp_seq_add(rx_hi, d);
			if (dccp_seq_after(seq, rx_hi))
				rx_hi = seq;
			struct dccp_opts in = { .has_ndp = (t & 0x80) != 0, .ndp_count = c >> 4 };
			for (int k = 0; k < 2; k++) {
				ro[k]->recv(rx[k], t & 15, seq, c & 15, &in, c * 11u, now);
				if (!ro[k]->feedback_due(rx[k]))
					continue;
				struct dccp_obuf b;
				uint64_t ackno = 0;
				size_t cap = 8 + (size_t)c * 4 % (DCCP_MAX_HDR - 8);
				dccp_obuf_init(&b, area, cap);
				ro[k]->put_feedback(rx[k], &b, now, &ackno);
				REQUIRE(b.len <= cap);
				REQUIRE(!ro[k]->feedback_due(rx[k]));
				if (b.overflow)
					continue;
				parse_area(area, b.len, &op, true);
				struct dccp_vec_iter it;
				struct dccp_run r;
				dccp_ackvec_iter(&it, &op, ackno, ISR);
				while (dccp_vec_next(&it, &r))
					;
				REQUIRE(!it.clipped); /* our own receiver never describes packets before ISR */
			}
		} else if (opc == 4) {
			uint8_t d = NEXT();
			for (int k = 0; k < 2; k++)
				ro[k]->ack_of_ack(rx[k], dccp_seq_sub(rx_hi, d));
		} else {
			uint8_t r = NEXT();
			dccp_ccid2_rx_set_ack_ratio(rx[0], r);
			dccp_ccid2_tx_acks_lost(sd[0].tx, r & 1);
			uint32_t want = dccp_ccid2_tx_ack_ratio(sd[0].tx);
			struct dccp_ccid_tx_stats st;
			sd[0].o->stats(sd[0].tx, &st);
			REQUIRE(want >= 1 && want <= (st.cwnd + 1) / 2 + 1);
		}
		for (int k = 0; k < 2; k++)
			check_tx(&sd[k], now);
	}
	for (int k = 0; k < 2; k++) {
		sd[k].o->free(sd[k].tx);
		ro[k]->free(rx[k]);
	}
	return 0;
}
