/* SPDX-License-Identifier: MIT */
/*
 * The engine sends from its own mapping of a zone, never from the
 * application's (issue 19, item 10).  An application of an in-process engine
 * queues 63 packets of 60000 B and then replaces its own mapping of the zone
 * with PROT_NONE: every packet still leaves, with the bytes the memfd holds,
 * whichever thread sends it: the engine thread (woken by gc_ring_notify()),
 * the caller in gc_ring_flush(), or the caller in gc_ring_submit() on an
 * engine started with GC_RING_ENGINE_SUBMIT_FLUSH.  (Sent from the
 * application's mapping, each failed with EFAULT.)
 *
 * And a packet the network refuses never disappears: with the ring's socket
 * shut down for writing, every datagram fails with EPIPE and is counted in
 * gc_ring_status() (send_errors, last_errno), on either path; its slot is
 * freed (gc_ring_wait() returns), as for a datagram sent and lost.
 */
#include "ring_util.h"

#include <sys/mman.h>

#define NPKT 63u
#define LEN 60000u

struct fixture {
	struct rx *rx;
	struct gc_zone *z;
	struct gc_ring *r;
	struct gc_ring_engine *e;
	int sd;
	bool all_fit; /* the receive buffer holds every packet */
};

static void setup(struct fixture *f, unsigned flags)
{
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.flags = flags);
	int big = 16 << 20;

	f->rx = rx_open(AF_INET, 1);
	/* 63 x 60000 B: more than a receive buffer holds unless forced (root) */
	f->all_fit = setsockopt(f->rx[0].fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) == 0;
	f->z = gc_zone_create(NPKT + 1, LEN);
	f->r = f->z ? gc_ring_create(NPKT + 1, f->z) : NULL;
	f->e = gc_ring_engine_create(&p);
	CHECK(f->r && f->e);
	f->sd = udp_connected(&f->rx[0]);
	CHECK_OK(gc_ring_attach(f->r, f->e, f->sd));
	CHECK(ring_parked(f->r, 2000));
}

static void teardown(struct fixture *f)
{
	CHECK_OK(gc_ring_engine_destroy(f->e));
	gc_ring_destroy(f->r);
	CHECK_OK(gc_zone_destroy(f->z));
	close(f->sd);
	rx_close(f->rx, 1);
}

/* Queue NPKT packets of `len` bytes, packet i filled with tag i (not published). */
static void queue(struct fixture *f, uint32_t len)
{
	for (unsigned i = 0; i < NPKT; i++) {
		void *b = gc_zone_buf(f->z, i);
		CHECK(b != NULL);
		fill(b, len, i);
		put_pkt(f->r, gc_zone_offset(f->z, b), len, i);
	}
}

/* Replace the application's mapping of the zone with an inaccessible one
 * (the memfd keeps the bytes; gc_zone_destroy() unmaps this in its place). */
static void unmap_zone(struct fixture *f)
{
	void *base = gc_zone_base(f->z);
	void *m = mmap(base, gc_zone_size(f->z), PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	CHECK(m == base);
}

/* Every packet was sent and none refused; the receiver got them intact. */
static void expect_all_sent(struct fixture *f, const char *how)
{
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	static unsigned char want[LEN], got[LEN + 1];

	CHECK_OK(gc_ring_wait(f->r, NPKT, 5000));
	CHECK_OK(gc_ring_status(f->r, &st));
	if (st.sent != NPKT || st.send_errors != 0 || st.error != GC_RING_OK)
		check_fail(__FILE__, __LINE__,
			   "%s: sent %llu of %u, send_errors %llu (last errno %d: %s), error %d",
			   how, (unsigned long long)st.sent, NPKT, (unsigned long long)st.send_errors,
			   st.last_errno, strerror(st.last_errno), st.error);
	/* What arrived is what the memfd holds, in order (lo keeps one
	 * sender's order); with a forced receive buffer, everything did. */
	unsigned n = 0;
	for (unsigned i = 0; i < NPKT; i++) {
		struct sockaddr_storage from;
		ssize_t len =
			rx_recv(&f->rx[0], got, sizeof(got), f->all_fit ? RX_TIMEOUT_MS : 200, &from);
		if (len < 0)
			break;
		fill(want, LEN, i);
		if (len != LEN || memcmp(got, want, LEN) != 0)
			check_fail(__FILE__, __LINE__,
				   "%s: datagram %u: %zd bytes, or not packet %u's", how, i, len, i);
		n++;
	}
	if (f->all_fit)
		CHECK_EQ(n, NPKT);
	else if (n < NPKT)
		printf("%s: %u of %u datagrams fitted the receive buffer (not root: checked those)\n",
		       how, n, NPKT);
}

/* The engine thread sends (woken by gc_ring_notify(), never inline). */
static void engine_thread(void)
{
	struct fixture f;
	struct gc_ring_engine_stats s0 = GC_RING_ENGINE_STATS_INIT(), s1 = GC_RING_ENGINE_STATS_INIT();

	setup(&f, 0);
	queue(&f, LEN);
	unmap_zone(&f);
	CHECK_OK(gc_ring_engine_stats(f.e, &s0));
	CHECK_EQ(gc_ring_publish(f.r), 1);
	CHECK_OK(gc_ring_notify(f.r));
	expect_all_sent(&f, "engine thread");
	CHECK_OK(gc_ring_engine_stats(f.e, &s1));
	CHECK(s1.notifies > s0.notifies); /* it was the engine thread */
	teardown(&f);
}

/* The caller sends: gc_ring_flush(), and gc_ring_submit() with SUBMIT_FLUSH. */
static void caller_side(void)
{
	struct fixture f;

	setup(&f, 0);
	queue(&f, LEN);
	unmap_zone(&f);
	/* every one handed to the socket by the flush itself (lo never
	 * blocks a sender): the path under test ran */
	CHECK_EQ(gc_ring_flush(f.r), (int)NPKT);
	expect_all_sent(&f, "gc_ring_flush()");
	teardown(&f);

	setup(&f, GC_RING_ENGINE_SUBMIT_FLUSH);
	queue(&f, LEN);
	unmap_zone(&f);
	CHECK_EQ(gc_ring_submit(f.r), 1);
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(f.r, &st));
	/* sent or refused before gc_ring_submit() returned: the caller's path */
	CHECK_EQ(st.sent + st.send_errors, NPKT);
	expect_all_sent(&f, "gc_ring_submit(), SUBMIT_FLUSH");
	teardown(&f);
}

/* Datagrams the network refuses are counted, never lost without a trace. */
static void refused(int flush)
{
	struct fixture f;
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	const char *how = flush ? "gc_ring_flush()" : "engine thread";

	setup(&f, 0);
	CHECK_OK(shutdown(f.sd, SHUT_WR)); /* every send: EPIPE */
	queue(&f, 1400);		   /* GSO runs, on a path that has them */
	if (flush) {
		CHECK_EQ(gc_ring_flush(f.r), (int)NPKT); /* consumed here, refused */
	} else {
		CHECK_EQ(gc_ring_publish(f.r), 1);
		CHECK_OK(gc_ring_notify(f.r));
	}
	CHECK_OK(gc_ring_wait(f.r, NPKT, 5000)); /* the slots are free again */
	CHECK_OK(gc_ring_status(f.r, &st));
	if (st.sent != 0 || st.send_errors != NPKT || st.last_errno != EPIPE || st.error != GC_RING_OK)
		check_fail(__FILE__, __LINE__,
			   "%s: sent %llu, send_errors %llu of %u, last_errno %d (want EPIPE), error %d",
			   how, (unsigned long long)st.sent, (unsigned long long)st.send_errors,
			   NPKT, st.last_errno, st.error);
	RX_NONE(&f.rx[0]);
	teardown(&f);
}

int main(void)
{
	engine_thread();
	caller_side();
	refused(0);
	refused(1);
	return check_done("ring_mapping");
}
