// SPDX-License-Identifier: MIT
/*
 * lmsd - the LMS router daemon (see lmsd(8)).
 *
 * Runs beside a real multicast routing daemon (smcroute, pimd) in the
 * router's network namespace.  Every refresh it reads the kernel's
 * multicast forwarding state (mfc.c), attaches LMS-FWD (bpf/lms.bpf.c) to
 * the ingress of every multicast interface (vif), and rewrites the
 * program's maps: per interface its address and MAC, per (S,G) the parent,
 * the replier link (from the configuration, config.c) and the downstream
 * interfaces.  It writes its state and the drop counters as JSON.  SIGTERM
 * or SIGINT: detach the filters (only ours: other filters and the clsact
 * qdisc stay) and exit 0.  SIGHUP: re-read the configuration.
 */
#include "lmsd.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
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

static struct {
	struct lms *skel;
	const char *config_path, *state_path;
	struct lmsd_config cfg;
	struct lmsd_vif vifs[LMSD_MAX_VIFS];
	int nvifs;
	struct lmsd_sg sg[LMSD_MAX_SG];
	struct gc_lms_route route[LMSD_MAX_SG];
	const char *route_note[LMSD_MAX_SG]; /* why a configured replier is not used */
	int nsg;
	struct gc_lms_if ifs[LMSD_MAX_VIFS];
	struct gc_lms_below below[GC_LMS_MAX_BELOW]; /* lms_below's keys, from the main table */
	int nbelow;
	uint32_t attached[LMSD_MAX_VIFS];
	int nattached;
	int hier_fd;
	struct {
		uint32_t src, group;
	} announced[LMSD_MAX_SG]; /* (S,G) reported up, with a replier */
	int nannounced;
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
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* ---- attaching ----------------------------------------------------------- */

static int attach(uint32_t ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = (int)ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = GC_LMS_TC_HANDLE, .priority = GC_LMS_TC_PRIO,
		    .prog_fd = bpf_program__fd(D.skel->progs.gc_lms_fwd), .flags = BPF_TC_F_REPLACE);
	int r = bpf_tc_hook_create(&h);

	if (r && r != -EEXIST)
		return r;
	return bpf_tc_attach(&h, &o);
}

static void detach(uint32_t ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = (int)ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = GC_LMS_TC_HANDLE, .priority = GC_LMS_TC_PRIO);

	bpf_tc_detach(&h, &o); /* the interface may be gone: nothing to do then */
}

static bool in_list(const uint32_t *v, int n, uint32_t x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* Attach to every vif interface, detach from those no longer vifs. */
static void sync_attach(void)
{
	uint32_t want[LMSD_MAX_VIFS];
	int nw = 0;

	for (int i = 0; i < D.nvifs; i++)
		if (D.vifs[i].ifindex)
			want[nw++] = D.vifs[i].ifindex;
	for (int i = 0; i < D.nattached;) {
		if (in_list(want, nw, D.attached[i])) {
			i++;
			continue;
		}
		detach(D.attached[i]);
		D.attached[i] = D.attached[--D.nattached];
	}
	for (int i = 0; i < nw; i++) {
		if (in_list(D.attached, D.nattached, want[i]))
			continue;
		int r = attach(want[i]);
		if (r)
			fprintf(stderr, "lmsd: attach to ifindex %u: %s\n", want[i], strerror(-r));
		else
			D.attached[D.nattached++] = want[i];
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
	for (int i = 0; i < D.nvifs; i++)
		if (D.vifs[i].ifindex == ifindex && D.ifs[i].addr)
			return true;
	return false;
}

static bool keep_local(const void *k)
{
	uint32_t a;

	memcpy(&a, k, 4);
	for (int i = 0; i < D.nvifs; i++)
		if (D.vifs[i].ifindex && D.ifs[i].addr == a)
			return true;
	return false;
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
	for (int i = 0; i < D.nsg; i++)
		if (D.sg[i].src == sg.src && D.sg[i].group == sg.group)
			return true;
	return false;
}

static bool keep_down(const void *k)
{
	struct gc_lms_down d;

	memcpy(&d, k, sizeof(d));
	for (int i = 0; i < D.nsg; i++)
		if (D.sg[i].src == d.src && D.sg[i].group == d.group &&
		    in_list(D.sg[i].oifs, D.sg[i].noifs, d.ifindex))
			return true;
	return false;
}

/* Mark the vif interfaces that carry a gateway of a main-table route
 * (/proc/net/route, RTF_GATEWAY): routers are below (or above) there, and a
 * provisional mark arriving over one may be theirs.  On a link with no
 * gateway only hosts send, and a provisional mark from it is forged.  The
 * destinations of those routes (lms_below) are what such a mark may name:
 * the marking router's address on its own lower link lies in one of them.  A
 * default route is left out: it would let a mark name any address. */
static void read_gateways(void)
{
	FILE *f = fopen("/proc/net/route", "r");
	char line[256], name[IF_NAMESIZE + 1];
	unsigned flags, dst, mask;

	if (!f) {
		fprintf(stderr, "lmsd: /proc/net/route: %s (no link is taken to have routers)\n",
			strerror(errno));
		return;
	}
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		/* addresses print as the __be32's value: read back, network order */
		if (sscanf(line, "%16s %x %*x %x %*d %*d %*d %x", name, &dst, &flags, &mask) != 4 ||
		    !(flags & 0x2 /* RTF_GATEWAY */))
			continue;
		for (int i = 0; i < D.nvifs; i++) {
			if (!D.vifs[i].ifindex || strcmp(D.vifs[i].name, name))
				continue;
			D.ifs[i].flags |= GC_LMS_IF_ROUTERS;
			if (!mask || D.nbelow == GC_LMS_MAX_BELOW)
				continue;
			D.below[D.nbelow++] =
				(struct gc_lms_below){ 32 + (__u32)__builtin_popcount(mask),
						       D.vifs[i].ifindex, dst & mask };
		}
	}
	fclose(f);
}

/* Address and MAC of each vif interface, from getifaddrs(); links with routers. */
static void read_ifs(void)
{
	struct ifaddrs *all, *a;

	memset(D.ifs, 0, sizeof(D.ifs));
	D.nbelow = 0;
	if (getifaddrs(&all)) {
		fprintf(stderr, "lmsd: getifaddrs: %s\n", strerror(errno));
		return;
	}
	for (int i = 0; i < D.nvifs; i++) {
		for (a = all; a && D.vifs[i].ifindex; a = a->ifa_next) {
			if (!a->ifa_addr || strcmp(a->ifa_name, D.vifs[i].name))
				continue;
			if (a->ifa_addr->sa_family == AF_INET && !D.ifs[i].addr)
				D.ifs[i].addr = ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr;
			else if (a->ifa_addr->sa_family == AF_PACKET)
				memcpy(D.ifs[i].mac, ((struct sockaddr_ll *)a->ifa_addr)->sll_addr, 6);
		}
	}
	freeifaddrs(all);
	read_gateways();
}

/* Report (S,G)'s elected replier to the parent router, or withdraw the one
 * reported before (once).  Static repliers stay local. */
static void announce(const struct lmsd_sg *e, bool have, uint32_t replier, uint32_t cost)
{
	uint32_t parent_addr = 0;
	int k;

	for (int j = 0; j < D.nvifs; j++)
		if (D.vifs[j].ifindex == e->parent)
			parent_addr = D.ifs[j].addr;
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

static void refresh(void)
{
	int fifs = bpf_map__fd(D.skel->maps.lms_ifs), flocal = bpf_map__fd(D.skel->maps.lms_local);
	int froutes = bpf_map__fd(D.skel->maps.lms_routes), fdown = bpf_map__fd(D.skel->maps.lms_down);
	int n = lmsd_vifs_read(D.vifs, LMSD_MAX_VIFS);

	if (n < 0) {
		/* No multicast routing in this namespace (yet): nothing to do. */
		D.nvifs = D.nsg = 0;
	} else {
		D.nvifs = n;
	}
	read_ifs();
	lmsd_hier_join(D.vifs, D.nvifs);
	for (int i = 0; i < D.nvifs; i++) {
		if (!D.vifs[i].ifindex || !D.ifs[i].addr)
			continue;
		bpf_map_update_elem(fifs, &D.vifs[i].ifindex, &D.ifs[i], BPF_ANY);
		bpf_map_update_elem(flocal, &D.ifs[i].addr, &D.vifs[i].ifindex, BPF_ANY);
	}
	int fbelow = bpf_map__fd(D.skel->maps.lms_below);
	for (int i = 0; i < D.nbelow; i++) {
		__u8 one = 1;
		bpf_map_update_elem(fbelow, &D.below[i], &one, BPF_ANY);
	}
	sync_attach();

	n = D.nvifs ? lmsd_mfc_read(D.vifs, D.nvifs, D.sg, LMSD_MAX_SG) : 0;
	D.nsg = n < 0 ? 0 : n;
	for (int i = 0; i < D.nsg; i++) {
		struct lmsd_sg *e = &D.sg[i];
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
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(D.skel->maps.lms_stats);
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN], c[INET_ADDRSTRLEN], n1[IF_NAMESIZE],
		n2[IF_NAMESIZE];
	__u64 v[ncpu > 0 ? ncpu : 1];

	fprintf(f, "{\"provisional\": %s,\n \"interfaces\": [", provisional ? "true" : "false");
	for (int i = 0, first = 1; i < D.nvifs; i++) {
		if (!D.vifs[i].ifindex)
			continue;
		const __u8 *m = D.ifs[i].mac;
		fprintf(f,
			"%s\n  {\"vif\": %d, \"ifindex\": %u, \"name\": \"%s\", \"addr\": \"%s\", "
			"\"mac\": \"%02x:%02x:%02x:%02x:%02x:%02x\", \"attached\": %s, \"routers\": %s, "
			"\"below\": [",
			first ? "" : ",", D.vifs[i].vif, D.vifs[i].ifindex, D.vifs[i].name,
			ip4(D.ifs[i].addr, a), m[0], m[1], m[2], m[3], m[4], m[5],
			in_list(D.attached, D.nattached, D.vifs[i].ifindex) ? "true" : "false",
			D.ifs[i].flags & GC_LMS_IF_ROUTERS ? "true" : "false");
		for (int j = 0, nb = 0; j < D.nbelow; j++)
			if (D.below[j].ifindex == D.vifs[i].ifindex)
				fprintf(f, "%s\"%s/%u\"", nb++ ? ", " : "", ip4(D.below[j].addr, a),
					D.below[j].prefixlen - 32);
		fprintf(f, "]}");
		first = 0;
	}
	fprintf(f, "],\n \"routes\": [");
	for (int i = 0; i < D.nsg; i++) {
		const struct gc_lms_route *r = &D.route[i];
		fprintf(f,
			"%s\n  {\"source\": \"%s\", \"group\": \"%s\", \"parent\": \"%s\", \"replier\": \"%s\", "
			"\"replier_addr\": \"%s\", \"cost\": %u, \"fallback\": %s, \"note\": \"%s\", \"downstream\": [",
			i ? "," : "", ip4(D.sg[i].src, a), ip4(D.sg[i].group, b),
			ifname(r->parent, n1), ifname(r->replier, n2), ip4(r->replier_addr, c),
			r->cost, r->replier == r->parent ? "true" : "false",
			D.route_note[i] ? D.route_note[i] : "");
		for (int j = 0; j < D.sg[i].noifs; j++)
			fprintf(f, "%s\"%s\"", j ? ", " : "", ifname(D.sg[i].oifs[j], n1));
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
	fprintf(f, ",\n \"stats\": {");
	for (__u32 k = 0; k < GC_LMS_NSTATS; k++) {
		__u64 sum = 0;
		if (ncpu > 0 && !bpf_map_lookup_elem(fd, &k, v))
			for (int i = 0; i < ncpu; i++)
				sum += v[i];
		fprintf(f, "%s\"%s\": %llu", k ? ", " : "", names[k], (unsigned long long)sum);
	}
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
		fprintf(stderr, "lmsd: state file %s: %s\n", tmp, strerror(errno));
		return;
	}
	write_state(f);
	if (fclose(f) || rename(tmp, D.state_path))
		fprintf(stderr, "lmsd: state file %s: %s\n", D.state_path, strerror(errno));
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: lmsd [-c CONFIG] [-s STATEFILE] [-t MS] [--hold MS] [--no-provisional] [-v]\n"
		"            [--once] [--check]\n"
		"  -c, --config FILE   static repliers: replier SOURCE GROUP IFNAME ADDRESS [COST]\n"
		"  -s, --state FILE    write interfaces, routes and counters as JSON every refresh\n"
		"  -t, --interval MS   re-read the multicast forwarding state every MS ms (default 1000)\n"
		"      --hold MS       hold time of the replier reports sent up (default 3 intervals)\n"
		"      --no-provisional  the thesis's forwarding: no provisional turning points\n"
		"                      (a request sent up stays unmarked; any mark from below is forged)\n"
		"      --once          one refresh, print the state to stdout, detach, exit\n"
		"      --check         only check the configuration file\n"
		"  -v, --verbose       libbpf debug messages\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "config", required_argument, 0, 'c' },
					      { "state", required_argument, 0, 's' },
					      { "interval", required_argument, 0, 't' },
					      { "once", no_argument, 0, 'o' },
					      { "check", no_argument, 0, 'k' },
					      { "verbose", no_argument, 0, 'v' },
					      { "hold", required_argument, 0, 'H' },
					      { "no-provisional", no_argument, 0, 'P' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	long interval = 1000, hold_ms = 0;
	bool once = false, check = false;
	int ch;

	while ((ch = getopt_long(argc, argv, "c:s:t:vh", opts, NULL)) != -1) {
		char *end;
		switch (ch) {
		case 'c': D.config_path = optarg; break;
		case 's': D.state_path = optarg; break;
		case 't':
			errno = 0;
			interval = strtol(optarg, &end, 10);
			if (errno || *end || interval < 10 || interval > 3600000) {
				fprintf(stderr, "lmsd: --interval %s: not a number of ms in 10..3600000\n",
					optarg);
				return 2;
			}
			break;
		case 'H':
			errno = 0;
			hold_ms = strtol(optarg, &end, 10);
			if (errno || *end || hold_ms < 100 || hold_ms > 60000) {
				fprintf(stderr, "lmsd: --hold %s: not a number of ms in 100..60000\n",
					optarg);
				return 2;
			}
			break;
		case 'o': once = true; break;
		case 'P': provisional = false; break;
		case 'k': check = true; break;
		case 'v': verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lmsd: unexpected argument %s\n", argv[optind]);
		return 2;
	}
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
		fprintf(stderr,
			"lmsd: cannot load the LMS program: %s (needs CAP_BPF and CAP_NET_ADMIN)\n",
			strerror(errno));
		return 1;
	}
	/* both checked above: hold_ms <= 60000, 3 * interval <= 10800000 */
	D.hier_fd = lmsd_hier_open((uint32_t)(hold_ms ? hold_ms : 3 * interval));
	if (D.hier_fd < 0)
		fprintf(stderr, "lmsd: LMS-HIER off: port %d: %s\n", GC_LMS_HIER_PORT, strerror(errno));
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: wake the sleep */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	while (!stop) {
		if (reload) {
			reload = 0;
			struct lmsd_config *c = malloc(sizeof(*c));
			if (c && D.config_path && !lmsd_config_read(D.config_path, c, stderr))
				D.cfg = *c; /* a bad file keeps the running configuration */
			free(c);
		}
		refresh();
		save_state();
		if (once) {
			write_state(stdout);
			break;
		}
		/* Until the next refresh, take replier reports as they come; a
		 * change is applied (and reported up) at once. */
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long left = interval; left > 0 && !stop && !reload;) {
			struct pollfd p = { .fd = D.hier_fd, .events = POLLIN };
			if (poll(&p, D.hier_fd >= 0, (int)left) > 0 && lmsd_hier_input(D.sg, D.nsg)) {
				refresh();
				save_state();
			}
			clock_gettime(CLOCK_MONOTONIC, &t1);
			left = interval -
				((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		}
		if (lmsd_hier_input(D.sg, D.nsg)) /* expiries */
			continue;
	}
	save_state(); /* the final counters */
	for (int i = 0; i < D.nattached; i++)
		detach(D.attached[i]);
	lms__destroy(D.skel);
	return 0;
}
