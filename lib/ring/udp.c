/* SPDX-License-Identifier: MIT */
/*
 * udp.c - the engine's UDP transport: packets taken from a ring go out on the
 * ring's connected UDP socket, straight from the zone (iovecs into the
 * engine's read-only mapping).
 *
 * Runs of packets of one length (plus one shorter last packet) leave as one
 * UDP GSO message (UDP_SEGMENT): the stack is traversed once per run and the
 * datagrams are cut at the end, which is where the saving is (DESIGN.md:
 * sendmmsg and io_uring cost what send() costs per packet here; GSO costs
 * about a third).  The messages of a batch leave in one sendmmsg() call.
 * Packets GSO cannot carry (empty ones, ones larger than the path MTU allows)
 * go as single datagrams in the same call; a batch of one datagram goes with
 * send(), and a batch of one message (a paced burst) with sendmsg().
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <groupcast/group.h> /* GC_UDP4_MAX, GC_UDP6_MAX */
#include "ring/internal.h"

#define GSO_SEGS 64u /* UDP_MAX_SEGMENTS on every kernel with UDP GSO */
#define CHUNK 64u    /* packets per sendmmsg() */

static int why(char *buf, size_t len, int err, const char *msg)
{
	snprintf(buf, len, "%s", msg);
	return -err;
}

int gc_udp_check(int fd, char *buf, size_t len)
{
	int v;
	socklen_t l = sizeof(v);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return why(buf, len, EBADF, "not an open descriptor");
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0)
		return why(buf, len, errno == ENOTSOCK ? ENOTSOCK : errno, "not a socket");
	if (v != AF_INET && v != AF_INET6)
		return why(buf, len, EPROTOTYPE, "not an AF_INET or AF_INET6 socket");
	l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_DGRAM)
		return why(buf, len, EPROTOTYPE, "not a datagram socket");
	l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) < 0 || v != IPPROTO_UDP)
		return why(buf, len, EPROTOTYPE, "not a UDP socket");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return why(buf, len, ENOTCONN, "not connected (connect() it to the receiver)");
	return 0;
}

int gc_udp_init(struct gc_udp *u, int fd)
{
	int dom = 0, mtu = 0;
	socklen_t l = sizeof(dom);

	memset(u, 0, sizeof(*u));
	u->fd = fd;
	getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l);
	u->family = dom;
	u->max_len = dom == AF_INET6 ? GC_UDP6_MAX : GC_UDP4_MAX;
	l = sizeof(mtu);
	if (dom == AF_INET6) {
		if (getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &l) == 0 && mtu > 48)
			u->gso_max = (uint32_t)mtu - 48;
	} else if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) == 0 && mtu > 28) {
		u->gso_max = (uint32_t)mtu - 28;
	}
	if (u->gso_max > UINT16_MAX)
		u->gso_max = UINT16_MAX;
	return 0;
}

/* Errors that a retry of the same datagram may not hit again: a pending
 * ICMP error of an earlier datagram is reported instead of sending. */
static bool pending_icmp(int e)
{
	return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH || e == EHOSTDOWN ||
		e == ENETDOWN;
}

unsigned gc_udp_send(struct gc_udp *u, const struct gc_sent *p, unsigned n,
		     const unsigned char *zone, struct gc_udp_out *o)
{
	unsigned i = 0;

	while (i < n) {
		struct iovec iov[CHUNK];
		struct mmsghdr mm[CHUNK];
		union {
			char b[CMSG_SPACE(sizeof(uint16_t))];
			struct cmsghdr align;
		} cm[CHUNK];
		unsigned first[CHUNK], cnt[CHUNK], nm = 0, j = i;
		unsigned lim = n - i < CHUNK ? n : i + CHUNK;

		/* Group the chunk into messages. */
		while (j < lim) {
			unsigned c = 1;
			uint32_t len = p[j].len;
			uint64_t tot = len;

			if (u->gso_max && len && len <= u->gso_max) {
				while (j + c < lim && c < GSO_SEGS && p[j + c].len == len &&
				       tot + len <= u->max_len)
					tot += p[j + c++].len;
				if (c > 1 && j + c < lim && c < GSO_SEGS && p[j + c].len &&
				    p[j + c].len < len && tot + p[j + c].len <= u->max_len)
					tot += p[j + c++].len;
			}
			for (unsigned k = 0; k < c; k++) {
				iov[j - i + k].iov_base = (void *)(zone + p[j + k].off);
				iov[j - i + k].iov_len = p[j + k].len;
			}
			struct msghdr *mh = &mm[nm].msg_hdr;
			memset(&mm[nm], 0, sizeof(mm[nm]));
			mh->msg_iov = &iov[j - i];
			mh->msg_iovlen = len || c > 1 ? c : 0; /* empty: no iovec to import */
			if (c > 1) {
				uint16_t seg = (uint16_t)len;
				mh->msg_control = cm[nm].b;
				mh->msg_controllen = sizeof(cm[nm].b);
				struct cmsghdr *cmsg = CMSG_FIRSTHDR(mh);
				cmsg->cmsg_level = SOL_UDP;
				cmsg->cmsg_type = UDP_SEGMENT;
				cmsg->cmsg_len = CMSG_LEN(sizeof(seg));
				memcpy(CMSG_DATA(cmsg), &seg, sizeof(seg));
			}
			first[nm] = j;
			cnt[nm++] = c;
			j += c;
		}

		/* Send them; every pass of this loop consumes a message or returns. */
		unsigned m = 0, tries = 0;
		bool regroup = false;
		while (m < nm) {
			int r;
			if (nm - m == 1 && cnt[m] == 1) {
				/* one datagram: send() is cheaper than a one-message
				 * sendmmsg() (no msghdr or iovec to copy in) */
				const struct gc_sent *q = &p[first[m]];
				r = send(u->fd, zone + q->off, q->len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0
					? -1
					: 1;
			} else if (nm - m == 1) {
				/* one message (a paced burst: one GSO run): sendmsg()
				 * has no mmsghdr array to copy in and out */
				r = sendmsg(u->fd, &mm[m].msg_hdr, MSG_DONTWAIT | MSG_NOSIGNAL) < 0
					? -1
					: 1;
			} else {
				r = sendmmsg(u->fd, &mm[m], nm - m, MSG_DONTWAIT | MSG_NOSIGNAL);
			}
			o->syscalls++;
			if (r > 0) {
				for (unsigned q = m; q < m + (unsigned)r; q++) {
					o->sent += cnt[q];
					for (unsigned k = 0; k < cnt[q]; k++)
						o->bytes += p[first[q] + k].len;
					if (cnt[q] > 1)
						o->gso += cnt[q];
				}
				m += (unsigned)r;
				tries = 0;
				continue;
			}
			int e = errno;
			if (e == EAGAIN || e == EWOULDBLOCK)
				return first[m];
			if (cnt[m] > 1 &&
			    (e == EINVAL || e == EIO || e == EMSGSIZE || e == ENOPROTOOPT ||
			     e == EOPNOTSUPP)) {
				/* this path cannot take GSO: send the rest one by one */
				u->gso_max = 0;
				regroup = true;
				break;
			}
			if (tries++ < 2 && (e == EINTR || pending_icmp(e)))
				continue;
			o->errors += cnt[m];
			o->last_errno = e;
			m++;
			tries = 0;
		}
		i = regroup ? first[m] : j;
	}
	return n;
}
