/* SPDX-License-Identifier: MIT */
/*
 * flush.c - gc_ring_flush(): the application's own thread sends what it
 * published, as the paper's dccp_notify() system call did, instead of waking
 * the engine thread and waiting for it to be scheduled.
 *
 * Only for rings whose engine runs in this process (the connection's memory
 * is ours) and that the engine has parked (kern_notify set: the engine thread
 * is not looking at the ring and will not until the ring's eventfd is
 * written).  The connection's xlock makes the two threads take turns: the
 * engine takes it around each pump() and around the events that move a
 * connection out of PARKED, so a connection seen PARKED under the lock stays
 * PARKED until we let go, and nothing but us touches its kring.
 *
 * The ring stays parked afterwards: the next gc_ring_flush() sends again,
 * and a gc_ring_submit() still wakes the engine when kern_notify asks.
 * What we cannot finish here goes to the engine thread: packets the socket
 * refused for now (left in the connection's pending list, which pump() sends
 * first) and every ring of an engine with a congestion controller or another
 * transport (cc.h), whose state belongs to the engine thread.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "ring/srv.h"

/* Wake the engine thread for c, as gc_ring_notify() would. */
static void wake_engine(struct gc_conn *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, a wake-up is pending anyway */
	}
}

int gc_srv_flush(struct gc_conn *c, unsigned *sent)
{
	struct gc_srv *s = c->srv;
	int ret = 0;

	*sent = 0;
	if (s->h.cc || s->h.xmit) /* never change: fixed at engine start */
		return 1;
	pthread_mutex_lock(&c->xlock);
	if (c->k.error) {
		wake_engine(c); /* it stops the connection and says why */
		ret = -1;
		goto out;
	}
	if (c->state != CONN_PARKED || c->pend_n)
		goto out; /* the engine is on it: polling, or waiting for the socket */

	struct gc_ring_engine_stats st = { 0 };
	for (;;) {
		uint32_t nout, ntaken;
		if (gc_kring_take(&c->k, s->p.batch, c->pend, &nout, &ntaken) < 0) {
			wake_engine(c);
			ret = -1;
			break;
		}
		if (ntaken == 0)
			break;
		uint32_t end = c->k.kern;
		unsigned done = gc_srv_xmit(s, c, c->pend, nout, 0, &st);
		*sent += done;
		if (done < nout) {
			/* the socket is full: the engine sends the rest when it can */
			memmove(c->pend, c->pend + done, (nout - done) * sizeof(*c->pend));
			c->pend_n = nout - done;
			c->pend_end = end;
			if (gc_kring_done(&c->k, c->pend[0].pos))
				gc_kring_wake(&c->k);
			ret = 1;
			break;
		}
		if (gc_kring_done(&c->k, end))
			gc_kring_wake(&c->k);
		if (ntaken < s->p.batch)
			break;
	}
	/* relaxed: statistics, read by the engine thread's STATS reply */
	atomic_fetch_add_explicit(&s->fl_packets, st.packets, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->fl_bytes, st.bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->fl_syscalls, st.syscalls, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->fl_gso, st.gso, memory_order_relaxed);
out:
	pthread_mutex_unlock(&c->xlock);
	return ret;
}
