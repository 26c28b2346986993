// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * lms.bpf.c - LMS-FWD: the router half of Light-weight Multicast Services
 * (Papadopoulos' thesis, ch. 6.4) as a TC ingress program on each interface
 * of a multicast router, beside the kernel's own multicast forwarding.
 *
 * Requests are multicast to the group G (as in the thesis: the requester
 * "multicasts a request") with option 138.  Per (S,G) from lms_routes:
 *  - from the replier link: out the parent (upstream) interface, unchanged;
 *  - from the parent: turned above already, down the replier link unchanged
 *    (an unmarked one was not turned above: dropped);
 *  - from another downstream interface: this is the turning point; write
 *    tpif (ingress ifindex) and tpaddr (our address there), send it down the
 *    replier link.  With no replier below (replier == parent) it goes up,
 *    and a router above turns it.
 * One copy out one interface: a request is never handed to the kernel's
 * multicast forwarding, so it cannot become a flood.
 *
 * Provisional turning points (bpf/lms.h; not in the thesis, lmsd
 * --no-provisional turns them off): a request going up unturned is marked by
 * the first router that sends it up (tpif | 0x8000, its address there), kept
 * by the routers above and overwritten by a real turning point, so that the
 * source can answer it with a dmcast down that one link instead of a
 * multicast to the whole group.  Forgery: a turned mark from below is always
 * dropped (drop_premarked); a provisional one only over a link lmsd found to
 * have routers on it (GC_LMS_IF_ROUTERS), else drop_forged_mark, and naming
 * an address in a subnet routed through a router on that link (lms_below),
 * else drop_mark_not_below; from the parent it is drop_upstream (not turned
 * above).
 *
 * dmcasts are unicast IPv4, protocol 4 (IPIP), option 139, addressed to the
 * turning point.  Accepted only when the sender is the replier the map names
 * (address and arrival interface) or S through the parent, and the named
 * interface is downstream for (S,G); then the outer header is stripped and
 * the inner packet (to G) is multicast out that interface only.
 *
 * The LMS option is found anywhere among the IPv4 options, as a router
 * walks them (RFC 791): END ends the area, NOP is one byte, every other
 * option has a length byte of at least 2 that stays inside the header.  A
 * packet with an LMS option is dropped and counted when any option is
 * malformed, when the LMS option's length is not 16 (drop_bad_len), or when
 * it has two (drop_two_lms).  A malformed area where no LMS option shows
 * before the fault is not ours: the kernel drops it (ip_options_compile()).
 * Options are copied into fragments: a request or dmcast that is a fragment
 * is dropped (drop_fragment).
 *
 * A dmcast's inner packet must be what the source multicast, whole: IPv4 to
 * G from S (the option's src: routers below forward it on S's (S,G) tree and
 * source-specific receivers accept only S; drop_inner_src), UDP
 * (drop_inner_proto: LMS carries datagrams), a correct header checksum
 * (drop_inner_csum: it is forwarded, not received, here) and no fragment.
 *
 * Anything else passes untouched (TC_ACT_OK).  Malformed LMS packets are
 * dropped and counted by reason (lms_stats).  TTLs are decremented as
 * forwarding does (the inner one for a dmcast); TTL <= 1 is dropped.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "lms.h"
#include "lmsfwd.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define IPPROTO_IPIP_ 4
#define IPPROTO_UDP_ 17
#define IP_OPTS 20     /* where the options start in the IPv4 header */
#define IP_MAX_OPTS 40 /* IHL 15: 60 bytes of header, 40 of options */
#define OPTS_BUF 64    /* the walk's buffer: indexes are masked with OPTS_BUF - 1 */
#define IP_FRAG 0x3fff /* more fragments, fragment offset */

/* Provisional turning points (bpf/lms.h); lmsd --no-provisional sets 0 before
 * loading: the thesis's forwarding, where any mark from below is forged. */
const volatile __u8 gc_lms_provisional = 1;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GC_LMS_MAX_ROUTES);
	__type(key, struct gc_lms_sg);
	__type(value, struct gc_lms_route);
} lms_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GC_LMS_MAX_DOWN);
	__type(key, struct gc_lms_down);
	__type(value, __u8);
} lms_down SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GC_LMS_MAX_IFS);
	__type(key, __u32); /* ifindex */
	__type(value, struct gc_lms_if);
} lms_ifs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GC_LMS_MAX_IFS);
	__type(key, __u32);   /* one of this router's addresses (network order) */
	__type(value, __u32); /* its ifindex */
} lms_local SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, GC_LMS_MAX_BELOW);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct gc_lms_below);
	__type(value, __u8); /* 1: only the keys matter */
} lms_below SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, GC_LMS_MAX_STAT_IFS);
	__type(key, __u32); /* the ifindex the packet arrived on */
	__type(value, struct gc_lms_counts);
} lms_stats SEC(".maps");

/* The ifindex the packet being handled arrived on, for count() (set once
 * per packet: reading skb->ifindex deep in the inlined code lets the
 * compiler keep an offset context pointer, which the verifier refuses). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lms_in SEC(".maps");

/* The first count of an interface starts from these zeros. */
static const struct gc_lms_counts zero_counts;

/* Count what (enum gc_lms_stat) for the interface the packet arrived on. */
static __always_inline void count(__u32 what)
{
	__u32 zero = 0, *in = bpf_map_lookup_elem(&lms_in, &zero), ifindex;
	struct gc_lms_counts *c;

	if (!in)
		return;
	ifindex = *in;
	c = bpf_map_lookup_elem(&lms_stats, &ifindex);
	if (!c) {
		bpf_map_update_elem(&lms_stats, &ifindex, &zero_counts, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&lms_stats, &ifindex);
	}
	/* what's range is the compiler's to know but the verifier's to see:
	 * keep the check (the compiler drops it for drop(-2 - at)) */
	asm volatile("" : "+r"(what));
	if (c && what < GC_LMS_NSTATS)
		c->n[what] += 1;
}

static __always_inline int drop(__u32 why)
{
	count(why);
	return TC_ACT_SHOT;
}

/* Decrement the TTL of the IPv4 header at `nh`, fixing its checksum.
 * Returns -1 when the packet must not be forwarded (TTL <= 1). */
static __always_inline int dec_ttl(struct __sk_buff *skb, __u32 nh)
{
	__u8 tp[2]; /* ttl, protocol: one 16-bit word of the checksum */
	__u16 old, new;

	if (bpf_skb_load_bytes(skb, nh + 8, tp, 2) || tp[0] <= 1)
		return -1;
	__builtin_memcpy(&old, tp, 2);
	tp[0]--;
	__builtin_memcpy(&new, tp, 2);
	if (bpf_l3_csum_replace(skb, nh + 10, old, new, 2))
		return -1;
	return bpf_skb_store_bytes(skb, nh + 8, tp, 1, 0) ? -1 : 0;
}

/* Ethernet header for a multicast to `group` leaving `out`, and the redirect. */
static __always_inline int send_mcast(struct __sk_buff *skb, __u32 out, __u32 group, __u32 stat)
{
	struct gc_lms_if *oif = bpf_map_lookup_elem(&lms_ifs, &out);
	__u32 g = bpf_ntohl(group);
	__u8 eth[12] = { 0x01, 0x00, 0x5e, (g >> 16) & 0x7f, (g >> 8) & 0xff, g & 0xff };

	if (!oif)
		return drop(GC_LMS_DROP_BAD_IF);
	__builtin_memcpy(eth + 6, oif->mac, 6);
	if (bpf_skb_store_bytes(skb, 0, eth, sizeof(eth), 0))
		return drop(GC_LMS_DROP_TRUNCATED);
	count(stat);
	return bpf_redirect(out, 0);
}

/* Bytes swapped within each 16-bit half. */
static __always_inline __u32 swap16s(__u32 x)
{
	return ((x & 0x00ff00ff) << 8) | ((x >> 8) & 0x00ff00ff);
}

/* Write tpif/tpaddr into the request's option at `off` (from the start of
 * the IPv4 header), fixing the header checksum.  At an odd offset each
 * 16-bit value straddles two checksum words: its bytes count swapped. */
static __always_inline int mark(struct __sk_buff *skb, __u32 off, struct gc_lms_opt *opt,
				__u16 tpif, __u32 tpaddr)
{
	__u32 csum = ETH_HLEN + offsetof(struct iphdr, check);
	__u32 at = ETH_HLEN + off + offsetof(struct gc_lms_opt, tpif);
	__u32 from_if = opt->tpif, to_if = tpif, from_addr = opt->tpaddr, to_addr = tpaddr;

	if (off & 1) {
		from_if = swap16s(from_if);
		to_if = swap16s(to_if);
		from_addr = swap16s(from_addr);
		to_addr = swap16s(to_addr);
	}
	if (bpf_l3_csum_replace(skb, csum, from_if, to_if, 2) ||
	    bpf_l3_csum_replace(skb, csum, from_addr, to_addr, 4) ||
	    bpf_skb_store_bytes(skb, at, &tpif, 2, 0) || bpf_skb_store_bytes(skb, at + 2, &tpaddr, 4, 0))
		return -1;
	return 0;
}

static __always_inline int request(struct __sk_buff *skb, struct iphdr *ip, __u32 off,
				   struct gc_lms_opt *opt)
{
	struct gc_lms_sg sg = { opt->src, opt->group };
	__u32 in = skb->ifindex;
	struct gc_lms_route *r;
	struct gc_lms_if *inif;
	/* Bit 15 is the provisional flag only where provisional marking is on;
	 * in the thesis's forwarding tpif is the whole 16-bit ifindex. */
	int provisional = gc_lms_provisional && opt->tpaddr &&
		(bpf_ntohs(opt->tpif) & GC_LMS_TPIF_PROVISIONAL);

	if (ip->daddr != opt->group)
		return drop(GC_LMS_DROP_BAD_INNER);
	r = bpf_map_lookup_elem(&lms_routes, &sg);
	if (!r)
		return drop(GC_LMS_DROP_NO_STATE);
	if (in == r->parent) {
		/* Turned above: down the replier link as it is.  An unmarked or
		 * provisionally marked one was not turned (a host on the upstream
		 * link: the router above handles it), and with no replier below
		 * there is nowhere to go. */
		if (!opt->tpaddr || provisional || r->replier == r->parent)
			return drop(GC_LMS_DROP_UPSTREAM);
		if (dec_ttl(skb, ETH_HLEN))
			return drop(GC_LMS_DROP_TTL);
		return send_mcast(skb, r->replier, opt->group, GC_LMS_REQ_DOWN);
	}
	/* From below.  Only a turning point marks a request, and turning points
	 * are above us: a turned request from below is forged.  A provisional
	 * mark is a router's below us, so it comes only over a link with routers
	 * on it, naming an address that lies through them; on a host's link, or
	 * naming anything else (the sender itself, a third party), it is forged. */
	if (opt->tpaddr && !provisional)
		return drop(GC_LMS_DROP_PREMARKED);
	inif = bpf_map_lookup_elem(&lms_ifs, &in);
	if (provisional) {
		/* ... and names an address reached through a router there. */
		struct gc_lms_below b = { 64, in, opt->tpaddr };

		if (!inif || !(inif->flags & GC_LMS_IF_ROUTERS))
			return drop(GC_LMS_DROP_FORGED_MARK);
		if (!bpf_map_lookup_elem(&lms_below, &b))
			return drop(GC_LMS_DROP_MARK_NOT_BELOW);
	}
	if (in != r->replier) {
		struct gc_lms_down d = { opt->src, opt->group, in };

		if (!bpf_map_lookup_elem(&lms_down, &d))
			return drop(GC_LMS_DROP_BAD_IF);
	}
	if (dec_ttl(skb, ETH_HLEN))
		return drop(GC_LMS_DROP_TTL);
	/* tpif has 15 bits for the ifindex where bit 15 is the provisional
	 * flag, 16 in the thesis's forwarding. */
	if (in == r->replier || r->replier == r->parent) {
		/* Up, not turned.  The first router to send it up marks it
		 * provisionally (where it came in, our address there); the ones
		 * above keep that mark. */
		if (gc_lms_provisional && !opt->tpaddr && inif && inif->addr && in <= GC_LMS_TPIF_MASK) {
			if (mark(skb, off, opt, bpf_htons((__u16)(in | GC_LMS_TPIF_PROVISIONAL)),
				 inif->addr))
				return drop(GC_LMS_DROP_TRUNCATED);
			count(GC_LMS_REQ_PROVISIONAL);
		}
		return send_mcast(skb, r->parent, opt->group, GC_LMS_REQ_UP);
	}

	/* The turning point: tpif = where it came in, tpaddr = our address there
	 * (over a provisional mark from below: the real turning point wins). */
	if (!inif || !inif->addr || in > (gc_lms_provisional ? GC_LMS_TPIF_MASK : 0xffff))
		return drop(GC_LMS_DROP_BAD_IF);
	if (mark(skb, off, opt, bpf_htons((__u16)in), inif->addr))
		return drop(GC_LMS_DROP_TRUNCATED);
	return send_mcast(skb, r->replier, opt->group, GC_LMS_REQ_TURNED);
}

/* 0 when the IPv4 header `h` (whose first 20 bytes are at `at` in the
 * packet) has a correct checksum. */
static __always_inline int bad_csum(struct __sk_buff *skb, struct iphdr *h, __u32 at)
{
	__u32 w[5];
	__u64 s;

	__builtin_memcpy(w, h, sizeof(w));
	s = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];
	if (h->ihl > 5) {
		__u8 more[IP_MAX_OPTS] = {};
		__u32 n = (h->ihl * 4 - 20) & 0x3f;

		if (!n || n > IP_MAX_OPTS || bpf_skb_load_bytes(skb, at + 20, more, n))
			return 1;
		s += (__u32)bpf_csum_diff(0, 0, (void *)more, n, 0);
	}
	/* Ones' complement sum of network-order words, in either byte order:
	 * correct when it folds to 0xffff. */
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s != 0xffff;
}

static __always_inline int dmcast(struct __sk_buff *skb, struct iphdr *ip, __u32 hlen,
				  struct gc_lms_opt *opt)
{
	struct gc_lms_sg sg = { opt->src, opt->group };
	__u32 in = skb->ifindex, tpif = bpf_ntohs(opt->tpif);
	struct gc_lms_route *r;
	struct gc_lms_if *tif;
	struct iphdr inner;

	if (!bpf_map_lookup_elem(&lms_local, &ip->daddr))
		return TC_ACT_OK; /* not for us: a transit unicast, the kernel routes it */
	/* Option 139 is copied into every fragment: only a whole packet is a dmcast. */
	if (ip->frag_off & bpf_htons(IP_FRAG))
		return drop(GC_LMS_DROP_FRAGMENT);
	if (ip->protocol != IPPROTO_IPIP_)
		return drop(GC_LMS_DROP_BAD_INNER);
	r = bpf_map_lookup_elem(&lms_routes, &sg);
	if (!r)
		return drop(GC_LMS_DROP_NO_STATE);
	/* Only the named replier, or S itself from upstream, may direct a multicast. */
	if (!((ip->saddr == r->replier_addr && in == r->replier) ||
	      (ip->saddr == opt->src && in == r->parent)))
		return drop(GC_LMS_DROP_FORGED);
	tif = bpf_map_lookup_elem(&lms_ifs, &tpif);
	if (!tif || tif->addr != ip->daddr || opt->tpaddr != ip->daddr)
		return drop(GC_LMS_DROP_BAD_IF);
	struct gc_lms_down d = { opt->src, opt->group, tpif };
	if (!bpf_map_lookup_elem(&lms_down, &d))
		return drop(GC_LMS_DROP_NOT_DOWNSTREAM);

	/* The inner packet: what S multicast to G, a whole UDP datagram. */
	if (bpf_skb_load_bytes(skb, ETH_HLEN + hlen, &inner, sizeof(inner)))
		return drop(GC_LMS_DROP_TRUNCATED);
	if (inner.version != 4 || inner.ihl < 5 || inner.daddr != opt->group ||
	    bpf_ntohs(inner.tot_len) != bpf_ntohs(ip->tot_len) - hlen)
		return drop(GC_LMS_DROP_BAD_INNER);
	if (inner.frag_off & bpf_htons(IP_FRAG))
		return drop(GC_LMS_DROP_FRAGMENT);
	if (inner.saddr != opt->src)
		return drop(GC_LMS_DROP_INNER_SRC);
	if (inner.protocol != IPPROTO_UDP_)
		return drop(GC_LMS_DROP_INNER_PROTO);
	if (bad_csum(skb, &inner, ETH_HLEN + hlen))
		return drop(GC_LMS_DROP_INNER_CSUM);
	if (dec_ttl(skb, ETH_HLEN + hlen))
		return drop(GC_LMS_DROP_TTL);
	/* Strip the outer header; ROOM_MAC because the outer header has options. */
	if (bpf_skb_adjust_room(skb, -(__s32)hlen, BPF_ADJ_ROOM_MAC, 0))
		return drop(GC_LMS_DROP_TRUNCATED);
	return send_mcast(skb, tpif, opt->group, GC_LMS_DMCAST);
}

#define NOT_LMS (-1)

/* opts[i] for i below OPTS_BUF, the mask done where the verifier sees it
 * (clang drops a plain mask once it has proved i < IP_MAX_OPTS, and checks a
 * copy of i the verifier cannot relate to the one it indexes with). */
static __always_inline __u8 opt_byte(const __u8 *opts, __u64 i)
{
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(OPTS_BUF - 1));
	return opts[i];
}

static __always_inline int is_lms(__u8 code)
{
	return code == GC_LMS_OPT_REQ || code == GC_LMS_OPT_DMCAST;
}

/* A walk over the options area opts[0..n), of which the packet holds have
 * bytes (have < n: the header is cut short); i is the next option's offset. */
struct lms_walk {
	__u8 opts[OPTS_BUF];
	__u32 n, have, i;
	int at, why, lms;
};

/* One option (bpf_loop's callback): 0 to go on, 1 when the walk is over. */
static long walk_step(__u32 step, struct lms_walk *w)
{
	__u32 i = w->i, n = w->n;
	__u8 code, olen;

	if (i >= w->have || i >= IP_MAX_OPTS)
		return 1;
	code = opt_byte(w->opts, i);
	if (code == 0) /* END: the rest is padding */
		return 1;
	if (code == 1) { /* NOP */
		w->i = i + 1;
		return 0;
	}
	w->lms |= is_lms(code);
	if (i + 1 >= w->have || i + 1 >= IP_MAX_OPTS) {
		w->why = i + 1 >= n ? GC_LMS_DROP_BAD_LEN : GC_LMS_DROP_TRUNCATED;
		return 1;
	}
	olen = opt_byte(w->opts, i + 1);
	if (olen < 2 || i + olen > n || (is_lms(code) && olen != GC_LMS_OPT_LEN)) {
		w->why = GC_LMS_DROP_BAD_LEN;
		return 1;
	}
	if (is_lms(code)) {
		if (w->at != NOT_LMS) {
			w->why = GC_LMS_DROP_TWO_LMS;
			return 1;
		}
		w->at = i;
	}
	w->i = i + olen;
	return 0;
}

/* Walk the options of the IPv4 header (hlen bytes, options present) of a
 * packet of len bytes as a router does (each step takes at least one byte,
 * so IP_MAX_OPTS steps cover the area).  Returns the LMS option's offset in
 * the area, NOT_LMS when no LMS option shows before the area ends or a fault
 * in it, or -2 - the counter to drop it by. */
static __always_inline int find_lms(struct __sk_buff *skb, __u32 hlen, __u32 len)
{
	struct lms_walk w = { .at = NOT_LMS, .why = -1 };
	__u32 n = (hlen - IP_OPTS) & 0x3f, have;

	/* What the packet holds of the options area (a header cut short is
	 * the kernel's to drop, and ours to count when it shows LMS). */
	have = len > ETH_HLEN + IP_OPTS ? len - ETH_HLEN - IP_OPTS : 0;
	if (have > n)
		have = n;
	if (!have || have > IP_MAX_OPTS || bpf_skb_load_bytes(skb, ETH_HLEN + IP_OPTS, w.opts, have))
		return NOT_LMS;
	w.n = n;
	w.have = have;
	bpf_loop(IP_MAX_OPTS, walk_step, &w, 0);
	if (!w.lms)
		return NOT_LMS;
	if (w.why < 0 && have < n)
		w.why = GC_LMS_DROP_TRUNCATED;
	return w.why < 0 ? w.at : -2 - w.why;
}

SEC("tc")
int gc_lms_fwd(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr ip;
	struct gc_lms_opt opt;
	__u32 hlen, len = skb->len;
	int at;

	/* The common case leaves after a look at two fields of the headers. */
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) || ip.ihl <= 5)
		return TC_ACT_OK;
	hlen = ip.ihl * 4;
	at = find_lms(skb, hlen, len);
	if (at == NOT_LMS)
		return TC_ACT_OK;
	__u32 zero = 0, *in = bpf_map_lookup_elem(&lms_in, &zero);
	if (in)
		*in = skb->ifindex;
	if (at < 0)
		return drop(-2 - at);
	if (bpf_ntohs(ip.tot_len) > len - ETH_HLEN || bpf_ntohs(ip.tot_len) < hlen)
		return drop(GC_LMS_DROP_TRUNCATED);
	if (bpf_skb_load_bytes(skb, ETH_HLEN + IP_OPTS + at, &opt, sizeof(opt)))
		return drop(GC_LMS_DROP_TRUNCATED);

	if (opt.code == GC_LMS_OPT_DMCAST)
		return dmcast(skb, &ip, hlen, &opt);
	/* A request is a multicast; an option 138 on a unicast is not ours to steer. */
	if ((bpf_ntohl(ip.daddr) >> 28) != 0xe)
		return TC_ACT_OK;
	/* Option 138 is copied into every fragment: only a whole packet is a request. */
	if (ip.frag_off & bpf_htons(IP_FRAG))
		return drop(GC_LMS_DROP_FRAGMENT);
	return request(skb, &ip, IP_OPTS + at, &opt);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
