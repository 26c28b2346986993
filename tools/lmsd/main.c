// SPDX-License-Identifier: MIT
/*
 * lmsd - the LMS router daemon (see lmsd(8)).
 *
 * Runs beside a real multicast routing daemon (smcroute, pimd) in the
 * router's network namespace.  It reads the kernel's multicast forwarding
 * state of the tables it is told (--table) over rtnetlink (nl.c), and again
 * as soon as the kernel says something changed; attaches LMS-FWD
 * (bpf/lms.bpf.c) to the ingress of every multicast interface (vif, tc.c),
 * and rewrites the program's maps: per interface its addresses and MAC, per
 * (S,G) the parent, the replier link (from the configuration, config.c, or
 * elected by LMS-HIER, hier.c) and the downstream interfaces.  It writes its
 * state and the drop counters as JSON.  SIGTERM or SIGINT: detach the
 * filters (only ours: other filters and the clsact qdisc stay) and exit 0.
 * SIGHUP: re-read the configuration.  Under systemd (Type=notify): READY=1
 * once the filters are attached, WATCHDOG=1 from the loop, RELOADING=1 and
 * READY=1 around a reload, STOPPING=1 (sdnotify.c).  --metrics: the counters,
 * per interface, for Prometheus over HTTP (promhttp.c), served from the same
 * poll loop.
 */
#include "lmsd.h"
#include "promhttp.h"
#include "log.h"
#include "sdnotify.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <getopt.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lms.h"
#include "lmsfwd.h"
/* bpftool's generated code mixes int and size_t: not ours to change */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include "lms.skel.h"
#pragma GCC diagnostic pop

static volatile sig_atomic_t stop, reload;
static bool verbose, provisional = true;

/* One interface LMS-FWD runs on: a vif (not a tunnel or register vif) of
 * one of the followed tables. */
struct lmsd_iface {
	uint32_t ifindex, table;
	int vif;
	char name[IF_NAMESIZE];
	struct gc_lms_if lif; /* lms_ifs's value: the primary address, MAC, flags */
};

static struct {
	struct lms *skel;
	const char *config_path, *state_path;
	struct lmsd_config cfg;
	struct lmsd_kstate k; /* as read from the kernel */
	struct lmsd_iface ifs[LMSD_MAX_IFS];
	int nifs;
	struct gc_lms_route route[LMSD_MAX_SG];
	const char *route_note[LMSD_MAX_SG];	     /* why a configured replier is not used */
	struct gc_lms_below below[GC_LMS_MAX_BELOW]; /* lms_below's keys, from the main table */
	int nbelow;
	uint32_t attached[LMSD_MAX_IFS];
	int nattached;
	uint32_t refused[LMSD_MAX_IFS]; /* someone else's filter holds our place (said once) */
	int nrefused;
	int hier_fd, nl_fd;
	struct {
		uint32_t src, group;
	} announced[LMSD_MAX_SG]; /* (S,G) reported up, with a replier */
	int nannounced;
	uint64_t reads, overruns,
		stale; /* kernel state read; notifications lost; filters left by a dead lmsd */
	uint64_t gone[GC_LMS_NSTATS]; /* lms_stats's counts of interfaces that no longer exist */
	uint64_t start_ns;
	uint64_t http_ok, http_not_found, http_bad_method; /* --metrics requests */
} D;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload = 1;
	else
		stop = 1;
}

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	int lv = level == LIBBPF_WARN ? LL_WARNING : level == LIBBPF_INFO ? LL_INFO : LL_DEBUG;
	if ((level == LIBBPF_DEBUG && !verbose) || !log_enabled(lv))
		return 0;
	char m[1024];
	int n = vsnprintf(m, sizeof(m), fmt, ap);
	size_t len = strlen(m);
	while (len && m[len - 1] == '\n')
		m[--len] = '\0';
	log_event(lv, "libbpf", "msg=%s", m);
	return n;
}

/* ---- attaching ----------------------------------------------------------- */

static bool in_list(const uint32_t *v, int n, uint32_t x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* Attach to every LMS interface, detach from those no longer vifs. */
static void sync_attach(void)
{
	uint32_t want[LMSD_MAX_IFS];
	int nw = 0;

	for (int i = 0; i < D.nifs; i++)
		want[nw++] = D.ifs[i].ifindex;
	for (int i = 0; i < D.nattached;) {
		if (in_list(want, nw, D.attached[i])) {
			i++;
			continue;
		}
		lmsd_tc_detach(D.attached[i]);
		D.attached[i] = D.attached[--D.nattached];
	}
	for (int i = 0; i < nw; i++) {
		if (in_list(D.attached, D.nattached, want[i]))
			continue;
		int r = lmsd_tc_attach(want[i], bpf_program__fd(D.skel->progs.gc_lms_fwd));
		if (!r) {
			D.attached[D.nattached++] = want[i];
			continue;
		}
		if (in_list(D.refused, D.nrefused, want[i]))
			continue;
		if (r == -EBUSY)
			log_event(LL_WARNING, "attach_refused",
				  "ifindex=%u tc_prio=0x%x tc_handle=%d reason=%s", want[i],
				  GC_LMS_TC_PRIO, GC_LMS_TC_HANDLE,
				  "the filter there is not lmsd's: left alone, LMS not attached there");
		else
			log_event(LL_ERR, "attach_failed", "ifindex=%u error=%s", want[i], strerror(-r));
		if (D.nrefused < LMSD_MAX_IFS)
			D.refused[D.nrefused++] = want[i];
	}
}

static struct lmsd_iface *iface(uint32_t ifindex)
{
	for (int i = 0; i < D.nifs; i++)
		if (D.ifs[i].ifindex == ifindex)
			return &D.ifs[i];
	return NULL;
}

/* Find what an earlier lmsd left (our filter on any interface, before this
 * lmsd attached anything) and remove it from the interfaces this one will
 * not use; on those it will, attaching replaces it.  With use false
 * (--flush), remove it everywhere.  Returns how many were found. */
static int sweep(bool use)
{
	int n = 0;

	for (int i = 0; i < D.k.nlinks; i++) {
		uint32_t ifindex = D.k.links[i].ifindex;
		if (lmsd_tc_holder(ifindex) != 1)
			continue;
		n++;
		if (!use || !iface(ifindex))
			lmsd_tc_detach(ifindex);
	}
	return n;
}

/* ---- LMS-FWD's counters (lms_stats: per arrival interface, per CPU) ------- */

/* ifindex's counts summed over the CPUs into n; false (n zeros) when it has none. */
static bool if_counts(uint32_t ifindex, uint64_t n[GC_LMS_NSTATS])
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(D.skel->maps.lms_stats);
	struct gc_lms_counts v[ncpu > 0 ? ncpu : 1];

	memset(n, 0, GC_LMS_NSTATS * sizeof(n[0]));
	if (ncpu <= 0 || bpf_map_lookup_elem(fd, &ifindex, v))
		return false;
	for (int i = 0; i < ncpu; i++)
		for (int k = 0; k < GC_LMS_NSTATS; k++)
			n[k] += v[i].n[k];
	return true;
}

/* The interfaces lms_stats has counts of, into keys (at most cap); how many. */
static int counted_ifs(uint32_t *keys, int cap)
{
	int fd = bpf_map__fd(D.skel->maps.lms_stats), n = 0;
	uint32_t key, *prev = NULL;

	while (n < cap && !bpf_map_get_next_key(fd, prev, &key)) {
		keys[n++] = key;
		prev = &keys[n - 1];
	}
	return n;
}

static bool link_exists(uint32_t ifindex)
{
	for (int i = 0; i < D.k.nlinks; i++)
		if (D.k.links[i].ifindex == ifindex)
			return true;
	return false;
}

/* Forget the counts of interfaces that no longer exist (their ifindex may
 * come back as another interface), keeping them in the totals. */
static void prune_counts(void)
{
	uint32_t keys[GC_LMS_MAX_STAT_IFS];
	uint64_t n[GC_LMS_NSTATS];
	int nk = counted_ifs(keys, GC_LMS_MAX_STAT_IFS);

	for (int i = 0; i < nk; i++) {
		if (link_exists(keys[i]) || !if_counts(keys[i], n))
			continue;
		if (bpf_map_delete_elem(bpf_map__fd(D.skel->maps.lms_stats), &keys[i]))
			continue;
		for (int k = 0; k < GC_LMS_NSTATS; k++)
			D.gone[k] += n[k];
	}
}

/* ---- maps ---------------------------------------------------------------- */

/* Delete every key of map fd for which keep(key) is false. */
static void prune(int fd, size_t ksz, bool (*keep)(const void *key))
{
	char key[32], next[32], doomed[64][32];
	int nd;

	do { /* in rounds: deleting while walking a hash map restarts the walk */
		nd = 0;
		void *prev = NULL;
		while (nd < 64 && !bpf_map_get_next_key(fd, prev, next)) {
			memcpy(key, next, ksz);
			prev = key;
			if (!keep(key))
				memcpy(doomed[nd++], key, ksz);
		}
		int deleted = 0;
		for (int i = 0; i < nd; i++)
			deleted += !bpf_map_delete_elem(fd, doomed[i]);
		if (!deleted)
			break; /* nothing could go: do not walk again */
	} while (nd == 64);
}

static bool keep_if(const void *k)
{
	uint32_t ifindex;

	memcpy(&ifindex, k, 4);
	const struct lmsd_iface *f = iface(ifindex);
	return f && f->lif.addr;
}

/* lms_local: every address of every LMS interface (secondary ones too). */
static bool local_addr(uint32_t a, uint32_t *ifindex)
{
	for (int i = 0; i < D.k.naddrs; i++)
		if (D.k.addrs[i].addr == a && iface(D.k.addrs[i].ifindex)) {
			*ifindex = D.k.addrs[i].ifindex;
			return true;
		}
	return false;
}

static bool keep_local(const void *k)
{
	uint32_t a, ifindex;

	memcpy(&a, k, 4);
	return local_addr(a, &ifindex);
}

static bool keep_below(const void *k)
{
	struct gc_lms_below b;

	memcpy(&b, k, sizeof(b));
	for (int i = 0; i < D.nbelow; i++)
		if (!memcmp(&D.below[i], &b, sizeof(b)))
			return true;
	return false;
}

static bool keep_route(const void *k)
{
	struct gc_lms_sg sg;

	memcpy(&sg, k, sizeof(sg));
	for (int i = 0; i < D.k.nsg; i++)
		if (D.k.sg[i].src == sg.src && D.k.sg[i].group == sg.group)
			return true;
	return false;
}

static bool keep_down(const void *k)
{
	struct gc_lms_down d;

	memcpy(&d, k, sizeof(d));
	for (int i = 0; i < D.k.nsg; i++)
		if (D.k.sg[i].src == d.src && D.k.sg[i].group == d.group &&
		    in_list(D.k.sg[i].oifs, D.k.sg[i].noifs, d.ifindex))
			return true;
	return false;
}

static uint32_t prefix_mask(uint8_t len)
{
	return len ? htonl(~0u << (32 - (len > 32 ? 32 : len))) : 0;
}

bool lmsd_addr_of(uint32_t ifindex, uint32_t a)
{
	for (int i = 0; i < D.k.naddrs; i++)
		if (D.k.addrs[i].ifindex == ifindex && D.k.addrs[i].addr == a)
			return a != 0;
	return false;
}

bool lmsd_onlink(uint32_t ifindex, uint32_t from)
{
	bool on = false;

	for (int i = 0; i < D.k.naddrs; i++) {
		const struct lmsd_addr *a = &D.k.addrs[i];
		if (a->ifindex != ifindex)
			continue;
		if (a->addr == from)
			return false; /* ourselves */
		uint32_t m = prefix_mask(a->prefixlen);
		on |= a->prefixlen < 32 && (from & m) == (a->addr & m);
	}
	return on;
}

/* The LMS interfaces, from the vifs of the followed tables, with their
 * primary address (a turning point's tpaddr: the first address that is not
 * secondary) and MAC.  An interface that carries the gateway of a main-table
 * route is a link with routers: they are below (or above) there, and a
 * provisional mark arriving over it may be theirs.  On a link with no
 * gateway only hosts send, and a provisional mark from it is forged.  The
 * destinations of those routes (lms_below) are what such a mark may name:
 * the marking router's address on its own lower link lies in one of them.  A
 * default route is left out: it would let a mark name any address. */
static void build_ifs(void)
{
	D.nifs = D.nbelow = 0;
	for (int i = 0; i < D.k.nvifs; i++) {
		const struct lmsd_vif *v = &D.k.vifs[i];
		if (!v->ifindex || iface(v->ifindex) || D.nifs == LMSD_MAX_IFS)
			continue;
		struct lmsd_iface *f = &D.ifs[D.nifs++];
		memset(f, 0, sizeof(*f));
		f->ifindex = v->ifindex;
		f->table = v->table;
		f->vif = v->vif;
		snprintf(f->name, sizeof(f->name), "%u", v->ifindex);
		for (int j = 0; j < D.k.nlinks; j++) {
			if (D.k.links[j].ifindex != v->ifindex)
				continue;
			memcpy(f->name, D.k.links[j].name, sizeof(f->name));
			memcpy(f->lif.mac, D.k.links[j].mac, 6);
		}
		for (int j = 0; j < D.k.naddrs && !f->lif.addr; j++)
			if (D.k.addrs[j].ifindex == v->ifindex && !D.k.addrs[j].secondary)
				f->lif.addr = D.k.addrs[j].addr;
		for (int j = 0; j < D.k.ngws; j++) {
			const struct lmsd_gw *g = &D.k.gws[j];
			if (g->ifindex != v->ifindex)
				continue;
			f->lif.flags |= GC_LMS_IF_ROUTERS;
			if (!g->prefixlen || D.nbelow == GC_LMS_MAX_BELOW)
				continue;
			D.below[D.nbelow++] =
				(struct gc_lms_below){ 32 + (__u32)g->prefixlen, v->ifindex,
						       g->dst & prefix_mask(g->prefixlen) };
		}
	}
}

/* Report (S,G)'s elected replier to the parent router, or withdraw the one
 * reported before (once).  Static repliers stay local. */
static void announce(const struct lmsd_sg *e, bool have, uint32_t replier, uint32_t cost)
{
	uint32_t parent_addr = 0;
	int k;
	const struct lmsd_iface *p = iface(e->parent);

	if (p)
		parent_addr = p->lif.addr;
	for (k = 0; k < D.nannounced; k++)
		if (D.announced[k].src == e->src && D.announced[k].group == e->group)
			break;
	if (have) {
		lmsd_hier_send(e, parent_addr, true, replier, cost);
		if (k == D.nannounced && k < LMSD_MAX_SG) {
			D.announced[k].src = e->src;
			D.announced[k].group = e->group;
			D.nannounced++;
		}
	} else if (k < D.nannounced) {
		lmsd_hier_send(e, parent_addr, false, 0, 0);
		D.announced[k] = D.announced[--D.nannounced];
	}
}

/* Rewrite the maps from what was read last, the configuration and LMS-HIER;
 * report the elected repliers up. */
static void apply(void)
{
	int fifs = bpf_map__fd(D.skel->maps.lms_ifs), flocal = bpf_map__fd(D.skel->maps.lms_local);
	int froutes = bpf_map__fd(D.skel->maps.lms_routes), fdown = bpf_map__fd(D.skel->maps.lms_down);
	int fbelow = bpf_map__fd(D.skel->maps.lms_below);
	uint32_t ifl[LMSD_MAX_IFS];

	for (int i = 0; i < D.nifs; i++) {
		ifl[i] = D.ifs[i].ifindex;
		if (D.ifs[i].lif.addr)
			bpf_map_update_elem(fifs, &D.ifs[i].ifindex, &D.ifs[i].lif, BPF_ANY);
	}
	lmsd_hier_join(ifl, D.nifs);
	for (int i = 0; i < D.k.naddrs; i++)
		if (iface(D.k.addrs[i].ifindex))
			bpf_map_update_elem(flocal, &D.k.addrs[i].addr, &D.k.addrs[i].ifindex, BPF_ANY);
	for (int i = 0; i < D.nbelow; i++) {
		__u8 one = 1;
		bpf_map_update_elem(fbelow, &D.below[i], &one, BPF_ANY);
	}
	sync_attach();

	for (int i = 0; i < D.k.nsg; i++) {
		struct lmsd_sg *e = &D.k.sg[i];
		const struct lmsd_replier *c = lmsd_config_find(&D.cfg, e->src, e->group);
		struct gc_lms_route *r = &D.route[i];
		struct gc_lms_sg key = { e->src, e->group };
		uint32_t ifi = c ? if_nametoindex(c->ifname) : 0;

		/* The source is the fallback replier (a request goes up,
		 * marked provisionally here unless --no-provisional). */
		*r = (struct gc_lms_route){ e->parent, e->parent, e->src, 0 };
		D.route_note[i] = c ? NULL : "no replier configured";
		if (c && !ifi)
			D.route_note[i] = "replier interface does not exist";
		else if (c && !in_list(e->oifs, e->noifs, ifi))
			D.route_note[i] = "replier interface is not downstream";
		else if (c)
			*r = (struct gc_lms_route){ e->parent, ifi, c->addr, c->cost };
		/* A replier elected by LMS-HIER replaces the static one. */
		struct gc_lms_route old = { 0 };
		uint32_t hif, haddr, hcost;
		bpf_map_lookup_elem(froutes, &key, &old);
		bool elected = lmsd_hier_best(e, old.replier, old.replier_addr, &hif, &haddr, &hcost);
		if (elected) {
			*r = (struct gc_lms_route){ e->parent, hif, haddr, hcost };
			D.route_note[i] = "elected (LMS-HIER)";
		}
		announce(e, elected, haddr, hcost);
		bpf_map_update_elem(froutes, &key, r, BPF_ANY);
		for (int j = 0; j < e->noifs; j++) {
			struct gc_lms_down d = { e->src, e->group, e->oifs[j] };
			__u8 one = 1;
			bpf_map_update_elem(fdown, &d, &one, BPF_ANY);
		}
	}
	prune(froutes, sizeof(struct gc_lms_sg), keep_route);
	prune(fdown, sizeof(struct gc_lms_down), keep_down);
	prune(fifs, 4, keep_if);
	prune(flocal, 4, keep_local);
	prune(fbelow, sizeof(struct gc_lms_below), keep_below);
	prune_counts();
}

/* Read again what changed (LMSD_NL_*); what could not be read stays pending. */
static int kread(int what)
{
	if (!what)
		return 0;
	if (lmsd_nl_read(&D.k, what)) {
		log_event(LL_WARNING, "rtnetlink_read_failed", "error=%s then=%s", strerror(errno),
			  "tried again");
		return what;
	}
	D.reads++;
	build_ifs();
	return 0;
}

/* ---- state as JSON --------------------------------------------------------- */

static const char *ifname(uint32_t ifindex, char *buf)
{
	if (!if_indextoname(ifindex, buf))
		snprintf(buf, IF_NAMESIZE, "%u", ifindex);
	return buf;
}

static const char *ip4(uint32_t a, char *buf)
{
	return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static void write_state(FILE *f)
{
	static const char *names[GC_LMS_NSTATS] = { GC_LMS_STAT_NAMES };
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN], c[INET_ADDRSTRLEN], n1[IF_NAMESIZE],
		n2[IF_NAMESIZE];
	uint32_t keys[GC_LMS_MAX_STAT_IFS];
	uint64_t sum[GC_LMS_NSTATS], n[GC_LMS_NSTATS];

	fprintf(f, "{\"provisional\": %s,\n \"kernel\": {\"tables\": [", provisional ? "true" : "false");
	for (int i = 0; i < D.k.ntables; i++)
		fprintf(f, "%s%u", i ? ", " : "", D.k.tables[i]);
	fprintf(f,
		"], \"routes\": %d, \"star_g\": %d, \"unresolved\": %d, \"shadowed\": %d, "
		"\"full\": %d, \"reads\": %llu, \"overruns\": %llu, \"stale_filters\": %llu},\n "
		"\"interfaces\": [",
		D.k.nsg, D.k.star, D.k.unresolved, D.k.shadowed, D.k.full, (unsigned long long)D.reads,
		(unsigned long long)D.overruns, (unsigned long long)D.stale);
	for (int i = 0; i < D.nifs; i++) {
		const struct lmsd_iface *fi = &D.ifs[i];
		const __u8 *m = fi->lif.mac;
		fprintf(f,
			"%s\n  {\"vif\": %d, \"table\": %u, \"ifindex\": %u, \"name\": \"%s\", \"addr\": \"%s\", "
			"\"addrs\": [",
			i ? "," : "", fi->vif, fi->table, fi->ifindex, fi->name, ip4(fi->lif.addr, a));
		for (int j = 0, na = 0; j < D.k.naddrs; j++)
			if (D.k.addrs[j].ifindex == fi->ifindex)
				fprintf(f, "%s\"%s/%u\"", na++ ? ", " : "",
					ip4(D.k.addrs[j].addr, a), D.k.addrs[j].prefixlen);
		fprintf(f,
			"], \"mac\": \"%02x:%02x:%02x:%02x:%02x:%02x\", \"attached\": %s, \"routers\": %s, "
			"\"below\": [",
			m[0], m[1], m[2], m[3], m[4], m[5],
			in_list(D.attached, D.nattached, fi->ifindex) ? "true" : "false",
			fi->lif.flags & GC_LMS_IF_ROUTERS ? "true" : "false");
		for (int j = 0, nb = 0; j < D.nbelow; j++)
			if (D.below[j].ifindex == fi->ifindex)
				fprintf(f, "%s\"%s/%u\"", nb++ ? ", " : "", ip4(D.below[j].addr, a),
					D.below[j].prefixlen - 32);
		fprintf(f, "]}");
	}
	fprintf(f, "],\n \"routes\": [");
	for (int i = 0; i < D.k.nsg; i++) {
		const struct gc_lms_route *r = &D.route[i];
		const struct lmsd_sg *e = &D.k.sg[i];
		fprintf(f,
			"%s\n  {\"source\": \"%s\", \"group\": \"%s\", \"table\": %u, \"parent\": \"%s\", "
			"\"replier\": \"%s\", \"replier_addr\": \"%s\", \"cost\": %u, \"fallback\": %s, "
			"\"note\": \"%s\", \"downstream\": [",
			i ? "," : "", ip4(e->src, a), ip4(e->group, b), e->table,
			ifname(r->parent, n1), ifname(r->replier, n2), ip4(r->replier_addr, c),
			r->cost, r->replier == r->parent ? "true" : "false",
			D.route_note[i] ? D.route_note[i] : "");
		for (int j = 0; j < e->noifs; j++)
			fprintf(f, "%s\"%s\"", j ? ", " : "", ifname(e->oifs[j], n1));
		fprintf(f, "]}");
	}
	const struct lmsd_hier_stats *h = lmsd_hier_stats();
	fprintf(f,
		"],\n \"hier\": {\"accepted\": %llu, \"leaves\": %llu, \"expired\": %llu, "
		"\"sent_up\": %llu, \"ttl\": %llu, \"offlink\": %llu, \"rpf\": %llu, \"notdown\": %llu, "
		"\"limited\": %llu, \"bad\": %llu, \"full\": %llu}",
		(unsigned long long)h->accepted, (unsigned long long)h->leaves,
		(unsigned long long)h->expired, (unsigned long long)h->sent_up,
		(unsigned long long)h->ttl, (unsigned long long)h->offlink, (unsigned long long)h->rpf,
		(unsigned long long)h->notdown, (unsigned long long)h->limited,
		(unsigned long long)h->bad, (unsigned long long)h->full);
	/* over every interface, those gone included */
	memcpy(sum, D.gone, sizeof(sum));
	for (int i = 0, nk = counted_ifs(keys, GC_LMS_MAX_STAT_IFS); i < nk; i++)
		if (if_counts(keys[i], n))
			for (int k = 0; k < GC_LMS_NSTATS; k++)
				sum[k] += n[k];
	fprintf(f, ",\n \"stats\": {");
	for (int k = 0; k < GC_LMS_NSTATS; k++)
		fprintf(f, "%s\"%s\": %llu", k ? ", " : "", names[k], (unsigned long long)sum[k]);
	fprintf(f, "}}\n");
}

/* Replace the state file atomically, so a reader never sees half of it. */
static void save_state(void)
{
	char tmp[4096];
	FILE *f;

	if (!D.state_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", D.state_path);
	f = fopen(tmp, "w");
	if (!f) {
		log_event(LL_ERR, "state_file_failed", "path=%s error=%s", tmp, strerror(errno));
		return;
	}
	write_state(f);
	if (fclose(f) || rename(tmp, D.state_path))
		log_event(LL_ERR, "state_file_failed", "path=%s error=%s", D.state_path, strerror(errno));
}

/* ---- --metrics: the Prometheus text format ------------------------------------ */

#define P "groupcast_lmsd_"

/* LMS-FWD's counters by kind: forwarded (what), dropped (reason), other. */
enum { K_FWD, K_DROP, K_PROVISIONAL };
static const struct {
	int kind;
	const char *label;
} stat_metric[GC_LMS_NSTATS] = {
	[GC_LMS_REQ_TURNED] = { K_FWD, "request_turned" },
	[GC_LMS_REQ_UP] = { K_FWD, "request_up" },
	[GC_LMS_REQ_DOWN] = { K_FWD, "request_down" },
	[GC_LMS_DMCAST] = { K_FWD, "dmcast" },
	[GC_LMS_REQ_PROVISIONAL] = { K_PROVISIONAL, NULL },
	[GC_LMS_DROP_BAD_LEN] = { K_DROP, "bad_len" },
	[GC_LMS_DROP_TRUNCATED] = { K_DROP, "truncated" },
	[GC_LMS_DROP_NO_STATE] = { K_DROP, "no_state" },
	[GC_LMS_DROP_BAD_IF] = { K_DROP, "bad_if" },
	[GC_LMS_DROP_NOT_DOWNSTREAM] = { K_DROP, "not_downstream" },
	[GC_LMS_DROP_FORGED] = { K_DROP, "forged" },
	[GC_LMS_DROP_TTL] = { K_DROP, "ttl" },
	[GC_LMS_DROP_PREMARKED] = { K_DROP, "premarked" },
	[GC_LMS_DROP_BAD_INNER] = { K_DROP, "bad_inner" },
	[GC_LMS_DROP_UPSTREAM] = { K_DROP, "upstream" },
	[GC_LMS_DROP_FORGED_MARK] = { K_DROP, "forged_mark" },
	[GC_LMS_DROP_MARK_NOT_BELOW] = { K_DROP, "mark_not_below" },
	[GC_LMS_DROP_TWO_LMS] = { K_DROP, "two_lms" },
	[GC_LMS_DROP_FRAGMENT] = { K_DROP, "fragment" },
	[GC_LMS_DROP_INNER_SRC] = { K_DROP, "inner_src" },
	[GC_LMS_DROP_INNER_PROTO] = { K_DROP, "inner_proto" },
	[GC_LMS_DROP_INNER_CSUM] = { K_DROP, "inner_csum" },
};

/* The interfaces with counters: the LMS interfaces (zeros until their first
 * packet), then any other lms_stats has counts of. */
static int metric_ifs(uint32_t *out)
{
	uint32_t keys[GC_LMS_MAX_STAT_IFS];
	int n = 0, nk = counted_ifs(keys, GC_LMS_MAX_STAT_IFS);

	for (int i = 0; i < D.nifs; i++)
		out[n++] = D.ifs[i].ifindex;
	for (int i = 0; i < nk; i++)
		if (!in_list(out, n, keys[i]) && n < LMSD_MAX_IFS + GC_LMS_MAX_STAT_IFS)
			out[n++] = keys[i];
	return n;
}

static void write_if_label(FILE *f, uint32_t ifindex)
{
	char name[IF_NAMESIZE];
	fputs("interface=", f);
	prom_label_value(f, ifname(ifindex, name));
}

static void write_counts(FILE *f, int kind, const char *name, const char *label,
			 const uint32_t *ifs, int nifs, uint64_t (*n)[GC_LMS_NSTATS])
{
	for (int i = 0; i < nifs; i++)
		for (int k = 0; k < GC_LMS_NSTATS; k++) {
			if (stat_metric[k].kind != kind)
				continue;
			fprintf(f, P "%s{", name);
			write_if_label(f, ifs[i]);
			if (label)
				fprintf(f, ",%s=\"%s\"", label, stat_metric[k].label);
			fprintf(f, "} %llu\n", (unsigned long long)n[i][k]);
		}
}

static void metrics_write(void *ctx, FILE *f)
{
	(void)ctx;
	static uint32_t ifs[LMSD_MAX_IFS + GC_LMS_MAX_STAT_IFS];
	static uint64_t n[LMSD_MAX_IFS + GC_LMS_MAX_STAT_IFS][GC_LMS_NSTATS];
	int nifs = metric_ifs(ifs);

	for (int i = 0; i < nifs; i++)
		(void)if_counts(ifs[i], n[i]);
	prom_write_process(f, P, D.start_ns);
	prom_family(f, P, "interfaces", "gauge", "LMS interfaces: the vifs of the followed tables.");
	prom_sample(f, P, "interfaces", NULL, (uint64_t)D.nifs);
	prom_family(f, P, "interface_attached", "gauge",
		    "1 when LMS-FWD is attached to the LMS interface, 0 when it could not be.");
	for (int i = 0; i < D.nifs; i++) {
		fputs(P "interface_attached{", f);
		write_if_label(f, D.ifs[i].ifindex);
		fprintf(f, "} %d\n", in_list(D.attached, D.nattached, D.ifs[i].ifindex));
	}
	prom_family(f, P, "routes", "gauge", "(S,G) routes followed (LMS trees).");
	prom_sample(f, P, "routes", NULL, (uint64_t)D.k.nsg);
	prom_family(f, P, "kernel_reads_total", "counter", "Reads of the kernel's state over rtnetlink.");
	prom_sample(f, P, "kernel_reads_total", NULL, D.reads);
	prom_family(f, P, "netlink_overruns_total", "counter",
		    "Times rtnetlink notifications were lost (the state was read again).");
	prom_sample(f, P, "netlink_overruns_total", NULL, D.overruns);
	prom_family(f, P, "forwarded_packets_total", "counter",
		    "Packets LMS-FWD forwarded, by the interface they arrived on and what it did.");
	write_counts(f, K_FWD, "forwarded_packets_total", "action", ifs, nifs, n);
	prom_family(f, P, "provisional_marks_total", "counter",
		    "Requests sent up marked as a provisional turning point here (part of action=\"request_up\").");
	write_counts(f, K_PROVISIONAL, "provisional_marks_total", NULL, ifs, nifs, n);
	prom_family(f, P, "dropped_packets_total", "counter",
		    "Packets LMS-FWD dropped, by the interface they arrived on and reason (lmsd(8)).");
	write_counts(f, K_DROP, "dropped_packets_total", "reason", ifs, nifs, n);
	const struct lmsd_hier_stats *h = lmsd_hier_stats();
	prom_family(f, P, "hier_reports_total", "counter", "LMS-HIER replier reports, by event.");
	prom_sample(f, P, "hier_reports_total", "event=\"accepted\"", h->accepted);
	prom_sample(f, P, "hier_reports_total", "event=\"leave\"", h->leaves);
	prom_sample(f, P, "hier_reports_total", "event=\"expired\"", h->expired);
	prom_sample(f, P, "hier_reports_total", "event=\"sent_up\"", h->sent_up);
	prom_family(f, P, "hier_reports_refused_total", "counter",
		    "LMS-HIER replier reports refused, by reason (rate_limited: over the per-interface rate).");
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"ttl\"", h->ttl);
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"offlink\"", h->offlink);
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"rpf\"", h->rpf);
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"not_downstream\"", h->notdown);
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"rate_limited\"", h->limited);
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"bad\"", h->bad);
	prom_sample(f, P, "hier_reports_refused_total", "reason=\"full\"", h->full);
	prom_write_requests(f, P,
			    (struct prom_requests){ &D.http_ok, &D.http_not_found, &D.http_bad_method });
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: lmsd [-c CONFIG] [-s STATEFILE] [-T TABLE]... [-t MS] [--hold MS] [--no-provisional]\n"
		"            [--metrics [ADDR:]PORT] [-v] [--once] [--check] [--flush]\n"
		"  -c, --config FILE   static repliers: replier SOURCE GROUP IFNAME ADDRESS [COST]\n"
		"  -s, --state FILE    write interfaces, routes and counters as JSON at every change\n"
		"  -T, --table ID      follow multicast routing table ID (repeatable; default: the\n"
		"                      default table, 253; 0 names it too, as in smcrouted/pimd -t)\n"
		"  -t, --interval MS   LMS-HIER: report up and expire reports every MS ms (default 1000);\n"
		"                      the kernel's routes are followed as they change, not every MS\n"
		"      --hold MS       hold time of the replier reports sent up (default 3 intervals)\n"
		"      --no-provisional  the thesis's forwarding: no provisional turning points\n"
		"                      (a request sent up stays unmarked; any mark from below is forged)\n"
		"      --metrics [ADDR:]PORT  serve the counters for Prometheus on http://ADDR:PORT/metrics\n"
		"                      (ADDR: 127.0.0.1 unless given; [IPv6]:PORT)\n"
		"      --once          read once, print the state to stdout, detach, exit\n"
		"      --check         only check the configuration file\n"
		"      --flush         remove the filters a killed lmsd left in this namespace, exit\n"
		"  -v, --verbose       libbpf debug messages (implies --log-level debug)\n"
		"      --log-level LEVEL  err, warning, notice (default), info or debug: the\n"
		"                      least important log line written (lmsd(8) LOGS)\n");
}

static int parse_ms(const char *opt, const char *arg, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(arg, &end, 10);
	if (errno || *end || end == arg || *out < lo || *out > hi) {
		fprintf(stderr, "lmsd: %s %s: not a number of ms in %ld..%ld\n", opt, arg, lo, hi);
		return -1;
	}
	return 0;
}

static int add_table(const char *arg)
{
	char *end;
	unsigned long id;

	errno = 0;
	id = strtoul(arg, &end, 10);
	if (errno || *end || end == arg || *arg == '-' || id > 999999999) {
		fprintf(stderr, "lmsd: --table %s: not a table ID in 0..999999999\n", arg);
		return -1;
	}
	if (!id)
		id = RT_TABLE_DEFAULT; /* smcrouted's and pimd's 0: no MRT_TABLE, the default table */
	for (int i = 0; i < D.k.ntables; i++)
		if (D.k.tables[i] == id) {
			fprintf(stderr, "lmsd: --table %s: named twice\n", arg);
			return -1;
		}
	if (D.k.ntables == LMSD_MAX_TABLES) {
		fprintf(stderr, "lmsd: --table %s: at most %d tables\n", arg, LMSD_MAX_TABLES);
		return -1;
	}
	D.k.tables[D.k.ntables++] = (uint32_t)id;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* SIGHUP: the config file again; a bad one keeps the running configuration
 * and says why, one line per error. */
static void reload_config(void)
{
	struct lmsd_config *c = malloc(sizeof(*c));
	char *err = NULL;
	size_t errlen = 0;
	FILE *ef = open_memstream(&err, &errlen);
	if (c && ef && D.config_path && !lmsd_config_read(D.config_path, c, ef)) {
		D.cfg = *c;
		log_event(LL_NOTICE, "reloaded", "config=%s repliers=%zu", D.config_path, D.cfg.n);
	} else if (!D.config_path) {
		log_event(LL_NOTICE, "reloaded", "config=none");
	} else if (ef) {
		fflush(ef);
		for (char *save = NULL, *l = strtok_r(err, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save))
			log_event(LL_ERR, "reload_failed", "error=%s config=%s",
				  strncmp(l, "lmsd: ", 6) ? l : l + 6,
				  "the configuration in force stays");
	}
	if (ef)
		fclose(ef);
	free(err);
	free(c);
}

/* --flush: every filter of ours in this namespace, whoever left it. */
static int flush(void)
{
	if (lmsd_nl_read(&D.k, LMSD_NL_LINKS)) {
		log_event(LL_ERR, "fatal", "msg=%s error=%s", "--flush: listing the interfaces",
			  strerror(errno));
		return 1;
	}
	int n = sweep(false);
	printf("lmsd: removed %d LMS-FWD filter(s)\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "config", required_argument, 0, 'c' },
					      { "state", required_argument, 0, 's' },
					      { "interval", required_argument, 0, 't' },
					      { "table", required_argument, 0, 'T' },
					      { "once", no_argument, 0, 'o' },
					      { "check", no_argument, 0, 'k' },
					      { "flush", no_argument, 0, 'F' },
					      { "verbose", no_argument, 0, 'v' },
					      { "hold", required_argument, 0, 'H' },
					      { "no-provisional", no_argument, 0, 'P' },
					      { "metrics", required_argument, 0, 'M' },
					      { "help", no_argument, 0, 'h' },
					      { "log-level", required_argument, 0, 'L' },
					      { 0, 0, 0, 0 } };
	long interval = 1000, hold_ms = 0;
	bool once = false, check = false, do_flush = false;
	const char *metrics = NULL;
	struct sockaddr_storage metrics_addr;
	char aerr[160];
	int ch, mfd = -1, log_level = -1;

	log_init();
	while ((ch = getopt_long(argc, argv, "c:s:t:T:vh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': D.config_path = optarg; break;
		case 's': D.state_path = optarg; break;
		case 't':
			if (parse_ms("--interval", optarg, 10, 3600000, &interval))
				return 2;
			break;
		case 'H':
			if (parse_ms("--hold", optarg, 100, 60000, &hold_ms))
				return 2;
			break;
		case 'T':
			if (add_table(optarg))
				return 2;
			break;
		case 'o': once = true; break;
		case 'P': provisional = false; break;
		case 'M':
			if (prom_parse_addr(optarg, &metrics_addr, aerr, sizeof(aerr))) {
				fprintf(stderr, "lmsd: --metrics '%s': %s\n", optarg, aerr);
				return 2;
			}
			metrics = optarg;
			break;
		case 'k': check = true; break;
		case 'F': do_flush = true; break;
		case 'v': verbose = true; break;
		case 'L':
			log_level = log_level_parse(optarg);
			if (log_level < 0) {
				fprintf(stderr, "lmsd: --log-level %s: not one of " LOG_LEVEL_NAMES "\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lmsd: unexpected argument %s\n", argv[optind]);
		return 2;
	}
	log_threshold = log_level >= 0 ? log_level : verbose ? LL_DEBUG : LOG_DEFAULT_LEVEL;
	if (!D.k.ntables)
		D.k.tables[D.k.ntables++] = RT_TABLE_DEFAULT;
	if (D.config_path && lmsd_config_read(D.config_path, &D.cfg, stderr))
		return 2;
	if (check) {
		if (!D.config_path) {
			fprintf(stderr, "lmsd: --check needs --config FILE\n");
			return 2;
		}
		printf("lmsd: %s: %zu replier(s)\n", D.config_path, D.cfg.n);
		return 0;
	}
	libbpf_set_print(libbpf_log);
	if (lmsd_lock() < 0) {
		if (errno == EADDRINUSE)
			log_event(LL_ERR, "fatal", "msg=%s",
				  "another lmsd runs in this network namespace");
		else
			log_event(LL_ERR, "fatal", "msg=%s error=%s", "lock", strerror(errno));
		return 1;
	}
	if (do_flush)
		return flush();
	if (metrics && !once && (mfd = prom_listen(&metrics_addr)) < 0) {
		fprintf(stderr, "lmsd: --metrics: cannot listen on '%s': %s\n", metrics, strerror(errno));
		return 1;
	}
	D.start_ns = now_ms() * 1000000u;

	D.skel = lms__open();
	if (D.skel) {
		D.skel->rodata->gc_lms_provisional = provisional;
		if (lms__load(D.skel)) {
			int e = errno;
			lms__destroy(D.skel);
			D.skel = NULL;
			errno = e;
		}
	}
	if (!D.skel) {
		log_event(LL_ERR, "fatal", "msg=%s error=%s",
			  "cannot load the LMS program (needs CAP_BPF and CAP_NET_ADMIN)",
			  strerror(errno));
		return 1;
	}
	/* Listen before the first read: no change falls between the two. */
	D.nl_fd = lmsd_nl_open();
	if (D.nl_fd < 0) {
		log_event(LL_ERR, "fatal", "msg=%s error=%s", "rtnetlink", strerror(errno));
		lms__destroy(D.skel);
		return 1;
	}
	/* both checked above: hold_ms <= 60000, 3 * interval <= 10800000 */
	D.hier_fd = lmsd_hier_open((uint32_t)(hold_ms ? hold_ms : 3 * interval));
	if (D.hier_fd < 0)
		log_event(LL_WARNING, "hier_off", "port=%d error=%s", GC_LMS_HIER_PORT, strerror(errno));
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: wake the poll */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int pending = kread(LMSD_NL_ALL);
	int stale = sweep(true); /* before attaching: what a killed lmsd left */
	if (stale)
		log_event(LL_NOTICE, "stale_filters", "count=%d left_by=%s action=%s", stale,
			  "a killed lmsd", "replaced or removed");
	D.stale = (uint64_t)stale;
	apply();
	save_state();
	if (once)
		write_state(stdout);
	/* the state file also carries the counters: written at every change,
	 * and at least every second */
	uint64_t save_every = (uint64_t)(interval < 1000 ? interval : 1000);
	uint64_t tick = now_ms() + (uint64_t)interval, next_save = now_ms() + save_every;
	/* systemd's watchdog: the loop wakes at least every half of its
	 * interval and tells it so */
	uint64_t wd_ms = sd_watchdog_usec() / 2000u, last_wd = now_ms();
	if (mfd >= 0) {
		int lfd = mfd;
		mfd = prom_start(lfd, metrics_write, NULL,
				 (struct prom_requests){ &D.http_ok, &D.http_not_found,
							 &D.http_bad_method });
		if (mfd < 0) {
			log_event(LL_ERR, "fatal", "msg=%s addr=%s",
				  "--metrics: libmicrohttpd could not start", metrics);
			return 1;
		}
	}
	if (!once) {
		log_event(LL_NOTICE, "started", "tables=%d repliers=%zu hier=%s provisional=%s",
			  D.k.ntables, D.cfg.n, D.hier_fd >= 0 ? "on" : "off",
			  provisional ? "on" : "off");
		(void)sd_notify_state("READY=1");
	}
	while (!stop && !once) {
		bool dirty = false, reloaded = false;
		if (reload) {
			reload = 0;
			reloaded = true;
			(void)sd_notify_reloading();
			reload_config();
			dirty = true;
		}
		if (wd_ms && now_ms() - last_wd >= wd_ms) {
			(void)sd_notify_state("WATCHDOG=1");
			last_wd = now_ms();
		}
		uint64_t now = now_ms(), until = tick < next_save ? tick : next_save;
		if (wd_ms && until > last_wd + wd_ms)
			until = last_wd + wd_ms;
		if (pending && until > now + 100)
			until = now + 100; /* a read failed: try again soon */
		/* (a descriptor of -1, no LMS-HIER or no --metrics, is not polled) */
		struct pollfd p[3] = { { .fd = D.nl_fd, .events = POLLIN },
				       { .fd = D.hier_fd, .events = POLLIN },
				       { .fd = mfd, .events = POLLIN } };
		if (!dirty && now < until && poll(p, 3, (int)(until - now)) > 0) {
			if (p[0].revents) {
				int what = lmsd_nl_drain(D.nl_fd);
				D.overruns += !!(what & LMSD_NL_OVERRUN);
				pending |= what & LMSD_NL_ALL;
			}
			/* replier reports as they come: a change is applied (and
			 * reported up) at once */
			if (p[1].revents && lmsd_hier_input(D.k.sg, D.k.nsg))
				dirty = true;
		}
		if (mfd >= 0) /* scrapes; at least every second: its timeouts */
			prom_run();
		if (pending) {
			pending = kread(pending);
			dirty = true;
		}
		if (now_ms() >= tick) { /* report up, expire reports */
			tick = now_ms() + (uint64_t)interval;
			lmsd_hier_input(D.k.sg, D.k.nsg);
			dirty = true;
		}
		/* never from a read that failed half way: the maps keep the last
		 * whole state until a read succeeds */
		if (dirty && !pending)
			apply();
		if (dirty || now_ms() >= next_save) {
			save_state();
			next_save = now_ms() + save_every;
		}
		log_tick();   /* the summaries of rate-limited warnings */
		if (reloaded) /* applied: the new configuration is in force */
			(void)sd_notify_state("READY=1");
	}
	if (!once) {
		log_event(LL_NOTICE, "stopping", NULL);
		(void)sd_notify_state("STOPPING=1");
	}
	log_flush();
	prom_stop();
	save_state(); /* the final counters */
	for (int i = 0; i < D.nattached; i++)
		lmsd_tc_detach(D.attached[i]);
	lms__destroy(D.skel);
	return 0;
}
