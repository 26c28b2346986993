/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the "loop" engine: one sendto() (or sendmsg() when there are
 * per-recipient bytes) per member.  This is the papers' user-groupcast and
 * the baseline every other engine is measured against.
 */
#include <errno.h>
#include "internal.h"

static int loop_available(void)
{
	return 0;
}

static size_t loop_send(struct gc_sock *s, const struct gc_batch *b)
{
	size_t sent = 0;

	for (size_t i = 0; i < b->n; i++) {
		const struct gc_giovec *g = &b->rec[i];
		ssize_t r;

		do {
			if (!g->prepend.iov_len && !g->append.iov_len) {
				r = sendto(s->fd, b->shared->iov_base, b->shared->iov_len, b->flags,
					   (const struct sockaddr *)&g->dest, gc_addrlen(&g->dest));
			} else {
				struct iovec iov[3];
				struct msghdr msg;

				gc_fill_msg(&msg, iov, b, i);
				r = sendmsg(s->fd, &msg, b->flags);
			}
		} while (r < 0 && errno == EINTR);
		b->gerrno[i] = r < 0 ? errno : 0;
		sent += r >= 0;
	}
	return sent;
}

const struct gc_engine_ops gc_loop_ops = {
	.available = loop_available,
	.send = loop_send,
};
