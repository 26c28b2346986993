/* SPDX-License-Identifier: MIT */
/*
 * encap.c - LMS-ENCAP: a directed multicast is a multicast packet inside a
 * unicast IPIP packet to the turning point router, whose outer header
 * carries the LMS option 139 (thesis 6.3.2, ipudp_encap()).  There is no ipip
 * module on the machines we target and we need no tunnel device: the packet
 * is built here and sent on a raw socket with our own header.
 *
 *   outer IPv4 (IHL 9, DF, TTL 64, proto 4, replier -> tpaddr) | option 139 (16)
 *   inner IPv4 (IHL 5, DF, id 0, TTL, proto 17, S -> G) | UDP sport -> dport | data
 *
 * Why DF on both: the turning point's TC program decapsulates before the
 * kernel would reassemble, so an outer fragment could never be delivered as a
 * dmcast, and the inner packet is redirected out a device without passing the
 * fragmenting output path.  Loss must show up as an error (EMSGSIZE here,
 * ICMP "fragmentation needed" on the path), not as a silently lost repair.
 * Why the inner id is 0: an atomic datagram (DF) needs no identification
 * (RFC 6864), and a fixed value keeps the inner packet reproducible.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lms/internal.h"

#define OUTER_LEN (20 + GC_LMS_OPTLEN)
#define OUTER_TTL 64
#define IP_DF_BIT 0x4000

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Ones' complement sum of p[0..n) added to sum (RFC 1071), not folded. */
static uint32_t sum16(uint32_t sum, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (; n > 1; n -= 2, b += 2)
		sum += (uint32_t)b[0] << 8 | b[1];
	if (n)
		sum += (uint32_t)b[0] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* 0, or -errno with the message naming the field. */
static int check(const struct gc_lms_dmcast *d, size_t len)
{
	const struct gc_lms_info *tp = &d->tp;

	if (!gc_lms_is_mcast(tp->group))
		return gc_errf(EINVAL, "d->tp.group: %s is not a multicast address",
			       gc_lms_ntoa(tp->group));
	if (tp->src.s_addr == INADDR_ANY || gc_lms_is_mcast(tp->src) || tp->src.s_addr == INADDR_BROADCAST)
		return gc_errf(EINVAL, "d->tp.src: %s is not a unicast source address",
			       gc_lms_ntoa(tp->src));
	if (tp->tpaddr.s_addr == INADDR_ANY || gc_lms_is_mcast(tp->tpaddr) ||
	    tp->tpaddr.s_addr == INADDR_BROADCAST)
		return gc_errf(EINVAL,
			       "d->tp.tpaddr: %s is not a turning point router (the request was not turned?)",
			       gc_lms_ntoa(tp->tpaddr));
	/* With GC_LMS_DMCAST_NO_PROVISIONAL the routers run the thesis's
	 * forwarding and bit 15 is part of the ifindex; without it, it is a
	 * request's provisional mark, which no dmcast carries. */
	int noprov = (d->flags & GC_LMS_DMCAST_NO_PROVISIONAL) != 0;
	if (tp->tpif == 0 || tp->tpif > 0xffff)
		return gc_errf(EINVAL, "d->tp.tpif: %u%s is not an interface index of 1..65535",
			       tp->tpif, noprov ? " (with GC_LMS_DMCAST_NO_PROVISIONAL)" : "");
	if (!noprov && (tp->tpif & GC_LMS_PROVISIONAL))
		return gc_errf(EINVAL,
			       "d->tp.tpif: 0x%x has GC_LMS_PROVISIONAL set (a request's mark): a dmcast names the interface, 0x%x (routers running lmsd --no-provisional: set GC_LMS_DMCAST_NO_PROVISIONAL in d->flags)",
			       tp->tpif, tp->tpif & ~(unsigned)GC_LMS_PROVISIONAL);
	if (d->dport == 0)
		return gc_errf(EINVAL, "d->dport: 0");
	if (gc_lms_is_mcast(d->from) || d->from.s_addr == INADDR_BROADCAST)
		return gc_errf(EINVAL, "d->from: %s is not a unicast address", gc_lms_ntoa(d->from));
	if (len > GC_LMS_DMCAST_MAX)
		return gc_errf(EMSGSIZE, "len: %zu bytes, a dmcast carries at most %d", len,
			       GC_LMS_DMCAST_MAX);
	return 0;
}

/* The 64 header bytes of d's dmcast for data[0..len), checksums included;
 * the arguments are checked. */
static void build_hdr(uint8_t h[GC_LMS_DMCAST_HDRLEN], const struct gc_lms_dmcast *d,
		      const void *data, size_t len)
{
	uint8_t *o = h, *in = h + OUTER_LEN, *udp = in + 20;
	uint16_t udplen = (uint16_t)(8 + len);

	memset(h, 0, GC_LMS_DMCAST_HDRLEN);
	o[0] = 0x40 | OUTER_LEN / 4;
	put16(o + 2, (uint16_t)(GC_LMS_DMCAST_HDRLEN + len));
	put16(o + 4, d->id);
	put16(o + 6, IP_DF_BIT);
	o[8] = OUTER_TTL;
	o[9] = IPPROTO_IPIP;
	memcpy(o + 12, &d->from.s_addr, 4);
	memcpy(o + 16, &d->tp.tpaddr.s_addr, 4);
	gc_lms_opt_build(o + 20, GC_LMS_DMCAST, &d->tp);
	put16(o + 10, fold(sum16(0, o, OUTER_LEN)));

	in[0] = 0x45;
	put16(in + 2, (uint16_t)(20 + udplen));
	put16(in + 6, IP_DF_BIT);
	in[8] = d->ttl ? d->ttl : GC_LMS_DEFAULT_TTL;
	in[9] = IPPROTO_UDP;
	memcpy(in + 12, &d->tp.src.s_addr, 4);
	memcpy(in + 16, &d->tp.group.s_addr, 4);
	put16(in + 10, fold(sum16(0, in, 20)));

	put16(udp, d->sport);
	put16(udp + 2, d->dport);
	put16(udp + 4, udplen);
	/* pseudo header: S, G, protocol, UDP length; then header and data */
	uint32_t sum = sum16(0, in + 12, 8) + IPPROTO_UDP + udplen;
	sum = sum16(sum16(sum, udp, 8), data, len);
	uint16_t c = fold(sum);
	put16(udp + 6, c ? c : 0xffff); /* 0 would mean "no checksum" */
}

/* sized (groupcast/common.h); 1.0 ends at id */
static const struct gc_sized dmcast_t = GC_SIZED(gc_lms_dmcast, GC_LMS_DMCAST_INIT, id, id);

/* The caller's *d (not NULL) as this library's struct, its flags known. */
static int dmcast_in(const char *fn, const struct gc_lms_dmcast *d, struct gc_lms_dmcast *out)
{
	int r = gc_sized_in(&dmcast_t, fn, "d", out, d);
	if (r < 0)
		return r;
	if (out->flags & ~(unsigned)GC_LMS_DMCAST_NO_PROVISIONAL)
		return gc_errf(EINVAL, "%s: d->flags: unknown bits 0x%x", fn,
			       out->flags & ~(unsigned)GC_LMS_DMCAST_NO_PROVISIONAL);
	return 0;
}

GC_EXPORT ssize_t gc_lms_dmcast_build(void *pkt, size_t cap, const struct gc_lms_dmcast *dp,
				      const void *data, size_t len)
{
	struct gc_lms_dmcast dc, *d = &dc;

	if (!pkt || !dp)
		return gc_seterr(EFAULT, "%s: NULL", pkt ? "d" : "pkt");
	if (!data && len)
		return gc_seterr(EFAULT, "data: NULL with len %zu", len);
	int r = dmcast_in("gc_lms_dmcast_build", dp, d);
	if (r >= 0)
		r = check(d, len);
	if (r < 0)
		return gc_err(r);
	if (cap < GC_LMS_DMCAST_HDRLEN + len)
		return gc_seterr(ENOBUFS, "cap: %zu bytes, the dmcast needs %zu", cap,
				 GC_LMS_DMCAST_HDRLEN + len);
	build_hdr(pkt, d, data, len);
	if (len)
		memcpy((uint8_t *)pkt + GC_LMS_DMCAST_HDRLEN, data, len);
	return (ssize_t)(GC_LMS_DMCAST_HDRLEN + len);
}

GC_EXPORT int gc_lms_raw_socket(void)
{
	/* IPPROTO_RAW rather than IPPROTO_IPIP: it implies IP_HDRINCL and never
	 * receives, so incoming IPIP packets do not pile up in a queue that
	 * nobody reads. */
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);

	if (fd < 0) {
		int e = errno;
		if (e == EPERM || e == EACCES)
			return gc_seterr(EPERM, "raw socket: sending a dmcast needs CAP_NET_RAW");
		return gc_seterr(e, "raw socket (AF_INET, SOCK_RAW, IPPROTO_RAW)");
	}
	return fd;
}

GC_EXPORT ssize_t gc_lms_dmcast(int rawfd, const struct gc_lms_dmcast *dp, const void *data,
				size_t len, int flags)
{
	struct gc_lms_dmcast dc, *d = &dc;
	uint8_t h[GC_LMS_DMCAST_HDRLEN];
	int hdrincl = 0;
	socklen_t hl = sizeof(hdrincl);

	if (!dp)
		return gc_seterr(EFAULT, "d: NULL");
	if (!data && len)
		return gc_seterr(EFAULT, "data: NULL with len %zu", len);
	int r = dmcast_in("gc_lms_dmcast", dp, d);
	if (r >= 0)
		r = check(d, len);
	if (r < 0)
		return gc_err(r);
	if (rawfd < 0)
		return gc_seterr(EBADF, "rawfd: %d is not a file descriptor", rawfd);
	if (getsockopt(rawfd, IPPROTO_IP, IP_HDRINCL, &hdrincl, &hl) != 0) {
		if (errno == EBADF || errno == ENOTSOCK)
			return gc_seterr(errno, "rawfd: %d is not %s", rawfd,
					 errno == EBADF ? "an open file descriptor" : "a socket");
		hdrincl = 0; /* not an IPv4 socket at all */
	}
	if (!hdrincl)
		return gc_seterr(EPROTOTYPE,
				 "rawfd: %d is not a raw IPv4 socket with IP_HDRINCL (see gc_lms_raw_socket())",
				 rawfd);
	build_hdr(h, d, data, len);

	/* Headers and data as two pieces: the payload is not copied here. */
	struct iovec iov[2] = { { h, sizeof(h) }, { (void *)data, len } };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = d->tp.tpaddr };
	struct msghdr msg = {
		.msg_name = &to,
		.msg_namelen = sizeof(to),
		.msg_iov = iov,
		.msg_iovlen = len ? 2 : 1,
	};
	if (sendmsg(rawfd, &msg, flags) < 0) {
		int e = errno;
		if (e == EMSGSIZE)
			return gc_seterr(e, "len: a %zu-byte dmcast packet is larger than the MTU of the route to %s (raw packets are not fragmented)",
					 sizeof(h) + len, gc_lms_ntoa(d->tp.tpaddr));
		return gc_seterr(e, "rawfd: %d: sending a dmcast to %s", rawfd,
				 gc_lms_ntoa(d->tp.tpaddr));
	}
	gc_lms_inc(&gc_lms_count.dmcasts_sent);
	return (ssize_t)len;
}
