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
#include <stdbool.h>
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
#include <sys/statfs.h>
#include <linux/magic.h>
#include <stddef.h>
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

/* Read one reply of any kind: -1 with gc_seterr(), else its length. */
static ssize_t recv_rep(struct gc_ring_engine *e, const char *fn, struct gc_rep *rep, int *rfd,
			int flags)
{
	int got[MAX_FDS], ngot = 0, mflags = 0;

	*rfd = -1;
	memset(rep, 0, sizeof(*rep));
	ssize_t n = recv_fds(e->fd, rep, sizeof(*rep), got, &ngot, flags, &mflags);
	if (n < 0)
		return gc_seterr(errno == EAGAIN ? ETIMEDOUT : errno, "%s: no reply from the engine",
				 fn);
	for (int i = ngot > 1 ? 1 : ngot; i < ngot; i++)
		close(got[i]);
	if (ngot)
		*rfd = got[0];
	if (n == 0)
		return gc_seterr(ECONNRESET, "%s: the engine closed the connection", fn);
	if ((size_t)n < GC_REP_HEAD)
		return gc_seterr(EPROTO, "%s: malformed reply from the engine (%zd bytes)", fn, n);
	if (rep->version != GC_PROTO_VERSION)
		return gc_seterr(EPROTONOSUPPORT, "%s: the engine answered in protocol version %u "
				 "(%zd bytes); this library speaks version %u", fn, rep->version, n,
				 GC_PROTO_VERSION);
	if (n != (ssize_t)sizeof(*rep) || (mflags & (MSG_TRUNC | MSG_CTRUNC)))
		return gc_seterr(EPROTO, "%s: malformed reply from the engine (%zd bytes)", fn, n);
	rep->msg[sizeof(rep->msg) - 1] = '\0';
	return n;
}

/* A notice answers no request: the engine refused us and hung up. */
static int notice(const char *fn, const struct gc_rep *rep)
{
	return gc_seterr(rep->err ? rep->err : EPROTO, "%s: the engine refused the connection: %s",
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
	if (send_fds(e->fd, q, sizeof(*q), fds, nfds, 0) != (ssize_t)sizeof(*q)) {
		int err = errno ? errno : EPROTO;
		/* refused at accept: the reason may be waiting for us */
		bool refused = (err == EPIPE || err == ECONNRESET) &&
			       recv_rep(e, fn, rep, rfd, MSG_DONTWAIT) > 0 && rep->seq == 0;
		drop_fd(rfd);
		if (refused)
			return notice(fn, rep);
		return gc_seterr(err, "%s: sending the request to the engine failed", fn);
	}
	/* Replies come in the order of the requests, so one that is not ours
	 * answers a request we gave up on (timed out): skip it.  Bounded: we
	 * cannot have given up on more requests than we sent. */
	for (unsigned skipped = 0; skipped < 1024; skipped++) {
		ssize_t n = recv_rep(e, fn, rep, rfd, 0);
		/* An engine that hangs up on a request it did not read (it
		 * refused us at accept) resets the connection, and the first
		 * read reports that before the notice queued ahead of it. */
		if (n < 0 && errno == ECONNRESET) {
			n = recv_rep(e, fn, rep, rfd, MSG_DONTWAIT);
			if (n < 0 || rep->seq != 0) {
				drop_fd(rfd);
				return gc_seterr(ECONNRESET, "%s: the engine reset the connection", fn);
			}
		}
		int r;
		if (n < 0)
			r = -1;
		else if (rep->seq == 0)
			r = notice(fn, rep);
		else if (rep->seq == q->seq && rep->err)
			r = gc_seterr(rep->err, "%s: %s", fn, rep->msg);
		else if (rep->seq == q->seq)
			return 0;
		else {
			e->stale++;
			drop_fd(rfd);
			if (rep->op == GC_OP_ATTACH && rep->err == 0) {
				/* The engine attached a ring we took for refused:
				 * let it go.  Its reply is skipped in turn. */
				struct gc_req d = { .op = GC_OP_DETACH, .version = GC_PROTO_VERSION,
						    .seq = next_seq(e), .ring_id = rep->ring_id };
				send_fds(e->fd, &d, sizeof(d), NULL, 0, MSG_DONTWAIT);
			}
			continue;
		}
		drop_fd(rfd);
		return r;
	}
	return gc_seterr(EPROTO, "%s: the engine sent 1024 replies to other requests (want %u)", fn,
			 q->seq);
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
		return rep_err(rep, EINVAL, "the %s descriptor is not a memfd", what);
	if (fstatfs(fd, &fs) < 0)
		return rep_err(rep, EINVAL, "the %s descriptor is not a memfd (fstatfs: %s)", what,
			       strerror(errno));
	if (fs.f_type == HUGETLBFS_MAGIC)
		return rep_err(rep, EINVAL, "the %s memfd is on hugetlbfs (MFD_HUGETLB): a punched "
			       "hole would fault the engine; use a memfd on tmpfs", what);
	if (fs.f_type != TMPFS_MAGIC)
		return rep_err(rep, EINVAL, "the %s descriptor is not a memfd (filesystem 0x%lx, "
			       "not tmpfs)", what, (unsigned long)fs.f_type);
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return rep_err(rep, EINVAL, "the %s descriptor is not a memfd (no seals)", what);
	if (!(seals & F_SEAL_SHRINK))
		return rep_err(rep, EPERM, "the %s memfd is not sealed against shrinking "
			       "(F_SEAL_SHRINK)", what);
	if ((uint64_t)st.st_size < need)
		return rep_err(rep, EINVAL, "the %s memfd has %lld bytes, needs %llu", what,
			       (long long)st.st_size, (unsigned long long)need);
	return 0;
}

/* The checks of an ATTACH request that need no client state. */
static int decode_attach(const struct gc_req *q, const int *fds, int nfds, struct gc_rep *rep)
{
	char why[160];

	if (nfds != 3)
		return rep_err(rep, EINVAL, "attach carries %d descriptors, wants 3 "
			       "(ring memfd, zone memfd, socket)", nfds);
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
	if (check_memfd(fds[0], need, "ring", rep) < 0 ||
	    check_memfd(fds[1], q->zone_size, "zone", rep) < 0)
		return -1;
	errno = 0;
	if (fds[2] < 0 || gc_udp_check(fds[2], why, sizeof(why)) < 0)
		return rep_err(rep, errno ? errno : EBADF, "the socket is %s",
			       fds[2] < 0 ? "missing" : why);
	return 0;
}

int gc_srv_decode(const void *buf, size_t n, int mflags, const int *fds, int nfds,
		  struct gc_req *q, struct gc_rep *rep)
{
	memset(q, 0, sizeof(*q));
	memcpy(q, buf, n < sizeof(*q) ? n : sizeof(*q));
	/* what the client needs to match the reply, as far as it came */
	rep->version = GC_PROTO_VERSION;
	rep->seq = n >= offsetof(struct gc_req, seq) + sizeof(q->seq) ? q->seq : 0;
	rep->op = n >= sizeof(q->op) ? q->op : 0;
	/* the version first: another version may have another size */
	if (n < offsetof(struct gc_req, version) + sizeof(q->version))
		return rep_err(rep, EPROTO, "malformed request (%zu bytes)", n);
	if (q->version != GC_PROTO_VERSION)
		return rep_err(rep, EPROTONOSUPPORT, "protocol version %u; this engine speaks "
			       "version %u", q->version, GC_PROTO_VERSION);
	if (n != sizeof(*q) || (mflags & (MSG_TRUNC | MSG_CTRUNC)))
		return rep_err(rep, EPROTO, "malformed request (%zu bytes%s)", n,
			       mflags & MSG_CTRUNC ? ", descriptors cut off" :
			       mflags & MSG_TRUNC ? " or more" : "");
	if (q->seq == 0)
		return rep_err(rep, EPROTO, "request without a sequence number");
	switch (q->op) {
	case GC_OP_ATTACH:
		return decode_attach(q, fds, nfds, rep);
	case GC_OP_DETACH:
	case GC_OP_STATS:
	case GC_OP_HELLO:
		if (nfds)
			return rep_err(rep, EINVAL, "request %u carries descriptors", q->op);
		return 0;
	default:
		return rep_err(rep, EINVAL, "unknown request %u", q->op);
	}
}

/* The client's mapping of this zone, if the engine has one. */
static struct gc_zmap *zmap_find(struct gc_client *cl, const struct stat *st, uint64_t size)
{
	for (struct gc_zmap *z = cl->zones; z; z = z->next)
		if (z->dev == st->st_dev && z->ino == st->st_ino && z->size == size)
			return z;
	return NULL;
}

static struct gc_zmap *zmap_get(struct gc_client *cl, int fd, const struct stat *st,
				uint64_t size, struct gc_rep *rep)
{
	struct gc_zmap *z = zmap_find(cl, st, size);

	if (z) {
		z->refs++;
		return z;
	}
	z = calloc(1, sizeof(*z));
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
	cl->mapped += size;
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
	cl->mapped -= z->size;
	free(z);
}

/* Attach a ring whose request gc_srv_decode() accepted, within the client's
 * limits. */
static int srv_attach(struct gc_srv *s, struct gc_client *cl, const struct gc_req *q, int *fds,
		      struct gc_rep *rep, int *rfd)
{
	struct stat zst;

	if (cl->nrings >= cl->max_rings) {
		s->st.limited++;
		return rep_err(rep, EDQUOT, "the client has %u rings, the engine's limit per client "
			       "(max_rings)", cl->nrings);
	}
	if (cl->nfds > cl->max_fds || cl->max_fds - cl->nfds < GC_CONN_FDS) {
		s->st.limited++;
		return rep_err(rep, EMFILE, "the engine holds %u descriptors for the client; a ring "
			       "needs %u more and the limit per client is %u (max_fds)", cl->nfds,
			       GC_CONN_FDS, cl->max_fds);
	}
	uint64_t need = gc_shm_size(q->entries, q->ack_entries, (uint64_t)gc_page_size());
	if (fstat(fds[1], &zst) < 0)
		return rep_err(rep, errno, "fstat of the zone failed");
	uint64_t more = need + (zmap_find(cl, &zst, q->zone_size) ? 0 : q->zone_size);
	if (more > cl->max_map || cl->mapped > cl->max_map - more) {
		s->st.limited++;
		return rep_err(rep, EDQUOT, "the engine maps %llu bytes for the client; this ring needs "
			       "%llu more and the limit per client is %llu (max_map_bytes)",
			       (unsigned long long)cl->mapped, (unsigned long long)more,
			       (unsigned long long)cl->max_map);
	}

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
	cl->mapped += need;
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
	cl->nfds += GC_CONN_FDS;
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
	if (c->shm) {
		munmap(c->shm, c->shm_len);
		cl->mapped -= c->shm_len;
	}
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
			cl->nfds -= GC_CONN_FDS;
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
	unsigned char buf[sizeof(struct gc_req)];
	int fds[MAX_FDS], nfds = 0, mflags = 0, rfd = -1;

	ssize_t n = recv_fds(cl->fd, buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT, &mflags);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1; /* the client went away */
	memset(&rep, 0, sizeof(rep));
	if (gc_srv_decode(buf, (size_t)n, mflags, fds, nfds, &q, &rep) < 0) {
		/* refused: rep says why */
	} else if (q.op == GC_OP_ATTACH) {
		srv_attach(s, cl, &q, fds, &rep, &rfd);
	} else if (q.op == GC_OP_DETACH) {
		srv_detach(s, cl, q.ring_id, &rep);
	} else if (q.op == GC_OP_STATS) {
		rep.stats = s->st;
		/* relaxed: statistics; gc_ring_flush() adds these on its threads */
		rep.stats.packets += atomic_load_explicit(&s->fl_packets, memory_order_relaxed);
		rep.stats.bytes += atomic_load_explicit(&s->fl_bytes, memory_order_relaxed);
		rep.stats.syscalls += atomic_load_explicit(&s->fl_syscalls, memory_order_relaxed);
		rep.stats.gso += atomic_load_explicit(&s->fl_gso, memory_order_relaxed);
		rep.stats.clients = s->nclients;
		rep.stats.rings = s->nconns;
	} /* HELLO: the reply says we serve this client */
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Never block on a client: one that cannot take its reply is dropped. */
	ssize_t w = send_fds(cl->fd, &rep, sizeof(rep), &rfd, rfd >= 0 ? 1 : 0, MSG_DONTWAIT);
	return w == (ssize_t)sizeof(rep) ? 0 : -1;
}

/* path is free for us: nothing there, or a stale socket file (removed);
 * else -1 with EADDRINUSE. */
static int claim_path(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : gc_seterr(errno, "gc_ring_engine_start: listen: %s",
							path);
	/* a live engine answers; a stale socket file does not */
	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int live = probe >= 0 && connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	if (probe >= 0)
		close(probe);
	if (live || !S_ISSOCK(st.st_mode))
		return gc_seterr(EADDRINUSE, "gc_ring_engine_start: listen: %s is in use", path);
	unlink(path);
	return 0;
}

/*
 * Bind and listen at tmp (in the private directory), give the file its mode
 * and group, then link it to path: the socket is never reachable with wider
 * permissions than asked.  (umask would do, but it is process-wide: the
 * application's other threads create files too.)
 */
static int listen_at(struct gc_srv *s, const char *tmp, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX }, fin = { .sun_family = AF_UNIX };

	if (strlen(tmp) >= sizeof(sa.sun_path))
		return gc_seterr(ENAMETOOLONG, "gc_ring_engine_start: listen: %s with the private "
				 "directory beside it (%s) is longer than %zu bytes", path, tmp,
				 sizeof(sa.sun_path) - 1);
	strcpy(sa.sun_path, tmp);
	strcpy(fin.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return gc_seterr(errno, "gc_ring_engine_start: socket failed");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int err = errno;
		close(fd);
		return gc_seterr(err, "gc_ring_engine_start: listen on %s failed", path);
	}
	if ((s->p.flags & GC_RING_ENGINE_LISTEN_GID) &&
	    fchownat(AT_FDCWD, tmp, (uid_t)-1, s->p.listen_gid, AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return gc_seterr(err, "gc_ring_engine_start: listen: cannot give %s group %u", path,
				 (unsigned)s->p.listen_gid);
	}
	/* NOFOLLOW: whoever owns the directory around ours could swap names */
	if (fchmodat(AT_FDCWD, tmp, s->p.listen_mode, AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return gc_seterr(err, "gc_ring_engine_start: listen: cannot set mode 0%o on %s",
				 s->p.listen_mode, path);
	}
	int r = link(tmp, path);
	if (r < 0 && errno == EEXIST && claim_path(path, &fin) == 0)
		r = link(tmp, path);
	if (r < 0) {
		int err = errno;
		close(fd);
		if (err == EEXIST)
			return gc_seterr(EADDRINUSE, "gc_ring_engine_start: listen: %s is in use", path);
		return gc_seterr(err, "gc_ring_engine_start: listen: cannot link the socket to %s",
				 path);
	}
	return fd;
}

int gc_srv_listen(struct gc_srv *s, const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path) + 32], tmp[sizeof(dir) + 8];
	const char *slash = strrchr(path, '/');

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return gc_seterr(ENAMETOOLONG, "gc_ring_engine_start: listen path is longer than %zu bytes",
				 sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	if (!*path || (slash && !slash[1]))
		return gc_seterr(EINVAL, "gc_ring_engine_start: listen path '%s' names no file", path);
	/* the private directory: beside path (the same filesystem, for link()) */
	int dl = slash ? (int)(slash - path) + 1 : 0;
	snprintf(dir, sizeof(dir), "%.*s.gc-engine-XXXXXX", dl, path);
	if (!mkdtemp(dir)) /* mode 0700 */
		return gc_seterr(errno, "gc_ring_engine_start: listen: cannot create a private "
				 "directory beside %s", path);
	snprintf(tmp, sizeof(tmp), "%s/s", dir);
	s->uid = geteuid();
	int fd = listen_at(s, tmp, path);
	unlink(tmp);
	rmdir(dir);
	if (fd < 0)
		return -1;
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

/* Is the peer of fd served?  Root, our own uid, and the allowed uids and
 * groups (primary or supplementary: SO_PEERGROUPS). */
static bool peer_allowed(const struct gc_srv *s, int fd, char *why, size_t len)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0) {
		snprintf(why, len, "no credentials of the client (%s)", strerror(errno));
		return false;
	}
	if (uc.uid == 0 || uc.uid == s->uid)
		return true;
	for (size_t i = 0; i < s->p.n_allow_uids; i++)
		if (s->allow_uids[i] == uc.uid)
			return true;
	if (s->p.n_allow_gids) {
		gid_t groups[256];
		socklen_t gl = sizeof(groups);
		int ng = 0;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0)
			ng = (int)(gl / sizeof(gid_t));
		/* more than 256 groups (ERANGE): the primary group still counts */
		for (size_t i = 0; i < s->p.n_allow_gids; i++) {
			if (s->allow_gids[i] == uc.gid)
				return true;
			for (int g = 0; g < ng; g++)
				if (s->allow_gids[i] == groups[g])
					return true;
		}
	}
	snprintf(why, len, "uid %u (gid %u) is not allowed: the engine serves root, its own uid "
		 "%u, and the uids and groups it was told to allow", (unsigned)uc.uid,
		 (unsigned)uc.gid, (unsigned)s->uid);
	return false;
}

/* Tell a client why it is refused (a notice: seq 0), and hang up. */
static void refuse(struct gc_srv *s, int fd, int err, const char *why)
{
	struct gc_rep rep = { .version = GC_PROTO_VERSION, .err = err };

	snprintf(rep.msg, sizeof(rep.msg), "%s", why);
	send_fds(fd, &rep, sizeof(rep), NULL, 0, MSG_DONTWAIT);
	close(fd);
	s->st.refused++;
}

void gc_srv_accept(struct gc_srv *s)
{
	char why[200];

	for (int i = 0; i < 64; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
				gc_srv_listen_pause(s, true); /* or the ready socket spins us */
			return;
		}
		if (!peer_allowed(s, fd, why, sizeof(why))) {
			refuse(s, fd, EACCES, why);
		} else if (s->nremote >= s->p.max_clients) {
			snprintf(why, sizeof(why), "the engine serves %u clients, its limit "
				 "(max_clients)", s->nremote);
			refuse(s, fd, EUSERS, why);
		} else if (!gc_srv_client_new(s, fd, false)) {
			close(fd);
		}
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
