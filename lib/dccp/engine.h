/* SPDX-License-Identifier: MIT */
/*
 * engine.h - what dccp.c (the public API) and engine.c (the glue to the
 * ring engine) share: the connection and listener objects behind
 * struct gc_dccp and struct gc_dccp_listener, and the glue's entry points.
 */
#ifndef GC_DCCP_ENGINE_H
#define GC_DCCP_ENGINE_H

#include <pthread.h>
#include <string.h>

#include <netinet/in.h>

#include <groupcast/dccp.h>

#include "dccp/conn.h"
#include "dccp/sock.h"
#include "ring/cc.h" /* the engine's plugs: gc_ring_engine_create_hooks(), struct gc_sent */

/* The longest header a data packet in a UDP_SEGMENT run may have (a data
 * packet's options are NDP Count and pending Confirms: far less). */
#define GSO_HDR 128

/* A data packet in flight: its DCCP seq and the ring packet it carried. */
struct inflight {
	uint64_t seq;
	struct gc_sent p;
	bool used;
};

struct gc_dccp {
	pthread_mutex_t mu; /* the connection: engine thread vs. application */
	pthread_cond_t cv;  /* something arrived or the state moved */
	struct dccp_conn conn;
	bool udp;
	int fd;	       /* our socket (native: raw; UDP: connected) */
	int attach_fd; /* the connected UDP socket the ring is attached with */
	struct sockaddr_storage peer, local;
	struct dccp_pseudo ph_in;
	struct gc_zone *zone;
	struct gc_ring *ring;
	struct gc_ring_engine *eng;
	struct gc_flow *flow;
	struct inflight *inflight;
	size_t ninflight;
	uint64_t acked, lost;
	struct gc_dccp_listener *owner; /* listener that must not Reset our packets */
	struct gc_dccp *next_owned;
	/* DCCP-UDP: the data packets the engine's xmit framed, sent as one
	 * UDP_SEGMENT run of equal sizes when the run ends (gso_flush): their
	 * headers here, their payloads where they are (the ring's zone) */
	bool batching;
	unsigned gso_n;
	size_t gso_len, gso_seg;
	struct iovec gso_iov[2 * DCCP_SOCK_GSO_SEGS];
	uint8_t gso_hdr[DCCP_SOCK_GSO_SEGS][GSO_HDR];
	uint8_t *rxbuf; /* DCCP_SOCK_BATCH packets of RXSLOT bytes for c_poll */
};

struct gc_dccp_listener {
	pthread_mutex_t mu;
	struct dccp_listener l;
	bool udp;
	int fd;
	struct sockaddr_storage local;
	struct gc_dccp *owned; /* connections accepted here, see owned() */
	struct gc_dccp_opts o;
};

/* One slot of c->rxbuf: any packet a socket can hand us (larger ones are
 * truncated and dropped, as before).  Untouched pages of the buffer are
 * never faulted in: acknowledgements use the first of each slot. */
#define RXSLOT (65536 + 64)

static inline socklen_t sslen(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static inline uint16_t ssport(const struct sockaddr_storage *ss)
{
	return ntohs(ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					      : ((const struct sockaddr_in6 *)ss)->sin6_port);
}

static inline void ssset_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static inline bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
			((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* ---- engine.c (called with c->mu held, but dccp_engine_create()) --------- */

/* The connection's callbacks (conn.h): packets out through c's socket
 * (DCCP-UDP data in UDP_SEGMENT runs while the engine's xmit frames), and
 * the CCID's verdicts on the in-flight map back to the ring. */
struct dccp_conn_env dccp_engine_env(struct gc_dccp *c);
/* The packet came from c's peer (its address; with DCCP-UDP its port too). */
bool dccp_engine_is_peer(const struct gc_dccp *c, const struct sockaddr_storage *from);
/* One packet read for c, from its socket or the listener's. */
void dccp_engine_input(struct gc_dccp *c, const struct dccp_sock_pkt *sp, uint64_t now);
/* After input: the timers, the engine and the application. */
void dccp_engine_wake(struct gc_dccp *c, uint64_t now);
/* Read what c's socket holds and run the timers. */
void dccp_engine_poll(struct gc_dccp *c, uint64_t now);
/* The zone, the ring and its engine (hooks: CC, xmit, events), once the
 * connection exists.  0, or -errno with the message (fn names the caller). */
int dccp_engine_create(struct gc_dccp *c, const struct gc_dccp_opts *o, const char *fn);

#endif
