// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tree_rx.bpf.c - the relay tree lab's receivers and tier stamps (lab/tree.py).
 *
 * One program, loaded once, its maps shared by every place it is attached
 * (bpftool loadall with pinned maps; tc attaches the pinned program):
 *
 * - at the TC ingress of a receiver namespace's link to its relay: every
 *   copy to one of the namespace's subscriber ports is checked byte for
 *   byte and dropped (no socket needed: 10,000 subscribers cost one program
 *   run per copy, not a process each);
 * - at the TC ingress of a relay's input link: the arrival time of every
 *   input datagram is stamped (the tier's start), the packet passes.
 *
 * Which role an ingress point plays is looked up by the Ethernet source
 * address of the packet (the neighbour's end of the link, unique per link
 * of the lab; multicast input has a group destination MAC shared by every
 * edge, its source MAC is not): cfg.
 *
 * The origin's datagram (lab/tree.py, origin_packet()):
 *   RTP header (12): V=2, PT 96, origin sequence, timestamp, SSRC
 *   payload (TREE_PAYLOAD bytes): "GCT1", u32 origin sequence (pseq, BE),
 *   u64 send time (CLOCK_MONOTONIC ns, LE), then TREE_WORDS u64 (LE) words
 *   w[k] = pseq * 0x9E3779B97F4A7C15 ^ send_ns ^ (k + 1) * 0xC2B2AE3D27D4EB4F.
 * A copy is good when: the UDP length is right, V=2/PT 96 unchanged, the
 * SSRC is this subscriber's (cfg.ssrc_base + its index: each subscriber
 * chose it in its JOIN), the payload is the origin's byte for byte (every
 * word against the formula), and its sequence and timestamp keep the
 * offsets of the subscriber's first copy (a change with the RTP sequence
 * still consecutive is a "rebase": a relay that switched upstream carries
 * the numbering on; anything else is bad_hdr).  pseq continuity per port
 * counts gaps and duplicates.
 *
 * Latency (histograms, lat_bucket()): e2e = arrival - send_ns; added =
 * arrival - the stamp of the relay that fed it (cfg.up) for the same pseq.
 * Per subscriber, max_gap_ns: the longest time between two good copies of
 * the current run (tree_run).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define ETH_P_IP 0x0800

#define TREE_PAYLOAD 1000
#define TREE_WORDS ((TREE_PAYLOAD - 16) / 8)
#define TREE_MAGIC 0x47435431 /* "GCT1" */
#define TREE_PT 96
#define TREE_SUBS 16384 /* subscribers (global index) */
#define TREE_RELAYS 16
#define TREE_NSEQ 16384 /* stamps per relay (pseq modulo) */
#define TREE_NS 64	/* receiver namespaces (counter rows) */
#define TREE_TIERS 4
#define TREE_NB 2801 /* lat_bucket() */

enum { ROLE_RELAY_IN = 1, ROLE_RECEIVERS = 2 };

enum {
	C_OK,	       /* good copies */
	C_BAD_LEN,     /* to a subscriber port, wrong size or not RTP v2 PT 96 */
	C_BAD_SSRC,    /* not this subscriber's SSRC */
	C_BAD_PAYLOAD, /* magic or a word differs from the origin's */
	C_BAD_HDR,     /* sequence/timestamp offsets changed without continuity */
	C_GAP,	       /* origin sequences skipped */
	C_DUP,	       /* origin sequence at or below one already seen */
	C_REBASE,      /* offsets changed with the RTP sequence consecutive */
	C_NOSTAMP,     /* the feeding relay's stamp for this pseq is missing */
	C_OTHER_PORT,  /* UDP to a port outside the subscriber range (passed) */
	C_RELAY_IN,    /* input datagrams stamped (relay rows) */
	C_N,
};

struct cfg {
	__u32 role;
	__u32 tier;	 /* ROLE_RELAY_IN: the relay's tier; receivers: their relay's */
	__u32 relay;	 /* ROLE_RELAY_IN: this relay's id */
	__u32 up;	 /* the relay feeding this point (+1; 0: none, the origin) */
	__u32 row;	 /* counter row */
	__u32 port_base; /* receivers: first subscriber port */
	__u32 nports;
	__u32 sub_base;	 /* global index of port_base's subscriber */
	__u32 ssrc_base; /* SSRC of subscriber i: ssrc_base + i */
	__u32 pad;
};

struct port {
	__u64 count;	  /* good copies */
	__u64 last_ns;	  /* arrival of the last good copy */
	__u64 max_gap_ns; /* longest time between two good copies */
	__u32 next;	  /* next origin sequence expected */
	__u32 first;	  /* origin sequence of the first copy + 1 (0: none yet) */
	__u32 ts_off;
	__u16 seq_off;
	__u16 last_seq;
	__u32 run; /* tree_run when max_gap_ns was last reset */
	__u32 pad;
};

/* [0]: the origin sequence the current run starts at (lab/tree.py sets it):
 * max_gap_ns counts only gaps inside one run, not the pause between runs */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tree_run SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, struct cfg);
} tree_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TREE_SUBS);
	__type(key, __u32);
	__type(value, struct port);
} tree_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TREE_NS *C_N);
	__type(key, __u32);
	__type(value, __u64);
} tree_cnt SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TREE_RELAYS *TREE_NSEQ);
	__type(key, __u32);
	__type(value, __u64);
} tree_stamp SEC(".maps");

/* row (role 0 receivers / 1 relay input, tier, kind 0 e2e / 1 added) * NB + bucket */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * TREE_TIERS * 2 * TREE_NB);
	__type(key, __u32);
	__type(value, __u64);
} tree_hist SEC(".maps");

struct buf {
	__u8 b[TREE_PAYLOAD + 12];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct buf);
} tree_buf SEC(".maps");

static __always_inline void count(__u32 row, __u32 k, __u64 n)
{
	__u32 i = row * C_N + k;
	__u64 *c = bpf_map_lookup_elem(&tree_cnt, &i);
	if (c)
		__sync_fetch_and_add(c, n);
}

/* 1 us buckets below 1 ms, 10 us below 10 ms, 100 us below 100 ms, then one */
static __always_inline __u32 lat_bucket(__s64 ns)
{
	if (ns < 0)
		ns = 0;
	__u64 us = (__u64)ns / 1000;
	if (us < 1000)
		return (__u32)us;
	if (us < 10000)
		return 1000 + (__u32)((us - 1000) / 10);
	if (us < 100000)
		return 1900 + (__u32)((us - 10000) / 100);
	return TREE_NB - 1;
}

static __always_inline void hist(__u32 role, __u32 tier, __u32 kind, __s64 ns)
{
	if (tier >= TREE_TIERS)
		return;
	__u32 i = ((role * TREE_TIERS + tier) * 2 + kind) * TREE_NB + lat_bucket(ns);
	__u64 *c = bpf_map_lookup_elem(&tree_hist, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline __u32 be32(const __u8 *p)
{
	return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3];
}

static __always_inline __u64 le64(const __u8 *p)
{
	__u64 v;
	__builtin_memcpy(&v, p, 8);
	return v; /* the BPF target is little endian here (bpf_cflags) */
}

/* added latency against the feeding relay's stamp for pseq (0: none) */
static __always_inline void added(struct cfg *c, __u32 role, __u32 pseq, __u64 now)
{
	if (!c->up)
		return;
	__u32 i = (c->up - 1) * TREE_NSEQ + pseq % TREE_NSEQ;
	__u64 *st = bpf_map_lookup_elem(&tree_stamp, &i);
	if (!st || !*st || *st > now) {
		count(c->row, C_NOSTAMP, 1);
		return;
	}
	hist(role, c->tier, 1, (__s64)(now - *st));
}

SEC("tc")
int tree_rx(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != 17)
		return TC_ACT_OK;
	__u64 mac = 0;
	__builtin_memcpy(&mac, eth->h_source, 6);
	struct cfg *c = bpf_map_lookup_elem(&tree_cfg, &mac);
	if (!c || c->row >= TREE_NS)
		return TC_ACT_OK;
	__u32 l4 = sizeof(*eth) + ip->ihl * 4;
	struct udphdr *u = (void *)eth + l4;
	if ((void *)(u + 1) > end)
		return TC_ACT_OK;
	__u64 now = bpf_ktime_get_ns();
	__u32 dport = bpf_ntohs(u->dest);
	int sub_port = c->role == ROLE_RECEIVERS && dport - c->port_base < c->nports;
	if (c->role == ROLE_RECEIVERS && !sub_port) {
		count(c->row, C_OTHER_PORT, 1);
		return TC_ACT_OK;
	}
	__u32 zero = 0;
	struct buf *b = bpf_map_lookup_elem(&tree_buf, &zero);
	if (!b)
		return TC_ACT_OK;
	if (bpf_ntohs(u->len) != 8 + 12 + TREE_PAYLOAD ||
	    bpf_skb_load_bytes(skb, l4 + 8, b->b, sizeof(b->b)) || b->b[0] != 0x80 ||
	    b->b[1] != TREE_PT) {
		if (sub_port) {
			count(c->row, C_BAD_LEN, 1);
			return TC_ACT_SHOT;
		}
		return TC_ACT_OK;
	}
	const __u8 *rtp = b->b, *pl = b->b + 12;
	if (be32(pl) != TREE_MAGIC) {
		if (sub_port) {
			count(c->row, C_BAD_PAYLOAD, 1);
			return TC_ACT_SHOT;
		}
		return TC_ACT_OK;
	}
	__u32 pseq = be32(pl + 4);
	__u64 send_ns = le64(pl + 8);

	if (c->role == ROLE_RELAY_IN) {
		__u32 i = (c->relay % TREE_RELAYS) * TREE_NSEQ + pseq % TREE_NSEQ;
		__u64 *st = bpf_map_lookup_elem(&tree_stamp, &i);
		if (st && !*st)
			*st = now; /* the first arrival (a failover may bring it twice) */
		count(c->row, C_RELAY_IN, 1);
		hist(1, c->tier, 0, (__s64)(now - send_ns));
		added(c, 1, pseq, now);
		return TC_ACT_OK;
	}

	/* a copy to subscriber index c->sub_base + (dport - port_base) */
	__u32 idx = c->sub_base + (dport - c->port_base);
	if (be32(rtp + 8) != c->ssrc_base + idx) {
		count(c->row, C_BAD_SSRC, 1);
		return TC_ACT_SHOT;
	}
	__u64 seed = pseq * 0x9E3779B97F4A7C15ull ^ send_ns;
	for (__u32 k = 0; k < TREE_WORDS; k++) {
		if (le64(pl + 16 + 8 * k) != (seed ^ (__u64)(k + 1) * 0xC2B2AE3D27D4EB4Full)) {
			count(c->row, C_BAD_PAYLOAD, 1);
			return TC_ACT_SHOT;
		}
	}
	struct port *p = bpf_map_lookup_elem(&tree_port, &idx);
	if (!p)
		return TC_ACT_SHOT;
	__u16 seq = (__u16)(rtp[2] << 8 | rtp[3]);
	__u32 ts = be32(rtp + 4);
	__u16 seq_off = (__u16)(seq - (__u16)pseq);
	__u32 ts_off = ts - pseq * 3000; /* the origin's timestamp: pseq * 3000 */
	if (p->first && pseq < p->next) {
		count(c->row, C_DUP, 1);
		return TC_ACT_SHOT;
	}
	if (!p->first) {
		p->first = pseq + 1;
		p->next = pseq;
		p->seq_off = seq_off;
		p->ts_off = ts_off;
	} else if (seq_off != p->seq_off || ts_off != p->ts_off) {
		if (seq != (__u16)(p->last_seq + 1)) {
			count(c->row, C_BAD_HDR, 1);
			return TC_ACT_SHOT;
		}
		count(c->row, C_REBASE, 1);
		p->seq_off = seq_off;
		p->ts_off = ts_off;
	}
	if (pseq > p->next)
		count(c->row, C_GAP, pseq - p->next);
	__u32 *run = bpf_map_lookup_elem(&tree_run, &zero);
	if (run && p->run != *run) {
		p->run = *run;
		p->max_gap_ns = 0;
	}
	/* from the previous copy, if it was of this run (its pseq is next - 1) */
	if (run && p->last_ns && p->next > *run && now - p->last_ns > p->max_gap_ns)
		p->max_gap_ns = now - p->last_ns;
	p->next = pseq + 1;
	p->last_seq = seq;
	p->last_ns = now;
	p->count++;
	count(c->row, C_OK, 1);
	hist(0, c->tier, 0, (__s64)(now - send_ns));
	added(c, 0, pseq, now);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
