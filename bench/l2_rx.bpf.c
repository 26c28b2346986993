// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * l2_rx.bpf.c - L2: every data or repair packet a receiver gets, with its
 * arrival time, for LTP, NORM and PGM alike (bench/ltp.py).
 *
 * Attached at the TC ingress of a receiver's link behind the lab's loss
 * filter (prio 1, bpf/loss.bpf.c), so it sees what survived the loss, before
 * the protocol stack.  One record per packet: bpf_ktime_get_ns() and the
 * first 24 bytes of the protocol header (bench/ltp.py decodes the sequence
 * number and the repair flag from them):
 *   LTP   UDP payload starting "LT", type 1 (data)
 *   NORM  UDP to L2_NORM_PORT (bench/ltp.py NORM_PORT), first byte 0x12
 *         (version 1, NORM_DATA).  NORM 1.5.9 does not set NORM_FLAG_REPAIR
 *         on retransmitted data: bench/ltp.py tells repairs by the sender's
 *         message sequence number (bytes 2-3) instead.
 *   PGM   IP protocol 113, type 4 (ODATA) or 5 (RDATA)
 * Everything else (heartbeats, commands, SPMs, NCFs) passes unrecorded.
 * The records fill l2_rx_log in order; l2_rx_n[0] counts them, also those
 * that no longer fit (so a full log is seen, not silently cut).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define ETH_P_IP 0x0800
#define L2_NORM_PORT 7791 /* the session port; NORM sends from the next one */
#define L2_RX_MAX 32768
#define L2_HDR 24

struct rec {
	__u64 ns;
	__u8 hdr[L2_HDR];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L2_RX_MAX);
	__type(key, __u32);
	__type(value, struct rec);
} l2_rx_log SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} l2_rx_n SEC(".maps");

SEC("tc")
int l2_rx_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u8 h[L2_HDR];

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	__u32 off = sizeof(*eth) + ip->ihl * 4;
	if (ip->protocol == 17) {
		struct udphdr *u = (void *)ip + ip->ihl * 4;
		if ((void *)(u + 1) > end)
			return TC_ACT_UNSPEC;
		off += sizeof(*u);
		if (bpf_skb_load_bytes(skb, off, h, sizeof(h)))
			return TC_ACT_UNSPEC;
		int ltp = h[0] == 'L' && h[1] == 'T' && h[3] == 1;
		int norm = u->dest == bpf_htons(L2_NORM_PORT) && h[0] == 0x12;
		if (!ltp && !norm)
			return TC_ACT_UNSPEC;
	} else if (ip->protocol == 113) {
		if (bpf_skb_load_bytes(skb, off, h, sizeof(h)) || (h[4] != 4 && h[4] != 5))
			return TC_ACT_UNSPEC;
	} else {
		return TC_ACT_UNSPEC;
	}
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&l2_rx_n, &zero);
	if (!n)
		return TC_ACT_UNSPEC;
	__u32 i = (__u32)__sync_fetch_and_add(n, 1);
	struct rec *r = bpf_map_lookup_elem(&l2_rx_log, &i);
	if (r) {
		r->ns = bpf_ktime_get_ns();
		__builtin_memcpy(r->hdr, h, sizeof(h));
	}
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
