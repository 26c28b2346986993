/* SPDX-License-Identifier: MIT */
/*
 * gc_release() and fd reuse: state is freed, a socket that gets the fd
 * number of a closed one inherits nothing (group, engine, limit, counters,
 * family), and create/setgroup/close cycles do not grow memory or fds.
 */
#include <dirent.h>
#include <malloc.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
/* from <sanitizer/allocator_interface.h>, which gcc 12 does not ship */
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_in_use(void)
{
	return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}
#endif

static enum gc_engine default_engine;

/* sd carries no state from an earlier socket with its fd number. */
static void is_fresh(int sd, int line)
{
	struct gc_stats st = GC_STATS_INIT();

	if (gc_getgroup_size(sd) != 0)
		check_fail(__FILE__, line, "group size %zd", gc_getgroup_size(sd));
	errno = 0;
	if (gc_send(sd, "x", 1, 0) != -1 || errno != EDESTADDRREQ)
		check_fail(__FILE__, line, "gc_send without group: %s", strerror(errno));
	if (gc_get_engine(sd) != default_engine)
		check_fail(__FILE__, line, "engine %s, want %s", gc_engine_name(gc_get_engine(sd)),
			   gc_engine_name(default_engine));
	if (gc_get_limit(sd) != GC_DEFAULT_LIMIT)
		check_fail(__FILE__, line, "limit %zd", gc_get_limit(sd));
	CHECK_OK(gc_stats(sd, &st));
	if (st.group_sends || st.datagrams || st.bytes || st.failed || st.last_errno)
		check_fail(__FILE__, line, "stats not zero: %llu sends %llu datagrams",
			   (unsigned long long)st.group_sends, (unsigned long long)st.datagrams);
	if (gc_last_errors(sd, NULL, 0) != 0)
		check_fail(__FILE__, line, "gc_last_errors %zd", gc_last_errors(sd, NULL, 0));
}

/* Give sd a group of r, a non-default engine and limit, and send once. */
static void dirty(int sd, struct rx *r, size_t n)
{
	struct sockaddr_storage *m = rx_members(r, n);

	CHECK_OK(gc_set_engine(sd, default_engine == GC_ENGINE_LOOP ? GC_ENGINE_MMSG : GC_ENGINE_LOOP));
	CHECK_OK(gc_set_limit(sd, 7));
	CHECK_OK(gc_setgroup(sd, m, n));
	CHECK_EQ(gc_send(sd, "dirty", 5, 0), 5);
	RX_EXPECT_ALL(r, n, "dirty", 5);
	free(m);
}

/* A new socket of family on exactly fd number want. */
static int socket_at(int family, int type, int want)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	if (fd != want) {
		CHECK_EQ(dup2(fd, want), want);
		close(fd);
	}
	return want;
}

static void test_release(void)
{
	struct rx *r = rx_open(AF_INET, 3);
	int sd = udp_socket(AF_INET);

	dirty(sd, r, 3);
	CHECK_EQ(gc_release(sd), 0);
	is_fresh(sd, __LINE__);
	CHECK_EQ(gc_release(sd), 0);
	CHECK_EQ(gc_release(sd), 0);
	is_fresh(sd, __LINE__);

	/* the socket itself stays open and usable */
	dirty(sd, r, 3);
	CHECK_EQ(gc_release(sd), 0);
	CHECK_EQ(sendto(sd, "raw", 3, 0, (struct sockaddr *)&r[0].addr, sizeof(struct sockaddr_in)), 3);
	RX_EXPECT(&r[0], "raw", 3);

	/* no state, negative, closed */
	int plain = udp_socket(AF_INET), closed = udp_socket(AF_INET);
	CHECK_EQ(gc_release(plain), 0);
	CHECK_ERR(gc_release(-1), EBADF);
	CHECK_ERR(gc_release(-42), EBADF);
	dirty(closed, r, 1);
	close(closed);
	CHECK_EQ(gc_release(closed), 0); /* frees the state of a closed socket */

	close(plain);
	close(sd);
	rx_close(r, 3);
}

static void test_fd_reuse(void)
{
	struct rx *r4 = rx_open(AF_INET, 3), *r6 = rx_open(AF_INET6, 2);
	struct sockaddr_storage *m6 = rx_members(r6, 2);
	int a, b;

	/* close A without gc_release; B gets the same number */
	a = udp_socket(AF_INET);
	dirty(a, r4, 3);
	close(a);
	b = socket_at(AF_INET, SOCK_DGRAM, a);
	is_fresh(b, __LINE__);
	RX_NONE_ALL(r4, 3); /* the failed gc_send in is_fresh sent nothing */
	CHECK_OK(gc_setgroup(b, &r4[1].addr, 1));
	CHECK_EQ(gc_send(b, "B", 1, 0), 1);
	RX_EXPECT(&r4[1], "B", 1);
	RX_NONE(&r4[0]);
	RX_NONE(&r4[2]);
	close(b);

	/* B of another family on A's number takes B's family's members */
	a = udp_socket(AF_INET);
	dirty(a, r4, 3);
	close(a);
	b = socket_at(AF_INET6, SOCK_DGRAM, a);
	is_fresh(b, __LINE__);
	CHECK_OK(gc_setgroup(b, m6, 2));
	CHECK_EQ(gc_send(b, "six", 3, 0), 3);
	RX_EXPECT_ALL(r6, 2, "six", 3);
	close(b);

	/* dup2() over a live socket with state: a different socket now */
	a = udp_socket(AF_INET);
	dirty(a, r4, 3);
	int other = udp_socket(AF_INET);
	CHECK_EQ(dup2(other, a), a);
	close(other);
	is_fresh(a, __LINE__);
	close(a);

	/* the number reused by a pipe or a TCP socket */
	a = udp_socket(AF_INET);
	dirty(a, r4, 3);
	close(a);
	int pfd[2];
	CHECK_OK(pipe(pfd));
	if (pfd[0] != a) {
		CHECK_EQ(dup2(pfd[0], a), a);
		close(pfd[0]);
		pfd[0] = a;
	}
	CHECK_ERR(gc_getgroup_size(a), ENOTSOCK);
	CHECK_ERR(gc_send(a, "x", 1, 0), ENOTSOCK);
	close(pfd[0]);
	close(pfd[1]);
	b = socket_at(AF_INET, SOCK_STREAM, a);
	CHECK_ERR(gc_send(b, "x", 1, 0), EPROTOTYPE);
	CHECK_ERR(gc_getgroup_size(b), EPROTOTYPE);
	close(b);
	RX_NONE_ALL(r4, 3);

	/* a large fd number */
	b = socket_at(AF_INET, SOCK_DGRAM, 4000);
	dirty(b, r4, 3);
	CHECK_EQ(gc_release(b), 0);
	is_fresh(b, __LINE__);
	close(b);

	free(m6);
	rx_close(r4, 3);
	rx_close(r6, 2);
}

/* create / setgroup / send / close, never gc_release(): flat heap and fds. */
static void cycles(enum gc_engine e, unsigned warm, unsigned count, int release)
{
	struct rx *r = rx_open(AF_INET, 3);
	struct sockaddr_storage *m = rx_members(r, 3);
	size_t heap0 = 0;
	int fds0 = 0;

	for (unsigned i = 0; i < warm + count; i++) {
		if (i == warm) {
			heap0 = heap_in_use();
			fds0 = open_fds();
		}
		int sd = udp_socket(AF_INET);
		if (e != GC_ENGINE_AUTO)
			CHECK_OK(gc_set_engine(sd, e));
		CHECK_OK(gc_setgroup(sd, m, 1 + i % 3));
		if (i % 10 == 0) /* keep the receivers' queues from overflowing */
			CHECK_EQ(gc_send(sd, "c", 1, MSG_DONTWAIT), 1);
		if (release)
			CHECK_OK(gc_release(sd));
		close(sd);
		if (i % 10 == 0) {
			for (size_t k = 0; k < 1 + i % 3; k++) {
				char c;
				struct sockaddr_storage from;
				CHECK_EQ(rx_recv(&r[k], &c, 1, RX_TIMEOUT_MS, &from), 1);
			}
		}
	}
	size_t heap1 = heap_in_use();
	int fds1 = open_fds();
	printf("%u cycles engine %s%s: heap %zu -> %zu bytes, fds %d -> %d\n", count,
	       gc_engine_name(e), release ? " with gc_release" : "", heap0, heap1, fds0, fds1);
	CHECK(heap1 <= heap0 + 64 * 1024);
	CHECK(fds1 <= fds0 + 2);
	free(m);
	rx_close(r, 3);
}

int main(void)
{
	int probe = udp_socket(AF_INET);
	default_engine = gc_get_engine(probe);
	CHECK(default_engine > GC_ENGINE_AUTO && default_engine < GC_ENGINE_COUNT);
	close(probe);

	test_release();
	test_fd_reuse();
	cycles(GC_ENGINE_AUTO, 1000, 10000, 0);
	cycles(GC_ENGINE_AUTO, 100, 2000, 1);
	for (enum gc_engine e = GC_ENGINE_LOOP; e < GC_ENGINE_COUNT; e++) {
		if (gc_engine_available(e) == 0)
			cycles(e, 50, 500, 0);
		else
			printf("SKIP cycles with %s: %s\n", gc_engine_name(e), gc_errmsg());
	}
	return check_done("test_release");
}
