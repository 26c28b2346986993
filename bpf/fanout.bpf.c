// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fanout.bpf.c - TC egress program on lo: one trigger datagram in, one clone
 * per member out.  See fanout.h for the contract with the library.
 *
 * Per member: splice in the per-recipient bytes (room after the IP header for
 * the prepend, the tail for the append), write Ethernet + IP + UDP headers in
 * one store with checksums computed from sums the library precomputed, and
 * clone the packet out of the member's interface.  Each clone makes the
 * kernel copy the trigger's linear part (bpf_clone_redirect() unclones the
 * original), so the library splices a payload of GC_SPLICE_MIN bytes or more
 * into the trigger (write() to a pipe, splice() to the socket: kernel.c): it
 * then sits in page fragments and only the headers are copied per clone.  A
 * smaller payload is sent with send() and copied with the headers.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "fanout.h"

#define TC_ACT_UNSPEC (-1)
#define TC_ACT_OK 0
#define TC_ACT_STOLEN 4
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define NOBUFS 105
#define EMSGSIZE_ 90

/* trigger socket cookie -> index in heads/groups (written once per socket) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GC_KSOCKS);
	__type(key, __u64);
	__type(value, __u32);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, GC_KSOCKS);
	__type(key, __u32);
	__type(value, struct gc_khead);
} heads SEC(".maps");

/* per socket: an mmapable array of slots, replaced when the group outgrows it */
struct slots {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gc_kslot);
};

/* clang emits struct gc_kslot only as a forward declaration when it is reached
 * through the inner map's pointer alone; libbpf needs its size */
struct gc_kslot gc_kslot_btf __attribute__((section(".maps.btf_only"), unused));

/* write_hdr() copies the MACs as one 8-byte and one 4-byte word */
_Static_assert(__builtin_offsetof(struct gc_kslot, rt.dmac) % 8 == 0 && sizeof(struct gc_kslot) % 8 == 0 &&
		       __builtin_offsetof(struct gc_kslot, rt.smac) ==
			       __builtin_offsetof(struct gc_kslot, rt.dmac) + 6,
	       "struct gc_kslot: rt.dmac must be 8-aligned and followed by rt.smac");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, GC_KSOCKS);
	__type(key, __u32);
	__array(values, struct slots);
} groups SEC(".maps");

struct fan {
	struct __sk_buff *skb;
	struct gc_khead *head;
	void *slots;
	__u32 base, count, slen; /* chunk start, members in it, shared payload length */
	__u32 l3len;		 /* 20 or 40 */
	__u32 plen, alen;	 /* per-recipient bytes now spliced into skb */
	__u32 ip_const;		 /* IPv4: sum of the header words every copy shares */
	__u32 udp_const;	 /* protocol + source port, for the UDP checksum */
	__u32 bound_ssum;	 /* sum of head->saddr when the socket is bound */
	__u32 data_csum;	 /* head->data_csum: sum of the shared payload */
	__u16 sport;		 /* head->sport */
	__u16 check_above;	 /* head->check_above */
	__u8 bound;		 /* head->bound */
	__u64 now;
};

static __always_inline __u32 sum16(const void *p, int words)
{
	const __u16 *w = p;
	__u32 s = 0;

	for (int i = 0; i < words; i++)
		s += w[i];
	return s;
}

static __always_inline __u16 fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

static __always_inline __u32 addr_sum(const struct fan *f, const __u8 *a)
{
	return f->l3len == 20 ? sum16(a, 2) : sum16(a, 8);
}

/*
 * Route, MACs, source and MTU of a member, cached in its slot for
 * GC_KRESOLVE_NS.  tot is the length of the member's IP packet: with it
 * bpf_fib_lookup() checks the MTU the output path would use (the route's,
 * lowered by a learned path MTU: the nexthop exception) and returns it in
 * mtu_result, or BPF_FIB_LKUP_RET_FRAG_NEEDED when the packet does not fit.
 * Returns 0, or -1 when user space must send (no neighbour yet, a local
 * address, no route, an encapsulating route, needs fragmenting).
 */
static __always_inline int resolve(struct fan *f, struct gc_kslot *m, __u32 tot)
{
	struct bpf_fib_lookup fib = {};
	long rc;

	if (m->rt.ifindex && f->now - m->rt.resolved_ns < GC_KRESOLVE_NS)
		return 0;
	if (m->flags & GC_KF_LOCAL) {
		__builtin_memset(m->rt.dmac, 0, 12);
		__builtin_memcpy(m->rt.saddr, m->daddr, 16);
		m->rt.ifindex = 1; /* lo */
		m->rt.mtu = 65536;
		m->rt.dsum = m->rt.ssum = addr_sum(f, m->daddr);
		m->rt.resolved_ns = f->now;
		return 0;
	}
	fib.family = f->head->family == 4 ? 2 /* AF_INET */ : 10 /* AF_INET6 */;
	fib.l4_protocol = 17;
	fib.tot_len = (__u16)tot;
	if (fib.family == 2)
		fib.ipv4_dst = *(__u32 *)m->daddr;
	else
		__builtin_memcpy(fib.ipv6_dst, m->daddr, 16);
	/* looked up as if arriving on lo (that is why the library turns on
	 * lo's forwarding): the output-side lookup would pin the route to lo */
	fib.ifindex = 1;
	rc = bpf_fib_lookup(f->skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SRC);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS) {
		m->rt.ifindex = 0; /* resolve again next time */
		return -1;
	}
	m->rt.ifindex = fib.ifindex;
	m->rt.mtu = fib.mtu_result ? fib.mtu_result : 1280; /* 0 never comes with tot_len: be safe */
	m->rt.mtu_ns = f->now;
	__builtin_memcpy(m->rt.dmac, fib.dmac, 6);
	__builtin_memcpy(m->rt.smac, fib.smac, 6);
	if (fib.family == 2)
		*(__u32 *)m->rt.saddr = fib.ipv4_src;
	else
		__builtin_memcpy(m->rt.saddr, fib.ipv6_src, 16);
	m->rt.dsum = addr_sum(f, m->daddr);
	m->rt.ssum = addr_sum(f, m->rt.saddr);
	m->rt.resolved_ns = f->now;
	return 0;
}

/*
 * Whether a packet of tot bytes still fits member m's path.  The cached MTU
 * may be up to GC_KRESOLVE_NS old, and a path MTU learned since (an ICMP
 * "fragmentation needed" / "packet too big" answering an earlier copy or a
 * sendto()) lowers it.  For a packet above head->check_above (1280, or a
 * higher net.ipv4.route.min_pmtu) such an exception is seen within
 * GC_KMTU_NS, by a route look-up without the neighbour part, once per member
 * per GC_KMTU_NS.  Smaller packets skip that look-up, which costs as much as
 * a third of a copy when sends are paced: no IPv6 path MTU is below 1280, and
 * an IPv4 one below it (down to min_pmtu) is seen by the next resolve(),
 * within GC_KRESOLVE_NS.
 */
static __always_inline int fits_now(struct fan *f, struct gc_kslot *m, __u32 tot)
{
	struct bpf_fib_lookup fib = {};
	long rc;

	if (tot <= f->check_above || (m->flags & GC_KF_LOCAL) || f->now - m->rt.mtu_ns < GC_KMTU_NS)
		return 1;
	m->rt.mtu_ns = f->now;
	fib.family = f->head->family == 4 ? 2 : 10;
	fib.l4_protocol = 17;
	fib.tot_len = (__u16)tot;
	if (fib.family == 2)
		fib.ipv4_dst = *(__u32 *)m->daddr;
	else
		__builtin_memcpy(fib.ipv6_dst, m->daddr, 16);
	fib.ifindex = 1;
	rc = bpf_fib_lookup(f->skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS && fib.ifindex == m->rt.ifindex) {
		if (fib.mtu_result)
			m->rt.mtu = fib.mtu_result;
		return 1;
	}
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED && fib.mtu_result)
		m->rt.mtu = fib.mtu_result;
	else
		m->rt.ifindex = 0; /* the route changed: resolve again */
	return 0;
}

/*
 * Whether member m can be sent by the kernel: its route resolved and fresh,
 * and a packet of tot bytes fits its path (resolve(), fits_now()).  The
 * common case, a cached route and a small packet, is decided here; the rest
 * goes to route_slow(), a function of its own, so that the look-up structures
 * it zeroes are not set up for every member.
 */
static __noinline int route_slow(struct fan *f, struct gc_kslot *m, __u32 tot)
{
	return !resolve(f, m, tot) && tot <= m->rt.mtu && fits_now(f, m, tot);
}

static __always_inline int route_ok(struct fan *f, struct gc_kslot *m, __u32 tot)
{
	if (m->rt.ifindex && f->now - m->rt.resolved_ns < GC_KRESOLVE_NS && tot <= m->rt.mtu &&
	    (tot <= f->check_above || (m->flags & GC_KF_LOCAL)))
		return 1;
	return route_slow(f, m, tot);
}

/* Make the bytes between the IP header and the payload 8 + plen long, and
 * the bytes after it alen long. */
static __always_inline int splice_room(struct fan *f, __u32 plen, __u32 alen)
{
	if (plen != f->plen) {
		if (bpf_skb_adjust_room(f->skb, (__s32)plen - (__s32)f->plen, BPF_ADJ_ROOM_NET, 0))
			return -1;
		f->plen = plen;
	}
	if (alen != f->alen) {
		if (bpf_skb_change_tail(f->skb, ETH_HLEN + f->l3len + 8 + plen + f->slen + alen, 0))
			return -1;
		f->alen = alen;
	}
	return 0;
}

/*
 * Ethernet + IP + UDP headers of member m, written in place.  After a clone
 * the trigger's head is a private copy (bpf_clone_redirect() uncloned it),
 * so the program writes it directly instead of through bpf_skb_store_bytes().
 * What every copy of one trigger shares (IP version, TOS, TTL, ID, fragment
 * bits) was written once by gc_fanout(); here go the MACs, the lengths, the
 * addresses, the ports and the two checksums, which start from sums made
 * once per trigger (f->ip_const, f->udp_const) and per route (rt.dsum,
 * rt.ssum).  l3len is a constant (20 or 40) in each inlined copy.
 * The MACs go in two stores (8 + 4 bytes: rt.dmac and rt.smac are adjacent,
 * 8-aligned in the slot), the addresses in 4-byte words: packet stores need
 * no alignment on the architectures BPF runs on without strict alignment,
 * and the byte-wise copies were 24 of about 150 instructions per member.
 * Returns the header length, or 0 if the headers are not in the linear part
 * (never for a trigger the library made).
 */
static __always_inline __u32 write_hdr(struct fan *f, struct gc_kslot *m, const __u32 l3len,
				       __u32 l4len, __u32 dsum)
{
	struct __sk_buff *skb = f->skb;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	const __u32 *saddr = f->bound ? (const __u32 *)f->head->saddr : (const __u32 *)m->rt.saddr;
	__u32 asum = m->rt.dsum + (f->bound ? f->bound_ssum : m->rt.ssum);
	__u16 len = bpf_htons(l4len), check;
	struct udphdr *uh;

	if (d + ETH_HLEN + l3len + 8 > end)
		return 0;
	*(__u64 *)d = *(const __u64 *)m->rt.dmac;	      /* dmac, smac[0..1] */
	*(__u32 *)(d + 8) = *(const __u32 *)(m->rt.smac + 2); /* smac[2..5] */
	if (l3len == 20) {
		struct iphdr *ip = (void *)(d + ETH_HLEN);
		__u16 tot = bpf_htons(20 + l4len);

		ip->tot_len = tot;
		ip->saddr = saddr[0];
		ip->daddr = *(const __u32 *)m->daddr;
		ip->check = ~fold(f->ip_const + tot + asum);
	} else {
		struct ipv6hdr *ip6 = (void *)(d + ETH_HLEN);
		const __u32 *da = (const __u32 *)m->daddr;

		ip6->payload_len = len;
		ip6->saddr.in6_u.u6_addr32[0] = saddr[0];
		ip6->saddr.in6_u.u6_addr32[1] = saddr[1];
		ip6->saddr.in6_u.u6_addr32[2] = saddr[2];
		ip6->saddr.in6_u.u6_addr32[3] = saddr[3];
		ip6->daddr.in6_u.u6_addr32[0] = da[0];
		ip6->daddr.in6_u.u6_addr32[1] = da[1];
		ip6->daddr.in6_u.u6_addr32[2] = da[2];
		ip6->daddr.in6_u.u6_addr32[3] = da[3];
	}
	uh = (void *)(d + ETH_HLEN + l3len);
	uh->source = f->sport;
	uh->dest = m->dport;
	uh->len = len;
	/* pseudo header (addresses, protocol, length) + UDP header (its length
	 * again) + data */
	check = ~fold(f->udp_const + asum + 2 * (__u32)len + m->dport + dsum);
	uh->check = check ? check : 0xffff;
	return ETH_HLEN + l3len + 8;
}

static long one_member(__u32 i, void *ctx)
{
	struct fan *f = ctx;
	__u32 idx = f->base + i, l4len, plen, alen, dsum, hlen;
	struct gc_kslot *m = bpf_map_lookup_elem(f->slots, &idx);
	long r;

	if (!m)
		return 1;
	if (m->flags & GC_KF_SKIP)
		return 0;
	plen = m->plen;
	alen = m->alen;
	if (plen > GC_KDATA || alen > GC_KDATA) {
		m->result = GC_KRES_USER;
		return 0;
	}
	l4len = 8 + plen + f->slen + alen;
	/* too big for the member's route or path MTU: the copy would carry DF
	 * (or be refused); the user path fragments or fails as sendto() does */
	if (!route_ok(f, m, f->l3len + l4len)) {
		m->result = GC_KRES_USER;
		return 0;
	}
	if (splice_room(f, plen, alen)) {
		m->result = GC_KRES_USER; /* e.g. above the 16 kB BPF may grow a packet to */
		return 0;
	}
	dsum = plen || alen ? m->data_csum : f->data_csum;
	hlen = f->l3len == 20 ? write_hdr(f, m, 20, l4len, dsum) : write_hdr(f, m, 40, l4len, dsum);
	if (!hlen)
		goto nobufs;
	/* plen, alen <= GC_KDATA (checked above), so both reads stay inside m->data */
	if (plen && bpf_skb_store_bytes(f->skb, hlen, m->data, plen, 0))
		goto nobufs;
	if (alen && bpf_skb_store_bytes(f->skb, hlen + plen + f->slen, m->data + plen, alen, 0))
		goto nobufs;
	/* the trigger carries GC_KCLONE_MARK (gc_fanout()), and so each clone */
	r = bpf_clone_redirect(f->skb, m->rt.ifindex, 0);
	m->result = r < 0 ? (__s32)r : r > 0 ? -NOBUFS : 0; /* > 0: NET_XMIT_DROP/CN */
	return 0;
nobufs:
	m->result = -NOBUFS;
	return 0;
}

/*
 * The header fields every copy of this trigger shares, written once into the
 * trigger (clones copy them along): the user socket's TOS and TTL (IPv6:
 * traffic class, flow label 0, hop limit); the trigger's own IPv4 ID and
 * fragment bits stay.  Their checksum sums go to f->ip_const / udp_const.
 */
static __always_inline int shared_fields(struct fan *f)
{
	struct __sk_buff *skb = f->skb;
	__u8 *d = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct gc_khead *h = f->head;

	f->bound = h->bound;
	if (h->bound)
		f->bound_ssum = addr_sum(f, h->saddr);
	f->sport = h->sport;
	f->check_above = h->check_above;
	f->data_csum = h->data_csum;
	f->udp_const = bpf_htons(17) + h->sport;
	if (f->l3len == 20) {
		struct iphdr *ip = (void *)(d + ETH_HLEN);

		if (d + ETH_HLEN + 20 > end)
			return -1;
		ip->tos = h->tos;
		ip->ttl = h->ttl;
		/* words 0 (version, IHL, TOS), 2 (ID), 3 (fragment), 4 (TTL,
		 * protocol): all but the length, checksum and addresses */
		f->ip_const = *(__u16 *)ip + ip->id + ip->frag_off + *(__u16 *)&ip->ttl;
	} else {
		struct ipv6hdr *ip6 = (void *)(d + ETH_HLEN);

		if (d + ETH_HLEN + 40 > end)
			return -1;
		*(__u32 *)ip6 = bpf_htonl(0x60000000 | ((__u32)h->tos << 20));
		ip6->hop_limit = h->ttl;
	}
	return 0;
}

SEC("tc")
int gc_fanout(struct __sk_buff *skb)
{
	__u64 cookie;
	__u32 *sidx, l3len;
	struct fan f = {};
	__u8 ip[4];

	if (skb->mark == GC_KCLONE_MARK) { /* one of our clones: never fan out again */
		skb->mark = 0;
		return TC_ACT_OK;
	}
	cookie = bpf_get_socket_cookie(skb);
	sidx = bpf_map_lookup_elem(&socks, &cookie);
	if (!sidx)
		return TC_ACT_UNSPEC; /* not ours: the next filter decides */
	f.head = bpf_map_lookup_elem(&heads, sidx);
	f.slots = bpf_map_lookup_elem(&groups, sidx);
	if (!f.head || !f.slots)
		return TC_ACT_UNSPEC;
	/* only a whole IPv4 or IPv6 UDP datagram is a trigger; anything else
	 * (a fragment, if lo's MTU was lowered) is dropped and its members
	 * stay PENDING, so user space sends them */
	l3len = skb->protocol == bpf_htons(ETH_P_IP) ? 20 : 40;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, ip, 4))
		return TC_ACT_STOLEN;
	if (l3len == 20) {
		__u8 proto;
		__u16 frag;

		if (ip[0] != 0x45 || bpf_skb_load_bytes(skb, ETH_HLEN + 9, &proto, 1) ||
		    bpf_skb_load_bytes(skb, ETH_HLEN + 6, &frag, 2) || proto != 17 ||
		    (bpf_ntohs(frag) & 0x3fff))
			return TC_ACT_STOLEN;
	} else {
		__u8 nexthdr;

		if ((ip[0] >> 4) != 6 || bpf_skb_load_bytes(skb, ETH_HLEN + 6, &nexthdr, 1) ||
		    nexthdr != 17)
			return TC_ACT_STOLEN;
	}
	f.skb = skb;
	f.l3len = l3len;
	f.slen = skb->len - ETH_HLEN - l3len - 8;
	/* A plain read-modify-write is enough: the library sends a socket's
	 * triggers one after another under the socket's lock (group.c), and
	 * each runs this program to the end inside its send() before the
	 * next trigger exists. */
	f.base = f.head->next_chunk++ * GC_KCHUNK;
	if (f.base >= f.head->n)
		return TC_ACT_STOLEN;
	f.count = f.head->n - f.base < GC_KCHUNK ? f.head->n - f.base : GC_KCHUNK;
	if (shared_fields(&f))
		return TC_ACT_STOLEN;
	f.now = bpf_ktime_get_coarse_ns();
	skb->mark = GC_KCLONE_MARK; /* copied into every clone: the hook lets them pass */
	bpf_loop(f.count, one_member, &f, 0);
	return TC_ACT_STOLEN; /* the trigger itself goes nowhere */
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
