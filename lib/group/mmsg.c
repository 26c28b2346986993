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

static size_t mmsg_chunk(struct gc_sock *s, const struct gc_batch *b, struct mmsghdr *m,
			 size_t base, size_t cnt, void *ctx)
{
	size_t done = 0, sent = 0;

	(void)ctx;
	while (done < cnt) {
		int r = sendmmsg(s->fd, m + done, (unsigned int)(cnt - done), b->flags);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			b->gerrno[base + done] = errno; /* this message failed: skip it */
			done++;
			continue;
		}
		for (size_t k = 0; k < (size_t)r; k++)
			b->gerrno[base + done + k] = 0;
		done += (size_t)r;
		sent += (size_t)r;
	}
	return sent;
}

static size_t mmsg_send(struct gc_sock *s, const struct gc_batch *b)
{
	return gc_for_each_chunk (s, b, MMSG_BATCH, mmsg_chunk, NULL);
}

const struct gc_engine_ops gc_mmsg_ops = {
	.available = mmsg_available,
	.send = mmsg_send,
};
