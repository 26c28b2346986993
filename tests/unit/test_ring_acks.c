/* SPDX-License-Identifier: MIT */
/*
 * Acknowledgements and the congestion-control hook (lib/ring/cc.h).  A test
 * controller acknowledges some packets at once (kern_acked must show on the
 * slot), some only after the ring wrapped around (the slot holds a newer
 * packet, which must not look acknowledged, but the user_seq log must have
 * it), and some never.  The log loses the newest entries when the
 * application does not read it.  The budget is obeyed, a budget of 0 waits
 * for its time or for gc_flow_kick().
 */
#include "ring_util.h"

enum { N = 16, TOTAL = 300, LATE = 40 };

/* ---- a controller that acknowledges by user_seq % 3 ---- */

struct tcc {
	struct gc_flow *c;
	struct gc_sent late[TOTAL];
	unsigned nlate, late_i;
	uint32_t budget;     /* packets per round, 0 = none */
	uint64_t wait_until; /* budget 0 until then */
	unsigned max_batch;  /* largest batch seen by sent() */
	unsigned calls;
	unsigned ack_failures; /* gc_flow_ack() refused: the ring was stopped */
};
static struct tcc the_cc;

static void *tcc_init(void *arg, struct gc_flow *c)
{
	(void)arg;
	the_cc.c = c;
	return &the_cc;
}

static void tcc_release(void *cc)
{
	((struct tcc *)cc)->c = NULL;
}

static uint32_t tcc_budget(void *cc, uint64_t now, uint64_t *wake)
{
	struct tcc *t = cc;

	t->calls++;
	if (t->wait_until && now < t->wait_until) {
		*wake = t->wait_until;
		return 0;
	}
	return t->budget;
}

static void tcc_sent(void *cc, const struct gc_sent *p, unsigned n, uint64_t now)
{
	struct tcc *t = cc;

	(void)now;
	if (n > t->max_batch)
		t->max_batch = n;
	for (unsigned i = 0; i < n; i++) {
		switch (p[i].user_seq % 3) {
		case 0: /* at once */
			if (gc_flow_ack(t->c, &p[i]) < 0)
				t->ack_failures++;
			break;
		case 2: /* after the ring wrapped */ t->late[t->nlate++] = p[i]; break;
		}
		while (t->late_i < t->nlate && t->late[t->late_i].user_seq + LATE <= p[i].user_seq)
			if (gc_flow_ack(t->c, &t->late[t->late_i++]) < 0)
				t->ack_failures++;
	}
}

static const struct gc_cc_ops tcc_ops = {
	.init = tcc_init, .release = tcc_release, .budget = tcc_budget, .sent = tcc_sent
};

static unsigned drop_xmit(void *arg, struct gc_flow *c, const struct gc_sent *p, unsigned n,
			  const unsigned char *zone)
{
	(void)arg, (void)c, (void)p, (void)zone;
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void acks(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(N, z);
	struct gc_ring_engine_hooks h = { .cc = &tcc_ops, .xmit = drop_xmit };
	struct gc_ring_engine_opts quiet = GC_RING_ENGINE_OPTS_INIT(.quiet = 1);
	struct gc_ring_engine *e;
	uint64_t log[2 * TOTAL];
	size_t nlog = 0;

	memset(&the_cc, 0, sizeof(the_cc));
	the_cc.budget = UINT32_MAX;
	CHECK_OK(gc_err(gc_ring_engine_create_hooks(&quiet, &h, &e)));
	CHECK(z && r && e);
	CHECK_OK(gc_ring_attach(r, e, sd));
	for (uint64_t seq = 0; seq < TOTAL; seq++) {
		put_pkt(r, 0, 10, seq);
		CHECK(gc_ring_submit(r) >= 0);
		CHECK_OK(gc_ring_wait(r, N - 1, 5000)); /* one at a time: sent() sees each */
		unsigned pos = (unsigned)(seq % N);
		/* acknowledged at once: the slot shows it until it is reused */
		CHECK_EQ(gc_ring_acked(r, pos), seq % 3 == 0);
		ssize_t k = gc_ring_acks(r, log + nlog, 2 * TOTAL - nlog);
		CHECK(k >= 0);
		nlog += (size_t)k;
	}
	/* Late acknowledgements arrived after their slots were reused: no slot
	 * of the ring shows kern_acked for a packet that was not acknowledged
	 * at once. */
	for (unsigned pos = 0; pos < N; pos++) {
		uint64_t seq = gc_ring_pkt(r, pos)->user_seq;
		CHECK_EQ(gc_ring_acked(r, pos), seq % 3 == 0);
	}
	/* the log: every seq % 3 == 0, and every seq % 3 == 2 acknowledged late */
	uint64_t want[TOTAL];
	size_t nwant = 0;
	for (uint64_t seq = 0; seq < TOTAL; seq++)
		if (seq % 3 == 0 || (seq % 3 == 2 && seq + LATE <= TOTAL - 1))
			want[nwant++] = seq;
	CHECK_EQ(nlog, nwant);
	qsort(log, nlog, sizeof(log[0]), cmp_u64);
	for (size_t i = 0; i < nwant; i++)
		CHECK_EQ(log[i], want[i]);
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &st));
	CHECK_EQ(st.acks, nwant);
	CHECK_EQ(st.acks_lost, 0);

	/* Not reading the log: it keeps the oldest N, counts the rest lost.
	 * (The engine is parked: the late acknowledgements still queued are
	 * forgotten so that only the 30 below arrive.) */
	the_cc.late_i = the_cc.nlate;
	uint64_t before = st.acks;
	for (uint64_t seq = 3000; seq < 3000 + 3 * 30; seq += 3) {
		put_pkt(r, 0, 10, seq);
		CHECK(gc_ring_submit(r) >= 0);
		CHECK_OK(gc_ring_wait(r, N - 1, 5000));
	}
	CHECK_OK(gc_ring_status(r, &st));
	CHECK_EQ(st.acks - before, N);
	CHECK_EQ(st.acks_lost, 30 - N);
	uint64_t got[64];
	CHECK_EQ(gc_ring_acks(r, got, 64), N);
	for (unsigned i = 0; i < N; i++)
		CHECK_EQ(got[i], 3000 + 3 * i);
	CHECK_EQ(gc_ring_acks(r, got, 64), 0);
	CHECK_EQ(the_cc.ack_failures, 0);
	CHECK_ERR(gc_ring_acks(r, NULL, 4), EFAULT);
	CHECK_EQ(gc_ring_acks(r, NULL, 0), 0);
	CHECK_ERR(gc_ring_acked(r, N), EINVAL);

	/* A read index the log never had: the acknowledgement stops the ring
	 * (from inside the controller's sent()), and only the ring. */
	atomic_store(&r->sh->ack_tail, (uint64_t)1 << 40);
	put_pkt(r, 0, 10, 3 * 5000);
	CHECK(gc_ring_submit(r) >= 0);
	for (int i = 0; i < 2000 && !atomic_load(&r->sh->error); i++)
		usleep(1000);
	CHECK_OK(gc_ring_status(r, &st));
	CHECK_EQ(st.error, GC_RING_BAD_ACK_TAIL);
	CHECK_EQ(the_cc.ack_failures, 1);
	CHECK_ERR(gc_ring_notify(r), EPIPE);
	struct gc_ring_engine_stats es = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &es));
	CHECK_EQ(es.violations, 1);

	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK(the_cc.c == NULL); /* released */
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

/* The budget: at most `budget` packets per round; 0 waits for its time. */
static void budget(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(64, z);
	struct gc_ring_engine_hooks h = { .cc = &tcc_ops }; /* UDP: real packets */
	struct gc_ring_engine *e;

	memset(&the_cc, 0, sizeof(the_cc));
	the_cc.budget = 3;
	the_cc.wait_until = gc_now_ns() + 150 * 1000000ull;
	CHECK_OK(gc_err(gc_ring_engine_create_hooks(NULL, &h, &e)));
	CHECK(z && r && e);
	memcpy(gc_zone_buf(z, 0), "cc", 2);
	CHECK_OK(gc_ring_attach(r, e, sd));
	for (int i = 0; i < 20; i++)
		put_pkt(r, 0, 2, 1000 + (uint64_t)i); /* % 3 == 1 or 2: kept or late */
	CHECK(gc_ring_submit(r) >= 0);
	/* nothing until the controller's time has come */
	RX_NONE(&rx[0]);
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &st));
	CHECK_EQ(st.sent, 0);
	for (int i = 0; i < 20; i++)
		RX_EXPECT(&rx[0], "cc", 2);
	CHECK(gc_now_ns() >= the_cc.wait_until);
	CHECK(the_cc.max_batch <= 3);
	CHECK_OK(gc_ring_wait(r, 63, 5000));
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

int main(void)
{
	acks();
	budget();
	return check_done("ring_acks");
}
