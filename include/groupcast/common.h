/* SPDX-License-Identifier: MIT */
/*
 * groupcast/common.h - what the module headers share.  group.h, ring.h,
 * dccp.h, lms.h and ltp.h each include it; a program may include it alone.
 *
 * The contract every module (group.h, ring.h, dccp.h, lms.h, ltp.h) follows:
 *  - Names: functions and types start with gc_, macros with GC_; a module's
 *    functions start with its name (gc_ring_, gc_dccp_, gc_lms_, gc_ltp_;
 *    group unicast, the first, has the bare gc_).  A struct the caller fills
 *    to configure something is named ..._opts.
 *  - Lifetime: an object is made by gc_X_create(), or, when it is an
 *    endpoint, by the socket verb that says how (gc_ring_engine_connect(),
 *    gc_dccp_connect(), gc_dccp_listen(), gc_dccp_accept()), and ended by
 *    gc_X_destroy(), whatever made it; gc_X_destroy(NULL) does nothing.  A
 *    DCCP connection is ended by gc_dccp_close(), the protocol's own close
 *    (it tells the peer, waits at most its timeout, then frees).
 *    gc_release() frees what the library keeps for a socket the caller
 *    owns; the socket stays open.
 *  - Errors: a function that fails returns -1 (NULL where it returns a
 *    pointer) and sets errno; gc_errmsg() then names the argument or the
 *    reason in one line.  A call refused for a bad argument has changed
 *    nothing and sent nothing.
 *  - Versions (version.h): GC_VERSION is the headers' version, gc_version()
 *    the library's; within a major version the ABI only grows (CHANGELOG.md
 *    says what 1.0 promises).
 *  - Structs that cross the API (groupcast(7), "Sized structs"):
 *    A struct that may grow is sized: its first field is size_t sz, and
 *    GC_<NAME>_INIT(...) sets sz = sizeof(struct) plus the designated
 *    initializers given:
 *        struct gc_dccp_opts o = GC_DCCP_OPTS_INIT(.ccid = 3);
 *        struct gc_dccp_stats st = GC_DCCP_STATS_INIT();
 *    The library reads or writes only the bytes sz covers.  sz below the
 *    struct's size in 1.0 is EINVAL.  A struct the library reads (the
 *    _opts, and gc_lms_dmcast): bytes past what this library knows must be
 *    zero (E2BIG names the first that is not), so a field set for a newer
 *    library is never silently ignored; fields sz does not cover, and zero
 *    fields, take their defaults.  Fill a struct with its macro, or
 *    memset it to 0 and set sz.
 *    A struct the library fills (the stats, gc_ring_status): it writes
 *    what it knows, zeroes the rest up to sz, and leaves sz as it was.
 *    Sized: gc_ring_engine_opts, gc_dccp_opts, gc_ltp_opts, gc_lms_dmcast
 *    (read); gc_stats, gc_ring_status, gc_ring_engine_stats,
 *    gc_dccp_stats, gc_lms_stats, gc_ltp_stats (filled).
 *    Fixed (no sz; the layout is frozen at 1.0): gc_pkt (shared memory),
 *    gc_giovec (an array element), gc_lms_info and gc_lms_wire (mirror the
 *    wire format), gc_dccp_rxinfo and gc_ltp_msg (per-call results).
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
