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
 *   sized.c    gc_sized_in(), gc_sized_out(): sized structs across the API
 *   version.c  gc_version()
 */
#ifndef GC_CORE_H
#define GC_CORE_H

#include <errno.h>
#include <stddef.h>
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
 * sized.c: a sized struct crossing the API (the rule is in
 * include/groupcast/common.h).  Each module describes its struct once, in
 * its .c file, with GC_SIZED(name, INIT, last field in 1.0, last field now):
 *
 *   static const struct gc_sized dccp_opts_t =
 *           GC_SIZED(gc_dccp_opts, GC_DCCP_OPTS_INIT, timeout_ms, timeout_ms);
 *
 * gc_sized_in(): copy the caller's struct src into dst (this library's
 * struct, zeroed first: fields the caller's sz does not cover are 0).  src
 * NULL: all zero (where the API takes NULL for the defaults; check NULL
 * before where it does not).  -EINVAL if src->sz is below the 1.0 size,
 * -E2BIG if a byte past sizeof(this library's struct) is not zero; dst is
 * then all zero.  The caller's padding after the last known field is not
 * looked at (a compiler need not zero it), so a field appended later must
 * start at or past the previous release's sizeof, never in its padding.
 * gc_sized_out(): copy this library's filled struct src out to the caller's
 * dst: min(dst->sz, known) bytes, the caller's sz kept, [known, dst->sz)
 * zeroed (padding included).  -EFAULT if dst is NULL, -EINVAL if dst->sz is below the 1.0 size
 * (nothing written).
 * Both record the message (fn: arg->sz ...) with gc_errf().
 */
struct gc_sized {
	const char *name; /* "gc_dccp_opts" */
	const char *init; /* "GC_DCCP_OPTS_INIT" */
	size_t v1;	  /* its size in 1.0 (to the end of its last field then) */
	size_t known;	  /* what this library reads and writes (to the end of its last field) */
	size_t size;	  /* sizeof: dst of gc_sized_in() */
};
#define GC_OFFSETOFEND(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define GC_SIZED(type, INIT, last_v1, last)                                               \
	{                                                                                 \
		.name = #type, .init = #INIT, .v1 = GC_OFFSETOFEND(struct type, last_v1), \
		.known = GC_OFFSETOFEND(struct type, last), .size = sizeof(struct type),  \
	}
int gc_sized_in(const struct gc_sized *t, const char *fn, const char *arg, void *dst, const void *src);
int gc_sized_out(const struct gc_sized *t, const char *fn, const char *arg, void *dst, const void *src);

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
