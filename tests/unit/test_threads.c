/* SPDX-License-Identifier: MIT */
/*
 * Threads: (1) two threads send concurrently on two sockets, each with its own
 * group; every datagram arrives once, in order, byte-exact.  (2) One thread
 * replaces the group while another sends on the same socket: calls on one
 * socket are serialized, so each datagram reaches exactly the whole old group
 * or exactly the whole new group, never a mix.  (3) The promise in group.h:
 * while one thread is inside a long send on socket A and a second thread
 * waits for A, a third thread's calls on socket B still go through.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

enum { SENDS = 150, GROUP = 4, PAYLOAD = 64 };

struct sender {
	int sd;
	unsigned id;
	enum gc_engine engine;
};

static void payload(unsigned char *p, unsigned id, unsigned seq)
{
	fill(p, PAYLOAD, id * 1000 + seq);
	p[0] = (unsigned char)id;
	p[1] = (unsigned char)(seq >> 8);
	p[2] = (unsigned char)seq;
}

static void *send_thread(void *arg)
{
	struct sender *s = arg;
	unsigned char p[PAYLOAD];

	for (unsigned seq = 0; seq < SENDS; seq++) {
		payload(p, s->id, seq);
		if (gc_send(s->sd, p, sizeof(p), 0) != PAYLOAD) {
			fprintf(stderr, "sender %u seq %u: %s (%s)\n", s->id, seq, strerror(errno),
				gc_errmsg());
			exit(1);
		}
	}
	return NULL;
}

static void two_sockets(enum gc_engine e)
{
	struct rx *r = rx_open(AF_INET, 2 * GROUP);
	struct sockaddr_storage *m = rx_members(r, 2 * GROUP);
	struct sender s[2];
	pthread_t t[2];

	for (unsigned i = 0; i < 2; i++) {
		s[i] = (struct sender){ .sd = udp_socket(AF_INET), .id = i + 1, .engine = e };
		CHECK_OK(gc_set_engine(s[i].sd, e));
		CHECK_OK(gc_setgroup(s[i].sd, m + i * GROUP, GROUP));
	}
	for (unsigned i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, send_thread, &s[i]) == 0);
	for (unsigned i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], NULL) == 0);

	for (unsigned i = 0; i < 2; i++) {
		for (unsigned k = 0; k < GROUP; k++) {
			for (unsigned seq = 0; seq < SENDS; seq++) {
				unsigned char p[PAYLOAD];
				payload(p, s[i].id, seq);
				RX_EXPECT(&r[i * GROUP + k], p, sizeof(p));
			}
		}
		CHECK_EQ(gc_getgroup_size(s[i].sd), GROUP);
		struct gc_stats st = GC_STATS_INIT();
		CHECK_OK(gc_stats(s[i].sd, &st));
		CHECK_EQ(st.group_sends, SENDS);
		CHECK_EQ(st.datagrams, SENDS * GROUP);
		close(s[i].sd);
	}
	RX_NONE_ALL(r, 2 * GROUP);
	free(m);
	rx_close(r, 2 * GROUP);
}

struct replacer {
	int sd;
	const struct sockaddr_storage *a, *b;
	atomic_int stop;
};

static void *replace_thread(void *arg)
{
	struct replacer *rp = arg;
	unsigned i = 0;

	while (!atomic_load(&rp->stop)) {
		if (gc_setgroup(rp->sd, i++ % 2 ? rp->b : rp->a, GROUP) != 0) {
			fprintf(stderr, "replacer: %s\n", strerror(errno));
			exit(1);
		}
	}
	return NULL;
}

/* Drain receiver r: mark seen[seq] for each datagram; check bytes. */
static void collect(const struct rx *r, unsigned char *seen, unsigned id)
{
	unsigned char buf[PAYLOAD + 1], want[PAYLOAD];
	struct sockaddr_storage from;
	ssize_t n;

	while ((n = rx_recv(r, buf, sizeof(buf), RX_QUIET_MS * 4, &from)) >= 0) {
		CHECK_EQ(n, PAYLOAD);
		unsigned seq = (unsigned)buf[1] << 8 | buf[2];
		CHECK(seq < SENDS);
		payload(want, id, seq);
		CHECK(memcmp(buf, want, PAYLOAD) == 0);
		CHECK_EQ(seen[seq], 0); /* once per receiver */
		seen[seq] = 1;
	}
}

static void replace_while_sending(enum gc_engine e)
{
	struct rx *r = rx_open(AF_INET, 2 * GROUP);
	struct sockaddr_storage *m = rx_members(r, 2 * GROUP);
	struct sender s = { .sd = udp_socket(AF_INET), .id = 9, .engine = e };
	struct replacer rp = { .sd = s.sd, .a = m, .b = m + GROUP };
	pthread_t ts, tr;
	static unsigned char seen[2 * GROUP][SENDS];

	CHECK_OK(gc_set_engine(s.sd, e));
	CHECK_OK(gc_setgroup(s.sd, m, GROUP));
	CHECK(pthread_create(&tr, NULL, replace_thread, &rp) == 0);
	CHECK(pthread_create(&ts, NULL, send_thread, &s) == 0);
	CHECK(pthread_join(ts, NULL) == 0);
	atomic_store(&rp.stop, 1);
	CHECK(pthread_join(tr, NULL) == 0);

	memset(seen, 0, sizeof(seen));
	for (unsigned k = 0; k < 2 * GROUP; k++)
		collect(&r[k], seen[k], s.id);

	/* every seq went to all of group A or all of group B, not both, not part */
	unsigned to_a = 0, to_b = 0;
	for (unsigned seq = 0; seq < SENDS; seq++) {
		unsigned na = 0, nb = 0;
		for (unsigned k = 0; k < GROUP; k++) {
			na += seen[k][seq];
			nb += seen[GROUP + k][seq];
		}
		if (!((na == GROUP && nb == 0) || (na == 0 && nb == GROUP)))
			check_fail(__FILE__, __LINE__, "engine %s seq %u: %u of group A, %u of B",
				   gc_engine_name(e), seq, na, nb);
		to_a += na == GROUP;
		to_b += nb == GROUP;
	}
	printf("engine %s: %u sends to group A, %u to group B while replacing\n", gc_engine_name(e),
	       to_a, to_b);
	close(s.sd);
	free(m);
	rx_close(r, 2 * GROUP);
}

/* (3): a long send on A, a call queued behind it, and B must not wait. */
enum { LONG_N = 40000 };
static atomic_int a_done;

static void *long_send_thread(void *arg)
{
	int sd = *(int *)arg;

	if (gc_send(sd, "long", 4, 0) != 4) {
		fprintf(stderr, "long send: %s\n", gc_errmsg());
		exit(1);
	}
	atomic_store(&a_done, 1);
	return NULL;
}

static void *queued_thread(void *arg)
{
	struct gc_stats st = GC_STATS_INIT();

	CHECK_OK(gc_stats(*(int *)arg, &st)); /* waits for A's lock */
	return NULL;
}

static void other_socket_not_blocked(void)
{
	struct rx *r = rx_open(AF_INET, 1);
	struct sockaddr_storage *m = calloc(LONG_N, sizeof(*m));
	int a = udp_socket(AF_INET), b = udp_socket(AF_INET), a_while = 0;
	pthread_t t1, t2;

	/* A: the loop engine to a port nothing listens on, LONG_N times over
	 * (hundreds of milliseconds of sendto()); B: one member */
	CHECK(m != NULL);
	for (size_t i = 0; i < LONG_N; i++)
		m[i] = sa_make(AF_INET, "127.0.0.1", 9);
	CHECK_OK(gc_set_engine(a, GC_ENGINE_LOOP));
	CHECK_OK(gc_set_limit(a, LONG_N));
	CHECK_OK(gc_setgroup(a, m, LONG_N));
	CHECK_OK(gc_setgroup(b, &r[0].addr, 1));
	/* B's engine (AUTO: the kernel engine where it may load) is set up by
	 * its first send, which loads and attaches a BPF program: that is done
	 * here, before the race, so that the race times B's sends only (under
	 * TSan the set-up alone outlasted A's loop) */
	CHECK_EQ(gc_send(b, "warm", 4, 0), 4);
	RX_EXPECT(&r[0], "warm", 4);
	atomic_store(&a_done, 0);
	CHECK(pthread_create(&t1, NULL, long_send_thread, &a) == 0);
	usleep(20000);
	CHECK(pthread_create(&t2, NULL, queued_thread, &a) == 0);
	usleep(20000);
	/* the library used to hold its table lock while waiting for A's lock,
	 * so this call waited for the whole long send */
	for (int i = 0; i < 3; i++)
		CHECK_EQ(gc_send(b, "b", 1, 0), 1);
	a_while = !atomic_load(&a_done);
	CHECK(pthread_join(t1, NULL) == 0);
	CHECK(pthread_join(t2, NULL) == 0);
	/* 40000 sendto()s outlast 40 ms and three one-member sends on a socket
	 * whose engine is ready by far: B finishing after A means B waited for A */
	CHECK(a_while);
	for (int i = 0; i < 3; i++)
		RX_EXPECT(&r[0], "b", 1);
	close(a);
	close(b);
	free(m);
	rx_close(r, 1);
}

int main(void)
{
	other_socket_not_blocked();
	enum gc_engine eng[GC_ENGINE_COUNT];
	size_t ne = available_engines(eng);

	for (size_t i = 0; i < ne; i++) {
		two_sockets(eng[i]);
		replace_while_sending(eng[i]);
	}
	return check_done("test_threads");
}
