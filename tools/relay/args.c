/* SPDX-License-Identifier: MIT */
/*
 * groupcast relay: the command line.  Defaults, options, the receivers from
 * arguments and -c files checked against the mode, port names.  main.c calls
 * relay_configure() once at start and relay_build_conf() again on SIGHUP.
 * See groupcast-relay(1).
 */
#include "relay.h"
#include "../cli.h"
#include "../log.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

static void relay_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast relay [OPTION...] [RECEIVER...]\n"
		"Receive UDP datagrams on a port and send each to many receivers with one\n"
		"gc_sendgroup() per batch of receivers.  A drop-in for samplicator: the same\n"
		"options, receivers and config file (differences: groupcast-relay(1)).\n"
		"\n"
		"samplicator options:\n"
		"  -p PORT        UDP port to listen on (default 2000)\n"
		"  -s ADDRESS     address to listen on (default: every IPv4 and IPv6 address)\n"
		"  -b BYTES       receive buffer of the listening socket (default 4194304)\n"
		"  -c FILE        config file: lines 'a.b.c.d[/mask]: RECEIVER ...'; datagrams\n"
		"                 from a matching source go to that line's receivers\n"
		"  -S             keep (spoof) the original source address and port (raw\n"
		"                 sockets, CAP_NET_RAW; these sends bypass gc_sendgroup)\n"
		"  -n             with -S: leave the UDP checksum 0 (IPv4)\n"
		"  -x MICROS      wait MICROS after each command-line receiver (sends them\n"
		"                 one at a time, as samplicator does)\n"
		"  -u BYTES       largest datagram relayed (default 65536); larger ones are\n"
		"                 counted and dropped\n"
		"  -t MILLIS      exit with status 5 when nothing arrives for MILLIS\n"
		"  -d LEVEL       debug: 1 each datagram received, 2 each datagram sent\n"
		"                 (log lines of level debug; -d implies --log-level debug)\n"
		"  -f             fork into the background\n"
		"  -m FILE        write the process ID to FILE (created exclusively; a stale\n"
		"                 one, naming a process that is gone, is replaced)\n"
		"  -4, -6         IPv4 only, IPv6 only\n"
		"  -h, --help     this text\n"
		"\n"
		"RECEIVER is ADDR[/PORT[/INTERVAL][,TTL]]: ADDR an IPv4 address, [IPv6] or a\n"
		"host name; PORT (default 2000) a number, a service, FIRST-LAST or FIRST+COUNT;\n"
		"INTERVAL N sends 1 in N datagrams; TTL 1..255 (default 64).  Command-line\n"
		"receivers get every datagram.\n"
		"\n"
		"groupcast options:\n"
		"  --engine NAME         auto (default), loop, mmsg, uring, uring_zc, kernel\n"
		"  --cpu CPU             pin the relay to CPU (default: not pinned)\n"
		"  --status SECONDS      status line on stderr every SECONDS (default 60; 0 off)\n"
		"  --log-level LEVEL     err, warning, notice (default), info or debug: the\n"
		"                        least important log line written (groupcast-relay(1) LOGS)\n"
		"  --stats-socket PATH   serve JSON counters on a Unix socket at PATH\n"
		"  --metrics [ADDR:]PORT serve the counters for Prometheus on http://ADDR:PORT/metrics\n"
		"                        (ADDR a numeric IPv4 address or [IPv6]; default 127.0.0.1)\n"
		"  --query PATH          print the JSON of the relay serving PATH, and exit\n"
		"  --check               read the options and config files as a start would,\n"
		"                        print what they give, and exit (0, or 2 naming the error)\n"
		"  --json                print the final counters as JSON on stdout at exit\n"
		"  --time-sends          measure the CPU time inside the sends (send_ns; costs two clock calls per send)\n"
		"  --duration SECONDS    exit cleanly after SECONDS\n"
		"  --max-size BYTES      same as -u\n"
		"  --sndbuf BYTES        send buffer of every send socket (default 8388608)\n"
		"  --user NAME           after setup, run as user NAME (capabilities other than\n"
		"                        CAP_NET_ADMIN, CAP_BPF and, with -S, CAP_NET_RAW are\n"
		"                        always dropped after setup)\n"
		"\n"
		"Broadcast mode (the live-broadcast relay):\n"
		"  --rtp                 an RTP stream arrives on -p (RTCP on --rtcp-port);\n"
		"                        subscribers join on --control; each gets its own SSRC,\n"
		"                        sequence numbers and timestamp offset; RECEIVERs are\n"
		"                        static subscribers (ADDR[/PORT] only)\n"
		"  --control PORT        control port: JOIN/LEAVE/KEEPALIVE (default -p + 2)\n"
		"  --rtcp-port PORT      RTCP port (default -p + 1)\n"
		"  --max-subscribers N   at most N subscribers (default 4096, up to 65536)\n"
		"  --expire SECONDS      drop a subscriber silent for SECONDS (default 30; 0 never)\n"
		"  --clock-rate HZ       RTP clock of the stream (default 90000)\n"
		"  --producer ADDR[/MASK]  accept RTP and RTCP only from there (required, or:)\n"
		"  --any-producer        accept RTP from anyone (anyone can then feed your\n"
		"                        subscribers: see SECURITY in groupcast-relay(1))\n"
		"  --allow-local-subscribers  let addresses of this host subscribe (never the\n"
		"                        relay's own ports)\n"
		"  --max-per-source N    subscribers per IPv4 address or IPv6 /64 (default 64)\n"
		"  --control-rate N      control requests a second per source (default 200)\n"
		"  --cookie-lifetime S   a JOIN cookie is good for S to 2*S seconds (default 30)\n"
		"  --upstream ADDR:PORT  subscribe to the relay whose control port is ADDR:PORT\n"
		"                        and take the stream from it (repeatable, up to 8, in\n"
		"                        priority order: the next one when the first fails)\n"
		"  --upstream-timeout MS an upstream silent for MS is given up (default 500)\n"
		"  --upstream-revert     go back to an earlier upstream once it answers again\n"
		"\n"
		"Both modes:\n"
		"  --join GROUP[,SOURCE][@IFACE]  receive -p from multicast GROUP (from SOURCE\n"
		"                        only, if given) on IFACE (repeatable, up to 8)\n"
		"\n"
		"Signals: SIGHUP reloads the config files (the old configuration stays when\n"
		"they are bad; host names are refused on reload) or, with --rtp, re-reads the\n"
		"host's addresses; SIGUSR1 prints a status line; SIGTERM and SIGINT stop.\n"
		"Exit status: 0 done, 1 failure, 2 bad arguments or config, 5 -t timeout.\n");
}

/* ---- options ----------------------------------------------------------------- */

static void parse_args(struct relay *r, struct relay_args *a, int argc, char **argv)
{
	enum {
		O_ENGINE = 256,
		O_CPU,
		O_STATUS,
		O_STATS,
		O_METRICS,
		O_QUERY,
		O_JSON,
		O_TIME_SENDS,
		O_DURATION,
		O_MAXSIZE,
		O_SNDBUF,
		O_RTP,
		O_CONTROL,
		O_RTCP,
		O_MAXSUBS,
		O_EXPIRE,
		O_CLOCK,
		O_PRODUCER,
		O_ANYPROD,
		O_ALLOWLOCAL,
		O_PERSOURCE,
		O_CTLRATE,
		O_COOKIE,
		O_USER,
		O_LOGLEVEL,
		O_CHECK,
		O_JOIN,
		O_UPSTREAM,
		O_UPTIMEOUT,
		O_UPREVERT
	};
	static const struct option lo[] = {
		{ "engine", required_argument, NULL, O_ENGINE },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "status", required_argument, NULL, O_STATUS },
		{ "stats-socket", required_argument, NULL, O_STATS },
		{ "metrics", required_argument, NULL, O_METRICS },
		{ "query", required_argument, NULL, O_QUERY },
		{ "json", no_argument, NULL, O_JSON },
		{ "time-sends", no_argument, NULL, O_TIME_SENDS },
		{ "duration", required_argument, NULL, O_DURATION },
		{ "max-size", required_argument, NULL, O_MAXSIZE },
		{ "sndbuf", required_argument, NULL, O_SNDBUF },
		{ "rtp", no_argument, NULL, O_RTP },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "rtcp-port", required_argument, NULL, O_RTCP },
		{ "max-subscribers", required_argument, NULL, O_MAXSUBS },
		{ "expire", required_argument, NULL, O_EXPIRE },
		{ "clock-rate", required_argument, NULL, O_CLOCK },
		{ "producer", required_argument, NULL, O_PRODUCER },
		{ "any-producer", no_argument, NULL, O_ANYPROD },
		{ "allow-local-subscribers", no_argument, NULL, O_ALLOWLOCAL },
		{ "max-per-source", required_argument, NULL, O_PERSOURCE },
		{ "control-rate", required_argument, NULL, O_CTLRATE },
		{ "cookie-lifetime", required_argument, NULL, O_COOKIE },
		{ "user", required_argument, NULL, O_USER },
		{ "log-level", required_argument, NULL, O_LOGLEVEL },
		{ "check", no_argument, NULL, O_CHECK },
		{ "join", required_argument, NULL, O_JOIN },
		{ "upstream", required_argument, NULL, O_UPSTREAM },
		{ "upstream-timeout", required_argument, NULL, O_UPTIMEOUT },
		{ "upstream-revert", no_argument, NULL, O_UPREVERT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool seen_S = false, seen_n = false, seen_x = false;
	int ch, log_level = -1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":hu:b:d:t:m:p:s:x:c:fSn46", lo, NULL)) != -1) {
		switch (ch) {
		case 'p': r->listen_port = optarg; break;
		case 's': r->listen_addr = optarg; break;
		case 'b': r->rcvbuf = (long)cli_u64("-b", optarg, 0, INT32_MAX / 2); break;
		case 'u':
		case O_MAXSIZE:
			r->max_size = cli_u64(ch == 'u' ? "-u" : "--max-size", optarg, 1, 65536);
			break;
		case 'd': r->debug = (int)cli_u64("-d", optarg, 0, 9); break;
		case 't': r->timeout_ms = (unsigned)cli_u64("-t", optarg, 1, UINT32_MAX / 2); break;
		case 'm': r->pidfile = optarg; break;
		case 'x':
			r->tx_delay_us = (unsigned)cli_u64("-x", optarg, 0, 60000000);
			seen_x = true;
			break;
		case 'c':
			if (r->ncfile == sizeof(r->cfile) / sizeof(r->cfile[0]))
				cli_usage_error("-c: at most %zu config files", r->ncfile);
			/* samplicator reads the file right here: -S, -n, -4, -6 given
			 * before -c apply to its receivers, later ones do not */
			r->cfile[r->ncfile].path = optarg;
			r->cfile[r->ncfile++].o = r->argv_opts;
			break;
		case 'f': r->daemon = true; break;
		case 'S':
			r->argv_opts.flags |= RCV_SPOOF;
			seen_S = true;
			break;
		case 'n':
			r->argv_opts.flags &= (uint8_t)~RCV_CHECKSUM;
			seen_n = true;
			break;
		case '4': r->family = r->argv_opts.family = AF_INET; break;
		case '6': r->family = r->argv_opts.family = AF_INET6; break;
		case 'h': relay_usage(stdout); exit(0);
		case O_ENGINE:
			r->engine = gc_engine_from_name(optarg);
			if (r->engine == GC_ENGINE_NONE)
				cli_usage_error("--engine: unknown engine '%s' (known: auto, loop, mmsg, uring, uring_zc, kernel)",
						optarg);
			break;
		case O_CPU: r->cpu = cli_cpu("--cpu", optarg); break;
		case O_STATUS: r->status_s = (unsigned)cli_u64("--status", optarg, 0, 86400); break;
		case O_STATS: r->stats_socket = optarg; break;
		case O_METRICS: {
			char err[128];
			if (prom_parse_addr(optarg, &r->metrics_addr, err, sizeof(err)))
				cli_usage_error("--metrics '%s': %s", optarg, err);
			r->metrics = optarg;
			break;
		}
		case O_QUERY: exit(stats_query(optarg));
		case O_JSON: r->json = true; break;
		case O_TIME_SENDS: r->time_sends = true; break;
		case O_DURATION: {
			char *end;
			errno = 0;
			r->duration_s = strtod(optarg, &end);
			if (errno || *end || !(r->duration_s > 0) || r->duration_s > 1e7)
				cli_usage_error("--duration: expected seconds > 0, got '%s'", optarg);
			break;
		}
		case O_SNDBUF:
			r->sndbuf = (long)cli_u64("--sndbuf", optarg, 4096, INT32_MAX / 2);
			break;
		case O_RTP: r->rtp = true; break;
		case O_CONTROL: r->control_port = optarg; break;
		case O_RTCP: r->rtcp_port_opt = optarg; break;
		case O_MAXSUBS:
			r->max_subs = (uint32_t)cli_u64("--max-subscribers", optarg, 1, 65536);
			break;
		case O_EXPIRE:
			r->expire_s = (unsigned)cli_u64("--expire", optarg, 0, 86400 * 365);
			break;
		case O_CLOCK:
			r->clock_rate = (uint32_t)cli_u64("--clock-rate", optarg, 1, 1000000000);
			break;
		case O_PRODUCER: a->producer = optarg; break;
		case O_ANYPROD: r->any_producer = true; break;
		case O_ALLOWLOCAL: r->allow_local = true; break;
		case O_PERSOURCE:
			r->max_per_source = (uint32_t)cli_u64("--max-per-source", optarg, 1, 65536);
			break;
		case O_CTLRATE:
			r->ctl_rate = (uint32_t)cli_u64("--control-rate", optarg, 1, 1000000);
			break;
		case O_COOKIE:
			r->cookie_s = (unsigned)cli_u64("--cookie-lifetime", optarg, 1, 3600);
			break;
		case O_USER: r->user = optarg; break;
		case O_CHECK: r->check = true; break;
		case O_LOGLEVEL: log_level = cli_log_level(optarg); break;
		case O_JOIN: {
			char err[160];
			if (r->njoin == RELAY_MAX_JOINS)
				cli_usage_error("--join: at most %d groups", RELAY_MAX_JOINS);
			if (mjoin_parse(&r->join[r->njoin], optarg, err, sizeof(err)))
				cli_usage_error("--join '%s': %s (expected GROUP[,SOURCE][@IFACE])",
						optarg, err);
			r->njoin++;
			break;
		}
		case O_UPSTREAM: {
			char err[160];
			if (r->nup == RELAY_MAX_UPSTREAMS)
				cli_usage_error("--upstream: at most %d upstreams", RELAY_MAX_UPSTREAMS);
			if (upstream_parse(&r->up[r->nup], optarg, err, sizeof(err)))
				cli_usage_error("--upstream '%s': %s", optarg, err);
			r->nup++;
			break;
		}
		case O_UPTIMEOUT:
			r->up_timeout_ms = (unsigned)cli_u64("--upstream-timeout", optarg, 50, 600000);
			break;
		case O_UPREVERT: r->up_revert = true; break;
		default: cli_getopt_error(ch, argv);
		}
	}
	a->rcv = argv + optind;
	a->nrcv = argc - optind;
	/* samplicator's -d shows its per-datagram lines (debug) unless --log-level says */
	log_threshold = log_level >= 0 ? log_level : r->debug ? LL_DEBUG : LOG_DEFAULT_LEVEL;
	if (r->rtp && (r->ncfile || seen_S || seen_n || seen_x))
		cli_usage_error("%s does not apply with --rtp (broadcast mode has no config file, spoofing or delay)",
				r->ncfile	 ? "-c"
					: seen_S ? "-S"
					: seen_n ? "-n"
						 : "-x");
	if (!r->rtp &&
	    (r->control_port || r->rtcp_port_opt || a->producer || r->max_subs || r->expire_s != 30 ||
	     r->clock_rate || r->any_producer || r->allow_local || r->max_per_source ||
	     r->ctl_rate || r->cookie_s || r->nup || r->up_timeout_ms || r->up_revert))
		cli_usage_error(
			"--control, --rtcp-port, --producer, --any-producer, --allow-local-subscribers, "
			"--max-subscribers, --max-per-source, --control-rate, --cookie-lifetime, --expire, "
			"--clock-rate, --upstream, --upstream-timeout and --upstream-revert need --rtp");
	if (r->rtp && !a->producer && !r->any_producer && !r->nup)
		cli_usage_error("--rtp needs --producer ADDR[/MASK] (where the stream comes from), --upstream "
				"ADDR:PORT, or --any-producer to take RTP from anyone");
	if (!r->nup && (r->up_timeout_ms || r->up_revert))
		cli_usage_error("--upstream-timeout and --upstream-revert need --upstream");
	if (r->njoin && r->listen_addr)
		cli_usage_error("--join and -s exclude each other (a socket bound to one address does not get "
				"the group's datagrams)");
	for (size_t i = 0; i < r->njoin; i++)
		if (r->family && r->join[i].group.ss_family != r->family)
			cli_usage_error("--join '%s': not of the family of %s", r->join[i].arg,
					r->family == AF_INET ? "-4" : "-6");
	if (a->producer && r->any_producer)
		cli_usage_error("--producer and --any-producer exclude each other");
}

/* Port string (number or service) -> number, or exit 2 naming the option. */
uint16_t relay_port_number(const char *opt, const char *s)
{
	if (*s >= '0' && *s <= '9') /* getaddrinfo() would take 70000 as 4464 */
		return (uint16_t)cli_u64(opt, s, 1, 65535);
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM, .ai_flags = AI_PASSIVE }, *res = NULL;
	if (getaddrinfo(NULL, s, &hints, &res) != 0 || !res)
		cli_usage_error("%s: '%s' is not a port number or UDP service", opt, s);
	struct sockaddr_storage ss = { 0 };
	memcpy(&ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	uint16_t p = addr_port(&ss);
	if (p == 0)
		cli_usage_error("%s: port 0", opt);
	return p;
}

/* ---- configuration ------------------------------------------------------------- */

#define CMDLINE "<command line>"

/* Config files then the command line's receivers, in samplicator's order.
 * On reload (from != NULL) the command line's receivers are copied from the
 * configuration in force instead of parsed again: their names were resolved
 * at start. */
int relay_build_conf(struct relay *r, const struct relay_args *a, const struct rc_conf *from,
		     struct rc_conf *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < r->ncfile; i++)
		if (rc_parse_file(c, r->cfile[i].path, &r->cfile[i].o, err, errlen))
			return -1;
	if (a->nrcv > 0) {
		struct source *s = rc_add_source(c, CMDLINE, 0);
		if (!s) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		s->any = true;
		s->tx_delay_us = r->tx_delay_us;
		const struct source *o = NULL;
		for (size_t i = 0; from && i < from->n; i++)
			if (from->src[i].file && !strcmp(from->src[i].file, CMDLINE))
				o = &from->src[i];
		if (o) {
			s->rcv = malloc((o->n ? o->n : 1) * sizeof(*s->rcv));
			if (!s->rcv) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			memcpy(s->rcv, o->rcv, o->n * sizeof(*s->rcv));
			s->n = s->cap = o->n;
			c->receivers += o->n;
			return 0;
		}
		for (int i = 0; i < a->nrcv; i++) {
			char m[384];
			if (rc_parse_receiver(c, s, a->rcv[i], &r->argv_opts, m, sizeof(m))) {
				snprintf(err, errlen, "argument %d: %s", i + 1, m);
				return -1;
			}
		}
	}
	return 0;
}

/* Defaults that parse_args() may override... */
static void relay_defaults(struct relay *r)
{
	r->listen_port = RELAY_DEFAULT_PORT;
	r->rcvbuf = 4 << 20;
	r->sndbuf = 8 << 20;
	r->max_size = 65536;
	r->engine = GC_ENGINE_AUTO;
	r->cpu = -1;
	r->status_s = 60;
	r->expire_s = 30;
	r->argv_opts.flags = RCV_CHECKSUM;
	r->data_fd[0] = r->data_fd[1] = r->rtcp_fd[0] = r->rtcp_fd[1] = -1;
	r->raw_fd[0] = r->raw_fd[1] = -1;
	r->up_cur = r->up_last = -1;
}

/* ...and those whose "not given" is 0. */
static void relay_defaults_after_args(struct relay *r)
{
	if (!r->max_subs)
		r->max_subs = 4096;
	if (!r->clock_rate)
		r->clock_rate = 90000;
	if (!r->max_per_source)
		r->max_per_source = 64;
	if (!r->ctl_rate)
		r->ctl_rate = 200;
	if (!r->cookie_s)
		r->cookie_s = 30;
	if (!r->up_timeout_ms)
		r->up_timeout_ms = 500;
}

/* The receivers (arguments and -c files) into conf, checked against the mode;
 * the --producer filter; the engine.  Exits on a bad configuration. */
static void check_config(struct relay *r, const struct relay_args *a, struct rc_conf *conf)
{
	char err[512];
	if (relay_build_conf(r, a, NULL, conf, err, sizeof(err))) {
		rc_free(conf);
		cli_usage_error("%s", err);
	}
	if (r->rtp) {
		if (a->producer) {
			struct rc_conf pc = { 0 };
			char line[300];
			snprintf(line, sizeof(line), "%s:", a->producer);
			struct rc_opts po = { .family = r->family, .numeric = true };
			if (rc_parse_line(&pc, line, strlen(line), "--producer", 0, &po, err, sizeof(err)) ||
			    pc.n != 1) {
				rc_free(&pc);
				cli_usage_error("--producer: %s", err);
			}
			r->producer_net = pc.src[0].addr;
			r->producer_mask = pc.src[0].mask;
			r->have_producer_filter = !pc.src[0].any;
			rc_free(&pc);
		}
		for (size_t i = 0; i < conf->n; i++)
			for (size_t k = 0; k < conf->src[i].n; k++)
				if (conf->src[i].rcv[k].freq != 1 ||
				    conf->src[i].rcv[k].ttl != RELAY_DEFAULT_TTL)
					cli_usage_error("argument %zu: an interval or TTL does not apply to --rtp subscribers (ADDR[/PORT])",
							k + 1);
	} else if (conf->receivers == 0) {
		rc_free(conf);
		cli_usage_error("no receivers: give at least one RECEIVER, or -c with a file that has some");
	}
	if (gc_engine_available(r->engine) != 0)
		cli_fail("--engine %s: %s", gc_engine_name(r->engine), gc_errmsg());
}

void relay_configure(struct relay *r, struct relay_args *a, int argc, char **argv, struct rc_conf *conf)
{
	relay_defaults(r);
	parse_args(r, a, argc, argv);
	relay_defaults_after_args(r);
	check_config(r, a, conf);
}
