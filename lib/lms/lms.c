/* SPDX-License-Identifier: MIT */
/*
 * lms.c - LMS-API: the LMS IP option (build, parse), group membership,
 * sending a request with the option and receiving one with its turning point
 * information (Papadopoulos' thesis, 6.3.1).  Encapsulation is in encap.c.
 *
 * The option travels in a per-message control message (IP_RETOPTS on send,
 * IP_RECVOPTS on receive), so one socket can send data, requests and plain
 * datagrams in any order without a setsockopt() between them (6.1.1).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/types.h>

#include "lms/internal.h"
#include "lms.h" /* bpf/lms.h: the layout the router program and lmsd use */

/* The public wire struct must be the router's, byte for byte. */
static_assert(sizeof(struct gc_lms_wire) == sizeof(struct gc_lms_opt), "LMS option size");
static_assert(sizeof(struct gc_lms_wire) == GC_LMS_OPTLEN, "LMS option length");
static_assert(GC_LMS_OPTLEN == GC_LMS_OPT_LEN, "LMS option length");
static_assert(GC_LMS_REQUEST == GC_LMS_OPT_REQ && GC_LMS_DMCAST == GC_LMS_OPT_DMCAST, "LMS option types");
static_assert(GC_LMS_PROVISIONAL == GC_LMS_TPIF_PROVISIONAL, "LMS provisional mark");
#define SAME_FIELD(f)                                                                      \
	static_assert(offsetof(struct gc_lms_wire, f) == offsetof(struct gc_lms_opt, f) && \
			      sizeof(((struct gc_lms_wire *)0)->f) ==                      \
				      sizeof(((struct gc_lms_opt *)0)->f),                 \
		      "LMS option field " #f)
SAME_FIELD(code);
SAME_FIELD(len);
SAME_FIELD(tpif);
SAME_FIELD(tpaddr);
SAME_FIELD(src);
SAME_FIELD(group);

#define IPV4_MAX_OPTS 40 /* 60-byte header minus the 20 fixed bytes */

struct gc_lms_counters gc_lms_count;

const char *gc_lms_ntoa(struct in_addr a)
{
	static _Thread_local char buf[4][INET_ADDRSTRLEN];
	static _Thread_local unsigned next;
	char *b = buf[next++ % 4];

	return inet_ntop(AF_INET, &a, b, INET_ADDRSTRLEN) ? b : "?";
}

bool gc_lms_has_net_raw(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data) != 0)
		return false;
	return data[CAP_TO_INDEX(CAP_NET_RAW)].effective & CAP_TO_MASK(CAP_NET_RAW);
}

GC_EXPORT int gc_lms_opt_build(void *out, int code, const struct gc_lms_info *info)
{
	if (!out || !info)
		return gc_seterr(EFAULT, "%s: NULL", out ? "info" : "out");
	if (code != GC_LMS_REQUEST && code != GC_LMS_DMCAST)
		return gc_seterr(EINVAL,
				 "code: %d is neither GC_LMS_REQUEST (138) nor GC_LMS_DMCAST (139)",
				 code);
	if (info->tpif > 0xffff)
		return gc_seterr(EINVAL, "info->tpif: %u does not fit the option's 16 bits", info->tpif);
	struct gc_lms_wire w = {
		.code = (uint8_t)code,
		.len = GC_LMS_OPTLEN,
		.tpif = htons((uint16_t)info->tpif),
		.tpaddr = info->tpaddr.s_addr,
		.src = info->src.s_addr,
		.group = info->group.s_addr,
	};
	memcpy(out, &w, sizeof(w));
	return GC_LMS_OPTLEN;
}

/* A malformed options area: counted, EBADMSG. */
#define BAD_OPTIONS(...) (gc_lms_inc(&gc_lms_count.bad_options), gc_seterr(EBADMSG, __VA_ARGS__))

GC_EXPORT int gc_lms_opt_parse(const void *opts, size_t len, struct gc_lms_info *info)
{
	const uint8_t *p = opts;
	const uint8_t *lms = NULL;

	if (!info || (!opts && len))
		return gc_seterr(EFAULT, "%s: NULL", info ? "opts" : "info");
	if (len > IPV4_MAX_OPTS)
		return gc_seterr(EINVAL, "len: %zu bytes of IPv4 options, at most %d exist", len,
				 IPV4_MAX_OPTS);
	memset(info, 0, sizeof(*info));
	for (size_t i = 0; i < len;) {
		uint8_t type = p[i];

		if (type == 0) /* IPOPT_END: the rest is padding */
			break;
		if (type == 1) { /* IPOPT_NOOP */
			i++;
			continue;
		}
		if (i + 1 >= len)
			return BAD_OPTIONS("IP options: option %u at offset %zu has no length byte",
					   type, i);
		unsigned olen = p[i + 1];
		if (olen < 2)
			return BAD_OPTIONS("IP options: option %u at offset %zu has length %u (at least 2)",
					   type, i, olen);
		if (olen > len - i)
			return BAD_OPTIONS("IP options: option %u at offset %zu has length %u, outside the %zu-byte options area",
					   type, i, olen, len);
		if (type == GC_LMS_REQUEST || type == GC_LMS_DMCAST) {
			if (olen != GC_LMS_OPTLEN)
				return BAD_OPTIONS("IP options: LMS option %u has length %u, expected 16",
						   type, olen);
			if (lms)
				return BAD_OPTIONS("IP options: a second LMS option (%u) at offset %zu",
						   type, i);
			lms = p + i;
		}
		i += olen;
	}
	if (!lms)
		return 0;
	struct gc_lms_wire w;
	memcpy(&w, lms, sizeof(w)); /* the area has no alignment */
	info->code = w.code;
	info->tpif = ntohs(w.tpif);
	info->tpaddr.s_addr = w.tpaddr;
	info->src.s_addr = w.src;
	info->group.s_addr = w.group;
	return info->code;
}

/* 0 if sd is an AF_INET UDP socket, else -errno with the message naming sd. */
static int check_udp4(int sd)
{
	int v[3];
	socklen_t l = sizeof(v[0]);
	static const int opt[3] = { SO_DOMAIN, SO_TYPE, SO_PROTOCOL };

	if (sd < 0)
		return gc_errf(EBADF, "sd: %d is not a file descriptor", sd);
	for (int i = 0; i < 3; i++) {
		l = sizeof(v[i]);
		if (getsockopt(sd, SOL_SOCKET, opt[i], &v[i], &l) != 0)
			return gc_errf(errno, "sd: %d: cannot read its socket type", sd);
	}
	if (v[0] != AF_INET || v[1] != SOCK_DGRAM || v[2] != IPPROTO_UDP)
		return gc_errf(EPROTOTYPE, "sd: %d is not an AF_INET UDP socket (LMS is IPv4 only)", sd);
	return 0;
}

static int membership(int sd, bool join, struct in_addr group, struct in_addr source, unsigned ifindex)
{
	const char *what = join ? "join" : "leave";
	int rc = check_udp4(sd);

	if (rc < 0)
		return rc;
	if (!gc_lms_is_mcast(group))
		return gc_errf(EINVAL, "group: %s is not a multicast address", gc_lms_ntoa(group));
	if (gc_lms_is_mcast(source))
		return gc_errf(EINVAL, "source: %s is a multicast address", gc_lms_ntoa(source));
	/* The protocol-independent MCAST_* options take an ifindex for both the
	 * any-source and the source-specific form. */
	struct sockaddr_in g = { .sin_family = AF_INET, .sin_addr = group };
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_addr = source };
	if (source.s_addr == INADDR_ANY) {
		struct group_req r = { .gr_interface = ifindex };
		memcpy(&r.gr_group, &g, sizeof(g));
		rc = setsockopt(sd, IPPROTO_IP, join ? MCAST_JOIN_GROUP : MCAST_LEAVE_GROUP, &r,
				sizeof(r));
	} else {
		struct group_source_req r = { .gsr_interface = ifindex };
		memcpy(&r.gsr_group, &g, sizeof(g));
		memcpy(&r.gsr_source, &s, sizeof(s));
		rc = setsockopt(sd, IPPROTO_IP, join ? MCAST_JOIN_SOURCE_GROUP : MCAST_LEAVE_SOURCE_GROUP,
				&r, sizeof(r));
	}
	if (rc != 0) {
		int e = errno;
		const char *why = e == EADDRINUSE     ? ": already joined"
			: e == EADDRNOTAVAIL && !join ? ": not joined"
			: e == ENODEV ? ": no such interface (or no route to the group)"
				      : "";
		return gc_errf(e, "%s %s (source %s, ifindex %u)%s", what, gc_lms_ntoa(group),
			       source.s_addr ? gc_lms_ntoa(source) : "any", ifindex, why);
	}
	if (join) {
		int off = 0;
		if (setsockopt(sd, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof(off)) != 0)
			return gc_errf(errno, "sd: %d: cannot turn IP_MULTICAST_ALL off", sd);
	}
	return 0;
}

GC_EXPORT int gc_lms_join(int sd, struct in_addr group, struct in_addr source, unsigned ifindex)
{
	return (int)gc_err(membership(sd, true, group, source, ifindex));
}

GC_EXPORT int gc_lms_leave(int sd, struct in_addr group, struct in_addr source, unsigned ifindex)
{
	return (int)gc_err(membership(sd, false, group, source, ifindex));
}

GC_EXPORT int gc_lms_recvopts(int sd, int on)
{
	int v = on != 0, r = check_udp4(sd);

	if (r < 0)
		return (int)gc_err(r);
	if (setsockopt(sd, IPPROTO_IP, IP_RECVOPTS, &v, sizeof(v)) != 0)
		return gc_seterr(errno, "sd: %d: IP_RECVOPTS", sd);
	return 0;
}

GC_EXPORT ssize_t gc_lms_request(int sd, const struct sockaddr_in *to, struct in_addr src,
				 struct in_addr group, const void *buf, size_t len, int flags)
{
	/* 65535 - 20 (IP) - 16 (option) - 8 (UDP) */
	const size_t max = 65535 - 20 - GC_LMS_OPTLEN - 8;

	if (!buf && len)
		return gc_seterr(EFAULT, "buf: NULL with len %zu", len);
	if (len > max)
		return gc_seterr(EMSGSIZE, "len: %zu bytes, a request carries at most %zu", len, max);
	if (!gc_lms_is_mcast(group))
		return gc_seterr(EINVAL, "group: %s is not a multicast address", gc_lms_ntoa(group));
	if (src.s_addr == INADDR_ANY || gc_lms_is_mcast(src) || src.s_addr == INADDR_BROADCAST)
		return gc_seterr(EINVAL, "src: %s is not a unicast source address", gc_lms_ntoa(src));
	if (to && (to->sin_family != AF_INET || to->sin_port == 0))
		return gc_seterr(EINVAL, "to: %s",
				 to->sin_family != AF_INET ? "not an AF_INET address" : "port 0");
	int r = check_udp4(sd);
	if (r < 0)
		return gc_err(r);

	union {
		char buf[CMSG_SPACE(GC_LMS_OPTLEN)];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = {
		.msg_name = (void *)to,
		.msg_namelen = to ? sizeof(*to) : 0,
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = IPPROTO_IP;
	c->cmsg_type = IP_RETOPTS;
	c->cmsg_len = CMSG_LEN(GC_LMS_OPTLEN);
	struct gc_lms_info info = { .src = src, .group = group };
	gc_lms_opt_build(CMSG_DATA(c), GC_LMS_REQUEST, &info);

	ssize_t n = sendmsg(sd, &msg, flags);
	if (n < 0) {
		int e = errno;
		/* ip_options_compile() refuses an option type it does not know
		 * unless the sender has CAP_NET_RAW, and says EINVAL. */
		if (e == EINVAL && !gc_lms_has_net_raw())
			return gc_seterr(EPERM,
					 "sd: %d: sending an LMS IP option needs CAP_NET_RAW (Linux accepts IP options of unknown types only from CAP_NET_RAW)",
					 sd);
		return gc_seterr(e, "sd: %d: sendmsg of a %zu-byte request to %s", sd, len,
				 to ? gc_lms_ntoa(to->sin_addr) : "the connected address");
	}
	gc_lms_inc(&gc_lms_count.requests_sent);
	return n;
}

GC_EXPORT ssize_t gc_lms_recv(int sd, void *buf, size_t len, int flags, struct sockaddr_in *from,
			      struct gc_lms_info *info)
{
	if (!info)
		return gc_seterr(EFAULT, "info: NULL");
	if (!buf && len)
		return gc_seterr(EFAULT, "buf: NULL with len %zu", len);
	memset(info, 0, sizeof(*info));

	/* Room for the largest options area, whatever else is turned on. */
	union {
		char buf[CMSG_SPACE(IPV4_MAX_OPTS) + 256];
		struct cmsghdr align;
	} ctl;
	struct sockaddr_in peer;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {
		.msg_name = &peer,
		.msg_namelen = sizeof(peer),
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	ssize_t n = recvmsg(sd, &msg, flags | MSG_TRUNC);
	if (n < 0)
		return gc_seterr(errno, "sd: %d: recvmsg", sd);
	if (from)
		memcpy(from, &peer, sizeof(peer));
	if ((size_t)n > len)
		return gc_seterr(EMSGSIZE,
				 "len: a %zd-byte datagram does not fit %zu bytes (consumed)", n, len);
	if (msg.msg_flags & MSG_CTRUNC) {
		gc_lms_inc(&gc_lms_count.bad_options);
		return gc_seterr(EBADMSG, "sd: %d: control data truncated (more than %zu bytes)",
				 sd, sizeof(ctl.buf));
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		/* Linux delivers the raw options area as cmsg type IP_RECVOPTS. */
		if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVOPTS)
			continue;
		if (gc_lms_opt_parse(CMSG_DATA(c), c->cmsg_len - CMSG_LEN(0), info) < 0)
			return -1;
	}
	gc_lms_inc(info->code == GC_LMS_REQUEST		 ? &gc_lms_count.requests_received
			   : info->code == GC_LMS_DMCAST ? &gc_lms_count.dmcasts_received
							 : &gc_lms_count.plain_received);
	return n;
}

/* sized (groupcast/common.h); 1.0 ends at bad_options */
static const struct gc_sized lms_stats_t =
	GC_SIZED(gc_lms_stats, GC_LMS_STATS_INIT, bad_options, bad_options);

GC_EXPORT int gc_lms_stats(struct gc_lms_stats *st)
{
	if (!st)
		return gc_seterr(EFAULT, "st: NULL");
	struct gc_lms_stats now = {
		.requests_sent = atomic_load(&gc_lms_count.requests_sent),
		.dmcasts_sent = atomic_load(&gc_lms_count.dmcasts_sent),
		.requests_received = atomic_load(&gc_lms_count.requests_received),
		.dmcasts_received = atomic_load(&gc_lms_count.dmcasts_received),
		.plain_received = atomic_load(&gc_lms_count.plain_received),
		.bad_options = atomic_load(&gc_lms_count.bad_options),
	};
	return (int)gc_err(gc_sized_out(&lms_stats_t, "gc_lms_stats", "st", st, &now));
}
