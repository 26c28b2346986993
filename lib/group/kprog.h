/* SPDX-License-Identifier: MIT */
/* kprog.h - the kernel engine's per-process program (kprog.c), as kernel.c uses it. */
#ifndef GC_KPROG_H
#define GC_KPROG_H

#include <linux/types.h>
#include "fanout.h"

/* Whether the program can be loaded here: 0, or -ENOTSUP with the reason. */
int kprog_available(void);
/* Register a trigger socket (attaching the program on the first): its index
 * in the heads and groups maps in *sidx.  0, or -errno with the message. */
int kprog_add(__u64 cookie, __u32 *sidx);
/* Unregister it; the last one detaches the program. */
void kprog_del(__u64 cookie, __u32 sidx);
/* The mmapped head of socket index sidx. */
struct gc_khead *kprog_head(__u32 sidx);
/* Make map_fd the slot map of socket index sidx: 0, or -errno. */
int kprog_set_slots(__u32 sidx, int map_fd);
/* Turn on lo's forwarding for bpf_fib_lookup() (once; restored by the last user). */
void kprog_need_forwarding(int family);
/* Bumped in a forked child: per-socket state of another generation is the parent's. */
unsigned kprog_gen(void);

#endif
