/* SPDX-License-Identifier: MIT */
/*
 * batch.c - the copies of one receive batch, sent together.
 *
 * read_data() takes what is waiting on a listen socket with one recvmmsg()
 * (at most RELAY_BATCH datagrams); fanout.c and rtp.c queue each datagram's
 * copies here, datagram after datagram and each datagram's recipients in
 * their order, and the queue goes out in one gc_sendgroup() when the receive
 * batch is done (or earlier: the queue is full, another socket or a send that
 * does not queue comes next).  Each queued copy carries its datagram as its
 * own iovecs (replicate: the datagram as the prepend; broadcast: its RTP
 * header as the prepend, the rest of the datagram as the append) and the
 * shared part is empty, so every receiver gets the bytes and the order it
 * got with one send per datagram.  Nothing waits for a batch to fill: a lone
 * datagram is a batch of one, sent before the loop waits again.
 *
 * Bounds: RELAY_BATCH datagrams per recvmmsg() (main.c) and RELAY_OUT_MAX
 * copies per gc_sendgroup(), the most one sendmmsg() takes (UIO_MAXIOV), so
 * the mmsg engine sends a full queue with one system call and the queue's
 * memory is fixed (about 170 KB).
 *
 * Engines: a user engine (mmsg, loop, uring) sends the queue as it is.  The
 * kernel engine clones one trigger per datagram, so batching across
 * datagrams does not help it; it saves the per-copy work of the stack
 * instead, which pays from some group size on (relay_kernel_from()).  Under
 * AUTO each datagram goes the cheaper way for its group size and the size of
 * the receive batch: the kernel engine at once (one trigger), or queued on
 * the socket's twin, a dup() of it on the mmsg engine (the library keeps its
 * state per descriptor), so both ways leave from the same socket, address
 * and port.  A named engine is used as named.
 */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * AUTO: the group size from which one datagram's copies cost less through
 * the kernel engine (one trigger per datagram) than queued for one
 * sendmmsg() with the rest of the receive batch: relay CPU per input
 * datagram, replicate mode, 984 bytes, measured in samplicator.py's lab
 * (medians of 2, noisy):
 *   python3 bench/relay_crossover.py                 (crossover.md)
 *   python3 bench/relay_crossover.py --modes paced --sizes 2,4,8,12 --md crossover-paced.md
 * in bench/results/relay-points.  In a batch (many datagrams waiting) the
 * kernel engine was cheaper from N = 4 (18.8 against 20.5 us; at N = 2 mmsg
 * 11.4 against 13.5), and so it was at 2000/s with mostly one datagram per
 * wake-up (28.6 against 33.5 us at N = 4; at 2, 31.4 against 29.3): the
 * trigger's fixed cost is soon paid back by clones that skip the stack's
 * per-copy work.  Alone at 100/s the wake-up of a cold relay dominates both,
 * and the kernel engine was first cheaper at N = 16 (58.9 against 67.7 us;
 * at 12, 59.6 against 53.8).  So: busy (a batch, or an input rate of
 * RELAY_BUSY_RATE or more over the last tick) from 4, else from 16.  Rates
 * between 100/s and 2000/s were not measured.
 */
#define KERNEL_FROM_ALONE 16
#define KERNEL_FROM_BUSY 4

size_t relay_kernel_from(bool busy)
{
	return busy ? KERNEL_FROM_BUSY : KERNEL_FROM_ALONE;
}

int batch_init(struct relay *r)
{
	struct outq *q = &r->q;
	q->rec = calloc(RELAY_OUT_MAX, sizeof(*q->rec));
	q->who = calloc(RELAY_OUT_MAX, sizeof(*q->who));
	q->payload = calloc(RELAY_OUT_MAX, sizeof(*q->payload));
	q->hdr = calloc(RELAY_OUT_MAX, sizeof(*q->hdr));
	q->fd = -1;
	q->n = 0;
	if (!q->rec || !q->who || !q->payload || !q->hdr || !relay_gerrno(r, RELAY_OUT_MAX))
		return -1;
	return 0;
}

void batch_free(struct relay *r)
{
	free(r->q.rec);
	free(r->q.who);
	free(r->q.payload);
	free(r->q.hdr);
	memset(&r->q, 0, sizeof(r->q));
	r->q.fd = -1;
}

int batch_twin(const struct relay *r, int fd)
{
	if (r->engine != GC_ENGINE_AUTO)
		return -1;
	int t = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (t < 0)
		return -1; /* no twin: every datagram goes the socket's own way */
	if (gc_set_engine(t, GC_ENGINE_MMSG) != 0) {
		close(t);
		return -1;
	}
	return t;
}

void batch_twin_close(int *twin)
{
	if (*twin >= 0) {
		gc_release(*twin);
		close(*twin);
	}
	*twin = -1;
}

int batch_pick(struct relay *r, int fd, int twin, enum gc_engine e, size_t n)
{
	int to = fd;
	if (e == GC_ENGINE_KERNEL) {
		if (r->engine != GC_ENGINE_AUTO || twin < 0 ||
		    n >= relay_kernel_from(r->rx_batch > 1 || r->rx_busy))
			goto now;
		to = twin;
	}
	if (n > RELAY_OUT_MAX)
		goto now;
	if (r->q.n && (r->q.fd != to || r->q.n + n > RELAY_OUT_MAX))
		batch_flush(r);
	r->q.fd = to;
	return to;
now:
	batch_flush(r); /* what came before goes first */
	return -1;
}

void batch_flush(struct relay *r)
{
	struct outq *q = &r->q;
	if (!q->n)
		return;
	int *ge = r->gerrno; /* RELAY_OUT_MAX at least (batch_init) */
	relay_group_send(r, q->fd, NULL, q->rec, q->n, ge);
	for (size_t i = 0; i < q->n; i++)
		q->account(r, q->who[i], ge[i],
			   q->rec[i].prepend.iov_len + q->rec[i].append.iov_len, q->payload[i]);
	q->n = 0;
}
