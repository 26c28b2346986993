/* SPDX-License-Identifier: MIT */
/*
 * groupcast lms: drive the LMS endpoint API (include/groupcast/lms.h) from
 * the command line, for tests and for poking at LMS routers.
 *
 *   groupcast lms request  send datagrams with the LMS request option
 *   groupcast lms recv     receive (join, leave), print each datagram and its option as JSON
 *   groupcast lms dmcast   send (or only build, --dry-run) a directed multicast
 *
 * See groupcast(1) and gc_lms(3).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <groupcast/lms.h>

#define LMS_BUF 65536

static void lms_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast lms request|recv|dmcast [options]\n"
		"  request --to G:PORT --src S [--group G] [--if IFNAME] [--ttl N]\n"
		"          [--data HEX | --size N] [--count N] [--interval-ms N]\n"
		"      send N datagrams carrying the LMS request option (138) for (S,G);\n"
		"      G defaults to the address of --to.  Needs CAP_NET_RAW.\n"
		"  recv    --port P [--bind A] [--join G[/S]] [--if IFNAME] [--count N]\n"
		"          [--timeout-ms N] [--leave-after N]\n"
		"      print {\"ready\":..} once listening, then one JSON line per datagram\n"
		"      (len, from, code, tpif, tpaddr, src, group, data) or per rejected one\n"
		"      (error, message); after --leave-after N datagrams leave the group and\n"
		"      print {\"left\":G}; stop after --count datagrams or --timeout-ms of\n"
		"      silence; last line {\"stats\":{..}}.\n"
		"  dmcast  --tp ADDR --tpif N --src S --group G --dport P [--sport P]\n"
		"          [--from A] [--ttl N] [--id N] [--data HEX | --size N] [--count N]\n"
		"          [--no-provisional] [--print] [--dry-run]\n"
		"      send a directed multicast to turning point ADDR; --no-provisional:\n"
		"      the routers run lmsd --no-provisional, so --tpif may have bit 15 set\n"
		"      (an ifindex above 32767); --print writes {\"packet\":HEX} (the whole\n"
		"      IPIP packet), --dry-run only builds it.\n"
		"      Needs CAP_NET_RAW unless --dry-run.\n"
		"Payload: --data HEX, or --size N bytes of the blast pattern (default 16).\n");
}

static unsigned ifindex(const char *opt, const char *name)
{
	unsigned i = if_nametoindex(name);
	if (!i)
		cli_usage_error("%s: no interface '%s' here", opt, name);
	return i;
}

static size_t hex_decode(const char *opt, const char *s, uint8_t *out, size_t cap)
{
	size_t n = strlen(s);
	if (n % 2 || n / 2 > cap)
		cli_usage_error("%s: expected an even number of hex digits, at most %zu bytes", opt, cap);
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdefABCDEF", s[2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", s[2 * i + 1]))
			cli_usage_error("%s: '%s' is not hex", opt, s);
		out[i] = (uint8_t)v;
	}
	return n / 2;
}

static void hex_print(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

static void print_info(const struct gc_lms_info *in)
{
	char a[3][INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &in->tpaddr, a[0], sizeof(a[0]));
	inet_ntop(AF_INET, &in->src, a[1], sizeof(a[1]));
	inet_ntop(AF_INET, &in->group, a[2], sizeof(a[2]));
	printf("\"code\":%d,\"tpif\":%u,\"tpaddr\":\"%s\",\"src\":\"%s\",\"group\":\"%s\"",
	       in->code, in->tpif, a[0], a[1], a[2]);
}

static void print_stats(void)
{
	struct gc_lms_stats st = GC_LMS_STATS_INIT();
	gc_lms_stats(&st);
	printf("{\"stats\":{\"requests_sent\":%llu,\"dmcasts_sent\":%llu,\"requests_received\":%llu,"
	       "\"dmcasts_received\":%llu,\"plain_received\":%llu,\"bad_options\":%llu}}\n",
	       (unsigned long long)st.requests_sent, (unsigned long long)st.dmcasts_sent,
	       (unsigned long long)st.requests_received, (unsigned long long)st.dmcasts_received,
	       (unsigned long long)st.plain_received, (unsigned long long)st.bad_options);
}

/* Options every subcommand shares. */
struct lms_args {
	const char *to, *src, *group, *ifname, *join, *bind, *tp, *from, *data;
	uint64_t port, tpif, sport, dport, ttl, id, count, interval_ms, timeout_ms, leave_after, size;
	bool have_ttl, print, dry_run, no_provisional;
};

static size_t payload(const struct lms_args *a, uint8_t *buf)
{
	if (a->data)
		return hex_decode("--data", a->data, buf, LMS_BUF);
	for (size_t i = 0; i < a->size; i++)
		buf[i] = cli_pattern(i);
	return a->size;
}

static int lms_request(struct lms_args *a, uint8_t *buf)
{
	if (!a->to || !a->src)
		cli_usage_error("request needs --to G:PORT and --src S");
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s", a->to);
	char *host, *port;
	cli_split_addr("--to", a->to, tmp, "ADDR:PORT", &host, &port);
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_addr = cli_ip4("--to", host),
				  .sin_port = htons((uint16_t)cli_u64("--to", port, 1, 65535)) };
	struct in_addr src = cli_ip4("--src", a->src);
	struct in_addr group = a->group ? cli_ip4("--group", a->group) : to.sin_addr;
	size_t len = payload(a, buf);

	int sd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sd < 0)
		cli_fail("socket: %s", strerror(errno));
	if (a->ifname) {
		struct ip_mreqn m = { .imr_ifindex = (int)ifindex("--if", a->ifname) };
		if (setsockopt(sd, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof(m)) != 0)
			cli_fail("--if %s: IP_MULTICAST_IF: %s", a->ifname, strerror(errno));
	}
	int ttl = a->have_ttl ? (int)a->ttl : 8; /* requests cross routers: above the default 1 */
	if (setsockopt(sd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) != 0 ||
	    setsockopt(sd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)) != 0)
		cli_fail("--ttl %d: %s", ttl, strerror(errno));
	for (uint64_t i = 0; i < a->count; i++) {
		if (i && a->interval_ms)
			usleep((useconds_t)(a->interval_ms * 1000));
		if (gc_lms_request(sd, &to, src, group, buf, len, 0) < 0)
			cli_fail("%s", gc_errmsg());
	}
	close(sd);
	print_stats();
	return 0;
}

static int lms_recv(struct lms_args *a, uint8_t *buf)
{
	int sd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sd < 0)
		cli_fail("socket: %s", strerror(errno));
	int one = 1;
	(void)setsockopt(sd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in me = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)a->port),
				  .sin_addr = a->bind ? cli_ip4("--bind", a->bind)
						      : (struct in_addr){ INADDR_ANY } };
	if (bind(sd, (struct sockaddr *)&me, sizeof(me)) != 0)
		cli_fail("--port %u: bind: %s", (unsigned)a->port, strerror(errno));
	struct in_addr group = { 0 }, source = { 0 };
	unsigned ifi = a->ifname ? ifindex("--if", a->ifname) : 0;
	if (a->join) {
		char tmp[64];
		snprintf(tmp, sizeof(tmp), "%s", a->join);
		char *slash = strchr(tmp, '/');
		if (slash) {
			*slash = '\0';
			source = cli_ip4("--join", slash + 1);
		}
		group = cli_ip4("--join", tmp);
		if (gc_lms_join(sd, group, source, ifi) < 0)
			cli_fail("%s", gc_errmsg());
	}
	if (gc_lms_recvopts(sd, 1) < 0)
		cli_fail("%s", gc_errmsg());
	struct timeval tv = { .tv_sec = (time_t)(a->timeout_ms / 1000),
			      .tv_usec = (suseconds_t)(a->timeout_ms % 1000 * 1000) };
	if (setsockopt(sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
		cli_fail("SO_RCVTIMEO: %s", strerror(errno));
	printf("{\"ready\":true}\n");
	fflush(stdout);

	uint64_t got = 0;
	bool left = false;
	while (got < a->count) {
		struct sockaddr_in from;
		struct gc_lms_info info;
		ssize_t n = gc_lms_recv(sd, buf, LMS_BUF, 0, &from, &info);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break; /* --timeout-ms of silence */
		got++;
		if (n < 0) {
			const char *name = strerrorname_np(errno);
			printf("{\"error\":\"%s\",\"message\":", name ? name : "?");
			cli_json_str(stdout, gc_errmsg());
			printf("}\n");
		} else {
			char f[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &from.sin_addr, f, sizeof(f));
			printf("{\"len\":%zd,\"from\":\"%s:%u\",", n, f, ntohs(from.sin_port));
			print_info(&info);
			printf(",\"data\":\"");
			hex_print(buf, (size_t)n);
			printf("\"}\n");
		}
		if (a->join && !left && a->leave_after && got >= a->leave_after) {
			if (gc_lms_leave(sd, group, source, ifi) < 0)
				cli_fail("%s", gc_errmsg());
			left = true;
			printf("{\"left\":\"%s\"}\n", inet_ntoa(group));
		}
		fflush(stdout);
	}
	close(sd);
	print_stats();
	return 0;
}

static int lms_dmcast(struct lms_args *a, uint8_t *buf)
{
	if (!a->tp || !a->src || !a->group || !a->dport)
		cli_usage_error("dmcast needs --tp, --tpif, --src, --group and --dport");
	struct gc_lms_dmcast d =
		GC_LMS_DMCAST_INIT(.flags = a->no_provisional ? GC_LMS_DMCAST_NO_PROVISIONAL : 0,
				   .tp = { .code = GC_LMS_DMCAST,
					   .tpif = (unsigned)a->tpif,
					   .tpaddr = cli_ip4("--tp", a->tp),
					   .src = cli_ip4("--src", a->src),
					   .group = cli_ip4("--group", a->group) },
				   .from = a->from ? cli_ip4("--from", a->from)
						   : (struct in_addr){ INADDR_ANY },
				   .sport = (uint16_t)a->sport, .dport = (uint16_t)a->dport,
				   .ttl = (uint8_t)a->ttl, .id = (uint16_t)a->id, );
	size_t len = payload(a, buf);
	static uint8_t pkt[LMS_BUF + GC_LMS_DMCAST_HDRLEN];
	ssize_t plen = gc_lms_dmcast_build(pkt, sizeof(pkt), &d, buf, len);
	if (plen < 0)
		cli_fail("%s", gc_errmsg());
	if (a->print) {
		printf("{\"packet\":\"");
		hex_print(pkt, (size_t)plen);
		printf("\"}\n");
		fflush(stdout);
	}
	if (a->dry_run)
		return 0;
	int fd = gc_lms_raw_socket();
	if (fd < 0)
		cli_fail("%s", gc_errmsg());
	for (uint64_t i = 0; i < a->count; i++) {
		if (i && a->interval_ms)
			usleep((useconds_t)(a->interval_ms * 1000));
		if (gc_lms_dmcast(fd, &d, buf, len, 0) < 0)
			cli_fail("%s", gc_errmsg());
	}
	close(fd);
	print_stats();
	return 0;
}

int cmd_lms(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "to", required_argument, NULL, 't' },
		{ "src", required_argument, NULL, 's' },
		{ "group", required_argument, NULL, 'g' },
		{ "if", required_argument, NULL, 'i' },
		{ "ttl", required_argument, NULL, 'T' },
		{ "data", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 'z' },
		{ "count", required_argument, NULL, 'c' },
		{ "interval-ms", required_argument, NULL, 'I' },
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "join", required_argument, NULL, 'j' },
		{ "timeout-ms", required_argument, NULL, 'w' },
		{ "leave-after", required_argument, NULL, 'L' },
		{ "tp", required_argument, NULL, 'P' },
		{ "tpif", required_argument, NULL, 'f' },
		{ "sport", required_argument, NULL, 'S' },
		{ "dport", required_argument, NULL, 'D' },
		{ "from", required_argument, NULL, 'F' },
		{ "id", required_argument, NULL, 'n' },
		{ "print", no_argument, NULL, 'o' },
		{ "dry-run", no_argument, NULL, 'N' },
		{ "no-provisional", no_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		lms_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : 0;
	}
	const char *sub = argv[1];
	if (strcmp(sub, "request") && strcmp(sub, "recv") && strcmp(sub, "dmcast"))
		cli_usage_error("unknown lms command '%s' (expected request, recv or dmcast)", sub);
	struct lms_args a = { .count = 1, .size = 16, .timeout_ms = 2000 };
	bool counted = false;
	int ch;
	opterr = 0;
	optind = 2;
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (ch) {
		case 't': a.to = optarg; break;
		case 's': a.src = optarg; break;
		case 'g': a.group = optarg; break;
		case 'i': a.ifname = optarg; break;
		case 'T':
			a.ttl = cli_u64("--ttl", optarg, 1, 255);
			a.have_ttl = true;
			break;
		case 'd': a.data = optarg; break;
		case 'z': a.size = cli_u64("--size", optarg, 0, 65535); break;
		case 'c':
			a.count = cli_u64("--count", optarg, 1, UINT32_MAX);
			counted = true;
			break;
		case 'I': a.interval_ms = cli_u64("--interval-ms", optarg, 0, 60000); break;
		case 'p': a.port = cli_u64("--port", optarg, 1, 65535); break;
		case 'b': a.bind = optarg; break;
		case 'j': a.join = optarg; break;
		case 'w': a.timeout_ms = cli_u64("--timeout-ms", optarg, 1, 3600000); break;
		case 'L': a.leave_after = cli_u64("--leave-after", optarg, 1, UINT32_MAX); break;
		case 'P': a.tp = optarg; break;
		/* 0 and > 65535 go through: the library's own checks name them */
		case 'f': a.tpif = cli_u64("--tpif", optarg, 0, INT32_MAX); break;
		case 'S': a.sport = cli_u64("--sport", optarg, 0, 65535); break;
		case 'D': a.dport = cli_u64("--dport", optarg, 0, 65535); break;
		case 'F': a.from = optarg; break;
		case 'n': a.id = cli_u64("--id", optarg, 0, 65535); break;
		case 'o': a.print = true; break;
		case 'N': a.dry_run = true; break;
		case 'x': a.no_provisional = true; break;
		case 'h': lms_usage(stdout); return 0;
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	static uint8_t buf[LMS_BUF];
	if (!strcmp(sub, "request"))
		return lms_request(&a, buf);
	if (!strcmp(sub, "dmcast"))
		return lms_dmcast(&a, buf);
	if (!a.port)
		cli_usage_error("recv needs --port");
	if (!counted)
		a.count = UINT32_MAX; /* until --timeout-ms of silence */
	return lms_recv(&a, buf);
}
