/* SPDX-License-Identifier: MIT */
/*
 * groupcast engine: run the packet-ring engine as a daemon on a Unix socket
 * (gc_ring_engine_create() with params.listen) until SIGINT/SIGTERM.  Other
 * processes attach rings with gc_ring_engine_connect() + gc_ring_attach(),
 * e.g. `groupcast ring-send --connect PATH`.  Stats are one JSON line on
 * stdout: on SIGUSR1, every --stats-interval seconds, and at exit; with
 * --metrics, for Prometheus over HTTP too (promhttp.c), served from the
 * daemon's own loop: ppoll() on a signalfd and libmicrohttpd's epoll.
 * Under systemd: the listening socket may come from a .socket unit
 * (LISTEN_FDS), and READY=1, WATCHDOG=1 and STOPPING=1 go to NOTIFY_SOCKET
 * (sdnotify.c).
 */
#include "cli.h"
#include "promhttp.h"
#include "log.h"
#include "sdnotify.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <groupcast/ring.h>

static void engine_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast engine --listen PATH [options]\n"
		"       groupcast engine [options]   (socket-activated: LISTEN_FDS=1)\n"
		"Run the packet-ring engine as a daemon that other processes attach their\n"
		"rings to over the Unix socket PATH, until SIGINT or SIGTERM.  Prints\n"
		"\"level=notice event=listening path=PATH\" to stderr once ready, and the engine\n"
		"stats as one JSON line on stdout on SIGUSR1, every --stats-interval, and at exit.\n"
		"  --listen PATH          Unix socket path to serve (required unless systemd\n"
		"                         passes the listening socket: groupcast-engine.socket)\n"
		"  --cpu N                pin the engine thread to CPU N\n"
		"  --batch N              most packets taken from a ring at a time, and each client's\n"
		"                         share of a round (1..1024, default 64)\n"
		"  --idle-us N            poll an empty ring this long before sleeping (default 0)\n"
		"  --mode OCTAL           permission bits of the socket file (default 0600)\n"
		"  --group NAME           group of the socket file (name or number)\n"
		"  --allow-uid UID        also serve this user (name or number; repeatable);\n"
		"                         root and the engine's own uid are always served\n"
		"  --allow-gid GID        also serve members of this group (repeatable)\n"
		"  --max-rings N          rings per client (default 64)\n"
		"  --max-fds N            descriptors held per client, 2 per ring (default 128)\n"
		"  --max-map BYTES        ring and zone bytes mapped per client (default 4 GiB)\n"
		"  --max-clients N        clients at a time (default 256)\n"
		"  --quiet                do not log ring violations to stderr\n"
		"  --stats-interval SEC   print the stats every SEC seconds (default 0: never)\n"
		"  --metrics [ADDR:]PORT  serve the stats for Prometheus on http://ADDR:PORT/metrics\n"
		"                         (ADDR: 127.0.0.1 unless given; [IPv6]:PORT)\n"
		"  --log-level LEVEL      err, warning, notice (default), info or debug: the least\n"
		"                         important log line written (groupcast(1) LOGS)\n");
}

/* --metrics: what the exposition reads at scrape time. */
struct engine_metrics {
	struct gc_ring_engine *e;
	unsigned max_clients;
	uint64_t start_ns;
	uint64_t ok, not_found, bad_method; /* HTTP requests by status */
};

#define P "groupcast_engine_"

static void metrics_write(void *ctx, FILE *f)
{
	struct engine_metrics *m = ctx;
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	bool have = gc_ring_engine_stats(m->e, &st) == 0;
	prom_write_process(f, P, m->start_ns);
	prom_family(f, P, "up", "gauge", "1 when the engine thread answered this scrape's stats request.");
	prom_sample(f, P, "up", NULL, have);
	prom_family(f, P, "max_clients", "gauge", "--max-clients.");
	prom_sample(f, P, "max_clients", NULL, m->max_clients);
	prom_write_requests(f, P, (struct prom_requests){ &m->ok, &m->not_found, &m->bad_method });
	if (!have)
		return; /* no made-up zeros */
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} t[] = {
#define S(field, name, type, help) \
	{ name, type, help, offsetof(struct gc_ring_engine_stats, field) }
		S(clients, "clients", "gauge", "Connected clients (the daemon itself counts as one)."),
		S(rings, "rings", "gauge", "Rings served now."),
		S(packets, "datagrams_sent_total", "counter", "Datagrams the engine sent from the rings."),
		S(bytes, "sent_bytes_total", "counter", "Payload bytes of those datagrams."),
		S(gso, "gso_datagrams_sent_total", "counter",
		  "Of the datagrams sent, those sent in UDP GSO batches."),
		S(syscalls, "sendmmsg_calls_total", "counter", "sendmmsg() calls."),
		S(rounds, "rounds_total", "counter", "Passes over the active rings."),
		S(sleeps, "sleeps_total", "counter", "Times the engine blocked with every ring parked."),
		S(notifies, "notifications_total", "counter", "Notifications received from the rings."),
		S(violations, "ring_violations_total", "counter", "Rings stopped for breaking the rules."),
		S(refused, "connections_refused_total", "counter",
		  "Clients disconnected at accept: not allowed (--allow-uid, --allow-gid), or over --max-clients."),
		S(limited, "client_limit_hits_total", "counter",
		  "Ring attach requests refused by a per-client limit (--max-rings, --max-fds, --max-map)."),
#undef S
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t v;
		memcpy(&v, (const char *)&st + t[i].off, sizeof(v));
		prom_family(f, P, t[i].name, t[i].type, t[i].help);
		prom_sample(f, P, t[i].name, NULL, v);
	}
}

static int print_stats(const struct gc_ring_engine_stats *st)
{
	printf("{\"clients\":%llu,\"rings\":%llu,\"rounds\":%llu,\"sleeps\":%llu,"
	       "\"notifies\":%llu,\"packets\":%llu,\"bytes\":%llu,\"syscalls\":%llu,"
	       "\"gso\":%llu,\"violations\":%llu,\"refused\":%llu,\"limited\":%llu}\n",
	       (unsigned long long)st->clients, (unsigned long long)st->rings,
	       (unsigned long long)st->rounds, (unsigned long long)st->sleeps,
	       (unsigned long long)st->notifies, (unsigned long long)st->packets,
	       (unsigned long long)st->bytes, (unsigned long long)st->syscalls,
	       (unsigned long long)st->gso, (unsigned long long)st->violations,
	       (unsigned long long)st->refused, (unsigned long long)st->limited);
	return fflush(stdout) == 0 ? 0 : -1;
}

/* A user or group: a name, or a number below 2^32 - 1. */
static uint32_t id_arg(const char *opt, const char *s, bool group)
{
	if (*s >= '0' && *s <= '9')
		return (uint32_t)cli_u64(opt, s, 0, UINT32_MAX - 1);
	if (group) {
		struct group *g = getgrnam(s);
		if (g)
			return g->gr_gid;
	} else {
		struct passwd *pw = getpwnam(s);
		if (pw)
			return pw->pw_uid;
	}
	cli_usage_error("%s: no %s named '%s'", opt, group ? "group" : "user", s);
}

#define MAX_ALLOW 64

int cmd_engine(int argc, char **argv)
{
	enum {
		O_LISTEN = 256,
		O_CPU,
		O_BATCH,
		O_IDLE,
		O_MAXR,
		O_QUIET,
		O_IVL,
		O_MODE,
		O_GROUP,
		O_AUID,
		O_AGID,
		O_MAXF,
		O_MAXC,
		O_MAXM,
		O_METRICS,
		O_LOGL
	};
	static const struct option lo[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "idle-us", required_argument, NULL, O_IDLE },
		{ "max-rings", required_argument, NULL, O_MAXR },
		{ "max-fds", required_argument, NULL, O_MAXF },
		{ "max-clients", required_argument, NULL, O_MAXC },
		{ "max-map", required_argument, NULL, O_MAXM },
		{ "mode", required_argument, NULL, O_MODE },
		{ "group", required_argument, NULL, O_GROUP },
		{ "allow-uid", required_argument, NULL, O_AUID },
		{ "allow-gid", required_argument, NULL, O_AGID },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "stats-interval", required_argument, NULL, O_IVL },
		{ "metrics", required_argument, NULL, O_METRICS },
		{ "log-level", required_argument, NULL, O_LOGL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.cpu = -1);
	uint64_t interval = 0;
	const char *metrics = NULL;
	struct sockaddr_storage metrics_addr;
	char aerr[160];
	uid_t uids[MAX_ALLOW];
	gid_t gids[MAX_ALLOW];
	char *end;
	int ch;
	opterr = 0;
	log_init();
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (ch) {
		case O_LISTEN: p.listen = optarg; break;
		case O_CPU: p.cpu = cli_cpu("--cpu", optarg); break;
		case O_BATCH: p.batch = (unsigned)cli_u64("--batch", optarg, 1, 1024); break;
		case O_IDLE:
			p.idle_us = (unsigned)cli_u64("--idle-us", optarg, 0, UINT32_MAX);
			break;
		case O_MAXR:
			p.max_rings = (unsigned)cli_u64("--max-rings", optarg, 1, UINT32_MAX);
			break;
		case O_MAXF:
			p.max_fds = (unsigned)cli_u64("--max-fds", optarg, 2, UINT32_MAX);
			break;
		case O_MAXC:
			p.max_clients = (unsigned)cli_u64("--max-clients", optarg, 1, UINT32_MAX);
			break;
		case O_MAXM: p.max_map_bytes = cli_u64("--max-map", optarg, 1, UINT64_MAX); break;
		case O_MODE:
			errno = 0;
			p.listen_mode = (unsigned)strtoul(optarg, &end, 8);
			if (errno || end == optarg || *end || *optarg == '-' ||
			    p.listen_mode == 0 || p.listen_mode > 0777)
				cli_usage_error("--mode: '%s' is not an octal mode in 1..0777", optarg);
			break;
		case O_GROUP:
			p.listen_gid = id_arg("--group", optarg, true);
			p.flags |= GC_RING_ENGINE_LISTEN_GID;
			break;
		case O_AUID:
		case O_AGID:
			if ((ch == O_AUID ? p.n_allow_uids : p.n_allow_gids) == MAX_ALLOW)
				cli_usage_error("%s: at most %d",
						ch == O_AUID ? "--allow-uid" : "--allow-gid", MAX_ALLOW);
			if (ch == O_AUID)
				uids[p.n_allow_uids++] = id_arg("--allow-uid", optarg, false);
			else
				gids[p.n_allow_gids++] = id_arg("--allow-gid", optarg, true);
			break;
		case O_QUIET: p.quiet = 1; break;
		case O_IVL: interval = cli_u64("--stats-interval", optarg, 0, 86400); break;
		case O_METRICS:
			if (prom_parse_addr(optarg, &metrics_addr, aerr, sizeof(aerr)))
				cli_usage_error("--metrics '%s': %s", optarg, aerr);
			metrics = optarg;
			break;
		case O_LOGL: log_threshold = cli_log_level(optarg); break;
		case 'h': engine_usage(stdout); return 0;
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	p.allow_uids = uids;
	p.allow_gids = gids;
	int passed = sd_listen_fds_take();
	if (passed < 0)
		cli_usage_error("LISTEN_PID/LISTEN_FDS: %s",
				errno == EINVAL ? "not numbers systemd would pass" : strerror(errno));
	if (passed > 1)
		cli_usage_error("LISTEN_FDS: %d sockets passed; the engine serves one", passed);
	if (passed == 1) {
		if (p.listen)
			cli_usage_error("--listen: systemd passed the listening socket (LISTEN_FDS); "
					"give one or the other");
		if (p.listen_mode || (p.flags & GC_RING_ENGINE_LISTEN_GID))
			cli_usage_error("%s: the passed socket's file is systemd's "
					"(SocketMode=, SocketGroup= in the .socket unit)",
					p.listen_mode ? "--mode" : "--group");
		p.flags |= GC_RING_ENGINE_LISTEN_FD;
		p.listen_fd = 3; /* SD_LISTEN_FDS_START */
	} else if (!p.listen || !*p.listen) {
		cli_usage_error("--listen PATH is required");
	}
	if (p.listen && strlen(p.listen) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		cli_usage_error("--listen: path '%s' is longer than %zu bytes", p.listen,
				sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	if (p.cpu >= 0) {
		cpu_set_t set;
		if (sched_getaffinity(0, sizeof(set), &set) == 0 && !CPU_ISSET((size_t)p.cpu, &set))
			cli_usage_error("--cpu: CPU %d is not one this process may run on", p.cpu);
		p.flags |= GC_RING_ENGINE_PIN_CPU;
	}

	/* Blocked before the engine thread exists, so that it inherits the mask
	 * and every signal comes to sigtimedwait() below. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
		cli_fail("sigprocmask: %s", strerror(errno));
	int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0)
		cli_fail("signalfd: %s", strerror(errno));
	int mfd = -1; /* --metrics: the listening socket, then libmicrohttpd's epoll */
	if (metrics && (mfd = prom_listen(&metrics_addr)) < 0)
		cli_fail("--metrics: cannot listen on '%s': %s", metrics, strerror(errno));

	struct sockaddr_un bound = { .sun_family = AF_UNIX };
	socklen_t bl = sizeof(bound) - 1; /* the NUL stays */
	if (passed == 1 && getsockname(p.listen_fd, (struct sockaddr *)&bound, &bl) != 0)
		cli_fail("the socket systemd passed (fd 3): %s", strerror(errno));
	const char *where = p.listen ? p.listen : bound.sun_path;
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	if (!e) {
		int err = errno;
		const char *name = strerrorname_np(err);
		cli_fail("cannot start the engine on %s: %s (%s): %s", where, name ? name : "?",
			 strerror(err), gc_errmsg());
	}
	log_event(LL_NOTICE, "listening", "path=%s socket=%s", where,
		  passed == 1 ? "passed_by_systemd" : "bound");
	/* connect() needs write permission on the socket file */
	if ((p.n_allow_uids || p.n_allow_gids) && !((p.listen_mode ? p.listen_mode : 0600) & 0022))
		log_event(LL_WARNING, "socket_mode", "mode=0%o msg=%s",
			  p.listen_mode ? p.listen_mode : 0600,
			  "--allow-uid/--allow-gid: the socket's mode lets only its owner connect; "
			  "give --mode (and --group) too");

	struct engine_metrics em = { .e = e,
				     .max_clients = p.max_clients ? p.max_clients : 256,
				     .start_ns = cli_now(CLOCK_MONOTONIC) };
	if (mfd >= 0) {
		int lfd = mfd;
		if ((mfd = prom_start(lfd, metrics_write, &em,
				      (struct prom_requests){ &em.ok, &em.not_found, &em.bad_method })) < 0)
			cli_fail("--metrics: libmicrohttpd could not start on '%s'", metrics);
	}
	(void)sd_notify_state("READY=1");

	int rc = 0;
	uint64_t next = cli_now(CLOCK_MONOTONIC) + interval * 1000000000u;
	/* systemd's watchdog: the engine thread answers a stats request every
	 * half interval (a thread stuck in its loop never answers) */
	uint64_t wd = sd_watchdog_usec() * 1000u / 2, next_wd = cli_now(CLOCK_MONOTONIC) + wd;
	for (;;) {
		struct timespec ts = { 0 }, *tp = NULL;
		if (interval || wd) {
			uint64_t now = cli_now(CLOCK_MONOTONIC);
			uint64_t until = interval ? next : next_wd;
			if (wd && next_wd < until)
				until = next_wd;
			uint64_t left = until > now ? until - now : 0;
			ts.tv_sec = (time_t)(left / 1000000000u);
			ts.tv_nsec = (long)(left % 1000000000u);
			tp = &ts;
		}
		if (mfd >= 0 && (!tp || ts.tv_sec >= 1)) { /* libmicrohttpd's timeouts: every second */
			ts = (struct timespec){ 1, 0 };
			tp = &ts;
		}
		struct pollfd pf[2] = { { .fd = sfd, .events = POLLIN },
					{ .fd = mfd, .events = POLLIN } };
		if (ppoll(pf, mfd >= 0 ? 2 : 1, tp, NULL) < 0) {
			if (errno == EINTR)
				continue;
			cli_fail("ppoll: %s", strerror(errno));
		}
		int sig = -1;
		struct signalfd_siginfo si;
		if (pf[0].revents && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			sig = (int)si.ssi_signo;
		if (mfd >= 0)
			prom_run();
		if (sig == SIGINT || sig == SIGTERM) {
			log_event(LL_NOTICE, "stopping", "signal=%s", sigabbrev_np(sig));
			break;
		}
		if (wd && cli_now(CLOCK_MONOTONIC) >= next_wd) {
			struct gc_ring_engine_stats wst = GC_RING_ENGINE_STATS_INIT();
			if (gc_ring_engine_stats(e, &wst) == 0)
				(void)sd_notify_state("WATCHDOG=1");
			else
				log_event(LL_ERR, "watchdog_skipped", "error=%s",
					  gc_errmsg()); /* gc_ring_engine_stats() failed */
			next_wd = cli_now(CLOCK_MONOTONIC) + wd;
		}
		/* no signal: the watchdog's or the metrics' turn only, or the stats
		 * interval elapsed */
		if (sig < 0 && !(interval && cli_now(CLOCK_MONOTONIC) >= next))
			continue;
		if (sig < 0)
			next += interval * 1000000000u;
		struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
		if (gc_ring_engine_stats(e, &st) != 0) {
			log_event(LL_ERR, "stats_failed", "error=%s", gc_errmsg());
			rc = CLI_EXIT_FAIL;
		} else if (print_stats(&st) != 0) {
			rc = CLI_EXIT_FAIL;
		}
	}

	(void)sd_notify_state("STOPPING=1");
	prom_stop();
	close(sfd);
	/* The last stats before stopping: the rings are gone afterwards. */
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	bool have_st = gc_ring_engine_stats(e, &st) == 0;
	if (gc_ring_engine_destroy(e) != 0) {
		log_event(LL_ERR, "destroy_failed", "error=%s", gc_errmsg());
		rc = CLI_EXIT_FAIL;
	}
	/* (the engine removed its socket file, unless another engine's replaced it) */
	if (!have_st) {
		log_event(LL_ERR, "stats_failed", "error=%s", gc_errmsg());
		return CLI_EXIT_FAIL;
	}
	return print_stats(&st) == 0 ? rc : CLI_EXIT_FAIL;
}
