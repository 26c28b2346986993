/* SPDX-License-Identifier: MIT */
/* kpolicy.h - whether AUTO may take the kernel engine for a socket (kpolicy.c). */
#ifndef GC_KPOLICY_H
#define GC_KPOLICY_H

#include "internal.h"

/* How long an answer is kept: a policy change made after a check is seen
 * by the first send this much later (groupcast(7) documents the window).
 * The socket's options are cheap to read; the namespace's rules, routes and
 * hooks are netlink dumps, shared by every socket of the process. */
#define GC_KPOLICY_SOCKET_NS 200000000ull /* 0.2 s */
#define GC_KPOLICY_NETNS_NS 1000000000ull /* 1 s */

/* 1 if AUTO must not use the kernel engine for s now, 0 if it may; either
 * way s->auto_why says why.  Cached per socket (and per namespace and
 * family) as above; s->auto_checked_ns = 0 forces a new check. */
int gc_kpolicy_declines(struct gc_sock *s);

#endif
