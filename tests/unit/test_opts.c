/* SPDX-License-Identifier: MIT */
/*
 * test_opts: every sized struct of the API follows groupcast(7) "Sized
 * structs" (the rule in groupcast/common.h).  For each, the caller's struct
 * is a buffer larger than this library's struct, as from a newer header:
 *
 *   structs the library reads (the _opts, gc_lms_dmcast):
 *     (a) a nonzero byte past the known part: E2BIG, the message names the
 *         argument and the byte, and nothing was made (no descriptor left
 *         open, no packet built);
 *     (b) the same struct with that part zero: taken (and garbage in the
 *         padding after the last field: taken);
 *     (c) sz below the 1.0 size: EINVAL naming the argument's sz;
 *     (d) sz exactly this header's size, and exactly the 1.0 size: taken;
 *   structs the library fills (the stats, gc_ring_status):
 *     (a) the part past what it knows, filled with garbage: zeroed, sz kept,
 *         the known part as a call with this header's size gets it;
 *     (b) that part zero: the same;
 *     (c) sz below the 1.0 size: EINVAL naming st->sz, nothing written;
 *     (d) sz exactly this header's size: filled.
 * The 1.0 size of each struct is written here from the header's last field
 * today, independently of the library's own record.  Loopback only: a DCCP-UDP
 * listener and connection on 127.0.0.1, an LTP receiver joined on lo.
 */
#include "check.h"

#include <net/if.h>
#include <pthread.h>
#include <stddef.h>

#include <groupcast/dccp.h>
#include <groupcast/group.h>
#include <groupcast/lms.h>
#include <groupcast/ltp.h>
#include <groupcast/ring.h>

#define OFFSETOFEND(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define EXTRA 16 /* bytes a newer header would have added */

/* The caller's struct: this library's plus EXTRA bytes. */
static union {
	unsigned char b[1024];
	uint64_t align;
} u;

static void set_sz(size_t sz)
{
	memcpy(u.b, &sz, sizeof(sz));
}

static size_t get_sz(void)
{
	size_t sz;
	memcpy(&sz, u.b, sizeof(sz));
	return sz;
}

static void msg_has(const char *what, const char *a, const char *b)
{
	if (!strstr(gc_errmsg(), a) || (b && !strstr(gc_errmsg(), b)))
		check_fail(__FILE__, __LINE__, "%s: message \"%s\" does not name %s%s%s", what,
			   gc_errmsg(), a, b ? " and " : "", b ? b : "");
}

/* ---- structs the library reads ------------------------------------------ */

/* u.b = the caller's struct good, sz = sz; padding and tail zero (the INIT
 * macro's padding is the compiler's to fill). */
static void load(const void *good, size_t v1, size_t sz)
{
	memset(u.b, 0, sizeof(u.b));
	memcpy(u.b, good, v1);
	set_sz(sz);
}

/* Make the object from the struct in u.b and free it: 0, or -1 with errno
 * (nothing made). */
typedef int (*make_fn)(const void *o);

/*
 * good: the caller's struct, filled by its INIT macro with values the call
 * takes; size: sizeof it here; v1: its 1.0 size; arg: the argument's name
 * in messages.
 */
static void in_struct(const char *name, const void *good, size_t size, size_t v1, const char *arg,
		      make_fn make)
{
	char sz_arg[64];
	snprintf(sz_arg, sizeof(sz_arg), "%s->sz", arg);
	CHECK(size + EXTRA <= sizeof(u.b) && v1 <= size);

	/* (a) a field this library does not know, set */
	for (size_t at = size; at < size + EXTRA; at += 7) {
		load(good, v1, size + EXTRA);
		u.b[at] = 1;
		int fds = open_fds();
		errno = 0;
		if (make(u.b) != -1 || errno != E2BIG)
			check_fail(__FILE__, __LINE__, "%s: byte %zu set past %zu: errno %d, want E2BIG",
				   name, at, size, errno);
		char byte[32];
		snprintf(byte, sizeof(byte), "byte %zu", at);
		msg_has(name, sz_arg, byte);
		if (open_fds() != fds)
			check_fail(__FILE__, __LINE__, "%s: E2BIG left %d descriptors open", name,
				   open_fds() - fds);
	}
	/* (b) the same struct, the unknown part zero */
	load(good, v1, size + EXTRA);
	if (make(u.b) != 0)
		check_fail(__FILE__, __LINE__, "%s: larger struct, zero tail: %s", name, gc_errmsg());
	/* the padding after the last field (a compiler need not zero it) is
	 * not a field: not looked at */
	if (v1 < size) {
		load(good, v1, size + EXTRA);
		memset(u.b + v1, 0xff, size - v1);
		if (make(u.b) != 0)
			check_fail(__FILE__, __LINE__, "%s: padding [%zu, %zu) set: %s", name, v1,
				   size, gc_errmsg());
	}
	/* (c) below the 1.0 size */
	size_t below[] = { 0, sizeof(size_t), v1 - 1 };
	for (size_t i = 0; i < sizeof(below) / sizeof(below[0]); i++) {
		set_sz(below[i]);
		int fds = open_fds();
		errno = 0;
		if (make(u.b) != -1 || errno != EINVAL)
			check_fail(__FILE__, __LINE__, "%s: sz %zu: errno %d, want EINVAL", name,
				   below[i], errno);
		msg_has(name, sz_arg, "INIT");
		CHECK_EQ(open_fds(), fds);
	}
	/* (d) exactly this header's size, and exactly 1.0's */
	set_sz(size);
	if (make(u.b) != 0)
		check_fail(__FILE__, __LINE__, "%s: sz %zu: %s", name, size, gc_errmsg());
	set_sz(v1);
	if (make(u.b) != 0)
		check_fail(__FILE__, __LINE__, "%s: sz %zu: %s", name, v1, gc_errmsg());
}

static int make_engine(const void *o)
{
	struct gc_ring_engine *e = gc_ring_engine_create(o);
	if (!e)
		return -1;
	CHECK_OK(gc_ring_engine_destroy(e));
	return 0;
}

static struct sockaddr_storage dccp_at; /* a free 127.0.0.1 port */

static int make_listener(const void *o)
{
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&dccp_at, sa_len(AF_INET), o);
	if (!l)
		return -1;
	gc_dccp_listener_destroy(l);
	return 0;
}

/* gc_dccp_connect() is only ever refused here: nobody listens. */
static int refuse_connect(const void *o)
{
	struct gc_dccp *c = gc_dccp_connect((struct sockaddr *)&dccp_at, sa_len(AF_INET), o);
	if (!c)
		return -1;
	gc_dccp_close(c, 0);
	check_fail(__FILE__, __LINE__, "gc_dccp_connect to nobody succeeded");
}

static int make_ltp(const void *o)
{
	struct gc_ltp *l = gc_ltp_create(o);
	if (!l)
		return -1;
	gc_ltp_destroy(l);
	return 0;
}

static uint8_t pkt[256];

static int build_dmcast(const void *d)
{
	memset(pkt, 0xee, sizeof(pkt));
	ssize_t n = gc_lms_dmcast_build(pkt, sizeof(pkt), d, "repair", 6);
	if (n < 0) {
		for (size_t i = 0; i < sizeof(pkt); i++)
			if (pkt[i] != 0xee)
				check_fail(__FILE__, __LINE__, "a refused dmcast wrote pkt[%zu]", i);
		return -1;
	}
	CHECK_EQ(n, GC_LMS_DMCAST_HDRLEN + 6);
	return 0;
}

static int raw_fd = -1; /* gc_lms_raw_socket(), or -1 without CAP_NET_RAW */

/* gc_lms_dmcast(): with a raw socket the dmcast goes to 127.0.0.1, and a
 * refused one is not counted as sent; without, a struct that was taken gets
 * as far as the socket (EBADF). */
static int send_dmcast(const void *d)
{
	struct gc_lms_stats s0 = GC_LMS_STATS_INIT(), s1 = GC_LMS_STATS_INIT();
	CHECK_OK(gc_lms_stats(&s0));
	ssize_t n = gc_lms_dmcast(raw_fd, d, "repair", 6, 0);
	int e = errno;
	CHECK_OK(gc_lms_stats(&s1));
	if (n >= 0) {
		CHECK_EQ(n, 6);
		CHECK_EQ(s1.dmcasts_sent, s0.dmcasts_sent + 1);
		return 0;
	}
	CHECK_EQ(s1.dmcasts_sent, s0.dmcasts_sent);
	if (raw_fd < 0 && e == EBADF)
		return 0;
	errno = e;
	return -1;
}

/* ---- structs the library fills ------------------------------------------ */

/* Fill the struct at st: 0, or -1 with errno. */
typedef int (*fill_fn)(void *st);

/*
 * size: sizeof here; v1: the 1.0 size; stable: the counters do not move
 * between two calls, so the larger struct's known part must equal a
 * plain call's.
 */
static void out_struct(const char *name, size_t size, size_t v1, fill_fn get, int stable)
{
	static unsigned char plain[1024];
	CHECK(size + EXTRA <= sizeof(u.b) && v1 <= size);

	memset(plain, 0, sizeof(plain));
	memcpy(plain, &size, sizeof(size));
	if (get(plain) != 0)
		check_fail(__FILE__, __LINE__, "%s: %s", name, gc_errmsg());
	CHECK(memcmp(plain, &size, sizeof(size)) == 0);

	/* (a) garbage past the known part, (b) zero there */
	for (int garbage = 1; garbage >= 0; garbage--) {
		memset(u.b, garbage ? 0xa5 : 0, sizeof(u.b));
		set_sz(size + EXTRA);
		if (get(u.b) != 0)
			check_fail(__FILE__, __LINE__, "%s: sz %zu: %s", name, size + EXTRA,
				   gc_errmsg());
		CHECK_EQ(get_sz(), size + EXTRA);
		for (size_t i = v1; i < size + EXTRA; i++)
			if (u.b[i])
				check_fail(__FILE__, __LINE__, "%s: byte %zu past the known %zu is 0x%x",
					   name, i, v1, u.b[i]);
		if (stable && memcmp(u.b + sizeof(size_t), plain + sizeof(size_t), v1 - sizeof(size_t)))
			check_fail(__FILE__, __LINE__, "%s: the larger struct's counters differ", name);
		/* nothing written past sz */
		for (size_t i = size + EXTRA; i < sizeof(u.b); i++)
			CHECK_EQ(u.b[i], garbage ? 0xa5 : 0);
	}
	/* (c) below the 1.0 size: nothing written */
	size_t below[] = { 0, v1 - 1 };
	for (size_t i = 0; i < sizeof(below) / sizeof(below[0]); i++) {
		memset(u.b, 0x5a, sizeof(u.b));
		set_sz(below[i]);
		errno = 0;
		if (get(u.b) != -1 || errno != EINVAL)
			check_fail(__FILE__, __LINE__, "%s: sz %zu: errno %d, want EINVAL", name,
				   below[i], errno);
		msg_has(name, "st->sz", "INIT");
		CHECK_EQ(get_sz(), below[i]);
		for (size_t j = sizeof(size_t); j < sizeof(u.b); j++)
			CHECK_EQ(u.b[j], 0x5a);
	}
	/* (d) exactly this header's size */
	memset(u.b, 0xa5, sizeof(u.b));
	set_sz(size);
	if (get(u.b) != 0)
		check_fail(__FILE__, __LINE__, "%s: sz %zu: %s", name, size, gc_errmsg());
	if (stable && memcmp(u.b + sizeof(size_t), plain + sizeof(size_t), v1 - sizeof(size_t)))
		check_fail(__FILE__, __LINE__, "%s: counters differ", name);
}

static int stats_sd = -1;
static int fill_stats(void *st)
{
	return gc_stats(stats_sd, st);
}

static struct gc_ring *ring;
static int fill_status(void *st)
{
	return gc_ring_status(ring, st);
}

static struct gc_ring_engine *engine;
static int fill_engine_stats(void *st)
{
	return gc_ring_engine_stats(engine, st);
}

static struct gc_dccp *dccp;
static int fill_dccp_stats(void *st)
{
	return gc_dccp_stats(dccp, st);
}

static int fill_lms_stats(void *st)
{
	return gc_lms_stats(st);
}

static struct gc_ltp *ltp;
static int fill_ltp_stats(void *st)
{
	return gc_ltp_stats(ltp, st);
}

static void *dccp_connect_thread(void *arg)
{
	struct gc_dccp_opts o = GC_DCCP_OPTS_INIT(.encap = GC_DCCP_UDP, .ring_slots = 64);
	(void)arg;
	return gc_dccp_connect((struct sockaddr *)&dccp_at, sa_len(AF_INET), &o);
}

static struct gc_ltp_opts ltp_receiver(void)
{
	struct gc_ltp_opts c =
		GC_LTP_OPTS_INIT(.flags = GC_LTP_RECEIVER, .ifindex = if_nametoindex("lo"));
	inet_pton(AF_INET, "239.192.77.1", &c.group);
	inet_pton(AF_INET, "127.0.0.1", &c.source);
	inet_pton(AF_INET, "127.0.0.1", &c.ifaddr);
	/* a free port */
	int probe = udp_socket(AF_INET);
	struct sockaddr_storage at = sa_make(AF_INET, "127.0.0.1", 0);
	CHECK_OK(bind(probe, (struct sockaddr *)&at, sa_len(AF_INET)));
	socklen_t sl = sizeof(at);
	CHECK_OK(getsockname(probe, (struct sockaddr *)&at, &sl));
	c.port = (uint16_t)sa_port(&at);
	close(probe);
	return c;
}

int main(void)
{
	/* a free loopback port for DCCP-UDP */
	int probe = udp_socket(AF_INET);
	dccp_at = sa_make(AF_INET, "127.0.0.1", 0);
	CHECK_OK(bind(probe, (struct sockaddr *)&dccp_at, sa_len(AF_INET)));
	socklen_t sl = sizeof(dccp_at);
	CHECK_OK(getsockname(probe, (struct sockaddr *)&dccp_at, &sl));
	close(probe);

	/* ---- in ---- */
	struct gc_ring_engine_opts eo = GC_RING_ENGINE_OPTS_INIT(.batch = 16, .quiet = 1);
	in_struct("gc_ring_engine_opts", &eo, sizeof(eo),
		  OFFSETOFEND(struct gc_ring_engine_opts, listen_fd), "opts", make_engine);

	struct gc_dccp_opts dco = GC_DCCP_OPTS_INIT(.encap = GC_DCCP_UDP, .ring_slots = 64);
	in_struct("gc_dccp_opts (listen)", &dco, sizeof(dco),
		  OFFSETOFEND(struct gc_dccp_opts, timeout_ms), "opts", make_listener);
	/* connect: only refusals (nobody listens); a good one would time out */
	load(&dco, OFFSETOFEND(struct gc_dccp_opts, timeout_ms), sizeof(dco) + EXTRA);
	u.b[sizeof(dco) + 3] = 9;
	int fds = open_fds();
	errno = 0;
	CHECK(refuse_connect(u.b) == -1 && errno == E2BIG);
	msg_has("gc_dccp_connect", "gc_dccp_connect", "opts->sz");
	set_sz(OFFSETOFEND(struct gc_dccp_opts, timeout_ms) - 1);
	errno = 0;
	CHECK(refuse_connect(u.b) == -1 && errno == EINVAL);
	msg_has("gc_dccp_connect", "gc_dccp_connect", "opts->sz");
	CHECK_EQ(open_fds(), fds);

	struct gc_ltp_opts lo = ltp_receiver();
	in_struct("gc_ltp_opts", &lo, sizeof(lo), OFFSETOFEND(struct gc_ltp_opts, report_ms),
		  "opts", make_ltp);

	struct gc_lms_dmcast d = GC_LMS_DMCAST_INIT(.tp = { .tpif = 1 }, .sport = 5000, .dport = 5001);
	inet_pton(AF_INET, "127.0.0.1", &d.tp.tpaddr);
	inet_pton(AF_INET, "127.0.0.1", &d.tp.src);
	inet_pton(AF_INET, "239.192.77.2", &d.tp.group);
	in_struct("gc_lms_dmcast (build)", &d, sizeof(d), OFFSETOFEND(struct gc_lms_dmcast, id),
		  "d", build_dmcast);
	raw_fd = gc_lms_raw_socket();
	if (raw_fd < 0)
		printf("test_opts: no CAP_NET_RAW: gc_lms_dmcast() refusals checked before the socket\n");
	in_struct("gc_lms_dmcast (send)", &d, sizeof(d), OFFSETOFEND(struct gc_lms_dmcast, id), "d",
		  send_dmcast);
	if (raw_fd >= 0)
		close(raw_fd);

	/* ---- out ---- */
	/* gc_stats: a socket whose group got one datagram */
	struct rx *rx = rx_open(AF_INET, 1);
	stats_sd = udp_socket(AF_INET);
	struct sockaddr_storage *m = rx_members(rx, 1);
	CHECK_OK(gc_setgroup(stats_sd, m, 1));
	free(m);
	CHECK_EQ(gc_send(stats_sd, "hello", 5, 0), 5);
	out_struct("gc_stats", sizeof(struct gc_stats), OFFSETOFEND(struct gc_stats, last_errno),
		   fill_stats, 1);
	struct gc_stats gs = GC_STATS_INIT();
	CHECK_OK(gc_stats(stats_sd, &gs));
	CHECK_EQ(gs.datagrams, 1);
	close(stats_sd);
	rx_close(rx, 1);

	/* gc_ring_status: a ring with two records published, no engine */
	struct gc_zone *z = gc_zone_create(8, 2048);
	CHECK(z != NULL);
	ring = gc_ring_create(8, z);
	CHECK(ring != NULL);
	for (int i = 0; i < 2; i++) {
		struct gc_pkt *p = gc_ring_get_pkt(ring);
		CHECK(p != NULL);
		p->len = 1;
	}
	CHECK_OK(gc_ring_publish(ring));
	out_struct("gc_ring_status", sizeof(struct gc_ring_status),
		   OFFSETOFEND(struct gc_ring_status, acks_lost), fill_status, 1);
	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(ring, &rs));
	CHECK_EQ(rs.user_i, 2);
	gc_ring_destroy(ring);
	CHECK_OK(gc_zone_destroy(z));

	/* gc_ring_engine_stats: its counters move (rounds), so only the
	 * layout is compared */
	engine = gc_ring_engine_create(NULL);
	CHECK(engine != NULL);
	out_struct("gc_ring_engine_stats", sizeof(struct gc_ring_engine_stats),
		   OFFSETOFEND(struct gc_ring_engine_stats, limited), fill_engine_stats, 0);
	struct gc_ring_engine_stats es = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(engine, &es));
	CHECK_EQ(es.clients, 1);
	CHECK_OK(gc_ring_engine_destroy(engine));

	/* gc_dccp_stats: a DCCP-UDP connection on loopback */
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&dccp_at, sa_len(AF_INET), &dco);
	CHECK(l != NULL);
	pthread_t th;
	CHECK_OK(pthread_create(&th, NULL, dccp_connect_thread, NULL));
	dccp = gc_dccp_accept(l, 5000);
	void *client;
	CHECK_OK(pthread_join(th, &client));
	CHECK(dccp != NULL && client != NULL);
	out_struct("gc_dccp_stats", sizeof(struct gc_dccp_stats),
		   OFFSETOFEND(struct gc_dccp_stats, invalid), fill_dccp_stats, 0);
	struct gc_dccp_stats ds = GC_DCCP_STATS_INIT();
	CHECK_OK(gc_dccp_stats(dccp, &ds));
	CHECK_EQ(ds.state, GC_DCCP_OPEN);
	CHECK_EQ(ds.ccid, 2);
	gc_dccp_close(client, 1000);
	gc_dccp_close(dccp, 1000);
	gc_dccp_listener_destroy(l);

	/* gc_lms_stats: process-wide (the dmcasts above counted) */
	out_struct("gc_lms_stats", sizeof(struct gc_lms_stats),
		   OFFSETOFEND(struct gc_lms_stats, bad_options), fill_lms_stats, 1);

	/* gc_ltp_stats: a receiver that has seen nothing */
	ltp = gc_ltp_create(&lo);
	CHECK(ltp != NULL);
	out_struct("gc_ltp_stats", sizeof(struct gc_ltp_stats),
		   OFFSETOFEND(struct gc_ltp_stats, reports_sent), fill_ltp_stats, 1);
	gc_ltp_destroy(ltp);

	return check_done("opts");
}
