/* SPDX-License-Identifier: MIT */
/*
 * ring_util.h - helpers of the packet ring tests (test_ring_*.c): zones,
 * rings, connected loopback sockets, and the engine's internal view (the
 * tests drive kring.c directly where a figure of the paper needs a precise
 * interleaving).
 */
#ifndef GC_TEST_RING_UTIL_H
#define GC_TEST_RING_UTIL_H

#include "check.h"

#include <sys/resource.h>

#include <groupcast/ring.h>
#include "ring/internal.h"

/* A UDP socket of rx's family connected to rx. */
static inline int udp_connected(const struct rx *r)
{
	int fd = udp_socket(r->addr.ss_family);

	CHECK_OK(connect(fd, (const struct sockaddr *)&r->addr, sa_len(r->addr.ss_family)));
	return fd;
}

/* Claim one slot and point it at zone bytes [off, off + len) with user_seq. */
static inline struct gc_pkt *put_pkt(struct gc_ring *r, uint64_t off, uint32_t len, uint64_t seq)
{
	struct gc_pkt *p = gc_ring_get_pkt(r);

	CHECK(p != NULL);
	p->off = off;
	p->len = len;
	p->user_seq = seq;
	return p;
}

/* The engine's view of ring r, for tests that play the engine themselves. */
static inline void kring_of(struct gc_kring *k, struct gc_ring *r)
{
	CHECK_OK(gc_kring_init(k, r->sh, r->map_len, r->n, r->n, r->zone->size, 65507));
}

/* Wait up to ms for the engine to park r (kern_notify); 1 if it did. */
static inline int ring_parked(struct gc_ring *r, int ms)
{
	struct gc_ring_status st = GC_RING_STATUS_INIT();

	for (int i = 0; i < ms; i++) {
		CHECK_OK(gc_ring_status(r, &st));
		if (st.kern_notify)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* Raise the descriptor limit to its hard limit; returns the new soft limit. */
static inline rlim_t fd_limit_max(void)
{
	struct rlimit rl;

	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
	return rl.rlim_cur;
}

/* Running in CI (the CI script sets CI=true): keep the big loops smaller. */
static inline int in_ci(void)
{
	const char *ci = getenv("CI");

	return ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
}

#endif
