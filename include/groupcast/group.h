/* SPDX-License-Identifier: MIT */
/*
 * groupcast/group.h - group unicast and sendgroup() on a stock Linux kernel.
 *
 * A group of unicast receivers is attached to a UDP socket; one call sends the
 * same datagram to all of them (Karsten et al., "Efficient Operating System
 * Support for Group Unicast", NOSSDAV 2005), or a shared payload with private
 * per-recipient prepend/append bytes (the sendgroup() follow-up).
 *
 * Threads: calls on different sockets never block each other; calls on the
 * same socket are serialized by the library.
 *
 * Contract: errors, sized structs, names and lifetime as in every module
 * (groupcast/common.h).  Failures that happen per member while sending (a
 * member with no route, a full queue) are never silent: see "Partial
 * failure" below.
 *
 * Partial failure contract:
 *  - gc_sendgroup() tries every recipient.  gerrno[i] is 0 when recipient i's
 *    datagram was handed to the kernel, or its errno.  The return value is the
 *    number of recipients sent to; it is less than recnum exactly when some
 *    recipient failed (gerrno may be NULL if the caller only needs the count).
 *    A recipient that breaks the rules (a bad destination, a NULL buffer, a
 *    datagram too big) is that recipient's failure, not the call's: it gets
 *    its errno in gerrno[i], is skipped, and the others are sent.  Only the
 *    call's own arguments (sd, flags, rec, shared, recnum) fail it with -1.
 *  - gc_setgroup() replaces the group whole or not at all: one bad member
 *    fails the call and the previous group stays in place.
 *  - gc_send() tries every member.  It returns len when every member was sent
 *    to.  If any member failed it returns -1 with errno set to the first failed
 *    member's error; the members that did not fail were still sent to, and
 *    gc_last_errors() tells which members failed and why.
 *  - gc_stats() counts datagrams sent and failed per socket.
 *
 * Man pages: groupcast(7), gc_setgroup(3), gc_send(3), gc_sendgroup(3),
 * gc_set_engine(3).
 */
#ifndef GROUPCAST_GROUP_H
#define GROUPCAST_GROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <groupcast/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default and hard cap of the per-socket group limit (gc_set_limit()). */
#define GC_DEFAULT_LIMIT 65536u
#define GC_MAX_LIMIT (1u << 24)

/*
 * Largest UDP payload, in bytes, that one datagram can carry: gc_send() and
 * gc_sendgroup() refuse longer ones with EMSGSIZE.  The IP total length is 16
 * bits: IPv4 counts its 20-byte header and the 8-byte UDP header inside it
 * (65535 - 28); IPv6 keeps its header outside the payload length (65535 - 8).
 * An IPv6 socket sending to an IPv4 member (dual-stack) gets the IPv4 limit.
 */
#define GC_UDP4_MAX 65507u
#define GC_UDP6_MAX 65527u

/* Flags accepted by gc_send() and gc_sendgroup(); anything else is EINVAL. */
#define GC_SEND_FLAGS (MSG_DONTWAIT | MSG_CONFIRM | MSG_DONTROUTE | MSG_NOSIGNAL)

/*
 * Attach a group to UDP socket sd, replacing the whole previous group.
 * members[i] is a struct sockaddr_in or sockaddr_in6 stored in a
 * sockaddr_storage.  n == 0 clears the group.  Memory is reallocated only when
 * the group grows, so replacing the group before every send is cheap.
 *
 * Family rules: an AF_INET socket takes AF_INET members.  An AF_INET6 socket
 * takes AF_INET6 members; it also takes AF_INET members when it is dual-stack
 * (IPV6_V6ONLY off), and sends IPv4 datagrams to them, as the kernel does for
 * an AF_INET address given to such a socket.  A v4-mapped AF_INET6 member
 * (::ffff:a.b.c.d) is accepted on the same terms.
 *
 * Errors (the old group is kept on every error):
 *   EFAULT        members is NULL and n > 0
 *   EBADF         sd is not an open file descriptor
 *   ENOTSOCK      sd is not a socket
 *   EPROTOTYPE    sd is a socket but not an AF_INET/AF_INET6 UDP socket
 *   E2BIG         n is above the socket's limit (gc_set_limit())
 *   EAFNOSUPPORT  a member's family does not fit the socket (see above)
 *   EINVAL        a member has port 0, an unspecified, multicast or
 *                 limited-broadcast address
 *   ENOMEM        out of memory
 */
int gc_setgroup(int sd, const struct sockaddr_storage *members, size_t n);

/* Number of members in sd's group (0 if none), or -1 with errno. */
ssize_t gc_getgroup_size(int sd);

/*
 * Send buf to every member of sd's group as one datagram each.
 * Returns len if every member was sent to.  Errors:
 *   EDESTADDRREQ  sd has no group
 *   EFAULT        buf is NULL and len > 0
 *   EMSGSIZE      len is above GC_UDP4_MAX (IPv4 group) or GC_UDP6_MAX
 *   EINVAL        flags outside GC_SEND_FLAGS
 *   EBADF, ENOTSOCK, EPROTOTYPE as for gc_setgroup()
 *   any other     the first failed member's errno; the other members were
 *                 sent to; see gc_last_errors()
 */
ssize_t gc_send(int sd, const void *buf, size_t len, int flags);

/*
 * After gc_send(): copy the per-member errno of the last gc_send() on sd into
 * gerrno[0..n) (0 = sent), and return the number of members that failed in
 * that send.  gerrno may be NULL to get only the count.
 */
ssize_t gc_last_errors(int sd, int *gerrno, size_t n);

/* One recipient of gc_sendgroup(): it gets prepend | shared | append. */
struct gc_giovec {
	struct sockaddr_storage dest;
	struct iovec prepend;
	struct iovec append;
};

/*
 * Send one datagram to each of rec[0..recnum): rec[i].prepend, then *shared,
 * then rec[i].append.  The group set with gc_setgroup() is not used; the
 * socket's engine and limit are.  shared may be NULL (empty payload); an
 * iovec with iov_len 0 may have iov_base NULL.
 *
 * Returns the number of recipients sent to, and fills gerrno[i] (if gerrno is
 * not NULL) with 0 or recipient i's errno.  Every argument is checked before
 * anything is sent; on the errors below nothing was sent and gerrno is
 * untouched:
 *   EFAULT        rec is NULL with recnum > 0, or an iovec has a NULL base
 *                 with a non-zero length
 *   E2BIG         recnum is above the socket's limit
 *   EMSGSIZE      a recipient's datagram is above GC_UDP4_MAX (IPv4
 *                 destination) or GC_UDP6_MAX
 *   EAFNOSUPPORT, EINVAL   a destination as in gc_setgroup()
 *   EINVAL        flags outside GC_SEND_FLAGS
 *   EBADF, ENOTSOCK, EPROTOTYPE as for gc_setgroup()
 */
int gc_sendgroup(int sd, const struct iovec *shared, const struct gc_giovec *rec, size_t recnum,
		 int flags, int *gerrno);

/*
 * Engines: all send the same bytes.  AUTO picks the best one the machine
 * allows (see groupcast(7) for the order and the benchmark behind it).
 */
enum gc_engine {
	GC_ENGINE_NONE = -1, /* returned by gc_get_engine() on error */
	GC_ENGINE_AUTO = 0,
	GC_ENGINE_LOOP,	    /* sendto() per member: the papers' user-groupcast */
	GC_ENGINE_MMSG,	    /* sendmmsg() in batches, iovecs into the caller's buffers */
	GC_ENGINE_URING,    /* io_uring SENDMSG, one submit per group send */
	GC_ENGINE_URING_ZC, /* io_uring SENDMSG_ZC, waits for the zero-copy notifications */
	GC_ENGINE_KERNEL,   /* eBPF fan-out in the kernel: CAP_BPF + CAP_NET_ADMIN */
	GC_ENGINE_COUNT
};

/*
 * Choose sd's engine.  Errors: EINVAL (not an engine), ENOTSUP (the engine is
 * not available here; gc_errmsg() says why), EBADF/ENOTSOCK/EPROTOTYPE.
 */
int gc_set_engine(int sd, enum gc_engine e);

/* The engine that sends for sd (AUTO resolved), or GC_ENGINE_NONE with errno. */
enum gc_engine gc_get_engine(int sd);

/* Why AUTO took the kernel engine for sd, or why not (not available here, or
 * declined because it would bypass an egress policy: groupcast(7)), as one
 * line in buf (len bytes, truncated, always terminated).  0, or -1 with errno. */
int gc_auto_reason(int sd, char *buf, size_t len);

/* Whether engine e can be used on this machine: 0, or -1 with errno (ENOTSUP)
 * and the reason in gc_errmsg(). */
int gc_engine_available(enum gc_engine e);

/* "auto", "loop", "mmsg", "uring", "uring_zc", "kernel"; NULL if unknown. */
const char *gc_engine_name(enum gc_engine e);
/* The engine named s, or GC_ENGINE_NONE with errno EINVAL. */
enum gc_engine gc_engine_from_name(const char *s);

/* Set sd's limit on group size and recnum (1..GC_MAX_LIMIT; default
 * GC_DEFAULT_LIMIT).  EINVAL if out of range; E2BIG if below the size of the
 * group already attached. */
int gc_set_limit(int sd, size_t limit);
/* sd's limit, or -1 with errno. */
ssize_t gc_get_limit(int sd);

/* Per-socket counters since the socket's state was created.  A sized struct
 * (groupcast/common.h) the library fills: set it up with GC_STATS_INIT(). */
struct gc_stats {
	size_t sz;		/* sizeof(struct gc_stats) */
	uint64_t group_sends;	/* gc_send() and gc_sendgroup() calls that reached an engine */
	uint64_t datagrams;	/* datagrams handed to the kernel */
	uint64_t bytes;		/* their payload bytes */
	uint64_t failed;	/* datagrams that failed or were refused (reported per member) */
	uint64_t user_fallback; /* kernel engine: datagrams it left to a user engine */
	int32_t last_errno;	/* errno of the most recent failed datagram, or 0 */
};
#define GC_STATS_INIT(...)                                 \
	{                                                  \
		.sz = sizeof(struct gc_stats), __VA_ARGS__ \
	}
int gc_stats(int sd, struct gc_stats *st);

/*
 * Free the library's state for sd (group, engine resources).  sd itself stays
 * open.  Closing sd without gc_release() is safe: the state is recognised as
 * stale by the socket's cookie when the fd number is reused, and freed then.
 * Returns 0, or -1 with EBADF if sd is negative.  Releasing a socket with no
 * state is not an error.
 */
int gc_release(int sd);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_GROUP_H */
