/* SPDX-License-Identifier: MIT */
/*
 * gc_setgroup(): replacing the group, gc_getgroup_size(), gc_set_limit(), the
 * family rules, and the errno contract of group.h.  After every failing call
 * the old group must be intact: same size, and a gc_send() still reaches
 * exactly the old members.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/un.h>

#include "check.h"

static unsigned tag; /* every probe datagram differs */

/* sd's group is exactly r[0..n): size n, and a send reaches all of them. */
static void group_is(int sd, struct rx *r, size_t n, struct rx *others, size_t nothers, int line)
{
	char msg[64];
	ssize_t sz = gc_getgroup_size(sd);

	if (sz != (ssize_t)n)
		check_fail(__FILE__, line, "gc_getgroup_size %zd, want %zu", sz, n);
	fill(msg, sizeof(msg), ++tag);
	if (n == 0) {
		CHECK_ERR(gc_send(sd, msg, sizeof(msg), 0), EDESTADDRREQ);
	} else if (gc_send(sd, msg, sizeof(msg), 0) != (ssize_t)sizeof(msg)) {
		check_fail(__FILE__, line, "gc_send: %s (%s)", strerror(errno), gc_errmsg());
	}
	for (size_t i = 0; i < n; i++)
		rx_expect_at(__FILE__, line, &r[i], msg, sizeof(msg));
	for (size_t i = 0; i < nothers; i++)
		rx_none_at(__FILE__, line, &others[i]);
}

/* The last error message names something and is one line. */
static void errmsg_ok(const char *needle, int line)
{
	const char *m = gc_errmsg();

	if (m == NULL || m[0] == '\0')
		check_fail(__FILE__, line, "gc_errmsg() empty");
	if (strchr(m, '\n'))
		check_fail(__FILE__, line, "gc_errmsg() not one line: \"%s\"", m);
	if (needle && !strstr(m, needle))
		check_fail(__FILE__, line, "gc_errmsg() \"%s\" does not mention \"%s\"", m, needle);
}

static void test_replace(void)
{
	enum { N = 12 };
	struct rx *r = rx_open(AF_INET, N);
	struct sockaddr_storage *m = rx_members(r, N);
	int sd = udp_socket(AF_INET);

	CHECK_EQ(gc_getgroup_size(sd), 0);
	CHECK_ERR(gc_send(sd, "x", 1, 0), EDESTADDRREQ);

	/* grow 3 -> 12, shrink to 1, take another single member, clear */
	CHECK_OK(gc_setgroup(sd, m, 3));
	group_is(sd, r, 3, r + 3, N - 3, __LINE__);
	CHECK_OK(gc_setgroup(sd, m, N));
	group_is(sd, r, N, NULL, 0, __LINE__);
	CHECK_OK(gc_setgroup(sd, m, 1));
	group_is(sd, r, 1, r + 1, N - 1, __LINE__);
	CHECK_OK(gc_setgroup(sd, m + 7, 2));
	group_is(sd, r + 7, 2, r, 7, __LINE__);
	CHECK_OK(gc_setgroup(sd, m, 0));
	group_is(sd, NULL, 0, r, N, __LINE__);
	/* NULL with n == 0 also clears */
	CHECK_OK(gc_setgroup(sd, m, 4));
	CHECK_OK(gc_setgroup(sd, NULL, 0));
	group_is(sd, NULL, 0, r, N, __LINE__);

	/* replace many times: the last one wins, no accumulation */
	for (unsigned i = 0; i < 1000; i++)
		CHECK_OK(gc_setgroup(sd, m + i % (N - 3), 1 + i % 3));
	CHECK_OK(gc_setgroup(sd, m + 5, 3));
	group_is(sd, r + 5, 3, r, 5, __LINE__);

	/* the same member twice gets the datagram twice */
	struct sockaddr_storage dup[2] = { m[0], m[0] };
	char msg[10];
	fill(msg, sizeof(msg), 99);
	CHECK_OK(gc_setgroup(sd, dup, 2));
	CHECK_EQ(gc_send(sd, msg, sizeof(msg), 0), sizeof(msg));
	RX_EXPECT(&r[0], msg, sizeof(msg));
	RX_EXPECT(&r[0], msg, sizeof(msg));
	RX_NONE(&r[0]);

	close(sd);
	free(m);
	rx_close(r, N);
}

static void test_bad_fds(void)
{
	enum { N = 3 };
	struct rx *r = rx_open(AF_INET, N);
	struct sockaddr_storage *m = rx_members(r, N);
	int sd = udp_socket(AF_INET);
	int pfd[2], closed, tcp, unix_dgram, unix_stream, file;

	CHECK_OK(gc_setgroup(sd, m, N));

	/* EFAULT: NULL with n > 0 */
	CHECK_ERR(gc_setgroup(sd, NULL, 1), EFAULT);
	errmsg_ok("members", __LINE__);
	group_is(sd, r, N, NULL, 0, __LINE__);

	/* EBADF: -1, a closed fd, a huge fd */
	closed = udp_socket(AF_INET);
	close(closed);
	CHECK_ERR(gc_setgroup(-1, m, 1), EBADF);
	errmsg_ok(NULL, __LINE__);
	CHECK_ERR(gc_setgroup(closed, m, 1), EBADF);
	CHECK_ERR(gc_setgroup(1 << 20, m, 1), EBADF);
	CHECK_ERR(gc_getgroup_size(-1), EBADF);
	CHECK_ERR(gc_getgroup_size(closed), EBADF);
	CHECK_ERR(gc_send(-1, "x", 1, 0), EBADF);
	CHECK_ERR(gc_send(closed, "x", 1, 0), EBADF);

	/* ENOTSOCK: a pipe, a regular file */
	CHECK_OK(pipe(pfd));
	char path[] = "/tmp/gc_test_setgroup_XXXXXX";
	file = mkstemp(path);
	CHECK(file >= 0);
	unlink(path);
	CHECK_ERR(gc_setgroup(pfd[0], m, 1), ENOTSOCK);
	errmsg_ok(NULL, __LINE__);
	CHECK_ERR(gc_setgroup(pfd[1], m, 1), ENOTSOCK);
	CHECK_ERR(gc_setgroup(file, m, 1), ENOTSOCK);
	CHECK_ERR(gc_getgroup_size(file), ENOTSOCK);
	CHECK_ERR(gc_send(pfd[1], "x", 1, 0), ENOTSOCK);

	/* EPROTOTYPE: TCP, UNIX datagram and stream sockets */
	tcp = socket(AF_INET, SOCK_STREAM, 0);
	unix_dgram = socket(AF_UNIX, SOCK_DGRAM, 0);
	unix_stream = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(tcp >= 0 && unix_dgram >= 0 && unix_stream >= 0);
	CHECK_ERR(gc_setgroup(tcp, m, 1), EPROTOTYPE);
	errmsg_ok(NULL, __LINE__);
	CHECK_ERR(gc_setgroup(unix_dgram, m, 1), EPROTOTYPE);
	CHECK_ERR(gc_setgroup(unix_stream, m, 1), EPROTOTYPE);
	CHECK_ERR(gc_getgroup_size(tcp), EPROTOTYPE);
	CHECK_ERR(gc_send(unix_dgram, "x", 1, 0), EPROTOTYPE);

	group_is(sd, r, N, NULL, 0, __LINE__);

	close(pfd[0]);
	close(pfd[1]);
	close(file);
	close(tcp);
	close(unix_dgram);
	close(unix_stream);
	close(sd);
	free(m);
	rx_close(r, N);
}

/* good[0..n) followed by bad: gc_setgroup() must fail with err, group kept */
static void bad_member(int sd, struct sockaddr_storage *good, size_t n, struct sockaddr_storage bad,
		       int err, struct rx *r, int line)
{
	struct sockaddr_storage m[8];
	char idx[32];

	for (size_t i = 0; i < n; i++)
		m[i] = good[i];
	m[n] = bad; /* bad one is last, so the valid ones come first */
	errno = 0;
	if (gc_setgroup(sd, m, n + 1) != -1 || errno != err)
		check_fail(__FILE__, line, "gc_setgroup with bad members[%zu]: want %s, got %s", n,
			   strerrorname_np(err), errno ? strerrorname_np(errno) : "success");
	snprintf(idx, sizeof(idx), "members[%zu]", n);
	errmsg_ok("members[", line);
	if (!strstr(gc_errmsg(), idx))
		printf("note: gc_errmsg \"%s\" does not say %s\n", gc_errmsg(), idx);
	group_is(sd, r, n, NULL, 0, line);
}

static void test_bad_members(void)
{
	enum { N = 2 };
	struct rx *r4 = rx_open(AF_INET, N), *r6 = rx_open(AF_INET6, N);
	struct sockaddr_storage *m4 = rx_members(r4, N), *m6 = rx_members(r6, N);
	int s4 = udp_socket(AF_INET), s6 = udp_socket(AF_INET6);
	struct sockaddr_storage bad;

	CHECK_OK(gc_setgroup(s4, m4, N));
	CHECK_OK(gc_setgroup(s6, m6, N));

	/* EINVAL: port 0, unspecified, multicast, limited broadcast */
	bad_member(s4, m4, N, sa_make(AF_INET, "127.0.0.1", 0), EINVAL, r4, __LINE__);
	bad_member(s4, m4, N, sa_make(AF_INET, "0.0.0.0", 9), EINVAL, r4, __LINE__);
	bad_member(s4, m4, N, sa_make(AF_INET, "224.0.0.1", 9), EINVAL, r4, __LINE__);
	bad_member(s4, m4, N, sa_make(AF_INET, "239.255.255.250", 9), EINVAL, r4, __LINE__);
	bad_member(s4, m4, N, sa_make(AF_INET, "255.255.255.255", 9), EINVAL, r4, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET6, "::1", 0), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET6, "::", 9), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET6, "ff02::1", 9), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET6, "ff0e::1", 9), EINVAL, r6, __LINE__);
	/* AF_INET members on a dual-stack socket follow the IPv4 rules */
	bad_member(s6, m6, N, sa_make(AF_INET, "224.0.0.1", 9), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET, "0.0.0.0", 9), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET, "255.255.255.255", 9), EINVAL, r6, __LINE__);
	/* and so do v4-mapped AF_INET6 members (the kernel would send them as IPv4) */
	bad_member(s6, m6, N, sa_make(AF_INET6, "::ffff:224.0.0.1", 9), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET6, "::ffff:0.0.0.0", 9), EINVAL, r6, __LINE__);
	bad_member(s6, m6, N, sa_make(AF_INET6, "::ffff:255.255.255.255", 9), EINVAL, r6, __LINE__);

	/* EAFNOSUPPORT: AF_INET6 member on an AF_INET socket, unknown families */
	bad_member(s4, m4, N, sa_make(AF_INET6, "::1", 9), EAFNOSUPPORT, r4, __LINE__);
	bad = sa_make(AF_INET, "127.0.0.1", 9);
	bad.ss_family = AF_UNIX;
	bad_member(s4, m4, N, bad, EAFNOSUPPORT, r4, __LINE__);
	bad.ss_family = AF_UNSPEC;
	bad_member(s4, m4, N, bad, EAFNOSUPPORT, r4, __LINE__);
	bad_member(s6, m6, N, bad, EAFNOSUPPORT, r6, __LINE__);

	/* the bad member first: nothing of the new group may stick */
	struct sockaddr_storage first[2] = { sa_make(AF_INET, "127.0.0.1", 0), m4[0] };
	CHECK_ERR(gc_setgroup(s4, first, 2), EINVAL);
	errmsg_ok("members[0]", __LINE__);
	group_is(s4, r4, N, NULL, 0, __LINE__);

	close(s4);
	close(s6);
	free(m4);
	free(m6);
	rx_close(r4, N);
	rx_close(r6, N);
}

static void test_limit(void)
{
	enum { N = 5 };
	struct rx *r = rx_open(AF_INET, N);
	struct sockaddr_storage *m = rx_members(r, N);
	int sd = udp_socket(AF_INET);

	CHECK_EQ(gc_get_limit(sd), GC_DEFAULT_LIMIT);
	CHECK_ERR(gc_get_limit(-1), EBADF);

	/* the default limit: GC_DEFAULT_LIMIT members are fine, one more is E2BIG */
	size_t big = GC_DEFAULT_LIMIT + 1;
	struct sockaddr_storage *many = malloc(big * sizeof(*many));
	CHECK(many != NULL);
	for (size_t i = 0; i < big; i++)
		many[i] = m[i % N];
	CHECK_OK(gc_setgroup(sd, m, 2));
	CHECK_ERR(gc_setgroup(sd, many, big), E2BIG);
	errmsg_ok(NULL, __LINE__);
	group_is(sd, r, 2, r + 2, N - 2, __LINE__);
	CHECK_OK(gc_setgroup(sd, many, GC_DEFAULT_LIMIT)); /* not sent to */
	CHECK_EQ(gc_getgroup_size(sd), GC_DEFAULT_LIMIT);
	CHECK_OK(gc_setgroup(sd, m, 2));
	free(many);

	/* a smaller limit */
	CHECK_OK(gc_set_limit(sd, 4));
	CHECK_EQ(gc_get_limit(sd), 4);
	CHECK_ERR(gc_setgroup(sd, m, 5), E2BIG);
	group_is(sd, r, 2, r + 2, N - 2, __LINE__);
	CHECK_OK(gc_setgroup(sd, m, 4));
	group_is(sd, r, 4, r + 4, N - 4, __LINE__);

	/* the limit cannot go below the attached group */
	CHECK_ERR(gc_set_limit(sd, 3), E2BIG);
	errmsg_ok(NULL, __LINE__);
	CHECK_EQ(gc_get_limit(sd), 4);
	group_is(sd, r, 4, r + 4, N - 4, __LINE__);
	CHECK_OK(gc_set_limit(sd, 4)); /* equal is fine */

	/* out of range */
	CHECK_ERR(gc_set_limit(sd, 0), EINVAL);
	errmsg_ok(NULL, __LINE__);
	CHECK_ERR(gc_set_limit(sd, (size_t)GC_MAX_LIMIT + 1), EINVAL);
	CHECK_ERR(gc_set_limit(sd, SIZE_MAX), EINVAL);
	CHECK_EQ(gc_get_limit(sd), 4);
	CHECK_OK(gc_set_limit(sd, GC_MAX_LIMIT));
	CHECK_EQ(gc_get_limit(sd), GC_MAX_LIMIT);
	CHECK_OK(gc_setgroup(sd, m, N));
	group_is(sd, r, N, NULL, 0, __LINE__);

	/* bad sockets */
	CHECK_ERR(gc_set_limit(-1, 10), EBADF);
	int pfd[2];
	CHECK_OK(pipe(pfd));
	CHECK_ERR(gc_set_limit(pfd[0], 10), ENOTSOCK);
	CHECK_ERR(gc_get_limit(pfd[0]), ENOTSOCK);
	close(pfd[0]);
	close(pfd[1]);

	/* the limit is per socket */
	int other = udp_socket(AF_INET);
	CHECK_EQ(gc_get_limit(other), GC_DEFAULT_LIMIT);
	close(other);

	close(sd);
	free(m);
	rx_close(r, N);
}

/* The sender address a receiver saw must be an IPv4 one (v4-mapped path). */
static void expect_v4_from(struct rx *r, const void *msg, size_t len)
{
	struct sockaddr_storage from;
	char buf[256];
	ssize_t got = rx_recv(r, buf, sizeof(buf), RX_TIMEOUT_MS, &from);

	CHECK_EQ(got, len);
	CHECK(memcmp(buf, msg, len) == 0);
	CHECK_EQ(from.ss_family, AF_INET);
	CHECK(((struct sockaddr_in *)&from)->sin_addr.s_addr == htonl(INADDR_LOOPBACK));
}

static void test_families(void)
{
	struct rx *r4 = rx_open(AF_INET, 2), *r6 = rx_open(AF_INET6, 1);
	struct sockaddr_storage mixed[3] = { r4[0].addr, r6[0].addr, r4[1].addr };
	int s6 = udp_socket(AF_INET6), off = 0, on = 1;
	char msg[100];

	/* dual-stack (IPV6_V6ONLY off): AF_INET members sent as v4-mapped */
	CHECK_OK(setsockopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	CHECK_OK(gc_setgroup(s6, mixed, 3));
	CHECK_EQ(gc_getgroup_size(s6), 3);
	fill(msg, sizeof(msg), 7);
	CHECK_EQ(gc_send(s6, msg, sizeof(msg), 0), sizeof(msg));
	expect_v4_from(&r4[0], msg, sizeof(msg));
	expect_v4_from(&r4[1], msg, sizeof(msg));
	RX_EXPECT(&r6[0], msg, sizeof(msg));

	/* a v4-mapped AF_INET6 member is taken on the same terms */
	struct sockaddr_storage mapped = sa_make(AF_INET6, "::ffff:127.0.0.1", sa_port(&r4[1].addr));
	CHECK_OK(gc_setgroup(s6, &mapped, 1));
	fill(msg, sizeof(msg), 8);
	CHECK_EQ(gc_send(s6, msg, sizeof(msg), 0), sizeof(msg));
	expect_v4_from(&r4[1], msg, sizeof(msg));
	RX_NONE(&r4[0]);
	RX_NONE(&r6[0]);

	/* an IPV6_V6ONLY socket refuses AF_INET and v4-mapped members; the group stays */
	int s6only = udp_socket(AF_INET6);
	CHECK_OK(setsockopt(s6only, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)));
	CHECK_OK(gc_setgroup(s6only, &r6[0].addr, 1));
	CHECK_ERR(gc_setgroup(s6only, mixed, 3), EAFNOSUPPORT);
	errmsg_ok("members[0]", __LINE__);
	group_is(s6only, r6, 1, r4, 2, __LINE__);
	struct sockaddr_storage mapped2[2] = { r6[0].addr, mapped };
	CHECK_ERR(gc_setgroup(s6only, mapped2, 2), EAFNOSUPPORT);
	errmsg_ok("members[1]", __LINE__);
	group_is(s6only, r6, 1, r4, 2, __LINE__);

	/* AF_INET6 member on an AF_INET socket */
	int s4 = udp_socket(AF_INET);
	CHECK_ERR(gc_setgroup(s4, &r6[0].addr, 1), EAFNOSUPPORT);
	errmsg_ok("members[0]", __LINE__);
	CHECK_EQ(gc_getgroup_size(s4), 0);

	close(s4);
	close(s6only);
	close(s6);
	rx_close(r4, 2);
	rx_close(r6, 1);
}

/*
 * IPV6_V6ONLY switched on after the library has first seen the socket (only
 * possible before bind): the family rule must follow the socket, not a value
 * cached when the library's state was made.
 */
static void test_v6only_late(void)
{
	struct rx *r4 = rx_open(AF_INET, 1), *r6 = rx_open(AF_INET6, 1);
	struct sockaddr_storage mixed[2] = { r6[0].addr, r4[0].addr };
	int late = udp_socket(AF_INET6), off = 0, on = 1;

	CHECK_OK(setsockopt(late, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	CHECK_OK(gc_setgroup(late, &r6[0].addr, 1));
	CHECK_OK(setsockopt(late, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)));
	errno = 0;
	int ret = gc_setgroup(late, mixed, 2);
	if (EXPECT(ret == -1 && errno == EAFNOSUPPORT))
		group_is(late, r6, 1, r4, 1, __LINE__);
	close(late);
	rx_close(r4, 1);
	rx_close(r6, 1);
}

int main(void)
{
	test_replace();
	test_bad_fds();
	test_bad_members();
	test_limit();
	test_families();
	test_v6only_late();
	return check_done("test_setgroup");
}
