/* SPDX-License-Identifier: MIT */
/*
 * ccid_sim.h - a small discrete-event path for the CCID unit tests: one
 * HC-Sender module and one HC-Receiver module (lib/dccp/ccid.h) joined by a
 * forward link (bandwidth, one-way delay, drop-tail queue, seeded random
 * loss, optional drops of chosen sequence numbers) and a reverse link
 * (delay only).  Both links are FIFO, so each is a queue in arrival order.
 *
 * The sender sends data as its budget allows; every data packet is a
 * DataAck whose Acknowledgement Number is the sequence number of the latest
 * feedback packet received (as Linux's sender does), which the simulated
 * receiver maps back to the Acknowledgement Number that feedback carried
 * with dccp_aoa_find() and hands to ack_of_ack(), as conn.c does.  The
 * receiver's feedback goes out when recv() or the receiver's timer says so;
 * its option bytes are parsed back with dccp_opts_parse() at the sender,
 * exactly as they would be on the wire.
 *
 * Sequence numbers start a few thousand before the 48-bit wrap.
 * The sim records what the modules report for each data packet (acked,
 * lost, how often) against what the path did to it (dropped or delivered).
 */
#ifndef GC_TEST_CCID_SIM_H
#define GC_TEST_CCID_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dccp/ccid.h"
#include "dccp/options.h"

#define SIM_MAXPKT 200000 /* data packets a run may send */
#define SIM_QCAP 8192	  /* packets in flight on one link */
#define SIM_ISS 1000000	  /* initial sequence numbers for the tests' hand-made packets */
#define SIM_ISR 5000000
/* The simulated connection starts a few thousand packets before the 48-bit
 * wrap, so every long run crosses it. */
#define SIM_WRAP_ISS (DCCP_SEQ_MASK - 4999)
#define SIM_WRAP_ISR (DCCP_SEQ_MASK - 2999)

struct sim_pkt {
	uint64_t at, seq, ackno, aoa; /* aoa: the seq of the feedback it acknowledges */
	uint32_t len;
	uint8_t type, ccval;
	bool has_aoa;
	uint16_t optlen;
	uint8_t opt[DCCP_MAX_HDR];
};

struct sim_q {
	struct sim_pkt *p; /* SIM_QCAP */
	unsigned head, n;
};

struct sim {
	/* path */
	double bw;	    /* forward bytes/s (0: unlimited) */
	uint64_t owd_ns;    /* one-way delay, both directions */
	uint64_t qlimit_ns; /* drop-tail: the forward queue holds at most this much delay */
	double loss;	    /* forward random loss probability */
	double rev_loss;    /* reverse random loss probability */
	uint64_t rng;
	uint64_t drop_lo, drop_hi; /* also drop data seqs in [drop_lo, drop_hi] (0: none) */
	uint64_t drop_every;	   /* and every drop_every-th data packet (0: none) */
	/* rx_every > 0: the receiver acks every rx_every data packets delivered
	 * and at no other time, as Linux 6.1's CCID 2 receiver does (no
	 * delayed-ack timer, no Ack when a hole opens); the vector is still
	 * the module's.  The test sets it, as a peer's Change would. */
	uint32_t rx_every;
	uint64_t rx_acked_at; /* delivered_n at its last Ack */
	/* modules */
	const struct dccp_ccid_tx_ops *txo;
	const struct dccp_ccid_rx_ops *rxo;
	void *tx, *rx;
	uint32_t mps;
	/* state */
	uint64_t now, link_free, next_seq, rx_seq, last_aoa;
	bool have_aoa;
	struct sim_q fwd, rev;
	uint64_t to_send;	/* data packets left to send (UINT64_MAX: unlimited) */
	uint64_t rate_limit_ns; /* application: at most one packet per this (0: greedy) */
	uint64_t app_next;
	/* what happened, by data packet index (seq - SIM_WRAP_ISS - 1 mod 2^48) */
	uint8_t *dropped, *delivered, *nacked, *nlost;
	uint64_t sent, dropped_n, delivered_n, delivered_bytes, acks_sent, acks_recv;
	uint64_t dup_reports, wrong_reports;
	struct dccp_counters pc;
	struct dccp_aoa_map aoa; /* the receiver's feedback: its seq -> ackno carried */
	uint64_t max_span;	 /* the most packets one Ack Vector described */
};

static inline uint64_t sim_rand(struct sim *s)
{
	/* xorshift64*: seeded, reproducible */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 2685821657736338717ull;
}

static inline double sim_uniform(struct sim *s)
{
	return (double)(sim_rand(s) >> 11) / 9007199254740992.0;
}

static inline int64_t sim_index(uint64_t seq)
{
	return (int64_t)dccp_seq_sub(seq, SIM_WRAP_ISS + 1);
}

static void sim_on_acked(void *arg, uint64_t seq)
{
	struct sim *s = arg;
	int64_t i = sim_index(seq);

	if (i < 0 || i >= (int64_t)s->sent) {
		s->wrong_reports++;
		return;
	}
	if (s->nacked[i]++ || s->nlost[i])
		s->dup_reports++;
	if (!s->delivered[i]) /* acked a packet the path never delivered */
		s->wrong_reports++;
}

static void sim_on_lost(void *arg, uint64_t seq)
{
	struct sim *s = arg;
	int64_t i = sim_index(seq);

	if (i < 0 || i >= (int64_t)s->sent) {
		s->wrong_reports++;
		return;
	}
	if (s->nlost[i]++ || s->nacked[i])
		s->dup_reports++;
}

static inline void sim_init(struct sim *s, uint8_t ccid, uint32_t mps, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->mps = mps;
	s->rng = seed ? seed : 1;
	s->txo = dccp_ccid_tx(ccid);
	s->rxo = dccp_ccid_rx(ccid);
	s->fwd.p = calloc(SIM_QCAP, sizeof(struct sim_pkt));
	s->rev.p = calloc(SIM_QCAP, sizeof(struct sim_pkt));
	s->dropped = calloc(SIM_MAXPKT, 1);
	s->delivered = calloc(SIM_MAXPKT, 1);
	s->nacked = calloc(SIM_MAXPKT, 1);
	s->nlost = calloc(SIM_MAXPKT, 1);
	struct dccp_ccid_env tenv = { .mps = mps,
				      .iss = SIM_WRAP_ISS,
				      .isr = SIM_WRAP_ISR,
				      .acked = sim_on_acked,
				      .lost = sim_on_lost,
				      .arg = s };
	struct dccp_ccid_env renv = { .mps = mps, .iss = SIM_WRAP_ISR, .isr = SIM_WRAP_ISS };
	s->tx = s->txo->init(&tenv);
	s->rx = s->rxo->init(&renv);
	s->next_seq = dccp_seq_add(SIM_WRAP_ISS, 1);
	s->rx_seq = dccp_seq_add(SIM_WRAP_ISR, 1);
	s->to_send = UINT64_MAX;
	s->qlimit_ns = UINT64_MAX;
}

static inline void sim_free(struct sim *s)
{
	s->txo->free(s->tx);
	s->rxo->free(s->rx);
	free(s->fwd.p);
	free(s->rev.p);
	free(s->dropped);
	free(s->delivered);
	free(s->nacked);
	free(s->nlost);
}

static inline struct sim_pkt *sim_push(struct sim_q *q)
{
	if (q->n == SIM_QCAP)
		return NULL;
	struct sim_pkt *p = &q->p[(q->head + q->n++) % SIM_QCAP];
	memset(p, 0, offsetof(struct sim_pkt, opt));
	return p;
}

static inline void sim_send_data(struct sim *s)
{
	uint64_t seq = s->next_seq;
	s->next_seq = dccp_seq_add(seq, 1);
	int64_t i = sim_index(seq);
	uint8_t ccval = 0;

	s->txo->sent(s->tx, seq, s->mps, true, s->now, &ccval);
	s->sent++;
	bool drop = sim_uniform(s) < s->loss ||
		(s->drop_lo && dccp_seq_between(seq, s->drop_lo, s->drop_hi)) ||
		(s->drop_every && s->sent % s->drop_every == 0);
	uint64_t start = s->link_free > s->now ? s->link_free : s->now;
	if (!drop && start - s->now > s->qlimit_ns)
		drop = true; /* drop-tail */
	struct sim_pkt *p = drop ? NULL : sim_push(&s->fwd);
	if (!p) {
		s->dropped[i] = 1;
		s->dropped_n++;
		return;
	}
	uint64_t ser = s->bw > 0 ? (uint64_t)((double)s->mps / s->bw * 1e9) : 0;
	s->link_free = start + ser;
	p->at = s->link_free + s->owd_ns;
	p->seq = seq;
	p->len = s->mps;
	p->type = DCCP_DATAACK;
	p->ccval = ccval;
	p->aoa = s->last_aoa;
	p->has_aoa = s->have_aoa;
}

static inline void sim_send_feedback(struct sim *s)
{
	struct sim_pkt pk;
	struct dccp_obuf b;

	dccp_obuf_init(&b, pk.opt, DCCP_MAX_HDR - 16); /* what an Ack header leaves */
	s->rxo->put_feedback(s->rx, &b, s->now, &pk.ackno);
	s->acks_sent++;
	uint64_t seq = s->rx_seq;
	s->rx_seq = dccp_seq_add(s->rx_seq, 1);
	dccp_aoa_note(&s->aoa, seq, pk.ackno);
	if (s->rxo->id == DCCP_CCID2) { /* how much of the window this Ack describes */
		static struct dccp_opts vo;
		struct dccp_hdr h = {
			.type = DCCP_ACK, .has_ack = true, .x = true, .opt_len = (uint16_t)b.len
		};
		struct dccp_vec_iter it;
		struct dccp_run r;
		uint64_t span = 0;
		dccp_opts_parse(&h, pk.opt, DCCP_PF_ESTABLISHED, &vo, NULL);
		dccp_ackvec_iter(&it, &vo, pk.ackno, SIM_WRAP_ISS);
		while (dccp_vec_next(&it, &r))
			span += r.len;
		if (span > s->max_span)
			s->max_span = span;
	}
	if (sim_uniform(s) < s->rev_loss)
		return;
	struct sim_pkt *p = sim_push(&s->rev);
	if (!p)
		return;
	p->at = s->now + s->owd_ns;
	p->seq = seq;
	p->ackno = pk.ackno;
	p->type = DCCP_ACK;
	p->optlen = (uint16_t)b.len;
	memcpy(p->opt, pk.opt, b.len);
}

/* Hand an option area to the sender as the parser would. */
static inline void sim_parse(struct sim *s, const uint8_t *opt, size_t len, struct dccp_opts *o)
{
	struct dccp_hdr h = {
		.type = DCCP_ACK, .has_ack = true, .x = true, .opt_off = 0, .opt_len = (uint16_t)len
	};
	dccp_opts_parse(&h, opt, DCCP_PF_ESTABLISHED, o, &s->pc);
}

static inline uint64_t sim_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Run until time `until` (ns).  Bounded by the number of events. */
static inline void sim_run(struct sim *s, uint64_t until)
{
	static struct dccp_opts o;

	for (unsigned long steps = 0; steps < 50000000ul; steps++) {
		/* the sender sends what it may */
		uint64_t wake = 0;
		while (s->to_send && s->sent < SIM_MAXPKT && s->now >= s->app_next) {
			uint32_t b = s->txo->budget(s->tx, s->now, &wake);
			if (!b)
				break;
			sim_send_data(s);
			s->to_send--;
			if (s->rate_limit_ns)
				s->app_next = s->now + s->rate_limit_ns;
		}
		if (s->rx_every ? s->delivered_n - s->rx_acked_at >= s->rx_every
				: s->rxo->feedback_due(s->rx)) {
			s->rx_acked_at = s->delivered_n;
			sim_send_feedback(s);
		}
		/* the next event */
		uint64_t t = until;
		if (s->fwd.n)
			t = sim_min(t, s->fwd.p[s->fwd.head].at);
		if (s->rev.n)
			t = sim_min(t, s->rev.p[s->rev.head].at);
		uint64_t tt = s->txo->next_timer(s->tx);
		uint64_t rt = s->rx_every ? 0 : s->rxo->next_timer(s->rx);
		if (tt)
			t = sim_min(t, tt > s->now ? tt : s->now + 1);
		if (rt)
			t = sim_min(t, rt > s->now ? rt : s->now + 1);
		if (wake && s->to_send)
			t = sim_min(t, wake > s->now ? wake : s->now + 1);
		if (s->app_next > s->now && s->to_send)
			t = sim_min(t, s->app_next);
		if (t >= until) {
			s->now = until;
			return;
		}
		s->now = t;
		if (s->fwd.n && s->fwd.p[s->fwd.head].at <= t) {
			struct sim_pkt *p = &s->fwd.p[s->fwd.head];
			s->fwd.head = (s->fwd.head + 1) % SIM_QCAP;
			s->fwd.n--;
			memset(&o, 0, sizeof(o));
			int64_t i = sim_index(p->seq);
			s->delivered[i] = 1;
			s->delivered_n++;
			s->delivered_bytes += p->len;
			uint64_t carried;
			if (p->has_aoa && dccp_aoa_find(&s->aoa, p->aoa, &carried))
				s->rxo->ack_of_ack(s->rx, carried);
			s->rxo->recv(s->rx, p->type, p->seq, p->ccval, &o, p->len, t);
		}
		if (s->rev.n && s->rev.p[s->rev.head].at <= t) {
			struct sim_pkt *p = &s->rev.p[s->rev.head];
			s->rev.head = (s->rev.head + 1) % SIM_QCAP;
			s->rev.n--;
			sim_parse(s, p->opt, p->optlen, &o);
			s->acks_recv++;
			s->last_aoa = p->seq; /* what our next DataAck acknowledges */
			s->have_aoa = true;
			s->txo->recv_ack(s->tx, p->ackno, &o, t);
		}
		if (tt && tt <= t)
			s->txo->timer(s->tx, t);
		if (rt && rt <= t)
			s->rxo->timer(s->rx, t);
	}
}

/* Stop sending and let everything in flight resolve (bounded). */
static inline void sim_drain(struct sim *s, uint64_t for_ns)
{
	s->to_send = 0;
	sim_run(s, s->now + for_ns);
}

#endif
