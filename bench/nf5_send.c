/* SPDX-License-Identifier: MIT */
/* nf5_send: the NetFlow v5 stream of `tests/e2e/relaytool.py nf5`, from C.
 *
 *   nf5_send --blocks FILE --to A:P --src A[,B...] --count N --rate R
 *
 * Sends exactly the datagrams relaytool.py's nf5_datagram(i, K, blocks) gives
 * (K = the number of --src addresses): datagram i from exporter e = i % K
 * (one socket bound to each --src address), its k-th export (k = i / K), the
 * 24-byte header nf5_header(i, K) builds (version 5, 20 records, uptime
 * 3,600,000 + 10 k ms, the matching secs/nsecs, flow sequence 20 k, engine id
 * e) and record block (7 k + e) % 64 of FILE (`relaytool.py nf5 --blocks-out
 * FILE`: 64 blocks of 20 records, 960 bytes each).  So `groupcast sink
 * --digest` checks it against relaytool.nf5_digest() as it checks the Python
 * producer.
 *
 * Pacing: datagram i is due at start + i / R (CLOCK_MONOTONIC, absolute
 * clock_nanosleep); the datagrams go out in runs of up to 64 consecutive
 * indices (1 at or below 5,000/s), each run sent with one sendmmsg() per
 * exporter socket, so each exporter's datagrams leave in order and the
 * clock is read once a run.  A run that is late goes at once: a backlog is
 * caught up back to back.  At the end it waits until start + N / R, as
 * relaytool.py does, and prints {"sent": N, "seconds": S}.
 *
 * Bad arguments: a message naming the argument, exit 2.  A send error:
 * a message, exit 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum {
	NF5_BLOCKS = 64,
	NF5_RECORDS = 20,
	NF5_BLOCK = NF5_RECORDS * 48, /* 960 bytes of flow records */
	NF5_HDR = 24,
	MAX_SRC = 64,
	MAX_RUN = 64, /* datagrams per run (one clock read) */
	SNDBUF = 4 << 20,
};

static const char *prog = "nf5_send";

static void usage_fail(const char *arg, const char *val, const char *why)
{
	fprintf(stderr, "%s: %s: '%s' %s\n", prog, arg, val ? val : "", why);
	fprintf(stderr, "usage: %s --blocks FILE --to A:P --src A[,B...] --count N --rate R\n", prog);
	exit(2);
}

static void missing(const char *arg, const char *what)
{
	fprintf(stderr, "%s: %s %s\n", prog, arg, what);
	fprintf(stderr, "usage: %s --blocks FILE --to A:P --src A[,B...] --count N --rate R\n", prog);
	exit(2);
}

struct addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/* host (IPv4, or IPv6 with or without brackets) and port into a; 0 or -1. */
static int parse_addr(const char *host, size_t hlen, unsigned port, struct addr *a)
{
	char buf[INET6_ADDRSTRLEN + 1];
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		host++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof buf)
		return -1;
	memcpy(buf, host, hlen);
	buf[hlen] = 0;
	memset(a, 0, sizeof *a);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&a->ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->ss;
	if (inet_pton(AF_INET, buf, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		a->len = sizeof *v4;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		a->len = sizeof *v6;
		return 0;
	}
	return -1;
}

static unsigned long long parse_count(const char *arg, const char *s)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		usage_fail(arg, s, "is not a positive integer");
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > (1ULL << 40))
		usage_fail(arg, s, "is not an integer from 1 to 2^40");
	return v;
}

static void put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* relaytool.nf5_header(i, exporters): struct "!HHIIIIBBH"; returns the block. */
static unsigned nf5_header(unsigned char *h, unsigned long long i, unsigned exporters)
{
	unsigned e = (unsigned)(i % exporters);
	unsigned long long k = i / exporters;
	uint32_t uptime = (uint32_t)(3600000ULL + k * 10);
	put16(h, 5);
	put16(h + 2, NF5_RECORDS);
	put32(h + 4, uptime);
	put32(h + 8, (uint32_t)(1764288000ULL + uptime / 1000));
	put32(h + 12, (uint32_t)((uptime % 1000) * 1000000ULL));
	put32(h + 16, (uint32_t)(k * NF5_RECORDS));
	h[20] = 0;
	h[21] = (unsigned char)e;
	put16(h + 22, 0);
	return (unsigned)((k * 7 + e) % NF5_BLOCKS);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t due)
{
	struct timespec ts = { (time_t)(due / 1000000000ULL), (long)(due % 1000000000ULL) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void send_all(int fd, struct mmsghdr *m, unsigned n, const char *src)
{
	while (n) {
		int r = sendmmsg(fd, m, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s: sendmmsg from %s: %s\n", prog, src, strerror(errno));
			exit(1);
		}
		m += r;
		n -= (unsigned)r;
	}
}

int main(int argc, char **argv)
{
	const char *blocks_path = NULL, *to = NULL, *src = NULL, *count_s = NULL, *rate_s = NULL;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char **slot = !strcmp(o, "--blocks") ? &blocks_path
			: !strcmp(o, "--to")		   ? &to
			: !strcmp(o, "--src")		   ? &src
			: !strcmp(o, "--count")		   ? &count_s
			: !strcmp(o, "--rate")		   ? &rate_s
							   : NULL;
		if (!slot)
			usage_fail("argument", o, "is not an option of nf5_send");
		if (i + 1 >= argc)
			missing(o, "needs a value");
		*slot = argv[++i];
	}
	if (!blocks_path)
		missing("--blocks",
			"is required ("
			"relaytool.py nf5 --blocks-out FILE writes it"
			")");
	if (!to)
		missing("--to",
			"is required ("
			"ADDRESS:PORT"
			")");
	if (!src)
		missing("--src",
			"is required ("
			"exporter addresses, A[,B...]"
			")");
	if (!count_s)
		missing("--count",
			"is required ("
			"datagrams to send"
			")");
	if (!rate_s)
		missing("--rate",
			"is required ("
			"datagrams/s"
			")");

	unsigned long long count = parse_count("--count", count_s);
	char *end;
	errno = 0;
	double rate = strtod(rate_s, &end);
	if (errno || *end || end == rate_s || !(rate > 0) || rate > 1e9)
		usage_fail("--rate", rate_s, "is not a rate in datagrams/s (more than 0, at most 1e9)");

	struct addr dst;
	const char *colon = strrchr(to, ':');
	unsigned long port = 0;
	if (colon) {
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || colon[1] == 0 || port == 0 || port > 65535)
			colon = NULL;
	}
	if (!colon || parse_addr(to, (size_t)(colon - to), (unsigned)port, &dst) < 0)
		usage_fail("--to", to, "is not ADDRESS:PORT (IPv4, or [IPv6]:PORT; port 1-65535)");

	static unsigned char blocks[NF5_BLOCKS][NF5_BLOCK];
	FILE *bf = fopen(blocks_path, "rb");
	if (!bf) {
		fprintf(stderr, "%s: --blocks: '%s': %s\n", prog, blocks_path, strerror(errno));
		return 2;
	}
	size_t got = fread(blocks, 1, sizeof blocks, bf);
	int extra = fgetc(bf);
	fclose(bf);
	if (got != sizeof blocks || extra != EOF)
		usage_fail("--blocks", blocks_path, "is not 64 record blocks of 960 bytes (61440 bytes)");

	/* One socket per exporter address, bound to it, as relaytool.py does. */
	int fds[MAX_SRC];
	char names[MAX_SRC][INET6_ADDRSTRLEN + 3];
	unsigned k = 0;
	for (const char *p = src; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len) {
			struct addr a;
			if (k == MAX_SRC)
				usage_fail("--src", src, "has more than 64 addresses");
			if (parse_addr(p, len, 0, &a) < 0 || a.ss.ss_family != dst.ss.ss_family)
				usage_fail("--src", src, "is not a list of addresses of --to's family");
			snprintf(names[k], sizeof names[k], "%.*s", (int)len, p);
			int fd = socket(dst.ss.ss_family, SOCK_DGRAM, 0);
			int sz = SNDBUF;
			if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz) < 0 ||
			    bind(fd, (struct sockaddr *)&a.ss, a.len) < 0) {
				fprintf(stderr, "%s: --src: cannot bind %s: %s\n", prog, names[k],
					strerror(errno));
				return 2;
			}
			fds[k++] = fd;
		}
		p += len + (comma ? 1 : 0);
	}
	if (!k)
		usage_fail("--src", src, "names no address");

	/* A run of up to MAX_RUN consecutive datagrams: at or below 5,000/s one
	 * at a time, then one more per 5,000/s (64 at 320,000/s and more). */
	unsigned run = rate <= 5000	   ? 1
		: rate >= 5000.0 * MAX_RUN ? MAX_RUN
					   : (unsigned)(rate / 5000);
	static unsigned char hdrs[MAX_RUN][NF5_HDR];
	static struct iovec iov[MAX_RUN][2];
	static struct mmsghdr msgs[MAX_RUN];
	unsigned per[MAX_SRC];
	double ns_per = 1e9 / rate;

	uint64_t t0 = now_ns();
	for (unsigned long long j = 0; j < count; j += run) {
		unsigned n = (unsigned)(count - j < run ? count - j : run);
		uint64_t due = t0 + (uint64_t)((double)j * ns_per);
		if (now_ns() < due)
			sleep_until(due);
		/* Group the run by exporter, each exporter's datagrams in index
		 * order: slot [base_e + c] for exporter e's c-th datagram. */
		unsigned start[MAX_SRC + 1];
		memset(per, 0, sizeof(unsigned) * k);
		for (unsigned x = 0; x < n; x++)
			per[(j + x) % k]++;
		start[0] = 0;
		for (unsigned e = 0; e < k; e++)
			start[e + 1] = start[e] + per[e];
		memset(per, 0, sizeof(unsigned) * k);
		for (unsigned x = 0; x < n; x++) {
			unsigned long long i = j + x;
			unsigned e = (unsigned)(i % k);
			unsigned s = start[e] + per[e]++;
			unsigned b = nf5_header(hdrs[s], i, k);
			iov[s][0] = (struct iovec){ hdrs[s], NF5_HDR };
			iov[s][1] = (struct iovec){ blocks[b], NF5_BLOCK };
			msgs[s].msg_hdr = (struct msghdr){ .msg_name = &dst.ss,
							   .msg_namelen = dst.len,
							   .msg_iov = iov[s],
							   .msg_iovlen = 2 };
		}
		for (unsigned e = 0; e < k; e++)
			if (per[e])
				send_all(fds[e], msgs + start[e], per[e], names[e]);
	}
	uint64_t end_due = t0 + (uint64_t)((double)count * ns_per);
	if (now_ns() < end_due)
		sleep_until(end_due);
	double seconds = (double)(now_ns() - t0) / 1e9;
	printf("{\"sent\": %llu, \"seconds\": %.9f}\n", count, seconds);
	for (unsigned e = 0; e < k; e++)
		close(fds[e]);
	return 0;
}
