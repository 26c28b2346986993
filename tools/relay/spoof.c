/* SPDX-License-Identifier: MIT */
/*
 * spoof.c - -S: send a datagram with the original sender's address and port
 * as its source, as samplicator does, through a raw socket (IPv4 with
 * IP_HDRINCL, IPv6 with IPPROTO_RAW, which implies IPV6_HDRINCL).  Needs
 * CAP_NET_RAW.  These packets do not go through gc_sendgroup(): the library
 * sends from a socket's own address, and a forged source is exactly what it
 * must not produce.  The kernel fills in the IPv4 header checksum and ID; the
 * UDP checksum is ours (left 0 with -n, IPv4 only: IPv6 requires it).
 * Raw sockets do not fragment: a datagram that does not fit the route's MTU
 * fails with EMSGSIZE for that receiver.
 */
#include "relay.h"

#include <errno.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int spoof_socket(int family, int sndbuf)
{
	int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (fd < 0)
		return -1;
	if (family == AF_INET) {
		int one = 1;
		if (setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)) != 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
	}
	if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	return fd;
}

static uint32_t sum16(const void *p, size_t n, uint32_t s)
{
	const uint8_t *b = p;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)b[i] << 8 | b[i + 1];
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* The UDP header and payload at pkt (the header fields from the
 * arguments, ports in network order), checksummed over the pseudo-header of
 * the alen address bytes at addrs (source then destination: 8 for IPv4, 32
 * for IPv6) if checksum is set, 0 otherwise. */
static void put_udp(uint8_t *pkt, const void *addrs, size_t alen, uint16_t sport, uint16_t dport,
		    const void *payload, size_t len, bool checksum)
{
	size_t ulen = sizeof(struct udphdr) + len;
	struct udphdr uh = { .source = sport, .dest = dport, .len = htons((uint16_t)ulen) };

	if (checksum) {
		uint32_t s = sum16(addrs, alen, 0) + IPPROTO_UDP + (uint32_t)ulen;
		s = sum16(&uh, sizeof(uh), s);
		s = sum16(payload, len, s);
		uint16_t c = fold(s);
		uh.check = htons(c ? c : 0xffff);
	}
	memcpy(pkt, &uh, sizeof(uh));
	memcpy(pkt + sizeof(uh), payload, len);
}

int spoof_send(int fd, const void *payload, size_t len, const struct sockaddr_storage *src,
	       const struct sockaddr_storage *dst, int ttl, bool checksum)
{
	static uint8_t pkt[65535 + 40];
	size_t ulen = sizeof(struct udphdr) + len;
	struct msghdr m = { 0 };
	struct iovec iov[1];

	if (src->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)src, *d4 = (const void *)dst;
		struct iphdr ih = { 0 };
		if (sizeof(ih) + ulen > 65535)
			return EMSGSIZE;
		ih.version = 4;
		ih.ihl = 5;
		ih.tot_len = htons((uint16_t)(sizeof(ih) + ulen));
		ih.ttl = (uint8_t)ttl;
		ih.protocol = IPPROTO_UDP;
		ih.saddr = s4->sin_addr.s_addr;
		ih.daddr = d4->sin_addr.s_addr;
		memcpy(pkt, &ih, sizeof(ih));
		put_udp(pkt + sizeof(ih), &ih.saddr, 8, s4->sin_port, d4->sin_port, payload, len,
			checksum);
		iov[0] = (struct iovec){ pkt, sizeof(ih) + ulen };
	} else {
		const struct sockaddr_in6 *s6 = (const void *)src, *d6 = (const void *)dst;
		struct ip6_hdr ih = { 0 };
		if (ulen > 65535)
			return EMSGSIZE;
		ih.ip6_flow = htonl(6u << 28);
		ih.ip6_plen = htons((uint16_t)ulen);
		ih.ip6_nxt = IPPROTO_UDP;
		ih.ip6_hlim = (uint8_t)ttl;
		ih.ip6_src = s6->sin6_addr;
		ih.ip6_dst = d6->sin6_addr;
		memcpy(pkt, &ih, sizeof(ih));
		/* the UDP checksum is mandatory over IPv6 */
		put_udp(pkt + sizeof(ih), &ih.ip6_src, 32, s6->sin6_port, d6->sin6_port, payload,
			len, true);
		iov[0] = (struct iovec){ pkt, sizeof(ih) + ulen };
	}
	/* The destination port of a raw IPv6 socket's address must be 0 (it is
	 * the protocol there); the real one is in our UDP header. */
	struct sockaddr_storage to = *dst;
	if (to.ss_family == AF_INET)
		((struct sockaddr_in *)&to)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&to)->sin6_port = 0;
	m.msg_name = &to;
	m.msg_namelen = addr_len(&to);
	m.msg_iov = iov;
	m.msg_iovlen = 1;
	ssize_t w;
	do
		w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w < 0 ? errno : 0;
}
