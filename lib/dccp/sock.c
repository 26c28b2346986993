/* SPDX-License-Identifier: MIT */
/*
 * sock.c - the two encapsulations of DCCP packets (sock.h).
 *
 * Native: a raw IP socket for protocol 33.  The host kernel (no DCCP of its
 * own) hands it every DCCP packet that arrives, so the connection filters
 * by ports and addresses.  While such a socket is open the kernel does not
 * answer DCCP packets with ICMP protocol-unreachable (a raw socket took
 * them), so nothing needs suppressing during a connection.  IPv4 raw
 * reads start with the IP header (the destination comes from it); IPv6
 * ones do not (IPV6_RECVPKTINFO gives it).  Sends carry the source the
 * checksum was computed over (IP_PKTINFO / IPV6_PKTINFO), so a listener
 * bound to a wildcard address answers from the address it was asked at.
 *
 * DCCP-UDP (RFC 6773): an ordinary UDP socket; the kernel adds and checks
 * the UDP header and its checksum (the only checksum of DCCP-UDP), so the
 * DCCP packet is the datagram's payload.  Data packets of equal size leave
 * in UDP_SEGMENT runs (dccp_sock_sendv): one walk through the stack per
 * run instead of per packet, as the UDP ring engine does (lib/ring/udp.c).
 * Native DCCP has no such offload: a raw socket sends packet by packet.
 */
#include "dccp/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dccp/wire.h"

int dccp_sock_open(bool udp, int family)
{
	int fd = udp ? socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)
		     : socket(family, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, DCCP_IPPROTO);
	if (fd < 0)
		return -errno;
	int one = 1;
	/* A window of packets in flight is charged at the skb's truesize (2 KiB
	 * and more per small packet): the default 208 KiB drops a CCID 2 window
	 * of ~100 packets.  Root may force more than rmem_max. */
	int rcv = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	/* the same for a window on its way out (a full socket drops a packet
	 * that already has its sequence number: the peer sees it as lost) */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &rcv, sizeof(rcv)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &rcv, sizeof(rcv));
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	else
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	return fd;
}

void dccp_pseudo_from(struct dccp_pseudo *ph, const struct sockaddr_storage *src,
		      const struct sockaddr_storage *dst)
{
	memset(ph, 0, sizeof(*ph));
	ph->family = src->ss_family;
	if (src->ss_family == AF_INET) {
		memcpy(ph->src, &((const struct sockaddr_in *)src)->sin_addr, 4);
		memcpy(ph->dst, &((const struct sockaddr_in *)dst)->sin_addr, 4);
	} else {
		memcpy(ph->src, &((const struct sockaddr_in6 *)src)->sin6_addr, 16);
		memcpy(ph->dst, &((const struct sockaddr_in6 *)dst)->sin6_addr, 16);
	}
}

int dccp_sock_local_for(const struct sockaddr_storage *peer, struct sockaddr_storage *local)
{
	/* connect() on a UDP socket sends nothing: it only picks the route */
	int fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_storage p = *peer;
	if (p.ss_family == AF_INET)
		((struct sockaddr_in *)&p)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&p)->sin6_port = htons(9);
	socklen_t sl = sizeof(*local);
	int r = connect(fd, (struct sockaddr *)&p,
			p.ss_family == AF_INET ? sizeof(struct sockaddr_in)
					       : sizeof(struct sockaddr_in6));
	if (r == 0)
		r = getsockname(fd, (struct sockaddr *)local, &sl);
	r = r < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* What recvmsg() left in m: the packet and both addresses into out. */
static ssize_t recv_done(bool udp, uint8_t *buf, ssize_t n, struct msghdr *m, struct dccp_sock_pkt *out)
{
	if (m->msg_flags & MSG_TRUNC)
		return 0; /* larger than any packet we send or accept: drop */
	out->to = out->from;
	int fam = out->from.ss_family;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (fam == AF_INET6 && c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			((struct sockaddr_in6 *)&out->to)->sin6_addr = pi.ipi6_addr;
		} else if (fam == AF_INET && c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			((struct sockaddr_in *)&out->to)->sin_addr = pi.ipi_addr;
		}
	}
	out->pkt = buf;
	out->len = (size_t)n;
	if (!udp && fam == AF_INET) {
		/* IPv4 raw sockets deliver the IP header too */
		if (n < 20)
			return 0;
		size_t ihl = (size_t)(buf[0] & 0x0f) * 4;
		if (ihl < 20 || ihl > (size_t)n)
			return 0;
		memcpy(&((struct sockaddr_in *)&out->to)->sin_addr, buf + 16, 4);
		out->pkt = buf + ihl;
		out->len = (size_t)n - ihl;
	}
	return (ssize_t)out->len + 1; /* > 0 even for an empty payload */
}

int dccp_sock_peek_from(int fd, struct sockaddr_storage *from)
{
	uint8_t b;
	struct iovec iov = { &b, 1 };
	struct msghdr m = {
		.msg_name = from, .msg_namelen = sizeof(*from), .msg_iov = &iov, .msg_iovlen = 1
	};
	memset(from, 0, sizeof(*from));
	return recvmsg(fd, &m, MSG_PEEK | MSG_DONTWAIT) < 0 ? -errno : 0;
}

union pktinfo_cmsg {
	struct cmsghdr h;
	uint8_t b[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
};

ssize_t dccp_sock_recv(int fd, bool udp, uint8_t *buf, size_t cap, struct dccp_sock_pkt *out)
{
	struct iovec iov = { buf, cap };
	union pktinfo_cmsg cm;
	struct msghdr m = { .msg_name = &out->from,
			    .msg_namelen = sizeof(out->from),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.b,
			    .msg_controllen = sizeof(cm.b) };
	memset(&out->from, 0, sizeof(out->from));
	ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return recv_done(udp, buf, n, &m, out);
}

int dccp_sock_recv_batch(int fd, bool udp, uint8_t *buf, size_t cap, unsigned n,
			 struct dccp_sock_pkt *out, ssize_t *lens)
{
	struct mmsghdr mm[DCCP_SOCK_BATCH];
	struct iovec iov[DCCP_SOCK_BATCH];
	union pktinfo_cmsg cm[DCCP_SOCK_BATCH];
	if (n > DCCP_SOCK_BATCH)
		n = DCCP_SOCK_BATCH;
	for (unsigned i = 0; i < n; i++) {
		iov[i] = (struct iovec){ buf + i * cap, cap };
		memset(&out[i].from, 0, sizeof(out[i].from));
		mm[i].msg_hdr = (struct msghdr){ .msg_name = &out[i].from,
						 .msg_namelen = sizeof(out[i].from),
						 .msg_iov = &iov[i],
						 .msg_iovlen = 1,
						 .msg_control = cm[i].b,
						 .msg_controllen = sizeof(cm[i].b) };
	}
	int got = recvmmsg(fd, mm, n, MSG_DONTWAIT, NULL);
	if (got < 0)
		return -errno;
	for (int i = 0; i < got; i++)
		lens[i] = recv_done(udp, buf + (size_t)i * cap, (ssize_t)mm[i].msg_len,
				    &mm[i].msg_hdr, &out[i]);
	return got;
}

int dccp_sock_send(int fd, bool udp, const struct sockaddr_storage *to,
		   const struct sockaddr_storage *from, const uint8_t *pkt, size_t len)
{
	struct iovec iov = { (void *)pkt, len };
	union {
		struct cmsghdr h;
		uint8_t b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} cm;
	memset(&cm, 0, sizeof(cm));
	struct sockaddr_storage dst = *to;
	if (!udp) {
		/* a raw IPv6 socket reads sin6_port as the protocol: 0 or 33, or EINVAL */
		if (dst.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&dst)->sin6_port = 0;
		else
			((struct sockaddr_in *)&dst)->sin_port = 0;
	}
	socklen_t dl = to->ss_family == AF_INET ? sizeof(struct sockaddr_in)
						: sizeof(struct sockaddr_in6);
	if (to->ss_family == AF_INET6 && from)
		((struct sockaddr_in6 *)&dst)->sin6_scope_id =
			((const struct sockaddr_in6 *)from)->sin6_scope_id;
	struct msghdr m = { .msg_name = &dst, .msg_namelen = dl, .msg_iov = &iov, .msg_iovlen = 1 };
	if (from) {
		struct cmsghdr *c = &cm.h;
		if (to->ss_family == AF_INET6) {
			struct in6_pktinfo pi = { .ipi6_addr = ((const struct sockaddr_in6 *)from)->sin6_addr };
			c->cmsg_level = IPPROTO_IPV6;
			c->cmsg_type = IPV6_PKTINFO;
			c->cmsg_len = CMSG_LEN(sizeof(pi));
			memcpy(CMSG_DATA(c), &pi, sizeof(pi));
			m.msg_controllen = CMSG_SPACE(sizeof(pi));
		} else {
			struct in_pktinfo pi = { .ipi_spec_dst =
							 ((const struct sockaddr_in *)from)->sin_addr };
			c->cmsg_level = IPPROTO_IP;
			c->cmsg_type = IP_PKTINFO;
			c->cmsg_len = CMSG_LEN(sizeof(pi));
			memcpy(CMSG_DATA(c), &pi, sizeof(pi));
			m.msg_controllen = CMSG_SPACE(sizeof(pi));
		}
		m.msg_control = cm.b;
	}
	if (sendmsg(fd, &m, MSG_DONTWAIT) < 0)
		return -errno;
	return 0;
}

int dccp_sock_sendv(int fd, const struct iovec *iov, size_t n, size_t seg)
{
	union {
		struct cmsghdr h;
		uint8_t b[CMSG_SPACE(sizeof(uint16_t))];
	} cm;
	memset(&cm, 0, sizeof(cm));
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };
	if (seg) {
		uint16_t s = (uint16_t)seg;
		cm.h.cmsg_level = SOL_UDP;
		cm.h.cmsg_type = UDP_SEGMENT;
		cm.h.cmsg_len = CMSG_LEN(sizeof(s));
		memcpy(CMSG_DATA(&cm.h), &s, sizeof(s));
		m.msg_control = cm.b;
		m.msg_controllen = sizeof(cm.b);
	}
	if (sendmsg(fd, &m, MSG_DONTWAIT) < 0)
		return -errno;
	return 0;
}
