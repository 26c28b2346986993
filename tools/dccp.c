/* SPDX-License-Identifier: MIT */
/*
 * groupcast dccp: one DCCP connection (groupcast/dccp.h, gc_dccp(3)) for
 * tests and benchmarks.
 *
 *   groupcast dccp listen  accept one connection, count what arrives
 *   groupcast dccp send    send numbered packets through the connection's ring
 *
 * Both print one JSON line on exit.  Payload: u64 packet number (LE), then
 * the blast pattern (cli_pattern), so the listener can check every byte.
 * See groupcast(1).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <groupcast/dccp.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void dccp_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast dccp listen|send [options]\n"
		"  listen [ADDR:]PORT [--ccid 2|3] [--udp] [--count N] [--timeout S] [--service N]\n"
		"      [--seq-window W] [--ack-ratio R]\n"
		"      print \"listening\" when ready, accept one connection, receive until N\n"
		"      packets arrived or the peer closed (or --timeout S, default 30), then\n"
		"      print {\"received\",\"lost\",\"bytes\",\"first_seq\",\"corrupt\",\"state\"}.\n"
		"  send ADDR:PORT [--ccid 2|3] [--udp] [--count N] [--size B] [--rate PPS]\n"
		"      [--dead-after-ms MS] [--timeout S] [--service N] [--seq-window W]\n"
		"      [--ack-ratio R]\n"
		"      send N packets (default 1000) of B bytes (default 1000, >= 8) at PPS\n"
		"      (default: as fast as the CCID allows); a packet still unsent MS after\n"
		"      it was queued is marked dead; close, then print {\"sent\",\"acked\",\n"
		"      \"dead\",\"cwnd\",\"x_bps\",\"rtt_us\",\"p\",\"syncs\",\"lost\",\"state\"}.\n"
		"--udp: DCCP-UDP (RFC 6773), port 6511 if PORT is 0; else native DCCP, which\n"
		"needs CAP_NET_RAW.  --seq-window W: our initial Sequence Window (>= 32;\n"
		"default 5120; with CCID 2 it grows to 100 and to 5 x cwnd).  --ack-ratio R\n"
		"(CCID 2): the Ack Ratio our sender asks for, 1..65535 (default: about 32\n"
		"Acks a window, at least four; 2 is an Ack per two packets).\n");
}

struct dccp_args {
	bool listen;
	const char *where;
	struct gc_dccp_opts o;
	uint64_t count, size, rate, dead_ms, timeout_s;
};

/* "[ADDR:]PORT" (listen: ADDR defaults to ::) or "ADDR:PORT" (send). */
static socklen_t parse_where(const struct dccp_args *a, struct sockaddr_storage *ss)
{
	char buf[256];
	if (strlen(a->where) >= sizeof(buf))
		cli_usage_error("'%s': address too long", a->where);
	strcpy(buf, a->where);
	char *host = NULL, *port = buf;
	if (!a->listen || strchr(buf, ':'))
		cli_split_addr("ADDR:PORT", a->where, buf, "ADDR:PORT", &host, &port);
	uint16_t p = (uint16_t)cli_u64("PORT", port, a->listen ? 0 : 1, 65535);
	int fam = cli_ip("ADDR", host ? host : "::", p, ss);
	return fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static void print_stats_send(struct gc_dccp *c, uint64_t queued, uint64_t ring_acks)
{
	struct gc_dccp_stats st = GC_DCCP_STATS_INIT();
	if (gc_dccp_stats(c, &st) != 0)
		cli_fail("stats: %s", gc_errmsg());
	printf("{\"queued\":%llu,\"sent\":%llu,\"acked\":%llu,\"dead\":%llu,\"lost\":%llu,"
	       "\"cwnd\":%u,\"x_bps\":%llu,\"rtt_us\":%llu,\"p\":%.6f,\"syncs\":%llu,"
	       "\"invalid\":%llu,\"ring_acks\":%llu,\"state\":",
	       (unsigned long long)queued, (unsigned long long)st.sent,
	       (unsigned long long)st.acked, (unsigned long long)st.dead,
	       (unsigned long long)st.lost, st.cwnd, (unsigned long long)st.x_bps,
	       (unsigned long long)st.rtt_us, st.p, (unsigned long long)st.syncs,
	       (unsigned long long)st.invalid, (unsigned long long)ring_acks);
	cli_json_str(stdout, gc_dccp_state_name(st.state));
	printf("}\n");
}

static int do_send(const struct dccp_args *a)
{
	struct sockaddr_storage ss;
	socklen_t sl = parse_where(a, &ss);
	struct gc_dccp *c = gc_dccp_connect((struct sockaddr *)&ss, sl, &a->o);
	if (!c)
		cli_fail("connect %s: %s", a->where, gc_errmsg());
	struct gc_ring *r = gc_dccp_ring(c);
	struct gc_zone *z = gc_dccp_zone(c);
	if (!r || !z)
		cli_fail("ring: %s", gc_errmsg());
	unsigned n = gc_ring_entries(r);
	/* When each ring position was queued, for --dead-after-ms. */
	uint64_t *queued_at = calloc(n, sizeof(*queued_at));
	if (!queued_at)
		cli_fail("out of memory");
	uint64_t t0 = cli_now(CLOCK_MONOTONIC), deadline = t0 + a->timeout_s * 1000000000ull;
	uint64_t i = 0;
	unsigned oldest = 0; /* oldest position that may still be unsent */
	while (i < a->count && !stop) {
		uint64_t now = cli_now(CLOCK_MONOTONIC);
		if (now >= deadline)
			break;
		if (a->dead_ms) {
			/* Walk the queued positions the engine may not have taken: a
			 * mark on a taken packet is a no-op (returns 0). */
			unsigned first;
			int m = gc_ring_rewind(r, GC_RING_OLDEST, &first);
			if (m > 0) {
				for (int k = 0; k < m; k++) {
					unsigned pos = (first + (unsigned)k) % n;
					if (queued_at[pos] &&
					    now - queued_at[pos] > a->dead_ms * 1000000ull) {
						gc_ring_mark_dead(r, pos);
						queued_at[pos] = 0;
					}
				}
			}
			if (m >= 0)
				gc_ring_submit(r);
		}
		(void)oldest;
		if (a->rate && i * 1000000000ull / a->rate > now - t0) {
			usleep(200);
			continue;
		}
		struct gc_pkt *p = gc_ring_get_pkt(r);
		if (!p) {
			if (errno != EAGAIN)
				cli_fail("ring: %s", gc_errmsg());
			gc_ring_submit(r);
			if (gc_ring_wait(r, 1, 50) != 0 && errno != ETIMEDOUT)
				cli_fail("ring wait: %s", gc_errmsg());
			continue;
		}
		unsigned pos = gc_ring_pos(r, p);
		uint8_t *b = gc_zone_buf(z, pos);
		cli_put_le64(b, i);
		for (size_t k = 8; k < a->size; k++)
			b[k] = cli_pattern(k);
		p->off = gc_zone_offset(z, b);
		p->len = (uint32_t)a->size;
		p->user_seq = i;
		queued_at[pos] = now;
		i++;
		if (gc_ring_submit(r) < 0)
			cli_fail("submit: %s", gc_errmsg());
	}
	uint64_t left = deadline > cli_now(CLOCK_MONOTONIC)
		? (deadline - cli_now(CLOCK_MONOTONIC)) / 1000000ull
		: 0;
	/* Stats before close: close frees the connection. */
	if (gc_ring_wait(r, n - 1, (int)(left > 5000 ? 5000 : left)) != 0 && errno != ETIMEDOUT)
		cli_warn("ring wait: %s", gc_errmsg());
	/* the acknowledgements as the application sees them: gc_ring_acks() */
	uint64_t ring_acks = 0, seqs[256];
	ssize_t got;
	while ((got = gc_ring_acks(r, seqs, 256)) > 0) {
		for (ssize_t k = 0; k < got; k++)
			if (seqs[k] >= i)
				cli_fail("gc_ring_acks: user_seq %llu was never queued",
					 (unsigned long long)seqs[k]);
		ring_acks += (uint64_t)got;
	}
	print_stats_send(c, i, ring_acks);
	free(queued_at);
	/* An unanswered Close is no failure: the peer may have gone with our
	 * data (its Reset lost); the JSON line says what was delivered. */
	if (gc_dccp_close(c, 3000) != 0)
		cli_warn("close: %s", gc_errmsg());
	return fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
}

static int do_listen(const struct dccp_args *a)
{
	struct sockaddr_storage ss;
	socklen_t sl = parse_where(a, &ss);
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&ss, sl, &a->o);
	if (!l)
		cli_fail("listen %s: %s", a->where, gc_errmsg());
	printf("listening\n");
	fflush(stdout);
	uint64_t deadline = cli_now(CLOCK_MONOTONIC) + a->timeout_s * 1000000000ull;
	struct gc_dccp *c = NULL;
	while (!c && !stop) {
		uint64_t now = cli_now(CLOCK_MONOTONIC);
		if (now >= deadline)
			break;
		c = gc_dccp_accept(l, 200);
		if (!c && errno != ETIMEDOUT && errno != EINTR)
			cli_fail("accept: %s", gc_errmsg());
	}
	gc_dccp_listener_destroy(l);
	uint64_t received = 0, lost = 0, bytes = 0, corrupt = 0;
	long long first_seq = -1;
	const char *state = "CLOSED";
	uint64_t invalid = 0;
	if (c) {
		static uint8_t buf[65536];
		while (!stop && (!a->count || received < a->count)) {
			if (cli_now(CLOCK_MONOTONIC) >= deadline)
				break;
			struct gc_dccp_rxinfo ri;
			ssize_t len = gc_dccp_recv(c, buf, sizeof(buf), &ri, 200);
			if (len < 0) {
				if (errno == EAGAIN || errno == EINTR)
					continue;
				if (errno != ECONNRESET)
					cli_warn("recv: %s", gc_errmsg());
				break;
			}
			if (ri.eof) {
				lost += ri.lost; /* data lost after the last packet */
				break;
			}
			if (first_seq < 0)
				first_seq = (long long)ri.seq;
			received++;
			lost += ri.lost;
			bytes += (uint64_t)len;
			size_t got = (size_t)len < sizeof(buf) ? (size_t)len : sizeof(buf);
			for (size_t k = 8; k < got; k++)
				if (buf[k] != cli_pattern(k)) {
					corrupt++;
					break;
				}
		}
		struct gc_dccp_stats st = GC_DCCP_STATS_INIT();
		if (gc_dccp_stats(c, &st) == 0) {
			state = gc_dccp_state_name(st.state);
			invalid = st.invalid;
		}
	}
	printf("{\"received\":%llu,\"lost\":%llu,\"bytes\":%llu,\"first_seq\":%lld,"
	       "\"corrupt\":%llu,\"invalid\":%llu,\"accepted\":%s,\"state\":",
	       (unsigned long long)received, (unsigned long long)lost, (unsigned long long)bytes,
	       first_seq, (unsigned long long)corrupt, (unsigned long long)invalid,
	       c ? "true" : "false");
	cli_json_str(stdout, state);
	printf("}\n");
	if (c)
		gc_dccp_close(c, 2000);
	if (fflush(stdout) != 0)
		return CLI_EXIT_FAIL;
	return c ? 0 : CLI_EXIT_FAIL;
}

int cmd_dccp(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ccid", required_argument, NULL, 'c' },
		{ "udp", no_argument, NULL, 'u' },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ "rate", required_argument, NULL, 'r' },
		{ "dead-after-ms", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 't' },
		{ "service", required_argument, NULL, 'S' },
		{ "seq-window", required_argument, NULL, 'W' },
		{ "ack-ratio", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		dccp_usage(stdout);
		return 0;
	}
	if (argc < 2)
		cli_usage_error("expected 'listen' or 'send'");
	struct dccp_args a = {
		.o = GC_DCCP_OPTS_INIT(.ccid = 2), .count = 1000, .size = 1000, .timeout_s = 30
	};
	if (!strcmp(argv[1], "listen"))
		a.listen = true, a.count = 0;
	else if (strcmp(argv[1], "send"))
		cli_usage_error("unknown subcommand '%s' (expected listen or send)", argv[1]);
	argc--, argv++;
	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'c': a.o.ccid = (int)cli_u64("--ccid", optarg, 2, 3); break;
		case 'u': a.o.encap = GC_DCCP_UDP; break;
		case 'n': a.count = cli_u64("--count", optarg, 0, UINT64_MAX / 2); break;
		case 's': a.size = cli_u64("--size", optarg, 8, 65000); break;
		case 'r': a.rate = cli_u64("--rate", optarg, 1, 100000000); break;
		case 'd': a.dead_ms = cli_u64("--dead-after-ms", optarg, 1, 3600000); break;
		case 't': a.timeout_s = cli_u64("--timeout", optarg, 1, 86400); break;
		case 'S':
			a.o.service = (uint32_t)cli_u64("--service", optarg, 0, UINT32_MAX);
			break;
		case 'W':
			a.o.seq_window = (uint32_t)cli_u64("--seq-window", optarg, 32, UINT32_MAX);
			break;
		case 'A': a.o.ack_ratio = (uint32_t)cli_u64("--ack-ratio", optarg, 1, 65535); break;
		case 'h': dccp_usage(stdout); return 0;
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind != argc - 1)
		cli_usage_error("expected one %s", a.listen ? "[ADDR:]PORT" : "ADDR:PORT");
	a.where = argv[optind];
	if (!a.listen && a.count == 0)
		cli_usage_error("--count: expected at least 1");
	a.o.mps = (uint32_t)(a.size > 1400 ? a.size : 1400);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	return a.listen ? do_listen(&a) : do_send(&a);
}
