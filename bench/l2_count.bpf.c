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
 * NORM (UDP to or from L2_NORM_PORT or the next port, NORM's transmit
 * sockets; bench/ltp.py NORM_PORT):
 *   DATA / REPAIR  NORM_DATA sent for the first time / again.  NORM 1.5.9
 *                  does not set NORM_FLAG_REPAIR on retransmitted data, so
 *                  each filter keeps the highest (object, FEC payload id) it
 *                  has put on its link (norm_high): data at or below it is a
 *                  retransmission.  Exact at egress, where nothing was lost
 *                  yet; for FEC ids 5 and 2, whose payload id is a 32 bit
 *                  big-endian (block, symbol) pair.
 *   REQUEST        NORM_NACK        HB  NORM_CMD (flush, probes, repair adverts)
 * PGM (IP protocol 113):
 *   DATA  ODATA   REPAIR  RDATA   REQUEST  NAK, NNAK   HB  SPM, SPMR, POLL
 *   OTHER NCF (the source's "NAK heard", multicast down the whole tree)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define ETH_P_IP 0x0800
#define L2_NORM_PORT 7791

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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} norm_high SEC(".maps");

static __always_inline __u32 norm_data_kind(const __u8 *norm)
{
	__u32 zero = 0;
	__u64 *high = bpf_map_lookup_elem(&norm_high, &zero);
	/* object transport id (2 bytes) above the FEC payload id (4 bytes); +1
	 * so that 0 means "nothing yet" */
	__u64 key = ((__u64)norm[14] << 40 | (__u64)norm[15] << 32 | (__u64)norm[16] << 24 |
		     (__u64)norm[17] << 16 | (__u64)norm[18] << 8 | norm[19]) +
		1;

	if (!high)
		return K_DATA;
	if (key <= *high)
		return K_REPAIR;
	*high = key;
	return K_DATA;
}

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
	if (ihl < 20 || ihl > 60)
		return K_OTHER;
	if (ip->protocol == 113) {
		__u8 *pgm = (__u8 *)ip + ihl;
		if ((void *)(pgm + 5) > end)
			return K_OTHER;
		switch (pgm[4]) {
		case 4: return K_DATA;
		case 5: return K_REPAIR;
		case 8:
		case 9: return K_REQUEST;
		case 0:
		case 1:
		case 12: return K_HB;
		default: return K_OTHER;
		}
	}
	if (ip->protocol != 17)
		return K_OTHER;
	struct udphdr *udp = (void *)((__u8 *)ip + ihl);
	__u8 *norm = (__u8 *)(udp + 1);
	__u16 np = bpf_htons(L2_NORM_PORT), np1 = bpf_htons(L2_NORM_PORT + 1);
	if ((void *)(norm + 1) <= end && (udp->dest == np || udp->dest == np1 || udp->source == np1)) {
		switch (norm[0]) {
		case 0x12: return (void *)(norm + 20) <= end ? norm_data_kind(norm) : K_OTHER;
		case 0x14: return K_REQUEST;
		case 0x13: return K_HB;
		default: return K_OTHER;
		}
	}
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
