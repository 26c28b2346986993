/* SPDX-License-Identifier: MIT */
/*
 * groupcast - command line tool of libgroupcast.
 *
 *   groupcast sink     receive on many UDP ports, count and verify
 *   groupcast blast    group sends with every engine, interleaved, measured
 *   groupcast engines  which engines this machine allows
 *   groupcast relay    samplicator-compatible replicator and RTP broadcast relay (relay/)
 *   groupcast engine   the packet-ring engine as a daemon on a Unix socket (engine.c)
 *   groupcast ring-send  send numbered datagrams through a packet ring (ringsend.c)
 *   groupcast lms      LMS requests, receive with turning point, dmcasts (lms.c)
 *   groupcast ltp      reliable multicast of a file with LTP on LMS (ltp.c)
 *   groupcast dccp     one DCCP connection: listen or send through a ring (dccp.c)
 *
 * This file: dispatch, shared helpers, and the `engines` subcommand.
 * See groupcast(1).
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <groupcast/group.h>

#include "log.h"

#ifndef GC_TOOL_VERSION
#define GC_TOOL_VERSION "unknown"
#endif

const char *cli_cmd = "groupcast";

static void vmsg(int level, const char *fmt, va_list ap)
{
	fflush(stdout);
	if (log_active && level) { /* a daemon (relay, engine): its log's shape */
		char m[1024];
		vsnprintf(m, sizeof(m), fmt, ap);
		log_event(level, level == LL_ERR ? "fatal" : "warning", "msg=%s", m);
		return;
	}
	fprintf(stderr, "%s: ", cli_cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(0, fmt, ap); /* bad arguments: plain text, as --help */
	va_end(ap);
	fprintf(stderr, "Try '%s --help'.\n", cli_cmd);
	exit(CLI_EXIT_USAGE);
}

void cli_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(LL_ERR, fmt, ap);
	va_end(ap);
	exit(CLI_EXIT_FAIL);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(LL_WARNING, fmt, ap);
	va_end(ap);
}

int cli_log_level(const char *s)
{
	int l = log_level_parse(s);
	if (l < 0)
		cli_usage_error("--log-level: '%s' is not one of " LOG_LEVEL_NAMES, s);
	return l;
}

void cli_getopt_error(int ch, char **argv)
{
	/* getopt_long() has already advanced optind past the bad element. */
	const char *bad = (optind > 0) ? argv[optind - 1] : "?";
	if (ch == ':')
		cli_usage_error("option '%s' needs a value", bad);
	if (optopt && bad[0] == '-' && bad[1] != '-')
		cli_usage_error("unknown option '-%c'", optopt);
	if (bad[0] == '-' && bad[1] == '-' && strchr(bad, '='))
		cli_usage_error("option '%s' is unknown or takes no value", bad);
	cli_usage_error("unknown or ambiguous option '%s'", bad);
}

uint64_t cli_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	const char *p = s;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '-' || *p == '+' || *p == '\0')
		cli_usage_error("%s: expected an integer in %llu..%llu, got '%s'", opt,
				(unsigned long long)min, (unsigned long long)max, s);
	errno = 0;
	char *end;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		cli_usage_error("%s: expected an integer in %llu..%llu, got '%s'", opt,
				(unsigned long long)min, (unsigned long long)max, s);
	return v;
}

int cli_cpu(const char *opt, const char *s)
{
	if (strcmp(s, "none") == 0 || strcmp(s, "-1") == 0)
		return -1;
	return (int)cli_u64(opt, s, 0, CPU_SETSIZE - 1);
}

void cli_split_addr(const char *opt, const char *s, char *buf, const char *form, char **addr, char **rest)
{
	enum addr_split_error why;
	if (addr_split(buf, addr, rest, &why) == 0)
		return;
	if (why == ADDR_SPLIT_BRACKET)
		cli_usage_error("%s: '%s': expected [IPv6]:%s", opt, s, strchr(form, ':') + 1);
	if (why == ADDR_SPLIT_BARE_IPV6)
		cli_usage_error("%s: '%s': write IPv6 addresses in brackets, [ADDR]:%s", opt, s,
				strchr(form, ':') + 1);
	cli_usage_error("%s: '%s': expected %s", opt, s, form);
}

int cli_ip(const char *opt, const char *s, uint16_t port, struct sockaddr_storage *ss)
{
	int fam = addr_numeric(s, port, ss);
	if (fam < 0)
		cli_usage_error("%s: '%s' is not a numeric IPv4 or IPv6 address", opt, s);
	return fam;
}

struct in_addr cli_ip4(const char *opt, const char *s)
{
	struct in_addr a;
	if (inet_pton(AF_INET, s, &a) != 1)
		cli_usage_error("%s: '%s' is not a numeric IPv4 address", opt, s);
	return a;
}

void cli_pin(const char *opt, int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		cli_usage_error("%s: cannot run on CPU %d (%ld CPUs online; or not in this cpuset): %s",
				opt, cpu, sysconf(_SC_NPROCESSORS_ONLN), strerror(errno));
}

void cli_raise_nofile(size_t need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return;
	if (rl.rlim_max < need) {
		struct rlimit hard = { need, need };
		if (setrlimit(RLIMIT_NOFILE, &hard) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

int cli_sockbuf(int fd, bool rcv, int bytes)
{
	int force = rcv ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;
	int plain = rcv ? SO_RCVBUF : SO_SNDBUF;
	if (bytes > 0 && setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof(bytes)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof(bytes));
	int got = 0;
	socklen_t len = sizeof(got);
	if (getsockopt(fd, SOL_SOCKET, plain, &got, &len) != 0)
		got = -1;
	return got;
}

uint64_t cli_now(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cli_json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* ---- engines ----------------------------------------------------------- */

static void engines_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast engines [--json]\n"
		"List the send engines, whether this machine allows each (and why not),\n"
		"and the engine AUTO resolves to on a new UDP socket, with the reason it\n"
		"took the kernel engine or not (an egress policy it would bypass).\n"
		"  --json    one JSON object on stdout instead of a table\n");
}

static int cmd_engines(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (ch) {
		case 'j': json = true; break;
		case 'h': engines_usage(stdout); return 0;
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);

	if (json)
		fputs("{\"engines\":[", stdout);
	else
		printf("%-10s %-10s %s\n", "engine", "available", "reason");
	for (int e = GC_ENGINE_AUTO + 1; e < GC_ENGINE_COUNT; e++) {
		const char *name = gc_engine_name((enum gc_engine)e);
		int ok = gc_engine_available((enum gc_engine)e) == 0;
		const char *why = ok ? NULL : gc_errmsg();
		if (!ok && (!why || !*why))
			why = strerror(errno);
		if (json) {
			printf("%s{\"name\":", e > GC_ENGINE_AUTO + 1 ? "," : "");
			cli_json_str(stdout, name ? name : "?");
			printf(",\"available\":%s,\"reason\":", ok ? "true" : "false");
			cli_json_str(stdout, why);
			putchar('}');
		} else {
			printf("%-10s %-10s %s\n", name ? name : "?", ok ? "yes" : "no", why ? why : "");
		}
	}

	/* AUTO decides per socket: on a plain new UDP socket of this process,
	 * in this network namespace and cgroup (groupcast(7), "AUTO") */
	const char *autoname = NULL, *autowhy = NULL;
	char reason[256] = "";
	int sd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sd < 0) {
		autowhy = strerror(errno);
	} else {
		enum gc_engine a = gc_get_engine(sd);
		if (a == GC_ENGINE_NONE)
			autowhy = gc_errmsg();
		else
			autoname = gc_engine_name(a);
		if (autoname && gc_auto_reason(sd, reason, sizeof(reason)))
			snprintf(reason, sizeof(reason), "%s", gc_errmsg());
		gc_release(sd);
		close(sd);
	}
	if (json) {
		fputs("],\"auto\":", stdout);
		cli_json_str(stdout, autoname);
		if (autoname) {
			fputs(",\"auto_reason\":", stdout);
			cli_json_str(stdout, reason);
		} else {
			fputs(",\"auto_error\":", stdout);
			cli_json_str(stdout, autowhy);
		}
		fputs("}\n", stdout);
	} else if (autoname) {
		printf("auto -> %s\n%s\n", autoname, reason);
	} else {
		printf("auto -> (error: %s)\n", autowhy ? autowhy : "unknown");
	}
	if (fflush(stdout) != 0)
		return CLI_EXIT_FAIL;
	return autoname ? 0 : CLI_EXIT_FAIL;
}

/* ---- dispatch ---------------------------------------------------------- */

static void main_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast COMMAND [OPTIONS]\n"
		"Commands:\n"
		"  sink       receive on many UDP ports; count, verify, dump\n"
		"  blast      group sends with each engine, interleaved; measure CPU per send\n"
		"  engines    list the send engines and which AUTO picks\n"
		"  relay      receive datagrams and fan them out (samplicator-compatible; --rtp)\n"
		"  engine     run the packet-ring engine as a daemon on a Unix socket\n"
		"  ring-send  send numbered datagrams through a packet ring (daemon or thread)\n"
		"  lms        LMS endpoint: send requests, receive them, send dmcasts\n"
		"  ltp        reliable multicast on LMS: send a file at a rate, receive it\n"
		"  dccp       one DCCP connection (native or DCCP-UDP): listen, or send a ring\n"
		"Run 'groupcast COMMAND --help' for the options of a command.\n"
		"Exit status: 0 done, 1 failure, 2 bad arguments.\n");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		const char *full;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "sink", "groupcast sink", cmd_sink },
		{ "blast", "groupcast blast", cmd_blast },
		{ "engines", "groupcast engines", cmd_engines },
		{ "relay", "groupcast relay", cmd_relay },
		{ "engine", "groupcast engine", cmd_engine },
		{ "ring-send", "groupcast ring-send", cmd_ringsend },
		{ "lms", "groupcast lms", cmd_lms },
		{ "ltp", "groupcast ltp", cmd_ltp },
		{ "dccp", "groupcast dccp", cmd_dccp },
	};
	if (argc < 2) {
		main_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *c = argv[1];
	if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
		main_usage(stdout);
		return 0;
	}
	if (!strcmp(c, "--version")) {
		printf("groupcast %s\n", GC_TOOL_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(c, cmds[i].name) == 0) {
			cli_cmd = cmds[i].full;
			argv[1] = (char *)cmds[i].full;
			optind = 1;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	}
	cli_usage_error("unknown command '%s' (expected sink, blast, engines, relay, engine, ring-send, lms, ltp or dccp)",
			c);
}
