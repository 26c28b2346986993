/* SPDX-License-Identifier: MIT */
/* kpolicy.h - whether AUTO may take the kernel engine for a socket (kpolicy.c). */
#ifndef GC_KPOLICY_H
#define GC_KPOLICY_H

#include "internal.h"

/* How long an answer is kept: a policy change made after a check is seen
 * by the first send this much later (groupcast(7) documents the window). */
#define GC_KPOLICY_NS 200000000ull

/* 1 if AUTO must not use the kernel engine for s now, 0 if it may; either
 * way s->auto_why says why.  Cached per socket (and per namespace and
 * family) for GC_KPOLICY_NS; s->auto_checked_ns = 0 forces a new check. */
int gc_kpolicy_declines(struct gc_sock *s);

#endif
