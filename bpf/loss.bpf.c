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
 * keep working at any loss rate.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define TC_ACT_SHOT 2

/* [0] drop threshold: drop when prandom < threshold (0: none, 0xffffffff: all) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
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

SEC("tc")
int gc_loss(struct __sk_buff *skb)
{
	__u32 k = 0, *threshold = bpf_map_lookup_elem(&loss_cfg, &k);
	__u64 *seen, *dropped;

	if (skb->protocol != bpf_htons(0x0800) && skb->protocol != bpf_htons(0x86DD))
		return TC_ACT_UNSPEC;
	seen = bpf_map_lookup_elem(&loss_stats, &k);
	if (seen)
		*seen += 1;
	if (!threshold || bpf_get_prandom_u32() >= *threshold)
		return TC_ACT_UNSPEC;
	k = 1;
	dropped = bpf_map_lookup_elem(&loss_stats, &k);
	if (dropped)
		*dropped += 1;
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
