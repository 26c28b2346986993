/* SPDX-License-Identifier: MIT */
/*
 * A daemon's limits per client and on clients.  A client of the listening
 * socket may hold 64 rings by default (EDQUOT beyond), and the engine holds
 * at most max_fds descriptors for it, 2 per ring (EMFILE beyond); at most
 * max_clients clients are served at a time (EUSERS for the next one); and
 * the engine maps at most max_map_bytes of a client's rings and zones, a
 * shared zone counted once (EDQUOT beyond).  Each
 * refusal names the limit, is counted, and changes nothing for the other
 * clients: they keep attaching and sending.
 */
#include "ring_util.h"

#include <sys/stat.h>

enum { DEFAULT_RINGS = 64 };

static char path[108];
static struct rx *rx;
static struct gc_zone *zone;
static int sd;

static struct gc_ring_engine *start(struct gc_ring_engine_opts p)
{
	p.listen = path;
	p.quiet = 1;
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	CHECK(e != NULL);
	return e;
}

static struct gc_ring_engine_stats stats(struct gc_ring_engine *e)
{
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();

	CHECK_OK(gc_ring_engine_stats(e, &st));
	return st;
}

/* Another client attaches a ring and its datagram arrives. */
static void others_served(int line)
{
	static unsigned tag;
	char msg[32];
	struct gc_ring_engine *e = gc_ring_engine_connect(path);
	struct gc_ring *r = gc_ring_create(8, zone);

	if (!e || !r || gc_ring_attach(r, e, sd) < 0)
		check_fail(__FILE__, line, "another client: %s", gc_errmsg());
	int len = snprintf(msg, sizeof(msg), "other %u", tag++);
	memcpy(gc_zone_buf(zone, 1), msg, (size_t)len);
	put_pkt(r, gc_zone_offset(zone, gc_zone_buf(zone, 1)), (uint32_t)len, 0);
	CHECK(gc_ring_submit(r) >= 0);
	if (!rx_match(&rx[0], msg, (size_t)len, RX_TIMEOUT_MS))
		check_fail(__FILE__, line, "another client's datagram did not arrive");
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
}

static void ring_limit(void)
{
	struct gc_ring_engine *eng = start((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT());
	struct gc_ring_engine *c = gc_ring_engine_connect(path);
	struct gc_ring *r[DEFAULT_RINGS + 1];

	CHECK(c != NULL);
	for (int i = 0; i <= DEFAULT_RINGS; i++) {
		r[i] = gc_ring_create(8, zone);
		CHECK(r[i] != NULL);
		if (i < DEFAULT_RINGS)
			CHECK_OK(gc_ring_attach(r[i], c, sd));
	}
	CHECK_ERR(gc_ring_attach(r[DEFAULT_RINGS], c, sd), EDQUOT);
	CHECK(strstr(gc_errmsg(), "64 rings") && strstr(gc_errmsg(), "max_rings"));
	CHECK_ERR(gc_ring_attach(r[DEFAULT_RINGS], c, sd), EDQUOT);
	struct gc_ring_engine_stats st = stats(eng);
	CHECK_EQ(st.limited, 2);
	CHECK_EQ(st.rings, DEFAULT_RINGS);
	others_served(__LINE__);
	/* one ring less, one more may come */
	CHECK_OK(gc_ring_detach(r[0]));
	CHECK_OK(gc_ring_attach(r[DEFAULT_RINGS], c, sd));
	for (int i = 0; i <= DEFAULT_RINGS; i++)
		gc_ring_destroy(r[i]);
	CHECK_OK(gc_ring_engine_destroy(c));
	CHECK_OK(gc_ring_engine_destroy(eng));
}

static void fd_limit(void)
{
	struct gc_ring_engine *eng =
		start((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.max_fds = 7));
	struct gc_ring_engine *c = gc_ring_engine_connect(path);
	struct gc_ring *r[4];

	CHECK(c != NULL);
	for (int i = 0; i < 4; i++) {
		r[i] = gc_ring_create(8, zone);
		CHECK(r[i] != NULL);
		if (i < 3)
			CHECK_OK(gc_ring_attach(r[i], c, sd)); /* 6 descriptors */
	}
	CHECK_ERR(gc_ring_attach(r[3], c, sd), EMFILE);
	CHECK(strstr(gc_errmsg(), "max_fds") != NULL);
	CHECK_EQ(stats(eng).limited, 1);
	others_served(__LINE__);
	/* a limit that was set applies to the process that started the
	 * engine as well (which has none unless it asks) */
	struct gc_ring *own[3];
	for (int i = 0; i < 3; i++) {
		own[i] = gc_ring_create(8, zone);
		CHECK(own[i] != NULL);
		CHECK_OK(gc_ring_attach(own[i], eng, sd));
	}
	struct gc_ring *fourth = gc_ring_create(8, zone);
	CHECK_ERR(gc_ring_attach(fourth, eng, sd), EMFILE);
	gc_ring_destroy(fourth);
	for (int i = 0; i < 3; i++)
		gc_ring_destroy(own[i]);
	for (int i = 0; i < 4; i++)
		gc_ring_destroy(r[i]);
	CHECK_OK(gc_ring_engine_destroy(c));
	CHECK_OK(gc_ring_engine_destroy(eng));
}

static void map_limit(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct gc_ring_engine *eng =
		start((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.max_map_bytes = 12 *
										   (uint64_t)page));
	struct gc_ring_engine *c = gc_ring_engine_connect(path);
	struct gc_zone *big = gc_zone_create(1, 16 * (size_t)page);
	struct gc_ring *r[16];
	int n = 0;

	CHECK(c != NULL && big != NULL);
	/* a zone larger than the limit: refused before anything is mapped */
	r[0] = gc_ring_create(8, big);
	CHECK(r[0] != NULL);
	CHECK_ERR(gc_ring_attach(r[0], c, sd), EDQUOT);
	CHECK(strstr(gc_errmsg(), "max_map_bytes") != NULL);
	CHECK_EQ(stats(eng).limited, 1);
	gc_ring_destroy(r[0]);
	/* rings on one small zone: the zone counts once, each ring's memory
	 * counts, and the limit comes before 16 rings */
	for (n = 0; n < 16; n++) {
		r[n] = gc_ring_create(8, zone);
		CHECK(r[n] != NULL);
		if (gc_ring_attach(r[n], c, sd) < 0) {
			CHECK_EQ(errno, EDQUOT);
			CHECK(strstr(gc_errmsg(), "max_map_bytes") != NULL);
			break;
		}
	}
	CHECK(n >= 2 && n < 16);
	CHECK_EQ(stats(eng).limited, 2);
	others_served(__LINE__);
	/* what a detached ring mapped is given back */
	CHECK_OK(gc_ring_detach(r[0]));
	CHECK_OK(gc_ring_attach(r[n], c, sd));
	for (int i = 0; i <= n; i++)
		gc_ring_destroy(r[i]);
	CHECK_OK(gc_zone_destroy(big));
	CHECK_OK(gc_ring_engine_destroy(c));
	CHECK_OK(gc_ring_engine_destroy(eng));
}

static void client_limit(void)
{
	struct gc_ring_engine *eng =
		start((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.max_clients = 2));
	struct gc_ring_engine *c[3];

	c[0] = gc_ring_engine_connect(path);
	c[1] = gc_ring_engine_connect(path);
	CHECK(c[0] && c[1]);
	c[2] = gc_ring_engine_connect(path);
	CHECK(c[2] == NULL);
	CHECK_EQ(errno, EUSERS);
	CHECK(strstr(gc_errmsg(), "max_clients") != NULL);
	struct gc_ring_engine_stats st = stats(eng);
	CHECK_EQ(st.refused, 1);
	CHECK_EQ(st.clients, 3); /* the two, and the process that started it */
	/* the served ones are served */
	struct gc_ring *r = gc_ring_create(8, zone);
	CHECK_OK(gc_ring_attach(r, c[0], sd));
	gc_ring_destroy(r);
	/* one leaves: the next one comes in (once the engine saw it leave) */
	CHECK_OK(gc_ring_engine_destroy(c[1]));
	c[2] = NULL;
	for (int i = 0; i < 200 && !c[2]; i++) {
		c[2] = gc_ring_engine_connect(path);
		if (!c[2]) {
			CHECK_EQ(errno, EUSERS);
			usleep(10 * 1000);
		}
	}
	CHECK(c[2] != NULL);
	CHECK_OK(gc_ring_engine_destroy(c[0]));
	CHECK_OK(gc_ring_engine_destroy(c[2]));
	CHECK_OK(gc_ring_engine_destroy(eng));
}

int main(void)
{
	fd_limit_max();
	snprintf(path, sizeof(path), "/tmp/gc-ring-limits-%d.sock", (int)getpid());
	rx = rx_open(AF_INET, 1);
	zone = gc_zone_create(2, 4096);
	CHECK(zone != NULL);
	sd = udp_connected(&rx[0]);

	ring_limit();
	fd_limit();
	map_limit();
	client_limit();

	close(sd);
	CHECK_OK(gc_zone_destroy(zone));
	rx_close(rx, 1);
	return check_done("ring_limits");
}
