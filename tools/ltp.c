/* SPDX-License-Identifier: MIT */
/*
 * groupcast ltp: reliable multicast of a file or a generated stream with LTP
 * (include/groupcast/lms.h, gc_ltp(3)), for tests and benchmarks.
 *
 *   groupcast ltp send   multicast a file at a rate, then answer repairs a while
 *   groupcast ltp recv   receive to a file (optionally as a replier); JSON stats
 *
 * See groupcast(1).
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <groupcast/lms.h>
#include <groupcast/ltp.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void ltp_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast ltp send|recv [options]\n"
		"  send --group G --port P --if IFNAME [--file PATH | --size N] [--rate BYTES/S]\n"
		"       [--payload N] [--session N] [--linger-ms N] [--cache-bytes N] [--ttl N]\n"
		"       [--req-rate N] [--req-rate-all N] [--repair-rate N] [--no-provisional]\n"
		"      multicast PATH (or N bytes of the blast pattern) in datagrams of --payload\n"
		"      bytes (default 1400) at --rate (default 1000000), finish, then answer\n"
		"      requests for --linger-ms (default 2000); print one JSON line of stats.\n"
		"  recv --group G --port P --source S --if IFNAME [--out PATH] [--replier]\n"
		"       [--unordered --payload N] [--session N] [--timeout-ms N] [--linger-ms N]\n"
		"       [--nak-ms N] [--max-tries N] [--escalate-after N] [--window-bytes N]\n"
		"       [--cache-bytes N] [--max-ranges N] [--req-rate N] [--req-rate-all N]\n"
		"       [--repair-rate N] [--ttl N] [--replier-cost N [--report-ms N]]\n"
		"       [--samples FILE] [--no-provisional]\n"
		"      print {\"ready\":true} once joined; write the stream to PATH in order\n"
		"      (--unordered: at seq * --payload); stop at its end (then keep answering\n"
		"      requests --linger-ms, for repliers), after --timeout-ms (default 60000) or\n"
		"      on SIGTERM; print one JSON line: complete, bytes, lost ranges, stats,\n"
		"      recovery latency percentiles.  --replier-cost: a replier reports itself\n"
		"      to its router (lmsd's LMS-HIER) every --report-ms (default 100).\n"
		"      --samples: write every recovery latency (us) to FILE, one a line.\n"
		"--no-provisional: the routers run lmsd --no-provisional, so a request's tpif\n"
		"is the whole 16-bit ifindex, never a provisional mark (GC_LTP_NO_PROVISIONAL).\n"
		"Needs CAP_NET_RAW (requests carry an IP option; repairs are raw dmcasts).\n");
}

/* The interface's index and first IPv4 address. */
static void iface(const char *name, struct gc_ltp_opts *c)
{
	struct ifaddrs *ifs, *i;

	c->ifindex = if_nametoindex(name);
	if (!c->ifindex)
		cli_usage_error("--if: no interface '%s' here", name);
	if (getifaddrs(&ifs) != 0)
		cli_fail("getifaddrs: %s", strerror(errno));
	for (i = ifs; i; i = i->ifa_next) {
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, name)) {
			c->ifaddr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			break;
		}
	}
	freeifaddrs(ifs);
	if (!i)
		cli_usage_error("--if: '%s' has no IPv4 address", name);
}

static void wait_for(struct gc_ltp *l)
{
	struct pollfd p = { .fd = gc_ltp_fd(l), .events = POLLIN };
	int t = gc_ltp_timeout(l);

	if (poll(&p, 1, t < 0 || t > 100 ? 100 : t) < 0 && errno != EINTR)
		cli_fail("poll: %s", strerror(errno));
	if (gc_ltp_process(l) < 0)
		cli_fail("%s", gc_errmsg());
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Every kept recovery latency (us), one per line, oldest first. */
static void write_samples(const struct gc_ltp *l, const char *path)
{
	static uint32_t us[65536];
	size_t n = gc_ltp_recovery_samples(l, us, 65536);
	FILE *f = fopen(path, "w");

	if (!f)
		cli_fail("--samples %s: %s", path, strerror(errno));
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%u\n", us[i]);
	if (fclose(f))
		cli_fail("--samples %s: %s", path, strerror(errno));
}

static void print_stats(const struct gc_ltp *l)
{
	struct gc_ltp_stats s = GC_LTP_STATS_INIT();
	gc_ltp_stats(l, &s);
	printf("\"stats\":{\"data_sent\":%llu,\"bytes_sent\":%llu,\"heartbeats_sent\":%llu,"
	       "\"data_received\":%llu,\"bytes_delivered\":%llu,\"duplicates\":%llu,"
	       "\"repairs_received\":%llu,\"repairs_unneeded\":%llu,\"requests_sent\":%llu,"
	       "\"escalations_sent\":%llu,\"gaps_detected\":%llu,\"lost\":%llu,\"window_drops\":%llu,"
	       "\"requests_received\":%llu,\"repairs_sent\":%llu,\"repairs_missing\":%llu,"
	       "\"requests_limited\":%llu,\"repairs_limited\":%llu,\"bad_packets\":%llu,"
	       "\"recovered\":%llu,\"recovery_us_sum\":%llu,\"recovery_us_max\":%llu,\"reports_sent\":%llu}",
	       (unsigned long long)s.data_sent, (unsigned long long)s.bytes_sent,
	       (unsigned long long)s.heartbeats_sent, (unsigned long long)s.data_received,
	       (unsigned long long)s.bytes_delivered, (unsigned long long)s.duplicates,
	       (unsigned long long)s.repairs_received, (unsigned long long)s.repairs_unneeded,
	       (unsigned long long)s.requests_sent, (unsigned long long)s.escalations_sent,
	       (unsigned long long)s.gaps_detected, (unsigned long long)s.lost,
	       (unsigned long long)s.window_drops, (unsigned long long)s.requests_received,
	       (unsigned long long)s.repairs_sent, (unsigned long long)s.repairs_missing,
	       (unsigned long long)s.requests_limited, (unsigned long long)s.repairs_limited,
	       (unsigned long long)s.bad_packets, (unsigned long long)s.recovered,
	       (unsigned long long)s.recovery_us_sum, (unsigned long long)s.recovery_us_max,
	       (unsigned long long)s.reports_sent);
	static uint32_t us[65536];
	size_t n = gc_ltp_recovery_samples(l, us, 65536);
	qsort(us, n, sizeof(us[0]), cmp_u32);
	printf(",\"recovery_us\":{\"n\":%zu", n);
	if (n) {
		uint64_t sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += us[i];
		printf(",\"mean\":%.1f,\"p50\":%u,\"p90\":%u,\"p99\":%u,\"max\":%u",
		       (double)sum / (double)n, us[n / 2], us[n * 9 / 10], us[n * 99 / 100], us[n - 1]);
	}
	printf("}");
}

struct ltp_args {
	struct gc_ltp_opts c;
	const char *file, *out, *ifname, *samples;
	uint64_t size, timeout_ms, linger_ms;
	unsigned payload;
	bool linger_set;
};

static int ltp_send(struct ltp_args *a)
{
	a->c.flags = GC_LTP_SENDER | (a->c.flags & GC_LTP_NO_PROVISIONAL);
	a->c.source = a->c.ifaddr;
	int fd = -1;
	if (a->file && (fd = open(a->file, O_RDONLY | O_CLOEXEC)) < 0)
		cli_fail("--file %s: %s", a->file, strerror(errno));
	struct gc_ltp *l = gc_ltp_create(&a->c);
	if (!l)
		cli_fail("%s", gc_errmsg());
	uint8_t buf[GC_LTP_MAX_PAYLOAD];
	uint64_t off = 0, t0 = cli_now(CLOCK_MONOTONIC);
	for (;;) {
		size_t n;
		if (fd >= 0) {
			ssize_t r = read(fd, buf, a->payload);
			if (r < 0)
				cli_fail("--file %s: read: %s", a->file, strerror(errno));
			n = (size_t)r;
		} else {
			n = a->size - off < a->payload ? (size_t)(a->size - off) : a->payload;
			for (size_t i = 0; i < n; i++)
				buf[i] = cli_pattern(off + i);
		}
		if (n == 0 || stop)
			break;
		while (gc_ltp_send(l, buf, n) < 0) {
			if (errno != EAGAIN)
				cli_fail("%s", gc_errmsg());
			wait_for(l);
		}
		off += n;
		if (gc_ltp_process(l) < 0)
			cli_fail("%s", gc_errmsg());
	}
	uint64_t t1 = cli_now(CLOCK_MONOTONIC);
	gc_ltp_finish(l);
	uint64_t until = t1 + a->linger_ms * 1000000ull;
	while (!stop && cli_now(CLOCK_MONOTONIC) < until)
		wait_for(l);
	printf("{\"role\":\"send\",\"bytes\":%llu,\"seconds\":%.3f,", (unsigned long long)off,
	       (double)(t1 - t0) / 1e9);
	print_stats(l);
	printf("}\n");
	fflush(stdout);
	gc_ltp_destroy(l);
	if (fd >= 0)
		close(fd);
	return 0;
}

static int ltp_recv(struct ltp_args *a)
{
	a->c.flags |= GC_LTP_RECEIVER;
	int fd = -1;
	if (a->out && (fd = open(a->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		cli_fail("--out %s: %s", a->out, strerror(errno));
	struct gc_ltp *l = gc_ltp_create(&a->c);
	if (!l)
		cli_fail("%s", gc_errmsg());
	printf("{\"ready\":true}\n");
	fflush(stdout);
	uint8_t buf[GC_LTP_MAX_PAYLOAD];
	uint64_t bytes = 0, t0 = cli_now(CLOCK_MONOTONIC), deadline = t0 + a->timeout_ms * 1000000ull;
	uint64_t lost[16][2], nlost = 0;
	bool end = false;
	while (!stop && !end && cli_now(CLOCK_MONOTONIC) < deadline) {
		wait_for(l);
		struct gc_ltp_msg m;
		ssize_t n;
		while ((n = gc_ltp_recv(l, buf, sizeof(buf), &m)) >= 0) {
			if (m.type == GC_LTP_DATA) {
				ssize_t w = fd < 0 ? n
					: a->c.flags & GC_LTP_UNORDERED
					? pwrite(fd, buf, (size_t)n, (off_t)(m.seq * a->payload))
					: write(fd, buf, (size_t)n);
				if (w != n)
					cli_fail("--out %s: write: %s", a->out, strerror(errno));
				bytes += (uint64_t)n;
			} else if (m.type == GC_LTP_LOSS) {
				if (nlost < 16) {
					lost[nlost][0] = m.lo;
					lost[nlost][1] = m.hi;
				}
				nlost++;
			} else {
				end = true;
				break;
			}
		}
		if (errno != EAGAIN && !end)
			cli_fail("%s", gc_errmsg());
	}
	uint64_t t1 = cli_now(CLOCK_MONOTONIC);
	/* A replier goes on answering the others after its own end. */
	uint64_t until = t1 + a->linger_ms * 1000000ull;
	while (!stop && cli_now(CLOCK_MONOTONIC) < until)
		wait_for(l);
	printf("{\"role\":\"recv\",\"complete\":%s,\"bytes\":%llu,\"seconds\":%.3f,\"loss_events\":%llu,\"lost\":[",
	       end && nlost == 0 ? "true" : "false", (unsigned long long)bytes,
	       (double)(t1 - t0) / 1e9, (unsigned long long)nlost);
	for (uint64_t i = 0; i < nlost && i < 16; i++)
		printf("%s[%llu,%llu]", i ? "," : "", (unsigned long long)lost[i][0],
		       (unsigned long long)lost[i][1]);
	if (a->samples)
		write_samples(l, a->samples);
	printf("],\"end\":%s,", end ? "true" : "false");
	print_stats(l);
	printf("}\n");
	fflush(stdout);
	gc_ltp_destroy(l);
	if (fd >= 0)
		close(fd);
	return 0;
}

int cmd_ltp(int argc, char **argv)
{
	enum {
		O_GROUP = 256,
		O_PORT,
		O_IF,
		O_FILE,
		O_SIZE,
		O_RATE,
		O_PAYLOAD,
		O_SESSION,
		O_LINGER,
		O_CACHE,
		O_TTL,
		O_SOURCE,
		O_OUT,
		O_REPLIER,
		O_UNORDERED,
		O_TIMEOUT,
		O_NAK,
		O_TRIES,
		O_ESC,
		O_WINDOW,
		O_RANGES,
		O_REQ,
		O_REQALL,
		O_REPAIR,
		O_COST,
		O_REPORT,
		O_SAMPLES,
		O_NOPROV
	};
	static const struct option opts[] = {
		{ "group", required_argument, 0, O_GROUP },
		{ "port", required_argument, 0, O_PORT },
		{ "if", required_argument, 0, O_IF },
		{ "file", required_argument, 0, O_FILE },
		{ "size", required_argument, 0, O_SIZE },
		{ "rate", required_argument, 0, O_RATE },
		{ "payload", required_argument, 0, O_PAYLOAD },
		{ "session", required_argument, 0, O_SESSION },
		{ "linger-ms", required_argument, 0, O_LINGER },
		{ "cache-bytes", required_argument, 0, O_CACHE },
		{ "ttl", required_argument, 0, O_TTL },
		{ "source", required_argument, 0, O_SOURCE },
		{ "out", required_argument, 0, O_OUT },
		{ "replier", no_argument, 0, O_REPLIER },
		{ "unordered", no_argument, 0, O_UNORDERED },
		{ "timeout-ms", required_argument, 0, O_TIMEOUT },
		{ "nak-ms", required_argument, 0, O_NAK },
		{ "max-tries", required_argument, 0, O_TRIES },
		{ "escalate-after", required_argument, 0, O_ESC },
		{ "window-bytes", required_argument, 0, O_WINDOW },
		{ "max-ranges", required_argument, 0, O_RANGES },
		{ "req-rate", required_argument, 0, O_REQ },
		{ "req-rate-all", required_argument, 0, O_REQALL },
		{ "repair-rate", required_argument, 0, O_REPAIR },
		{ "replier-cost", required_argument, 0, O_COST },
		{ "report-ms", required_argument, 0, O_REPORT },
		{ "samples", required_argument, 0, O_SAMPLES },
		{ "no-provisional", no_argument, 0, O_NOPROV },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		ltp_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : 0;
	}
	const char *sub = argv[1];
	bool send = !strcmp(sub, "send");
	if (!send && strcmp(sub, "recv"))
		cli_usage_error("'%s': expected send or recv", sub);
	struct ltp_args a = { .c = GC_LTP_OPTS_INIT(), .payload = 1400, .size = 0, .timeout_ms = 60000 };
	bool have_group = false, have_port = false, have_source = false;
	optind = 2;
	int ch;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case O_GROUP:
			a.c.group = cli_ip4("--group", optarg);
			have_group = true;
			break;
		case O_PORT:
			a.c.port = (uint16_t)cli_u64("--port", optarg, 1, 65535);
			have_port = true;
			break;
		case O_IF: a.ifname = optarg; break;
		case O_FILE: a.file = optarg; break;
		case O_SIZE: a.size = cli_u64("--size", optarg, 0, 1ull << 40); break;
		case O_RATE: a.c.rate = cli_u64("--rate", optarg, 1000, 10000000000ull); break;
		case O_PAYLOAD:
			a.payload = (unsigned)cli_u64("--payload", optarg, 1, GC_LTP_MAX_PAYLOAD);
			break;
		case O_SESSION:
			a.c.session = (uint32_t)cli_u64("--session", optarg, 1, UINT32_MAX);
			break;
		case O_LINGER:
			a.linger_ms = cli_u64("--linger-ms", optarg, 0, 3600000);
			a.linger_set = true;
			break;
		case O_CACHE:
			a.c.cache_bytes = (uint32_t)cli_u64("--cache-bytes", optarg, 1, 1u << 30);
			break;
		case O_TTL: a.c.ttl = (uint8_t)cli_u64("--ttl", optarg, 1, 255); break;
		case O_SOURCE:
			a.c.source = cli_ip4("--source", optarg);
			have_source = true;
			break;
		case O_OUT: a.out = optarg; break;
		case O_REPLIER: a.c.flags |= GC_LTP_REPLIER; break;
		case O_UNORDERED: a.c.flags |= GC_LTP_UNORDERED; break;
		case O_TIMEOUT: a.timeout_ms = cli_u64("--timeout-ms", optarg, 1, 3600000); break;
		case O_NAK: a.c.nak_ms = (uint32_t)cli_u64("--nak-ms", optarg, 1, 60000); break;
		case O_TRIES:
			a.c.max_tries = (uint32_t)cli_u64("--max-tries", optarg, 1, 1000);
			break;
		case O_ESC:
			a.c.escalate_after = (uint32_t)cli_u64("--escalate-after", optarg, 1, 1000);
			break;
		case O_WINDOW:
			a.c.window_bytes = (uint32_t)cli_u64("--window-bytes", optarg, 1, 1u << 30);
			break;
		case O_RANGES:
			a.c.max_ranges = (uint32_t)cli_u64("--max-ranges", optarg, 1, 65536);
			break;
		case O_REQ:
			a.c.req_rate_peer = (uint32_t)cli_u64("--req-rate", optarg, 1, 1000000);
			break;
		case O_REQALL:
			a.c.req_rate_all = (uint32_t)cli_u64("--req-rate-all", optarg, 1, 1000000);
			break;
		case O_REPAIR:
			a.c.repair_rate = (uint32_t)cli_u64("--repair-rate", optarg, 1, 10000000);
			break;
		case O_COST:
			a.c.replier_cost =
				(uint32_t)cli_u64("--replier-cost", optarg, 1, UINT32_MAX - 1);
			break;
		case O_REPORT:
			a.c.report_ms = (uint32_t)cli_u64("--report-ms", optarg, 10, 60000);
			break;
		case O_SAMPLES: a.samples = optarg; break;
		case O_NOPROV: a.c.flags |= GC_LTP_NO_PROVISIONAL; break;
		case 'h': ltp_usage(stdout); return 0;
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind != argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (!have_group || !have_port || !a.ifname)
		cli_usage_error("%s needs --group, --port and --if", sub);
	if ((ntohl(a.c.group.s_addr) >> 28) != 0xe)
		cli_usage_error("--group: %s is not a multicast address", inet_ntoa(a.c.group));
	if (have_source && (!a.c.source.s_addr || (ntohl(a.c.source.s_addr) >> 28) == 0xe))
		cli_usage_error("--source: %s is not a unicast address", inet_ntoa(a.c.source));
	iface(a.ifname, &a.c);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (send) {
		if (a.file && a.size)
			cli_usage_error("give --file or --size, not both");
		if (!a.linger_set)
			a.linger_ms = 2000;
		return ltp_send(&a);
	}
	if (!have_source)
		cli_usage_error("recv needs --source S");
	if (a.c.replier_cost && !(a.c.flags & GC_LTP_REPLIER))
		cli_usage_error("--replier-cost needs --replier");
	return ltp_recv(&a);
}
