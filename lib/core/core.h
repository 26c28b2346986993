/* SPDX-License-Identifier: MIT */
/*
 * lib/core/core.h - what every module of the library (group, ring, dccp,
 * lms) shares, and nothing else: the export marker, this thread's error
 * message, the clock.  lib/core includes no module's header; a module
 * includes this one, never another module's internal.h (lib/README.md;
 * tests/build/layers.sh checks both).
 *
 *   export.h   GC_EXPORT
 *   err.c      gc_seterr(), gc_errmsg()
 *   version.c  gc_version()
 */
#ifndef GC_CORE_H
#define GC_CORE_H

#include <stdint.h>
#include <time.h>

#include "core/export.h"

/*
 * err.c: record this thread's error for gc_errmsg(): the message fmt names
 * the argument or the reason; " (ENAME)" of err is appended.
 * Sets errno to err and always returns -1.
 */
int gc_seterr(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
