// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * l2_count.bpf.c - L2: what crosses each link, by kind, counted at the TC
 * egress of both ends of every veth (bench/ltp.py): each end counts what it
 * puts on the link, so a link's two directions are counted apart, before
 * any loss at the receiving end.  Each attached filter has its own maps.
 *
 * Kinds (IPv4 only; packets and bytes of the whole IP packet):
 *   DATA     LTP data           REPAIR  LTP data with the repair flag (multicast)
 *   DMCAST   IPIP with option 139 (an LTP repair on its way to a turning point)
 *   REQUEST  UDP with option 138, or an LTP NAK without it (escalated)
 *   HB       LTP heartbeat      OTHER   anything else IPv4
 * The kinds of NORM and PGM are to come with their benchmark.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define ETH_P_IP 0x0800

enum { K_DATA, K_REPAIR, K_DMCAST, K_REQUEST, K_HB, K_OTHER, K_N };

struct count {
	__u64 packets, bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, K_N);
	__type(key, __u32);
	__type(value, struct count);
} l2_count SEC(".maps");

static __always_inline __u32 kind(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return K_OTHER;
	__u32 ihl = ip->ihl * 4;
	__u8 *opt = (__u8 *)(ip + 1);
	if (ihl > 20 && (void *)(opt + 1) <= end) {
		if (ip->protocol == 4 && opt[0] == 139)
			return K_DMCAST;
		if (ip->protocol == 17 && opt[0] == 138)
			return K_REQUEST;
	}
	if (ip->protocol != 17 || ihl < 20 || ihl > 60)
		return K_OTHER;
	__u8 *ltp = (__u8 *)ip + ihl + 8; /* UDP header, then the LTP header */
	if ((void *)(ltp + 18) > end || ltp[0] != 'L' || ltp[1] != 'T')
		return K_OTHER;
	if (ltp[3] == 2)
		return K_HB;
	if (ltp[3] == 3)
		return K_REQUEST;
	if (ltp[3] == 1)
		return ltp[17] & 2 ? K_REPAIR : K_DATA; /* flags, low byte */
	return K_OTHER;
}

SEC("tc")
int l2_count_egress(struct __sk_buff *skb)
{
	__u32 k = kind(skb);
	struct count *c = bpf_map_lookup_elem(&l2_count, &k);

	if (c) {
		c->packets++;
		c->bytes += skb->len - sizeof(struct ethhdr);
	}
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
