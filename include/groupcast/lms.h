/* SPDX-License-Identifier: MIT */
/*
 * groupcast/lms.h - the endpoint side of Light-weight Multicast Services
 * (LMS-API and LMS-ENCAP; Papadopoulos' thesis, ch. 6.3).
 *
 * An LMS router (bpf/lms.bpf.c + lmsd) steers a *request* (a NAK) up the
 * multicast tree to a replier and marks where it turned; the replier answers
 * with a *directed multicast* (dmcast): a multicast packet encapsulated in a
 * unicast IPIP packet to the turning point router, which multicasts it down
 * the one interface named in the LMS IP option.  This header gives an
 * application (or a transport such as LTP) what it needs for that:
 *
 *   gc_lms_join(), gc_lms_leave()  group membership of a UDP socket
 *   gc_lms_recvopts()              deliver IP options with received datagrams
 *   gc_lms_request()               send data + LMS request option (138)
 *   gc_lms_recv()                  receive data + the turning point information
 *   gc_lms_raw_socket()            the raw socket dmcasts go out on
 *   gc_lms_dmcast()                send a dmcast (IPIP + option 139)
 *   gc_lms_dmcast_build()          the dmcast packet, without sending it
 *   gc_lms_opt_build(), gc_lms_opt_parse()  the option on its own
 *   gc_lms_stats()                 what this process sent, received, rejected
 *
 * IPv4 only: LMS is defined on IPv4 options.  Addresses (struct in_addr) are
 * in network order as everywhere in the sockets API; ports and the interface
 * index are in host order.
 *
 * Privileges: gc_lms_request() and gc_lms_dmcast() need CAP_NET_RAW in the
 * network namespace of the socket (Linux lets only CAP_NET_RAW attach an IP
 * option of an unknown type, and raw sockets need it).  Without it they fail
 * with EPERM and a message naming the capability.  Everything else works
 * unprivileged.
 *
 * Errors: every function that fails returns -1 and sets errno; gc_errmsg()
 * then names the argument or the reason in one line.  Nothing is sent when an
 * argument is wrong.
 *
 * Man page: gc_lms(3).
 */
#ifndef GROUPCAST_LMS_H
#define GROUPCAST_LMS_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>
#include <groupcast/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GC_LMS_REQUEST 138	/* IP option type of a request (IPOPT_MREQ) */
#define GC_LMS_DMCAST 139	/* IP option type of a dmcast (IPOPT_DMCICAST) */
#define GC_LMS_OPTLEN 16	/* the option's length, type and length bytes included */
#define GC_LMS_DMCAST_HDRLEN 64 /* outer IPv4 20 + option 16 + inner IPv4 20 + UDP 8 */
#define GC_LMS_DMCAST_MAX (65535 - GC_LMS_DMCAST_HDRLEN) /* largest dmcast payload */
#define GC_LMS_DEFAULT_TTL 64 /* inner TTL when struct gc_lms_dmcast.ttl is 0 */
/* In a request's tpif, with tpaddr set: a provisional turning point, the
 * first router that sent the request up without turning it (see gc_lms(3)).
 * The interface is tpif & ~GC_LMS_PROVISIONAL; a dmcast to it must not carry
 * the bit. */
#define GC_LMS_PROVISIONAL 0x8000
/* In a dmcast's tp.tpif (gc_lms_dmcast_build(), gc_lms_dmcast()) only, never
 * on the wire: the routers run lmsd --no-provisional (the thesis's
 * forwarding), so tpif & ~GC_LMS_NO_PROVISIONAL is the whole 16-bit ifindex
 * and bit 15 is part of it, not a provisional mark.  Without it a tpif with
 * bit 15 set is refused.  Pass tpif | GC_LMS_NO_PROVISIONAL. */
#define GC_LMS_NO_PROVISIONAL 0x80000000u

/*
 * The option on the wire (thesis: struct ipmopt_lms), every field in network
 * order.  The same layout as bpf/lms.h's struct gc_lms_opt (checked when the
 * library is built).
 */
struct gc_lms_wire {
	uint8_t code;	 /* GC_LMS_REQUEST or GC_LMS_DMCAST */
	uint8_t len;	 /* GC_LMS_OPTLEN */
	uint16_t tpif;	 /* turning point's interface index */
	uint32_t tpaddr; /* turning point router's address */
	uint32_t src;	 /* original source S of (S,G) */
	uint32_t group;	 /* group G */
};

/* The option's contents, as the application uses them. */
struct gc_lms_info {
	int code;	       /* GC_LMS_REQUEST, GC_LMS_DMCAST, or 0: no LMS option */
	unsigned tpif;	       /* ifindex on the turning point where the request arrived
				* (and where the dmcast goes out); 0: not turned; < 65536;
				* in a request with tpaddr set, GC_LMS_PROVISIONAL: the mark
				* is provisional (the request was not turned) */
	struct in_addr tpaddr; /* turning point router; INADDR_ANY: not marked */
	struct in_addr src;    /* original source S */
	struct in_addr group;  /* group G */
};

/*
 * Encode info as an option of type code (GC_LMS_REQUEST or GC_LMS_DMCAST)
 * into out[0..GC_LMS_OPTLEN); info->code is ignored.  Returns GC_LMS_OPTLEN,
 * or -1 with EINVAL (bad code, tpif > 65535) or EFAULT (NULL pointer).
 */
int gc_lms_opt_build(void *out, int code, const struct gc_lms_info *info);

/*
 * Find the LMS option in an IPv4 options area (the bytes after the 20-byte
 * header, as IP_RECVOPTS delivers them) and decode it into *info.  Walks
 * every option: EOL ends the area, NOP is one byte, every other option must
 * have a length byte in 2..(bytes left), and an LMS option must have length
 * GC_LMS_OPTLEN and appear only once.  Never reads outside opts[0..len).
 * Returns the option type (GC_LMS_REQUEST or GC_LMS_DMCAST), or 0 with
 * info->code = 0 when the area is well formed but has no LMS option.  Errors:
 *   EBADMSG  malformed area (counted in gc_lms_stats().bad_options)
 *   EINVAL   len > 40 (no IPv4 header has more)
 *   EFAULT   info is NULL, or opts is NULL with len > 0
 */
int gc_lms_opt_parse(const void *opts, size_t len, struct gc_lms_info *info);

/*
 * Join group on the interface with index ifindex (0: the kernel picks by
 * route) on UDP socket sd, for every source (source INADDR_ANY) or only for
 * source (source-specific, IGMPv3).  Also turns IP_MULTICAST_ALL off on sd, so
 * that sd gets only the groups it joined itself, not those of other sockets
 * of this host.  gc_lms_leave() undoes one join.  Errors: EINVAL (group not
 * multicast, source multicast), EADDRINUSE (already joined), EADDRNOTAVAIL
 * (leave: not joined), ENODEV (no such interface), EPROTOTYPE (sd is not an
 * AF_INET UDP socket), EBADF, ENOTSOCK, ENOBUFS (too many memberships).
 */
int gc_lms_join(int sd, struct in_addr group, struct in_addr source, unsigned ifindex);
int gc_lms_leave(int sd, struct in_addr group, struct in_addr source, unsigned ifindex);

/*
 * Turn delivery of IP options on (on != 0) or off on UDP socket sd
 * (IP_RECVOPTS).  gc_lms_recv() can report an LMS option only when it is on.
 */
int gc_lms_recvopts(int sd, int on);

/*
 * Send buf[0..len) on AF_INET UDP socket sd to *to, carrying an LMS request
 * option for (src, group) with the turning point fields zero (a router fills
 * them).  The thesis multicasts requests: send them to the group G and its
 * port (to = G:port); routers then steer them to a replier instead of
 * flooding them.  Across routers sd needs IP_MULTICAST_TTL >= 2 (default 1),
 * and IP_MULTICAST_IF picks the interface.  to may be NULL when sd is
 * connected.  flags as for sendmsg(2).  Returns len.  Errors:
 *   EPERM    no CAP_NET_RAW (the kernel takes IP options of unknown types only
 *            from CAP_NET_RAW; it says EINVAL, the library says EPERM)
 *   EINVAL   group not multicast, src unspecified or multicast, to not
 *            AF_INET or port 0
 *   EFAULT   buf NULL with len > 0
 *   EMSGSIZE len + 16 option bytes do not fit a UDP datagram
 *   EPROTOTYPE sd is not an AF_INET UDP socket; anything sendmsg(2) returns
 */
ssize_t gc_lms_request(int sd, const struct sockaddr_in *to, struct in_addr src,
		       struct in_addr group, const void *buf, size_t len, int flags);

/*
 * Receive one datagram on UDP socket sd into buf[0..len) (recvmsg(2) flags),
 * with the sender's address in *from (may be NULL), and its LMS option in
 * *info (info->code 0: the datagram had none).  Returns the datagram's length.
 * Errors (the datagram is consumed):
 *   EBADMSG  its IP options are malformed (gc_lms_opt_parse()); counted
 *   EMSGSIZE it was longer than len (its length is in the message)
 *   EFAULT   info NULL, buf NULL with len > 0; anything recvmsg(2) returns
 *            (EAGAIN with MSG_DONTWAIT or a receive timeout)
 * Call gc_lms_recvopts(sd, 1) first: without IP_RECVOPTS the kernel never
 * delivers the option.
 */
ssize_t gc_lms_recv(int sd, void *buf, size_t len, int flags, struct sockaddr_in *from,
		    struct gc_lms_info *info);

/* A dmcast: the inner multicast packet and where it goes. */
struct gc_lms_dmcast {
	struct gc_lms_info tp; /* from the request: tpif, tpaddr (outer destination),
				* src S (inner source), group G (inner destination);
				* tpif may carry GC_LMS_NO_PROVISIONAL */
	struct in_addr from;   /* outer source: this replier; INADDR_ANY: the kernel
				* fills in the address of the outgoing interface */
	uint16_t sport;	       /* inner UDP source port: S's data port */
	uint16_t dport;	       /* inner UDP destination port: the group's port, not 0 */
	uint8_t ttl;	       /* inner TTL; 0: GC_LMS_DEFAULT_TTL */
	uint16_t id;	       /* outer IP identification; 0: the kernel picks one */
};

/*
 * Build the dmcast for data[0..len) into pkt[0..cap): outer IPv4 header
 * (protocol 4, DF, TTL 64, from -> tp.tpaddr) with the option GC_LMS_DMCAST
 * carrying tp, then the inner IPv4 multicast packet S -> G (DF, id 0, TTL
 * d->ttl) with UDP sport -> dport; every checksum filled in.  The inner source
 * is the original source S, not the replier, so that routers below the
 * turning point forward the repair on S's (S,G) tree and source-specific
 * receivers accept it.  Returns the packet's length (len + 64).  Errors:
 *   EINVAL   tp.group not multicast; tp.src unspecified or multicast;
 *            tp.tpaddr unspecified, multicast or broadcast; tp.tpif 0,
 *            > 65535 or with GC_LMS_PROVISIONAL set (with
 *            GC_LMS_NO_PROVISIONAL: the rest 0 or > 65535); dport 0; from
 *            multicast
 *   EMSGSIZE len > GC_LMS_DMCAST_MAX
 *   ENOBUFS  cap < len + 64
 *   EFAULT   NULL pointers
 */
ssize_t gc_lms_dmcast_build(void *pkt, size_t cap, const struct gc_lms_dmcast *d, const void *data,
			    size_t len);

/*
 * Open the raw socket dmcasts are sent on (AF_INET, SOCK_RAW, IPPROTO_RAW:
 * send only, the header is ours; close it with close(2)).  Returns the
 * descriptor, or -1: EPERM without CAP_NET_RAW (named in the message).
 */
int gc_lms_raw_socket(void);

/*
 * Build the dmcast (gc_lms_dmcast_build()) and send it on raw socket rawfd
 * (from gc_lms_raw_socket(), or any raw socket with IP_HDRINCL) to
 * d->tp.tpaddr.  flags as for sendto(2).  Returns len.  Errors: those of
 * gc_lms_dmcast_build(); EPROTOTYPE (rawfd is not a raw socket with
 * IP_HDRINCL); EMSGSIZE (the packet is larger than the route's MTU: raw
 * packets are never fragmented by the sender); anything sendto(2) returns.
 */
ssize_t gc_lms_dmcast(int rawfd, const struct gc_lms_dmcast *d, const void *data, size_t len, int flags);

/* What this process did through this API (all threads; counters only grow). */
struct gc_lms_stats {
	uint64_t requests_sent;	    /* gc_lms_request() successes */
	uint64_t dmcasts_sent;	    /* gc_lms_dmcast() successes */
	uint64_t requests_received; /* gc_lms_recv() datagrams with a request option */
	uint64_t dmcasts_received;  /* gc_lms_recv() datagrams with a dmcast option */
	uint64_t plain_received;    /* gc_lms_recv() datagrams without an LMS option */
	uint64_t bad_options;	    /* option areas gc_lms_opt_parse() rejected (EBADMSG) */
};
/* Copy the counters into *st.  Returns 0, or -1 with EFAULT. */
int gc_lms_stats(struct gc_lms_stats *st);

/* ======================================================================
 * LTP: reliable multicast on LMS (gc_ltp(3)).
 *
 * One sender S multicasts sequenced datagrams to group G at a configured
 * rate (a token bucket, not a window: LMS has no acknowledgements, only
 * NAKs, and a window would need feedback from every receiver).  Receivers
 * detect gaps (also at the tail, from the sender's heartbeats) and multicast
 * NAKs with the LMS request option; routers steer them to a replier, which
 * answers with a dmcast to the turning point; a replier that lacks the data
 * stays silent and the requester retries with backoff.  After
 * escalate_after silent tries a receiver also asks S directly (unicast),
 * and S answers by unicast: recovery goes on when a configured replier is
 * dead.  After max_tries the loss is reported as unrecoverable.
 *
 * Event-loop use: poll gc_ltp_fd() for POLLIN with the timeout
 * gc_ltp_timeout() returns, then call gc_ltp_process(); read delivered data
 * with gc_ltp_recv() until EAGAIN.  Not thread-safe: one thread per
 * endpoint.  Requests and dmcasts need CAP_NET_RAW (see gc_lms_request()).
 * ====================================================================== */

#define GC_LTP_HDRLEN 20	/* LTP header on every datagram */
#define GC_LTP_MAX_PAYLOAD 1416 /* 1500 - 64 (dmcast headers) - 20 (LTP header) */

enum {
	GC_LTP_SENDER = 1 << 0,	   /* this endpoint is the source S */
	GC_LTP_RECEIVER = 1 << 1,  /* receives and delivers the stream */
	GC_LTP_REPLIER = 1 << 2,   /* keeps a repair cache and answers requests (receivers) */
	GC_LTP_UNORDERED = 1 << 3, /* deliver in arrival order (default: in sequence order) */
	/* the routers run lmsd --no-provisional: a request's tpif is the whole
	 * 16-bit ifindex, never a provisional mark (repliers and the sender) */
	GC_LTP_NO_PROVISIONAL = 1 << 4,
};

struct gc_ltp_config {
	int flags;	       /* GC_LTP_* */
	struct in_addr group;  /* G */
	struct in_addr source; /* S: the sender's address (receivers accept data only from it) */
	struct in_addr ifaddr; /* local address of the interface to use (IP_MULTICAST_IF) */
	unsigned ifindex;      /* its index (for the join); 0: by route */
	uint16_t port;	       /* G's port; the sender sends from this port too */
	uint8_t ttl;	       /* multicast TTL of data and requests; 0: 16 */
	uint32_t session;      /* sender: 0 picks a random one; receiver: 0 takes the first seen */
	/* sender */
	uint64_t rate;	       /* bytes per second (payload + headers); 0: 1000000 */
	uint32_t burst;	       /* token bucket depth in bytes; 0: 16 packets */
	uint32_t heartbeat_ms; /* first heartbeat after data stops; doubles up to 1 s; 0: 20 */
	/* buffers (bytes, rounded down to whole GC_LTP_MAX_PAYLOAD slots, at least 16) */
	uint32_t cache_bytes;  /* sender retransmit buffer / replier repair cache; 0: 4 MiB */
	uint32_t window_bytes; /* receiver reorder window; 0: 4 MiB */
	uint32_t max_ranges;   /* pending NAK ranges per receiver; 0: 256 */
	/* receiver timers */
	uint32_t nak_ms;	 /* first retry timeout; doubles each try up to 500 ms; 0: 10 */
	uint32_t max_tries;	 /* requests per gap before it is reported lost; 0: 12 */
	uint32_t escalate_after; /* tries after which S is also asked directly; 0: 3 */
	/* request limits at repliers and the source (token buckets) */
	uint32_t req_rate_peer; /* requests/s from one requester address; 0: 1000 */
	uint32_t req_rate_all;	/* requests/s from everyone; 0: 5000 */
	uint32_t repair_rate;	/* repair packets/s sent; 0: 5000 */
	/* LMS-HIER (lmsd(8)): a replier with a cost reports itself to its router */
	uint32_t replier_cost; /* 0: no reports (the router's configuration names repliers) */
	uint32_t report_ms;    /* report interval; the router forgets it after 3; 0: 100 */
};

struct gc_ltp;

/* Open an endpoint (its UDP socket bound to port, joined to G, and for
 * repliers and the sender a raw socket for dmcasts).  NULL with errno:
 * EINVAL (a field, named), EPERM (no CAP_NET_RAW), ENOMEM, socket errors. */
struct gc_ltp *gc_ltp_open(const struct gc_ltp_config *cfg);
/* Close it; the sender's last heartbeats are not repeated.  NULL is fine. */
void gc_ltp_close(struct gc_ltp *l);

/* The descriptor to poll for POLLIN. */
int gc_ltp_fd(const struct gc_ltp *l);
/* Milliseconds until gc_ltp_process() has timer work (-1: none, 0: now). */
int gc_ltp_timeout(struct gc_ltp *l);
/* Read every datagram waiting (at most 256 per call), run the timers
 * (NAK retries, heartbeats).  Returns 0, or -1 with errno on a socket error. */
int gc_ltp_process(struct gc_ltp *l);

/* Sender: multicast one datagram of len (1..GC_LTP_MAX_PAYLOAD) bytes.
 * Returns len; -1 with EAGAIN when the token bucket is empty (poll with
 * gc_ltp_timeout() and retry), EMSGSIZE, EINVAL (not a sender or finished). */
ssize_t gc_ltp_send(struct gc_ltp *l, const void *buf, size_t len);
/* Sender: mark the stream finished (heartbeats then carry the end). */
int gc_ltp_finish(struct gc_ltp *l);

enum { GC_LTP_DATA = 1, GC_LTP_LOSS = 2, GC_LTP_END = 3 };
struct gc_ltp_msg {
	int type;	 /* GC_LTP_DATA, GC_LTP_LOSS (lo..hi unrecoverable), GC_LTP_END */
	uint64_t seq;	 /* DATA: its sequence number */
	uint64_t lo, hi; /* LOSS: the lost sequence numbers, inclusive */
};
/* Receiver: the next event.  DATA returns its length (copied into buf;
 * EMSGSIZE if len is short, the datagram stays); LOSS and END return 0.
 * -1 with EAGAIN when nothing is ready.  END comes once, after the last
 * datagram (or loss) of a finished stream. */
ssize_t gc_ltp_recv(struct gc_ltp *l, void *buf, size_t len, struct gc_ltp_msg *m);

struct gc_ltp_stats {
	uint64_t data_sent, bytes_sent, heartbeats_sent;     /* sender */
	uint64_t data_received, bytes_delivered, duplicates; /* receiver */
	uint64_t repairs_received, repairs_unneeded;	     /* repairs: all, already had */
	uint64_t requests_sent, escalations_sent;	     /* NAK datagrams */
	uint64_t gaps_detected, lost;			     /* seqs missed, seqs given up */
	uint64_t window_drops;				     /* beyond the reorder window */
	uint64_t requests_received, repairs_sent, repairs_missing; /* replier/source: missing: not cached */
	uint64_t requests_limited, repairs_limited, bad_packets; /* rate limits, rejected datagrams */
	uint64_t recovered, recovery_us_sum, recovery_us_max;	 /* gap seen -> repair arrived */
	uint64_t reports_sent;					 /* LMS-HIER replier reports */
};
int gc_ltp_stats(const struct gc_ltp *l, struct gc_ltp_stats *st);
/* Copy up to max of the most recent recovery latencies (microseconds, at
 * most 65536 kept) into us.  Returns how many. */
size_t gc_ltp_recovery_samples(const struct gc_ltp *l, uint32_t *us, size_t max);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_LMS_H */
