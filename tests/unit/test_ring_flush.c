/* SPDX-License-Identifier: MIT */
/*
 * gc_ring_flush(): on a ring the in-process engine has parked, the calling
 * thread sends what it published, in order, without waking the engine (no
 * notification reaches it) and the ring stays parked.  Dead packets are
 * skipped.  Flushes racing with the engine thread (submits wake it) lose and
 * duplicate nothing.  On a daemon's ring, flush publishes and notifies.
 *
 * gc_ring_submit() sends a parked ring from the caller's thread too, without
 * waking the engine, when the engine was started with
 * GC_RING_ENGINE_SUBMIT_FLUSH, or when the engine thread can run only on the
 * caller's CPU (pinned there, or a one-CPU mask it inherited, as under
 * taskset -c 0) and the previous submit was a while ago (a paced burst); a
 * burst right after another one, or from another CPU, wakes the engine.
 */
#include "ring_util.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>

/* Receive n datagrams that carry user_seq first..first+n-1 in order. */
static void expect_seqs(const struct rx *rx, uint64_t first, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got = 0;
		struct sockaddr_storage from;
		ssize_t len = rx_recv(rx, &got, sizeof(got), RX_TIMEOUT_MS, &from);
		if (len != (ssize_t)sizeof(got) || got != first + i)
			check_fail(__FILE__, __LINE__, "datagram %llu: len %zd seq %llu, want %llu",
				   (unsigned long long)i, len, (unsigned long long)got,
				   (unsigned long long)(first + i));
	}
}

/* Receive n datagrams carrying user_seq first..first+n-1, each once, in any
 * order: datagrams handed to the kernel in order by two threads on two CPUs
 * (the engine and a flusher) can swap places on the way, since lo (like a
 * multi-queue NIC) queues each CPU's packets separately. */
static void expect_once(const struct rx *rx, uint64_t first, uint64_t n)
{
	unsigned char seen[64] = { 0 };

	CHECK(n <= sizeof(seen) * 8);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got = 0, k;
		struct sockaddr_storage from;
		ssize_t len = rx_recv(rx, &got, sizeof(got), RX_TIMEOUT_MS, &from);
		k = got - first;
		if (len != (ssize_t)sizeof(got) || got < first || k >= n ||
		    (seen[k / 8] & (1u << (k % 8))))
			check_fail(__FILE__, __LINE__,
				   "datagram %llu of %llu..%llu: len %zd seq %llu (%s)",
				   (unsigned long long)i, (unsigned long long)first,
				   (unsigned long long)(first + n - 1), len, (unsigned long long)got,
				   len == (ssize_t)sizeof(got) && got >= first && k < n
					   ? "twice"
					   : "not expected");
		seen[k / 8] |= (unsigned char)(1u << (k % 8));
	}
}

struct fixture {
	struct rx *rx;
	struct gc_zone *z;
	struct gc_ring *r;
	struct gc_ring_engine *e;
	unsigned n;
};

static void setup(struct fixture *f, unsigned entries, struct gc_ring_engine *e)
{
	f->rx = rx_open(AF_INET, 1);
	f->n = entries;
	f->z = gc_zone_create(entries, 64);
	f->r = f->z ? gc_ring_create(entries, f->z) : NULL;
	f->e = e;
	CHECK(f->r && f->e);
	int sd = udp_connected(&f->rx[0]);
	CHECK_OK(gc_ring_attach(f->r, f->e, sd));
	close(sd);
}

static void teardown(struct fixture *f)
{
	gc_ring_destroy(f->r);
	CHECK_OK(gc_zone_destroy(f->z));
	rx_close(f->rx, 1);
}

/* Claim one packet carrying seq (8 bytes) in the slot's own buffer. */
static struct gc_pkt *put_seq(struct fixture *f, uint64_t seq)
{
	struct gc_pkt *p = gc_ring_get_pkt(f->r);
	CHECK(p != NULL);
	unsigned pos = gc_ring_pos(f->r, p);
	void *b = gc_zone_buf(f->z, pos);
	memcpy(b, &seq, sizeof(seq));
	p->off = gc_zone_offset(f->z, b);
	p->len = sizeof(seq);
	p->user_seq = seq;
	return p;
}

static void in_thread(void)
{
	struct fixture f;
	struct gc_ring_engine_stats st0 = GC_RING_ENGINE_STATS_INIT(),
				    st1 = GC_RING_ENGINE_STATS_INIT();

	setup(&f, 64, gc_ring_engine_create(NULL));
	CHECK(ring_parked(f.r, 2000));
	CHECK_OK(gc_ring_engine_stats(f.e, &st0));

	CHECK_EQ(gc_ring_flush(f.r), 0); /* nothing published */
	for (uint64_t i = 0; i < 10; i++)
		put_seq(&f, i);
	CHECK_EQ(gc_ring_flush(f.r), 10);
	expect_seqs(&f.rx[0], 0, 10);

	/* one at a time, 1000 times (the ring wraps): each flush sends its
	 * packet before it returns, the engine is never woken */
	for (uint64_t i = 10; i < 1010; i++) {
		put_seq(&f, i);
		CHECK_EQ(gc_ring_flush(f.r), 1);
		if (i % 10 == 9)
			expect_seqs(&f.rx[0], i - 9, 10);
	}
	RX_NONE(&f.rx[0]);

	/* dead packets are skipped */
	put_seq(&f, 2000);
	struct gc_pkt *d = put_seq(&f, 2001);
	put_seq(&f, 2002);
	CHECK_EQ(gc_ring_mark_dead(f.r, gc_ring_pos(f.r, d)), 1);
	CHECK_EQ(gc_ring_flush(f.r), 2);
	expect_seqs(&f.rx[0], 2000, 1);
	expect_seqs(&f.rx[0], 2002, 1);

	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(f.r, &rs));
	CHECK_EQ(rs.kern_notify, 1);   /* still parked */
	CHECK_EQ(rs.dev_i, rs.user_i); /* everything freed */
	CHECK_EQ(rs.sent, 1012);
	CHECK_EQ(rs.dead, 1);
	CHECK_EQ(gc_ring_space(f.r), f.n - 1);
	CHECK_OK(gc_ring_engine_stats(f.e, &st1));
	CHECK_EQ(st1.notifies, st0.notifies);	   /* the engine thread never woke for it */
	CHECK_EQ(st1.packets - st0.packets, 1012); /* counted in the engine's stats */

	/* a submit still wakes the engine, which then polls the ring; a flush
	 * meanwhile leaves the packets to it */
	put_seq(&f, 3000);
	CHECK_EQ(gc_ring_submit(f.r), 1);
	expect_seqs(&f.rx[0], 3000, 1);

	CHECK_OK(gc_ring_detach(f.r));
	put_seq(&f, 3001);
	CHECK_EQ(gc_ring_flush(f.r), -1);
	CHECK_EQ(errno, ENOTCONN);
	CHECK_OK(gc_ring_engine_destroy(f.e));
	teardown(&f);
}

/* Flushes and submits in random order against a busy engine thread: every
 * packet arrives once (expect_once() says why not necessarily in order). */
static void racing(void)
{
	struct fixture f;
	const uint64_t total = in_ci() ? 20000 : 100000;
	uint64_t next_rx = 0;
	unsigned seed = 7;

	setup(&f, 32, gc_ring_engine_create(NULL));
	for (uint64_t i = 0; i < total; i++) {
		while (gc_ring_space(f.r) == 0) {
			CHECK(gc_ring_flush(f.r) >= 0);
			CHECK_OK(gc_ring_wait(f.r, 1, 5000));
		}
		put_seq(&f, i);
		if (rand_r(&seed) % 3 == 0)
			CHECK(gc_ring_flush(f.r) >= 0);
		else
			CHECK(gc_ring_submit(f.r) >= 0);
		/* read as we go: the receive buffer is far smaller than total */
		if (i % 16 == 15) {
			CHECK(gc_ring_flush(f.r) >= 0);
			CHECK_OK(gc_ring_wait(f.r, f.n - 1, 5000));
			expect_once(&f.rx[0], next_rx, i + 1 - next_rx);
			next_rx = i + 1;
		}
	}
	CHECK(gc_ring_flush(f.r) >= 0);
	CHECK_OK(gc_ring_wait(f.r, f.n - 1, 5000));
	expect_once(&f.rx[0], next_rx, total - next_rx);
	RX_NONE(&f.rx[0]);
	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(f.r, &rs));
	CHECK_EQ(rs.sent, total);
	CHECK_EQ(rs.error, GC_RING_OK);
	CHECK_OK(gc_ring_engine_destroy(f.e));
	teardown(&f);
}

/* Pin this thread to cpu (or back to the set in *saved, when cpu < 0). */
static void pin(int cpu, const cpu_set_t *saved)
{
	cpu_set_t set;

	if (cpu < 0) {
		set = *saved;
	} else {
		CPU_ZERO(&set);
		CPU_SET((size_t)cpu, &set);
	}
	CHECK_OK(pthread_setaffinity_np(pthread_self(), sizeof(set), &set));
}

/* Publish n packets from seq and submit them: returns what the ring says
 * was sent right after gc_ring_submit() returned. */
static uint64_t submit_burst(struct fixture *f, uint64_t seq, unsigned n)
{
	struct gc_ring_status rs = GC_RING_STATUS_INIT();

	for (unsigned i = 0; i < n; i++)
		put_seq(f, seq + i);
	CHECK_EQ(gc_ring_submit(f->r), 1);
	CHECK_OK(gc_ring_status(f->r, &rs));
	return rs.sent;
}

/* Our thread's mask into *saved, and its first (up to) two CPUs into
 * cpus[]; returns how many. */
static int our_cpus(cpu_set_t *saved, int cpus[2])
{
	int ncpu = 0;

	CHECK_OK(pthread_getaffinity_np(pthread_self(), sizeof(*saved), saved));
	for (int c = 0; c < CPU_SETSIZE && ncpu < 2; c++)
		if (CPU_ISSET((size_t)c, saved))
			cpus[ncpu++] = c;
	return ncpu;
}

/* n paced bursts of 4 from *seq on a parked ring: each is sent before
 * gc_ring_submit() returns, and the engine thread is never notified. */
static void paced_inline(struct fixture *f, uint64_t *seq, unsigned n)
{
	struct gc_ring_engine_stats st0 = GC_RING_ENGINE_STATS_INIT(),
				    st1 = GC_RING_ENGINE_STATS_INIT();
	uint64_t first = *seq;

	CHECK(ring_parked(f->r, 2000));
	CHECK_OK(gc_ring_engine_stats(f->e, &st0));
	for (unsigned b = 0; b < n; b++, *seq += 4) {
		usleep(2000); /* far more than the gap (handle.c) */
		CHECK_EQ(submit_burst(f, *seq, 4), *seq + 4);
	}
	expect_seqs(&f->rx[0], first, *seq - first);
	CHECK_OK(gc_ring_engine_stats(f->e, &st1));
	CHECK_EQ(st1.notifies, st0.notifies); /* the engine thread never woke */
}

/* One paced burst of 4 from *seq on a parked ring, handed to the engine
 * thread (notified) rather than sent by the caller. */
static void paced_handed_over(struct fixture *f, uint64_t *seq)
{
	struct gc_ring_engine_stats st0 = GC_RING_ENGINE_STATS_INIT(),
				    st1 = GC_RING_ENGINE_STATS_INIT();

	CHECK(ring_parked(f->r, 2000));
	CHECK_OK(gc_ring_engine_stats(f->e, &st0));
	usleep(2000);
	submit_burst(f, *seq, 4);
	*seq += 4;
	CHECK_OK(gc_ring_wait(f->r, f->n - 1, 5000));
	expect_seqs(&f->rx[0], *seq - 4, 4);
	CHECK_OK(gc_ring_engine_stats(f->e, &st1));
	CHECK(st1.notifies >= st0.notifies + 1);
}

/* A parked ring, a burst after a pause: sent by gc_ring_submit() itself
 * (before it returns, no notification) or handed to the engine thread. */
static void submit_paced(void)
{
	cpu_set_t saved;
	int cpus[2], ncpu = our_cpus(&saved, cpus);
	struct gc_ring_engine_stats st0 = GC_RING_ENGINE_STATS_INIT(),
				    st1 = GC_RING_ENGINE_STATS_INIT();
	struct fixture f;
	uint64_t seq = 0;

	/* GC_RING_ENGINE_SUBMIT_FLUSH: inline whatever the CPU or the pace */
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_SUBMIT_FLUSH);
	setup(&f, 64, gc_ring_engine_create(&p));
	CHECK(ring_parked(f.r, 2000));
	CHECK_OK(gc_ring_engine_stats(f.e, &st0));
	for (unsigned b = 0; b < 20; b++, seq += 3)
		CHECK_EQ(submit_burst(&f, seq, 3), seq + 3);
	expect_seqs(&f.rx[0], 0, seq);
	CHECK_OK(gc_ring_engine_stats(f.e, &st1));
	CHECK_EQ(st1.notifies, st0.notifies);
	CHECK_OK(gc_ring_engine_destroy(f.e));
	teardown(&f);

	/* The engine pinned to our CPU: a paced burst goes inline. */
	seq = 0;
	pin(cpus[0], NULL);
	p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_PIN_CPU,
								 .cpu = cpus[0]);
	setup(&f, 64, gc_ring_engine_create(&p));
	paced_inline(&f, &seq, 5);
	CHECK_OK(gc_ring_engine_stats(f.e, &st1));
	/* Back-to-back submits: the engine is woken and takes over (the first
	 * of them comes right after an inline one, so it hands over unless
	 * this thread was preempted in between; 64 such chances). */
	for (unsigned b = 0; b < 64; b++, seq++) {
		put_seq(&f, seq);
		CHECK(gc_ring_submit(f.r) >= 0);
	}
	CHECK_OK(gc_ring_wait(f.r, f.n - 1, 5000));
	expect_seqs(&f.rx[0], seq - 64, 64);
	CHECK_OK(gc_ring_engine_stats(f.e, &st0));
	CHECK(st0.notifies > st1.notifies);
	/* From another CPU: handed over, paced or not. */
	if (ncpu == 2) {
		pin(cpus[1], NULL);
		paced_handed_over(&f, &seq);
	}
	RX_NONE(&f.rx[0]);
	pin(-1, &saved);
	CHECK_OK(gc_ring_engine_destroy(f.e));
	teardown(&f);
}

/* Give every thread of this process but the calling one (the engine
 * thread, and any a sanitizer runs) the mask set, as taskset -p would. */
static void set_others(const cpu_set_t *set)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	pid_t me = gettid();

	CHECK(d != NULL);
	while ((de = readdir(d))) {
		pid_t t = (pid_t)atoi(de->d_name);
		if (t > 0 && t != me)
			CHECK_OK(sched_setaffinity(t, sizeof(*set), set));
	}
	closedir(d);
}

/* The process on one CPU with no pin flag (as under taskset -c 0): the
 * engine thread inherits the mask, and a paced burst is sent by
 * gc_ring_submit() before it returns, as with the engine pinned.  The mask
 * is read again after a while (at most every 100 ms, handle.c): widened,
 * the engine gets the bursts again; narrowed, the caller sends them. */
static void submit_one_cpu(void)
{
	cpu_set_t saved, one;
	int cpus[2], ncpu = our_cpus(&saved, cpus);
	struct fixture f;
	uint64_t seq = 0;

	CPU_ZERO(&one);
	CPU_SET((size_t)cpus[0], &one);

	pin(cpus[0], NULL);
	setup(&f, 64, gc_ring_engine_create(NULL)); /* no flags: it inherits our mask */
	paced_inline(&f, &seq, 5);

	if (ncpu == 2) {
		/* the engine may run on the other CPU too: it sends again */
		set_others(&saved);
		usleep(150000);
		paced_handed_over(&f, &seq);
		/* confined to our CPU again: the caller sends */
		set_others(&one);
		usleep(150000);
		paced_inline(&f, &seq, 1);
	}
	RX_NONE(&f.rx[0]);
	pin(-1, &saved);
	CHECK_OK(gc_ring_engine_destroy(f.e));
	teardown(&f);
}

/* A daemon's ring: the daemon sends; flush publishes and notifies. */
static void daemon_ring(void)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/gc-flush-test-%d.sock", (int)getpid());
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = path);
	struct gc_ring_engine *d = gc_ring_engine_create(&p);
	CHECK(d != NULL);
	struct fixture f;
	setup(&f, 16, gc_ring_engine_connect(path));
	CHECK(ring_parked(f.r, 2000));
	for (uint64_t i = 0; i < 5; i++)
		put_seq(&f, i);
	CHECK_EQ(gc_ring_flush(f.r), 0); /* sent by the daemon, not here */
	expect_seqs(&f.rx[0], 0, 5);
	CHECK_OK(gc_ring_engine_destroy(f.e));
	CHECK_OK(gc_ring_engine_destroy(d));
	teardown(&f);
}

int main(void)
{
	CHECK_EQ(gc_ring_flush(NULL), -1);
	CHECK_EQ(errno, EFAULT);
	in_thread();
	racing();
	submit_paced();
	submit_one_cpu();
	daemon_ring();
	return check_done("ring_flush");
}
