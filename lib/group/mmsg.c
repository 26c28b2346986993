/* SPDX-License-Identifier: MIT */
/*
 * mmsg.c - the "mmsg" engine: sendmmsg() in batches of up to UIO_MAXIOV
 * messages.  The iovecs point into the caller's buffers: nothing is copied in
 * user space.  sendmmsg() stops at the first failing message and returns how
 * many went before it; that message is then retried alone so its errno is
 * recorded, and the batch goes on after it.
 */
#include <errno.h>
#include <sys/uio.h>
#include "internal.h"

#define MMSG_BATCH 1024 /* UIO_MAXIOV: the kernel's cap on vlen */

static int mmsg_available(void)
{
	return 0;
}

static size_t mmsg_send(struct gc_sock *s, const struct gc_batch *b)
{
	size_t chunk = b->n < MMSG_BATCH ? b->n : MMSG_BATCH, sent = 0, i = 0;
	struct mmsghdr *m;

	if (gc_scratch_reserve(s, chunk, sizeof(struct mmsghdr))) {
		for (size_t k = 0; k < b->n; k++)
			b->gerrno[k] = ENOMEM;
		return 0;
	}
	m = s->mmsg;
	while (i < b->n) {
		size_t cnt = b->n - i < chunk ? b->n - i : chunk, done = 0;

		for (size_t k = 0; k < cnt; k++)
			gc_fill_msg(&m[k].msg_hdr, &s->iov[3 * k], b, i + k);
		while (done < cnt) {
			int r = sendmmsg(s->fd, m + done, (unsigned int)(cnt - done), b->flags);

			if (r < 0) {
				if (errno == EINTR)
					continue;
				b->gerrno[i + done] = errno; /* this message failed: skip it */
				done++;
				continue;
			}
			for (int k = 0; k < r; k++)
				b->gerrno[i + done + k] = 0;
			done += (size_t)r;
			sent += (size_t)r;
		}
		i += cnt;
	}
	return sent;
}

const struct gc_engine_ops gc_mmsg_ops = {
	.available = mmsg_available,
	.send = mmsg_send,
};
