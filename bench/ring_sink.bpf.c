/* SPDX-License-Identifier: MIT */
/*
 * ring_sink.bpf.c - the P1 receiver (bench/ring.py): a TC ingress program on
 * the receiving veth of the lab that drops IPv4 UDP datagrams as they arrive
 * and passes everything else (ARP, and in the DCCP pass of ring.py UDP to
 * ports 6511, DCCP-UDP to the gc_dccp receiver, which must read the packets
 * to acknowledge them, and 6512, the UDP reader that the UDP methods of that
 * pass send to, so that they meet the same receive path).  The paper measured senders against an
 * emulated network card; this keeps the receiver's work per packet small and
 * the same for every method.  (XDP on veth would copy every packet into its
 * page pool first: UDP skbs lack XDP's headroom.)  The veth counts the
 * datagrams.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>

#define SEC(n) __attribute__((section(n), used))

SEC("tc")
int gc_p1_sink(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != __builtin_bswap16(ETH_P_IP))
		return TC_ACT_OK;
	if (ip->protocol != IPPROTO_UDP)
		return TC_ACT_OK;
	struct udphdr *udp = (void *)ip + ip->ihl * 4;
	if (ip->ihl >= 5 && (void *)(udp + 1) <= end &&
	    (udp->dest == __builtin_bswap16(6511) || udp->dest == __builtin_bswap16(6512)))
		return TC_ACT_OK; /* RFC 6773 DCCP-UDP, and the UDP reader of the DCCP pass */
	return TC_ACT_SHOT;
}

char _license[] SEC("license") = "GPL";
