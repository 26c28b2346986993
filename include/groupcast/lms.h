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
 * LTP, the reliable multicast transport on these, has its own header:
 * groupcast/ltp.h.
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
 * Contract: errors, sized structs, names and lifetime as in every module
 * (groupcast/common.h).
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

/* In struct gc_lms_dmcast's flags: the routers run lmsd --no-provisional
 * (the thesis's forwarding), so tp.tpif is the whole 16-bit ifindex and bit
 * 15 is part of it, not a provisional mark.  Without it a tp.tpif with bit
 * 15 set is refused. */
#define GC_LMS_DMCAST_NO_PROVISIONAL 0x1u

/* A dmcast: the inner multicast packet and where it goes.  A sized struct
 * (groupcast/common.h): fill it with GC_LMS_DMCAST_INIT(). */
struct gc_lms_dmcast {
	size_t sz;	       /* sizeof(struct gc_lms_dmcast) */
	unsigned flags;	       /* GC_LMS_DMCAST_NO_PROVISIONAL */
	struct gc_lms_info tp; /* from the request: tpif, tpaddr (outer destination),
				* src S (inner source), group G (inner destination) */
	struct in_addr from;   /* outer source: this replier; INADDR_ANY: the kernel
				* fills in the address of the outgoing interface */
	uint16_t sport;	       /* inner UDP source port: S's data port */
	uint16_t dport;	       /* inner UDP destination port: the group's port, not 0 */
	uint8_t ttl;	       /* inner TTL; 0: GC_LMS_DEFAULT_TTL */
	uint16_t id;	       /* outer IP identification; 0: the kernel picks one */
};
#define GC_LMS_DMCAST_INIT(...)                                 \
	{                                                       \
		.sz = sizeof(struct gc_lms_dmcast), __VA_ARGS__ \
	}

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
 *            > 65535 or (without GC_LMS_DMCAST_NO_PROVISIONAL in flags)
 *            with GC_LMS_PROVISIONAL set; flags unknown; dport 0; from
 *            multicast; sz below the 1.0 size (groupcast/common.h)
 *   E2BIG    *d is larger than this library's struct and sets a byte past it
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

/* What this process did through this API (all threads; counters only grow).
 * A sized struct (groupcast/common.h) the library fills: GC_LMS_STATS_INIT(). */
struct gc_lms_stats {
	size_t sz;		    /* sizeof(struct gc_lms_stats) */
	uint64_t requests_sent;	    /* gc_lms_request() successes */
	uint64_t dmcasts_sent;	    /* gc_lms_dmcast() successes */
	uint64_t requests_received; /* gc_lms_recv() datagrams with a request option */
	uint64_t dmcasts_received;  /* gc_lms_recv() datagrams with a dmcast option */
	uint64_t plain_received;    /* gc_lms_recv() datagrams without an LMS option */
	uint64_t bad_options;	    /* option areas gc_lms_opt_parse() rejected (EBADMSG) */
};
#define GC_LMS_STATS_INIT(...)                                 \
	{                                                      \
		.sz = sizeof(struct gc_lms_stats), __VA_ARGS__ \
	}
/* Copy the counters into *st.  Returns 0, or -1 with EFAULT (st NULL) or
 * EINVAL (st->sz below the 1.0 size). */
int gc_lms_stats(struct gc_lms_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_LMS_H */
