/* SPDX-License-Identifier: MIT */
/*
 * groupcast/common.h - what the module headers share.  group.h, ring.h,
 * dccp.h and lms.h each include it; a program may include it alone.
 *
 * The contract every module follows today:
 *  - Names: functions and types start with gc_, macros with GC_.
 *  - Errors: a function that fails returns -1 (NULL where it returns a
 *    pointer, GC_ENGINE_NONE where an engine) and sets errno; gc_errmsg()
 *    then names the argument or the reason in one line.  A call refused for a bad argument has changed
 *    nothing and sent nothing.
 *  - Versions (version.h): GC_VERSION is the headers' version, gc_version()
 *    the library's; within a major version the ABI only grows.
 * Not yet common (each header says its own): how a struct the caller passes
 * in says its size (gc_ring_engine_opts: sz and an _INIT macro;
 * gc_dccp_opts: size; the LMS/LTP structs: none), and the lifetime verbs.
 */
#ifndef GROUPCAST_COMMON_H
#define GROUPCAST_COMMON_H

#include <groupcast/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line naming the argument and the reason of this thread's last error,
 * in any module. */
const char *gc_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_COMMON_H */
