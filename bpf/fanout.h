/* SPDX-License-Identifier: MIT */
/*
 * fanout.h - what the kernel engine's library half (lib/group/kernel.c) and
 * its TC program (bpf/fanout.bpf.c) share.
 *
 * The library sends one "trigger" datagram per chunk of GC_KCHUNK members
 * from a UDP socket of its own (no checksum, connected to the loopback
 * address) whose payload is the shared data.  The TC egress program on lo
 * finds the group by the trigger socket's cookie, takes the next chunk, and
 * for each member rewrites the headers, clones the packet out of the member's
 * interface and writes the member's result; then it steals the trigger.
 * Members and per-recipient bytes live in mmapable maps that the library
 * writes directly, with no system call per member.
 */
#ifndef GC_FANOUT_H
#define GC_FANOUT_H

#define GC_KCHUNK 256		   /* members per trigger: keeps a burst under netdev_max_backlog */
#define GC_KDATA 64		   /* prepend and append bytes the kernel splices, each */
#define GC_KSOCKS 256		   /* kernel-engine sockets per process */
#define GC_KCLONE_MARK 0x67631a7eu /* skb->mark of our clones: the hook lets them pass */
#define GC_KRESOLVE_NS 1000000000ull /* re-resolve a member's route and MACs after 1 s */
#define GC_KMTU_NS 10000000ull /* re-check a member's path MTU after 10 ms (big packets only) */

/* Slot flags (library) */
#define GC_KF_LOCAL 1 /* loopback destination: out of lo, no MACs, source = destination */
#define GC_KF_SKIP 2  /* not for the kernel (too much per-recipient data, other family) */

/* Results (slot.result): 0 sent; < 0 -errno; these two ask the library to send */
#define GC_KRES_PENDING 1 /* set by the library before a send; the program never saw it */
#define GC_KRES_USER 2	  /* the kernel cannot send it (no neighbour yet, too big, local...) */

/* Per-socket state for one send, written by the library before the trigger. */
struct gc_khead {
	__u32 n;	  /* members in the group */
	__u32 next_chunk; /* the library sets 0; each trigger takes one chunk */
	__u32 data_csum;  /* 16-bit ones-complement sum (memory order) of the shared payload */
	__u16 sport;	  /* source port, network order: the user socket's port */
	__u16 family;	  /* 4 or 6 */
	__u8 saddr[16];	  /* the user socket's bound address, if bound */
	__u8 bound;	  /* 1: use saddr; 0: the route's source for each member */
	__u8 tos, ttl, pad;
	__u16 check_above; /* packets above this get their path MTU checked every GC_KMTU_NS */
	__u16 pad2;
};

/* A member's route, MACs, source and MTU: cached by the program in the slot
 * (resolve() in fanout.bpf.c).  The library keeps a copy per destination
 * address (kernel.c) and seeds a slot with it when a known address moves
 * into the slot, so a reordered group costs no look-ups. */
struct gc_kroute {
	__u32 ifindex; /* 0: not resolved */
	__u32 mtu;
	__u64 resolved_ns;
	__u64 mtu_ns; /* when mtu was last looked up */
	__u8 dmac[6], smac[6];
	__u8 saddr[16];
	__u32 dsum, ssum; /* 16-bit sums (memory order) of daddr and saddr, for the checksums */
};

/* One member.  The library writes the first part; the program caches the
 * route in rt (the library zeroes rt.ifindex, or seeds rt, when daddr
 * changes).  What a send reads of each member comes first, the per-recipient
 * bytes last, so that a member costs the library and the program one or two
 * cache lines. */
struct gc_kslot {
	__u8 daddr[16];	     /* IPv4 in the first 4 bytes */
	__u16 dport;	     /* network order */
	__u8 plen, alen;     /* per-recipient bytes in data[]: prepend then append */
	__u32 data_csum;     /* sum of prepend|shared|append when plen or alen, else unused */
	__u32 flags;	     /* GC_KF_* */
	__s32 result;	     /* 0, -errno, or GC_KRES_* */
	struct gc_kroute rt; /* owned by the program while a send runs */
	__u8 data[2 * GC_KDATA];
};

#endif
