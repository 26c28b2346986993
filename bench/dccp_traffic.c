/* SPDX-License-Identifier: MIT */
/*
 * dccp_traffic.c - the traffic of the packet-ring paper's P2 and P3
 * experiments (bench/dccp.py) over UDP, TCP or our DCCP (gc_dccp(3)).
 *
 *   dccp_traffic send PROTO ADDR PORT --interval-ms I --count N [--size B]
 *                [--ccid 2|3] [--udp-encap] [--policy stale|video]
 *   dccp_traffic recv PROTO PORT --count N --timeout-s S [--ccid 2|3] [--udp-encap]
 *
 * Every packet starts with a header: sequence number, frame type (1 = I,
 * 0 = B/P; every 10th packet is an I-frame) and the application's send time
 * (CLOCK_REALTIME, so that it compares with the capture's timestamps).
 * The sender prints one CSV line per packet it handed to the transport or
 * dropped as late data ("S,seq,type,t_app_ns,dead"); the receiver prints
 * "R,seq,type,t_app_ns,t_rx_ns" per packet and a JSON summary last.
 * TCP is a byte stream: the receiver reads whole records of --size bytes.
 * The header, the frame types, these lines and the "video" policy's choice
 * are bench/p3_video.h's, shared with bench/quic_peer.c.
 *
 * Late data choice (DCCP only, on the packet ring, between the engine and
 * the application; include/groupcast/ring.h):
 *   stale: packets still queued three send intervals after the application
 *          sent them are marked dead (P2);
 *   video: when 3 or more packets are queued, B/P packets are marked dead,
 *          oldest first, and I-frame packets only if that is not enough
 *          (P3).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <groupcast/dccp.h>
#include <groupcast/ring.h>

#include "p3_video.h"

enum proto { P_UDP, P_TCP, P_DCCP };
enum policy { POL_NONE, POL_STALE, POL_VIDEO };

struct args {
	enum proto proto;
	const char *addr;
	int port;
	unsigned interval_ms, count, size, timeout_s;
	int ccid, encap;
	enum policy policy;
};

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "dccp_traffic: %s: %s\n", what, strerror(errno));
	exit(1);
}

static _Noreturn void usage(const char *why)
{
	fprintf(stderr,
		"dccp_traffic: %s\nusage: dccp_traffic send udp|tcp|dccp ADDR PORT "
		"--interval-ms I --count N [--size B] [--ccid 2|3] [--udp-encap] "
		"[--policy stale|video]\n       dccp_traffic recv udp|tcp|dccp PORT "
		"--count N --timeout-s S [--ccid 2|3] [--udp-encap]\n",
		why);
	exit(2);
}

static unsigned num(const char *opt, const char *v, unsigned lo, unsigned hi)
{
	return p3_num("dccp_traffic", opt, v, lo, hi);
}

static struct sockaddr_in addr_of(const char *a, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (a && inet_pton(AF_INET, a, &sin.sin_addr) != 1) {
		errno = EINVAL;
		fprintf(stderr, "dccp_traffic: ADDR: '%s' is not an IPv4 address\n", a);
		exit(2);
	}
	return sin;
}

static void sleep_until(uint64_t t_mono)
{
	struct timespec ts = { .tv_sec = (time_t)(t_mono / 1000000000u),
			       .tv_nsec = (long)(t_mono % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- UDP and TCP: plain sockets, no choice ------------------------------- */

static void send_sock(const struct args *a)
{
	struct sockaddr_in sin = addr_of(a->addr, a->port);
	int tcp = a->proto == P_TCP;
	int sd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (sd < 0)
		die("socket");
	if (tcp) {
		int one = 1;
		setsockopt(sd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (connect(sd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		die("connect");
	uint8_t *b = malloc(a->size);
	if (!b)
		die("malloc");
	uint64_t t0 = p3_now_ns(CLOCK_MONOTONIC);
	for (uint64_t seq = 0; seq < a->count; seq++) {
		sleep_until(t0 + seq * a->interval_ms * 1000000ull);
		p3_fill(b, a->size, seq);
		/* TCP blocks here once the socket buffer is full: that is the
		 * application-level delay the experiment shows. */
		size_t done = 0;
		while (done < a->size) {
			ssize_t n = send(sd, b + done, a->size - done, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				if (!tcp && (errno == ECONNREFUSED || errno == ENOBUFS))
					break; /* a UDP datagram lost before the wire */
				die("send");
			}
			done += (size_t)n;
		}
		p3_log_sent(b, 0);
	}
	close(sd);
	free(b);
}

/* ---- DCCP through the packet ring, with late data choice ----------------- */

struct slot {
	uint64_t seq, t_mono;
	unsigned type;
};

/* Applies the policy to the packets the engine has not taken yet. */
static void late_choice(struct gc_ring *r, struct slot *meta, const struct args *a,
			uint8_t *const *bufs, uint64_t now)
{
	unsigned first;
	int n = gc_ring_rewind(r, GC_RING_OLDEST, &first);
	if (n <= 0)
		return;
	unsigned ents = gc_ring_entries(r);
	int live = 0;
	for (int i = 0; i < n; i++) {
		unsigned pos = (first + (unsigned)i) % ents;
		live += !(atomic_load(&gc_ring_pkt(r, pos)->flags) & GC_PKT_DEAD);
	}
	for (unsigned pass = 0; pass < P3_VIDEO_PASSES; pass++) {
		for (int i = 0; i < n; i++) {
			unsigned pos = (first + (unsigned)i) % ents;
			struct gc_pkt *p = gc_ring_pkt(r, pos);
			if (atomic_load(&p->flags) & GC_PKT_DEAD)
				continue;
			int kill = 0;
			if (a->policy == POL_STALE)
				kill = pass == 0 &&
					now - meta[pos].t_mono > 3ull * a->interval_ms * 1000000ull;
			else if (a->policy == POL_VIDEO)
				kill = p3_video_drops(pass, meta[pos].type, (unsigned)live);
			if (kill && gc_ring_mark_dead(r, pos) == 1) { /* 1: certain not to go */
				live--;
				p3_log_sent(bufs[pos], 1);
			}
		}
	}
}

static void send_dccp(const struct args *a)
{
	struct sockaddr_in sin = addr_of(a->addr, a->port);
	struct gc_dccp_opts o = GC_DCCP_OPTS_INIT(.ccid = a->ccid, .encap = a->encap,
						  .mps = a->size, .ring_slots = 256);
	struct gc_dccp *c = gc_dccp_connect((struct sockaddr *)&sin, sizeof(sin), &o);
	if (!c) {
		fprintf(stderr, "dccp_traffic: gc_dccp_connect: %s\n", gc_errmsg());
		exit(1);
	}
	struct gc_ring *r = gc_dccp_ring(c);
	struct gc_zone *z = gc_dccp_zone(c);
	unsigned ents = gc_ring_entries(r);
	struct slot *meta = calloc(ents, sizeof(*meta));
	uint8_t **bufs = calloc(ents, sizeof(*bufs));
	if (!meta || !bufs)
		die("calloc");
	uint64_t t0 = p3_now_ns(CLOCK_MONOTONIC);
	for (uint64_t seq = 0; seq < a->count; seq++) {
		sleep_until(t0 + seq * a->interval_ms * 1000000ull);
		struct gc_pkt *p;
		while (!(p = gc_ring_get_pkt(r))) {
			/* ring full: only possible without a policy */
			gc_ring_submit(r);
			if (gc_ring_wait(r, 1, 50) != 0 && errno != ETIMEDOUT)
				die("gc_ring_wait");
		}
		unsigned pos = gc_ring_pos(r, p);
		uint8_t *b = gc_zone_buf(z, pos);
		p3_fill(b, a->size, seq);
		p->off = gc_zone_offset(z, b);
		p->len = a->size;
		p->user_seq = seq;
		meta[pos] = (struct slot){ .seq = seq,
					   .t_mono = p3_now_ns(CLOCK_MONOTONIC),
					   .type = p3_frame_type(seq) };
		bufs[pos] = b;
		p3_log_sent(b, 0);
		if (gc_ring_publish(r) < 0)
			die("gc_ring_publish");
		if (a->policy != POL_NONE)
			late_choice(r, meta, a, bufs, p3_now_ns(CLOCK_MONOTONIC));
		if (gc_ring_submit(r) < 0) {
			fprintf(stderr, "dccp_traffic: gc_ring_submit: %s\n", gc_errmsg());
			exit(1);
		}
	}
	struct gc_dccp_stats st = GC_DCCP_STATS_INIT();
	if (gc_dccp_stats(c, &st) == 0)
		fprintf(stderr,
			"{\"sent\":%" PRIu64 ",\"acked\":%" PRIu64 ",\"dead\":%" PRIu64
			",\"cwnd\":%u,\"x_bps\":%" PRIu64 ",\"rtt_us\":%" PRIu64 ",\"p\":%g}\n",
			st.sent, st.acked, st.dead, st.cwnd, st.x_bps, st.rtt_us, st.p);
	gc_dccp_close(c, 3000);
	free(meta);
	free(bufs);
}

/* ---- receivers -------------------------------------------------------- */

static void recv_main(const struct args *a)
{
	struct sockaddr_in sin = addr_of(NULL, a->port);
	setvbuf(stdout, NULL, _IOLBF, 0); /* the driver may stop us: keep every line */
	uint8_t *b = malloc(a->size + 64);
	if (!b)
		die("malloc");
	uint64_t deadline = p3_now_ns(CLOCK_MONOTONIC) + (uint64_t)a->timeout_s * 1000000000u;
	unsigned got = 0;
	if (a->proto == P_DCCP) {
		struct gc_dccp_opts o =
			GC_DCCP_OPTS_INIT(.ccid = a->ccid, .encap = a->encap, .mps = a->size);
		struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&sin, sizeof(sin), &o);
		if (!l) {
			fprintf(stderr, "dccp_traffic: gc_dccp_listen: %s\n", gc_errmsg());
			exit(1);
		}
		fprintf(stderr, "listening\n");
		struct gc_dccp *c = gc_dccp_accept(l, (int)a->timeout_s * 1000);
		if (!c) {
			fprintf(stderr, "dccp_traffic: gc_dccp_accept: %s\n", gc_errmsg());
			exit(1);
		}
		while (got < a->count && p3_now_ns(CLOCK_MONOTONIC) < deadline) {
			struct gc_dccp_rxinfo ri;
			ssize_t n = gc_dccp_recv(c, b, a->size, &ri, 200);
			if (n < 0 && errno == EAGAIN)
				continue;
			if (n <= 0)
				break;
			p3_log_rx(b, (size_t)n);
			got++;
		}
		gc_dccp_close(c, 1000);
		gc_dccp_listener_destroy(l);
	} else {
		int tcp = a->proto == P_TCP;
		int ls = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0), one = 1;
		if (ls < 0)
			die("socket");
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (struct sockaddr *)&sin, sizeof(sin)) != 0)
			die("bind");
		if (tcp && listen(ls, 1) != 0)
			die("listen");
		fprintf(stderr, "listening\n");
		int sd = ls;
		if (tcp) {
			struct pollfd pf = { .fd = ls, .events = POLLIN };
			if (poll(&pf, 1, (int)a->timeout_s * 1000) != 1)
				die("accept timed out");
			sd = accept(ls, NULL, NULL);
			if (sd < 0)
				die("accept");
		}
		size_t have = 0;
		while (got < a->count) {
			uint64_t now = p3_now_ns(CLOCK_MONOTONIC);
			if (now >= deadline)
				break;
			struct pollfd pf = { .fd = sd, .events = POLLIN };
			int left = (int)((deadline - now) / 1000000u) + 1;
			if (poll(&pf, 1, left > 200 ? 200 : left) <= 0)
				continue;
			ssize_t n = recv(sd, b + have, tcp ? a->size - have : a->size + 64, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				die("recv");
			if (n == 0 && tcp)
				break;
			if (!tcp) {
				p3_log_rx(b, (size_t)n);
				got++;
				continue;
			}
			have += (size_t)n;
			if (have == a->size) {
				p3_log_rx(b, have);
				have = 0;
				got++;
			}
		}
		if (sd != ls)
			close(sd);
		close(ls);
	}
	fflush(stdout);
	fprintf(stderr, "{\"received\":%u}\n", got);
	free(b);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		usage("too few arguments");
	struct args a = { .size = 1460,
			  .ccid = 2,
			  .encap = GC_DCCP_NATIVE,
			  .timeout_s = 60,
			  .interval_ms = 30,
			  .count = 100 };
	int send = !strcmp(argv[1], "send");
	if (!send && strcmp(argv[1], "recv"))
		usage("the first argument is send or recv");
	if (!strcmp(argv[2], "udp"))
		a.proto = P_UDP;
	else if (!strcmp(argv[2], "tcp"))
		a.proto = P_TCP;
	else if (!strcmp(argv[2], "dccp"))
		a.proto = P_DCCP;
	else
		usage("PROTO is udp, tcp or dccp");
	int i = 3;
	if (send) {
		if (argc < 5)
			usage("send needs ADDR PORT");
		a.addr = argv[i++];
	}
	a.port = (int)num("PORT", argv[i++], 1, 65535);
	for (; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--udp-encap")) {
			a.encap = GC_DCCP_UDP;
			continue;
		}
		i++;
		if (!strcmp(o, "--interval-ms"))
			a.interval_ms = num(o, v, 1, 10000);
		else if (!strcmp(o, "--count"))
			a.count = num(o, v, 1, 10000000);
		else if (!strcmp(o, "--size"))
			a.size = num(o, v, (unsigned)sizeof(struct p3_hdr), 1400 + 60);
		else if (!strcmp(o, "--timeout-s"))
			a.timeout_s = num(o, v, 1, 3600);
		else if (!strcmp(o, "--ccid"))
			a.ccid = (int)num(o, v, 2, 3);
		else if (!strcmp(o, "--policy")) {
			if (v && !strcmp(v, "stale"))
				a.policy = POL_STALE;
			else if (v && !strcmp(v, "video"))
				a.policy = POL_VIDEO;
			else if (v && !strcmp(v, "none"))
				a.policy = POL_NONE;
			else
				usage("--policy is none, stale or video");
		} else
			usage("unknown option");
	}
	if (send)
		a.proto == P_DCCP ? send_dccp(&a) : send_sock(&a);
	else
		recv_main(&a);
	return 0;
}
