/* SPDX-License-Identifier: MIT */
/*
 * check.h - tiny assert helpers and loopback receivers for the unit tests.
 *
 * Every socket here is bound to 127.0.0.1 or ::1 on an ephemeral port, and
 * every receive has a timeout, so a test never hangs and never sends off the
 * host.
 */
#ifndef GC_TEST_CHECK_H
#define GC_TEST_CHECK_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <groupcast/group.h>

#define RX_TIMEOUT_MS 2000 /* a datagram that should arrive */
#define RX_QUIET_MS 50	   /* how long to wait to be sure nothing arrives */

static void check_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
static void check_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: FAIL: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/*
 * EXPECT(cond) / EXPECT_EQ(a, b): like CHECK, but the test goes on; main()
 * ends with return check_done("name"), which fails if any EXPECT failed.
 * Used where one broken detail should not hide the rest of the test.
 */
static int soft_failures;

/* Print a soft failure once per source line; count them all. */
static inline int soft_first(int line)
{
	static int seen[64], nseen;

	soft_failures++;
	for (int i = 0; i < nseen; i++)
		if (seen[i] == line)
			return 0;
	if (nseen < 64)
		seen[nseen++] = line;
	return 1;
}
#define EXPECT(cond)                                                                              \
	((cond) ? 1                                                                               \
		: ((void)(soft_first(__LINE__) &&                                                 \
			  fprintf(stderr, "%s:%d: FAIL (continuing; shown once): %s\n", __FILE__, \
				  __LINE__, #cond)),                                              \
		   0))
#define EXPECT_EQ(a, b) \
	expect_eq_at(__FILE__, __LINE__, #a " == " #b, (long long)(a), (long long)(b))
static inline int expect_eq_at(const char *file, int line, const char *what, long long a, long long b)
{
	if (a == b)
		return 1;
	if (soft_first(line))
		fprintf(stderr, "%s:%d: FAIL (continuing; shown once): %s: %lld != %lld\n", file,
			line, what, a, b);
	return 0;
}

static inline int check_done(const char *name)
{
	if (soft_failures) {
		fprintf(stderr, "%s: %d soft check(s) failed\n", name, soft_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

/* CHECK(cond): abort the test with errno and gc_errmsg() if cond is false. */
#define CHECK(cond)                                                                          \
	do {                                                                                 \
		int e_ = errno;                                                              \
		if (!(cond))                                                                 \
			check_fail(__FILE__, __LINE__, "%s (errno %d %s; gc_errmsg \"%s\")", \
				   #cond, e_, strerror(e_), gc_errmsg());                    \
	} while (0)

/* CHECK_ERR(call, E): call must return -1 with errno E. */
#define CHECK_ERR(call, E)                                                                         \
	do {                                                                                       \
		errno = 0;                                                                         \
		long long r_ = (long long)(call);                                                  \
		int e_ = errno;                                                                    \
		if (r_ != -1 || e_ != (E))                                                         \
			check_fail(__FILE__, __LINE__,                                             \
				   "%s: want -1/%s, got %lld/%s (gc_errmsg "                       \
				   "\"%s\")",                                                      \
				   #call, #E, r_, strerrorname_np(e_) ? strerrorname_np(e_) : "0", \
				   gc_errmsg());                                                   \
	} while (0)

/* CHECK_OK(call): call must return >= 0. */
#define CHECK_OK(call)                                                          \
	do {                                                                    \
		errno = 0;                                                      \
		long long r_ = (long long)(call);                               \
		int e_ = errno;                                                 \
		if (r_ < 0)                                                     \
			check_fail(__FILE__, __LINE__,                          \
				   "%s: returned %lld, errno %d %s (gc_errmsg " \
				   "\"%s\")",                                   \
				   #call, r_, e_, strerror(e_), gc_errmsg());   \
	} while (0)

#define CHECK_EQ(a, b)                                                            \
	do {                                                                      \
		long long a_ = (long long)(a), b_ = (long long)(b);               \
		if (a_ != b_)                                                     \
			check_fail(__FILE__, __LINE__,                            \
				   "%s == %s: %lld != %lld (errno %d, gc_errmsg " \
				   "\"%s\")",                                     \
				   #a, #b, a_, b_, errno, gc_errmsg());           \
	} while (0)

/* Say why (part of) a test does not run.  A test that skips as a whole then
 * returns 77, which ctest reports as skipped (SKIP_RETURN_CODE), never as a
 * pass; one that skips a part goes on and passes on what it did check. */
static inline void skip(const char *why)
{
	printf("SKIP: %s\n", why);
}

/* ---- loopback receivers ---- */

struct rx {
	int fd;
	struct sockaddr_storage addr; /* where it is bound; use as a member */
};

/* Descriptors this process has open. */
static inline int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

static inline socklen_t sa_len(int family)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* A loopback address of family with the given port, in a sockaddr_storage. */
static inline struct sockaddr_storage sa_make(int family, const char *ip, unsigned port)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;
		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, ip, &s->sin_addr) != 1)
			check_fail(__FILE__, __LINE__, "bad IPv4 literal %s", ip);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, ip, &s->sin6_addr) != 1)
			check_fail(__FILE__, __LINE__, "bad IPv6 literal %s", ip);
	}
	return ss;
}

static inline unsigned sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

/* Open n UDP receivers on 127.0.0.1 (AF_INET) or ::1 (AF_INET6). */
static inline struct rx *rx_open(int family, size_t n)
{
	struct rx *r = calloc(n ? n : 1, sizeof(*r));
	const int rcvbuf = 1 << 20;

	CHECK(r != NULL);
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage ss = sa_make(family, family == AF_INET ? "127.0.0.1" : "::1", 0);
		socklen_t len = sizeof(r[i].addr);

		r[i].fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		CHECK(r[i].fd >= 0);
		CHECK_OK(setsockopt(r[i].fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)));
		CHECK_OK(bind(r[i].fd, (struct sockaddr *)&ss, sa_len(family)));
		CHECK_OK(getsockname(r[i].fd, (struct sockaddr *)&r[i].addr, &len));
	}
	return r;
}

static inline void rx_close(struct rx *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(r[i].fd);
	free(r);
}

/* The receivers' addresses as a member array (caller frees). */
static inline struct sockaddr_storage *rx_members(const struct rx *r, size_t n)
{
	struct sockaddr_storage *m = calloc(n ? n : 1, sizeof(*m));

	CHECK(m != NULL);
	for (size_t i = 0; i < n; i++)
		m[i] = r[i].addr;
	return m;
}

/* Receive one datagram within ms; returns its length, or -1 if none came. */
static inline ssize_t rx_recv(const struct rx *r, void *buf, size_t cap, int ms,
			      struct sockaddr_storage *from)
{
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	socklen_t flen = sizeof(*from);

	if (poll(&p, 1, ms) != 1)
		return -1;
	return recvfrom(r->fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)from, &flen);
}

static unsigned char rx_buf_[65536 + 16];

/* Receiver r must get exactly one datagram equal to want[0..len). */
#define RX_EXPECT(r, want, len) rx_expect_at(__FILE__, __LINE__, (r), (want), (len))
static inline void rx_expect_at(const char *file, int line, const struct rx *r, const void *want,
				size_t len)
{
	struct sockaddr_storage from;
	ssize_t got = rx_recv(r, rx_buf_, sizeof(rx_buf_), RX_TIMEOUT_MS, &from);

	if (got < 0)
		check_fail(file, line, "receiver port %u: no datagram (want %zu bytes)",
			   sa_port(&r->addr), len);
	if ((size_t)got != len)
		check_fail(file, line, "receiver port %u: got %zd bytes, want %zu",
			   sa_port(&r->addr), got, len);
	if (len && memcmp(rx_buf_, want, len) != 0)
		check_fail(file, line, "receiver port %u: %zu bytes differ", sa_port(&r->addr), len);
}

/* Like RX_EXPECT, but returns 0 instead of failing (nothing or wrong bytes). */
static inline int rx_match(const struct rx *r, const void *want, size_t len, int ms)
{
	struct sockaddr_storage from;
	ssize_t got = rx_recv(r, rx_buf_, sizeof(rx_buf_), ms, &from);

	return got == (ssize_t)len && (len == 0 || memcmp(rx_buf_, want, len) == 0);
}

/* Receiver r must have nothing queued (waits RX_QUIET_MS). */
#define RX_NONE(r) rx_none_at(__FILE__, __LINE__, (r))
static inline void rx_none_at(const char *file, int line, const struct rx *r)
{
	struct sockaddr_storage from;
	ssize_t got = rx_recv(r, rx_buf_, sizeof(rx_buf_), RX_QUIET_MS, &from);

	if (got >= 0)
		check_fail(file, line, "receiver port %u: unexpected %zd-byte datagram",
			   sa_port(&r->addr), got);
}

/* Every one of r[0..n) gets exactly one datagram want[0..len). */
#define RX_EXPECT_ALL(r, n, want, len)                                             \
	do {                                                                       \
		for (size_t i_ = 0; i_ < (size_t)(n); i_++)                        \
			rx_expect_at(__FILE__, __LINE__, &(r)[i_], (want), (len)); \
	} while (0)
#define RX_NONE_ALL(r, n)                                         \
	do {                                                      \
		for (size_t i_ = 0; i_ < (size_t)(n); i_++)       \
			rx_none_at(__FILE__, __LINE__, &(r)[i_]); \
	} while (0)

/* Deterministic test payload: byte i of message tag is (tag * 31 + i) & 0xff. */
static inline void fill(void *buf, size_t len, unsigned tag)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(tag * 31u + i);
}

/* A UDP socket of family (not bound, not connected). */
static inline int udp_socket(int family)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	return fd;
}

/* Engines this machine offers; prints why the others are skipped. */
static inline size_t available_engines(enum gc_engine *out)
{
	size_t n = 0;

	for (int e = GC_ENGINE_LOOP; e < GC_ENGINE_COUNT; e++) {
		errno = 0;
		if (gc_engine_available((enum gc_engine)e) == 0) {
			out[n++] = (enum gc_engine)e;
		} else {
			int err = errno;
			printf("SKIP engine %s: %s (%s)\n", gc_engine_name((enum gc_engine)e),
			       gc_errmsg(), strerror(err));
			CHECK(err == ENOTSUP);
		}
	}
	CHECK(n >= 2); /* loop and mmsg need nothing but sendto()/sendmmsg() */
	return n;
}

#endif /* GC_TEST_CHECK_H */
