/* SPDX-License-Identifier: MIT */
/*
 * flow.c - one flow: a ring the engine serves, the socket it sends on and
 * its transport (a DCCP connection, lib/dccp, rides on one), and the one
 * drain (gc_flow_drain()) that both the engine thread (server.c) and an
 * application thread in gc_ring_flush() (handle.c) run.
 *
 * A drain sends what an earlier one left pending, else takes a batch from
 * the ring (as much as congestion control allows) and hands it to the
 * transport, then moves dev_i past what went.  It says what the connection
 * waits for next (enum gc_drain) and leaves the scheduling, which lists the
 * connection is on, to its caller.
 *
 * gc_ring_flush() runs the drain on the application's own thread, as the
 * paper's dccp_notify() system call did, instead of waking the engine thread
 * and waiting for it to be scheduled.  Only for rings whose engine runs in
 * this process (the connection's memory is ours) and that the engine has
 * parked (kern_notify set: the engine thread is not looking at the ring and
 * will not until the ring's eventfd is written).  The connection's xlock makes
 * the two threads take turns: the engine takes it around each drain and
 * around the events that move a connection out of PARKED, so a connection
 * seen PARKED under the lock stays PARKED until we let go, and nothing but us
 * touches its kring.  The ring stays parked afterwards.  What a flush cannot
 * finish goes to the engine thread: packets the socket refused for now (left
 * pending, which the engine sends first) and every ring of an engine with a
 * congestion controller or another transport (cc.h), whose state belongs to
 * the engine thread.
 *
 * Lifetime.  A flush finds its connection by ring id in the engine's
 * flow table (never by a pointer it was handed), which gives it a
 * reference: the memory stays until the last reference goes.  The engine
 * tears a connection down under its xlock and marks it gone, so a flush that
 * holds the lock and sees it not gone may use everything it points at.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ring/srv.h"

int gc_flow_init(struct gc_flow *c, const struct gc_ring_engine_hooks *h, uint32_t batch)
{
	c->h = h;
	c->batch = batch;
	c->pend = calloc(batch, sizeof(*c->pend));
	if (!c->pend)
		return -ENOMEM;
	atomic_init(&c->refs, 1);
	pthread_mutex_init(&c->xlock, NULL);
	return 0;
}

/* Send p[0..n) on c's transport, counting into st; returns how many went
 * (sent, or refused by the network and counted). */
static unsigned xmit(struct gc_flow *c, const struct gc_sent *p, unsigned n, uint64_t now,
		     struct gc_ring_engine_stats *st)
{
	unsigned done;

	if (!n)
		return 0;
	if (c->h->xmit) {
		done = c->h->xmit(c->h->xmit_arg, c, p, n, c->zone->map);
		if (done > n)
			done = n;
		for (unsigned i = 0; i < done; i++)
			c->k.bytes += p[i].len;
		c->k.sent += done;
		st->packets += done;
	} else {
		struct gc_udp_out o = { 0 };
		done = gc_udp_send(&c->udp, p, n, c->zone->map, &o);
		c->k.sent += o.sent;
		c->k.bytes += o.bytes;
		gc_kring_errors(&c->k, o.errors, o.last_errno);
		st->packets += o.sent;
		st->bytes += o.bytes;
		st->syscalls += o.syscalls;
		st->gso += o.gso;
	}
	if (done && c->h->cc && c->h->cc->sent)
		c->h->cc->sent(c->cc, p, done, now);
	return done;
}

/* Some of what was taken did not go: keep it (at the front of pend) and
 * move dev_i up to its first record. */
static void keep_pending(struct gc_flow *c, const struct gc_sent *p, unsigned n, uint32_t end)
{
	if (p != c->pend)
		memmove(c->pend, p, n * sizeof(*p));
	c->pend_n = n;
	c->pend_end = end;
	if (gc_kring_done(&c->k, c->pend[0].pos))
		gc_kring_wake(&c->k);
}

/* p[0..n) was taken up to ring position end: send it. */
static enum gc_drain send_taken(struct gc_flow *c, struct gc_sent *p, unsigned n, uint32_t end,
				uint64_t now, struct gc_ring_engine_stats *st, unsigned *done)
{
	*done = xmit(c, p, n, now, st);
	if (c->k.error) /* the controller's sent() broke a rule (gc_flow_ack()) */
		return DRAIN_ERROR;
	if (*done < n) {
		keep_pending(c, p + *done, n - *done, end);
		return DRAIN_BLOCKED;
	}
	if (gc_kring_done(&c->k, end))
		gc_kring_wake(&c->k);
	return DRAIN_MORE;
}

/* gc_flow_drain(); *xmitted: what the transport consumed (sent, or
 * refused by the network), without the dead records skipped. */
static enum gc_drain drain(struct gc_flow *c, uint64_t now, struct gc_ring_engine_stats *st,
			   unsigned *consumed, unsigned *xmitted)
{
	*consumed = *xmitted = 0;
	if (c->pend_n) {
		/* taken already: the ring's turn is spent sending them */
		unsigned n = c->pend_n;
		c->pend_n = 0;
		enum gc_drain d = send_taken(c, c->pend, n, c->pend_end, now, st, xmitted);
		*consumed = *xmitted;
		return d;
	}

	uint32_t budget = c->batch;
	if (c->h->cc && c->h->cc->budget) {
		uint64_t wake = 0;
		uint32_t b = c->h->cc->budget(c->cc, now, &wake);
		if (c->k.error)
			return DRAIN_ERROR;
		if (b == 0) {
			c->cc_wake = wake;
			return DRAIN_CCWAIT;
		}
		if (b < budget)
			budget = b;
	}

	uint32_t nout, ntaken;
	if (gc_kring_take(&c->k, budget, c->pend, &nout, &ntaken) < 0)
		return DRAIN_ERROR;
	if (ntaken == 0)
		return DRAIN_EMPTY;
	enum gc_drain d = send_taken(c, c->pend, nout, c->k.kern, now, st, xmitted);
	/* dead records count: skipping them is work the ring asked for */
	*consumed = d == DRAIN_MORE ? ntaken : *xmitted;
	return d;
}

enum gc_drain gc_flow_drain(struct gc_flow *c, uint64_t now, struct gc_ring_engine_stats *st,
			    unsigned *consumed)
{
	unsigned xmitted;

	return drain(c, now, st, consumed, &xmitted);
}

/* Wake the engine thread for c, as gc_ring_notify() would (c->xlock held,
 * c not gone: the eventfd is open). */
static void wake_engine(struct gc_flow *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, a wake-up is pending anyway */
	}
}

int gc_flow_flush(struct gc_flow *c, unsigned *sent)
{
	struct gc_ring_engine_stats st = { 0 };
	int ret = 0;

	*sent = 0;
	pthread_mutex_lock(&c->xlock);
	if (c->gone) {
		ret = -ENOTCONN;
	} else if (c->k.error) {
		wake_engine(c); /* it stops the connection and says why */
		ret = -EPROTO;
	} else if (c->h->cc || c->h->xmit) {
		/* fixed at engine start: the engine thread owns their state */
		wake_engine(c);
		ret = 1;
	} else if (c->state == CONN_PARKED && !c->pend_n) {
		/* else the engine is on it: polling, or waiting for the socket */
		for (;;) {
			unsigned n, x;
			enum gc_drain d = drain(c, 0, &st, &n, &x);
			*sent += x;
			if (d == DRAIN_ERROR) {
				wake_engine(c);
				ret = -EPROTO;
				break;
			}
			if (d == DRAIN_BLOCKED) {
				/* the socket is full: the engine sends the rest */
				wake_engine(c);
				ret = 1;
				break;
			}
			if (d == DRAIN_EMPTY || n < c->batch)
				break;
		}
		/* relaxed: statistics, read by the engine thread's STATS reply;
		 * the server outlives its connections (not gone: it is there) */
		struct gc_srv *s = c->srv;
		atomic_fetch_add_explicit(&s->fl_packets, st.packets, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->fl_bytes, st.bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->fl_syscalls, st.syscalls, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->fl_gso, st.gso, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->xlock);
	return ret;
}

void gc_flow_teardown(struct gc_flow *c, void (*put_zone)(struct gc_client *, struct gc_zmap *))
{
	c->gone = true;
	c->pend_n = 0;
	if (c->efd >= 0)
		close(c->efd);
	if (c->sock >= 0)
		close(c->sock);
	if (c->shm) {
		/* the application learns from gc_ring_wait()/gc_ring_submit()
		 * (EPIPE) that nobody serves the ring any more */
		gc_kring_stop(&c->k, GC_RING_DETACHED, 0, 0);
		gc_kring_wake(&c->k);
		if (c->shm_shared)
			gc_own_unshare(c->shm);
		else
			munmap(c->shm, c->shm_len);
		c->cl->mapped -= c->shm_len;
	}
	if (c->zone)
		put_zone(c->cl, c->zone);
	c->zone = NULL;
	c->shm = NULL;
	c->efd = c->sock = -1;
}

void gc_flow_put(struct gc_flow *c)
{
	/* acq_rel: everything done with c happens before the free */
	if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&c->xlock);
	free(c->pend);
	free(c);
}

/* ---- the flow table ------------------------------------------------ */

#define TAB_BUCKETS 64u

struct gc_flowtab {
	pthread_mutex_t lock; /* guards the buckets */
	_Atomic unsigned refs;
	_Atomic int engine_tid; /* the engine thread's, while it runs; else 0 */
	struct gc_flow *bucket[TAB_BUCKETS];
};

struct gc_flowtab *gc_flowtab_new(void)
{
	struct gc_flowtab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	atomic_init(&t->refs, 1);
	return t;
}

void gc_flowtab_get(struct gc_flowtab *t)
{
	atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void gc_flowtab_put(struct gc_flowtab *t)
{
	if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
		return;
	/* the engine deleted every connection before it let go */
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void gc_flowtab_add(struct gc_flowtab *t, struct gc_flow *c)
{
	struct gc_flow **b = &t->bucket[c->id % TAB_BUCKETS];

	pthread_mutex_lock(&t->lock);
	c->tab_next = *b;
	*b = c;
	pthread_mutex_unlock(&t->lock);
}

void gc_flowtab_del(struct gc_flowtab *t, struct gc_flow *c)
{
	pthread_mutex_lock(&t->lock);
	for (struct gc_flow **pp = &t->bucket[c->id % TAB_BUCKETS]; *pp; pp = &(*pp)->tab_next) {
		if (*pp == c) {
			*pp = c->tab_next;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

void gc_flowtab_set_engine(struct gc_flowtab *t, pid_t tid)
{
	/* relaxed: a hint for gc_ring_submit(), which only decides where a
	 * burst is sent from; the attach reply orders it for the rings */
	atomic_store_explicit(&t->engine_tid, tid, memory_order_relaxed);
}

pid_t gc_flowtab_engine(struct gc_flowtab *t)
{
	return atomic_load_explicit(&t->engine_tid, memory_order_relaxed);
}

struct gc_flow *gc_flowtab_find(struct gc_flowtab *t, uint32_t id)
{
	struct gc_flow *c;

	pthread_mutex_lock(&t->lock);
	for (c = t->bucket[id % TAB_BUCKETS]; c && c->id != id; c = c->tab_next)
		;
	/* in the table: the engine's reference keeps it until we add ours */
	if (c)
		atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&t->lock);
	return c;
}

/* ---- what congestion control may ask of a connection (cc.h) -------------- */

uint32_t gc_flow_id(const struct gc_flow *c)
{
	return c->id;
}

int gc_flow_socket(const struct gc_flow *c)
{
	return c->sock;
}
