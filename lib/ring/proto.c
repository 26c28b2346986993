/* SPDX-License-Identifier: MIT */
/*
 * proto.c - the control protocol between applications and an engine: the
 * messages, how they travel, and the checks of a request that need no
 * engine state (gc_srv_decode(), which fuzz/ring_req_fuzz.c feeds).
 *
 * An engine serves its clients over SOCK_SEQPACKET Unix sockets: the
 * socketpair of the process that started it (thread mode), and, in daemon
 * mode, every process that connected to its listening socket.  Both use the
 * same requests, so the daemon path is the one every test exercises.
 *
 *   ATTACH  {entries, zone_size} + [ring memfd, zone memfd, UDP socket]
 *           -> {ring_id} + [notify eventfd]
 *   DETACH  {ring_id}
 *   STATS   -> {struct gc_wire_stats}
 *   HELLO   -> {} (the engine serves this client)
 *
 * The engine trusts nothing a client sends.  Descriptors must be what they
 * claim: memfds sealed against shrinking (F_SEAL_SHRINK, so that the
 * engine's mappings can never fault) and large enough for the layout the
 * engine computes itself, and a connected UDP socket.  A reply never carries
 * an address: the process that started an engine finds a ring's connection by
 * its ring id (handle.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <stddef.h>
#include <unistd.h>
#include "ring/internal.h"

/* ---- the engine's counters on the wire ------------------------------------ */

/* Index on the wire -> field of the public struct.  Append only. */
static const size_t wire_stats[] = {
	offsetof(struct gc_ring_engine_stats, clients),
	offsetof(struct gc_ring_engine_stats, rings),
	offsetof(struct gc_ring_engine_stats, rounds),
	offsetof(struct gc_ring_engine_stats, sleeps),
	offsetof(struct gc_ring_engine_stats, notifies),
	offsetof(struct gc_ring_engine_stats, packets),
	offsetof(struct gc_ring_engine_stats, bytes),
	offsetof(struct gc_ring_engine_stats, syscalls),
	offsetof(struct gc_ring_engine_stats, gso),
	offsetof(struct gc_ring_engine_stats, violations),
	offsetof(struct gc_ring_engine_stats, refused),
	offsetof(struct gc_ring_engine_stats, limited),
};
_Static_assert(sizeof(wire_stats) / sizeof(wire_stats[0]) <= GC_WIRE_STATS_MAX,
	       "struct gc_wire_stats has room for every counter");
_Static_assert(sizeof(struct gc_ring_engine_stats) ==
		       sizeof(size_t) + sizeof(wire_stats) / sizeof(wire_stats[0]) * 8,
	       "every counter of struct gc_ring_engine_stats is in wire_stats[]");

#define N_WIRE_STATS ((uint32_t)(sizeof(wire_stats) / sizeof(wire_stats[0])))

void gc_stats_to_wire(const struct gc_ring_engine_stats *st, struct gc_wire_stats *w)
{
	memset(w, 0, sizeof(*w));
	w->n = N_WIRE_STATS;
	for (uint32_t i = 0; i < N_WIRE_STATS; i++)
		memcpy(&w->v[i], (const char *)st + wire_stats[i], sizeof(uint64_t));
}

unsigned gc_stats_from_wire(const struct gc_wire_stats *w, struct gc_ring_engine_stats *st)
{
	uint32_t n = w->n < N_WIRE_STATS ? w->n : N_WIRE_STATS;

	memset(st, 0, sizeof(*st));
	for (uint32_t i = 0; i < n; i++)
		memcpy((char *)st + wire_stats[i], &w->v[i], sizeof(uint64_t));
	return n;
}

/* ---- descriptor passing ------------------------------------------------- */

ssize_t gc_proto_send(int sock, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * GC_PROTO_MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	return n < 0 ? -errno : n;
}

ssize_t gc_proto_recv(int sock, void *buf, size_t len, int *fds, int *nfds, int flags, int *mflags)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * GC_PROTO_MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { buf, len };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)
	};

	*nfds = 0;
	ssize_t n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	*mflags = mh.msg_flags;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < GC_PROTO_MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

/* ---- client side -------------------------------------------------------- */

/* Read one reply of any kind: its length, or -errno with the message. */
static ssize_t recv_rep(struct gc_ring_engine *e, const char *fn, struct gc_rep *rep, int *rfd, int flags)
{
	int got[GC_PROTO_MAX_FDS], ngot = 0, mflags = 0;

	*rfd = -1;
	memset(rep, 0, sizeof(*rep));
	ssize_t n = gc_proto_recv(e->fd, rep, sizeof(*rep), got, &ngot, flags, &mflags);
	if (n < 0)
		return gc_errf(n == -EAGAIN ? ETIMEDOUT : (int)-n, "%s: no reply from the engine", fn);
	for (int i = ngot > 1 ? 1 : ngot; i < ngot; i++)
		close(got[i]);
	if (ngot)
		*rfd = got[0];
	if (n == 0)
		return gc_errf(ECONNRESET, "%s: the engine closed the connection", fn);
	if ((size_t)n < GC_REP_HEAD)
		return gc_errf(EPROTO, "%s: malformed reply from the engine (%zd bytes)", fn, n);
	if (rep->version != GC_PROTO_VERSION)
		return gc_errf(EPROTONOSUPPORT,
			       "%s: the engine answered in protocol version %u "
			       "(%zd bytes); this library speaks version %u",
			       fn, rep->version, n, GC_PROTO_VERSION);
	if (n != (ssize_t)sizeof(*rep) || (mflags & (MSG_TRUNC | MSG_CTRUNC)))
		return gc_errf(EPROTO, "%s: malformed reply from the engine (%zd bytes)", fn, n);
	rep->msg[sizeof(rep->msg) - 1] = '\0';
	return n;
}

/* A notice answers no request: the engine refused us and hung up. */
static int notice(const char *fn, const struct gc_rep *rep)
{
	return gc_errf(rep->err > 0 ? rep->err : EPROTO, "%s: the engine refused the connection: %s",
		       fn, rep->err ? rep->msg : "(no reason given)");
}

static uint32_t next_seq(struct gc_ring_engine *e)
{
	if (++e->seq == 0) /* 0 marks notices */
		e->seq = 1;
	return e->seq;
}

static void drop_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int gc_client_call(struct gc_ring_engine *e, const char *fn, struct gc_req *q, const int *fds,
		   int nfds, struct gc_rep *rep, int *rfd)
{
	*rfd = -1;
	q->seq = next_seq(e);
	ssize_t sent = gc_proto_send(e->fd, q, sizeof(*q), fds, nfds, 0);
	if (sent != (ssize_t)sizeof(*q)) {
		int err = sent < 0 ? (int)-sent : EPROTO;
		/* refused at accept: the reason may be waiting for us */
		bool refused = (err == EPIPE || err == ECONNRESET) &&
			recv_rep(e, fn, rep, rfd, MSG_DONTWAIT) > 0 && rep->seq == 0;
		drop_fd(rfd);
		if (refused)
			return notice(fn, rep);
		return gc_errf(err, "%s: sending the request to the engine failed", fn);
	}
	/* Replies come in the order of the requests, so one that is not ours
	 * answers a request we gave up on (timed out): skip it.  Bounded: we
	 * cannot have given up on more requests than we sent. */
	for (unsigned skipped = 0; skipped < 1024; skipped++) {
		ssize_t n = recv_rep(e, fn, rep, rfd, 0);
		/* An engine that hangs up on a request it did not read (it
		 * refused us at accept) resets the connection, and the first
		 * read reports that before the notice queued ahead of it. */
		if (n == -ECONNRESET) {
			n = recv_rep(e, fn, rep, rfd, MSG_DONTWAIT);
			if (n < 0 || rep->seq != 0) {
				drop_fd(rfd);
				return gc_errf(ECONNRESET, "%s: the engine reset the connection", fn);
			}
		}
		int r;
		if (n < 0)
			r = (int)n;
		else if (rep->seq == 0)
			r = notice(fn, rep);
		else if (rep->seq == q->seq && rep->err)
			r = gc_errf(rep->err > 0 ? rep->err : EPROTO, "%s: %s", fn, rep->msg);
		else if (rep->seq == q->seq)
			return 0;
		else {
			e->stale++;
			drop_fd(rfd);
			if (rep->op == GC_OP_ATTACH && rep->err == 0) {
				/* The engine attached a ring we took for refused:
				 * let it go.  Its reply is skipped in turn. */
				struct gc_req d = { .op = GC_OP_DETACH,
						    .version = GC_PROTO_VERSION,
						    .seq = next_seq(e),
						    .ring_id = rep->ring_id };
				gc_proto_send(e->fd, &d, sizeof(d), NULL, 0, MSG_DONTWAIT);
			}
			continue;
		}
		drop_fd(rfd);
		return r;
	}
	return gc_errf(EPROTO, "%s: the engine sent 1024 replies to other requests (want %u)", fn,
		       q->seq);
}

/* ---- server side: decoding a request ------------------------------------ */

int gc_rep_err(struct gc_rep *rep, int err, const char *fmt, ...)
{
	va_list ap;

	rep->err = err;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
	return -err;
}

/*
 * fd must be a memfd sealed against shrinking, of at least need bytes, so
 * that the engine's mapping can never fault.  On tmpfs only: a hugetlbfs
 * memfd takes seals too, but a hole punched in it (fallocate) frees the huge
 * page under the engine's mapping, which then faults (SIGBUS).
 */
static int check_memfd(int fd, uint64_t need, const char *what, struct gc_rep *rep)
{
	struct stat st;
	struct statfs fs;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return gc_rep_err(rep, EINVAL, "the %s descriptor is not a memfd", what);
	if (fstatfs(fd, &fs) < 0)
		return gc_rep_err(rep, EINVAL, "the %s descriptor is not a memfd (fstatfs: %s)",
				  what, strerror(errno));
	if (fs.f_type == HUGETLBFS_MAGIC)
		return gc_rep_err(rep, EINVAL,
				  "the %s memfd is on hugetlbfs (MFD_HUGETLB): a punched "
				  "hole would fault the engine; use a memfd on tmpfs",
				  what);
	if (fs.f_type != TMPFS_MAGIC)
		return gc_rep_err(rep, EINVAL,
				  "the %s descriptor is not a memfd (filesystem 0x%lx, "
				  "not tmpfs)",
				  what, (unsigned long)fs.f_type);
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return gc_rep_err(rep, EINVAL, "the %s descriptor is not a memfd (no seals)", what);
	if (!(seals & F_SEAL_SHRINK))
		return gc_rep_err(rep, EPERM,
				  "the %s memfd is not sealed against shrinking "
				  "(F_SEAL_SHRINK)",
				  what);
	if ((uint64_t)st.st_size < need)
		return gc_rep_err(rep, EINVAL, "the %s memfd has %lld bytes, needs %llu", what,
				  (long long)st.st_size, (unsigned long long)need);
	return 0;
}

/* The checks of an ATTACH request that need no client state. */
static int decode_attach(const struct gc_req *q, const int *fds, int nfds, struct gc_rep *rep)
{
	char why[160];

	if (nfds != 3)
		return gc_rep_err(rep, EINVAL,
				  "attach carries %d descriptors, wants 3 "
				  "(ring memfd, zone memfd, socket)",
				  nfds);
	if (q->entries < 2 || q->entries > GC_RING_MAX_ENTRIES)
		return gc_rep_err(rep, EINVAL, "entries %u is not in [2, %u]", q->entries,
				  GC_RING_MAX_ENTRIES);
	if (q->ack_entries != q->entries)
		return gc_rep_err(rep, EINVAL, "ack_entries %u differs from entries %u",
				  q->ack_entries, q->entries);
	if (q->zone_size == 0 || q->zone_size > GC_ZONE_MAX)
		return gc_rep_err(rep, EINVAL, "zone size %llu is not in [1, %llu]",
				  (unsigned long long)q->zone_size, (unsigned long long)GC_ZONE_MAX);
	uint64_t need = gc_shm_size(q->entries, q->ack_entries, (uint64_t)gc_page_size());
	int r = check_memfd(fds[0], need, "ring", rep);
	if (r < 0 || (r = check_memfd(fds[1], q->zone_size, "zone", rep)) < 0)
		return r;
	if (fds[2] < 0)
		return gc_rep_err(rep, EBADF, "the socket is missing");
	r = gc_udp_check(fds[2], why, sizeof(why));
	if (r < 0)
		return gc_rep_err(rep, -r, "the socket is %s", why);
	return 0;
}

int gc_srv_decode(const void *buf, size_t n, int mflags, const int *fds, int nfds, struct gc_req *q,
		  struct gc_rep *rep)
{
	memset(q, 0, sizeof(*q));
	memcpy(q, buf, n < sizeof(*q) ? n : sizeof(*q));
	/* what the client needs to match the reply, as far as it came */
	rep->version = GC_PROTO_VERSION;
	rep->seq = n >= offsetof(struct gc_req, seq) + sizeof(q->seq) ? q->seq : 0;
	rep->op = n >= sizeof(q->op) ? q->op : 0;
	/* the version first: another version may have another size */
	if (n < offsetof(struct gc_req, version) + sizeof(q->version))
		return gc_rep_err(rep, EPROTO, "malformed request (%zu bytes)", n);
	if (q->version != GC_PROTO_VERSION)
		return gc_rep_err(rep, EPROTONOSUPPORT,
				  "protocol version %u; this engine speaks "
				  "version %u",
				  q->version, GC_PROTO_VERSION);
	if (n != sizeof(*q) || (mflags & (MSG_TRUNC | MSG_CTRUNC)))
		return gc_rep_err(rep, EPROTO, "malformed request (%zu bytes%s)", n,
				  mflags & MSG_CTRUNC	       ? ", descriptors cut off"
					  : mflags & MSG_TRUNC ? " or more"
							       : "");
	if (q->seq == 0)
		return gc_rep_err(rep, EPROTO, "request without a sequence number");
	switch (q->op) {
	case GC_OP_ATTACH: return decode_attach(q, fds, nfds, rep);
	case GC_OP_DETACH:
	case GC_OP_STATS:
	case GC_OP_HELLO:
		if (nfds)
			return gc_rep_err(rep, EINVAL, "request %u carries descriptors", q->op);
		return 0;
	default: return gc_rep_err(rep, EINVAL, "unknown request %u", q->op);
	}
}
