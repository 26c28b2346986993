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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include "internal.h"

#define URING_BATCH 1024u /* SQEs per submit; the CQ holds 2x, one result + one notification each */

struct gc_uring {
	struct io_uring ring;
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
		return gc_seterr(ENOTSUP, "engine %s: io_uring_setup() failed: %s",
				 zc ? "uring_zc" : "uring", strerror(probe_err));
	if (!(zc ? have_sendmsg_zc : have_sendmsg))
		return gc_seterr(ENOTSUP, "engine %s: the kernel lacks IORING_OP_%s",
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

static struct gc_uring *ring_of(struct gc_sock *s)
{
	struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE, .cq_entries = 2 * URING_BATCH };
	struct gc_uring *u;

	if (s->uring)
		return s->uring;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	/* SINGLE_ISSUER / DEFER_TASKRUN would help, but liburing 2.3 headers
	 * predate some of them and they are not needed for correctness. */
	int r = io_uring_queue_init_params(URING_BATCH, &u->ring, &p);

	if (r < 0) {
		free(u);
		errno = -r;
		return NULL;
	}
	s->uring = u;
	return u;
}

static int uring_prepare(struct gc_sock *s)
{
	errno = ENOMEM;
	if (ring_of(s))
		return 0;
	return gc_seterr(errno, "io_uring_queue_init failed: %s", strerror(errno));
}

static void uring_release(struct gc_sock *s)
{
	if (!s->uring)
		return;
	io_uring_queue_exit(&s->uring->ring);
	free(s->uring);
	s->uring = NULL;
}

static size_t uring_send_common(struct gc_sock *s, const struct gc_batch *b, int zc)
{
	size_t chunk = b->n < URING_BATCH ? b->n : URING_BATCH, sent = 0;
	struct gc_uring *u = ring_of(s);
	struct mmsghdr *m;

	if (!u || gc_scratch_reserve(s, chunk, sizeof(struct mmsghdr))) {
		for (size_t k = 0; k < b->n; k++)
			b->gerrno[k] = ENOMEM;
		return 0;
	}
	m = s->mmsg;
	for (size_t i = 0; i < b->n; i += chunk) {
		size_t cnt = b->n - i < chunk ? b->n - i : chunk, results = 0;
		long notifs = 0; /* signed: robust to any order of result and notification */

		for (size_t k = 0; k < cnt; k++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

			gc_fill_msg(&m[k].msg_hdr, &s->iov[3 * k], b, i + k);
			if (zc)
				io_uring_prep_sendmsg_zc(sqe, s->fd, &m[k].msg_hdr, (unsigned)b->flags);
			else
				io_uring_prep_sendmsg(sqe, s->fd, &m[k].msg_hdr, (unsigned)b->flags);
			io_uring_sqe_set_data64(sqe, i + k);
		}
		io_uring_submit(&u->ring);
		/* Reap until every result and every promised notification is in. */
		while (results < cnt || notifs > 0) {
			struct io_uring_cqe *cqe;
			unsigned head, seen = 0;
			int r = io_uring_wait_cqe(&u->ring, &cqe);

			if (r == -EINTR)
				continue;
			if (r < 0) { /* cannot happen with a healthy ring; never report success */
				for (size_t k = i; k < i + cnt; k++)
					b->gerrno[k] = -r;
				return sent;
			}
			io_uring_for_each_cqe(&u->ring, head, cqe) {
				seen++;
				if (cqe->flags & IORING_CQE_F_NOTIF) {
					notifs--;
					continue;
				}
				results++;
				if (cqe->flags & IORING_CQE_F_MORE)
					notifs++;
				b->gerrno[cqe->user_data] = cqe->res < 0 ? -cqe->res : 0;
				sent += cqe->res >= 0;
			}
			io_uring_cq_advance(&u->ring, seen);
		}
		if (zc) /* what zero-copy refused (too many pages for one skb) goes copied */
			for (size_t k = 0; k < cnt; k++)
				if (b->gerrno[i + k] == EMSGSIZE && sendmsg(s->fd, &m[k].msg_hdr, b->flags) >= 0) {
					b->gerrno[i + k] = 0;
					sent++;
				}
	}
	return sent;
}

static size_t uring_send(struct gc_sock *s, const struct gc_batch *b)
{
	return uring_send_common(s, b, 0);
}

static size_t uring_zc_send(struct gc_sock *s, const struct gc_batch *b)
{
	return uring_send_common(s, b, 1);
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
