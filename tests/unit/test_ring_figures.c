/* SPDX-License-Identifier: MIT */
/*
 * The packet ring scenarios of Lai & Kohler's Figures 1-6, step by step: the
 * application uses the public API, the test plays the engine with kring.c so
 * that every interleaving is exact.  N = 10 as in the figures.
 */
#include "ring_util.h"

enum { N = 10 };

static struct gc_zone *z;

static void indexes_are(struct gc_ring *r, uint32_t dev, uint32_t kern, uint32_t umod,
			uint32_t user, int line)
{
	struct gc_ring_status st = GC_RING_STATUS_INIT();

	CHECK_OK(gc_ring_status(r, &st));
	if (st.dev_i != dev || st.kern_i != kern || st.umod_i != umod || st.user_i != user)
		check_fail(__FILE__, line, "dev/kern/umod/user = %u/%u/%u/%u, want %u/%u/%u/%u",
			   st.dev_i, st.kern_i, st.umod_i, st.user_i, dev, kern, umod, user);
}
#define INDEXES(r, d, k, m, u) indexes_are(r, d, k, m, u, __LINE__)

/* A ring with packets 0..6 published (Figure 2), the engine attached (kring). */
static struct gc_ring *fig2(struct gc_kring *k)
{
	struct gc_ring *r = gc_ring_create(N, z);

	CHECK(r != NULL);
	kring_of(k, r);
	for (unsigned i = 0; i < 7; i++)
		put_pkt(r, i * 4096, 100 + i, i);
	INDEXES(r, 0, 0, 0, 7); /* claimed, not yet published */
	CHECK_EQ(gc_ring_publish(r), 0);
	INDEXES(r, 0, 0, 7, 7);
	return r;
}

/* Engine: take up to max packets; the user_seq of the live ones into seqs. */
static unsigned take(struct gc_kring *k, unsigned max, uint64_t *seqs, unsigned *taken)
{
	struct gc_sent out[N];
	uint32_t nout, ntaken;

	CHECK_OK(gc_kring_take(k, max, out, &nout, &ntaken));
	for (unsigned i = 0; i < nout; i++)
		seqs[i] = out[i].user_seq;
	if (taken)
		*taken = ntaken;
	return nout;
}

static void figure1(void)
{
	struct gc_ring *r = gc_ring_create(N, z);
	struct gc_kring k;
	uint32_t avail;

	CHECK(r != NULL);
	kring_of(&k, r);
	INDEXES(r, 0, 0, 0, 0);
	CHECK_EQ(gc_ring_space(r), N - 1); /* empty: dev_i == user_i; N - 1 fit */
	CHECK_OK(gc_kring_plan(&k, &avail));
	CHECK_EQ(avail, 0);
	/* a ring holds at most N - 1 packets */
	for (unsigned i = 0; i < N - 1; i++)
		put_pkt(r, 0, 1, i);
	CHECK_EQ(gc_ring_space(r), 0);
	CHECK_ERR(gc_ring_get_pkt(r) ? 0 : -1, EAGAIN);
	gc_ring_destroy(r);
}

static void figure2(void)
{
	struct gc_kring k;
	struct gc_ring *r = fig2(&k);
	uint32_t avail;

	CHECK_OK(gc_kring_plan(&k, &avail));
	CHECK_EQ(avail, 7); /* packets 0-6 are the engine's to take */
	CHECK_EQ(gc_ring_space(r), N - 1 - 7);
	gc_ring_destroy(r);
}

static void figure3(void)
{
	struct gc_kring k;
	struct gc_ring *r = fig2(&k);
	uint64_t s[N];

	CHECK_EQ(take(&k, 2, s, NULL), 2);
	CHECK_EQ(s[0], 0);
	CHECK_EQ(s[1], 1);
	INDEXES(r, 0, 2, 7, 7); /* processed, not yet through the device */
	CHECK_EQ(gc_kring_done(&k, 2), 0);
	INDEXES(r, 2, 2, 7, 7);
	CHECK_EQ(gc_ring_space(r), N - 1 - 5);
	gc_ring_destroy(r);
}

static void figure4(void)
{
	struct gc_kring k;
	struct gc_ring *r = fig2(&k);
	uint64_t s[N];
	unsigned taken;

	CHECK_EQ(take(&k, 2, s, NULL), 2);
	/* No index moves.  1 is the engine's already: marking it is safe and
	 * changes nothing; 3 and 5 are published, so the engine may or may not
	 * have taken them (0 = not certain), but here it has not. */
	CHECK_EQ(gc_ring_mark_dead(r, 1), 0);
	CHECK_EQ(gc_ring_mark_dead(r, 3), 0);
	CHECK_EQ(gc_ring_mark_dead(r, 5), 0);
	INDEXES(r, 0, 2, 7, 7);
	CHECK_EQ(take(&k, N, s, &taken), 3);
	CHECK_EQ(taken, 5);
	CHECK_EQ(s[0], 2);
	CHECK_EQ(s[1], 4);
	CHECK_EQ(s[2], 6);
	CHECK_EQ(k.dead, 2);
	INDEXES(r, 0, 7, 7, 7);
	gc_ring_destroy(r);
}

static void figure5(void)
{
	struct gc_kring k;
	struct gc_ring *r = fig2(&k);
	uint64_t s[N];
	unsigned first;

	CHECK_EQ(take(&k, 2, s, NULL), 2); /* kern_i = 2 */
	CHECK_EQ(gc_ring_rewind(r, 3, &first), 4);
	CHECK_EQ(first, 3); /* packets 3-6 are safe to modify */
	INDEXES(r, 0, 2, 3, 7);
	/* the engine still sends what stays published: packet 2 only */
	CHECK_EQ(take(&k, N, s, NULL), 1);
	CHECK_EQ(s[0], 2);
	/* late data choice: drop 3, replace 4, reorder 5 and 6 */
	CHECK_EQ(gc_ring_mark_dead(r, 3), 1);
	gc_ring_pkt(r, 4)->user_seq = 40;
	gc_ring_pkt(r, 4)->len = 1400;
	CHECK_OK(gc_ring_swap(r, 5, 6));
	CHECK_ERR(gc_ring_swap(r, 2, 5), EBUSY); /* 2 is gone */
	CHECK_EQ(gc_ring_publish(r), 0);
	INDEXES(r, 0, 3, 7, 7);
	struct gc_sent out[N];
	uint32_t nout, ntaken;
	CHECK_OK(gc_kring_take(&k, N, out, &nout, &ntaken));
	CHECK_EQ(nout, 3);
	CHECK_EQ(out[0].user_seq, 40);
	CHECK_EQ(out[0].len, 1400);
	CHECK_EQ(out[1].user_seq, 6);
	CHECK_EQ(out[1].len, 106);
	CHECK_EQ(out[2].user_seq, 5);
	CHECK_EQ(gc_ring_mark_dead(r, 6), 0); /* published and taken: not certain */
	gc_ring_destroy(r);
}

static void figure6(void)
{
	struct gc_kring k;
	uint64_t s[N];
	unsigned first;

	/* (a) The engine moved kern_i to 5 just before the rewind's kern_i
	 * load: only 5 and 6 are safe to modify. */
	struct gc_ring *r = fig2(&k);
	CHECK_EQ(take(&k, 2, s, NULL), 2);
	uint32_t avail;
	CHECK_OK(gc_kring_plan(&k, &avail)); /* the engine saw umod_i = 7 ... */
	CHECK_EQ(avail, 5);
	struct gc_sent out[N];
	uint32_t nout, ntaken;
	CHECK_OK(gc_kring_claim(&k, 3, out, &nout, &ntaken)); /* ... and took 2, 3, 4 */
	CHECK_EQ(ntaken, 3);
	CHECK_EQ(gc_ring_rewind(r, 3, &first), 2);
	CHECK_EQ(first, 5);
	INDEXES(r, 0, 5, 5, 7); /* umod_i stops at the kern_i it saw */
	CHECK_EQ(gc_ring_mark_dead(r, 4), 0);
	CHECK_EQ(gc_ring_mark_dead(r, 5), 1);
	CHECK_OK(gc_kring_plan(&k, &avail)); /* umod_i below kern_i: nothing more */
	CHECK_EQ(avail, 0);
	gc_ring_destroy(r);

	/* (b) The engine read umod_i = 7 and is claiming 2..4 while the
	 * application stores umod_i = 3: the engine's confirming load (after
	 * its fence) sees 3 and gives back 3 and 4 unread.  The application's
	 * kern_i load (after its fence) sees 3 or 5; either way nothing it may
	 * modify is read by the engine.  3 and 4 go out later, unmodified. */
	r = fig2(&k);
	CHECK_EQ(take(&k, 2, s, NULL), 2);
	CHECK_OK(gc_kring_plan(&k, &avail));
	CHECK_EQ(avail, 5);
	atomic_store(&r->sh->umod_i, 3); /* the application's rewind store */
	CHECK_OK(gc_kring_claim(&k, 3, out, &nout, &ntaken));
	CHECK_EQ(ntaken, 1);
	CHECK_EQ(out[0].user_seq, 2);
	INDEXES(r, 0, 3, 3, 7);
	CHECK_EQ(gc_ring_rewind(r, 3, &first), 4);
	CHECK_EQ(first, 3);
	gc_ring_pkt(r, 5)->user_seq = 50;
	CHECK_EQ(gc_ring_mark_dead(r, 6), 1);
	gc_ring_publish(r);
	CHECK_EQ(take(&k, N, s, NULL), 3);
	CHECK_EQ(s[0], 3);
	CHECK_EQ(s[1], 4);
	CHECK_EQ(s[2], 50);
	gc_ring_destroy(r);

	/* (b') The engine's claim store was visible before the rewind began:
	 * the rewind stops at kern_i = 5. */
	r = fig2(&k);
	CHECK_EQ(take(&k, 2, s, NULL), 2);
	atomic_store(&r->sh->kern_i, 5); /* the engine's claim store */
	CHECK_EQ(gc_ring_rewind(r, 3, &first), 2);
	CHECK_EQ(first, 5);
	CHECK_OK(gc_kring_claim(&k, 3, out, &nout, &ntaken));
	CHECK_EQ(ntaken, 3);
	gc_ring_destroy(r);

	/* (c) The rewind came first entirely: 3-6 are safe, the engine sends 2. */
	r = fig2(&k);
	CHECK_EQ(take(&k, 2, s, NULL), 2);
	CHECK_OK(gc_kring_plan(&k, &avail));
	CHECK_EQ(avail, 5);
	CHECK_EQ(gc_ring_rewind(r, 3, &first), 4);
	CHECK_EQ(first, 3);
	CHECK_OK(gc_kring_claim(&k, 3, out, &nout, &ntaken));
	CHECK_EQ(ntaken, 1);
	CHECK_EQ(out[0].user_seq, 2);
	gc_ring_destroy(r);

	/* (d) GC_RING_OLDEST: as far back as the engine allows. */
	r = fig2(&k);
	CHECK_EQ(take(&k, 2, s, NULL), 2);
	CHECK_EQ(gc_ring_rewind(r, GC_RING_OLDEST, &first), 5);
	CHECK_EQ(first, 2);
	CHECK_EQ(take(&k, N, s, NULL), 0);
	gc_ring_destroy(r);
}

/* Wrap-around: comparisons are circular, relative to dev_i. */
static void wraparound(void)
{
	struct gc_ring *r = gc_ring_create(N, z);
	struct gc_kring k;
	uint64_t s[N], seq = 0, want = 0;

	CHECK(r != NULL);
	kring_of(&k, r);
	for (int round = 0; round < 25; round++) {
		unsigned n = 1 + (unsigned)round % (N - 1);
		for (unsigned i = 0; i < n; i++)
			put_pkt(r, 0, 1, seq++);
		gc_ring_publish(r);
		unsigned got = take(&k, N, s, NULL);
		CHECK_EQ(got, n);
		for (unsigned i = 0; i < got; i++)
			CHECK_EQ(s[i], want++);
		CHECK_EQ(gc_kring_done(&k, k.kern), 0);
		CHECK_EQ(gc_ring_space(r), N - 1);
	}
	gc_ring_destroy(r);
}

int main(void)
{
	z = gc_zone_create(16, 4096);
	CHECK(z != NULL);
	figure1();
	figure2();
	figure3();
	figure4();
	figure5();
	figure6();
	wraparound();
	CHECK_OK(gc_zone_destroy(z));
	return check_done("ring_figures");
}
