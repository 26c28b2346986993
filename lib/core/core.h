/* SPDX-License-Identifier: MIT */
/*
 * lib/core/core.h - what every module of the library (group, ring, dccp,
 * lms) shares, and nothing else: the export marker, this thread's error
 * message, the clock.  lib/core includes no module's header; a module
 * includes this one, never another module's internal.h (lib/README.md;
 * tests/build/layers.sh checks both).
 *
 *   export.h   GC_EXPORT
 *   err.c      gc_errf(), gc_err(), gc_seterr(), gc_errmsg()
 *   version.c  gc_version()
 */
#ifndef GC_CORE_H
#define GC_CORE_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "core/export.h"

/*
 * err.c: errors.  One convention (libbpf's): inside the library a function
 * that fails returns a negative errno (-EINVAL), NULL only where a pointer is
 * the natural result, and never sets errno itself; an exported function (the
 * API boundary) turns that into -1 or NULL with errno set, by gc_err() or
 * gc_err_ptr().  The message for gc_errmsg() is recorded where the reason is
 * known, deep or not, with gc_errf().
 *
 * gc_errf(): record this thread's message (fmt names the argument or the
 * reason; " (ENAME)" of err is appended) and return -err.  errno untouched.
 * gc_err(ret): at the boundary: ret >= 0 is returned as is; ret < 0 sets
 * errno to -ret and returns -1.
 * gc_err_ptr(ret): the same for functions that return a pointer: NULL.
 * gc_seterr(): gc_errf() and errno at once, returning -1: only in an
 * exported function (ctest errors checks it), e.g. refusing an argument.
 */
int gc_errf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int gc_seterr(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline long gc_err(long ret)
{
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static inline void *gc_err_ptr(int ret)
{
	errno = ret < 0 ? -ret : EINVAL;
	return NULL;
}

/*
 * The library's one clock, in nanoseconds.  gc_now_ns(): CLOCK_MONOTONIC,
 * for timers, deadlines and every time stamp compared across calls.
 * gc_clock_ns(CLOCK_MONOTONIC_COARSE) where a tick (1-4 ms) is precision
 * enough and the read is on every send (group/kpolicy.c).
 */
static inline uint64_t gc_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gc_now_ns(void)
{
	return gc_clock_ns(CLOCK_MONOTONIC);
}

#endif
