/* SPDX-License-Identifier: MIT */
/*
 * uring.c - the "uring" and "uring_zc" engines: io_uring SENDMSG (or
 * SENDMSG_ZC) SQEs, one submit per group send of up to URING_BATCH members.
 *
 * Each socket gets its own ring, made on first use and kept until
 * gc_release() or an engine change.  We wait for every completion before
 * returning, because the caller may reuse its buffers as soon as we return.
 * With SENDMSG_ZC a send completes in two CQEs: the result (flagged
 * IORING_CQE_F_MORE when a notification follows) and, once the kernel no
 * longer references the caller's pages, a notification (IORING_CQE_F_NOTIF).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include "internal.h"

#define URING_BATCH 1024u /* SQEs per submit; the CQ holds 2x, one result + one notification each */

struct gc_uring {
	struct io_uring ring;
	unsigned entries; /* SQ size: the most members in flight at once */
	uint32_t gen;	  /* bumped per chunk, high half of every SQE's user_data */
};

/* Whether the kernel has io_uring with the opcode (probed once). */
static int have_sendmsg, have_sendmsg_zc;
static int probe_err;

static void probe_once(void)
{
	struct io_uring ring;
	struct io_uring_probe *p;
	int r = io_uring_queue_init(2, &ring, 0);

	if (r < 0) {
		probe_err = -r;
		return;
	}
	p = io_uring_get_probe_ring(&ring);
	if (p) {
		have_sendmsg = io_uring_opcode_supported(p, IORING_OP_SENDMSG);
		have_sendmsg_zc = io_uring_opcode_supported(p, IORING_OP_SENDMSG_ZC);
		io_uring_free_probe(p);
	}
	io_uring_queue_exit(&ring);
}

static pthread_once_t probe_ctl = PTHREAD_ONCE_INIT;

static int available(int zc)
{
	pthread_once(&probe_ctl, probe_once);
	if (probe_err)
		return gc_errf(ENOTSUP, "engine %s: io_uring_setup() failed: %s",
			       zc ? "uring_zc" : "uring", strerror(probe_err));
	if (!(zc ? have_sendmsg_zc : have_sendmsg))
		return gc_errf(ENOTSUP, "engine %s: the kernel lacks IORING_OP_%s",
			       zc ? "uring_zc" : "uring", zc ? "SENDMSG_ZC" : "SENDMSG");
	return 0;
}

static int uring_available(void)
{
	return available(0);
}

static int uring_zc_available(void)
{
	return available(1);
}

/* Test seam (internal.h): the SQ size and the submit call, so a unit test can
 * make a ring smaller than a batch and a submit that stops short. */
struct gc_uring_tunables gc_uring_tunables = { URING_BATCH, io_uring_submit };

/* s's ring, made if it has none: 0, or -errno. */
static int ring_open(struct gc_sock *s)
{
	unsigned entries = gc_uring_tunables.sq_entries;
	struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL,
				     .cq_entries = 2 * entries };
	struct gc_uring *u;
	int r;

	if (s->uring)
		return 0;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	/* SUBMIT_ALL (5.18): an SQE that fails early does not stop the kernel
	 * from consuming the ones behind it.  SINGLE_ISSUER / DEFER_TASKRUN
	 * would help too, but liburing 2.3 predates some of them. */
	r = io_uring_queue_init_params(entries, &u->ring, &p);
	if (r == -EINVAL) {
		p = (struct io_uring_params){ .flags = IORING_SETUP_CQSIZE, .cq_entries = 2 * entries };
		r = io_uring_queue_init_params(entries, &u->ring, &p);
	}
	if (r < 0) {
		free(u);
		return r;
	}
	u->entries = entries;
	s->uring = u;
	return 0;
}

static int uring_prepare(struct gc_sock *s)
{
	int r = ring_open(s);

	if (r < 0)
		return gc_errf(-r, "io_uring_queue_init failed: %s", strerror(-r));
	return 0;
}

static void uring_release(struct gc_sock *s)
{
	if (!s->uring)
		return;
	io_uring_queue_exit(&s->uring->ring);
	free(s->uring);
	s->uring = NULL;
}

/*
 * Hand the kernel the cnt SQEs just queued; returns how many it took.  It may
 * take fewer (no memory for requests: EAGAIN; a signal).  Retried while it
 * makes progress; after a few fruitless tries the caller gives the rest to
 * sendmsg() and throws the ring away, because SQEs the kernel has not
 * consumed stay in the SQ, pointing at this call's msghdrs, and a later
 * submit must never send them.
 */
static size_t submit_all(struct gc_uring *u, size_t cnt, int *err)
{
	size_t in = 0;
	int idle = 0;

	while (in < cnt && idle < 3) {
		int r = gc_uring_tunables.submit(&u->ring);

		if (r > 0) {
			in += (size_t)r;
			idle = 0;
		} else if (r == 0 || r == -EINTR || r == -EAGAIN || r == -EBUSY) {
			*err = r == 0 ? EAGAIN : -r;
			idle++;
		} else {
			*err = -r;
			break;
		}
	}
	return in < cnt ? in : cnt;
}

/* Members [from, to) of the chunk the ring did not take: send them the plain
 * way, so that a sick ring costs speed, never delivery. */
static size_t send_plain(struct gc_sock *s, const struct gc_batch *b, struct mmsghdr *m,
			 size_t base, size_t from, size_t to)
{
	size_t sent = 0;

	for (size_t k = from; k < to; k++) {
		if (sendmsg(s->fd, &m[k].msg_hdr, b->flags) >= 0) {
			b->gerrno[base + k] = 0;
			sent++;
		} else {
			b->gerrno[base + k] = errno;
		}
	}
	return sent;
}

/* One chunk (cnt <= the SQ size) through the ring: SQEs, submit, reap. */
static size_t uring_chunk(struct gc_sock *s, const struct gc_batch *b, struct mmsghdr *m,
			  size_t base, size_t cnt, void *ctx)
{
	const bool zc = *(const bool *)ctx;
	/* a new one if the last chunk dropped it */
	struct gc_uring *u = ring_open(s) < 0 ? NULL : s->uring;
	size_t in, results = 0, sent = 0;
	long notifs = 0; /* signed: robust to any order of result and notification */
	int err = 0;
	bool sick;

	if (!u || u->entries < cnt) {
		for (size_t k = 0; k < cnt; k++)
			b->gerrno[base + k] = ENOMEM;
		return 0;
	}
	/* user_data carries this chunk's generation: a completion left by an
	 * earlier call can never be taken for one of ours */
	u->gen++;
	for (size_t k = 0; k < cnt; k++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring); /* cnt <= SQ size: never NULL */

		if (zc)
			io_uring_prep_sendmsg_zc(sqe, s->fd, &m[k].msg_hdr, (unsigned)b->flags);
		else
			io_uring_prep_sendmsg(sqe, s->fd, &m[k].msg_hdr, (unsigned)b->flags);
		io_uring_sqe_set_data64(sqe, (uint64_t)u->gen << 32 | k);
		b->gerrno[base + k] = EIO; /* until its completion says otherwise */
	}
	in = submit_all(u, cnt, &err);
	sick = in < cnt;
	/* Reap until every submitted result and every promised notification is
	 * in: the caller may reuse its buffers as soon as we return. */
	while (results < in || notifs > 0) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int r = io_uring_wait_cqe(&u->ring, &cqe);

		if (r == -EINTR)
			continue;
		if (r < 0) { /* cannot happen with a healthy ring; never report success */
			sick = true;
			break;
		}
		io_uring_for_each_cqe(&u->ring, head, cqe)
		{
			uint64_t k = cqe->user_data & 0xffffffffu;

			seen++;
			if (cqe->user_data >> 32 != u->gen || k >= cnt)
				continue;
			if (cqe->flags & IORING_CQE_F_NOTIF) {
				notifs--;
				continue;
			}
			results++;
			if (cqe->flags & IORING_CQE_F_MORE)
				notifs++;
			b->gerrno[base + k] = cqe->res < 0 ? -cqe->res : 0;
			sent += cqe->res >= 0;
		}
		io_uring_cq_advance(&u->ring, seen);
	}
	if (zc) /* what zero-copy refused (too many pages for one skb) goes copied */
		for (size_t k = 0; k < cnt; k++)
			if (b->gerrno[base + k] == EMSGSIZE &&
			    sendmsg(s->fd, &m[k].msg_hdr, b->flags) >= 0) {
				b->gerrno[base + k] = 0;
				sent++;
			}
	if (sick) {
		/* Members the ring never took go the plain way; those it took but
		 * never reported keep EIO (they may or may not have gone out).
		 * The ring is dropped; the next chunk or send makes a new one. */
		sent += send_plain(s, b, m, base, in, cnt);
		uring_release(s);
	}
	return sent;
}

static size_t uring_send_common(struct gc_sock *s, const struct gc_batch *b, bool zc)
{
	struct gc_uring *u = ring_open(s) < 0 ? NULL : s->uring;

	if (!u) {
		for (size_t k = 0; k < b->n; k++)
			b->gerrno[k] = ENOMEM;
		return 0;
	}
	return gc_for_each_chunk (s, b, u->entries, uring_chunk, &zc);
}

static size_t uring_send(struct gc_sock *s, const struct gc_batch *b)
{
	return uring_send_common(s, b, false);
}

static size_t uring_zc_send(struct gc_sock *s, const struct gc_batch *b)
{
	return uring_send_common(s, b, true);
}

const struct gc_engine_ops gc_uring_ops = {
	.available = uring_available,
	.prepare = uring_prepare,
	.send = uring_send,
	.release = uring_release,
};

const struct gc_engine_ops gc_uring_zc_ops = {
	.available = uring_zc_available,
	.prepare = uring_prepare,
	.send = uring_zc_send,
	.release = uring_release,
};
