/* SPDX-License-Identifier: MIT */
/*
 * daemon.c - the control protocol between applications and an engine.
 *
 * An engine serves its clients over SOCK_SEQPACKET Unix sockets: the
 * socketpair of the process that started it (thread mode), and, in daemon
 * mode, every process that connected to its listening socket.  Both use the
 * same requests, so the daemon path is the one every test exercises.
 *
 *   ATTACH  {entries, zone_size} + [ring memfd, zone memfd, UDP socket]
 *           -> {ring_id} + [notify eventfd]
 *   DETACH  {ring_id}
 *   STATS   -> {struct gc_ring_engine_stats}
 *
 * The engine trusts nothing a client sends.  Descriptors must be what they
 * claim: memfds sealed against shrinking (F_SEAL_SHRINK, so that the
 * engine's mappings can never fault) and large enough for the layout the
 * engine computes itself, and a connected UDP socket.  A client sends only on
 * its own sockets, and a ring only names bytes of a zone its own client
 * passed.  A malformed request gets an error reply; a client that cannot take
 * a reply is dropped.  The engine never blocks on a client.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "ring/srv.h"

#define MAX_FDS 4 /* room for one more than any request carries, to notice extras */

/* ---- descriptor passing ------------------------------------------------- */

static ssize_t send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * MAX_FDS)];
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
	return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

/* Receive one message and up to MAX_FDS descriptors (all others closed). */
static ssize_t recv_fds(int sock, void *buf, size_t len, int *fds, int *nfds, int flags,
			int *mflags)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };

	*nfds = 0;
	ssize_t n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	*mflags = mh.msg_flags;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

/* ---- client side -------------------------------------------------------- */

int gc_client_call(struct gc_ring_engine *e, const char *fn, const struct gc_req *q, const int *fds,
		   int nfds, struct gc_rep *rep, int *rfd)
{
	int got[MAX_FDS], ngot = 0, mflags = 0;

	*rfd = -1;
	if (send_fds(e->fd, q, sizeof(*q), fds, nfds, 0) != (ssize_t)sizeof(*q))
		return gc_seterr(errno ? errno : EPROTO, "%s: sending the request to the engine failed",
				 fn);
	memset(rep, 0, sizeof(*rep));
	ssize_t n = recv_fds(e->fd, rep, sizeof(*rep), got, &ngot, 0, &mflags);
	if (n < 0)
		return gc_seterr(errno == EAGAIN ? ETIMEDOUT : errno,
				 "%s: no reply from the engine", fn);
	for (int i = ngot > 1 ? 1 : ngot; i < ngot; i++)
		close(got[i]);
	if (n == 0) {
		if (ngot)
			close(got[0]);
		return gc_seterr(ECONNRESET, "%s: the engine closed the connection", fn);
	}
	if (n != (ssize_t)sizeof(*rep) || (mflags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (ngot)
			close(got[0]);
		return gc_seterr(EPROTO, "%s: malformed reply from the engine", fn);
	}
	if (rep->err) {
		if (ngot)
			close(got[0]);
		rep->msg[sizeof(rep->msg) - 1] = '\0';
		return gc_seterr(rep->err, "%s: %s", fn, rep->msg);
	}
	if (ngot)
		*rfd = got[0];
	return 0;
}

/* ---- server side -------------------------------------------------------- */

static int rep_err(struct gc_rep *rep, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int rep_err(struct gc_rep *rep, int err, const char *fmt, ...)
{
	va_list ap;

	rep->err = err;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* fd must be a memfd sealed against shrinking, of at least need bytes. */
static int check_memfd(int fd, uint64_t need, const char *what, struct gc_rep *rep,
		       struct stat *st)
{
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))
		return rep_err(rep, EINVAL, "the %s descriptor is not a memfd", what);
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return rep_err(rep, EINVAL, "the %s descriptor is not a memfd (no seals)", what);
	if (!(seals & F_SEAL_SHRINK))
		return rep_err(rep, EPERM, "the %s memfd is not sealed against shrinking "
			       "(F_SEAL_SHRINK)", what);
	if ((uint64_t)st->st_size < need)
		return rep_err(rep, EINVAL, "the %s memfd has %lld bytes, needs %llu", what,
			       (long long)st->st_size, (unsigned long long)need);
	return 0;
}

static struct gc_zmap *zmap_get(struct gc_client *cl, int fd, const struct stat *st,
				uint64_t size, struct gc_rep *rep)
{
	for (struct gc_zmap *z = cl->zones; z; z = z->next) {
		if (z->dev == st->st_dev && z->ino == st->st_ino && z->size == size) {
			z->refs++;
			return z;
		}
	}
	struct gc_zmap *z = calloc(1, sizeof(*z));
	if (!z) {
		rep_err(rep, ENOMEM, "out of memory");
		return NULL;
	}
	/* read-only: the engine never writes packet data */
	void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rep_err(rep, errno, "mapping the %llu-byte zone failed", (unsigned long long)size);
		free(z);
		return NULL;
	}
	z->dev = st->st_dev;
	z->ino = st->st_ino;
	z->size = size;
	z->map = map;
	z->refs = 1;
	z->next = cl->zones;
	cl->zones = z;
	return z;
}

void gc_zmap_put(struct gc_client *cl, struct gc_zmap *z)
{
	if (--z->refs)
		return;
	for (struct gc_zmap **pp = &cl->zones; *pp; pp = &(*pp)->next) {
		if (*pp == z) {
			*pp = z->next;
			break;
		}
	}
	munmap((void *)z->map, z->size);
	free(z);
}

static int srv_attach(struct gc_srv *s, struct gc_client *cl, const struct gc_req *q, int *fds,
		      int nfds, struct gc_rep *rep, int *rfd)
{
	struct stat rst, zst;
	char why[160];

	if (nfds != 3)
		return rep_err(rep, EINVAL, "attach carries %d descriptors, wants 3 "
			       "(ring memfd, zone memfd, socket)", nfds);
	if (cl->nrings >= s->p.max_rings)
		return rep_err(rep, E2BIG, "the client has %u rings already (the engine's limit)",
			       cl->nrings);
	if (q->entries < 2 || q->entries > GC_RING_MAX_ENTRIES)
		return rep_err(rep, EINVAL, "entries %u is not in [2, %u]", q->entries,
			       GC_RING_MAX_ENTRIES);
	if (q->ack_entries != q->entries)
		return rep_err(rep, EINVAL, "ack_entries %u differs from entries %u", q->ack_entries,
			       q->entries);
	if (q->zone_size == 0 || q->zone_size > GC_ZONE_MAX)
		return rep_err(rep, EINVAL, "zone size %llu is not in [1, %llu]",
			       (unsigned long long)q->zone_size, (unsigned long long)GC_ZONE_MAX);
	uint64_t need = gc_shm_size(q->entries, q->ack_entries, (uint64_t)gc_page_size());
	if (check_memfd(fds[0], need, "ring", rep, &rst) < 0 ||
	    check_memfd(fds[1], q->zone_size, "zone", rep, &zst) < 0)
		return -1;
	if (gc_udp_check(fds[2], why, sizeof(why)) < 0)
		return rep_err(rep, errno, "the socket is %s", why);

	struct gc_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return rep_err(rep, ENOMEM, "out of memory");
	c->sock = c->efd = -1;
	c->cl = cl;
	c->pend = calloc(s->p.batch, sizeof(*c->pend));
	if (!c->pend) {
		rep_err(rep, ENOMEM, "out of memory");
		goto fail;
	}
	c->zone = zmap_get(cl, fds[1], &zst, q->zone_size, rep);
	if (!c->zone)
		goto fail;
	c->shm = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (c->shm == MAP_FAILED) {
		c->shm = NULL;
		rep_err(rep, errno, "mapping the %llu-byte ring failed", (unsigned long long)need);
		goto fail;
	}
	c->shm_len = need;
	gc_udp_init(&c->udp, fds[2]);
	if (gc_kring_init(&c->k, c->shm, need, q->entries, q->ack_entries, q->zone_size,
			  c->udp.max_len) < 0) {
		rep_err(rep, EINVAL, "the ring's kern_i %u is not below entries %u",
			atomic_load_explicit(&((struct gc_ring_shm *)c->shm)->kern_i,
					     memory_order_relaxed), q->entries);
		goto fail;
	}
	c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->efd < 0) {
		rep_err(rep, errno, "eventfd failed");
		goto fail;
	}
	c->sock = fds[2];
	fds[2] = -1; /* the connection keeps the socket */
	c->id = ++s->next_id;
	if (gc_srv_conn_start(s, c) < 0) {
		rep_err(rep, errno, "epoll_ctl failed");
		fds[2] = c->sock;
		c->sock = -1;
		goto fail;
	}
	c->cl_next = cl->conns;
	cl->conns = c;
	cl->nrings++;
	rep->ring_id = c->id;
	/* the process that started the engine may send from its own threads
	 * (gc_ring_flush()); nobody else learns where anything lives */
	if (cl->local)
		rep->conn = (uint64_t)(uintptr_t)c;
	*rfd = c->efd;
	return 0;
fail:
	if (c->efd >= 0)
		close(c->efd);
	if (c->shm)
		munmap(c->shm, c->shm_len);
	if (c->zone)
		gc_zmap_put(cl, c->zone);
	free(c->pend);
	free(c);
	return -1;
}

static int srv_detach(struct gc_srv *s, struct gc_client *cl, uint32_t id, struct gc_rep *rep)
{
	for (struct gc_conn **pp = &cl->conns; *pp; pp = &(*pp)->cl_next) {
		struct gc_conn *c = *pp;
		if (c->id == id) {
			*pp = c->cl_next;
			cl->nrings--;
			gc_srv_conn_free(s, c);
			return 0;
		}
	}
	return rep_err(rep, ENOENT, "no ring %u on this connection", id);
}

int gc_srv_request(struct gc_srv *s, struct gc_client *cl)
{
	struct gc_req q;
	struct gc_rep rep;
	int fds[MAX_FDS], nfds = 0, mflags = 0, rfd = -1;

	ssize_t n = recv_fds(cl->fd, &q, sizeof(q), fds, &nfds, MSG_DONTWAIT, &mflags);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1; /* the client went away */
	memset(&rep, 0, sizeof(rep));
	if (n != (ssize_t)sizeof(q) || (mflags & (MSG_TRUNC | MSG_CTRUNC)))
		rep_err(&rep, EPROTO, "malformed request (%zd bytes)", n);
	else if (q.version != GC_PROTO_VERSION)
		rep_err(&rep, EPROTO, "protocol version %u; this engine speaks %u", q.version,
			GC_PROTO_VERSION);
	else if (q.op == GC_OP_ATTACH)
		srv_attach(s, cl, &q, fds, nfds, &rep, &rfd);
	else if (nfds)
		rep_err(&rep, EINVAL, "request %u carries descriptors", q.op);
	else if (q.op == GC_OP_DETACH)
		srv_detach(s, cl, q.ring_id, &rep);
	else if (q.op == GC_OP_STATS) {
		rep.stats = s->st;
		/* relaxed: statistics; gc_ring_flush() adds these on its threads */
		rep.stats.packets += atomic_load_explicit(&s->fl_packets, memory_order_relaxed);
		rep.stats.bytes += atomic_load_explicit(&s->fl_bytes, memory_order_relaxed);
		rep.stats.syscalls += atomic_load_explicit(&s->fl_syscalls, memory_order_relaxed);
		rep.stats.gso += atomic_load_explicit(&s->fl_gso, memory_order_relaxed);
		rep.stats.clients = s->nclients;
		rep.stats.rings = s->nconns;
	} else
		rep_err(&rep, EINVAL, "unknown request %u", q.op);
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Never block on a client: one that cannot take its reply is dropped. */
	ssize_t w = send_fds(cl->fd, &rep, sizeof(rep), &rfd, rfd >= 0 ? 1 : 0, MSG_DONTWAIT);
	return w == (ssize_t)sizeof(rep) ? 0 : -1;
}

int gc_srv_listen(struct gc_srv *s, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return gc_seterr(ENAMETOOLONG, "gc_ring_engine_start: listen path is longer than %zu bytes",
				 sizeof(sa.sun_path) - 1);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return gc_seterr(errno, "gc_ring_engine_start: socket failed");
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0 && errno == EADDRINUSE) {
		/* a live engine answers; a stale socket file does not */
		struct stat st;
		int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (probe >= 0)
			close(probe);
		if (live || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
			close(fd);
			return gc_seterr(EADDRINUSE, "gc_ring_engine_start: listen: %s is in use", path);
		}
		unlink(path);
		r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	if (r < 0 || listen(fd, 128) < 0) {
		int err = errno;
		close(fd);
		return gc_seterr(err, "gc_ring_engine_start: listen on %s failed", path);
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listen_tag };
	s->listen_path = strdup(path);
	if (!s->listen_path || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		unlink(path);
		return gc_seterr(ENOMEM, "gc_ring_engine_start: listen: out of memory");
	}
	s->lfd = fd;
	/* remember which file is ours: srv_free() removes only that one */
	struct stat mine;
	if (fstatat(AT_FDCWD, path, &mine, AT_SYMLINK_NOFOLLOW) == 0) {
		s->listen_dev = mine.st_dev;
		s->listen_ino = mine.st_ino;
	}
	return 0;
}

void gc_srv_accept(struct gc_srv *s)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
				gc_srv_listen_pause(s, true); /* or the ready socket spins us */
			return;
		}
		if (!gc_srv_client_new(s, fd, false))
			close(fd);
	}
}

/* Stop or resume accepting (while out of descriptors). */
void gc_srv_listen_pause(struct gc_srv *s, bool pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.ptr = &s->listen_tag };

	if (s->lfd < 0 || s->listen_paused == pause)
		return;
	if (epoll_ctl(s->ep, EPOLL_CTL_MOD, s->lfd, &ev) == 0)
		s->listen_paused = pause;
}
