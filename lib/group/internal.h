/* SPDX-License-Identifier: MIT */
/*
 * Library-internal view of a socket's group state and the engine interface.
 *
 * Every group send, gc_send() included, is one "batch": n recipients, each a
 * gc_giovec (destination, prepend, append), plus one shared iovec.  gc_send()
 * keeps its group as gc_giovecs with empty prepend/append, so the engines see
 * only one shape of work.
 */
#ifndef GC_INTERNAL_H
#define GC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <groupcast/group.h>

#include "core/core.h" /* gc_errf(), gc_err(), GC_EXPORT, gc_now_ns() */

struct gc_batch {
	const struct iovec *shared; /* never NULL: empty iovec if the caller had none */
	const struct gc_giovec *rec;
	size_t n;
	int flags;
	int *gerrno; /* n entries, always valid: the library's own array if the caller's was NULL */
};

struct gc_uring; /* uring.c */
struct gc_kern;	 /* kernel.c */

/* The library's state for one socket (the "socket data structure" of the paper). */
struct gc_sock {
	pthread_mutex_t lock; /* serializes calls on this socket */
	atomic_uint refs;     /* the table's + one per call inside (group.c) */
	int fd;
	uint64_t cookie; /* SO_COOKIE: tells a reused fd number from this socket */
	int family;	 /* AF_INET or AF_INET6 */
	size_t limit;
	enum gc_engine want;   /* as asked with gc_set_engine() (maybe AUTO) */
	enum gc_engine engine; /* what sends: never AUTO */

	struct gc_giovec *group; /* the group, as recipients with empty prepend/append */
	size_t group_n, group_cap;
	size_t group_v4; /* IPv4 members in it: their datagrams are smaller */

	int *errs; /* per-member errno of the last gc_send() */
	size_t errs_cap, last_failed;
	int *rec_errs; /* gc_sendgroup()'s when the caller passes no gerrno */
	size_t rec_errs_cap;

	struct gc_stats stats;

	/* Engine scratch, grown like the group, never per send. */
	void *mmsg;	   /* mmsg.c: struct mmsghdr[] */
	struct iovec *iov; /* 3 iovecs per recipient (mmsg, uring) */
	size_t scratch_cap;
	struct gc_uring *uring;
	struct gc_kern *kern;

	/* AUTO and the kernel engine: the last check of kpolicy.c */
	uint64_t auto_checked_ns; /* 0: check at the next send */
	int auto_declined;
	char auto_why[256]; /* why AUTO took the kernel engine, or not */
};

struct gc_engine_ops {
	/* 0 if usable on this machine, else -errno (-ENOTSUP) with the message
	 * (gc_errf()) */
	int (*available)(void);
	/* Make s's resources (may be NULL): 0, or -errno with the message. */
	int (*prepare)(struct gc_sock *s);
	/* Send the batch; fill b->gerrno; return how many recipients were sent to. */
	size_t (*send)(struct gc_sock *s, const struct gc_batch *b);
	/* Free the engine's resources in s (may be NULL). */
	void (*release)(struct gc_sock *s);
};

extern const struct gc_engine_ops gc_loop_ops, gc_mmsg_ops, gc_uring_ops, gc_uring_zc_ops, gc_kernel_ops;

/* uring.c's test seam: the SQ size of new rings and the submit call (so a
 * unit test can make a ring smaller than a batch, or a submit stop short). */
struct io_uring;
struct gc_uring_tunables {
	unsigned sq_entries;
	int (*submit)(struct io_uring *ring);
};
extern struct gc_uring_tunables gc_uring_tunables;

/* group.c helpers shared by the engines */
socklen_t gc_addrlen(const struct sockaddr_storage *ss);
/* Fill msg/iov (3 slots) for recipient r of batch b; returns the iov count used. */
int gc_fill_msg(struct msghdr *msg, struct iovec *iov, const struct gc_batch *b, size_t r);
/*
 * Batch engines: call fn for each chunk of at most max recipients of b, with
 * m[0..cnt) filled for recipients base..base+cnt-1 (msg_name, iovecs into the
 * caller's buffers).  fn sends them, sets their gerrno and returns how many
 * were sent.  If the scratch cannot grow, every recipient gets ENOMEM.
 * Returns the recipients sent to.
 */
struct mmsghdr;
typedef size_t gc_chunk_fn(struct gc_sock *s, const struct gc_batch *b, struct mmsghdr *m,
			   size_t base, size_t cnt, void *ctx);
size_t gc_for_each_chunk (struct gc_sock *s, const struct gc_batch *b, size_t max, gc_chunk_fn * fn,
			  void *ctx);

#endif
