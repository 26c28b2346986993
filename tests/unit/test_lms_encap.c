/* SPDX-License-Identifier: MIT */
/*
 * LMS-ENCAP: the dmcast packet byte for byte (a vector computed outside this
 * library), every checksum verified the receiver's way, the UDP checksum's
 * 0 -> 0xffff rule, argument checks, and (with CAP_NET_RAW) the packet as it
 * leaves through the raw socket, captured on loopback.
 */
#include <poll.h>
#include <groupcast/lms.h>
#include "check.h"

static struct in_addr A(const char *s) {
	struct in_addr a;
	CHECK(inet_pton(AF_INET, s, &a) == 1);
	return a;
}

/* Computed independently (Python struct + RFC 1071): outer 10.9.8.1 ->
 * 10.9.8.7 id 0x1234, option 139 tpif 7, inner 10.0.0.1 -> 239.1.2.3 TTL 5,
 * UDP 5000 -> 5001, "repair #1". */
static const char VECTOR[] =
	"4900004912344000400468360a0908010a0908078b1000070a0908070a000001ef010203"
	"450000250000400005117ac30a000001ef0102031388138900114059726570616972202331";

static struct gc_lms_dmcast vector_dmcast(void)
{
	struct gc_lms_dmcast d = GC_LMS_DMCAST_INIT(.tp = { .tpif = 7,
							    .tpaddr = A("10.9.8.7"),
							    .src = A("10.0.0.1"),
							    .group = A("239.1.2.3") },
						    .from = A("10.9.8.1"), .sport = 5000,
						    .dport = 5001, .ttl = 5, .id = 0x1234, );
	return d;
}

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = strlen(s) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		CHECK(sscanf(s + 2 * i, "%2x", &v) == 1);
		out[i] = (uint8_t)v;
	}
	return n;
}

/* RFC 1071 sum, folded, not complemented: 0xffff over data with a valid checksum. */
static unsigned sum(const uint8_t *p, size_t n, unsigned acc)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		acc += (unsigned)p[i] << 8 | p[i + 1];
	if (n & 1)
		acc += (unsigned)p[n - 1] << 8;
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return acc;
}

/* Check a dmcast packet the way the turning point and receivers would. */
static void verify(const uint8_t *p, size_t n, const struct gc_lms_dmcast *d, const void *data, size_t len)
{
	const uint8_t *in = p + 36, *udp = p + 56;

	CHECK_EQ(n, 64 + len);
	CHECK_EQ(p[0], 0x49);
	CHECK_EQ(p[2] << 8 | p[3], n);
	CHECK_EQ(p[6] << 8 | p[7], 0x4000); /* DF, no fragment */
	CHECK_EQ(p[9], 4);
	CHECK_EQ(sum(p, 36, 0), 0xffff);
	CHECK(memcmp(p + 12, &d->from, 4) == 0);
	CHECK(memcmp(p + 16, &d->tp.tpaddr, 4) == 0);
	uint8_t opt[16];
	CHECK_EQ(gc_lms_opt_build(opt, GC_LMS_DMCAST, &d->tp), 16);
	CHECK(memcmp(p + 20, opt, 16) == 0);
	struct gc_lms_info back;
	CHECK_EQ(gc_lms_opt_parse(p + 20, 16, &back), GC_LMS_DMCAST);
	CHECK_EQ(back.tpif, d->tp.tpif);

	CHECK_EQ(in[0], 0x45);
	CHECK_EQ(in[2] << 8 | in[3], 28 + len);
	CHECK_EQ(in[6] << 8 | in[7], 0x4000);
	CHECK_EQ(in[8], d->ttl ? d->ttl : GC_LMS_DEFAULT_TTL);
	CHECK_EQ(in[9], 17);
	CHECK_EQ(sum(in, 20, 0), 0xffff);
	CHECK(memcmp(in + 12, &d->tp.src, 4) == 0);
	CHECK(memcmp(in + 16, &d->tp.group, 4) == 0);
	CHECK_EQ(udp[0] << 8 | udp[1], d->sport);
	CHECK_EQ(udp[2] << 8 | udp[3], d->dport);
	CHECK_EQ(udp[4] << 8 | udp[5], 8 + len);
	CHECK(udp[6] | udp[7]); /* a checksum is present */
	unsigned ph = sum(in + 12, 8, 17 + 8 + (unsigned)len);
	CHECK_EQ(sum(udp, 8 + len, ph), 0xffff);
	CHECK(len == 0 || memcmp(udp + 8, data, len) == 0);
}

static void test_vector(void)
{
	uint8_t want[128], pkt[128];
	size_t wn = unhex(VECTOR, want);
	struct gc_lms_dmcast d = vector_dmcast();

	CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "repair #1", 9), wn);
	CHECK(memcmp(pkt, want, wn) == 0);
	verify(pkt, wn, &d, "repair #1", 9);

	/* defaults: inner TTL 64; outer source and id 0 are left for the kernel */
	d.ttl = 0;
	d.from.s_addr = 0;
	d.id = 0;
	CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, NULL, 0), 64);
	verify(pkt, 64, &d, NULL, 0);
	CHECK_EQ(pkt[36 + 8], 64);
}

/* The UDP checksum field is never 0 (that would mean "none"): find two
 * payload bytes that make the sum 0xffff and see 0xffff sent instead. */
static void test_udp_zero_checksum(void)
{
	struct gc_lms_dmcast d = vector_dmcast();
	uint8_t pkt[80], data[2];
	int hits = 0;

	for (unsigned v = 0; v < 65536; v++) {
		data[0] = (uint8_t)(v >> 8);
		data[1] = (uint8_t)v;
		CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, data, 2), 66);
		unsigned c = (unsigned)pkt[62] << 8 | pkt[63];
		CHECK(c != 0);
		if (c == 0xffff) {
			hits++;
			verify(pkt, 66, &d, data, 2);
		}
	}
	CHECK(hits > 0);
}

static void test_arguments(void)
{
	static uint8_t pkt[GC_LMS_DMCAST_MAX + GC_LMS_DMCAST_HDRLEN + 1], data[GC_LMS_DMCAST_MAX + 1];
	struct gc_lms_dmcast d;
#define BAD(stmt, arg)                                                                           \
	do {                                                                                     \
		d = vector_dmcast();                                                             \
		stmt;                                                                            \
		CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "x", 1), EINVAL);            \
		if (!strstr(gc_errmsg(), arg))                                                   \
			check_fail(__FILE__, __LINE__, "\"%s\" lacks \"%s\"", gc_errmsg(), arg); \
		CHECK_ERR(gc_lms_dmcast(-1, &d, "x", 1, 0), EINVAL);                             \
	} while (0)
	BAD(d.tp.group = A("10.1.2.3"), "d->tp.group");
	BAD(d.tp.src.s_addr = 0, "d->tp.src");
	BAD(d.tp.src = A("239.0.0.1"), "d->tp.src");
	BAD(d.tp.tpaddr.s_addr = 0, "d->tp.tpaddr");
	BAD(d.tp.tpaddr = A("224.0.0.5"), "d->tp.tpaddr");
	BAD(d.tp.tpaddr = A("255.255.255.255"), "d->tp.tpaddr");
	BAD(d.tp.tpif = 0, "d->tp.tpif");
	BAD(d.tp.tpif = 65536, "d->tp.tpif");
	BAD(d.tp.tpif = 7 | GC_LMS_PROVISIONAL, "GC_LMS_PROVISIONAL"); /* a request's mark, not an interface */
	BAD(d.dport = 0, "d->dport");
	BAD(d.from = A("239.0.0.1"), "d->from");
	BAD(d.flags = 0x2, "d->flags");
#undef BAD
	d = vector_dmcast();
	CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, data, GC_LMS_DMCAST_MAX), 65535);
	CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, data, GC_LMS_DMCAST_MAX + 1), EMSGSIZE);
	CHECK(strstr(gc_errmsg(), "len"));
	CHECK_ERR(gc_lms_dmcast(-1, &d, data, GC_LMS_DMCAST_MAX + 1, 0), EMSGSIZE);
	CHECK_ERR(gc_lms_dmcast_build(pkt, 64, &d, "x", 1), ENOBUFS);
	CHECK(strstr(gc_errmsg(), "cap"));
	CHECK_ERR(gc_lms_dmcast_build(NULL, 100, &d, "x", 1), EFAULT);
	CHECK_ERR(gc_lms_dmcast_build(pkt, 100, NULL, "x", 1), EFAULT);
	CHECK_ERR(gc_lms_dmcast_build(pkt, 100, &d, NULL, 1), EFAULT);
	CHECK_ERR(gc_lms_dmcast(-1, &d, "x", 1, 0), EBADF);
	int udp = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(udp >= 0);
	CHECK_ERR(gc_lms_dmcast(udp, &d, "x", 1, 0), EPROTOTYPE); /* would send the bytes as UDP data */
	close(udp);
	int u6 = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHECK(u6 >= 0);
	CHECK_ERR(gc_lms_dmcast(u6, &d, "x", 1, 0), EPROTOTYPE);
	close(u6);
}

/* Routers in lmsd --no-provisional: tpif is the whole 16-bit ifindex.  An
 * interface above 32767 (bit 15 set) is refused as a provisional mark
 * without GC_LMS_DMCAST_NO_PROVISIONAL, and with it built as is. */
static void test_no_provisional(void)
{
	uint8_t pkt[128];
	struct gc_lms_dmcast d = vector_dmcast();

	d.flags = GC_LMS_DMCAST_NO_PROVISIONAL;
	d.tp.tpif = 40000;
	CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "repair #1", 9), 73);
	CHECK_EQ(pkt[22] << 8 | pkt[23], 40000); /* the option's tpif */
	verify(pkt, 73, &d, "repair #1", 9);
	/* the rest is the vector's: only the option's tpif and the outer
	 * header checksum differ */
	uint8_t want[128];
	size_t wn = unhex(VECTOR, want);
	CHECK_EQ(wn, 73);
	for (size_t i = 0; i < wn; i++)
		if (i != 10 && i != 11 && i != 22 && i != 23)
			CHECK_EQ(pkt[i], want[i]);
	CHECK_ERR(gc_lms_dmcast(-1, &d, "x", 1, 0), EBADF); /* past the argument checks */

	d.flags = 0; /* without the flag: bit 15 is a provisional mark */
	CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "x", 1), EINVAL);
	CHECK(strstr(gc_errmsg(), "d->tp.tpif") && strstr(gc_errmsg(), "GC_LMS_DMCAST_NO_PROVISIONAL"));
	CHECK_ERR(gc_lms_dmcast(-1, &d, "x", 1, 0), EINVAL);

	d.flags = GC_LMS_DMCAST_NO_PROVISIONAL;
	d.tp.tpif = 0xffff;
	CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, NULL, 0), 64);
	CHECK_EQ(pkt[22] << 8 | pkt[23], 0xffff);
	d.tp.tpif = 7; /* below 32768 the flag changes nothing */
	CHECK_EQ(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "repair #1", 9), 73);
	CHECK(memcmp(pkt, want, wn) == 0);
	d.tp.tpif = 0; /* ifindex 0 */
	CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "x", 1), EINVAL);
	CHECK(strstr(gc_errmsg(), "d->tp.tpif"));
	d.tp.tpif = 0x20000 | 7; /* other bits above 15 */
	CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "x", 1), EINVAL);
	CHECK(strstr(gc_errmsg(), "d->tp.tpif"));
	d.tp.tpif = 0x10000 | 7; /* no bit above 15 is an interface, with the flag or not */
	CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "x", 1), EINVAL);
	d.flags = 0;
	CHECK_ERR(gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "x", 1), EINVAL);
}

/* As root: the packet leaves the raw socket unchanged.  A raw IPIP socket
 * on loopback gets a copy of every protocol-4 packet this host receives. */
static void test_send_loopback(void)
{
	int fd = gc_lms_raw_socket();
	if (fd < 0) {
		CHECK(errno == EPERM && strstr(gc_errmsg(), "CAP_NET_RAW"));
		skip("no CAP_NET_RAW: dmcast send on loopback not tried (EPERM checked)");
		return;
	}
	int cap = socket(AF_INET, SOCK_RAW, IPPROTO_IPIP);
	CHECK(cap >= 0);
	struct gc_lms_dmcast d = vector_dmcast();
	d.tp.tpaddr = A("127.0.0.1");
	d.from = A("127.0.0.1");
	d.id = 0x4242;
	uint8_t pkt[128], got[256];
	ssize_t n = gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "repair #2", 9);
	CHECK_EQ(gc_lms_dmcast(fd, &d, "repair #2", 9, 0), 9);
	struct pollfd pfd = { cap, POLLIN, 0 };
	for (;;) { /* other tests may send IPIP on lo too: look for ours */
		CHECK(poll(&pfd, 1, RX_TIMEOUT_MS) == 1);
		ssize_t g = recv(cap, got, sizeof(got), 0);
		if (g == n && memcmp(got, pkt, (size_t)n) == 0)
			break;
	}
	verify(got, (size_t)n, &d, "repair #2", 9);
	/* from 0: the kernel fills in the source and a valid checksum */
	d.from.s_addr = 0;
	CHECK_EQ(gc_lms_dmcast(fd, &d, "repair #3", 9, 0), 9);
	for (;;) {
		CHECK(poll(&pfd, 1, RX_TIMEOUT_MS) == 1);
		ssize_t g = recv(cap, got, sizeof(got), 0);
		if (g == n && memcmp(got + 64, "repair #3", 9) == 0)
			break;
	}
	d.from = A("127.0.0.1");
	verify(got, (size_t)n, &d, "repair #3", 9);
	struct gc_lms_stats st = GC_LMS_STATS_INIT();
	CHECK_OK(gc_lms_stats(&st));
	CHECK_EQ(st.dmcasts_sent, 2);
	close(cap);
	close(fd);
}

int main(void)
{
	test_vector();
	test_udp_zero_checksum();
	test_arguments();
	test_no_provisional();
	test_send_loopback();
	return check_done("lms_encap");
}
