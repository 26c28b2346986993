/* SPDX-License-Identifier: MIT */
/*
 * groupcast sink: bind K UDP sockets on consecutive ports, drain them with
 * epoll + recvmmsg, count per port, optionally dump and verify the datagrams
 * of `groupcast blast` (or, for any payload, check every port's datagrams
 * against a digest of what was sent), and print one JSON summary line.
 */
#include "cli.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define SINK_BATCH 32
#define SINK_BUF 65536
#define SINK_SIG_TAG UINT32_MAX

struct port_state {
	uint64_t count;
	uint64_t last_seq;
	uint64_t digest; /* --digest: sum of the datagrams' hashes */
	bool seen;
};

struct sink {
	/* options */
	const char *addr;
	uint16_t port_base;
	uint32_t count;
	uint64_t expect;
	uint64_t idle_ms;
	uint64_t timeout_ms;
	const char *dump_path;
	const char *ready_path;
	bool verify;
	bool digest_set;
	uint64_t digest;
	bool size_set;
	size_t size, pre, app;
	int rcvbuf;
	int cpu;
	/* state */
	int *fds;
	struct port_state *ps;
	FILE *dump;
	uint8_t *pattern; /* cli_pattern(0..SINK_BUF) */
	uint64_t received, bytes, bad, dups, gaps, truncated;
};

static void sink_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast sink --addr A --port-base P --count K [options]\n"
		"Bind K UDP sockets on address A, ports P..P+K-1, receive until a stop\n"
		"condition, then print one JSON line:\n"
		"  {\"received\":N,\"bytes\":B,\"ports\":K,\"ports_min\":..,\"ports_max\":..,\n"
		"   \"bad\":..,\"dups\":..,\"gaps\":..,\"truncated\":..,\"stopped\":..,\"elapsed_ms\":..}\n"
		"Options:\n"
		"  --addr A          IPv4 or IPv6 literal to bind (required)\n"
		"  --port-base P     first port (required)\n"
		"  --count K         number of ports (required)\n"
		"  --expect N        stop once N datagrams arrived (0: no limit, default)\n"
		"  --idle-ms MS      stop after MS without a datagram, counted from ready\n"
		"                    (default 2000; 0 disables)\n"
		"  --timeout-ms MS   stop after MS in total (default 0: none)\n"
		"  --dump FILE       write [u16 port BE][u16 len BE][bytes] per datagram\n"
		"  --ready-file F    create empty file F once all sockets are bound\n"
		"  --verify          check the blast payload format and per-port sequence\n"
		"  --size S          with --verify: each datagram's shared payload is S bytes\n"
		"  --prepend B       with --verify: each datagram starts with B private bytes\n"
		"  --append B        with --verify: each datagram ends with B private bytes\n"
		"  --digest HEX      any payload: each port must receive datagrams whose\n"
		"                    hashes add up to HEX (mod 2^64); a datagram's hash is\n"
		"                    sum(w[j] * K[j]) + len * K[8192], w its little-endian\n"
		"                    64-bit words (the last one padded with zeros),\n"
		"                    K[j] = splitmix64(j) | 1; the summary gains\n"
		"                    \"digest_ok\": the ports whose sum matched\n"
		"  --rcvbuf BYTES    receive buffer per socket (default 4194304; forced as root)\n"
		"  --cpu CPU         pin the sink to CPU (default: not pinned)\n"
		"SIGINT/SIGTERM stop the sink; the summary is still printed.\n");
}

static void sink_parse(struct sink *s, int argc, char **argv)
{
	enum {
		O_ADDR = 256,
		O_PORT,
		O_COUNT,
		O_EXPECT,
		O_IDLE,
		O_TIMEOUT,
		O_DUMP,
		O_READY,
		O_VERIFY,
		O_SIZE,
		O_PRE,
		O_APP,
		O_DIGEST,
		O_RCVBUF,
		O_CPU
	};
	static const struct option lo[] = {
		{ "addr", required_argument, NULL, O_ADDR },
		{ "port-base", required_argument, NULL, O_PORT },
		{ "count", required_argument, NULL, O_COUNT },
		{ "expect", required_argument, NULL, O_EXPECT },
		{ "idle-ms", required_argument, NULL, O_IDLE },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT },
		{ "dump", required_argument, NULL, O_DUMP },
		{ "ready-file", required_argument, NULL, O_READY },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "size", required_argument, NULL, O_SIZE },
		{ "prepend", required_argument, NULL, O_PRE },
		{ "append", required_argument, NULL, O_APP },
		{ "digest", required_argument, NULL, O_DIGEST },
		{ "rcvbuf", required_argument, NULL, O_RCVBUF },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t port = 0, count = 0;
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (ch) {
		case O_ADDR: s->addr = optarg; break;
		case O_PORT: port = cli_u64("--port-base", optarg, 1, 65535); break;
		case O_COUNT: count = cli_u64("--count", optarg, 1, 65535); break;
		case O_EXPECT: s->expect = cli_u64("--expect", optarg, 0, UINT64_MAX); break;
		case O_IDLE: s->idle_ms = cli_u64("--idle-ms", optarg, 0, UINT32_MAX); break;
		case O_TIMEOUT:
			s->timeout_ms = cli_u64("--timeout-ms", optarg, 0, UINT32_MAX);
			break;
		case O_DUMP: s->dump_path = optarg; break;
		case O_READY: s->ready_path = optarg; break;
		case O_VERIFY: s->verify = true; break;
		case O_SIZE:
			s->size = cli_u64("--size", optarg, 0, GC_UDP6_MAX);
			s->size_set = true;
			break;
		case O_PRE: s->pre = cli_u64("--prepend", optarg, 0, GC_UDP6_MAX); break;
		case O_APP: s->app = cli_u64("--append", optarg, 0, GC_UDP6_MAX); break;
		case O_DIGEST: {
			char *end = NULL;
			errno = 0;
			s->digest = strtoull(optarg, &end, 16);
			if (errno || end == optarg || *end || optarg[0] == '-' || strlen(optarg) > 16)
				cli_usage_error("--digest: '%s' is not a 64-bit hex number", optarg);
			s->digest_set = true;
			break;
		}
		case O_RCVBUF:
			s->rcvbuf = (int)cli_u64("--rcvbuf", optarg, 0, INT32_MAX / 2);
			break;
		case O_CPU: s->cpu = cli_cpu("--cpu", optarg); break;
		case 'h': sink_usage(stdout); exit(0);
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (!s->addr)
		cli_usage_error("--addr is required");
	if (!port)
		cli_usage_error("--port-base is required");
	if (!count)
		cli_usage_error("--count is required");
	if (port + count - 1 > 65535)
		cli_usage_error("--count: ports %llu..%llu go beyond 65535",
				(unsigned long long)port, (unsigned long long)(port + count - 1));
	if (s->pre + s->app + (s->size_set ? s->size : 0) > GC_UDP6_MAX)
		cli_usage_error("--size/--prepend/--append: %zu bytes in all is more than a UDP datagram",
				s->pre + s->app + s->size);
	if (!s->verify && (s->size_set || s->pre || s->app))
		cli_usage_error("--size, --prepend and --append only apply with --verify");
	s->port_base = (uint16_t)port;
	s->count = (uint32_t)count;
}

static void sink_verify(struct sink *s, struct port_state *ps, uint16_t port, const uint8_t *d, size_t len)
{
	bool bad = false;
	if (s->size_set && len != s->size + s->pre + s->app)
		bad = true;
	if (len < s->pre + s->app) {
		s->bad++;
		return;
	}
	for (size_t j = 0; j < s->pre && !bad; j++)
		bad = d[j] != cli_member_byte(port, j, CLI_SALT_PRE);
	const uint8_t *a = d + len - s->app;
	for (size_t j = 0; j < s->app && !bad; j++)
		bad = a[j] != cli_member_byte(port, j, CLI_SALT_APP);

	const uint8_t *p = d + s->pre;
	size_t plen = len - s->pre - s->app;
	if (plen < CLI_HDR_LEN) {
		if (memcmp(p, s->pattern, plen) != 0)
			bad = true;
		if (bad)
			s->bad++;
		return;
	}
	if (memcmp(p, CLI_MAGIC, 4) != 0 ||
	    memcmp(p + CLI_HDR_LEN, s->pattern + CLI_HDR_LEN, plen - CLI_HDR_LEN) != 0) {
		s->bad++;
		return;
	}
	uint64_t seq = cli_get_le64(p + 8);
	if (ps->seen && seq == ps->last_seq) {
		s->dups++;
		if (bad)
			s->bad++;
		return;
	}
	if (ps->seen && seq < ps->last_seq) {
		s->bad++; /* going backwards: reordered or an old duplicate */
		return;
	}
	if (ps->seen)
		s->gaps += seq - ps->last_seq - 1;
	ps->seen = true;
	ps->last_seq = seq;
	if (bad)
		s->bad++;
}

/* --digest: a keyed linear hash, cheap enough for a sink that takes a
 * million datagrams a second, and one a producer can sum up without sending
 * (tests/e2e/relaytool.py: nf5_digest).  K[j] = splitmix64(j) | 1. */
#define SINK_KEYS (SINK_BUF / 8 + 1)
static uint64_t sink_keys[SINK_KEYS];

static void sink_keys_init(void)
{
	for (uint64_t j = 0; j < SINK_KEYS; j++) {
		uint64_t z = j + 0x9E3779B97F4A7C15ull;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		sink_keys[j] = (z ^ (z >> 31)) | 1;
	}
}

static uint64_t sink_hash(const uint8_t *d, size_t len)
{
	uint64_t h = (uint64_t)len * sink_keys[SINK_KEYS - 1];
	size_t j = 0;
	for (; (j + 1) * 8 <= len; j++) {
		uint64_t w;
		memcpy(&w, d + j * 8, 8);
		h += le64toh(w) * sink_keys[j];
	}
	if (j * 8 < len) {
		uint8_t tail[8] = { 0 };
		memcpy(tail, d + j * 8, len - j * 8);
		uint64_t w;
		memcpy(&w, tail, 8);
		h += le64toh(w) * sink_keys[j];
	}
	return h;
}

/* Drain socket i; returns the number of datagrams read. */
static uint64_t sink_drain(struct sink *s, uint32_t i, struct mmsghdr *mv, struct iovec *iov)
{
	uint64_t got = 0;
	uint16_t port = (uint16_t)(s->port_base + i);
	for (;;) {
		for (int m = 0; m < SINK_BATCH; m++) {
			mv[m].msg_hdr.msg_flags = 0;
			mv[m].msg_len = 0;
			mv[m].msg_hdr.msg_iov = &iov[m];
			mv[m].msg_hdr.msg_iovlen = 1;
		}
		int r = recvmmsg(s->fds[i], mv, SINK_BATCH, MSG_DONTWAIT, NULL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				cli_warn("recvmmsg on port %u: %s", port, strerror(errno));
			return got;
		}
		for (int m = 0; m < r; m++) {
			const uint8_t *d = iov[m].iov_base;
			size_t len = mv[m].msg_len;
			if (mv[m].msg_hdr.msg_flags & MSG_TRUNC)
				s->truncated++;
			s->received++;
			s->bytes += len;
			s->ps[i].count++;
			if (s->dump) {
				uint8_t h[4] = { (uint8_t)(port >> 8), (uint8_t)port,
						 (uint8_t)(len >> 8), (uint8_t)len };
				fwrite(h, 1, 4, s->dump);
				fwrite(d, 1, len, s->dump);
			}
			if (s->verify)
				sink_verify(s, &s->ps[i], port, d, len);
			if (s->digest_set)
				s->ps[i].digest += sink_hash(d, len);
		}
		got += (uint64_t)r;
		if (r < SINK_BATCH)
			return got;
	}
}

int cmd_sink(int argc, char **argv)
{
	struct sink s = { .idle_ms = 2000, .rcvbuf = 4 << 20, .cpu = -1 };
	sink_parse(&s, argc, argv);

	struct sockaddr_storage ss;
	int fam = cli_ip("--addr", s.addr, s.port_base, &ss);
	socklen_t slen = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	cli_pin("--cpu", s.cpu);
	if (s.digest_set)
		sink_keys_init();
	cli_raise_nofile((size_t)s.count + 64);

	s.fds = calloc(s.count, sizeof(*s.fds));
	s.ps = calloc(s.count, sizeof(*s.ps));
	s.pattern = malloc(SINK_BUF);
	uint8_t *bufs = malloc((size_t)SINK_BATCH * SINK_BUF);
	struct mmsghdr *mv = calloc(SINK_BATCH, sizeof(*mv));
	struct iovec *iov = calloc(SINK_BATCH, sizeof(*iov));
	if (!s.fds || !s.ps || !s.pattern || !bufs || !mv || !iov)
		cli_fail("out of memory");
	for (size_t i = 0; i < SINK_BUF; i++)
		s.pattern[i] = cli_pattern(i);
	for (int m = 0; m < SINK_BATCH; m++) {
		iov[m].iov_base = bufs + (size_t)m * SINK_BUF;
		iov[m].iov_len = SINK_BUF;
	}

	if (s.dump_path) {
		s.dump = fopen(s.dump_path, "we");
		if (!s.dump)
			cli_fail("--dump: cannot open '%s': %s", s.dump_path, strerror(errno));
		setvbuf(s.dump, NULL, _IOFBF, 1 << 20);
	}

	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
		cli_fail("sigprocmask: %s", strerror(errno));
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || ep < 0)
		cli_fail("signalfd/epoll: %s", strerror(errno));
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = SINK_SIG_TAG };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) != 0)
		cli_fail("epoll_ctl: %s", strerror(errno));

	int rcvgot = 0;
	for (uint32_t i = 0; i < s.count; i++) {
		uint16_t port = (uint16_t)(s.port_base + i);
		int fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			cli_fail("socket for port %u: %s", port, strerror(errno));
		rcvgot = cli_sockbuf(fd, true, s.rcvbuf);
		addr_set_port(&ss, port);
		if (bind(fd, (struct sockaddr *)&ss, slen) != 0)
			cli_fail("bind %s port %u: %s", s.addr, port, strerror(errno));
		s.fds[i] = fd;
		ev.data.u32 = i;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
			cli_fail("epoll_ctl: %s", strerror(errno));
	}
	if (s.rcvbuf > 0 && rcvgot < s.rcvbuf)
		cli_warn("--rcvbuf: asked for %d bytes, the kernel gives %d (not root? see net.core.rmem_max)",
			 s.rcvbuf, rcvgot);

	if (s.ready_path) {
		int fd = open(s.ready_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			cli_fail("--ready-file: cannot create '%s': %s", s.ready_path, strerror(errno));
		close(fd);
	}

	const char *stopped = NULL;
	uint64_t t0 = cli_now(CLOCK_MONOTONIC), last = t0;
	struct epoll_event evs[64];
	while (!stopped) {
		uint64_t now = cli_now(CLOCK_MONOTONIC);
		int64_t wait_ns = -1;
		if (s.timeout_ms) {
			int64_t left = (int64_t)(t0 + s.timeout_ms * 1000000u) - (int64_t)now;
			if (left <= 0) {
				stopped = "timeout";
				break;
			}
			wait_ns = left;
		}
		if (s.idle_ms) {
			int64_t left = (int64_t)(last + s.idle_ms * 1000000u) - (int64_t)now;
			if (left <= 0) {
				stopped = "idle";
				break;
			}
			if (wait_ns < 0 || left < wait_ns)
				wait_ns = left;
		}
		int tmo = wait_ns < 0 ? -1 : (int)((wait_ns + 999999) / 1000000);
		int n = epoll_wait(ep, evs, 64, tmo);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			cli_fail("epoll_wait: %s", strerror(errno));
		}
		for (int k = 0; k < n; k++) {
			if (evs[k].data.u32 == SINK_SIG_TAG) {
				struct signalfd_siginfo si;
				while (read(sfd, &si, sizeof(si)) == sizeof(si))
					;
				stopped = "signal";
				continue;
			}
			if (sink_drain(&s, evs[k].data.u32, mv, iov))
				last = cli_now(CLOCK_MONOTONIC);
		}
		if (!stopped && s.expect && s.received >= s.expect)
			stopped = "expect";
	}
	/* Last sweep: count what is already queued (extras and duplicates too). */
	for (uint32_t i = 0; i < s.count; i++)
		sink_drain(&s, i, mv, iov);
	uint64_t elapsed = cli_now(CLOCK_MONOTONIC) - t0;

	int rc = 0;
	if (s.dump && (fflush(s.dump) != 0 || ferror(s.dump) || fclose(s.dump) != 0)) {
		cli_warn("--dump: writing '%s' failed: %s", s.dump_path, strerror(errno));
		rc = CLI_EXIT_FAIL;
	}
	uint64_t pmin = UINT64_MAX, pmax = 0, digest_ok = 0;
	for (uint32_t i = 0; i < s.count; i++) {
		digest_ok += s.ps[i].digest == s.digest;
		if (s.ps[i].count < pmin)
			pmin = s.ps[i].count;
		if (s.ps[i].count > pmax)
			pmax = s.ps[i].count;
		close(s.fds[i]);
	}
	printf("{\"received\":%llu,\"bytes\":%llu,\"ports\":%u,\"ports_min\":%llu,"
	       "\"ports_max\":%llu,\"bad\":%llu,\"dups\":%llu,\"gaps\":%llu,"
	       "\"truncated\":%llu,\"verified\":%s,\"stopped\":\"%s\",\"elapsed_ms\":%.1f",
	       (unsigned long long)s.received, (unsigned long long)s.bytes, s.count,
	       (unsigned long long)pmin, (unsigned long long)pmax, (unsigned long long)s.bad,
	       (unsigned long long)s.dups, (unsigned long long)s.gaps, (unsigned long long)s.truncated,
	       s.verify ? "true" : "false", stopped, (double)elapsed / 1e6);
	if (s.digest_set)
		printf(",\"digest_ok\":%llu", (unsigned long long)digest_ok);
	printf("}\n");
	if (fflush(stdout) != 0)
		rc = CLI_EXIT_FAIL;
	free(s.fds);
	free(s.ps);
	free(s.pattern);
	free(bufs);
	free(mv);
	free(iov);
	close(ep);
	close(sfd);
	return rc;
}
