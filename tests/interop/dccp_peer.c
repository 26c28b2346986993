/* dccp_peer: a DCCP endpoint that uses the kernel's own DCCP sockets.
 *
 * It runs inside the Linux 6.1 guest of tests/interop/linux61.py, the last
 * Linux with DCCP, as the reference peer for groupcast's DCCP.  Built static
 * (cc -static -O2) so that the busybox initramfs needs no C library.  Not part
 * of libgroupcast.
 *
 *   dccp_peer server PORT [--bind ADDR] [--ccid 2|3] [--service N] [--count N]
 *                         [--rcvbuf B] [--timeout-ms T] [--payload be|gc]
 *   dccp_peer client ADDR PORT [--ccid 2|3] [--service N] [--count N]
 *                         [--size B] [--interval-us U] [--timeout-ms T] [--payload be|gc]
 *
 * The client sends COUNT datagrams of SIZE bytes; the first 8 bytes of each
 * are its number, so the server can tell what was lost or reordered.
 * --payload be (default): the number big endian, then bytes i & 0xff.
 * --payload gc: the format of `groupcast dccp` (tools/dccp.c, tools/cli.h):
 * the number little endian, then byte i = i * 7 + 0x5a, so that groupcast's
 * listener checks every byte the Linux client sent, and the other way round.  Each side prints one JSON line on stdout when done and exits 0
 * if it saw the whole exchange (server: COUNT datagrams or an orderly close
 * after at least one; client: every datagram handed to the kernel).  Errors go
 * to stderr, naming the argument or the call, and exit 1 (2 for usage).
 *
 * DCCP does not retransmit: a receiver that reads slower than the sender
 * sends loses what overflows its receive buffer (under TCG, a 1000-byte
 * datagram on loopback costs about 2.3 kB of it).  --rcvbuf enlarges it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* From linux/dccp.h and the kernel's include/linux/tfrc.h; spelled out here
 * because glibc has only SOCK_DCCP, IPPROTO_DCCP and SOL_DCCP. */
#ifndef SOL_DCCP
#define SOL_DCCP 269
#endif
#define DCCP_SOCKOPT_SERVICE 2
#define DCCP_SOCKOPT_GET_CUR_MPS 5
#define DCCP_SOCKOPT_CCID 13
#define DCCP_SOCKOPT_TX_CCID 14
#define DCCP_SOCKOPT_RX_CCID 15
#define DCCP_SOCKOPT_CCID_RX_INFO 128
#define DCCP_SOCKOPT_CCID_TX_INFO 192

struct tfrc_rx_info {
	uint32_t x_recv, rtt, p;
};
struct tfrc_tx_info {
	uint64_t x, x_recv;
	uint32_t x_calc, rtt, p, rto, ipi;
};

#define MAX_SIZE 65536

struct opts {
	int ccid; /* 0: the kernel's default preference */
	uint32_t service;
	long count, size, interval_us, timeout_ms, rcvbuf;
	const char *bind;
	int gc_payload; /* --payload gc: groupcast's numbering and pattern */
};

static uint8_t pattern(const struct opts *o, long i)
{
	return o->gc_payload ? (uint8_t)(i * 7 + 0x5a) : (uint8_t)i;
}

/* The packet number in the first 8 bytes, in the --payload byte order. */
static uint64_t get_num(const struct opts *o, const unsigned char *b)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = o->gc_payload ? v | (uint64_t)b[i] << (8 * i) : v << 8 | b[i];
	return v;
}

static void put_num(const struct opts *o, unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[o->gc_payload ? i : 7 - i] = (unsigned char)(v >> (8 * i));
}

static void usage(void)
{
	fputs("usage: dccp_peer server PORT [--bind ADDR] [--ccid 2|3] [--service N] [--count N] [--rcvbuf B]\n"
	      "                        [--timeout-ms T] [--payload be|gc]\n"
	      "       dccp_peer client ADDR PORT [--ccid 2|3] [--service N] [--count N] [--size B]\n"
	      "                        [--interval-us U] [--timeout-ms T] [--payload be|gc]\n",
	      stderr);
	exit(2);
}

static long num(const char *name, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "dccp_peer: %s: %s is not an integer in %ld..%ld\n", name, s, lo, hi);
		exit(2);
	}
	return v;
}

static void die(const char *what)
{
	fprintf(stderr, "dccp_peer: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ADDR (IPv4 or IPv6 literal) and PORT into ss; returns its length. */
static socklen_t parse_addr(const char *addr, const char *port, struct sockaddr_storage *ss)
{
	uint16_t p = (uint16_t)num("PORT", port, 1, 65535);
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(p);
		return sizeof(*a4);
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(p);
		return sizeof(*a6);
	}
	fprintf(stderr, "dccp_peer: ADDR: %s is not an IPv4 or IPv6 address\n", addr);
	exit(2);
}

/* Socket options that must be set before listen() or connect(). */
static int dccp_socket(int family, const struct opts *o)
{
	int fd = socket(family, SOCK_DCCP, IPPROTO_DCCP);
	if (fd < 0)
		die("socket(SOCK_DCCP) (is dccp_ipv4/dccp_ipv6 loaded?)");
	uint32_t service = htonl(o->service);
	if (setsockopt(fd, SOL_DCCP, DCCP_SOCKOPT_SERVICE, &service, sizeof(service)) < 0)
		die("setsockopt(DCCP_SOCKOPT_SERVICE)");
	if (o->ccid) {
		/* One CCID in the preference list of both half-connections:
		 * the peer can agree to it or leave the CCID unconfirmed. */
		uint8_t ccid = (uint8_t)o->ccid;
		if (setsockopt(fd, SOL_DCCP, DCCP_SOCKOPT_CCID, &ccid, 1) < 0)
			die("setsockopt(DCCP_SOCKOPT_CCID)");
	}
	return fd;
}

static int getopt_int(int fd, int opt)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_DCCP, opt, &v, &len) < 0)
		return -1;
	return v;
}

/* The negotiated CCIDs, MPS and, for CCID 3, the TFRC state, as JSON members. */
static void print_ccid_info(int fd)
{
	int tx = getopt_int(fd, DCCP_SOCKOPT_TX_CCID), rx = getopt_int(fd, DCCP_SOCKOPT_RX_CCID);
	printf("\"tx_ccid\":%d,\"rx_ccid\":%d,\"mps\":%d", tx, rx,
	       getopt_int(fd, DCCP_SOCKOPT_GET_CUR_MPS));
	if (tx == 3) {
		struct tfrc_tx_info ti;
		socklen_t len = sizeof(ti);
		if (getsockopt(fd, SOL_DCCP, DCCP_SOCKOPT_CCID_TX_INFO, &ti, &len) == 0)
			printf(",\"tfrc_tx\":{\"x\":%" PRIu64 ",\"x_recv\":%" PRIu64
			       ",\"x_calc\":%u,\"rtt_us\":%u,"
			       "\"p\":%u,\"rto_us\":%u,\"ipi_us\":%u}",
			       ti.x, ti.x_recv, ti.x_calc, ti.rtt, ti.p, ti.rto, ti.ipi);
	}
	if (rx == 3) {
		struct tfrc_rx_info ri;
		socklen_t len = sizeof(ri);
		if (getsockopt(fd, SOL_DCCP, DCCP_SOCKOPT_CCID_RX_INFO, &ri, &len) == 0)
			printf(",\"tfrc_rx\":{\"x_recv\":%u,\"rtt_us\":%u,\"p\":%u}", ri.x_recv,
			       ri.rtt, ri.p);
	}
}

static const char *addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *a = ss->ss_family == AF_INET
		? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
		: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* Wait for fd to become ready for events until deadline; 0 on timeout. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = { .fd = fd, .events = events };
		int n = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			die("poll");
	}
}

static int server(const char *port, const struct opts *o)
{
	struct sockaddr_storage ss;
	socklen_t sl = parse_addr(o->bind ? o->bind : "0.0.0.0", port, &ss);
	int lfd = dccp_socket(ss.ss_family, o);
	int one = 1;
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("setsockopt(SO_REUSEADDR)");
	/* Accepted sockets inherit it.  FORCE passes net.core.rmem_max (root). */
	int rcvbuf = (int)o->rcvbuf;
	if (rcvbuf && setsockopt(lfd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0 &&
	    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0)
		die("setsockopt(SO_RCVBUF)");
	if (bind(lfd, (struct sockaddr *)&ss, sl) < 0)
		die("bind");
	if (listen(lfd, 4) < 0)
		die("listen");
	/* The harness waits for this line before it starts the client. */
	fprintf(stderr, "dccp_peer: listening on port %s\n", port);
	int64_t start = now_ms(), deadline = start + o->timeout_ms;
	if (!wait_fd(lfd, POLLIN, deadline)) {
		printf("{\"mode\":\"server\",\"ended\":\"timeout\",\"accepted\":false,\"received\":0}\n");
		return 1;
	}
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	int fd = accept(lfd, (struct sockaddr *)&peer, &pl);
	if (fd < 0)
		die("accept");

	static unsigned char buf[MAX_SIZE];
	long received = 0, reordered = 0, duplicates = 0, short_dgrams = 0, corrupt = 0;
	uint64_t bytes = 0;
	int64_t max_seq = -1;
	/* Which numbers arrived: enough bits for COUNT; the rest only count. */
	unsigned char *seen = calloc((size_t)o->count / 8 + 1, 1);
	if (!seen)
		die("calloc");
	const char *ended = "count";
	while (received < o->count) {
		if (!wait_fd(fd, POLLIN, deadline)) {
			ended = "timeout";
			break;
		}
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			ended = "error";
			fprintf(stderr, "dccp_peer: recv: %s\n", strerror(errno));
			break;
		}
		if (n == 0) {
			ended = "eof";
			break;
		}
		received++;
		bytes += (uint64_t)n;
		if (n < 8) {
			short_dgrams++;
			continue;
		}
		uint64_t seq = get_num(o, buf);
		for (ssize_t i = 8; i < n; i++)
			if (buf[i] != pattern(o, i)) {
				corrupt++;
				break;
			}
		if ((int64_t)seq < max_seq)
			reordered++;
		else
			max_seq = (int64_t)seq;
		if (seq < (uint64_t)o->count) {
			if (seen[seq / 8] & (1u << (seq % 8)))
				duplicates++;
			seen[seq / 8] |= (unsigned char)(1u << (seq % 8));
		}
	}
	long distinct = 0;
	for (long i = 0; i < o->count; i++)
		distinct += (seen[i / 8] >> (i % 8)) & 1;
	/* Numbers below the highest one seen that never arrived. */
	long lost = max_seq < 0 ? 0 : (long)(max_seq + 1 < o->count ? max_seq + 1 : o->count) - distinct;
	char a[INET6_ADDRSTRLEN];
	printf("{\"mode\":\"server\",\"ended\":\"%s\",\"accepted\":true,\"peer\":\"%s\",\"family\":%d,"
	       "\"service\":%" PRIu32 ",\"received\":%ld,\"distinct\":%ld,\"bytes\":%" PRIu64
	       ",\"max_seq\":%" PRId64
	       ",\"lost\":%ld,\"reordered\":%ld,\"duplicates\":%ld,\"short\":%ld,\"corrupt\":%ld,"
	       "\"elapsed_ms\":%" PRId64 ",",
	       ended, addr_str(&peer, a, sizeof(a)), peer.ss_family == AF_INET6 ? 6 : 4, o->service,
	       received, distinct, bytes, max_seq, lost, reordered, duplicates, short_dgrams,
	       corrupt, now_ms() - start);
	print_ccid_info(fd);
	printf("}\n");
	fflush(stdout);
	free(seen);
	close(fd);
	close(lfd);
	return strcmp(ended, "count") == 0 || (strcmp(ended, "eof") == 0 && received > 0) ? 0 : 1;
}

static int client(const char *addr, const char *port, const struct opts *o)
{
	struct sockaddr_storage ss;
	socklen_t sl = parse_addr(addr, port, &ss);
	int fd = dccp_socket(ss.ss_family, o);
	int64_t start = now_ms(), deadline = start + o->timeout_ms;
	/* Connect without blocking, so that a peer that never answers (the
	 * Request is retransmitted every few seconds) costs at most --timeout-ms. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl(O_NONBLOCK)");
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS)
		die("connect");
	if (!wait_fd(fd, POLLOUT, deadline)) {
		printf("{\"mode\":\"client\",\"ended\":\"connect-timeout\",\"sent\":0}\n");
		return 1;
	}
	int err = 0;
	socklen_t el = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || (errno = err) != 0)
		die("connect");
	if (fcntl(fd, F_SETFL, fl) < 0)
		die("fcntl");
	int64_t connected = now_ms();

	static unsigned char buf[MAX_SIZE];
	for (long i = 0; i < o->size; i++)
		buf[i] = pattern(o, i);
	long sent = 0, eagain = 0;
	uint64_t bytes = 0;
	const char *ended = "count";
	struct timespec gap = { o->interval_us / 1000000, (o->interval_us % 1000000) * 1000 };
	while (sent < o->count) {
		if (o->size >= 8)
			put_num(o, buf, (uint64_t)sent);
		ssize_t n = send(fd, buf, (size_t)o->size, 0);
		if (n < 0) {
			/* Linux DCCP returns EAGAIN when its tx queue (5 packets by
			 * default) is full, even on a blocking socket, and POLLOUT
			 * does not wait for room: back off and retry. */
			if (errno == EAGAIN || errno == EINTR) {
				eagain++;
				if (now_ms() > deadline) {
					ended = "timeout";
					break;
				}
				nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
				continue;
			}
			fprintf(stderr, "dccp_peer: send: %s\n", strerror(errno));
			ended = "error";
			break;
		}
		sent++;
		bytes += (uint64_t)n;
		if (o->interval_us)
			nanosleep(&gap, NULL);
	}
	char a[INET6_ADDRSTRLEN];
	printf("{\"mode\":\"client\",\"ended\":\"%s\",\"peer\":\"%s\",\"family\":%d,\"service\":%" PRIu32
	       ",\"sent\":%ld,\"bytes\":%" PRIu64 ",\"eagain\":%ld,\"connect_ms\":%" PRId64
	       ",\"elapsed_ms\":%" PRId64 ",",
	       ended, addr_str(&ss, a, sizeof(a)), ss.ss_family == AF_INET6 ? 6 : 4, o->service,
	       sent, bytes, eagain, connected - start, now_ms() - start);
	print_ccid_info(fd);
	printf("}\n");
	fflush(stdout);
	/* close() drops what is still queued unless SO_LINGER is set. */
	int64_t left_s = (deadline - now_ms()) / 1000;
	struct linger lg = { 1, left_s < 1 ? 1 : (int)left_s };
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		die("setsockopt(SO_LINGER)");
	close(fd);
	return strcmp(ended, "count") == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		usage();
	int is_server = strcmp(argv[1], "server") == 0;
	if (!is_server && strcmp(argv[1], "client") != 0)
		usage();
	int npos = is_server ? 1 : 2, i = 2 + npos;
	if (argc < i)
		usage();
	struct opts o = {
		.ccid = 0, .service = 0, .count = 10, .size = 100, .interval_us = 0, .timeout_ms = 20000
	};
	for (; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (!val) {
			fprintf(stderr, "dccp_peer: %s needs a value\n", opt);
			usage();
		}
		i++;
		if (!strcmp(opt, "--ccid"))
			o.ccid = (int)num("--ccid", val, 2, 3);
		else if (!strcmp(opt, "--service"))
			o.service = (uint32_t)num("--service", val, 0, 0xffffffffL);
		else if (!strcmp(opt, "--count"))
			o.count = num("--count", val, 1, 100000000);
		else if (!strcmp(opt, "--size"))
			o.size = num("--size", val, 1, MAX_SIZE);
		else if (!strcmp(opt, "--interval-us"))
			o.interval_us = num("--interval-us", val, 0, 10000000);
		else if (!strcmp(opt, "--timeout-ms"))
			o.timeout_ms = num("--timeout-ms", val, 1, 3600000);
		else if (!strcmp(opt, "--rcvbuf") && is_server)
			o.rcvbuf = num("--rcvbuf", val, 0, 1L << 30);
		else if (!strcmp(opt, "--payload") && (!strcmp(val, "be") || !strcmp(val, "gc")))
			o.gc_payload = val[0] == 'g';
		else if (!strcmp(opt, "--bind") && is_server)
			o.bind = val;
		else {
			fprintf(stderr, "dccp_peer: unknown option %s\n", opt);
			usage();
		}
	}
	return is_server ? server(argv[2], &o) : client(argv[2], argv[3], &o);
}
