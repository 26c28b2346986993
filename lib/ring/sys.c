/* SPDX-License-Identifier: MIT */
/* sys.c - small system helpers of the ring module: page size, futex. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ring/internal.h"

long gc_page_size(void)
{
	static long page;

	if (!page)
		page = sysconf(_SC_PAGESIZE);
	return page;
}

/*
 * The futex words live in a ring's memfd, mapped by the application and by
 * the engine (maybe in another process): shared futexes, not PRIVATE.
 * Returns 0 when woken (or the value differed), -ETIMEDOUT or -EINTR.
 */
int gc_futex_wait(_Atomic uint32_t *word, uint32_t val, int timeout_ms)
{
	struct timespec ts, *tp = NULL;

	if (timeout_ms >= 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
		tp = &ts;
	}
	if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, tp, NULL, 0) == 0)
		return 0;
	return errno == EAGAIN ? 0 : -errno;
}

void gc_futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
