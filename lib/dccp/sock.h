/* SPDX-License-Identifier: MIT */
/*
 * sock.h - DCCP packets over a raw IP socket (native) or a UDP socket
 * (RFC 6773 DCCP-UDP).  See sock.c.
 */
#ifndef GC_DCCP_SOCK_H
#define GC_DCCP_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct dccp_pseudo;

/* A non-blocking socket for the encapsulation; -errno on failure (EPERM:
 * native needs CAP_NET_RAW). */
int dccp_sock_open(bool udp, int family);

struct dccp_sock_pkt {
	struct sockaddr_storage from, to; /* to: our address it arrived at (port: from's) */
	const uint8_t *pkt;		  /* the DCCP packet, inside the caller's buffer */
	size_t len;
};
/* Read one packet.  > 0: got one in out; 0: a malformed read (drop it);
 * -EAGAIN: none; other -errno. */
ssize_t dccp_sock_recv(int fd, bool udp, uint8_t *buf, size_t cap, struct dccp_sock_pkt *out);
/* The source of the next datagram queued on fd, without reading it (a
 * UDP socket).  0, -EAGAIN: none, or -errno. */
int dccp_sock_peek_from(int fd, struct sockaddr_storage *from);
/* Up to n (at most DCCP_SOCK_BATCH) packets in one recvmmsg() call, the
 * i-th into buf + i * cap; out[i] and lens[i] as dccp_sock_recv() gives
 * them.  Returns how many were read, or -errno (-EAGAIN: none). */
#define DCCP_SOCK_BATCH 16
int dccp_sock_recv_batch(int fd, bool udp, uint8_t *buf, size_t cap, unsigned n,
			 struct dccp_sock_pkt *out, ssize_t *lens);
/* Send pkt to `to`, from the address `from` (NULL: the kernel picks). */
int dccp_sock_send(int fd, bool udp, const struct sockaddr_storage *to,
		   const struct sockaddr_storage *from, const uint8_t *pkt, size_t len);

/* DCCP-UDP only: the packets in iov[0..n) on the connected socket fd, as
 * one datagram (seg 0) or as one UDP_SEGMENT message of datagrams of seg
 * bytes each (the last may be shorter): the stack is walked once and the
 * datagrams are cut at the end.  0 or -errno. */
int dccp_sock_sendv(int fd, const struct iovec *iov, size_t n, size_t seg);
/* The most one UDP_SEGMENT message carries (UDP's 64 KiB, and the kernel's
 * UDP_MAX_SEGMENTS of 64 on older kernels). */
#define DCCP_SOCK_GSO_BYTES 65000
#define DCCP_SOCK_GSO_SEGS 64

/* The pseudo-header for a packet from src to dst (ports ignored). */
void dccp_pseudo_from(struct dccp_pseudo *ph, const struct sockaddr_storage *src,
		      const struct sockaddr_storage *dst);
/* The address this host would send to peer from. */
int dccp_sock_local_for(const struct sockaddr_storage *peer, struct sockaddr_storage *local);

#endif
