/* SPDX-License-Identifier: MIT */
/*
 * compat.c - the papers' spelling (groupcast/compat.h): SO_SETSENDGRP through
 * setsockopt(), send() to the group, and sendgroup() with struct giobuf.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* compat.h turns these names into macros; this file wants the real calls. */
#include <groupcast/compat.h>
#undef setsockopt
#undef send

/* Up to this many members are converted on the stack, more on the heap. */
#define STACK_MEMBERS 64

GC_EXPORT int gc_compat_setsockopt(int sd, int level, int optname, const void *optval, socklen_t optlen)
{
	struct sockaddr_storage stack[STACK_MEMBERS], *ss = stack;
	size_t elem, n;
	int domain = AF_INET, ret;
	socklen_t dl = sizeof(domain);

	if (level != SOL_SOCKET || optname != SO_SETSENDGRP)
		return setsockopt(sd, level, optname, optval, optlen);
	/* The paper passes an array of sockaddr_in; an AF_INET6 socket an array of sockaddr_in6. */
	if (getsockopt(sd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) == 0 && domain == AF_INET6)
		elem = sizeof(struct sockaddr_in6);
	else
		elem = sizeof(struct sockaddr_in);
	if (optlen % elem)
		return gc_seterr(EINVAL, "optlen: %u is not a multiple of %zu (one sockaddr per member)",
				 (unsigned)optlen, elem);
	n = optlen / elem;
	if (n && !optval)
		return gc_seterr(EFAULT, "optval: NULL with optlen %u", (unsigned)optlen);
	if (n > STACK_MEMBERS && !(ss = calloc(n, sizeof(*ss))))
		return gc_seterr(ENOMEM, "optlen: no memory for %zu members", n);
	for (size_t i = 0; i < n; i++)
		memcpy(&ss[i], (const char *)optval + i * elem, elem);
	ret = gc_setgroup(sd, ss, n);
	if (ss != stack)
		free(ss);
	return ret;
}

GC_EXPORT ssize_t gc_compat_send(int sd, const void *buf, size_t len, int flags)
{
	ssize_t n = gc_getgroup_size(sd);

	if (n <= 0) /* no group, or not a UDP socket we know: the ordinary send() */
		return send(sd, buf, len, flags);
	return gc_send(sd, buf, len, flags);
}

GC_EXPORT int sendgroup(int sd, struct giobuf *buf, size_t recnum, int flags, int *gerrno)
{
	struct gc_giovec stack[STACK_MEMBERS], *rec = stack;
	int ret;

	if (!buf && recnum > 0)
		return gc_seterr(EFAULT, "buf: NULL with recnum = %zu", recnum);
	if (recnum > GC_MAX_LIMIT)
		return gc_seterr(E2BIG, "recnum: %zu is above %u", recnum, GC_MAX_LIMIT);
	if (recnum > STACK_MEMBERS && !(rec = malloc(recnum * sizeof(*rec))))
		return gc_seterr(ENOMEM, "recnum: no memory for %zu recipients", recnum);
	for (size_t i = 0; i < recnum; i++) {
		memset(&rec[i].dest, 0, sizeof(rec[i].dest));
		memcpy(&rec[i].dest, &buf->recinfo[i].giov_dest, sizeof(struct sockaddr_in));
		rec[i].prepend = buf->recinfo[i].giov_prepend;
		rec[i].append = buf->recinfo[i].giov_append;
	}
	ret = gc_sendgroup(sd, buf ? &buf->shared : NULL, recnum ? rec : NULL, recnum, flags, gerrno);
	if (rec != stack)
		free(rec);
	return ret;
}
