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

/*
 * A request's marks (tpaddr decides, tpif's bit 15 tells which):
 *   tpaddr == 0                      unmarked (tpif means nothing: a host
 *                                    sends 0, the thesis's Fig. 6.8 0xffff)
 *   tpaddr != 0, tpif & PROVISIONAL  provisional turning point: the first
 *                                    router that sent the request up without
 *                                    turning it (from its replier link, or
 *                                    with no replier below), at its address
 *                                    on the arrival interface tpif & MASK.
 *                                    Routers above keep it; a router that
 *                                    turns the request overwrites it.  If it
 *                                    reaches the source so marked, the source
 *                                    answers with a dmcast to that router and
 *                                    interface, not a multicast to the group.
 *   tpaddr != 0, bit 15 clear        turned: the turning point (thesis).
 * So with provisional marks on, a turning point's ifindex must be below
 * 0x8000 (routers check).  Not in the thesis: lmsd --no-provisional turns
 * them off (DESIGN.md, "LMS"), and then tpif is the whole 16-bit ifindex
 * (docs/lms-provisional.md).
 */
#define GC_LMS_TPIF_PROVISIONAL 0x8000
#define GC_LMS_TPIF_MASK 0x7fff

/* All multi-byte fields in network order. */
struct gc_lms_opt {
	__u8 code; /* GC_LMS_OPT_REQ or GC_LMS_OPT_DMCAST */
	__u8 len;  /* GC_LMS_OPT_LEN */
	__u16 tpif; /* turning point's ifindex: where the request arrived (request), where to multicast (dmcast);
		     * in a request, bit 15 set with tpaddr != 0: provisional (above) */
	__u32 tpaddr; /* turning point router's address; 0 in a request until a router marks it */
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
