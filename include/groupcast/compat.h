/* SPDX-License-Identifier: MIT */
/*
 * groupcast/compat.h - the papers' own spelling, on top of groupcast/group.h.
 *
 * A program written against the kernel-groupcast paper (Karsten et al. 2005)
 * or the sendgroup() slides compiles with this include and nothing else
 * changed:
 *
 *     setsockopt(grp, SOL_SOCKET, SO_SETSENDGRP, addrs, n * sizeof(struct sockaddr_in));
 *     bytes = send(grp, buf, bytes, 0);
 *
 *     int sendgroup(int sd, struct giobuf *buf, size_t recnum, int flags, int *gerrno);
 *
 * Including this header routes setsockopt() and send() of the including file
 * through the library (macros), because the option is not a real kernel one:
 * SO_SETSENDGRP (and the slides' SO_SETGRP) attach the group with
 * gc_setgroup(); send() on a socket with a group goes to gc_send(); every
 * other call is passed to the C library untouched.  optlen must be a multiple
 * of sizeof(struct sockaddr_in) (or of sizeof(struct sockaddr_in6) on an
 * AF_INET6 socket); 0 clears the group.
 */
#ifndef GROUPCAST_COMPAT_H
#define GROUPCAST_COMPAT_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <groupcast/group.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Not a kernel option: chosen far from the kernel's SOL_SOCKET numbers. */
#define SO_SETSENDGRP 0x4753
#define SO_SETGRP SO_SETSENDGRP

/* One recipient, as in the sendgroup() slides. */
struct giovec {
	struct sockaddr_in giov_dest; /* Destination address */
	struct iovec giov_prepend;    /* Prepended buffer */
	struct iovec giov_append;     /* Appended buffer */
};

/* Shared buffer followed by recnum per-recipient records (recinfo[recnum]). */
struct giobuf {
	struct iovec shared;	  /* Shared data buffer */
	struct giovec recinfo[1]; /* Per-recipient info. */
};

/* Bytes needed for a giobuf with recnum recipients. */
#define GIOBUF_SIZE(recnum) \
	(offsetof(struct giobuf, recinfo) + (size_t)(recnum) * sizeof(struct giovec))

/* Same contract as gc_sendgroup() (returns recipients sent to; gerrno[i]). */
int sendgroup(int sd, struct giobuf *buf, size_t recnum, int flags, int *gerrno);

int gc_compat_setsockopt(int sd, int level, int optname, const void *optval, socklen_t optlen);
ssize_t gc_compat_send(int sd, const void *buf, size_t len, int flags);

#define setsockopt(sd, level, optname, optval, optlen) \
	gc_compat_setsockopt((sd), (level), (optname), (optval), (optlen))
#define send(sd, buf, len, flags) gc_compat_send((sd), (buf), (len), (flags))

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_COMPAT_H */
