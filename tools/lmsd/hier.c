// SPDX-License-Identifier: MIT
/*
 * hier.c - LMS-HIER, the replier hierarchy (the thesis's 6.7.1 sketch), as a
 * small UDP protocol of our own instead of an IGMP extension:
 *
 *   host -> router    a receiver volunteering as replier for (S,G) sends a
 *                     REPORT {S, G, replier = itself, cost, hold time} to
 *                     224.0.0.2 (all routers) port 7399 with TTL 1, every
 *                     report interval, and one with LEAVE when it stops;
 *   router -> router  every period (-t), and at once when its choice changes,
 *                     lmsd sends the best replier of each (S,G) it routes up
 *                     its parent interface the same way: {S, G, that
 *                     replier, its cost + 1}; LEAVE when it has none left.
 *
 * Each router keeps the reports it heard per (S,G) and interface, drops them
 * after their hold time, and elects the cheapest on a downstream interface
 * (ties keep the current one, then the lower address): that interface is the
 * replier link and that address the replier.  The elected replier replaces a
 * static one from the configuration.  A dead replier stops reporting and is
 * replaced within its hold time plus one refresh per level (lmsd(8)).
 *
 * Forged reports (a host capturing the replier role for a subtree it is not
 * in) are refused, each reason counted:
 *   ttl      received TTL not 1: sent from beyond the link;
 *   offlink  sender address in none of the arrival interface's subnets
 *            (every address of it counts, secondary ones too);
 *   rpf      the route to the claimed replier does not leave by the
 *            arrival interface (a host claiming another subtree's replier);
 *   notdown  the arrival interface is not downstream for (S,G);
 *   limited  over the per-interface rate (reports_per_s, burst of 1/5 s);
 *   bad      malformed; full: no room (LMSD_MAX_CANDS).
 */
#include "lmsd.h"
#include "lms.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CANDS 1024
#define RATE_PER_IF 200.0 /* reports/s accepted per interface */

struct cand {
	uint32_t src, group, replier, from, ifindex, cost;
	uint64_t expires_ns;
};

struct ifrate {
	uint32_t ifindex;
	double tokens;
	uint64_t last_ns;
};

static struct {
	int fd;
	struct cand c[MAX_CANDS];
	int n;
	struct ifrate rate[LMSD_MAX_IFS];
	uint32_t joined[LMSD_MAX_IFS];
	int njoined;
	struct lmsd_hier_stats st;
	uint32_t hold_ms;
} H = { .fd = -1 };

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int lmsd_hier_open(uint32_t hold_ms)
{
	int one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(GC_LMS_HIER_PORT) };

	H.hold_ms = hold_ms;
	H.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (H.fd < 0)
		return -1;
	if (setsockopt(H.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(H.fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) ||
	    setsockopt(H.fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one)) ||
	    bind(H.fd, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	int zero = 0;
	setsockopt(H.fd, IPPROTO_IP, IP_MULTICAST_TTL, &one, sizeof(one));
	setsockopt(H.fd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero, sizeof(zero));
	setsockopt(H.fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
	return H.fd;
}

/* Join 224.0.0.2 on every vif interface (once each). */
void lmsd_hier_join(const uint32_t *ifs, int n)
{
	for (int i = 0; i < n && H.fd >= 0; i++) {
		bool have = false;
		for (int j = 0; j < H.njoined; j++)
			have |= H.joined[j] == ifs[i];
		if (!ifs[i] || have || H.njoined == LMSD_MAX_IFS)
			continue;
		struct ip_mreqn m = { .imr_ifindex = (int)ifs[i] };
		m.imr_multiaddr.s_addr = htonl(GC_LMS_HIER_GROUP);
		if (!setsockopt(H.fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)) || errno == EADDRINUSE)
			H.joined[H.njoined++] = ifs[i];
	}
}

/* The local address the kernel's route to dst would use: which interface
 * dst is reached through (each of a router's interfaces has its own). */
static uint32_t route_src(uint32_t dst)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = dst };
	socklen_t l = sizeof(a);
	uint32_t r = 0;

	if (s < 0)
		return 0;
	if (!connect(s, (struct sockaddr *)&a, sizeof(a)) && !getsockname(s, (struct sockaddr *)&a, &l))
		r = a.sin_addr.s_addr;
	close(s);
	return r;
}

static bool rate_ok(uint32_t ifindex, uint64_t now)
{
	struct ifrate *r = NULL;

	for (int i = 0; i < LMSD_MAX_IFS && !r; i++)
		if (H.rate[i].ifindex == ifindex || !H.rate[i].ifindex)
			r = &H.rate[i];
	if (!r)
		return false;
	if (!r->ifindex) {
		r->ifindex = ifindex;
		r->tokens = RATE_PER_IF / 5;
		r->last_ns = now;
	}
	r->tokens += (double)(now - r->last_ns) * RATE_PER_IF / 1e9;
	if (r->tokens > RATE_PER_IF / 5)
		r->tokens = RATE_PER_IF / 5;
	r->last_ns = now;
	if (r->tokens < 1)
		return false;
	r->tokens -= 1;
	return true;
}

static struct cand *find(uint32_t src, uint32_t group, uint32_t ifindex, uint32_t from)
{
	for (int i = 0; i < H.n; i++)
		if (H.c[i].src == src && H.c[i].group == group && H.c[i].ifindex == ifindex &&
		    H.c[i].from == from)
			return &H.c[i];
	return NULL;
}

/* Reports come from the network (forged ones too): rate-limited (log.h). */
static struct log_limit lim_bad = LOG_LIMIT_INIT(LL_WARNING, "hier_malformed");
static struct log_limit lim_refused = LOG_LIMIT_INIT(LL_WARNING, "hier_refused");

static void refused(uint32_t from, uint32_t ifindex, const char *why)
{
	char a[INET_ADDRSTRLEN] = "?";
	if (!log_enabled(LL_WARNING))
		return;
	inet_ntop(AF_INET, &from, a, sizeof(a));
	log_limited(&lim_refused, "src=%s ifindex=%u reason=%s", a, ifindex, why);
}

/* Validate and record one report; true when the candidates changed. */
static bool take(const struct gc_lms_hier *m, uint32_t from, uint32_t ifindex, int ttl,
		 const struct lmsd_sg *sg, int nsg, uint64_t now)
{
	if (ttl != 1) {
		H.st.ttl++;
		refused(from, ifindex, "ttl_not_1");
		return false;
	}
	if (!lmsd_onlink(ifindex, from)) {
		H.st.offlink++;
		refused(from, ifindex, "source_not_on_link");
		return false;
	}
	if (!rate_ok(ifindex, now)) {
		H.st.limited++;
		refused(from, ifindex, "rate_limited");
		return false;
	}
	/* The claimed replier must be reached through the interface the report
	 * came in on: nobody speaks for a subtree it is not in. */
	if (!lmsd_addr_of(ifindex, route_src(m->replier))) {
		H.st.rpf++;
		refused(from, ifindex, "replier_not_behind_interface");
		return false;
	}
	const struct lmsd_sg *e = NULL;
	for (int i = 0; i < nsg && !e; i++)
		if (sg[i].src == m->src && sg[i].group == m->group)
			e = &sg[i];
	bool down = false;
	for (int i = 0; e && i < e->noifs; i++)
		down |= e->oifs[i] == ifindex;
	if (!down) {
		H.st.notdown++;
		return false;
	}
	struct cand *c = find(m->src, m->group, ifindex, from);
	if (m->flags & GC_LMS_HIER_LEAVE) {
		H.st.leaves++;
		if (!c)
			return false;
		*c = H.c[--H.n];
		return true;
	}
	H.st.accepted++;
	uint32_t hold = ntohl(m->hold_ms);
	hold = hold < 100 ? 100 : hold > 60000 ? 60000 : hold;
	bool changed = !c || c->replier != m->replier || c->cost != ntohl(m->cost);
	if (!c) {
		if (H.n == MAX_CANDS) {
			H.st.full++;
			refused(from, ifindex, "table_full");
			return false;
		}
		c = &H.c[H.n++];
	}
	*c = (struct cand){
		m->src, m->group, m->replier, from, ifindex, ntohl(m->cost), now + hold * 1000000ull
	};
	return changed;
}

bool lmsd_hier_input(const struct lmsd_sg *sg, int nsg)
{
	bool changed = false;
	uint64_t now = now_ns();

	for (int k = 0; k < 256 && H.fd >= 0; k++) {
		struct gc_lms_hier m;
		struct sockaddr_in from;
		char ctl[256];
		struct iovec iov = { &m, sizeof(m) };
		struct msghdr h = { .msg_name = &from,
				    .msg_namelen = sizeof(from),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };
		ssize_t n = recvmsg(H.fd, &h, MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0)
			break;
		uint32_t ifindex = 0;
		int ttl = -1;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;
				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				ifindex = (uint32_t)pi.ipi_ifindex;
			} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
				memcpy(&ttl, CMSG_DATA(c), sizeof(ttl));
			}
		}
		if (n != sizeof(m) || m.magic[0] != 'L' || m.magic[1] != 'H' ||
		    m.version != GC_LMS_HIER_VERSION || !ifindex || (m.flags & ~GC_LMS_HIER_LEAVE)) {
			H.st.bad++;
			if (log_enabled(LL_WARNING)) {
				char a[INET_ADDRSTRLEN] = "?";
				inet_ntop(AF_INET, &from.sin_addr, a, sizeof(a));
				log_limited(&lim_bad, "src=%s bytes=%zd ifindex=%u", a, n, ifindex);
			}
			continue;
		}
		changed |= take(&m, from.sin_addr.s_addr, ifindex, ttl, sg, nsg, now);
	}
	/* Expired reports: the replier (or the router below) went quiet. */
	for (int i = 0; i < H.n;) {
		if (H.c[i].expires_ns <= now) {
			H.st.expired++;
			H.c[i] = H.c[--H.n];
			changed = true;
		} else {
			i++;
		}
	}
	return changed;
}

bool lmsd_hier_best(const struct lmsd_sg *e, uint32_t cur_if, uint32_t cur_addr, uint32_t *ifindex,
		    uint32_t *replier, uint32_t *cost)
{
	const struct cand *b = NULL;

	for (int i = 0; i < H.n; i++) {
		const struct cand *c = &H.c[i];
		bool down = false;
		if (c->src != e->src || c->group != e->group)
			continue;
		for (int j = 0; j < e->noifs; j++)
			down |= e->oifs[j] == c->ifindex;
		if (!down)
			continue;
		bool cur = c->ifindex == cur_if && c->replier == cur_addr;
		if (!b || c->cost < b->cost ||
		    (c->cost == b->cost &&
		     (cur ||
		      (!(b->ifindex == cur_if && b->replier == cur_addr) &&
		       ntohl(c->replier) < ntohl(b->replier)))))
			b = c;
	}
	if (!b)
		return false;
	*ifindex = b->ifindex;
	*replier = b->replier;
	*cost = b->cost;
	return true;
}

void lmsd_hier_send(const struct lmsd_sg *e, uint32_t parent_addr, bool have, uint32_t replier,
		    uint32_t cost)
{
	struct gc_lms_hier m = { .magic = { 'L', 'H' },
				 .version = GC_LMS_HIER_VERSION,
				 .flags = have ? 0 : GC_LMS_HIER_LEAVE,
				 .src = e->src,
				 .group = e->group,
				 .replier = replier,
				 .cost = htonl(cost < UINT32_MAX ? cost + 1 : cost),
				 .hold_ms = htonl(H.hold_ms) };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(GC_LMS_HIER_PORT) };
	struct in_addr ifa = { parent_addr };

	if (H.fd < 0 || !parent_addr)
		return;
	to.sin_addr.s_addr = htonl(GC_LMS_HIER_GROUP);
	setsockopt(H.fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa));
	if (sendto(H.fd, &m, sizeof(m), 0, (struct sockaddr *)&to, sizeof(to)) == sizeof(m))
		H.st.sent_up++;
}

const struct lmsd_hier_stats *lmsd_hier_stats(void)
{
	return &H.st;
}
