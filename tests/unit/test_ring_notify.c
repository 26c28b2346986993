/* SPDX-License-Identifier: MIT */
/*
 * kern_notify and gc_ring_notify(): the engine parks an idle ring and asks
 * for a notification; a published packet then waits until the application
 * notifies; while the engine polls (idle_us), no notification is needed.
 * gc_ring_wait() sleeps until the engine frees slots.
 */
#include "ring_util.h"

#include <pthread.h>
#include <sched.h>

static void parked(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(4, 4096);
	struct gc_ring *r = gc_ring_create(16, z);
	struct gc_ring_engine *e = gc_ring_engine_create(NULL);
	struct gc_ring_engine_stats st0 = GC_RING_ENGINE_STATS_INIT(),
				    st1 = GC_RING_ENGINE_STATS_INIT();
	uint64_t off = gc_zone_offset(z, gc_zone_buf(z, 0));

	CHECK(z && r && e);
	memcpy(gc_zone_buf(z, 0), "hello", 5);
	CHECK_OK(gc_ring_attach(r, e, sd));
	/* an empty ring is parked at once: the engine asks to be notified */
	CHECK(ring_parked(r, 2000));
	CHECK_OK(gc_ring_engine_stats(e, &st0));

	/* published without a notification: it stays in the ring */
	put_pkt(r, off, 5, 1);
	CHECK_EQ(gc_ring_publish(r), 1);
	RX_NONE(&rx[0]);
	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &rs));
	CHECK_EQ(rs.kern_i, 0);
	CHECK_OK(gc_ring_notify(r));
	RX_EXPECT(&rx[0], "hello", 5);

	/* submit notifies only when asked; unless the engine thread can run
	 * only on our CPU (it inherited our mask: run under taskset -c 0, or
	 * a machine of one CPU), where the submit sends the packet itself
	 * before it returns (test_ring_flush) */
	cpu_set_t mask;
	CHECK_OK(sched_getaffinity(0, sizeof(mask), &mask));
	int one_cpu = CPU_COUNT(&mask) == 1;
	CHECK(ring_parked(r, 2000));
	put_pkt(r, off, 5, 2);
	CHECK_EQ(gc_ring_submit(r), 1);
	if (one_cpu) {
		CHECK_OK(gc_ring_status(r, &rs));
		CHECK_EQ(rs.sent, 2);
	}
	RX_EXPECT(&rx[0], "hello", 5);
	CHECK_OK(gc_ring_engine_stats(e, &st1));
	CHECK_EQ(st1.notifies - st0.notifies, one_cpu ? 1 : 2);
	CHECK(st1.sleeps > st0.sleeps);

	/* a notification the engine did not ask for is harmless */
	CHECK_OK(gc_ring_notify(r));
	CHECK_OK(gc_ring_notify(r));
	RX_NONE(&rx[0]);

	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

/* idle_us: the engine keeps polling a ring it just emptied. */
static void polling(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(16, z);
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.idle_us = 2000000);
	struct gc_ring_engine *e = gc_ring_engine_create(&p);

	CHECK(z && r && e);
	memcpy(gc_zone_buf(z, 0), "poll", 4);
	CHECK_OK(gc_ring_attach(r, e, sd));
	for (int i = 0; i < 5; i++) {
		put_pkt(r, 0, 4, (uint64_t)i);
		/* within 2 s of the last packet the engine still polls: no notify */
		CHECK_EQ(gc_ring_publish(r), 0);
		RX_EXPECT(&rx[0], "poll", 4);
	}
	CHECK(ring_parked(r, 5000)); /* and then it parks */
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

/* A transport that holds everything while `hold` is set. */
static _Atomic int hold;
static unsigned hold_xmit(void *arg, struct gc_flow *c, const struct gc_sent *p, unsigned n,
			  const unsigned char *zone)
{
	(void)arg, (void)c, (void)p, (void)zone;
	return atomic_load(&hold) ? 0 : n;
}

static void *release_later(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
	atomic_store(&hold, 0);
	return NULL;
}

static void waiting(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(8, z);
	struct gc_ring_engine_hooks h = { .xmit = hold_xmit };
	struct gc_ring_engine *e = NULL;
	CHECK_OK(gc_err(gc_ring_engine_create_hooks(NULL, &h, &e)));
	pthread_t t;

	CHECK(z && r && e);
	CHECK_ERR(gc_ring_wait(r, 8, 0), EINVAL);
	CHECK_OK(gc_ring_wait(r, 7, 0)); /* room enough: no engine needed */
	put_pkt(r, 0, 1, 0);
	CHECK_ERR(gc_ring_wait(r, 7, 10), ENOTCONN);
	CHECK_OK(gc_ring_attach(r, e, sd));
	atomic_store(&hold, 1);
	for (int i = 1; i < 7; i++)
		put_pkt(r, 0, 1, (uint64_t)i);
	CHECK_ERR(gc_ring_get_pkt(r) ? 0 : -1, EAGAIN);
	CHECK(gc_ring_submit(r) >= 0);
	uint64_t t0 = gc_now_ns();
	CHECK_ERR(gc_ring_wait(r, 1, 100), ETIMEDOUT);
	CHECK(gc_now_ns() - t0 >= 90 * 1000000ull);
	CHECK(strstr(gc_errmsg(), "100 ms") != NULL);
	/* released by another thread: the engine frees all 7, wakes us */
	CHECK_EQ(pthread_create(&t, NULL, release_later, NULL), 0);
	CHECK_OK(gc_ring_wait(r, 7, 5000));
	CHECK_EQ(gc_ring_space(r), 7);
	pthread_join(t, NULL);
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

/*
 * Notifications racing with detaching: the engine may get a ring's
 * notification and its detach request in one batch of events, in either
 * order; it must not touch the ring after freeing it (ASan watches).
 */
struct storm {
	_Atomic int efd, stop;
};

static void *notify_storm(void *arg)
{
	struct storm *st = arg;
	uint64_t one = 1;

	while (!atomic_load(&st->stop)) {
		int fd = atomic_load(&st->efd);
		if (fd >= 0 && write(fd, &one, sizeof(one)) < 0 && errno != EBADF)
			break;
	}
	return NULL;
}

static void detach_storm(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(8, z);
	struct gc_ring_engine *e = gc_ring_engine_create(NULL);
	struct storm st = { .efd = -1 };
	pthread_t t;

	int rounds = fd_limit_max() > 1200 ? 1000 : 300, *dups = calloc((size_t)rounds, sizeof(int));
	CHECK(z && r && e && dups);
	CHECK_EQ(pthread_create(&t, NULL, notify_storm, &st), 0);
	for (int i = 0; i < rounds; i++) {
		CHECK_OK(gc_ring_attach(r, e, sd));
		/* a duplicate the storm keeps writing to after the detach closed
		 * ours; closed only at the end, so that no number is reused */
		dups[i] = dup(r->efd);
		CHECK(dups[i] >= 0);
		atomic_store(&st.efd, dups[i]);
		put_pkt(r, 0, 1, (uint64_t)i);
		CHECK(gc_ring_submit(r) >= 0);
		CHECK_OK(gc_ring_detach(r));
	}
	atomic_store(&st.stop, 1);
	pthread_join(t, NULL);
	for (int i = 0; i < rounds; i++)
		close(dups[i]);
	free(dups);
	struct gc_ring_engine_stats es = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &es));
	CHECK_EQ(es.rings, 0);
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

int main(void)
{
	parked();
	polling();
	waiting();
	detach_storm();
	return check_done("ring_notify");
}
