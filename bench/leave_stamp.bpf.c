// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * leave_stamp.bpf.c - P2 of bench/dccp.py: the time each packet of the
 * measured flow crosses a TC hook, the egress of the sender's veth (it
 * leaves the sender) and the ingress of the receiver's (it arrives).  Each
 * attached filter has its own map.
 *
 * stamps: packet number -> bpf_ktime_get_ns() (CLOCK_MONOTONIC; the driver
 * converts to CLOCK_REALTIME), the first time only, so a retransmission
 * does not count.  IPv4 packets to port STAMP_PORT only (the measured
 * flow; the bulk TCP flow beside it has another port):
 *   UDP        the payload's first 8 bytes, little endian (bench/dccp_traffic.c)
 *   DCCP       the same, of Data and DataAck packets (payload at Data Offset)
 *   TCP        records of STAMP_TCP_SIZE bytes numbered from 0 after the
 *              SYN's sequence number (isn): a segment stamps every record
 *              whose first byte it carries
 * STAMP_PORT and STAMP_TCP_SIZE come from the compiler (-D).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_UNSPEC (-1)
#define ETH_P_IP 0x0800
#define ETH_HLEN 14

#ifndef STAMP_PORT
#error "-DSTAMP_PORT=<the measured flow's destination port>"
#endif
#ifndef STAMP_TCP_SIZE
#error "-DSTAMP_TCP_SIZE=<bytes per TCP record>"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} stamps SEC(".maps");

/* the TCP flow's initial sequence number + 1 (0: no SYN seen yet) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tcp_isn SEC(".maps");

static __always_inline void stamp(__u64 seq, __u64 now)
{
	bpf_map_update_elem(&stamps, &seq, &now, BPF_NOEXIST);
}

static __always_inline void stamp_payload(struct __sk_buff *skb, __u32 off, __u64 now)
{
	__u64 seq;
	if (bpf_skb_load_bytes(skb, off, &seq, sizeof(seq)) == 0)
		stamp(seq, now); /* little endian on the wire, as on x86 */
}

static __always_inline void stamp_tcp(struct __sk_buff *skb, __u32 l4, __u32 ip_len, __u32 ihl, __u64 now)
{
	__u8 h[14];
	__u32 zero = 0;
	if (bpf_skb_load_bytes(skb, l4, h, sizeof(h)))
		return;
	__u32 seq = (__u32)h[4] << 24 | (__u32)h[5] << 16 | (__u32)h[6] << 8 | h[7];
	__u64 *isn = bpf_map_lookup_elem(&tcp_isn, &zero);
	if (!isn)
		return;
	if (h[13] & 2) { /* SYN */
		*isn = (__u64)seq + 1;
		return;
	}
	__u32 doff = (h[12] >> 4) * 4;
	if (!*isn || ip_len < ihl + doff)
		return;
	__u32 plen = ip_len - ihl - doff;
	__u32 rel = seq - (__u32)*isn - 1; /* modulo 2^32, as the sequence space */
	__u64 k = ((__u64)rel + STAMP_TCP_SIZE - 1) / STAMP_TCP_SIZE;
	for (int i = 0; i < 64; i++, k++) { /* no GSO on these links: a few records at most */
		if (k * STAMP_TCP_SIZE >= (__u64)rel + plen)
			break;
		stamp(k, now);
	}
}

SEC("tc")
int leave_stamp(struct __sk_buff *skb)
{
	__u64 now = bpf_ktime_get_ns();
	__u8 ip[20];
	if (skb->protocol != bpf_htons(ETH_P_IP) || bpf_skb_load_bytes(skb, ETH_HLEN, ip, sizeof(ip)))
		return TC_ACT_UNSPEC;
	__u32 ihl = (ip[0] & 15) * 4, ip_len = (__u32)ip[2] << 8 | ip[3];
	__u32 l4 = ETH_HLEN + ihl;
	__u8 ports[4];
	if (ihl < 20 || bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)))
		return TC_ACT_UNSPEC;
	if (((__u32)ports[2] << 8 | ports[3]) != STAMP_PORT)
		return TC_ACT_UNSPEC;
	switch (ip[9]) {
	case 17: stamp_payload(skb, l4 + 8, now); break;
	case 33: {
		__u8 d[9]; /* Data Offset (byte 4), Type (byte 8, bits 1-4) */
		if (bpf_skb_load_bytes(skb, l4, d, sizeof(d)) == 0 &&
		    (((d[8] >> 1) & 15) == 2 || ((d[8] >> 1) & 15) == 4))
			stamp_payload(skb, l4 + (__u32)d[4] * 4, now);
		break;
	}
	case 6: stamp_tcp(skb, l4, ip_len, ihl, now); break;
	default: break;
	}
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
