// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * loss.bpf.c - random loss for labs (there is no netem here): a TC program
 * that drops each packet with probability loss_cfg[0] / 2^32, using
 * bpf_get_prandom_u32.  Attach it on any veth, ingress or egress, at a
 * lower tc priority than other filters; packets it keeps go on to them
 * (TC_ACT_UNSPEC).  lab/netlab.py (Lab.add_loss) loads it with bpftool,
 * sets the fraction and reads the counters.
 *
 * Only IPv4/IPv6 packets are candidates, so ARP and neighbour discovery
 * keep working at any loss rate.  A match narrows that to the packets
 * whose byte at an offset into the IP packet, masked, has a value (say,
 * DCCP Acks only: a test that loses a peer's feedback but not its
 * Response); the counters then count those packets alone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define TC_ACT_SHOT 2
#define ETH_HLEN 14

/* [0] drop threshold: drop when prandom < threshold (0: none, 0xffffffff: all)
 * [1] match: 0 for every IP packet, else 1 + the offset of a byte in the IP
 *     packet; [2] its mask, [3] the value (byte & mask) must have */
enum { CFG_THRESHOLD, CFG_MATCH_AT, CFG_MATCH_MASK, CFG_MATCH_VALUE, CFG_N };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CFG_N);
	__type(key, __u32);
	__type(value, __u32);
} loss_cfg SEC(".maps");

/* [0] packets seen, [1] packets dropped */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} loss_stats SEC(".maps");

static __u32 cfg(__u32 k)
{
	__u32 *v = bpf_map_lookup_elem(&loss_cfg, &k);

	return v ? *v : 0;
}

/* The packet is a candidate: no match set, or its byte matches. */
static int matches(struct __sk_buff *skb)
{
	__u32 at = cfg(CFG_MATCH_AT);
	__u8 byte;

	if (!at)
		return 1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + at - 1, &byte, 1) < 0)
		return 0; /* too short to hold it: not a match */
	return (byte & cfg(CFG_MATCH_MASK)) == cfg(CFG_MATCH_VALUE);
}

SEC("tc")
int gc_loss(struct __sk_buff *skb)
{
	__u32 k = 0, threshold;
	__u64 *seen, *dropped;

	if (skb->protocol != bpf_htons(0x0800) && skb->protocol != bpf_htons(0x86DD))
		return TC_ACT_UNSPEC;
	if (!matches(skb))
		return TC_ACT_UNSPEC;
	seen = bpf_map_lookup_elem(&loss_stats, &k);
	if (seen)
		*seen += 1;
	threshold = cfg(CFG_THRESHOLD);
	if (!threshold || bpf_get_prandom_u32() >= threshold)
		return TC_ACT_UNSPEC;
	k = 1;
	dropped = bpf_map_lookup_elem(&loss_stats, &k);
	if (dropped)
		*dropped += 1;
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
