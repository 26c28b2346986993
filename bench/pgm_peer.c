// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pgm_peer.c - L2 (bench/ltp.py): one PGM source or receiver (Debian's
 * OpenPGM 5.3), moving the same bytes as `groupcast ltp` on the same tree.
 *
 *   pgm_peer send --group G --port P --addr IP --file F --rate BYTES_PER_S [--linger-ms MS]
 *   pgm_peer recv --group G --port P --addr IP --out F --bytes N [--timeout-ms MS]
 *                 [--nak-bo-ms MS] [--nak-rpt-ms MS] [--nak-rdata-ms MS]
 *
 * PGM over IP (protocol 113), one 1400 byte APDU per TPDU (LTP's payload).
 * --addr is the address of the interface to use: pgm_getaddrinfo wants
 * "IP;group", not an interface name.  The source paces ODATA itself (one
 * TSDU every 1400/rate s on an absolute schedule): PGM_TXW_MAX_RTE alone
 * does not pace, it only caps, so it is set to 4x the rate to leave room for
 * RDATA.  The source must read its socket to see NAKs and send RDATA, so it
 * polls OpenPGM's descriptors between sends and while it lingers.  The
 * transmit window holds the whole file, so every loss stays repairable.
 *
 * Statistics come from the receivers' links (bench/l2_rx.bpf.c), as for
 * NORM; the receiver prints {"ready":true} once joined and one JSON line at
 * the end, the source one JSON line.
 */

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <pgm/pgm.h>

#define TSDU 1400

struct args {
	const char *group, *addr, *file, *out;
	long port, linger_ms, timeout_ms, nak_bo_ms, nak_rpt_ms, nak_rdata_ms;
	double rate;
	long long bytes;
};

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("pgm_peer: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void fail_pgm(const char *what, pgm_error_t *err)
{
	fail("%s: %s", what, err && err->message ? err->message : "failed");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long num(const char *name, const char *s, long lo, long hi)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		fail("--%s %s: not a number in %ld..%ld", name, s, lo, hi);
	return v;
}

static void opt(pgm_sock_t *s, int name, const void *v, socklen_t len, const char *what)
{
	if (!pgm_setsockopt(s, IPPROTO_PGM, name, v, len))
		fail("PGM option %s refused", what);
}
#define OPT_INT(s, name, v)                           \
	do {                                          \
		const int v_ = (int)(v);              \
		opt(s, name, &v_, sizeof(v_), #name); \
	} while (0)

static pgm_sock_t *open_sock(const struct args *a, bool sender, long long window_sqns)
{
	pgm_error_t *err = NULL;
	struct pgm_addrinfo_t *res = NULL;
	char net[128];
	pgm_sock_t *s = NULL;

	if (snprintf(net, sizeof(net), "%s;%s", a->addr, a->group) >= (int)sizeof(net))
		fail("--addr %s --group %s: too long", a->addr, a->group);
	if (!pgm_getaddrinfo(net, NULL, &res, &err))
		fail_pgm("--addr/--group", err);
	if (!pgm_socket(&s, AF_INET, SOCK_SEQPACKET, IPPROTO_PGM, &err))
		fail_pgm("pgm_socket", err);
	OPT_INT(s, sender ? PGM_SEND_ONLY : PGM_RECV_ONLY, 1);
	OPT_INT(s, PGM_MTU, 1500);
	if (sender) {
		OPT_INT(s, PGM_TXW_SQNS, window_sqns);
		OPT_INT(s, PGM_TXW_MAX_RTE, a->rate * 4);
		OPT_INT(s, PGM_AMBIENT_SPM, pgm_secs(1));
		/* Heartbeat SPMs after data, so a receiver that lost the tail
		 * learns of it soon (the defaults start at 100 ms). */
		const int hb[] = { pgm_msecs(5),   pgm_msecs(10),  pgm_msecs(20),  pgm_msecs(50),
				   pgm_msecs(100), pgm_msecs(200), pgm_msecs(500), pgm_secs(1) };
		opt(s, PGM_HEARTBEAT_SPM, hb, sizeof(hb), "PGM_HEARTBEAT_SPM");
	} else {
		OPT_INT(s, PGM_RXW_SQNS, window_sqns);
		OPT_INT(s, PGM_PEER_EXPIRY, pgm_secs(300));
		OPT_INT(s, PGM_SPMR_EXPIRY, pgm_msecs(25));
		OPT_INT(s, PGM_NAK_BO_IVL, pgm_msecs(a->nak_bo_ms));
		OPT_INT(s, PGM_NAK_RPT_IVL, pgm_msecs(a->nak_rpt_ms));
		OPT_INT(s, PGM_NAK_RDATA_IVL, pgm_msecs(a->nak_rdata_ms));
		OPT_INT(s, PGM_NAK_DATA_RETRIES, 50);
		OPT_INT(s, PGM_NAK_NCF_RETRIES, 50);
	}
	/* Distinct GSIs: every namespace has the same host name, the default
	 * source of a GSI. */
	struct pgm_sockaddr_t sa = { .sa_port = (uint16_t)a->port, .sa_addr.sport = 0 };
	char who[64];
	int n = snprintf(who, sizeof(who), "%s/%d", a->addr, (int)getpid());
	if (!pgm_gsi_create_from_data(&sa.sa_addr.gsi, (const uint8_t *)who, (size_t)n))
		fail("cannot make a GSI");
	struct pgm_interface_req_t ifr = { .ir_interface = res->ai_recv_addrs[0].gsr_interface };
	if (!pgm_bind3(s, &sa, sizeof(sa), &ifr, sizeof(ifr), &ifr, sizeof(ifr), &err))
		fail_pgm("pgm_bind3", err);
	for (uint32_t i = 0; i < res->ai_recv_addrs_len; i++)
		opt(s, PGM_JOIN_GROUP, &res->ai_recv_addrs[i], sizeof(struct group_req), "PGM_JOIN_GROUP");
	opt(s, PGM_SEND_GROUP, &res->ai_send_addrs[0], sizeof(struct group_req), "PGM_SEND_GROUP");
	pgm_freeaddrinfo(res);
	OPT_INT(s, PGM_MULTICAST_LOOP, 0);
	OPT_INT(s, PGM_MULTICAST_HOPS, 16);
	OPT_INT(s, PGM_NOBLOCK, 1);
	if (!pgm_connect(s, &err))
		fail_pgm("pgm_connect", err);
	return s;
}

/* Waits for OpenPGM's descriptors (receive, repair, pending) or timeout_ns,
 * whichever is first, clipped to what OpenPGM's own timers ask for. */
static void wait_io(pgm_sock_t *s, uint64_t timeout_ns, int status)
{
	struct pollfd p[3];
	int names[3] = { PGM_RECV_SOCK, PGM_REPAIR_SOCK, PGM_PENDING_SOCK };
	for (int i = 0; i < 3; i++) {
		socklen_t len = sizeof(p[i].fd);
		if (!pgm_getsockopt(s, IPPROTO_PGM, names[i], &p[i].fd, &len))
			p[i].fd = -1;
		p[i].events = POLLIN;
	}
	if (status == PGM_IO_STATUS_TIMER_PENDING || status == PGM_IO_STATUS_RATE_LIMITED) {
		struct timeval tv;
		socklen_t len = sizeof(tv);
		if (pgm_getsockopt(s, IPPROTO_PGM,
				   status == PGM_IO_STATUS_TIMER_PENDING ? PGM_TIME_REMAIN : PGM_RATE_REMAIN,
				   &tv, &len)) {
			uint64_t t = (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
			if (t < timeout_ns)
				timeout_ns = t;
		}
	}
	/* At least 1 ms when a timer is pending with nothing left: poll()
	 * would spin otherwise, and OpenPGM's timers are in ms anyway. */
	int ms = (int)((timeout_ns + 999999) / 1000000);
	poll(p, 3, ms);
}

/* Lets OpenPGM handle what arrived (NAKs at the source, data at a receiver);
 * returns the last status and, for a receiver, appends data to out. */
static int pump(pgm_sock_t *s, char *out, long long *have, long long cap, uint64_t *first)
{
	_Alignas(64) char buf[65536];
	size_t n;
	pgm_error_t *err = NULL;
	int st;

	while ((st = pgm_recv(s, buf, sizeof(buf), 0, &n, &err)) == PGM_IO_STATUS_NORMAL) {
		if (!out)
			continue;
		if (!*first)
			*first = now_ns();
		size_t room = (size_t)(cap - *have);
		memcpy(out + *have, buf, n < room ? n : room);
		*have += (long long)n;
	}
	if (st == PGM_IO_STATUS_ERROR)
		fail_pgm("pgm_recv", err);
	if (err)
		pgm_error_free(err);
	return st;
}

static char *slurp(const char *path, long long *len)
{
	FILE *f = fopen(path, "rb");

	if (!f)
		fail("--file %s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (*len = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET))
		fail("--file %s: empty or unreadable", path);
	char *buf = malloc((size_t)*len); /* > 0, checked */
	if (!buf || fread(buf, 1, (size_t)*len, f) != (size_t)*len)
		fail("--file %s: cannot read", path);
	fclose(f);
	return buf;
}

static int do_send(const struct args *a)
{
	long long len;
	char *buf = slurp(a->file, &len);
	long long tsdus = (len + TSDU - 1) / TSDU;
	pgm_sock_t *s = open_sock(a, true, tsdus + 16);
	uint64_t gap = (uint64_t)(TSDU / a->rate * 1e9), t0 = now_ns(), next = t0;
	long long i = 0;
	int st = PGM_IO_STATUS_WOULD_BLOCK;
	static _Alignas(64) char bounce[TSDU];

	while (i < tsdus) {
		uint64_t now = now_ns();
		if (now >= next) {
			size_t n = (size_t)(i + 1 < tsdus ? TSDU : len - i * TSDU), sent = 0;
			/* Debian's libpgm copies with aligned SSE stores whose
			 * destination alignment follows the source's: a TSDU at
			 * an offset of 1400 (8 mod 16) faults.  Send from a
			 * 16-byte aligned copy. */
			memcpy(bounce, buf + i * TSDU, n);
			int r = pgm_send(s, bounce, n, &sent);
			if (r == PGM_IO_STATUS_NORMAL) {
				i++;
				next += gap;
			} else if (r != PGM_IO_STATUS_RATE_LIMITED && r != PGM_IO_STATUS_WOULD_BLOCK) {
				fail("pgm_send: status %d at TSDU %lld", r, i);
			}
		}
		st = pump(s, NULL, NULL, 0, NULL);
		now = now_ns();
		if (next > now)
			wait_io(s, next - now, st);
	}
	uint64_t sent = now_ns();
	/* Answer NAKs (and send heartbeat SPMs) for --linger-ms. */
	uint64_t until = sent + (uint64_t)a->linger_ms * 1000000u;
	for (uint64_t now = now_ns(); now < until; now = now_ns()) {
		st = pump(s, NULL, NULL, 0, NULL);
		uint64_t t = now_ns();
		wait_io(s, t < until ? until - t : 0, st);
	}
	printf("{\"ok\":true,\"bytes\":%lld,\"seconds\":%.6f}\n", len, (double)(sent - t0) / 1e9);
	fflush(stdout);
	pgm_close(s, true);
	free(buf);
	return 0;
}

static int do_recv(const struct args *a)
{
	long long cap = a->bytes, have = 0;
	char *out = malloc((size_t)cap);
	if (!out)
		fail("--bytes %lld: out of memory", cap);
	pgm_sock_t *s = open_sock(a, false, (cap + TSDU - 1) / TSDU + 16);
	printf("{\"ready\":true}\n");
	fflush(stdout);
	uint64_t t0 = now_ns(), until = t0 + (uint64_t)a->timeout_ms * 1000000u, first = 0, done = 0;
	bool reset = false;
	while (have < cap && now_ns() < until) {
		int st = pump(s, out, &have, cap, &first);
		if (st == PGM_IO_STATUS_RESET) {
			reset = true; /* unrecoverable loss: OpenPGM gave a sequence up */
			break;
		}
		if (have < cap)
			wait_io(s, 50000000u, st);
	}
	done = now_ns();
	bool ok = have == cap && !reset;
	if (have > 0) {
		FILE *f = fopen(a->out, "wb");
		if (!f ||
		    fwrite(out, 1, (size_t)(have < cap ? have : cap), f) !=
			    (size_t)(have < cap ? have : cap) ||
		    fclose(f))
			fail("--out %s: %s", a->out, strerror(errno));
	}
	printf("{\"ok\":%s,\"bytes\":%lld,\"reset\":%s,\"seconds\":%.6f}\n", ok ? "true" : "false",
	       have, reset ? "true" : "false", first ? (double)(done - first) / 1e9 : 0.0);
	fflush(stdout);
	pgm_close(s, false);
	free(out);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct args a = { .port = -1,
			  .linger_ms = 3000,
			  .timeout_ms = 120000,
			  .nak_bo_ms = 2,
			  .nak_rpt_ms = 20,
			  .nak_rdata_ms = 20,
			  .rate = 1e6,
			  .bytes = -1 };
	static const struct option opts[] = { { "group", required_argument, 0, 'g' },
					      { "port", required_argument, 0, 'p' },
					      { "addr", required_argument, 0, 'a' },
					      { "file", required_argument, 0, 'f' },
					      { "out", required_argument, 0, 'o' },
					      { "bytes", required_argument, 0, 'n' },
					      { "rate", required_argument, 0, 'r' },
					      { "linger-ms", required_argument, 0, 'l' },
					      { "timeout-ms", required_argument, 0, 't' },
					      { "nak-bo-ms", required_argument, 0, 'B' },
					      { "nak-rpt-ms", required_argument, 0, 'R' },
					      { "nak-rdata-ms", required_argument, 0, 'D' },
					      { 0, 0, 0, 0 } };
	const char *usage = "usage: pgm_peer send|recv --group G --port P --addr IP "
			    "(send: --file F [--rate B/s] | recv: --out F --bytes N) (see the source)";

	if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv")))
		fail("%s", usage);
	bool send = !strcmp(argv[1], "send");
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'g': a.group = optarg; break;
		case 'p': a.port = num("port", optarg, 1, 65535); break;
		case 'a': a.addr = optarg; break;
		case 'f': a.file = optarg; break;
		case 'o': a.out = optarg; break;
		case 'n': a.bytes = num("bytes", optarg, 1, 1L << 31); break;
		case 'r': a.rate = (double)num("rate", optarg, 1000, 1000000000); break;
		case 'l': a.linger_ms = num("linger-ms", optarg, 0, 600000); break;
		case 't': a.timeout_ms = num("timeout-ms", optarg, 1, 3600000); break;
		case 'B': a.nak_bo_ms = num("nak-bo-ms", optarg, 1, 60000); break;
		case 'R': a.nak_rpt_ms = num("nak-rpt-ms", optarg, 1, 60000); break;
		case 'D': a.nak_rdata_ms = num("nak-rdata-ms", optarg, 1, 60000); break;
		default: fail("%s", usage);
		}
	}
	if (optind != argc)
		fail("%s: unexpected argument", argv[optind]);
	if (!a.group || a.port < 0 || !a.addr)
		fail("--group, --port and --addr are required");
	if (send && !a.file)
		fail("send: --file is required");
	if (!send && (!a.out || a.bytes < 0))
		fail("recv: --out and --bytes are required");
	pgm_error_t *err = NULL;
	if (!pgm_init(&err))
		fail_pgm("pgm_init", err);
	int rc = send ? do_send(&a) : do_recv(&a);
	pgm_shutdown();
	return rc;
}
