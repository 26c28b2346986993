/* SPDX-License-Identifier: MIT */
/* The C side of the Go binding: each call a Go method makes is one cgo call,
 * and gc_errmsg() (thread-local) is read in the same call as the failure, on
 * the same thread.  No pointer given by Go is kept past a call. */
#ifndef GCGO_SHIM_H
#define GCGO_SHIM_H
#include <stddef.h>
#include <sys/types.h>
#include <groupcast/group.h>

#include "gcgo.h"

/* The group buffers of one Go Group, in C memory: members converted into ss
 * for gc_setgroup(), errs for gc_last_errors(), giovecs and an arena that
 * holds the per-recipient bytes of gc_sendgroup(). */
struct gcgo_bufs {
	struct gcgo_member *m;
	struct sockaddr_storage *ss;
	int *errs;
	struct gc_giovec *rec;
	size_t cap;
	unsigned char *arena;
	size_t arena_cap;
};

int gcgo_reserve(struct gcgo_bufs *b, size_t n, size_t arena, struct gcgo_err *e);
void gcgo_free(struct gcgo_bufs *b);
int gcgo_setgroup(int fd, struct gcgo_bufs *b, size_t n, struct gcgo_err *e);
/* gc_send(); on a per-member failure, the errno of each member into b->errs
 * and their count into *failed. */
ssize_t gcgo_send(int fd, const void *buf, size_t len, struct gcgo_bufs *b, size_t n,
		  ssize_t *failed, struct gcgo_err *e);
/* gc_sendgroup() for recipients b->m[0..n): prepend i is arena[pre[i].. +
 * plen[i]), append i arena[app[i].. + alen[i]) (offsets and lengths in
 * lens[4*i..4*i+4)). */
int gcgo_sendgroup(int fd, const void *shared, size_t slen, struct gcgo_bufs *b, const size_t *lens,
		   size_t n, struct gcgo_err *e);
int gcgo_set_engine(int fd, int engine, struct gcgo_err *e);
int gcgo_get_engine(int fd, struct gcgo_err *e);
int gcgo_auto_reason(int fd, char *buf, size_t len, struct gcgo_err *e);
int gcgo_engine_available(int engine, struct gcgo_err *e);
/* gc_stats() through GC_STATS_INIT(), copied into a struct of our own. */
struct gcgo_stats {
	unsigned long long group_sends, datagrams, bytes, failed, user_fallback;
	int last_errno;
};
int gcgo_stats(int fd, struct gcgo_stats *st, struct gcgo_err *e);
int gcgo_release(int fd, struct gcgo_err *e);
#endif
