/* SPDX-License-Identifier: MIT */
/*
 * lms.h - the LMS IPv4 option (Papadopoulos' thesis, ch. 6, struct
 * ipmopt_lms), shared by the router program (bpf/lms.bpf.c), lmsd and the
 * endpoint library (lib/lms/).  Field order is the struct's, not the prose
 * of 6.5.1 (see DESIGN.md, "LMS: readings of the thesis we settled").
 *
 * Userspace includes <linux/types.h> first; BPF code gets __u8.. from vmlinux.h.
 */
#ifndef GC_LMS_H
#define GC_LMS_H

#define GC_LMS_OPT_REQ 138 /* IPOPT_MREQ: a request, steered toward the replier */
#define GC_LMS_OPT_DMCAST \
	139 /* IPOPT_DMCICAST: a directed multicast, decapsulated at the turning point */
#define GC_LMS_OPT_LEN 16 /* the option's length, header included */

/* All multi-byte fields in network order. */
struct gc_lms_opt {
	__u8 code; /* GC_LMS_OPT_REQ or GC_LMS_OPT_DMCAST */
	__u8 len;  /* GC_LMS_OPT_LEN */
	__u16 tpif; /* turning point's ifindex: where the request arrived (request), where to multicast (dmcast) */
	__u32 tpaddr; /* turning point router's address; 0 in a request until a router turns it */
	__u32 src;    /* the original source S of (S,G) */
	__u32 group;  /* the group G */
};

/*
 * LMS-HIER replier report (tools/lmsd/hier.c, lib/lms/ltp.c): UDP to
 * 224.0.0.2 (all routers) port GC_LMS_HIER_PORT with TTL 1, from a host
 * volunteering as replier for (S,G) to its router, and from each router's
 * lmsd to its parent with its best replier.  Multi-byte fields in network
 * order.  Not used by the router program.
 */
#define GC_LMS_HIER_PORT 7399
#define GC_LMS_HIER_GROUP 0xe0000002u /* 224.0.0.2, host order */
#define GC_LMS_HIER_VERSION 1
#define GC_LMS_HIER_LEAVE 1 /* flags: withdraw this replier */

struct gc_lms_hier {
	__u8 magic[2]; /* 'L' 'H' */
	__u8 version;  /* GC_LMS_HIER_VERSION */
	__u8 flags;    /* GC_LMS_HIER_LEAVE */
	__u32 src;     /* S */
	__u32 group;   /* G */
	__u32 replier; /* the replier host's address */
	__u32 cost;    /* its cost (a host's own; + 1 per router on the way up) */
	__u32 hold_ms; /* forget this report after hold_ms without a new one */
};

#endif
