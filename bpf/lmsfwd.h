/* SPDX-License-Identifier: MIT */
/*
 * lmsfwd.h - what lmsd (tools/lmsd.c) and the LMS-FWD router program
 * (bpf/lms.bpf.c) share: the maps' keys and values and the counters.
 *
 * lmsd fills every map from the kernel's multicast forwarding cache
 * (over rtnetlink: tools/lmsd/nl.c) and its replier configuration; the
 * program only reads them.  Addresses are in network order, ifindexes in
 * host order.
 */
#ifndef GC_LMSFWD_H
#define GC_LMSFWD_H

#define GC_LMS_MAX_ROUTES 4096
#define GC_LMS_MAX_DOWN 16384
#define GC_LMS_MAX_IFS 256
#define GC_LMS_MAX_BELOW 4096
#define GC_LMS_TC_PRIO \
	0x4c4d /* our filter's tc priority ("LM"): a loss filter (prio 1) runs first */
#define GC_LMS_TC_HANDLE 1

/* (S,G): the key of lms_routes */
struct gc_lms_sg {
	__u32 src;
	__u32 group;
};

/* The LMS state of one (S,G), the thesis's mfc_parent / mfc_replier /
 * mfc_replier_cost, plus the replier's address for the dmcast check.  When no
 * replier is configured below this router, replier == parent and
 * replier_addr == S: the source is the fallback replier. */
struct gc_lms_route {
	__u32 parent;	    /* upstream ifindex (the MFC's iif) */
	__u32 replier;	    /* replier link ifindex */
	__u32 replier_addr; /* the replier host's address */
	__u32 cost;	    /* replier cost (kept for LMS-HIER; not used in forwarding) */
};

/* (S,G, ifindex) is in lms_down when ifindex is an outgoing interface of (S,G) */
struct gc_lms_down {
	__u32 src;
	__u32 group;
	__u32 ifindex;
};

/* gc_lms_if.flags */
#define GC_LMS_IF_ROUTERS \
	1 /* routers below: a unicast route has its gateway on this link (lmsd reads the main table) */

/* This router's interfaces on which the program runs (lms_ifs, by ifindex) */
struct gc_lms_if {
	__u32 addr;  /* the interface's IPv4 address: a turning point's tpaddr */
	__u8 mac[6]; /* source MAC of what we redirect out of it */
	__u8 flags;  /* GC_LMS_IF_ROUTERS: a provisional mark arriving here may be a router's */
	__u8 pad;
};

/* lms_below (an LPM trie): per interface, the destinations of the main
 * table's routes whose gateway is on it (default routes excepted), the
 * subnets reached through a router on that link.  A provisional mark arriving
 * over ifindex is accepted only when tpaddr is in one of them: it names a
 * router below that link (or a host there, see docs/lms-provisional.md), not
 * the link itself, nor anything above or aside. */
struct gc_lms_below {
	__u32 prefixlen; /* 32 (the ifindex) + the route's prefix length */
	__u32 ifindex;
	__u32 addr; /* the route's destination (network order); a lookup: tpaddr */
};

/* Per-CPU counters (lms_stats), by index, per interface the packet arrived
 * on (the map's key: its ifindex; value struct gc_lms_counts).  lmsd prints
 * them by these names. */
enum gc_lms_stat {
	GC_LMS_REQ_TURNED, /* request turned here: marked, sent down the replier link */
	GC_LMS_REQ_UP,	   /* request from the replier link (or no replier below): to the parent */
	GC_LMS_REQ_DOWN,   /* turned above, arrived from the parent: down the replier link */
	GC_LMS_DMCAST,	   /* dmcast decapsulated and multicast out the named interface */
	GC_LMS_DROP_BAD_LEN, /* in a packet with an LMS option: an LMS option's length is not 16, or an
			      * option has no length byte, a length below 2, or runs past the header */
	GC_LMS_DROP_TRUNCATED, /* packet shorter than its headers say */
	GC_LMS_DROP_NO_STATE,  /* no multicast route for (S,G) on this router */
	GC_LMS_DROP_BAD_IF, /* request from a non-tree interface, unknown tpif, tpaddr not ours on tpif */
	GC_LMS_DROP_NOT_DOWNSTREAM, /* dmcast names an interface that is not downstream for (S,G) */
	GC_LMS_DROP_FORGED,    /* dmcast not from the named replier nor from S via the parent */
	GC_LMS_DROP_TTL,       /* TTL would reach 0 */
	GC_LMS_DROP_PREMARKED, /* request from below already carries turning-point fields */
	GC_LMS_DROP_BAD_INNER, /* dmcast not IPIP with IPv4 to G inside, or a request not sent to G */
	GC_LMS_DROP_UPSTREAM, /* request from the parent that was not turned above, or no replier below */
	GC_LMS_REQ_PROVISIONAL, /* request sent up (also counted in req_up) marked provisional here */
	GC_LMS_DROP_FORGED_MARK, /* provisional mark from below on a link without routers (a host's) */
	GC_LMS_DROP_MARK_NOT_BELOW, /* provisional mark from a link with routers naming an address no
				     * route through them reaches (lms_below): a host's */
	GC_LMS_DROP_TWO_LMS,	    /* two LMS options in one header */
	GC_LMS_DROP_FRAGMENT,	 /* request or dmcast (or a dmcast's inner packet) is a fragment */
	GC_LMS_DROP_INNER_SRC,	 /* dmcast's inner packet not from S, the option's source */
	GC_LMS_DROP_INNER_PROTO, /* dmcast's inner packet not UDP */
	GC_LMS_DROP_INNER_CSUM,	 /* dmcast's inner IPv4 header checksum wrong */
	GC_LMS_NSTATS
};

struct gc_lms_counts {
	__u64 n[GC_LMS_NSTATS];
};
/* lms_stats's interfaces: those LMS-FWD runs on, and room for those lmsd
 * has detached from but not yet forgotten (lmsd deletes the keys of
 * interfaces that no longer exist, keeping their counts in its totals). */
#define GC_LMS_MAX_STAT_IFS (2 * GC_LMS_MAX_IFS)

#define GC_LMS_STAT_NAMES                                                                         \
	"req_turned", "req_up", "req_down", "dmcast", "drop_bad_len", "drop_truncated",           \
		"drop_no_state", "drop_bad_if", "drop_not_downstream", "drop_forged", "drop_ttl", \
		"drop_premarked", "drop_bad_inner", "drop_upstream", "req_provisional",           \
		"drop_forged_mark", "drop_mark_not_below", "drop_two_lms", "drop_fragment",       \
		"drop_inner_src", "drop_inner_proto", "drop_inner_csum"

#endif
