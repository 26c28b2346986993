/* SPDX-License-Identifier: MIT */
/*
 * gc_ring_flush() or gc_ring_submit() on one thread racing
 * gc_ring_engine_destroy() on another.  The flush finds its flow by ring
 * id in the engine's flow table (flow.c), never by a pointer it was
 * handed, so the stop frees nothing the flush still uses: every flush either
 * sends, or fails with ENOTCONN (the ring is no longer attached) or EPIPE (the
 * engine stopped serving it), and once the stop returned every flush fails.
 * A submit that must wake the engine writes the ring's eventfd, which the
 * stop closes: the stop waits for a writer holding it (internal.h), so the
 * write never lands on a reused descriptor, and after the stop a submit never
 * says it woke an engine.  Odd rounds submit, even rounds flush.  Run under
 * ASan and TSan (the Makefile's TSAN_TESTS), with the stop landing at varying
 * points of the producer's loop.
 */
#include "ring_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define RINGS 4
#define ENTRIES 64
#define ROUNDS 24

struct producer {
	struct gc_zone *z;
	struct gc_ring *r[RINGS];
	bool submit;	     /* gc_ring_submit() (the notify path) instead of gc_ring_flush() */
	_Atomic int stopped; /* gc_ring_engine_destroy() returned */
	uint64_t sent, ok_flushes, enotconn, epipe, other, after_stop_ok;
	uint64_t during;       /* refused before the stop returned: it raced */
	uint64_t submit_quiet; /* submits after the stop with nothing to wake */
	uint64_t woke;	       /* submits that woke the engine */
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	/* bounded: ends shortly after the stop, or after this many rounds */
	for (unsigned i = 0; i < 2000000; i++) {
		int stopped = atomic_load(&p->stopped);
		struct gc_ring *r = p->r[i % RINGS];
		struct gc_pkt *pk = gc_ring_get_pkt(r);
		if (pk) {
			unsigned pos = gc_ring_pos(r, pk);
			void *b = gc_zone_buf(p->z, (i % RINGS) * ENTRIES + pos);
			uint64_t seq = i;
			memcpy(b, &seq, sizeof(seq));
			pk->off = gc_zone_offset(p->z, b);
			pk->len = sizeof(seq);
			pk->user_seq = seq;
		}
		int n = p->submit ? gc_ring_submit(r) : gc_ring_flush(r);
		if (p->submit && n == 0 && stopped) {
			/* published, nothing to wake (nobody asks after the stop) */
			p->submit_quiet++;
			if (i % RINGS == RINGS - 1 && p->submit_quiet >= 64)
				break;
			continue;
		}
		if (n >= 0) {
			p->ok_flushes++;
			*(p->submit ? &p->woke : &p->sent) += (uint64_t)n;
			if (stopped)
				p->after_stop_ok++;
		} else if (errno == ENOTCONN || errno == EPIPE) {
			*(errno == ENOTCONN ? &p->enotconn : &p->epipe) += 1;
			p->during += !stopped;
		} else {
			p->other++;
			fprintf(stderr, "flush: %s\n", gc_errmsg());
		}
		if (stopped && i % RINGS == RINGS - 1 && (p->enotconn + p->epipe) >= 64)
			break;
	}
	return NULL;
}

int main(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	uint64_t sent = 0, woke = 0, failed = 0, during = 0;

	for (unsigned round = 0; round < ROUNDS; round++) {
		struct producer p = { .submit = round % 2 };
		struct gc_ring_engine *e = gc_ring_engine_create(NULL);
		CHECK(e != NULL);
		p.z = gc_zone_create(RINGS * ENTRIES, 64);
		CHECK(p.z != NULL);
		int sd = udp_connected(&rx[0]);
		for (int i = 0; i < RINGS; i++) {
			p.r[i] = gc_ring_create(ENTRIES, p.z);
			CHECK(p.r[i] != NULL);
			CHECK_OK(gc_ring_attach(p.r[i], e, sd));
		}
		close(sd);

		pthread_t t;
		CHECK(pthread_create(&t, NULL, produce, &p) == 0);
		/* land the stop at a different point each round: at once, or
		 * after up to ~2.3 ms of flushing */
		struct timespec ts = { 0, (long)(round % 8) * 330000L };
		nanosleep(&ts, NULL);
		CHECK_OK(gc_ring_engine_destroy(e));
		atomic_store(&p.stopped, 1);
		CHECK(pthread_join(t, NULL) == 0);

		/* after the stop: not attached, and flushing says so */
		for (int i = 0; i < RINGS; i++) {
			struct gc_ring_status st = GC_RING_STATUS_INIT();
			CHECK_OK(gc_ring_status(p.r[i], &st));
			CHECK(!st.attached);
			CHECK_ERR(gc_ring_flush(p.r[i]), ENOTCONN);
			gc_ring_destroy(p.r[i]);
		}
		CHECK_OK(gc_zone_destroy(p.z));
		CHECK_EQ(p.other, 0);
		/* after the stop no flush sends and no submit says it woke an engine */
		CHECK_EQ(p.after_stop_ok, 0);
		CHECK(p.enotconn + p.epipe + p.submit_quiet >= 64);
		sent += p.sent;
		woke += p.woke;
		failed += p.enotconn + p.epipe;
		during += p.during;
	}
	/* the producer did send before the stops (not only fail) */
	CHECK(sent > 0);
	uint64_t got = 0, seq;
	struct sockaddr_storage from;
	while (rx_recv(&rx[0], &seq, sizeof(seq), 100, &from) > 0)
		got++;
	CHECK(got > 0);
	printf("ring_race: %u rounds, %llu datagrams sent by flushes, %llu submits woke the engine "
	       "(%llu received), %llu calls refused after or during a stop (%llu before it returned)\n",
	       ROUNDS, (unsigned long long)sent, (unsigned long long)woke, (unsigned long long)got,
	       (unsigned long long)failed, (unsigned long long)during);
	rx_close(rx, 1);
	return 0;
}
