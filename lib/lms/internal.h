/* SPDX-License-Identifier: MIT */
/* lib/lms/internal.h - what lms.c and encap.c share. */
#ifndef GC_LMS_INTERNAL_H
#define GC_LMS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <arpa/inet.h>
#include <groupcast/lms.h>
#include "core/core.h" /* gc_errf(), gc_err(), GC_EXPORT, gc_now_ns() */

/* The process-wide counters of gc_lms_stats(). */
struct gc_lms_counters {
	atomic_uint_least64_t requests_sent, dmcasts_sent, requests_received, dmcasts_received,
		plain_received, bad_options;
};
extern struct gc_lms_counters gc_lms_count;

static inline void gc_lms_inc(atomic_uint_least64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* lms.c: true when the calling thread has CAP_NET_RAW in its effective set. */
bool gc_lms_has_net_raw(void);

/* lms.c: "a.b.c.d" of a (network order) in a thread's rotating buffers, for messages. */
const char *gc_lms_ntoa(struct in_addr a);

/* True when a (network order) is in 224.0.0.0/4. */
static inline bool gc_lms_is_mcast(struct in_addr a)
{
	return (ntohl(a.s_addr) >> 28) == 0xe;
}

#endif
