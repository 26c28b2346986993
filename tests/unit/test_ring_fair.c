/* SPDX-License-Identifier: MIT */
/*
 * Fair share per client: client A has one ring, client B sixteen, all full
 * and published, both connected to the same daemon.  The engine serves
 * clients in turn, then their rings, so A gets about half of what is sent,
 * not 1/17 as with a turn per ring.
 *
 * Bounded and deterministic: a recording transport (cc.h) holds everything
 * back until every ring is attached and full, then counts the first TOTAL
 * packets the engine hands it, per client, and refuses the rest.  TOTAL is
 * well below what A's ring holds at a fair share, so both clients saturate
 * throughout.  No clock is involved.  Twice: with B's rings full, and with
 * less than a batch in each (the engine lets a ring take a whole batch even
 * past its client's share; the client's next turns pay it back).
 */
#include "ring_util.h"

enum { N = 512, B_RINGS = 16, TOTAL = 512 };

static _Atomic int open_gate;
static _Atomic uint32_t a_id;
static _Atomic unsigned counted, from_a;

static unsigned xmit(void *arg, struct gc_flow *c, const struct gc_sent *p, unsigned n,
		     const unsigned char *zone)
{
	(void)arg;
	(void)p;
	(void)zone;
	if (!atomic_load(&open_gate))
		return 0; /* kept pending, offered again next round */
	unsigned have = atomic_load(&counted);
	if (have >= TOTAL)
		return 0;
	if (n > TOTAL - have)
		n = TOTAL - have;
	if (gc_flow_id(c) == atomic_load(&a_id))
		atomic_fetch_add(&from_a, n);
	atomic_store(&counted, have + n); /* only the engine thread writes it */
	return n;
}

static void fill_ring(struct gc_ring *r, unsigned npkts)
{
	for (unsigned i = 0; i < npkts; i++)
		put_pkt(r, 0, 1, i);
	gc_ring_publish(r);
}

/* B's rings hold b_fill packets each (A's is full). */
static void run(unsigned b_fill)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/gc-ring-fair-%d.sock", (int)getpid());
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = path, .quiet = 1);
	struct gc_ring_engine_hooks h = { .xmit = xmit };
	struct gc_ring_engine *eng = NULL;
	CHECK_OK(gc_err(gc_ring_engine_create_hooks(&p, &h, &eng)));
	struct gc_ring_engine *ca = gc_ring_engine_connect(path);
	struct gc_ring_engine *cb = gc_ring_engine_connect(path);
	struct rx *rx = rx_open(AF_INET, 1);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *a, *b[B_RINGS];
	int sd = udp_connected(&rx[0]);

	CHECK(eng && ca && cb && z);
	a = gc_ring_create(N, z);
	CHECK(a != NULL);
	atomic_store(&open_gate, 0);
	atomic_store(&counted, 0);
	atomic_store(&from_a, 0);
	fill_ring(a, N - 1);
	CHECK_OK(gc_ring_attach(a, ca, sd));
	atomic_store(&a_id, a->ring_id);
	for (int i = 0; i < B_RINGS; i++) {
		b[i] = gc_ring_create(N, z);
		CHECK(b[i] != NULL);
		fill_ring(b[i], b_fill);
		CHECK_OK(gc_ring_attach(b[i], cb, sd));
	}
	/* every ring is served (active) now: let the packets go */
	atomic_store(&open_gate, 1);
	for (int i = 0; i < 10000 && atomic_load(&counted) < TOTAL; i++)
		usleep(1000);
	CHECK_EQ(atomic_load(&counted), TOTAL);
	unsigned sa = atomic_load(&from_a);
	printf("ring_fair: of the first %d packets, client A (1 ring) sent %u, client B (%d rings "
	       "of %u) %u\n",
	       TOTAL, sa, B_RINGS, b_fill, TOTAL - sa);
	/* a fair share is half; a turn per ring would give A 1/17 (6 %) */
	CHECK(sa * 100 >= 35u * TOTAL);
	CHECK(sa * 100 <= 65u * TOTAL);

	gc_ring_destroy(a);
	for (int i = 0; i < B_RINGS; i++)
		gc_ring_destroy(b[i]);
	CHECK_OK(gc_ring_engine_destroy(ca));
	CHECK_OK(gc_ring_engine_destroy(cb));
	CHECK_OK(gc_ring_engine_destroy(eng));
	close(sd);
	CHECK_OK(gc_zone_destroy(z));
	rx_close(rx, 1);
}

int main(void)
{
	/* every ring full */
	run(N - 1);
	/* B's rings hold less than a batch each (B has 640 in all, A more
	 * than it can send here): a turn takes B over its share, which the
	 * next turns pay back */
	run(40);
	return check_done("ring_fair");
}
