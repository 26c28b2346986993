/* SPDX-License-Identifier: MIT */
/*
 * gc_send(): every available engine delivers byte-exact to N loopback
 * receivers (IPv4 and IPv6), the argument errors of group.h, and the gc_stats()
 * counters.
 */
#include "check.h"

enum { N4 = 50, N6 = 8 };

static unsigned char big[65536];

static void stats_are(int sd, const struct gc_stats *before, uint64_t sends, uint64_t dgrams,
		      uint64_t bytes, int line)
{
	struct gc_stats st = GC_STATS_INIT();

	if (gc_stats(sd, &st) != 0)
		check_fail(__FILE__, line, "gc_stats: %s", strerror(errno));
	if (st.group_sends - before->group_sends != sends ||
	    st.datagrams - before->datagrams != dgrams || st.bytes - before->bytes != bytes ||
	    st.failed != before->failed || st.last_errno != before->last_errno)
		check_fail(__FILE__, line,
			   "gc_stats moved by sends %llu datagrams %llu bytes %llu failed %llu "
			   "last_errno %d; want %llu %llu %llu 0 %d",
			   (unsigned long long)(st.group_sends - before->group_sends),
			   (unsigned long long)(st.datagrams - before->datagrams),
			   (unsigned long long)(st.bytes - before->bytes),
			   (unsigned long long)(st.failed - before->failed), st.last_errno,
			   (unsigned long long)sends, (unsigned long long)dgrams,
			   (unsigned long long)bytes, before->last_errno);
}

/*
 * Send sizes 0, 1, 1000 and the largest datagram with engine e to all of r.
 * v6only: make the AF_INET6 socket IPV6_V6ONLY (else it is dual-stack).
 */
static void send_with(int family, int v6only, enum gc_engine e, struct rx *r, size_t n)
{
	const size_t max = family == AF_INET ? 65507 : 65527;
	/* 65500: an IPv6 packet just above lo's MTU of 65536 (fragmented) */
	const size_t sizes[] = { 0, 1, 1000, family == AF_INET ? 65000 : 65500, max };
	int sd = udp_socket(family);
	struct sockaddr_storage *m = rx_members(r, n);
	struct gc_stats st0 = GC_STATS_INIT();
	int *gerrno = malloc(n * sizeof(int));
	const char *what = family == AF_INET ? "IPv4" : v6only ? "IPv6 v6only" : "IPv6 dual-stack";

	CHECK(gerrno != NULL);
	if (family == AF_INET6)
		CHECK_OK(setsockopt(sd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)));
	CHECK_OK(gc_set_engine(sd, e));
	if (e == GC_ENGINE_AUTO)
		CHECK(gc_get_engine(sd) > GC_ENGINE_AUTO && gc_get_engine(sd) < GC_ENGINE_COUNT);
	else
		CHECK_EQ(gc_get_engine(sd), e);
	CHECK_OK(gc_setgroup(sd, m, n));
	CHECK_OK(gc_stats(sd, &st0));
	CHECK_EQ(st0.group_sends, 0);
	CHECK_EQ(st0.datagrams, 0);
	CHECK_EQ(st0.failed, 0);
	CHECK_EQ(st0.last_errno, 0);

	uint64_t sends = 0, bytes = 0;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		fill(big, len, (unsigned)e * 16 + (unsigned)k);
		errno = 0;
		ssize_t ret = gc_send(sd, len ? big : NULL, len, 0);
		if (ret != (ssize_t)len && len == max) {
			/* an IPv6 group of a dual-stack socket: still a 65527-byte datagram */
			EXPECT(ret == (ssize_t)len);
			fprintf(stderr, "  engine %s %s: gc_send(%zu bytes) = %zd (%s)\n",
				gc_engine_name(e), what, len, ret, gc_errmsg());
			RX_NONE_ALL(r, n);
			continue;
		}
		if (ret != (ssize_t)len)
			check_fail(__FILE__, __LINE__, "engine %s, %zu bytes: gc_send %zd (%s; %s)",
				   gc_engine_name(e), len, ret, strerror(errno), gc_errmsg());
		if (len > 60000) { /* large datagrams: report all receivers, go on */
			size_t missing = 0;
			for (size_t i = 0; i < n; i++) /* once one is missing, wait less */
				missing += !rx_match(&r[i], big, len,
						     missing ? RX_QUIET_MS : RX_TIMEOUT_MS);
			if (!EXPECT_EQ(missing, 0))
				fprintf(stderr,
					"  engine %s %s: gc_send(%zu bytes) returned %zd, "
					"%zu of %zu receivers did not get it\n",
					gc_engine_name(e), what, len, ret, missing, n);
		} else {
			RX_EXPECT_ALL(r, n, big, len);
		}
		sends++;
		bytes += n * len;
		stats_are(sd, &st0, sends, sends * n, bytes, __LINE__);
		for (size_t i = 0; i < n; i++)
			gerrno[i] = -1;
		CHECK_EQ(gc_last_errors(sd, gerrno, n), 0);
		for (size_t i = 0; i < n; i++)
			CHECK_EQ(gerrno[i], 0);
	}

	/* every GC_SEND_FLAGS flag is accepted */
	const int ok_flags[] = { MSG_DONTWAIT, MSG_CONFIRM, MSG_DONTROUTE, MSG_NOSIGNAL, GC_SEND_FLAGS };
	for (size_t k = 0; k < sizeof(ok_flags) / sizeof(ok_flags[0]); k++) {
		fill(big, 77, (unsigned)k);
		CHECK_EQ(gc_send(sd, big, 77, ok_flags[k]), 77);
		RX_EXPECT_ALL(r, n, big, 77);
	}
	printf("engine %-8s %s: %zu receivers ok\n", gc_engine_name(e), what, n);
	free(gerrno);
	free(m);
	close(sd);
}

static void test_engines(void)
{
	enum gc_engine eng[GC_ENGINE_COUNT];
	size_t ne = available_engines(eng);
	struct rx *r4 = rx_open(AF_INET, N4), *r6 = rx_open(AF_INET6, N6);

	for (size_t i = 0; i < ne; i++) {
		send_with(AF_INET, 0, eng[i], r4, N4);
		send_with(AF_INET6, 1, eng[i], r6, N6);
		send_with(AF_INET6, 0, eng[i], r6, N6);
	}
	/* and AUTO */
	send_with(AF_INET, 0, GC_ENGINE_AUTO, r4, N4);
	rx_close(r4, N4);
	rx_close(r6, N6);
}

static void test_errors(void)
{
	enum { N = 4 };
	struct rx *r = rx_open(AF_INET, N), *r6 = rx_open(AF_INET6, 1);
	struct sockaddr_storage *m = rx_members(r, N);
	int sd = udp_socket(AF_INET), s6 = udp_socket(AF_INET6);
	struct gc_stats st0 = GC_STATS_INIT();

	/* no group */
	CHECK_ERR(gc_send(sd, "x", 1, 0), EDESTADDRREQ);
	CHECK(gc_errmsg()[0] != '\0');
	CHECK_OK(gc_setgroup(sd, m, N));
	CHECK_OK(gc_setgroup(sd, NULL, 0));
	CHECK_ERR(gc_send(sd, "x", 1, 0), EDESTADDRREQ);

	CHECK_OK(gc_setgroup(sd, m, N));
	CHECK_OK(gc_stats(sd, &st0));

	/* too large for UDP over IPv4 / IPv6: nothing sent.  The public limits
	 * are the protocol's (65535 minus the headers inside the length field). */
	CHECK(GC_UDP4_MAX == 65535 - 20 - 8 && GC_UDP6_MAX == 65535 - 8);
	CHECK_ERR(gc_send(sd, big, GC_UDP4_MAX + 1, 0), EMSGSIZE);
	CHECK(gc_errmsg()[0] != '\0');
	CHECK_ERR(gc_send(sd, big, sizeof(big), 0), EMSGSIZE);
	CHECK_ERR(gc_send(sd, big, SIZE_MAX, 0), EMSGSIZE);
	CHECK_OK(gc_setgroup(s6, &r6[0].addr, 1));
	CHECK_ERR(gc_send(s6, big, 65528, 0), EMSGSIZE);
	/* an IPv4 member of a dual-stack socket: the IPv4 limit */
	int off = 0, dual = udp_socket(AF_INET6);
	CHECK_OK(setsockopt(dual, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	CHECK_OK(gc_setgroup(dual, m, N));
	CHECK_ERR(gc_send(dual, big, 65508, 0), EMSGSIZE);
	close(dual);
	RX_NONE(&r6[0]);

	/* EFAULT: NULL buffer with a length */
	CHECK_ERR(gc_send(sd, NULL, 1, 0), EFAULT);

	/* flags outside GC_SEND_FLAGS */
	const int bad_flags[] = {
		MSG_OOB,      MSG_MORE,	    MSG_PEEK, MSG_EOR, MSG_TRUNC,
		MSG_ZEROCOPY, MSG_FASTOPEN, 1 << 30,  -1,      MSG_DONTWAIT | MSG_MORE
	};
	for (size_t k = 0; k < sizeof(bad_flags) / sizeof(bad_flags[0]); k++) {
		errno = 0;
		if (gc_send(sd, "x", 1, bad_flags[k]) != -1 || errno != EINVAL)
			check_fail(__FILE__, __LINE__, "flags %#x: want EINVAL, got %s",
				   bad_flags[k], strerror(errno));
		CHECK(gc_errmsg()[0] != '\0');
	}

	RX_NONE_ALL(r, N);
	stats_are(sd, &st0, 0, 0, 0, __LINE__);

	/* the group still works after all that */
	CHECK_EQ(gc_send(sd, "ok", 2, 0), 2);
	RX_EXPECT_ALL(r, N, "ok", 2);

	/* gc_stats / gc_last_errors on bad descriptors */
	struct gc_stats st = GC_STATS_INIT();
	CHECK_ERR(gc_stats(-1, &st), EBADF);
	CHECK_ERR(gc_last_errors(-1, NULL, 0), EBADF);

	close(sd);
	close(s6);
	free(m);
	rx_close(r, N);
	rx_close(r6, 1);
}

int main(void)
{
	test_errors();
	test_engines();
	return check_done("test_send");
}
