// SPDX-License-Identifier: MIT
#include "shim.h"

#include <stdlib.h>

static void *grow(void *p, size_t n, size_t size)
{
	return realloc(p, n * size);
}

int gcgo_reserve(struct gcgo_bufs *b, size_t n, size_t arena, struct gcgo_err *e)
{
	if (n > b->cap) {
		void *m = grow(b->m, n, sizeof(*b->m));
		if (m)
			b->m = m;
		void *ss = m ? grow(b->ss, n, sizeof(*b->ss)) : NULL;
		if (ss)
			b->ss = ss;
		void *errs = ss ? grow(b->errs, n, sizeof(*b->errs)) : NULL;
		if (errs)
			b->errs = errs;
		void *rec = errs ? grow(b->rec, n, sizeof(*b->rec)) : NULL;
		if (!rec) {
			errno = ENOMEM;
			e->errnum = ENOMEM;
			strcpy(e->msg, "out of memory for the group's C buffers");
			return -1;
		}
		b->rec = rec;
		b->cap = n;
	}
	if (arena > b->arena_cap) {
		void *a = realloc(b->arena, arena);
		if (!a) {
			e->errnum = ENOMEM;
			strcpy(e->msg, "out of memory for the recipients' bytes");
			return -1;
		}
		b->arena = a;
		b->arena_cap = arena;
	}
	return 0;
}

void gcgo_free(struct gcgo_bufs *b)
{
	free(b->m);
	free(b->ss);
	free(b->errs);
	free(b->rec);
	free(b->arena);
	memset(b, 0, sizeof(*b));
}

int gcgo_setgroup(int fd, struct gcgo_bufs *b, size_t n, struct gcgo_err *e)
{
	for (size_t i = 0; i < n; i++)
		gcgo_sockaddr(&b->m[i], &b->ss[i]);
	return gc_setgroup(fd, n ? b->ss : NULL, n) == 0 ? 0 : gcgo_fail(e);
}

ssize_t gcgo_send(int fd, const void *buf, size_t len, struct gcgo_bufs *b, size_t n,
		  ssize_t *failed, struct gcgo_err *e)
{
	*failed = 0;
	ssize_t r = gc_send(fd, buf, len, MSG_DONTWAIT);
	if (r >= 0)
		return r;
	gcgo_fail(e);
	ssize_t f = gc_last_errors(fd, b->errs, n);
	/* A refusal of the call itself (a bad argument, no group) leaves the
	 * previous send's errors in place: the per-member failure is the one
	 * gc_send(3) reports with "N of M members failed" and that member's
	 * errno among the errors. */
	if (f > 0 && strstr(e->msg, "members failed")) {
		for (size_t i = 0; i < n; i++)
			if (b->errs[i] == e->errnum) {
				*failed = f;
				break;
			}
	}
	return -1;
}

int gcgo_sendgroup(int fd, const void *shared, size_t slen, struct gcgo_bufs *b, const size_t *lens,
		   size_t n, struct gcgo_err *e)
{
	struct iovec sh = { (void *)shared, slen };
	for (size_t i = 0; i < n; i++) {
		gcgo_sockaddr(&b->m[i], &b->rec[i].dest);
		const size_t *l = lens + 4 * i;
		b->rec[i].prepend = (struct iovec){ l[1] ? b->arena + l[0] : NULL, l[1] };
		b->rec[i].append = (struct iovec){ l[3] ? b->arena + l[2] : NULL, l[3] };
	}
	int r = gc_sendgroup(fd, &sh, b->rec, n, MSG_DONTWAIT, b->errs);
	return r >= 0 ? r : gcgo_fail(e);
}

int gcgo_set_engine(int fd, int engine, struct gcgo_err *e)
{
	return gc_set_engine(fd, (enum gc_engine)engine) == 0 ? 0 : gcgo_fail(e);
}

int gcgo_get_engine(int fd, struct gcgo_err *e)
{
	enum gc_engine g = gc_get_engine(fd);
	return g != GC_ENGINE_NONE ? (int)g : gcgo_fail(e);
}

int gcgo_auto_reason(int fd, char *buf, size_t len, struct gcgo_err *e)
{
	return gc_auto_reason(fd, buf, len) == 0 ? 0 : gcgo_fail(e);
}

int gcgo_engine_available(int engine, struct gcgo_err *e)
{
	return gc_engine_available((enum gc_engine)engine) == 0 ? 0 : gcgo_fail(e);
}

int gcgo_stats(int fd, struct gcgo_stats *out, struct gcgo_err *e)
{
	struct gc_stats st = GC_STATS_INIT();
	if (gc_stats(fd, &st) != 0)
		return gcgo_fail(e);
	out->group_sends = st.group_sends;
	out->datagrams = st.datagrams;
	out->bytes = st.bytes;
	out->failed = st.failed;
	out->user_fallback = st.user_fallback;
	out->last_errno = st.last_errno;
	return 0;
}

int gcgo_release(int fd, struct gcgo_err *e)
{
	return gc_release(fd) == 0 ? 0 : gcgo_fail(e);
}
