/* SPDX-License-Identifier: MIT */
/*
 * kpolicy.c - when AUTO may take the kernel engine.
 *
 * The kernel engine's copies are clones of a trigger datagram, redirected
 * from lo's TC egress straight to the member's interface.  They never pass
 * the IP output path of the user socket, so they skip everything that path
 * applies: netfilter OUTPUT and POSTROUTING (filtering, NAT, conntrack),
 * policy routing (uid, mark, source rules, VRF), xfrm (IPsec) policies, cgroup
 * BPF egress and sendmsg programs, and the socket's own options (bound
 * device, mark, IP options, free/transparent binding).  AUTO must never
 * change what the network sees compared with sendto(), so it takes the
 * kernel engine only where none of these is in force, and mmsg elsewhere.
 * gc_set_engine(GC_ENGINE_KERNEL) still forces it (gc_set_engine(3) says
 * what that bypasses).
 *
 * What is checked, and when (groupcast(7) has the user's version):
 *  - the network namespace (family by family): every netfilter hook at
 *    LOCAL_OUT and POST_ROUTING (nfnetlink_hook dump: nftables chains,
 *    iptables tables, conntrack, NAT, IPVS, BPF netfilter programs, LSMs);
 *    where that dump is not available, nftables chains (NFT_MSG_GETCHAIN
 *    dump) and legacy iptables tables (/proc/net/ip{,6}_tables_names);
 *    policy-routing rules other than the defaults (an l3mdev rule, which
 *    every VRF adds, included); routes with an MTU that is not locked
 *    (bpf_fib_lookup() sees only locked ones); xfrm policies in the out
 *    direction;
 *  - the process's cgroup: effective BPF programs at INET_EGRESS and
 *    UDP{4,6}_SENDMSG (BPF_PROG_QUERY, BPF_F_QUERY_EFFECTIVE);
 *  - the socket: SO_BINDTODEVICE, SO_MARK, IP_FREEBIND / IP_TRANSPARENT,
 *    IP options or IPv6 extension headers, a bound address that is not (or
 *    no longer) local.
 * The socket's answer is kept for GC_KPOLICY_SOCKET_NS, the namespace's and
 * cgroup's (shared by the process's sockets) for GC_KPOLICY_NETNS_NS: a change
 * made after a check is seen by the first send after that time (the window,
 * documented in groupcast(7)).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/fib_rules.h>
#include <linux/mount.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_hook.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/xfrm.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "internal.h"
#include "kpolicy.h"

#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX 62
#endif
#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND 78
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT 75
#endif

#define WHY_LEN 200

/* ---- netlink dumps ------------------------------------------------------ */

/*
 * Send the dump request req on a new netlink socket of protocol proto and
 * call cb on every answer until it returns nonzero (found) or the dump ends.
 * Returns cb's nonzero value, 0 at the end of the dump, or -errno when the
 * request was refused (the kernel has no such dump) or the socket failed.
 */
static int nl_dump(int proto, const void *req, size_t len,
		   int (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	static __thread char buf[32768] __attribute__((aligned(8)));
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto), ret = 0;
	struct timeval tv = { .tv_sec = 1 };

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* never hang a send on a dump */
	if (send(fd, req, len, 0) < 0) {
		ret = -errno;
		goto out;
	}
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto out;
		}
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				goto out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				ret = e->error ? e->error : 0;
				goto out;
			}
			if ((ret = cb(h, arg)))
				goto out;
		}
	}
out:
	close(fd);
	return ret;
}

/*
 * Netlink attributes.  The uapi's NLA_HDRLEN and NLA_ALIGN() compute in int;
 * these do the same in size_t, and never step past len.
 */
#define NLA_HDR ((size_t)4)
_Static_assert(sizeof(struct nlattr) == 4, "NLA_HDR: struct nlattr is 4 bytes, aligned");
#define NLA_DATA(a) ((const void *)((const char *)(a) + NLA_HDR))
#define NLA_LEN(a) nla_len(a)

static size_t nla_len(const struct nlattr *a)
{
	return a->nla_len > NLA_HDR ? a->nla_len - NLA_HDR : 0;
}

/* Walk the attributes at p (len bytes): tb[type] for each type <= max. */
static void attrs(const void *p, size_t len, const struct nlattr **tb, unsigned max)
{
	memset(tb, 0, (max + 1) * sizeof(*tb));
	for (const struct nlattr *a = p;
	     len >= sizeof(*a) && a->nla_len >= sizeof(*a) && a->nla_len <= len;) {
		if ((a->nla_type & NLA_TYPE_MASK) <= max)
			tb[a->nla_type & NLA_TYPE_MASK] = a;
		size_t step = ((size_t)a->nla_len + 3) & ~(size_t)3;
		if (step >= len)
			break;
		len -= step;
		a = (const void *)((const char *)a + step);
	}
}

/* A string attribute, copied into out (never unterminated). */
static const char *nla_str(const struct nlattr *a, char *out, size_t len)
{
	size_t n = a ? NLA_LEN(a) : 0;

	if (n >= len)
		n = len - 1;
	memcpy(out, a ? NLA_DATA(a) : "", n);
	out[n] = 0;
	return out;
}

static const char *nfproto_name(unsigned f)
{
	return f == NFPROTO_INET    ? "inet"
		: f == NFPROTO_IPV4 ? "ip"
		: f == NFPROTO_IPV6 ? "ip6"
				    : "?";
}

static const char *hook_name(unsigned h)
{
	return h == NF_INET_LOCAL_OUT ? "OUTPUT" : "POSTROUTING";
}

struct found {
	char *why;
	size_t len;
	unsigned hook;
	int family; /* AF_INET or AF_INET6 */
};

/* ---- netfilter ----------------------------------------------------------- */

/* One entry of a NFNL_MSG_HOOK_GET dump: every entry counts. */
static int hook_cb(const struct nlmsghdr *h, void *arg)
{
	struct found *f = arg;
	const struct nlattr *tb[NFNLA_HOOK_MAX + 1], *ci[NFNLA_HOOK_INFO_MAX + 1],
		*cd[NFNLA_CHAIN_MAX + 1];
	const struct nfgenmsg *g = NLMSG_DATA(h);
	char fn[64], mod[64], table[64], chain[64];

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*g)))
		return 0;
	attrs(g + 1, h->nlmsg_len - NLMSG_LENGTH(sizeof(*g)), tb, NFNLA_HOOK_MAX);
	if (tb[NFNLA_HOOK_CHAIN_INFO]) {
		attrs(NLA_DATA(tb[NFNLA_HOOK_CHAIN_INFO]), NLA_LEN(tb[NFNLA_HOOK_CHAIN_INFO]), ci,
		      NFNLA_HOOK_INFO_MAX);
		if (ci[NFNLA_HOOK_INFO_DESC]) {
			unsigned fam = 0;

			attrs(NLA_DATA(ci[NFNLA_HOOK_INFO_DESC]), NLA_LEN(ci[NFNLA_HOOK_INFO_DESC]),
			      cd, NFNLA_CHAIN_MAX);
			if (cd[NFNLA_CHAIN_FAMILY] && NLA_LEN(cd[NFNLA_CHAIN_FAMILY]) >= 4)
				fam = *(const __u32 *)NLA_DATA(cd[NFNLA_CHAIN_FAMILY]);
			snprintf(f->why, f->len, "nftables chain '%s' (%s %s) hooks %s",
				 nla_str(cd[NFNLA_CHAIN_NAME], chain, sizeof(chain)), nfproto_name(fam),
				 nla_str(cd[NFNLA_CHAIN_TABLE], table, sizeof(table)),
				 hook_name(f->hook));
			return 1;
		}
	}
	nla_str(tb[NFNLA_HOOK_MODULE_NAME], mod, sizeof(mod));
	snprintf(f->why, f->len, "netfilter hook %s%s%s%s at %s (%s)",
		 nla_str(tb[NFNLA_HOOK_FUNCTION_NAME], fn, sizeof(fn)), *mod ? " (" : "", mod,
		 *mod ? ")" : "", hook_name(f->hook), f->family == AF_INET ? "IPv4" : "IPv6");
	return 1;
}

/* One chain of a NFT_MSG_GETCHAIN dump: a base chain of ip/ip6/inet at
 * OUTPUT or POSTROUTING counts. */
static int chain_cb(const struct nlmsghdr *h, void *arg)
{
	struct found *f = arg;
	const struct nlattr *tb[NFTA_CHAIN_MAX + 1], *hk[NFTA_HOOK_MAX + 1];
	const struct nfgenmsg *g = NLMSG_DATA(h);
	char table[64], chain[64];
	unsigned num;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*g)))
		return 0;
	if (g->nfgen_family != NFPROTO_INET &&
	    g->nfgen_family != (f->family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6))
		return 0;
	attrs(g + 1, h->nlmsg_len - NLMSG_LENGTH(sizeof(*g)), tb, NFTA_CHAIN_MAX);
	if (!tb[NFTA_CHAIN_HOOK])
		return 0; /* a regular chain: only reached from a base chain */
	attrs(NLA_DATA(tb[NFTA_CHAIN_HOOK]), NLA_LEN(tb[NFTA_CHAIN_HOOK]), hk, NFTA_HOOK_MAX);
	if (!hk[NFTA_HOOK_HOOKNUM] || NLA_LEN(hk[NFTA_HOOK_HOOKNUM]) < 4)
		return 0;
	num = ntohl(*(const __u32 *)NLA_DATA(hk[NFTA_HOOK_HOOKNUM]));
	if (num != NF_INET_LOCAL_OUT && num != NF_INET_POST_ROUTING)
		return 0;
	snprintf(f->why, f->len, "nftables chain '%s' (%s %s) hooks %s",
		 nla_str(tb[NFTA_CHAIN_NAME], chain, sizeof(chain)), nfproto_name(g->nfgen_family),
		 nla_str(tb[NFTA_CHAIN_TABLE], table, sizeof(table)), hook_name(num));
	return 1;
}

/* A non-empty /proc/net/ip_tables_names (ip6_...): legacy iptables tables. */
static int legacy_tables(int family, char *why, size_t len)
{
	const char *path = family == AF_INET ? "/proc/net/ip_tables_names" : "/proc/net/ip6_tables_names";
	char buf[128];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	snprintf(why, len, "legacy %s table '%s' exists",
		 family == AF_INET ? "iptables" : "ip6tables", buf);
	return 1;
}

static int netfilter(int family, char *why, size_t len)
{
	struct {
		struct nlmsghdr n;
		struct nfgenmsg g;
		struct nlattr a;
		__u32 hooknum;
	} req = {
		.n = { .nlmsg_len = sizeof(req),
		       .nlmsg_type = (NFNL_SUBSYS_HOOK << 8) | NFNL_MSG_HOOK_GET,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1 },
		.g = { .nfgen_family = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6,
		       .version = NFNETLINK_V0 },
		.a = { .nla_len = NLA_HDR + 4, .nla_type = NFNLA_HOOK_HOOKNUM },
	};
	struct {
		struct nlmsghdr n;
		struct nfgenmsg g;
	} creq = {
		.n = { .nlmsg_len = sizeof(creq),
		       .nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1 },
		.g = { .nfgen_family = NFPROTO_UNSPEC, .version = NFNETLINK_V0 },
	};
	struct found f = { why, len, 0, family };
	int r = 0;

	for (unsigned hook = NF_INET_LOCAL_OUT; hook <= NF_INET_POST_ROUTING; hook++) {
		req.hooknum = htonl(hook);
		f.hook = hook;
		r = nl_dump(NETLINK_NETFILTER, &req, sizeof(req), hook_cb, &f);
		if (r > 0)
			return 1;
		if (r < 0)
			break;
	}
	if (r == 0)
		return 0; /* the hook dump saw every hook there is: none */
	/* no nfnetlink_hook in this kernel: nftables chains and legacy tables */
	r = nl_dump(NETLINK_NETFILTER, &creq, sizeof(creq), chain_cb, &f);
	if (r > 0)
		return 1;
	return legacy_tables(family, why, len);
}

/* ---- routing: rules and xfrm --------------------------------------------- */

/* One rule of an RTM_GETRULE dump: anything but the defaults counts. */
static int rule_cb(const struct nlmsghdr *h, void *arg)
{
	struct found *f = arg;
	const struct fib_rule_hdr *r = NLMSG_DATA(h);
	const struct nlattr *tb[FRA_MAX + 1];
	__u32 prio = 0, table;
	bool other = false;

	if (h->nlmsg_type != RTM_NEWRULE || h->nlmsg_len < NLMSG_LENGTH(sizeof(*r)))
		return 0;
	attrs(r + 1, h->nlmsg_len - NLMSG_LENGTH(sizeof(*r)), tb, FRA_MAX);
	for (int i = 0; i <= FRA_MAX; i++)
		other |= tb[i] && i != FRA_PRIORITY && i != FRA_TABLE && i != FRA_PROTOCOL &&
			i != FRA_SUPPRESS_PREFIXLEN && i != FRA_SUPPRESS_IFGROUP;
	if (tb[FRA_PRIORITY] && NLA_LEN(tb[FRA_PRIORITY]) >= 4)
		prio = *(const __u32 *)NLA_DATA(tb[FRA_PRIORITY]);
	table = tb[FRA_TABLE] && NLA_LEN(tb[FRA_TABLE]) >= 4 ? *(const __u32 *)NLA_DATA(tb[FRA_TABLE])
							     : r->table;
	/* the defaults: 0 local, 32766 main, 32767 default (IPv4 only), no selectors */
	if (!other && !r->src_len && !r->dst_len && !r->tos && r->action == FR_ACT_TO_TBL &&
	    !(r->flags & FIB_RULE_INVERT) &&
	    ((prio == 0 && table == RT_TABLE_LOCAL) || (prio == 32766 && table == RT_TABLE_MAIN) ||
	     (prio == 32767 && table == RT_TABLE_DEFAULT)))
		return 0;
	snprintf(f->why, f->len, "%s policy-routing rule %u (table %u%s) beyond the defaults",
		 f->family == AF_INET ? "IPv4" : "IPv6", prio, table,
		 tb[FRA_L3MDEV] ? ", l3mdev: a VRF" : "");
	return 1;
}

static int rules(int family, char *why, size_t len)
{
	struct {
		struct nlmsghdr n;
		struct fib_rule_hdr r;
	} req = {
		.n = { .nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETRULE,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1 },
		.r = { .family = (__u8)family },
	};
	struct found f = { why, len, 0, family };
	int r = nl_dump(NETLINK_ROUTE, &req, sizeof(req), rule_cb, &f);

	if (r < 0) {
		snprintf(why, len, "cannot list the policy-routing rules: %s", strerror(-r));
		return 1;
	}
	return r;
}

/*
 * One route of an RTM_GETROUTE dump: an MTU metric that is not locked counts.
 * sendto() fragments at it, but bpf_fib_lookup() honours a route's MTU only
 * when it is locked (ip route ... mtu lock N); learned path MTUs it does see.
 */
struct routes {
	struct found f;
	unsigned seen;
};

#define GC_KPOLICY_MAX_ROUTES 20000 /* a bigger table is not dumped every second */

static int route_cb(const struct nlmsghdr *h, void *arg)
{
	struct routes *r = arg;
	const struct rtmsg *rt = NLMSG_DATA(h);
	const struct nlattr *tb[RTA_MAX + 1], *mx[RTAX_MAX + 1];
	__u32 mtu, lock = 0;
	char dst[INET6_ADDRSTRLEN] = "default";

	if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(*rt)))
		return 0;
	if (++r->seen > GC_KPOLICY_MAX_ROUTES) {
		snprintf(r->f.why, r->f.len, "more than %d %s routes: their MTUs are not checked",
			 GC_KPOLICY_MAX_ROUTES, r->f.family == AF_INET ? "IPv4" : "IPv6");
		return 1;
	}
	attrs(RTM_RTA(rt), RTM_PAYLOAD(h), tb, RTA_MAX);
	if (!tb[RTA_METRICS])
		return 0;
	attrs(NLA_DATA(tb[RTA_METRICS]), NLA_LEN(tb[RTA_METRICS]), mx, RTAX_MAX);
	if (!mx[RTAX_MTU] || NLA_LEN(mx[RTAX_MTU]) < 4)
		return 0;
	mtu = *(const __u32 *)NLA_DATA(mx[RTAX_MTU]);
	if (mx[RTAX_LOCK] && NLA_LEN(mx[RTAX_LOCK]) >= 4)
		lock = *(const __u32 *)NLA_DATA(mx[RTAX_LOCK]);
	if (lock & (1u << RTAX_MTU))
		return 0;
	if (tb[RTA_DST])
		inet_ntop(r->f.family, NLA_DATA(tb[RTA_DST]), dst, sizeof(dst));
	snprintf(r->f.why, r->f.len,
		 "route %s/%u has mtu %u (not locked: the kernel engine would not see it)", dst,
		 rt->rtm_dst_len, mtu);
	return 1;
}

static int routes(int family, char *why, size_t len)
{
	struct {
		struct nlmsghdr n;
		struct rtmsg r;
	} req = {
		.n = { .nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETROUTE,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1 },
		.r = { .rtm_family = (unsigned char)family },
	};
	struct routes r = { { why, len, 0, family }, 0 };
	int ret = nl_dump(NETLINK_ROUTE, &req, sizeof(req), route_cb, &r);

	if (ret < 0) {
		snprintf(why, len, "cannot list the %s routes: %s",
			 family == AF_INET ? "IPv4" : "IPv6", strerror(-ret));
		return 1;
	}
	return ret;
}

/* One policy of an XFRM_MSG_GETPOLICY dump: one in the out direction counts. */
static int xfrm_cb(const struct nlmsghdr *h, void *arg)
{
	struct found *f = arg;
	const struct xfrm_userpolicy_info *p = NLMSG_DATA(h);

	if (h->nlmsg_type != XFRM_MSG_NEWPOLICY || h->nlmsg_len < NLMSG_LENGTH(sizeof(*p)) ||
	    p->dir != XFRM_POLICY_OUT || (p->sel.family && p->sel.family != f->family))
		return 0;
	snprintf(f->why, f->len, "xfrm (IPsec) policy %u in the out direction", p->index);
	return 1;
}

static int xfrm(int family, char *why, size_t len)
{
	struct nlmsghdr req = { .nlmsg_len = sizeof(req),
				.nlmsg_type = XFRM_MSG_GETPOLICY,
				.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
				.nlmsg_seq = 1 };
	struct found f = { why, len, 0, family };
	int r = nl_dump(NETLINK_XFRM, &req, sizeof(req), xfrm_cb, &f);

	if (r == -EPERM || r == -EACCES) {
		snprintf(why, len, "cannot list xfrm policies: %s", strerror(-r));
		return 1;
	}
	return r > 0; /* other errors: no xfrm in this kernel, nothing to bypass */
}

/* ---- cgroup BPF ----------------------------------------------------------- */

/*
 * The cgroup2 hierarchy of our cgroup namespace as a detached mount (fsopen(),
 * fsmount(): nothing is attached to any mount tree), made once, on the first
 * check that finds no cgroup2 mount in sight, and kept for the life of the
 * process.  Making it needs CAP_SYS_ADMIN; querying the programs of a cgroup
 * through it later needs only CAP_NET_ADMIN.  This is what lets a process that
 * drops its capabilities after its first send (groupcast relay) keep answering
 * the cgroup question: without it, the fallback below (listing every loaded
 * program) fails with EPERM once CAP_SYS_ADMIN is gone, AUTO declines, and the
 * relay silently runs on mmsg after the first re-check.  Called under NS.lock.
 */
static int cgroup2_root = -1;

static int cgroup2_detached(void)
{
	int fs = (int)syscall(SYS_fsopen, "cgroup2", FSOPEN_CLOEXEC), m = -1;

	if (fs < 0)
		return -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0);
	close(fs);
	return m;
}

/* Our cgroup's directory in a cgroup2 mount we can see, or in the detached
 * one above: an fd, or -1. */
static int cgroup_fd(void)
{
	char line[1024], path[4096] = "", mnt[2048] = "", root[2048] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	int fd = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(path, sizeof(path), "%s", line + 3);
		}
	fclose(f);
	if (!*path || !(f = fopen("/proc/self/mountinfo", "re")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char r[2048], m[2048], type[64];
		const char *sep = strstr(line, " - ");

		if (!sep || sscanf(sep, " - %63s", type) != 1 || strcmp(type, "cgroup2") ||
		    sscanf(line, "%*s %*s %*s %2047s %2047s", r, m) != 2)
			continue;
		snprintf(root, sizeof(root), "%s", r);
		snprintf(mnt, sizeof(mnt), "%s", m);
		break;
	}
	fclose(f);
	if (*mnt) {
		size_t rl = strcmp(root, "/") ? strlen(root) : 0;
		char full[8192];

		if (strncmp(path, root, rl) == 0 && (path[rl] == '/' || !path[rl])) {
			snprintf(full, sizeof(full), "%s%s", mnt, path + rl);
			fd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		}
		return fd;
	}
	if (cgroup2_root < 0)
		cgroup2_root = cgroup2_detached();
	if (cgroup2_root >= 0) /* path is relative to our cgroup namespace's root, as is the mount */
		fd = openat(cgroup2_root, path[1] ? path + 1 : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd;
}

static int cgroup_bpf(int family, char *why, size_t len)
{
	const enum bpf_attach_type types[] = { BPF_CGROUP_INET_EGRESS,
					       family == AF_INET ? BPF_CGROUP_UDP4_SENDMSG
								 : BPF_CGROUP_UDP6_SENDMSG };
	const char *names[] = { "cgroup_skb egress", family == AF_INET ? "udp4 sendmsg" : "udp6 sendmsg" };
	int fd = cgroup_fd();

	if (fd >= 0) {
		for (int i = 0; i < 2; i++) {
			__u32 cnt = 0;

			if (bpf_prog_query(fd, types[i], BPF_F_QUERY_EFFECTIVE, NULL, NULL, &cnt)) {
				/* not knowing is not "none" (BPF_PROG_QUERY needs CAP_NET_ADMIN) */
				snprintf(why, len, "cannot query the cgroup BPF programs at %s: %s",
					 names[i], strerror(errno));
				close(fd);
				return 1;
			}
			if (cnt) {
				snprintf(why, len,
					 "%u cgroup BPF program%s at %s in effect for this process's cgroup",
					 cnt, cnt > 1 ? "s" : "", names[i]);
				close(fd);
				return 1;
			}
		}
		close(fd);
		return 0;
	}
	/*
	 * No cgroup2 mount in sight (`ip netns exec` mounts a fresh /sys over
	 * it, some hosts mount only cgroup v1) and none could be made (no
	 * CAP_SYS_ADMIN at the first check): we cannot tell where programs are attached, so any loaded
	 * program of a type that could be (cgroup_skb, cgroup sock_addr) counts.
	 */
	for (__u32 id = 0; bpf_prog_get_next_id(id, &id) == 0;) {
		struct bpf_prog_info info = { 0 };
		__u32 il = sizeof(info);
		int pfd = bpf_prog_get_fd_by_id(id);

		if (pfd < 0)
			continue;
		if (bpf_obj_get_info_by_fd(pfd, &info, &il) == 0 &&
		    (info.type == BPF_PROG_TYPE_CGROUP_SKB ||
		     info.type == BPF_PROG_TYPE_CGROUP_SOCK_ADDR)) {
			snprintf(why, len,
				 "cgroup BPF program %u (%s) is loaded and no cgroup2 mount is visible "
				 "to tell whether it applies here",
				 id, info.type == BPF_PROG_TYPE_CGROUP_SKB ? "cgroup_skb" : "cgroup_sock_addr");
			close(pfd);
			return 1;
		}
		close(pfd);
	}
	if (errno == EPERM) {
		snprintf(why, len,
			 "cannot tell which cgroup BPF programs apply (no cgroup2 mount, cannot list programs)");
		return 1;
	}
	return 0;
}

/* ---- the namespace, cached per family ----------------------------------- */

static struct {
	pthread_mutex_t lock;
	uint64_t at[2];
	int declined[2];
	char why[2][WHY_LEN];
} NS = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int namespace_declines(int family, uint64_t now, char *why, size_t len)
{
	int i = family == AF_INET6, d;

	pthread_mutex_lock(&NS.lock);
	if (!NS.at[i] || now - NS.at[i] >= GC_KPOLICY_NETNS_NS) {
		char *w = NS.why[i];
		size_t wl = sizeof(NS.why[i]);

		NS.declined[i] = netfilter(family, w, wl) || rules(family, w, wl) ||
			routes(family, w, wl) || xfrm(family, w, wl) || cgroup_bpf(family, w, wl);
		NS.at[i] = now;
	}
	d = NS.declined[i];
	if (d)
		snprintf(why, len, "%s", NS.why[i]);
	pthread_mutex_unlock(&NS.lock);
	return d;
}

/* ---- the socket ------------------------------------------------------------ */

static int opt(int fd, int level, int name)
{
	int v = 0;
	socklen_t l = sizeof(v);

	return getsockopt(fd, level, name, &v, &l) ? 0 : v;
}

static int optlen(int fd, int level, int name)
{
	char buf[64];
	socklen_t l = sizeof(buf);

	return getsockopt(fd, level, name, buf, &l) ? 0 : (int)l;
}

/* Whether sysctl path reads nonzero. */
static int sysctl_on(const char *path)
{
	char c = '0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = '0';
		close(fd);
	}
	return c != '0';
}

/* A bound source address must be one of ours, as sendto() requires. */
static int bound_declines(const struct gc_sock *s, char *why, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char a[INET6_ADDRSTRLEN] = "?";
	int probe, ok;

	if (getsockname(s->fd, (struct sockaddr *)&ss, &sl))
		return 0;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		if (in->sin_addr.s_addr == htonl(INADDR_ANY) || (ntohl(in->sin_addr.s_addr) >> 24) == 127)
			return 0; /* loopback: the kernel engine sends off-lo members through sendto() */
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		in->sin_port = 0;
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) || IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return 0;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		in6->sin6_port = 0;
	}
	if (sysctl_on(s->family == AF_INET ? "/proc/sys/net/ipv4/ip_nonlocal_bind"
					   : "/proc/sys/net/ipv6/ip_nonlocal_bind")) {
		snprintf(why, len,
			 "bound to %s with ip_nonlocal_bind on: the source may not be local", a);
		return 1;
	}
	/* bind() without IP_FREEBIND succeeds only for a local address */
	probe = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ok = probe >= 0 && bind(probe, (struct sockaddr *)&ss, sl) == 0;
	if (probe >= 0)
		close(probe);
	if (!ok && errno == EADDRNOTAVAIL) {
		snprintf(why, len, "bound to %s, which is not a local address", a);
		return 1;
	}
	return 0;
}

static int socket_declines(const struct gc_sock *s, char *why, size_t len)
{
	int fd = s->fd, v;
	int v6 = s->family == AF_INET6;

	if ((v = opt(fd, SOL_SOCKET, SO_BINDTOIFINDEX)))
		return snprintf(why, len,
				"the socket is bound to a device (SO_BINDTODEVICE, ifindex %d)", v),
		       1;
	if ((v = opt(fd, SOL_SOCKET, SO_MARK)))
		return snprintf(why, len, "the socket has SO_MARK 0x%x", (unsigned)v), 1;
	if (opt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_FREEBIND : IP_FREEBIND) ||
	    (v6 && opt(fd, IPPROTO_IP, IP_FREEBIND)))
		return snprintf(why, len, "the socket has IP_FREEBIND"), 1;
	if (opt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TRANSPARENT : IP_TRANSPARENT) ||
	    (v6 && opt(fd, IPPROTO_IP, IP_TRANSPARENT)))
		return snprintf(why, len, "the socket has IP_TRANSPARENT"), 1;
	if (!v6 && optlen(fd, IPPROTO_IP, IP_OPTIONS))
		return snprintf(why, len, "the socket has IP options (IP_OPTIONS)"), 1;
	if (v6 &&
	    (optlen(fd, IPPROTO_IPV6, IPV6_HOPOPTS) || optlen(fd, IPPROTO_IPV6, IPV6_DSTOPTS) ||
	     optlen(fd, IPPROTO_IPV6, IPV6_RTHDR) || optlen(fd, IPPROTO_IPV6, IPV6_RTHDRDSTOPTS)))
		return snprintf(why, len, "the socket has IPv6 extension headers"), 1;
	return bound_declines(s, why, len);
}

/* ---- the check ------------------------------------------------------------- */

int gc_kpolicy_declines(struct gc_sock *s)
{
	/* per send: a coarse tick is precision enough for the 0.2 s and 1 s re-checks */
	uint64_t now = gc_clock_ns(CLOCK_MONOTONIC_COARSE);
	char why[WHY_LEN];

	if (s->auto_checked_ns && now - s->auto_checked_ns < GC_KPOLICY_SOCKET_NS)
		return s->auto_declined;
	s->auto_checked_ns = now;
	why[0] = 0;
	s->auto_declined = socket_declines(s, why, sizeof(why)) ||
		namespace_declines(s->family, now, why, sizeof(why));
	if (s->auto_declined)
		snprintf(s->auto_why, sizeof(s->auto_why), "kernel: declined by AUTO: %s", why);
	else
		snprintf(s->auto_why, sizeof(s->auto_why),
			 "kernel: taken by AUTO: no egress policy it would bypass (netfilter output hooks, "
			 "policy routing, xfrm, cgroup BPF, socket options)");
	return s->auto_declined;
}
