// SPDX-License-Identifier: MIT
/*
 * nl.c - the kernel's multicast forwarding state and the interfaces it runs
 * on, read over rtnetlink (plain netlink, no library): dumps of the named
 * multicast routing tables (RTNL_FAMILY_IPMR: RTM_GETLINK for the vifs,
 * RTM_GETROUTE for the forwarding cache), of every IPv4 address
 * (RTM_GETADDR), of the links (names, MACs) and of the main table's routes
 * through a gateway; and a socket on the notification groups that tell when
 * any of them changed, so that lmsd reads again at once:
 *
 *   RTNLGRP_IPV4_MROUTE   an (S,G) added, changed or deleted (also when the
 *                         routing daemon's socket closes);
 *   RTNLGRP_IPV4_NETCONF  mc_forwarding of an interface changed: a vif was
 *                         added or deleted (ipmr sends nothing else for vifs);
 *   RTNLGRP_IPV4_IFADDR   an address added or removed;
 *   RTNLGRP_LINK          an interface appeared, went, was renamed;
 *   RTNLGRP_IPV4_ROUTE    a unicast route changed (links with routers).
 *
 * The kernel drops notifications when the socket's buffer is full and says
 * so (ENOBUFS): then everything is read again.  lmsd never changes any of it.
 */
#include "lmsd.h"

#include <errno.h>
#include <linux/mroute.h>
#include <linux/netconf.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define VIFF_TUNNEL 0x1
#define VIFF_REGISTER 0x4
#define BUF_SIZE 65536

static unsigned seq;

static int nl_socket(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct sockaddr_nl a = { .nl_family = AF_NETLINK };

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int lmsd_nl_open(void)
{
	static const unsigned groups[] = { RTNLGRP_IPV4_MROUTE, RTNLGRP_IPV4_NETCONF,
					   RTNLGRP_IPV4_IFADDR, RTNLGRP_LINK, RTNLGRP_IPV4_ROUTE };
	int fd = nl_socket(), size = 4 << 20;
	const char *env = getenv("GC_LMSD_NL_RCVBUF"); /* tests: make ENOBUFS happen */

	if (fd < 0)
		return -1;
	if (env && atoi(env) > 0)
		size = atoi(env);
	/* a large buffer makes ENOBUFS rare; as root it may exceed rmem_max */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &groups[i], sizeof(groups[i]))) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
	}
	return fd;
}

static int route_event(const struct nlmsghdr *h);

int lmsd_nl_drain(int fd)
{
	static char buf[BUF_SIZE] __attribute__((aligned(4)));
	int what = 0;

	for (int k = 0; k < 4096; k++) { /* bounded: what is left wakes poll again */
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOBUFS) {
			what |= LMSD_NL_ALL | LMSD_NL_OVERRUN; /* some were lost: read everything */
			continue;
		}
		if (n <= 0)
			break;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			switch (h->nlmsg_type) {
			case RTM_NEWROUTE:
			case RTM_DELROUTE: what |= route_event(h); break;
			case RTM_NEWNETCONF:
			case RTM_DELNETCONF: what |= LMSD_NL_VIFS | LMSD_NL_MFC; break;
			case RTM_NEWADDR:
			case RTM_DELADDR: what |= LMSD_NL_ADDRS; break;
			case RTM_NEWLINK:
			case RTM_DELLINK: what |= LMSD_NL_ALL; break;
			default: break;
			}
		}
	}
	return what;
}

/* ---- dumps ------------------------------------------------------------------ */

typedef int (*msg_fn)(const struct nlmsghdr *h, void *arg);

/* Send a dump request (hdr: the family header, hlen bytes) and hand every
 * answer to fn.  A dump the kernel marks inconsistent (a change raced it) is
 * repeated, a few times; -1 with errno on failure. */
static int dump(uint16_t type, const void *hdr, size_t hlen, msg_fn fn, void *arg, void (*reset)(void *))
{
	static char buf[BUF_SIZE] __attribute__((aligned(4)));
	int fd = nl_socket(), ret = -1, tries = 0;

	if (fd < 0)
		return -1;
again:
	if (reset)
		reset(arg);
	struct {
		struct nlmsghdr n;
		char body[64];
	} req = { .n = { .nlmsg_len = (uint32_t)NLMSG_LENGTH(hlen),
			 .nlmsg_type = type,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			 .nlmsg_seq = ++seq } };
	memcpy(req.body, hdr, hlen);
	if (send(fd, &req, req.n.nlmsg_len, 0) < 0)
		goto out;
	bool intr = false;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != req.n.nlmsg_seq)
				continue;
			if (h->nlmsg_flags & NLM_F_DUMP_INTR)
				intr = true;
			if (h->nlmsg_type == NLMSG_DONE) {
				if (intr && ++tries < 4)
					goto again;
				ret = 0;
				goto out;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				errno = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error ? -e->error
											     : EIO;
				goto out;
			}
			if (fn(h, arg))
				goto out;
		}
	}
out:
	if (ret) {
		int e = errno;
		close(fd);
		errno = e;
	} else {
		close(fd);
	}
	return ret;
}

static struct rtattr *next(struct rtattr *a, int *len)
{
	int step = (int)RTA_ALIGN((unsigned)a->rta_len);

	*len -= step;
	return (struct rtattr *)((char *)a + step);
}

/* Attributes of a message or a nest, by type (the last of each wins). */
static void parse(struct rtattr **tb, int max, struct rtattr *rta, int len)
{
	memset(tb, 0, sizeof(*tb) * (size_t)(max + 1));
	for (; RTA_OK(rta, len); rta = next(rta, &len)) {
		int t = rta->rta_type & NLA_TYPE_MASK;
		if (t <= max)
			tb[t] = rta;
	}
}

static bool get_u32(const struct rtattr *a, uint32_t *v)
{
	if (!a || RTA_PAYLOAD(a) < 4)
		return false;
	memcpy(v, RTA_DATA(a), 4);
	return true;
}

static bool want_table(const struct lmsd_kstate *k, uint32_t table)
{
	for (int i = 0; i < k->ntables; i++)
		if (k->tables[i] == table)
			return true;
	return false;
}

/* -- links: name and MAC of every interface -- */

static void links_reset(void *arg)
{
	((struct lmsd_kstate *)arg)->nlinks = 0;
}

static int link_msg(const struct nlmsghdr *h, void *arg)
{
	struct lmsd_kstate *k = arg;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	struct rtattr *tb[IFLA_MAX + 1];

	if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)) ||
	    k->nlinks == LMSD_MAX_LINKS)
		return 0;
	parse(tb, IFLA_MAX, IFLA_RTA(ifi), (int)IFLA_PAYLOAD(h));
	struct lmsd_link *l = &k->links[k->nlinks];
	memset(l, 0, sizeof(*l));
	l->ifindex = (uint32_t)ifi->ifi_index;
	if (tb[IFLA_IFNAME]) {
		size_t n = RTA_PAYLOAD(tb[IFLA_IFNAME]);
		memcpy(l->name, RTA_DATA(tb[IFLA_IFNAME]), n < IF_NAMESIZE ? n : IF_NAMESIZE - 1);
		l->name[IF_NAMESIZE - 1] = 0;
	}
	if (tb[IFLA_ADDRESS] && RTA_PAYLOAD(tb[IFLA_ADDRESS]) == 6)
		memcpy(l->mac, RTA_DATA(tb[IFLA_ADDRESS]), 6);
	k->nlinks++;
	return 0;
}

/* -- vifs of the named tables -- */

static void vifs_reset(void *arg)
{
	((struct lmsd_kstate *)arg)->nvifs = 0;
}

static int vif_msg(const struct nlmsghdr *h, void *arg)
{
	struct lmsd_kstate *k = arg;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	struct rtattr *tb[IFLA_MAX + 1], *tt[IPMRA_TABLE_MAX + 1], *va[IPMRA_VIFA_MAX + 1];
	uint32_t table;

	if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)) ||
	    ifi->ifi_family != RTNL_FAMILY_IPMR)
		return 0;
	parse(tb, IFLA_MAX, IFLA_RTA(ifi), (int)IFLA_PAYLOAD(h));
	if (!tb[IFLA_AF_SPEC])
		return 0;
	parse(tt, IPMRA_TABLE_MAX, RTA_DATA(tb[IFLA_AF_SPEC]), (int)RTA_PAYLOAD(tb[IFLA_AF_SPEC]));
	if (!get_u32(tt[IPMRA_TABLE_ID], &table) || !want_table(k, table) || !tt[IPMRA_TABLE_VIFS])
		return 0;
	struct rtattr *v = RTA_DATA(tt[IPMRA_TABLE_VIFS]);
	int len = (int)RTA_PAYLOAD(tt[IPMRA_TABLE_VIFS]);
	for (; RTA_OK(v, len) && k->nvifs < LMSD_MAX_IFS; v = next(v, &len)) {
		uint32_t ifindex, id;
		uint16_t flags = 0;
		if ((v->rta_type & NLA_TYPE_MASK) != IPMRA_VIF)
			continue;
		parse(va, IPMRA_VIFA_MAX, RTA_DATA(v), (int)RTA_PAYLOAD(v));
		if (!get_u32(va[IPMRA_VIFA_IFINDEX], &ifindex) || !get_u32(va[IPMRA_VIFA_VIF_ID], &id))
			continue;
		if (va[IPMRA_VIFA_FLAGS] && RTA_PAYLOAD(va[IPMRA_VIFA_FLAGS]) >= 2)
			memcpy(&flags, RTA_DATA(va[IPMRA_VIFA_FLAGS]), 2);
		struct lmsd_vif *o = &k->vifs[k->nvifs++];
		o->vif = (int)id;
		o->table = table;
		o->devindex = ifindex;
		/* tunnels and the PIM register vif: no LMS there */
		o->ifindex = flags & (VIFF_TUNNEL | VIFF_REGISTER) ? 0 : ifindex;
	}
	return 0;
}

/* -- the forwarding cache of the named tables -- */

static void mfc_reset(void *arg)
{
	struct lmsd_kstate *k = arg;
	k->nsg = 0;
	k->star = k->unresolved = k->shadowed = k->full = 0;
}

/* The LMS interface of vif device ifindex in table, 0 when it is none. */
static uint32_t lms_if(const struct lmsd_kstate *k, uint32_t table, uint32_t ifindex)
{
	for (int i = 0; i < k->nvifs; i++)
		if (k->vifs[i].table == table && k->vifs[i].devindex == ifindex)
			return k->vifs[i].ifindex;
	return 0;
}

static int mfc_msg(const struct nlmsghdr *h, void *arg)
{
	struct lmsd_kstate *k = arg;
	const struct rtmsg *r = NLMSG_DATA(h);
	struct rtattr *tb[RTA_MAX + 1];
	uint32_t table, src = 0, group = 0, iif;

	if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(*r)) ||
	    r->rtm_family != RTNL_FAMILY_IPMR)
		return 0;
	parse(tb, RTA_MAX, RTM_RTA(r), (int)RTM_PAYLOAD(h));
	if (!get_u32(tb[RTA_TABLE], &table))
		table = r->rtm_table;
	if (!want_table(k, table))
		return 0;
	get_u32(tb[RTA_SRC], &src);
	get_u32(tb[RTA_DST], &group);
	if (r->rtm_flags & RTNH_F_UNRESOLVED || !get_u32(tb[RTA_IIF], &iif)) {
		k->unresolved++;
		return 0;
	}
	if (!src) { /* the kernel's own (*,G) and (*,*) entries: see lmsd(8) */
		k->star++;
		return 0;
	}
	for (int i = 0; i < k->nsg; i++) {
		if (k->sg[i].src == src && k->sg[i].group == group) {
			k->shadowed++; /* in a table named earlier too: that one counts */
			return 0;
		}
	}
	if (k->nsg == LMSD_MAX_SG) {
		k->full++;
		return 0;
	}
	struct lmsd_sg *e = &k->sg[k->nsg];
	memset(e, 0, sizeof(*e));
	e->src = src;
	e->group = group;
	e->table = table;
	e->parent = lms_if(k, table, iif);
	if (tb[RTA_MULTIPATH]) {
		struct rtnexthop *nh = RTA_DATA(tb[RTA_MULTIPATH]);
		int len = (int)RTA_PAYLOAD(tb[RTA_MULTIPATH]);
		for (; RTNH_OK(nh, len) && e->noifs < LMSD_MAX_VIFS;
		     len -= (int)NLMSG_ALIGN(nh->rtnh_len), nh = RTNH_NEXT(nh)) {
			uint32_t oif = lms_if(k, table, (uint32_t)nh->rtnh_ifindex);
			if (oif)
				e->oifs[e->noifs++] = oif;
		}
	}
	/* no usable upstream or downstream interface: no LMS state */
	if (e->parent && e->noifs)
		k->nsg++;
	return 0;
}

/* -- every IPv4 address -- */

static void addrs_reset(void *arg)
{
	((struct lmsd_kstate *)arg)->naddrs = 0;
}

static int addr_msg(const struct nlmsghdr *h, void *arg)
{
	struct lmsd_kstate *k = arg;
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	struct rtattr *tb[IFA_MAX + 1];
	uint32_t a;

	if (h->nlmsg_type != RTM_NEWADDR || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)) ||
	    ifa->ifa_family != AF_INET || k->naddrs == LMSD_MAX_ADDRS)
		return 0;
	parse(tb, IFA_MAX, IFA_RTA(ifa), (int)IFA_PAYLOAD(h));
	/* IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer's on
	 * a point-to-point link) */
	if (!get_u32(tb[IFA_LOCAL], &a) && !get_u32(tb[IFA_ADDRESS], &a))
		return 0;
	uint32_t flags = ifa->ifa_flags;
	get_u32(tb[IFA_FLAGS], &flags);
	k->addrs[k->naddrs++] = (struct lmsd_addr){ .ifindex = ifa->ifa_index,
						    .addr = a,
						    .prefixlen = ifa->ifa_prefixlen,
						    .secondary = !!(flags & IFA_F_SECONDARY) };
	return 0;
}

/* -- main-table routes through a gateway -- */

static void gws_reset(void *arg)
{
	((struct lmsd_kstate *)arg)->ngws = 0;
}

static void add_gw(struct lmsd_kstate *k, uint32_t oif, uint32_t dst, uint8_t len)
{
	if (k->ngws < LMSD_MAX_GWS)
		k->gws[k->ngws++] = (struct lmsd_gw){ oif, dst, len };
}

static int gw_msg(const struct nlmsghdr *h, void *arg)
{
	struct lmsd_kstate *k = arg;
	const struct rtmsg *r = NLMSG_DATA(h);
	struct rtattr *tb[RTA_MAX + 1];
	uint32_t table, dst = 0, oif;

	if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(*r)) ||
	    r->rtm_family != AF_INET || r->rtm_type != RTN_UNICAST)
		return 0;
	parse(tb, RTA_MAX, RTM_RTA(r), (int)RTM_PAYLOAD(h));
	if (!get_u32(tb[RTA_TABLE], &table))
		table = r->rtm_table;
	if (table != RT_TABLE_MAIN)
		return 0;
	get_u32(tb[RTA_DST], &dst);
	if (tb[RTA_GATEWAY] && get_u32(tb[RTA_OIF], &oif))
		add_gw(k, oif, dst, r->rtm_dst_len);
	if (tb[RTA_MULTIPATH]) {
		struct rtnexthop *nh = RTA_DATA(tb[RTA_MULTIPATH]);
		int len = (int)RTA_PAYLOAD(tb[RTA_MULTIPATH]);
		for (; RTNH_OK(nh, len); len -= (int)NLMSG_ALIGN(nh->rtnh_len), nh = RTNH_NEXT(nh)) {
			struct rtattr *nt[RTA_MAX + 1];
			/* struct rtnexthop (8 bytes) is aligned: its attributes follow */
			parse(nt, RTA_MAX, (struct rtattr *)(nh + 1),
			      (int)nh->rtnh_len - (int)sizeof(*nh));
			if (nt[RTA_GATEWAY])
				add_gw(k, (uint32_t)nh->rtnh_ifindex, dst, r->rtm_dst_len);
		}
	}
	return 0;
}

/* A route notification: a multicast route, or a main-table one (the
 * gateways; the local table and others are not ours). */
static int route_event(const struct nlmsghdr *h)
{
	const struct rtmsg *r = NLMSG_DATA(h);
	struct rtattr *tb[RTA_MAX + 1];
	uint32_t table;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*r)))
		return 0;
	if (r->rtm_family == RTNL_FAMILY_IPMR)
		return LMSD_NL_MFC;
	parse(tb, RTA_MAX, RTM_RTA(r), (int)RTM_PAYLOAD(h));
	if (!get_u32(tb[RTA_TABLE], &table))
		table = r->rtm_table;
	return r->rtm_family == AF_INET && table == RT_TABLE_MAIN ? LMSD_NL_GW : 0;
}

int lmsd_nl_read(struct lmsd_kstate *k, int what)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct ifinfomsg ipmr = { .ifi_family = RTNL_FAMILY_IPMR };
	struct ifaddrmsg ifa = { .ifa_family = AF_INET };
	struct rtmsg mfc = { .rtm_family = RTNL_FAMILY_IPMR };
	struct rtmsg rt = { .rtm_family = AF_INET };

	if (what & LMSD_NL_LINKS && dump(RTM_GETLINK, &ifi, sizeof(ifi), link_msg, k, links_reset))
		return -1;
	/* the vifs before the cache: its interfaces are told by them */
	if (what & LMSD_NL_VIFS && dump(RTM_GETLINK, &ipmr, sizeof(ipmr), vif_msg, k, vifs_reset))
		return -1;
	if (what & LMSD_NL_MFC && dump(RTM_GETROUTE, &mfc, sizeof(mfc), mfc_msg, k, mfc_reset))
		return -1;
	if (what & LMSD_NL_ADDRS && dump(RTM_GETADDR, &ifa, sizeof(ifa), addr_msg, k, addrs_reset))
		return -1;
	if (what & LMSD_NL_GW && dump(RTM_GETROUTE, &rt, sizeof(rt), gw_msg, k, gws_reset))
		return -1;
	return 0;
}
