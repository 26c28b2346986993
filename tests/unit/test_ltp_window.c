/* SPDX-License-Identifier: MIT */
/*
 * test_ltp_window: LTP's receive window and NAK bookkeeping
 * (lib/lms/ltp_window.c) driven with a fake clock: gaps, ranges, retries
 * with backoff, escalation, giving up, the tail found by heartbeats, the
 * bounds (window, ranges), duplicates, unordered delivery, sequence wrap.
 */
#include "check.h"

#include <stdint.h>

#include "lms/ltp.h"

#define MS 1000000ull

static struct gc_ltp_stats st;

static void open_win(struct ltp_window *w, uint32_t nslots, uint32_t max_ranges, uint32_t tries,
		     uint32_t esc, bool unordered)
{
	memset(&st, 0, sizeof(st));
	CHECK_OK(ltp_window_init(w, nslots, 64, max_ranges, 10 * MS, tries, esc, unordered, &st));
}

static int put(struct ltp_window *w, uint32_t seq, uint64_t now)
{
	uint8_t b[4] = { (uint8_t)seq, (uint8_t)(seq >> 8), 0xaa, 0x55 };
	return ltp_window_put(w, seq, 0, false, false, b, sizeof(b), now);
}

static int repair(struct ltp_window *w, uint32_t seq, uint64_t now)
{
	uint8_t b[4] = { (uint8_t)seq, (uint8_t)(seq >> 8), 0xaa, 0x55 };
	return ltp_window_put(w, seq, 0, false, true, b, sizeof(b), now);
}

/* Deliver everything ready; returns how many DATA, checks their order. */
static int drain(struct ltp_window *w, uint64_t *next_seq, int *losses, int *ends)
{
	struct gc_ltp_msg m;
	const uint8_t *d;
	size_t len;
	int n = 0;

	while (ltp_window_peek(w, &m, &d, &len)) {
		if (m.type == GC_LTP_DATA) {
			CHECK_EQ(len, 4);
			CHECK_EQ(d[0], (uint8_t)m.seq);
			if (next_seq) {
				CHECK_EQ(m.seq, *next_seq);
				(*next_seq)++;
			}
			n++;
		} else if (m.type == GC_LTP_LOSS) {
			if (next_seq)
				*next_seq = m.hi + 1;
			if (losses)
				(*losses)++;
		} else if (ends) {
			(*ends)++;
		}
		ltp_window_consume(w, &m);
	}
	return n;
}

static void test_in_order(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];
	uint64_t next = 0;

	open_win(&w, 32, 8, 5, 3, false);
	for (uint32_t s = 0; s < 10; s++)
		CHECK_EQ(put(&w, s, 1 * MS), LTP_PUT_NEW);
	CHECK_EQ(ltp_window_due(&w, 1 * MS, k, 4), 0);
	CHECK_EQ(drain(&w, &next, NULL, NULL), 10);
	CHECK_EQ(st.gaps_detected, 0);
	CHECK_EQ(st.bytes_delivered, 40);
	ltp_window_free(&w);
}

static void test_gap_retry_recover(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];
	uint64_t next = 0;

	open_win(&w, 32, 8, 5, 3, false);
	put(&w, 0, 100 * MS);
	put(&w, 1, 100 * MS);
	put(&w, 3, 100 * MS);
	put(&w, 4, 100 * MS);
	CHECK_EQ(ltp_window_due(&w, 100 * MS, k, 4), 1);
	CHECK_EQ(k[0].n, 1);
	CHECK(k[0].pair[0].lo == 2 && k[0].pair[0].hi == 2 && !k[0].escalate);
	CHECK_EQ(st.gaps_detected, 1);
	CHECK_EQ(ltp_window_deadline(&w, 100 * MS), 110 * MS);
	CHECK_EQ(ltp_window_due(&w, 105 * MS, k, 4), 0);       /* not yet */
	CHECK_EQ(ltp_window_due(&w, 110 * MS, k, 4), 1);       /* retry */
	CHECK_EQ(ltp_window_deadline(&w, 110 * MS), 130 * MS); /* backoff: 20 ms */
	CHECK_EQ(drain(&w, &next, NULL, NULL), 2);	       /* 0, 1; 2 is missing */
	CHECK_EQ(repair(&w, 2, 112 * MS), LTP_PUT_NEW);
	CHECK_EQ(st.recovered, 1);
	CHECK_EQ(st.recovery_us_max, 12000);
	CHECK_EQ(drain(&w, &next, NULL, NULL), 3);
	CHECK_EQ(ltp_window_due(&w, 200 * MS, k, 4), 0); /* the range is gone */
	CHECK_EQ(w.nranges, 0);
	ltp_window_free(&w);
}

static void test_runs_in_a_range(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];

	open_win(&w, 32, 8, 5, 3, false);
	put(&w, 0, 0);
	put(&w, 6, 0);
	CHECK_EQ(ltp_window_due(&w, 0, k, 4), 1);
	CHECK(k[0].n == 1 && k[0].pair[0].lo == 1 && k[0].pair[0].hi == 5);
	put(&w, 3, 1 * MS);
	CHECK_EQ(ltp_window_due(&w, 10 * MS, k, 4), 1);
	CHECK_EQ(k[0].n, 2);
	CHECK(k[0].pair[0].lo == 1 && k[0].pair[0].hi == 2);
	CHECK(k[0].pair[1].lo == 4 && k[0].pair[1].hi == 5);
	ltp_window_free(&w);
}

static void test_tail_by_heartbeat(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];
	uint64_t next = 0;
	int ends = 0;

	open_win(&w, 32, 8, 5, 3, false);
	put(&w, 0, 0);
	put(&w, 1, 0);
	put(&w, 2, 0);
	CHECK_EQ(ltp_window_due(&w, 0, k, 4), 0);
	ltp_window_heartbeat(&w, 6, 0, true); /* 3, 4, 5 were sent, and that is all */
	CHECK_EQ(ltp_window_due(&w, 1 * MS, k, 4), 1);
	CHECK(k[0].n == 1 && k[0].pair[0].lo == 3 && k[0].pair[0].hi == 5);
	CHECK_EQ(drain(&w, &next, NULL, &ends), 3);
	CHECK_EQ(ends, 0);
	for (uint32_t s = 3; s < 6; s++)
		repair(&w, s, 2 * MS);
	CHECK_EQ(drain(&w, &next, NULL, &ends), 3);
	CHECK_EQ(ends, 1);
	CHECK_EQ(drain(&w, &next, NULL, &ends), 0); /* END comes once */
	CHECK_EQ(ends, 1);
	ltp_window_free(&w);
}

static void test_escalate_and_give_up(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];
	uint64_t next = 0, t = 0;
	int losses = 0, tries = 0, esc = 0;

	open_win(&w, 32, 8, 4, 2, false);
	put(&w, 0, 0);
	put(&w, 2, 0);
	for (int i = 0; i < 20; i++) {
		size_t n = ltp_window_due(&w, t, k, 4);
		tries += (int)n;
		esc += n && k[0].escalate;
		uint64_t d = ltp_window_deadline(&w, t);
		if (d == UINT64_MAX)
			break;
		t = d;
	}
	CHECK_EQ(tries, 4); /* max_tries requests, then given up */
	CHECK_EQ(esc, 2);   /* tries 3 and 4 also went to the source */
	CHECK_EQ(t, 10 * MS + 20 * MS + 40 * MS + 80 * MS);
	CHECK_EQ(st.lost, 1);
	CHECK_EQ(drain(&w, &next, &losses, NULL), 2); /* 0, LOSS 1, 2 */
	CHECK_EQ(losses, 1);
	CHECK_EQ(next, 3);
	ltp_window_free(&w);
}

static void test_backoff_capped(void)
{
	struct ltp_window w;
	struct ltp_nak k[1];
	uint64_t t = 0, prev = 0, d = 0;

	open_win(&w, 32, 8, 100, 100, false);
	put(&w, 1, 0); /* 0 is missing (the stream starts at 0) */
	for (int i = 0; i < 12; i++) {
		CHECK_EQ(ltp_window_due(&w, t, k, 1), 1);
		d = ltp_window_deadline(&w, t);
		CHECK(d - t <= LTP_MAX_BACKOFF_NS && d - t >= prev);
		prev = d - t;
		t = d;
	}
	CHECK_EQ(prev, LTP_MAX_BACKOFF_NS);
	ltp_window_free(&w);
}

static void test_ranges_bounded(void)
{
	struct ltp_window w;
	struct ltp_nak k[8];

	open_win(&w, 32, 2, 5, 3, false);
	for (uint32_t s = 0; s <= 6; s += 2)
		put(&w, s, 0); /* 1, 3, 5 missing: three gaps, two ranges */
	CHECK_EQ(ltp_window_due(&w, 0, k, 8), 2);
	CHECK_EQ(w.nranges, 2);
	CHECK_EQ(st.gaps_detected, 2);
	CHECK_EQ(ltp_window_deadline(&w, 1 * MS), 10 * MS); /* no busy loop while full */
	repair(&w, 1, 1 * MS);
	CHECK_EQ(ltp_window_due(&w, 10 * MS, k, 8), 2); /* 3 retried, 5 registered and sent */
	CHECK_EQ(st.gaps_detected, 3);
	ltp_window_free(&w);
}

static void test_window_bounded(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];
	uint64_t next = 0;

	open_win(&w, 16, 8, 5, 3, false);
	put(&w, 0, 0);
	CHECK_EQ(put(&w, 20, 0), LTP_PUT_BEYOND);
	CHECK_EQ(st.window_drops, 1);
	CHECK_EQ(ltp_window_due(&w, 0, k, 4), 1);
	CHECK(k[0].pair[0].lo == 1 && k[0].pair[0].hi == 15); /* only inside the window */
	for (uint32_t s = 1; s < 16; s++)
		repair(&w, s, 1 * MS);
	CHECK_EQ(drain(&w, &next, NULL, NULL), 16);
	CHECK_EQ(ltp_window_due(&w, 2 * MS, k, 4), 1); /* the window moved: 16..20 now */
	CHECK(k[0].pair[0].lo == 16 && k[0].pair[0].hi == 20);
	ltp_window_free(&w);
}

static void test_duplicates(void)
{
	struct ltp_window w;
	uint64_t next = 0;

	open_win(&w, 16, 8, 5, 3, false);
	CHECK_EQ(put(&w, 0, 0), LTP_PUT_NEW);
	CHECK_EQ(put(&w, 0, 0), LTP_PUT_DUP);
	CHECK_EQ(repair(&w, 0, 0), LTP_PUT_DUP);
	CHECK_EQ(drain(&w, &next, NULL, NULL), 1);
	CHECK_EQ(repair(&w, 0, 0), LTP_PUT_OLD);
	CHECK_EQ(st.duplicates, 3);
	CHECK_EQ(st.repairs_received, 2);
	CHECK_EQ(st.repairs_unneeded, 2);
	ltp_window_free(&w);
}

static void test_unordered(void)
{
	struct ltp_window w;
	struct gc_ltp_msg m;
	const uint8_t *d;
	size_t len;
	uint64_t order[3];
	int n = 0;

	open_win(&w, 16, 8, 5, 3, true);
	put(&w, 0, 0);
	put(&w, 2, 0);
	while (ltp_window_peek(&w, &m, &d, &len) && n < 3) {
		order[n++] = m.seq;
		ltp_window_consume(&w, &m);
	}
	CHECK_EQ(n, 2);
	CHECK(order[0] == 0 && order[1] == 2);
	put(&w, 1, 0);
	CHECK(ltp_window_peek(&w, &m, &d, &len) && m.type == GC_LTP_DATA && m.seq == 1);
	ltp_window_consume(&w, &m);
	CHECK_EQ(w.base, 3);
	ltp_window_free(&w);
}

static void test_wrap_and_late_join(void)
{
	struct ltp_window w;
	struct ltp_nak k[4];
	uint64_t next;

	/* a late joiner (trail not 0) starts where it joined, across the wrap */
	open_win(&w, 16, 8, 5, 3, false);
	CHECK_EQ(ltp_window_put(&w, 0xfffffffeu, 5, false, false, "abcd", 4, 0), LTP_PUT_NEW);
	put(&w, 0, 0); /* 0xffffffff is missing */
	put(&w, 1, 0);
	CHECK_EQ(ltp_window_due(&w, 0, k, 4), 1);
	CHECK(k[0].pair[0].lo == 0xffffffffu && k[0].pair[0].hi == 0xffffffffu);
	repair(&w, 0xffffffffu, 1);
	next = 0xfffffffeull;
	struct gc_ltp_msg m;
	const uint8_t *d;
	size_t len;
	int n = 0;
	while (ltp_window_peek(&w, &m, &d, &len)) {
		CHECK_EQ(m.seq, next);
		next++;
		n++;
		ltp_window_consume(&w, &m);
	}
	CHECK_EQ(n, 4);
	CHECK_EQ(next, 0x100000002ull);
	ltp_window_free(&w);

	/* trail 0: the start is still repairable, so the first datagrams are asked for */
	open_win(&w, 16, 8, 5, 3, false);
	put(&w, 3, 0);
	CHECK_EQ(ltp_window_due(&w, 0, k, 4), 1);
	CHECK(k[0].pair[0].lo == 0 && k[0].pair[0].hi == 2);
	ltp_window_free(&w);
}

int main(void)
{
	test_in_order();
	test_gap_retry_recover();
	test_runs_in_a_range();
	test_tail_by_heartbeat();
	test_escalate_and_give_up();
	test_backoff_capped();
	test_ranges_bounded();
	test_window_bounded();
	test_duplicates();
	test_unordered();
	test_wrap_and_late_join();
	printf("ltp_window: ok\n");
	return 0;
}
