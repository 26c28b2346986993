/* SPDX-License-Identifier: MIT */
/*
 * groupcast/dccp.h - DCCP (RFC 4340) connections driven by a packet ring
 * (gc_dccp(3)).
 *
 * A connection sends what the application publishes on its ring
 * (groupcast/ring.h): claim a record with gc_ring_get_pkt(), write the
 * payload into a buffer of the connection's zone, set off/len/user_seq,
 * gc_ring_publish(), gc_ring_submit().  The congestion control (CCID 2,
 * TCP-like, RFC 4341; CCID 3, TFRC, RFC 4342) decides when each packet
 * goes; until then gc_ring_mark_dead() and gc_ring_rewind() still take
 * effect (a dead packet never goes and counts as "dead").  DCCP never
 * retransmits: a packet the peer acknowledges gets kern_acked
 * (gc_ring_acked()) and its user_seq is logged for gc_ring_acks().
 *
 * Two encapsulations with one state machine: GC_DCCP_NATIVE (IP protocol
 * 33 over a raw socket: needs CAP_NET_RAW) and GC_DCCP_UDP (RFC 6773, UDP,
 * port 6511 by default).
 *
 * Threads: not thread-safe per object, except that the ring may be filled
 * from one thread while another calls gc_dccp_recv() or gc_dccp_stats().
 *
 * Contract: errors, sized structs, names and lifetime as in every module
 * (groupcast/common.h).
 *
 * Man page: gc_dccp(3).
 */
#ifndef GROUPCAST_DCCP_H
#define GROUPCAST_DCCP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <groupcast/common.h>
#include <groupcast/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gc_dccp_encap {
	GC_DCCP_NATIVE = 0, /* IP protocol 33, raw socket */
	GC_DCCP_UDP = 1,    /* RFC 6773 DCCP-UDP */
};

#define GC_DCCP_UDP_PORT 6511 /* RFC 6773 §3.8 default port */

/*
 * Options: a sized struct (groupcast/common.h), filled with
 * GC_DCCP_OPTS_INIT(); zero fields take the defaults in brackets; NULL
 * opts: all defaults.
 */
struct gc_dccp_opts {
	size_t sz;	     /* sizeof(struct gc_dccp_opts) */
	int ccid;	     /* 2 or 3 [2]: the CCID of both half-connections */
	int encap;	     /* GC_DCCP_NATIVE or GC_DCCP_UDP [NATIVE] */
	uint32_t service;    /* Service Code [0] */
	uint32_t mps;	     /* largest payload, bytes [1400] */
	uint32_t ring_slots; /* ring records, power of 2 [1024] */
	uint32_t zone_bufs;  /* zone buffers of mps bytes [ring_slots] */
	uint32_t seq_window; /* initial Sequence Window, RFC 4340 §7.5.2, >= 32
				[5 x ring_slots, at least 100: 5120 by default] */
	uint32_t ack_ratio;  /* CCID 2: the Ack Ratio our sender asks for on a path
				that loses no Acks [0: cwnd / 32, gc_dccp(3)] */
	uint32_t timeout_ms; /* connect: handshake deadline [10000] */
};
#define GC_DCCP_OPTS_INIT(...)                                 \
	{                                                      \
		.sz = sizeof(struct gc_dccp_opts), __VA_ARGS__ \
	}

struct gc_dccp;		 /* one connection */
struct gc_dccp_listener; /* a passive socket: answers Requests with cookies */

/* Active open: returns once OPEN (or fails: ECONNREFUSED on a Reset,
 * ETIMEDOUT, EPERM without CAP_NET_RAW for NATIVE). */
struct gc_dccp *gc_dccp_connect(const struct sockaddr *peer, socklen_t len,
				const struct gc_dccp_opts *o);

/* Passive open on local (port 0 for UDP: GC_DCCP_UDP_PORT).  Keeps no
 * per-connection state until a handshake completes (Init Cookies). */
struct gc_dccp_listener *gc_dccp_listen(const struct sockaddr *local, socklen_t len,
					const struct gc_dccp_opts *o);
/* The next completed connection; timeout_ms < 0 waits forever.  NULL with
 * ETIMEDOUT when none completed in time. */
struct gc_dccp *gc_dccp_accept(struct gc_dccp_listener *l, int timeout_ms);
void gc_dccp_listener_destroy(struct gc_dccp_listener *l);

/* The connection's send ring and payload zone (owned by the connection). */
struct gc_ring *gc_dccp_ring(struct gc_dccp *c);
struct gc_zone *gc_dccp_zone(struct gc_dccp *c);

struct gc_dccp_rxinfo {
	uint64_t seq;  /* 48-bit DCCP sequence number of this packet */
	uint64_t lost; /* data packets lost between the previous delivered one and this */
	int eof;       /* 1: the peer closed; lost counts data lost after the last packet */
};

/* Next received payload into buf (truncated to len; the full length is
 * returned).  0 with ri->eof set: the peer closed (ri->lost: data packets
 * lost after the last one delivered).  -1 EAGAIN after timeout_ms
 * (0: poll; < 0: forever), ECONNRESET on a Reset. */
ssize_t gc_dccp_recv(struct gc_dccp *c, void *buf, size_t len, struct gc_dccp_rxinfo *ri, int timeout_ms);

enum gc_dccp_state {
	GC_DCCP_CLOSED = 0,
	GC_DCCP_LISTEN,
	GC_DCCP_REQUEST,
	GC_DCCP_RESPOND,
	GC_DCCP_PARTOPEN,
	GC_DCCP_OPEN,
	GC_DCCP_CLOSEREQ,
	GC_DCCP_CLOSING,
	GC_DCCP_TIMEWAIT,
};
/* "OPEN", "CLOSED"...; "?" for unknown values. */
const char *gc_dccp_state_name(int state);

/* A sized struct (groupcast/common.h) the library fills: GC_DCCP_STATS_INIT(). */
struct gc_dccp_stats {
	size_t sz; /* sizeof(struct gc_dccp_stats) */
	int state; /* enum gc_dccp_state */
	int ccid;
	uint32_t cwnd;		/* CCID 2: window, packets */
	uint32_t pipe;		/* packets in flight */
	uint64_t x_bps;		/* CCID 3: allowed rate, bytes/s */
	uint64_t rtt_us;	/* smoothed RTT (0: none yet) */
	double p;		/* loss event rate */
	uint64_t sent;		/* data packets sent */
	uint64_t acked;		/* ...acknowledged by the peer */
	uint64_t lost;		/* ...the sender took as lost */
	uint64_t dead;		/* ring packets dropped as dead before they went */
	uint64_t retransmitted; /* always 0: DCCP never retransmits */
	uint64_t received;	/* data packets received */
	uint64_t rx_lost;	/* data packets the peer sent that never came */
	uint64_t syncs;		/* Syncs sent */
	uint64_t invalid;	/* packets dropped by the §7.5 checks or parsing */
};
#define GC_DCCP_STATS_INIT(...)                                 \
	{                                                       \
		.sz = sizeof(struct gc_dccp_stats), __VA_ARGS__ \
	}
int gc_dccp_stats(struct gc_dccp *c, struct gc_dccp_stats *st);

/* Send what the ring holds (up to timeout_ms), close (CLOSE/CLOSEREQ),
 * free everything.  Always frees c; -1 ETIMEDOUT if the close was not
 * acknowledged in time (the connection was reset). */
int gc_dccp_close(struct gc_dccp *c, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_DCCP_H */
