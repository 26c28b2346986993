/* SPDX-License-Identifier: MIT */
/*
 * Partial failure: a member whose send fails must be reported (gc_send -1 +
 * errno + gc_last_errors; gc_sendgroup count + gerrno; gc_stats), and the
 * other members must still receive.
 *
 * The failing member is 127.255.255.255, the broadcast address of the lo
 * network (the kernel's local table has "broadcast 127.255.255.255 dev lo").
 * Without SO_BROADCAST the kernel refuses it in udp_sendmsg() with EACCES
 * before any packet is built, so nothing ever leaves the host; the library may
 * not reject it as "limited broadcast" (that is 255.255.255.255 only).
 *
 * (SO_BINDTODEVICE "lo" plus a member like 10.255.255.1 does NOT fail on
 * Linux: the route lookup falls back to "on link via lo" and sendto()
 * succeeds, so it cannot serve as a deterministic failure.)
 */
#include "check.h"

#define BAD_V4 "127.255.255.255"
#define SENTINEL 0x5a5a

static void gerrno_is(const int *g, const int *want, size_t n, int line)
{
	for (size_t i = 0; i < n; i++)
		if (g[i] != want[i])
			check_fail(__FILE__, line, "gerrno[%zu] = %d (%s), want %d", i, g[i],
				   strerror(g[i]), want[i]);
}

/* Guard: a plain sendto() to the bad member fails locally with EACCES. */
static void bad_member_fails_locally(void)
{
	int s4 = udp_socket(AF_INET), s6 = udp_socket(AF_INET6), off = 0;
	struct sockaddr_storage b4 = sa_make(AF_INET, BAD_V4, 9);
	struct sockaddr_storage b6 = sa_make(AF_INET6, "::ffff:" BAD_V4, 9);

	CHECK_ERR(sendto(s4, "x", 1, 0, (struct sockaddr *)&b4, sizeof(struct sockaddr_in)), EACCES);
	CHECK_OK(setsockopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	CHECK_ERR(sendto(s6, "x", 1, 0, (struct sockaddr *)&b6, sizeof(struct sockaddr_in6)), EACCES);
	close(s4);
	close(s6);
}

/*
 * Group: good members of r at the positions where bad_at[i] == 0, the
 * failing address where bad_at[i] != 0.  Sends with engine e on a socket of
 * family (AF_INET6 = dual-stack with AF_INET members).
 */
static void partial_send(int family, enum gc_engine e, const int *bad_at, size_t n, struct rx *r)
{
	int sd = udp_socket(family), off = 0;
	struct sockaddr_storage m[16];
	int want[16], gerrno[16];
	size_t nbad = 0, ngood = 0;
	char msg[200];
	struct gc_stats st0 = GC_STATS_INIT(), st = GC_STATS_INIT();

	if (family == AF_INET6)
		CHECK_OK(setsockopt(sd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)));
	CHECK_OK(gc_set_engine(sd, e));
	for (size_t i = 0; i < n; i++) {
		if (bad_at[i]) {
			m[i] = sa_make(AF_INET, BAD_V4, 9000 + (unsigned)i);
			want[i] = EACCES;
			nbad++;
		} else {
			m[i] = r[ngood++].addr;
			want[i] = 0;
		}
	}
	CHECK_OK(gc_setgroup(sd, m, n));
	CHECK_OK(gc_stats(sd, &st0));

	/* gc_send: -1, errno of the first failure, others still sent to */
	fill(msg, sizeof(msg), e);
	errno = 0;
	ssize_t ret = gc_send(sd, msg, sizeof(msg), 0);
	int err = errno;
	RX_EXPECT_ALL(r, ngood, msg, sizeof(msg));
	if (!EXPECT(ret == -1 && err == EACCES)) {
		fprintf(stderr,
			"  engine %s, %zu of %zu members %s: gc_send returned %zd (%s), "
			"gc_last_errors %zd\n",
			gc_engine_name(e), nbad, n, BAD_V4, ret,
			ret < 0 ? strerror(err) : "no error", gc_last_errors(sd, NULL, 0));
		/* and gc_sendgroup() to the same destinations */
		struct gc_giovec rec[16];
		memset(rec, 0, sizeof(rec));
		for (size_t i = 0; i < n; i++)
			rec[i].dest = m[i];
		struct iovec shared = { msg, sizeof(msg) };
		int sent = gc_sendgroup(sd, &shared, rec, n, 0, gerrno);
		if (!EXPECT_EQ(sent, ngood))
			fprintf(stderr, "  engine %s: gc_sendgroup returned %d, want %zu\n",
				gc_engine_name(e), sent, ngood);
		RX_EXPECT_ALL(r, ngood, msg, sizeof(msg));
		close(sd);
		return;
	}

	for (size_t i = 0; i < n; i++)
		gerrno[i] = SENTINEL;
	CHECK_EQ(gc_last_errors(sd, gerrno, n), nbad);
	gerrno_is(gerrno, want, n, __LINE__);
	CHECK_EQ(gc_last_errors(sd, NULL, 0), nbad);
	/* a short array gets only its part, the count is still the total */
	for (size_t i = 0; i < n; i++)
		gerrno[i] = SENTINEL;
	CHECK_EQ(gc_last_errors(sd, gerrno, 1), nbad);
	CHECK_EQ(gerrno[0], want[0]);
	CHECK_EQ(gerrno[1], SENTINEL);

	CHECK_OK(gc_stats(sd, &st));
	/* "calls that reached an engine": counted even when every member failed */
	EXPECT_EQ(st.group_sends - st0.group_sends, 1);
	CHECK_EQ(st.datagrams - st0.datagrams, ngood);
	CHECK_EQ(st.bytes - st0.bytes, ngood * sizeof(msg));
	CHECK_EQ(st.failed - st0.failed, nbad);
	CHECK_EQ(st.last_errno, EACCES);

	/* gc_sendgroup to the same destinations: count and gerrno */
	struct gc_giovec rec[16];
	struct iovec shared = { msg, sizeof(msg) };
	char pre[16];
	memset(rec, 0, sizeof(rec));
	for (size_t i = 0; i < n; i++) {
		pre[i] = (char)('a' + i);
		rec[i].dest = m[i];
		rec[i].prepend = (struct iovec){ &pre[i], 1 };
		gerrno[i] = SENTINEL;
	}
	CHECK_EQ(gc_sendgroup(sd, &shared, rec, n, 0, gerrno), ngood);
	gerrno_is(gerrno, want, n, __LINE__);
	for (size_t i = 0, g = 0; i < n; i++) {
		if (bad_at[i])
			continue;
		char buf[sizeof(msg) + 1];
		buf[0] = pre[i];
		memcpy(buf + 1, msg, sizeof(msg));
		RX_EXPECT(&r[g++], buf, sizeof(buf));
	}
	CHECK_EQ(gc_sendgroup(sd, &shared, rec, n, 0, NULL), ngood);
	for (size_t i = 0, g = 0; i < n; i++) {
		if (bad_at[i])
			continue;
		char buf[sizeof(msg) + 1];
		buf[0] = pre[i];
		memcpy(buf + 1, msg, sizeof(msg));
		RX_EXPECT(&r[g++], buf, sizeof(buf));
	}
	/* gc_last_errors() is about the last gc_send(), not gc_sendgroup() */
	for (size_t i = 0; i < n; i++)
		gerrno[i] = SENTINEL;
	size_t wrong = 0;
	EXPECT_EQ(gc_last_errors(sd, gerrno, n), nbad);
	for (size_t i = 0; i < n; i++)
		wrong += gerrno[i] != want[i];
	EXPECT_EQ(wrong, 0);

	/* the next good send clears gc_last_errors() */
	CHECK_OK(gc_setgroup(sd, &r[0].addr, 1));
	CHECK_EQ(gc_send(sd, "ok", 2, 0), 2);
	RX_EXPECT(&r[0], "ok", 2);
	CHECK_EQ(gc_last_errors(sd, gerrno, 1), 0);
	CHECK_EQ(gerrno[0], 0);
	RX_NONE_ALL(r, ngood);
	close(sd);
}

int main(void)
{
	enum gc_engine eng[GC_ENGINE_COUNT];
	size_t ne;
	struct rx *r;
	static const int patterns[][8] = {
		{ 0, 0, 1, 0, 1, 0, 0, 0 }, /* two failures in the middle */
		{ 1, 0, 0, 0, 0, 0, 0, 0 }, /* the first one fails */
		{ 0, 0, 0, 0, 0, 0, 0, 1 }, /* the last one fails */
		{ 1, 1, 1, 1, 1, 1, 1, 1 }, /* all fail */
	};

	bad_member_fails_locally();
	ne = available_engines(eng);
	r = rx_open(AF_INET, 8);
	for (size_t i = 0; i < ne; i++) {
		for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
			partial_send(AF_INET, eng[i], patterns[p], 8, r);
			partial_send(AF_INET6, eng[i], patterns[p], 8, r);
		}
		printf("engine %s: partial failures reported\n", gc_engine_name(eng[i]));
	}
	rx_close(r, 8);
	return check_done("test_partial");
}
