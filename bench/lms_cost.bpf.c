// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * lms_cost.bpf.c - L1 (LMS Table 6.1): a router's per-packet forwarding cost,
 * from BPF timestamps at the router's own interfaces (bench/lms.py).
 *
 * cost_in (TC ingress, priority 1, before LMS-FWD) stamps each measured
 * packet as it enters the router; cost_out (TC egress of every router
 * interface) stamps it as it leaves.  A router forwards a packet within one
 * softirq run on one CPU, from the ingress hook to the last egress hook (the
 * kernel's multicast forwarding clones and transmits to each outgoing
 * interface in turn; LMS-FWD redirects once), so the time from the ingress
 * stamp to the packet's last egress stamp is its cost on that CPU.  It is
 * known when the next packet enters, and goes into a histogram of 10 ns
 * buckets, one per measurement slot (set by the driver).  This is the
 * thesis's measure: from IP input to the hand-off to the interface.
 *
 * Measured packets: IPv4 UDP to cost_cfg.port (data, requests and the
 * decapsulated dmcasts) and IPIP (dmcasts, at ingress).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define BUCKETS 4096 /* 10 ns each; the last one holds everything >= 40.95 us */
#define SLOTS 96

struct cost_cfg {
	__u32 slot;
	__u32 port;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cost_cfg);
} cost_cfg SEC(".maps");

struct stamp {
	__u64 in, out; /* out = 0: the packet has not left (yet) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stamp);
} cost_stamp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SLOTS *BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} cost_hist SEC(".maps");

/* 1: UDP to the measured port (or IPIP when ipip is set), 0: not measured */
static __always_inline int measured(struct __sk_buff *skb, __u32 port, int ipip)
{
	__u8 vihl, proto;
	__u16 dport;

	if (skb->protocol != bpf_htons(0x0800) || bpf_skb_load_bytes(skb, 14, &vihl, 1) ||
	    bpf_skb_load_bytes(skb, 14 + 9, &proto, 1))
		return 0;
	if (proto == 4)
		return ipip;
	if (proto != 17 || bpf_skb_load_bytes(skb, 14 + (vihl & 0xf) * 4 + 2, &dport, 2))
		return 0;
	return bpf_ntohs(dport) == port;
}

SEC("tc")
int cost_in(struct __sk_buff *skb)
{
	__u32 k = 0;
	struct cost_cfg *cfg = bpf_map_lookup_elem(&cost_cfg, &k);
	struct stamp *st = bpf_map_lookup_elem(&cost_stamp, &k);

	if (!cfg || !st || !measured(skb, cfg->port, 1))
		return TC_ACT_UNSPEC;
	if (st->in && st->out > st->in) { /* the previous packet's cost is complete */
		__u64 b = (st->out - st->in) / 10;
		__u32 i = (cfg->slot % SLOTS) * BUCKETS + (b < BUCKETS ? b : BUCKETS - 1);
		__u64 *c = bpf_map_lookup_elem(&cost_hist, &i);
		if (c)
			__sync_fetch_and_add(c, 1);
	}
	st->out = 0;
	st->in = bpf_ktime_get_ns(); /* last: the bookkeeping above is not the packet's cost */
	return TC_ACT_UNSPEC;
}

SEC("tc")
int cost_out(struct __sk_buff *skb)
{
	__u64 now = bpf_ktime_get_ns(); /* first: measuring is not the packet's cost */
	__u32 k = 0;
	struct cost_cfg *cfg = bpf_map_lookup_elem(&cost_cfg, &k);
	struct stamp *st = bpf_map_lookup_elem(&cost_stamp, &k);

	if (cfg && st && st->in && measured(skb, cfg->port, 0))
		st->out = now;
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
