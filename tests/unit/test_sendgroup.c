/* SPDX-License-Identifier: MIT */
/*
 * gc_sendgroup(): per-recipient prepend | shared | append, byte-exact, with
 * every available engine; and the "checked before anything is sent" errors:
 * nothing arrives and gerrno is untouched.
 */
#include "check.h"

enum { N = 20, SENTINEL = 0x5a5a };

static unsigned char shared_buf[65536];
static char pre[N][64], app[N][64];

/* Recipient i of r: prepend "<i>:" padded to i % 9 extra bytes, append ":<i>". */
static void make_recs(struct gc_giovec *rec, const struct rx *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int pl = snprintf(pre[i], sizeof(pre[i]), "P%zu:%.*s", i, (int)(i % 9), "#########");
		int al = snprintf(app[i], sizeof(app[i]), ":A%zu", i);
		memset(&rec[i], 0, sizeof(rec[i]));
		rec[i].dest = r[i].addr;
		rec[i].prepend = (struct iovec){ pre[i], (size_t)pl };
		rec[i].append = (struct iovec){ app[i], (size_t)al };
	}
}

/* Each r[i] must get rec[i].prepend | shared | rec[i].append. */
static void expect_recs(const struct gc_giovec *rec, const struct iovec *shared, const struct rx *r,
			size_t n, int line)
{
	static unsigned char want[65536 + 256];

	for (size_t i = 0; i < n; i++) {
		size_t len = 0;
		const struct iovec *part[3] = { &rec[i].prepend, shared, &rec[i].append };
		for (int k = 0; k < 3; k++) {
			if (part[k] && part[k]->iov_len) {
				memcpy(want + len, part[k]->iov_base, part[k]->iov_len);
				len += part[k]->iov_len;
			}
		}
		rx_expect_at(__FILE__, line, &r[i], want, len);
	}
}

static void gerrno_all(const int *g, size_t n, int v, int line)
{
	for (size_t i = 0; i < n; i++)
		if (g[i] != v)
			check_fail(__FILE__, line, "gerrno[%zu] = %d, want %d", i, g[i], v);
}

static void sendgroup_with(int family, enum gc_engine e, struct rx *r, size_t n)
{
	int sd = udp_socket(family);
	struct gc_giovec rec[N];
	int gerrno[N];
	struct gc_stats st0 = GC_STATS_INIT(), st = GC_STATS_INIT();
	struct iovec shared = { shared_buf, 500 };

	CHECK_OK(gc_set_engine(sd, e));
	make_recs(rec, r, n);
	fill(shared_buf, sizeof(shared_buf), e);
	CHECK_OK(gc_stats(sd, &st0));

	/* prepend | shared | append */
	for (size_t i = 0; i < n; i++)
		gerrno[i] = SENTINEL;
	CHECK_EQ(gc_sendgroup(sd, &shared, rec, n, 0, gerrno), n);
	gerrno_all(gerrno, n, 0, __LINE__);
	expect_recs(rec, &shared, r, n, __LINE__);

	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += rec[i].prepend.iov_len + shared.iov_len + rec[i].append.iov_len;
	CHECK_OK(gc_stats(sd, &st));
	CHECK_EQ(st.group_sends - st0.group_sends, 1);
	CHECK_EQ(st.datagrams - st0.datagrams, n);
	CHECK_EQ(st.bytes - st0.bytes, bytes);
	CHECK_EQ(st.failed, 0);

	/* shared NULL: prepend | append; gerrno NULL */
	CHECK_EQ(gc_sendgroup(sd, NULL, rec, n, 0, NULL), n);
	expect_recs(rec, NULL, r, n, __LINE__);

	/* empty prepend and append (NULL base, length 0) on every other one */
	struct gc_giovec rec2[N];
	memcpy(rec2, rec, sizeof(rec2));
	for (size_t i = 0; i < n; i += 2) {
		rec2[i].prepend = (struct iovec){ NULL, 0 };
		rec2[i].append = (struct iovec){ NULL, 0 };
	}
	rec2[1].append = (struct iovec){ app[1], 0 }; /* non-NULL base, length 0 */
	CHECK_EQ(gc_sendgroup(sd, &shared, rec2, n, MSG_DONTWAIT, gerrno), n);
	expect_recs(rec2, &shared, r, n, __LINE__);

	/* the largest datagram, made of all three parts */
	const size_t max = family == AF_INET ? 65507 : 65527;
	struct iovec big = { shared_buf, max - rec[0].prepend.iov_len - rec[0].append.iov_len };
	gerrno[0] = SENTINEL;
	if (EXPECT_EQ(gc_sendgroup(sd, &big, rec, 1, 0, gerrno), 1))
		expect_recs(rec, &big, r, 1, __LINE__);
	else
		fprintf(stderr, "  engine %s %s: %zu-byte prepend|shared|append: gerrno[0] = %s\n",
			gc_engine_name(e), family == AF_INET ? "IPv4" : "IPv6", max,
			strerrorname_np(gerrno[0]) ? strerrorname_np(gerrno[0]) : "?");

	/* a mid-size shared part between prepend and append, to everyone */
	struct iovec mid = { shared_buf, 20000 };
	for (size_t i = 0; i < n; i++)
		gerrno[i] = SENTINEL;
	int sent = gc_sendgroup(sd, &mid, rec, n, 0, gerrno);
	if (EXPECT_EQ(sent, n)) {
		expect_recs(rec, &mid, r, n, __LINE__);
	} else {
		fprintf(stderr,
			"  engine %s %s: 20000-byte shared with prepend/append: %d of %zu "
			"sent, gerrno[0] = %s\n",
			gc_engine_name(e), family == AF_INET ? "IPv4" : "IPv6", sent, n,
			strerrorname_np(gerrno[0]) ? strerrorname_np(gerrno[0]) : "?");
		for (size_t i = 0; i < n; i++) /* whatever did arrive */
			if (gerrno[i] == 0)
				expect_recs(rec + i, &mid, r + i, 1, __LINE__);
	}

	/* all empty: zero-length datagrams; and an empty shared with a base */
	struct iovec empty = { shared_buf, 0 };
	for (size_t i = 0; i < n; i++) {
		rec2[i].prepend = (struct iovec){ NULL, 0 };
		rec2[i].append = (struct iovec){ NULL, 0 };
	}
	CHECK_EQ(gc_sendgroup(sd, NULL, rec2, n, 0, gerrno), n);
	expect_recs(rec2, NULL, r, n, __LINE__);
	CHECK_EQ(gc_sendgroup(sd, &empty, rec2, n, 0, gerrno), n);
	expect_recs(rec2, &empty, r, n, __LINE__);

	/* recnum 0 sends nothing */
	CHECK_EQ(gc_sendgroup(sd, &shared, rec, 0, 0, gerrno), 0);
	CHECK_EQ(gc_sendgroup(sd, &shared, NULL, 0, 0, NULL), 0);
	RX_NONE_ALL(r, n);

	printf("engine %-8s %s: %zu recipients ok\n", gc_engine_name(e),
	       family == AF_INET ? "IPv4" : "IPv6", n);
	close(sd);
}

static void test_engines(void)
{
	enum gc_engine eng[GC_ENGINE_COUNT];
	size_t ne = available_engines(eng);
	struct rx *r4 = rx_open(AF_INET, N), *r6 = rx_open(AF_INET6, 5);

	for (size_t i = 0; i < ne; i++) {
		sendgroup_with(AF_INET, eng[i], r4, N);
		sendgroup_with(AF_INET6, eng[i], r6, 5);
	}
	sendgroup_with(AF_INET, GC_ENGINE_AUTO, r4, N);
	rx_close(r4, N);
	rx_close(r6, 5);
}

/* The group of gc_setgroup() is not used, and not disturbed. */
static void test_group_untouched(void)
{
	struct rx *r = rx_open(AF_INET, 4);
	int sd = udp_socket(AF_INET);
	struct gc_giovec rec[2];

	CHECK_OK(gc_setgroup(sd, &r[0].addr, 1));
	make_recs(rec, r + 2, 2);
	struct iovec shared = { (void *)"shared", 6 };
	CHECK_EQ(gc_sendgroup(sd, &shared, rec, 2, 0, NULL), 2);
	expect_recs(rec, &shared, r + 2, 2, __LINE__);
	RX_NONE(&r[0]);
	RX_NONE(&r[1]);
	CHECK_EQ(gc_getgroup_size(sd), 1);
	CHECK_EQ(gc_send(sd, "g", 1, 0), 1);
	RX_EXPECT(&r[0], "g", 1);
	RX_NONE_ALL(r + 1, 3);
	close(sd);
	rx_close(r, 4);
}

/* Dual-stack: AF_INET recipients on an AF_INET6 socket. */
static void test_dual_stack(void)
{
	struct rx *r4 = rx_open(AF_INET, 2), *r6 = rx_open(AF_INET6, 1);
	struct rx all[3] = { r4[0], r6[0], r4[1] };
	int sd = udp_socket(AF_INET6), off = 0;
	struct gc_giovec rec[3];

	CHECK_OK(setsockopt(sd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	make_recs(rec, all, 3);
	struct iovec shared = { (void *)"mixed", 5 };
	CHECK_EQ(gc_sendgroup(sd, &shared, rec, 3, 0, NULL), 3);
	expect_recs(rec, &shared, all, 3, __LINE__);

	int on = 1, s6only = udp_socket(AF_INET6), gerrno[3] = { SENTINEL, SENTINEL, SENTINEL };
	CHECK_OK(setsockopt(s6only, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)));
	/* the IPv4 recipients are refused one by one; the IPv6 one is sent */
	CHECK_EQ(gc_sendgroup(s6only, &shared, rec, 3, 0, gerrno), 1);
	CHECK_EQ(errno, EAFNOSUPPORT);
	CHECK_EQ(gerrno[0], EAFNOSUPPORT);
	CHECK_EQ(gerrno[1], 0);
	CHECK_EQ(gerrno[2], EAFNOSUPPORT);
	expect_recs(rec + 1, &shared, all + 1, 1, __LINE__);
	RX_NONE(&all[0]);
	RX_NONE(&all[2]);
	close(s6only);
	close(sd);
	rx_close(r4, 2);
	rx_close(r6, 1);
}

/*
 * Errors of the call (flags, rec, shared, recnum, sd): -1, errno, nothing
 * sent, gerrno untouched.  Errors of one recipient (its destination, its
 * buffers, its size): that recipient's errno in gerrno[i], the others sent.
 */
static void test_errors(void)
{
	enum { M = 5 };
	struct rx *r = rx_open(AF_INET, M), *r6 = rx_open(AF_INET6, 1);
	int sd = udp_socket(AF_INET);
	struct gc_giovec rec[M], bad[M];
	int gerrno[M];
	struct gc_stats st0 = GC_STATS_INIT(), st = GC_STATS_INIT();
	long sends = 0, dgrams = 0, fails = 0;
	static char pad[400];

	/* Should the library wrongly send to the multicast destination below,
	 * it must still not leave the host: multicast from sd goes out of lo. */
	struct in_addr lo = { htonl(INADDR_LOOPBACK) };
	CHECK_OK(setsockopt(sd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)));
	make_recs(rec, r, M);
	CHECK_OK(gc_stats(sd, &st0));

#define EXPECT_NOTHING(call, E)                            \
	do {                                               \
		for (size_t i_ = 0; i_ < M; i_++)          \
			gerrno[i_] = SENTINEL;             \
		CHECK_ERR(call, E);                        \
		CHECK(gc_errmsg()[0] != '\0');             \
		gerrno_all(gerrno, M, SENTINEL, __LINE__); \
		RX_NONE_ALL(r, M);                         \
	} while (0)

/* bad[] differs from rec[] at recipient K only: K refused with E, the rest sent */
#define EXPECT_SKIPPED(sh, K, E)                                                  \
	do {                                                                      \
		for (size_t i_ = 0; i_ < M; i_++)                                 \
			gerrno[i_] = SENTINEL;                                    \
		errno = 0;                                                        \
		CHECK_EQ(gc_sendgroup(sd, (sh), bad, M, 0, gerrno), M - 1);       \
		CHECK_EQ(errno, (E));                                             \
		CHECK(strstr(gc_errmsg(), "rec[") != NULL);                       \
		for (size_t i_ = 0; i_ < M; i_++) {                               \
			CHECK_EQ(gerrno[i_], i_ == (K) ? (E) : 0);                \
			if (i_ != (K))                                            \
				expect_recs(bad + i_, (sh), r + i_, 1, __LINE__); \
		}                                                                 \
		RX_NONE(&r[K]);                                                   \
		sends++, dgrams += M - 1, fails++;                                \
	} while (0)

	/* EMSGSIZE only once prepend/append are added, on recipient 2 only */
	struct iovec shared = { shared_buf, 65000 };
	memcpy(bad, rec, sizeof(bad));
	bad[2].prepend = (struct iovec){ pad, 400 };
	bad[2].append = (struct iovec){ pad, 200 };
	EXPECT_SKIPPED(&shared, 2, EMSGSIZE);
	bad[2].prepend = (struct iovec){ pad, 300 };
	bad[2].append = (struct iovec){ pad, 208 }; /* 65508 */
	EXPECT_SKIPPED(&shared, 2, EMSGSIZE);
	bad[2].append = (struct iovec){ pad, 207 }; /* 65507 exactly: fine */
	int sent = gc_sendgroup(sd, &shared, bad, M, 0, gerrno);
	if (!EXPECT_EQ(sent, M)) {
		for (size_t i = 0; i < M; i++)
			fprintf(stderr, "  engine %s: rec[%zu] (%zu bytes): gerrno %s\n",
				gc_engine_name(gc_get_engine(sd)), i,
				bad[i].prepend.iov_len + shared.iov_len + bad[i].append.iov_len,
				gerrno[i] ? strerrorname_np(gerrno[i]) : "0");
	}
	for (size_t i = 0; i < M; i++)
		if (gerrno[i] == 0)
			expect_recs(bad + i, &shared, r + i, 1, __LINE__);
	sends++, dgrams += sent, fails += M - sent;
	/* huge lengths must not wrap around */
	bad[2].prepend = (struct iovec){ pad, SIZE_MAX - 64000 };
	EXPECT_SKIPPED(&shared, 2, EMSGSIZE);

	/* EFAULT: NULL rec or shared fails the call; a recipient's NULL
	 * buffer fails that recipient */
	struct iovec small = { (void *)"small", 5 };
	EXPECT_NOTHING(gc_sendgroup(sd, &shared, NULL, 1, 0, gerrno), EFAULT);
	memcpy(bad, rec, sizeof(bad));
	bad[3].prepend = (struct iovec){ NULL, 5 };
	EXPECT_SKIPPED(&small, 3, EFAULT);
	memcpy(bad, rec, sizeof(bad));
	bad[M - 1].append = (struct iovec){ NULL, 1 };
	EXPECT_SKIPPED(&small, M - 1, EFAULT);
	struct iovec null_shared = { NULL, 10 };
	EXPECT_NOTHING(gc_sendgroup(sd, &null_shared, rec, M, 0, gerrno), EFAULT);

	/* E2BIG: recnum above the socket's limit */
	CHECK_OK(gc_set_limit(sd, M - 1));
	EXPECT_NOTHING(gc_sendgroup(sd, &shared, rec, M, 0, gerrno), E2BIG);
	CHECK_OK(gc_set_limit(sd, M));

	/* destinations as in gc_setgroup(), each refused on its own */
	memcpy(bad, rec, sizeof(bad));
	bad[2].dest = sa_make(AF_INET, "127.0.0.1", 0);
	EXPECT_SKIPPED(&small, 2, EINVAL);
	bad[2].dest = sa_make(AF_INET, "224.0.0.1", 9);
	EXPECT_SKIPPED(&small, 2, EINVAL);
	bad[2].dest = sa_make(AF_INET, "255.255.255.255", 9);
	EXPECT_SKIPPED(&small, 2, EINVAL);
	bad[2].dest = sa_make(AF_INET, "0.0.0.0", 9);
	EXPECT_SKIPPED(&small, 2, EINVAL);
	bad[2].dest = r6[0].addr;
	EXPECT_SKIPPED(&small, 2, EAFNOSUPPORT);
	RX_NONE(&r6[0]);

	/* every recipient refused: 0 sent, nothing goes out */
	for (size_t i = 0; i < M; i++)
		bad[i].dest = sa_make(AF_INET, "127.0.0.1", 0);
	CHECK_EQ(gc_sendgroup(sd, &small, bad, M, 0, gerrno), 0);
	CHECK_EQ(errno, EINVAL);
	gerrno_all(gerrno, M, EINVAL, __LINE__);
	RX_NONE_ALL(r, M);
	fails += M;
	/* and without a gerrno array the count still says it */
	memcpy(bad, rec, sizeof(bad));
	bad[0].dest = sa_make(AF_INET, "0.0.0.0", 9);
	CHECK_EQ(gc_sendgroup(sd, &small, bad, M, 0, NULL), M - 1);
	for (size_t i = 1; i < M; i++)
		expect_recs(bad + i, &small, r + i, 1, __LINE__);
	sends++, dgrams += M - 1, fails++;

	/* flags */
	EXPECT_NOTHING(gc_sendgroup(sd, &shared, rec, M, MSG_MORE, gerrno), EINVAL);
	EXPECT_NOTHING(gc_sendgroup(sd, &shared, rec, M, MSG_OOB, gerrno), EINVAL);

	/* bad descriptors */
	int pfd[2], tcp = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_OK(pipe(pfd));
	EXPECT_NOTHING(gc_sendgroup(-1, &shared, rec, M, 0, gerrno), EBADF);
	EXPECT_NOTHING(gc_sendgroup(pfd[1], &shared, rec, M, 0, gerrno), ENOTSOCK);
	EXPECT_NOTHING(gc_sendgroup(tcp, &shared, rec, M, 0, gerrno), EPROTOTYPE);
	close(pfd[0]);
	close(pfd[1]);
	close(tcp);

	/* counters: refused recipients count as failed, call errors not at all */
	CHECK_OK(gc_stats(sd, &st));
	CHECK_EQ(st.group_sends - st0.group_sends, sends);
	CHECK_EQ(st.datagrams - st0.datagrams, dgrams);
	CHECK_EQ(st.failed - st0.failed, fails);
#undef EXPECT_NOTHING
#undef EXPECT_SKIPPED
	close(sd);
	rx_close(r, M);
	rx_close(r6, 1);
}

int main(void)
{
	test_errors();
	test_group_untouched();
	test_dual_stack();
	test_engines();
	return check_done("test_sendgroup");
}
