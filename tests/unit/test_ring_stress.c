/* SPDX-License-Identifier: MIT */
/*
 * Two threads, millions of operations: the application (this thread) claims,
 * publishes, rewinds, replaces, reorders and kills packets at random while
 * the engine thread drains the ring into a recording transport.  The result
 * is checked against a model of the ring order:
 *   - nothing sent twice, and nothing sent that was replaced,
 *   - nothing sent that gc_ring_mark_dead() called certain,
 *   - nothing live lost,
 *   - the order is the ring's order at the moment each packet was taken.
 * Every packet has a unique user_seq (its id); the transport logs ids.
 *
 *   test_ring_stress [OPS [SEED]]   (default 4 million operations; 1.5 million with CI set)
 */
#include "ring_util.h"

enum { N = 64 };

enum st { LIVE, DEAD_SURE, MAYBE }; /* MAYBE: killed after publishing */

struct ent {
	uint64_t id;
	enum st st;
	/* for the report of a failure: how and when it was killed, and where */
	uint8_t how; /* 1 modifiable after a rewind, 2 unpublished, 3 published */
	uint32_t pos;
	uint64_t op;
	uint32_t first, user, kern, umod; /* the rewind's answer and the indexes then */
};

static struct ent *order; /* every claimed slot, in ring order */
static size_t norder, cap_order;
static uint64_t *sent; /* what the engine sent, in order (engine thread) */
static _Atomic size_t nsent;
static size_t cap_sent;

static unsigned log_xmit(void *arg, struct gc_flow *c, const struct gc_sent *p, unsigned n,
			 const unsigned char *zone)
{
	(void)arg, (void)c, (void)zone;
	size_t k = atomic_load_explicit(&nsent, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++) {
		if (k < cap_sent)
			sent[k] = p[i].user_seq;
		k++;
	}
	atomic_store_explicit(&nsent, k, memory_order_release);
	return n;
}

/*
 * The paper's invariant dev_i <= umod_i <= user_i, which the application
 * keeps: a umod_i left behind dev_i (a rewind that lost the race of Figure 6)
 * would publish everything claimed since once user_i came round past it.
 * dev_i is read first: it only moves forward, and never past umod_i.
 */
static void umod_in_ring(struct gc_ring *r, int line)
{
	uint32_t d = atomic_load(&r->sh->dev_i);
	uint32_t um = atomic_load(&r->sh->umod_i);

	if ((um + N - d) % N > (r->user + N - d) % N)
		check_fail(__FILE__, line, "umod_i %u is outside [dev_i %u, user_i %u]", um, d, r->user);
}

static uint64_t rng_state;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static void grow(void)
{
	if (norder == cap_order) {
		cap_order = cap_order ? cap_order * 2 : 1 << 16;
		order = realloc(order, cap_order * sizeof(*order));
		CHECK(order != NULL);
	}
}

int main(int argc, char **argv)
{
	uint64_t ops = argc > 1 ? strtoull(argv[1], NULL, 0) : in_ci() ? 1500000 : 4000000;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(N, z);
	struct gc_ring_engine_hooks h = { .xmit = log_xmit };
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.batch = 8); /* small batches: more races */
	struct gc_ring_engine *e;
	uint64_t next_id = 1, n_claim = 0, n_rewind = 0, n_mod = 0, n_sure = 0, n_maybe = 0,
		 n_submit = 0, n_notify = 0, n_wait = 0;

	printf("ring_stress: %llu operations, seed %llu\n", (unsigned long long)ops,
	       (unsigned long long)seed);
	rng_state = seed * 2654435761u + 1;
	cap_sent = ops + 16;
	sent = malloc(cap_sent * sizeof(*sent));
	CHECK(z && r && sent);
	CHECK_OK(gc_err(gc_ring_engine_create_hooks(&p, &h, &e)));
	CHECK_OK(gc_ring_attach(r, e, sd));

	for (uint64_t op = 0; op < ops; op++) {
		uint32_t x = rnd() % 100;
		if (x < 55) { /* claim and fill */
			struct gc_pkt *pk = gc_ring_get_pkt(r);
			if (!pk) {
				CHECK_EQ(errno, EAGAIN);
				if (gc_ring_submit(r) > 0)
					n_notify++;
				/* the room comes within microseconds: a wait that
				 * lasts is a lost wake-up (gc_ring_wait() would
				 * return 0 once its timeout found the room) */
				uint64_t t0 = gc_now_ns();
				unsigned want = 1 + rnd() % (rnd() % 4 ? 8 : N / 2);
				if (gc_ring_wait(r, want, 5000) < 0)
					check_fail(__FILE__, __LINE__, "wait: %s", gc_errmsg());
				if (gc_now_ns() - t0 > 1000000000ull)
					check_fail(__FILE__, __LINE__,
						   "lost wake-up: waiting for %u slots took %llu ms", want,
						   (unsigned long long)(gc_now_ns() - t0) / 1000000);
				n_wait++;
				continue;
			}
			pk->off = rnd() % 4096;
			pk->len = rnd() % (uint32_t)(4096 - pk->off + 1);
			pk->user_seq = next_id;
			grow();
			order[norder++] = (struct ent){ .id = next_id++, .st = LIVE };
			n_claim++;
		} else if (x < 70) { /* publish (notify if asked) */
			int s = gc_ring_submit(r);
			CHECK(s >= 0);
			n_notify += (uint64_t)s;
			n_submit++;
		} else if (x < 85) { /* rewind, then change what is modifiable */
			unsigned first;
			unsigned to = rnd() % 4 ? GC_RING_OLDEST : rnd() % N;
			int cnt = gc_ring_rewind(r, to, &first);
			if (cnt < 0) {
				CHECK_EQ(errno, EINVAL); /* to was above umod_i */
				continue;
			}
			CHECK((size_t)cnt <= norder && cnt < N);
			n_rewind++;
			umod_in_ring(r, __LINE__);
			/* the last cnt claimed entries are positions first.. */
			struct ent *m = order + norder - cnt;
			for (int k = 0, nk = cnt ? (int)(rnd() % 4) : 0; k < nk; k++) {
				unsigned i = rnd() % (unsigned)cnt, j = rnd() % (unsigned)cnt;
				unsigned pi = (first + i) % N, pj = (first + j) % N;
				CHECK_EQ(gc_ring_pkt(r, pi)->user_seq, m[i].id);
				switch (rnd() % 3) {
				case 0: /* kill: certain */
					CHECK_EQ(gc_ring_mark_dead(r, pi), 1);
					m[i].st = DEAD_SURE;
					m[i].how = 1;
					m[i].pos = pi;
					m[i].op = op;
					m[i].first = first;
					m[i].user = r->user;
					m[i].kern = atomic_load(&r->sh->kern_i);
					m[i].umod = atomic_load(&r->sh->umod_i);
					n_sure++;
					break;
				case 1: /* replace: the old id must never go out */
					gc_ring_pkt(r, pi)->user_seq = next_id;
					gc_ring_pkt(r, pi)->len = rnd() %
						(uint32_t)(4096 - gc_ring_pkt(r, pi)->off + 1);
					m[i].id = next_id++;
					break;
				default: { /* reorder */
					CHECK_OK(gc_ring_swap(r, pi, pj));
					struct ent t = m[i];
					m[i] = m[j];
					m[j] = t;
				}
				}
				n_mod++;
			}
		} else if (x < 95) { /* kill a published (maybe sent) packet */
			if (!norder)
				continue;
			size_t back = 1 + rnd() % (norder < N - 1 ? norder : N - 1);
			unsigned pos = (unsigned)((r->user + N - back) % N);
			struct ent *en = &order[norder - back];
			CHECK_EQ(gc_ring_pkt(r, pos)->user_seq, en->id);
			int sure = gc_ring_mark_dead(r, pos);
			CHECK(sure >= 0);
			if (en->st == LIVE) {
				en->st = sure ? DEAD_SURE : MAYBE;
				en->how = sure ? 2 : 3;
				en->pos = pos;
				en->op = op;
				en->first = r->mod_from;
				en->user = r->user;
				en->kern = atomic_load(&r->sh->kern_i);
				en->umod = atomic_load(&r->sh->umod_i);
			}
			if (sure)
				n_sure++;
			else
				n_maybe++;
		} else { /* look around */
			uint64_t acks[4];
			struct gc_ring_status st = GC_RING_STATUS_INIT();
			CHECK(gc_ring_acks(r, acks, 4) == 0);
			CHECK_OK(gc_ring_status(r, &st));
			CHECK_EQ(st.error, GC_RING_OK);
			(void)gc_ring_space(r);
			umod_in_ring(r, __LINE__);
		}
	}
	/* drain */
	if (gc_ring_submit(r) > 0)
		n_notify++;
	uint64_t t0 = gc_now_ns();
	if (gc_ring_wait(r, N - 1, 10000) < 0 || gc_now_ns() - t0 > 1000000000ull)
		check_fail(__FILE__, __LINE__, "final drain: %s (%llu ms)", gc_errmsg(),
			   (unsigned long long)(gc_now_ns() - t0) / 1000000);
	CHECK_OK(gc_ring_engine_destroy(e));

	/* the check */
	size_t ns = atomic_load_explicit(&nsent, memory_order_acquire), j = 0, live = 0, maybe_sent = 0;
	CHECK(ns <= cap_sent);
	for (size_t i = 0; i < norder; i++) {
		struct ent *en = &order[i];
		switch (en->st) {
		case LIVE:
			live++;
			if (j >= ns || sent[j] != en->id)
				check_fail(__FILE__, __LINE__,
					   "live packet %llu (entry %zu) not sent in order: sent[%zu] = "
					   "%llu",
					   (unsigned long long)en->id, i, j,
					   j < ns ? (unsigned long long)sent[j] : 0ull);
			j++;
			break;
		case MAYBE:
			if (j < ns && sent[j] == en->id) {
				j++;
				maybe_sent++;
			}
			break;
		case DEAD_SURE:
			if (j < ns && sent[j] == en->id)
				check_fail(__FILE__, __LINE__,
					   "dead packet %llu (entry %zu) was sent: killed %s at "
					   "operation %llu, position %u; then first %u user_i %u "
					   "kern_i %u umod_i %u",
					   (unsigned long long)en->id, i,
					   en->how == 1 ? "after a rewind" : "unpublished",
					   (unsigned long long)en->op, en->pos, en->first, en->user,
					   en->kern, en->umod);
			break;
		}
	}
	if (j != ns)
		check_fail(__FILE__, __LINE__, "%zu packets sent beyond the model (first %llu)",
			   ns - j, (unsigned long long)sent[j]);
	printf("ring_stress: %llu claims, %llu submits (%llu notifies), %llu waits, %llu rewinds, "
	       "%llu changes, %llu certain kills, %llu late kills (%zu of them sent anyway); "
	       "%zu sent, %zu live\n",
	       (unsigned long long)n_claim, (unsigned long long)n_submit, (unsigned long long)n_notify,
	       (unsigned long long)n_wait, (unsigned long long)n_rewind, (unsigned long long)n_mod,
	       (unsigned long long)n_sure, (unsigned long long)n_maybe, maybe_sent, ns, live);
	CHECK(ops < 1000000 || (n_rewind > 1000 && n_notify > 10 && n_wait > 100));
	gc_ring_destroy(r);
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
	free(order);
	free(sent);
	return check_done("ring_stress");
}
