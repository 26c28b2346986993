/* SPDX-License-Identifier: MIT */
/*
 * handle.c - the public handles: an engine started in this process (its
 * thread runs server.c) or a connection to one in another process, and a
 * ring's attachment to either.
 *
 * A ring attached through the process that started its engine may be
 * flushed from the application's thread (gc_ring_flush(), flow.c).  It finds
 * its flow by ring id in the engine's flow table, which holds a
 * reference on the connection while the flush runs; the ring holds a
 * reference on the table, so a gc_ring_engine_destroy() on another thread frees
 * neither under it (the flush then fails with ENOTCONN).
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "ring/srv.h"

GC_EXPORT struct gc_ring_engine *gc_ring_engine_create(const struct gc_ring_engine_opts *p)
{
	struct gc_ring_engine *e = NULL;
	int r = gc_ring_engine_create_hooks(p, NULL, &e);

	return r < 0 ? gc_err_ptr(r) : e;
}

/* sized (groupcast/common.h); 1.0 ends at listen_fd */
static const struct gc_sized engine_opts_t =
	GC_SIZED(gc_ring_engine_opts, GC_RING_ENGINE_OPTS_INIT, listen_fd, listen_fd);

int gc_ring_engine_create_hooks(const struct gc_ring_engine_opts *p,
				const struct gc_ring_engine_hooks *hooks, struct gc_ring_engine **out)
{
	struct gc_ring_engine_opts d;
	int r = gc_sized_in(&engine_opts_t, "gc_ring_engine_create", "opts", &d, p);

	if (r < 0)
		return r;
	const unsigned known = GC_RING_ENGINE_PIN_CPU | GC_RING_ENGINE_LISTEN_GID |
		GC_RING_ENGINE_SUBMIT_FLUSH | GC_RING_ENGINE_LISTEN_FD;
	if (d.flags & ~known)
		return gc_errf(EINVAL, "gc_ring_engine_create: unknown flags 0x%x", d.flags & ~known);
	/* an adopted socket is bound already: its path, mode and group are its owner's */
	if ((d.flags & GC_RING_ENGINE_LISTEN_FD) && d.listen)
		return gc_errf(EINVAL,
			       "gc_ring_engine_create: GC_RING_ENGINE_LISTEN_FD with a "
			       "listen path to bind as well");
	if ((d.flags & GC_RING_ENGINE_LISTEN_FD) &&
	    (d.listen_mode || (d.flags & GC_RING_ENGINE_LISTEN_GID)))
		return gc_errf(EINVAL,
			       "gc_ring_engine_create: GC_RING_ENGINE_LISTEN_FD with %s: "
			       "the socket file is its binder's",
			       d.listen_mode ? "listen_mode" : "GC_RING_ENGINE_LISTEN_GID");
	if ((d.flags & GC_RING_ENGINE_LISTEN_FD) && d.listen_fd < 0)
		return gc_errf(EBADF, "gc_ring_engine_create: listen_fd %d is not a descriptor",
			       d.listen_fd);
	if (d.listen_mode & ~0777u)
		return gc_errf(EINVAL, "gc_ring_engine_create: listen_mode 0%o has bits other than 0777",
			       d.listen_mode);
	if ((d.n_allow_uids && !d.allow_uids) || (d.n_allow_gids && !d.allow_gids))
		return gc_errf(EFAULT, "gc_ring_engine_create: %s is NULL",
			       d.n_allow_uids && !d.allow_uids ? "allow_uids" : "allow_gids");
	if (d.n_allow_uids > 65536 || d.n_allow_gids > 65536)
		return gc_errf(EINVAL, "gc_ring_engine_create: more than 65536 %s",
			       d.n_allow_uids > 65536 ? "allow_uids" : "allow_gids");
	if ((d.flags & GC_RING_ENGINE_PIN_CPU) && (d.cpu < 0 || d.cpu >= CPU_SETSIZE))
		return gc_errf(EINVAL, "gc_ring_engine_create: cpu %d is not a CPU number", d.cpu);
	if (d.batch > GC_BATCH_MAX)
		return gc_errf(EINVAL, "gc_ring_engine_create: batch %u is above %u", d.batch,
			       GC_BATCH_MAX);
	if (!d.batch)
		d.batch = 64;
	if (!d.listen_mode)
		d.listen_mode = 0600;
	if (!d.max_clients)
		d.max_clients = GC_MAX_CLIENTS_DEFAULT;

	struct gc_ring_engine *e = calloc(1, sizeof(*e));
	int sp[2] = { -1, -1 };
	if (!e)
		return gc_errf(ENOMEM, "gc_ring_engine_create: out of memory");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		r = gc_errf(errno, "gc_ring_engine_create: socketpair failed");
		free(e);
		return r;
	}
	struct gc_srv *s;
	r = gc_srv_new(&d, hooks, sp[0], &s);
	if (r < 0) {
		close(sp[0]);
		close(sp[1]);
		free(e);
		return r;
	}
	pthread_mutex_init(&e->lock, NULL);
	e->fd = sp[1];
	e->srv = s;
	int err = pthread_create(&e->thread, NULL, gc_srv_main, s);
	if (err) {
		pthread_mutex_destroy(&e->lock);
		gc_srv_free(s);
		close(sp[1]);
		free(e);
		return gc_errf(err, "gc_ring_engine_create: pthread_create failed");
	}
	*out = e;
	return 0;
}

/*
 * Anyone who can create a file at path can listen there.  Hand rings, zones
 * and sockets only to an engine run by root, by us, or by the uid the caller
 * named (SO_PEERCRED of a listening socket: its owner when it called
 * listen()).
 */
static int engine_trusted(int fd, const char *path, bool any_of_ours, uid_t want)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return gc_errf(errno, "gc_ring_engine_connect: %s: no credentials of the engine", path);
	if (any_of_ours ? uc.uid == 0 || uc.uid == geteuid() : uc.uid == want)
		return 0;
	if (any_of_ours)
		return gc_errf(EPERM,
			       "gc_ring_engine_connect: the engine at %s runs as uid %u, "
			       "neither root nor uid %u: not trusted (gc_ring_engine_connect_uid() "
			       "names another)",
			       path, (unsigned)uc.uid, (unsigned)geteuid());
	return gc_errf(EPERM, "gc_ring_engine_connect: the engine at %s runs as uid %u, not %u",
		       path, (unsigned)uc.uid, (unsigned)want);
}

static int engine_connect(const char *path, bool any_of_ours, uid_t want, struct gc_ring_engine **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (!path)
		return gc_errf(EFAULT, "gc_ring_engine_connect: path is NULL");
	if (strlen(path) >= sizeof(sa.sun_path))
		return gc_errf(ENAMETOOLONG, "gc_ring_engine_connect: path is longer than %zu bytes",
			       sizeof(sa.sun_path) - 1);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return gc_errf(errno, "gc_ring_engine_connect: socket failed");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;
		close(fd);
		if (err == EACCES)
			return gc_errf(err,
				       "gc_ring_engine_connect: %s: no permission to connect (the "
				       "engine's socket mode and group decide)",
				       path);
		return gc_errf(err, "gc_ring_engine_connect: no engine at %s", path);
	}
	int r = engine_trusted(fd, path, any_of_ours, want);
	if (r < 0) {
		close(fd);
		return r;
	}
	/* a daemon that stops answering must not hang the application */
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct gc_ring_engine *e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return gc_errf(ENOMEM, "gc_ring_engine_connect: out of memory");
	}
	pthread_mutex_init(&e->lock, NULL);
	e->fd = fd;
	/* Ask once now: an engine that refuses us (not allowed, too many
	 * clients) or speaks another version says so here, not at the first
	 * attach. */
	struct gc_req q = { .op = GC_OP_HELLO, .version = GC_PROTO_VERSION };
	struct gc_rep rep;
	int rfd = -1;
	r = gc_client_call(e, "gc_ring_engine_connect", &q, NULL, 0, &rep, &rfd);
	if (r < 0) {
		pthread_mutex_destroy(&e->lock);
		close(fd);
		free(e);
		return r;
	}
	if (rfd >= 0)
		close(rfd);
	*out = e;
	return 0;
}

GC_EXPORT struct gc_ring_engine *gc_ring_engine_connect(const char *path)
{
	struct gc_ring_engine *e;
	int r = engine_connect(path, true, 0, &e);

	return r < 0 ? gc_err_ptr(r) : e;
}

GC_EXPORT struct gc_ring_engine *gc_ring_engine_connect_uid(const char *path, uid_t engine_uid)
{
	struct gc_ring_engine *e;
	int r = engine_connect(path, false, engine_uid, &e);

	return r < 0 ? gc_err_ptr(r) : e;
}

static void ring_unlink(struct gc_ring *r);

GC_EXPORT int gc_ring_engine_destroy(struct gc_ring_engine *e)
{
	if (!e)
		return 0; /* as every _destroy(): NULL is nothing to do */
	pthread_mutex_lock(&e->lock);
	while (e->rings)
		ring_unlink(e->rings);
	if (e->srv)
		gc_srv_stop(e->srv);
	pthread_mutex_unlock(&e->lock);
	if (e->srv) {
		pthread_join(e->thread, NULL);
		gc_srv_free(e->srv);
	}
	close(e->fd);
	pthread_mutex_destroy(&e->lock);
	free(e);
	return 0;
}

/* sized (groupcast/common.h); 1.0 ends at limited */
static const struct gc_sized engine_stats_t =
	GC_SIZED(gc_ring_engine_stats, GC_RING_ENGINE_STATS_INIT, limited, limited);

GC_EXPORT int gc_ring_engine_stats(struct gc_ring_engine *e, struct gc_ring_engine_stats *st)
{
	if (!e || !st)
		return gc_seterr(EFAULT, "gc_ring_engine_stats: %s is NULL", e ? "st" : "e");
	struct gc_req q = { .op = GC_OP_STATS, .version = GC_PROTO_VERSION };
	struct gc_rep rep;
	int rfd = -1;

	pthread_mutex_lock(&e->lock);
	int r = gc_client_call(e, "gc_ring_engine_stats", &q, NULL, 0, &rep, &rfd);
	pthread_mutex_unlock(&e->lock);
	if (rfd >= 0)
		close(rfd);
	if (r < 0)
		return (int)gc_err(r);
	struct gc_ring_engine_stats now;
	gc_stats_from_wire(&rep.stats, &now);
	return (int)gc_err(gc_sized_out(&engine_stats_t, "gc_ring_engine_stats", "st", st, &now));
}

/* ---- a ring's attachment ------------------------------------------------ */

/* Freeing a ring detaches it first: it lives here, above the engine. */
GC_EXPORT void gc_ring_destroy(struct gc_ring *r)
{
	if (!r)
		return;
	if (r->eng)
		gc_ring_detach(r);
	if (r->tab)
		gc_flowtab_put(r->tab);
	atomic_fetch_sub_explicit(&r->zone->rings, 1, memory_order_relaxed);
	/* detached: no engine of ours uses the mapping any more */
	if (gc_own_forget(r->sh, "gc_ring_destroy") < 0)
		return; /* cannot happen; leak rather than pull it from under one */
	munmap(r->sh, r->map_len);
	close(r->fd);
	free(r);
}

/* Send what r published from this thread, its engine being in this process
 * (r->tab): gc_ring_flush()'s work.  The count sent, or -errno with the
 * message. */
static int flush_here(struct gc_ring *r, const char *fn)
{
	/* By ring id, never by a pointer: the engine may have been stopped,
	 * or the ring detached, meanwhile (on another thread). */
	struct gc_flow *c = gc_flowtab_find(r->tab, r->ring_id);
	if (!c)
		return gc_errf(ENOTCONN, "%s: the ring is not attached to an engine", fn);
	/* No notify handshake (the fence in gc_ring_publish()): the engine
	 * parks the ring under the connection's lock, which we take next, so
	 * either it saw this umod_i before parking or we see it parked. */
	gc_ring_publish_store(r);
	/* acquire: the error details were stored before it */
	uint32_t err = atomic_load_explicit(&r->sh->error, memory_order_acquire);
	unsigned sent = 0;
	int w = err ? 0 : gc_flow_flush(c, &sent);
	gc_flow_put(c);
	if (w == -ENOTCONN)
		return gc_errf(ENOTCONN, "%s: the ring is not attached to an engine", fn);
	/* a violation (w < 0), or the engine was woken for the rest (w > 0):
	 * say so if it stopped the ring, as gc_ring_notify() would */
	if (!err && w != 0)
		err = atomic_load_explicit(&r->sh->error, memory_order_acquire);
	if (err || w < 0)
		return gc_ring_stopped(r, fn, err);
	return (int)sent;
}

GC_EXPORT int gc_ring_flush(struct gc_ring *r)
{
	if (!r)
		return gc_seterr(EFAULT, "gc_ring_flush: r is NULL");
	if (r->tab)
		return (int)gc_err(flush_here(r, "gc_ring_flush"));
	if (atomic_load(&r->efd) < 0)
		return gc_seterr(ENOTCONN, "gc_ring_flush: the ring is not attached to an engine");
	/* a daemon's ring: only the daemon can send */
	return gc_ring_submit(r) < 0 ? -1 : 0;
}

/*
 * A submit closer than this to the previous one of the same ring hands
 * over even to an engine on the caller's CPU: the application is producing
 * faster than the engine parks between its bursts, and the engine, once
 * woken, takes larger batches than a submit holds.  Farther apart, the
 * engine parks after every burst anyway and the hand-off buys nothing: on
 * the VM of bench/results/ring/paced it costs 9.6 us per burst on one CPU,
 * so 50 us keeps a burst-by-burst producer (one submit per 16 packets
 * takes 1-5 us) on the engine and a paced one (800 us at 20k/s) off it.
 */
#define SUBMIT_GAP_NS 50000ull

/*
 * How often a ring re-reads the engine thread's CPU affinity (one
 * sched_getaffinity() call, on a submit that finds the ring parked): masks
 * rarely change (taskset -p, a cgroup's cpuset), and until the next read a
 * burst is only sent from the other thread than would be best.
 */
#define AFFINITY_RECHECK_NS 100000000ull

/* The one CPU the engine thread of tab may run on, or -1 (several, or the
 * engine is not running). */
static int engine_one_cpu(struct gc_flowtab *tab)
{
	pid_t tid = gc_flowtab_engine(tab);
	cpu_set_t set;

	if (tid <= 0 || sched_getaffinity(tid, sizeof(set), &set) < 0 || CPU_COUNT(&set) != 1)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET((size_t)c, &set))
			return c;
	return -1;
}

/*
 * Whether gc_ring_submit() sends a parked ring from this thread instead of
 * waking the engine thread.  Only when the engine runs in this process
 * (r->tab; flush_here() then does the work and leaves what it cannot send
 * to the engine) and either
 * - the engine was started with GC_RING_ENGINE_SUBMIT_FLUSH (always), or
 * - the engine thread can run on one CPU only and this thread is on it,
 *   and the previous submit was SUBMIT_GAP_NS ago or more: the woken engine
 *   would run on this CPU, after this thread, so the hand-off (an eventfd
 *   write and two context switches) would be pure cost and latency.  The
 *   engine is confined so when pinned (GC_RING_ENGINE_PIN_CPU), and also
 *   when it inherited a mask of one CPU (the whole process under
 *   taskset -c 0): its mask says which, not the flag (r->engine_cpu).
 * An engine that may run on another CPU is left the work: sending there is
 * what it is for (the split placement of bench/ring.py), even though it
 * costs more in total.
 */
static bool submit_here(struct gc_ring *r)
{
	if (!r->tab)
		return false;
	if (r->submit_flush)
		return true;
	uint64_t now = gc_now_ns(), last = r->last_submit_ns;
	r->last_submit_ns = now;
	if (now - r->cpu_checked_ns >= AFFINITY_RECHECK_NS) {
		r->engine_cpu = engine_one_cpu(r->tab);
		r->cpu_checked_ns = now;
	}
	return r->engine_cpu >= 0 && now - last >= SUBMIT_GAP_NS && sched_getcpu() == r->engine_cpu;
}

/*
 * Here, above ring.c, because a submit may send itself (submit_here()): a
 * ring the engine parked (kern_notify) is then sent from this thread
 * instead of waking the engine thread.  That saves the engine's wake-up and
 * park (on this VM about half as much CPU again as sending a burst of 16
 * datagrams with GSO) and the latency of being scheduled, and costs the
 * caller the send.
 */
GC_EXPORT int gc_ring_submit(struct gc_ring *r)
{
	if (!gc_ring_publish(r)) {
		if (r->engine_cpu >= 0)
			r->last_submit_ns = gc_now_ns();
		return 0;
	}
	if (submit_here(r) && flush_here(r, "gc_ring_submit") >= 0)
		return 1;
	/* not ours to send (any more): notify, which says why if it cannot */
	return gc_ring_notify(r) < 0 ? -1 : 1;
}

/* ---- attaching to an engine --------------------------------------------- */

GC_EXPORT int gc_ring_attach(struct gc_ring *r, struct gc_ring_engine *e, int sd)
{
	char why[160];

	if (!r || !e)
		return gc_seterr(EFAULT, "gc_ring_attach: %s is NULL", r ? "e" : "r");
	if (r->eng)
		return gc_seterr(EISCONN, "gc_ring_attach: r is attached already (ring %u)", r->ring_id);
	int ret = gc_udp_check(sd, why, sizeof(why));
	if (ret < 0)
		return gc_seterr(-ret, "gc_ring_attach: sd %d: %s", sd, why);

	struct gc_req q = { .op = GC_OP_ATTACH,
			    .version = GC_PROTO_VERSION,
			    .entries = r->n,
			    .ack_entries = r->n,
			    .zone_size = r->zone->size };
	const int fds[3] = { r->fd, r->zone->fd, sd };
	struct gc_rep rep;
	int efd = -1;

	pthread_mutex_lock(&e->lock);
	if (e->fd < 0) {
		pthread_mutex_unlock(&e->lock);
		return gc_seterr(ENOTCONN, "gc_ring_attach: the engine handle is stopped");
	}
	ret = gc_client_call(e, "gc_ring_attach", &q, fds, 3, &rep, &efd);
	if (ret < 0) {
		pthread_mutex_unlock(&e->lock);
		return (int)gc_err(ret);
	}
	if (efd < 0) {
		pthread_mutex_unlock(&e->lock);
		return gc_seterr(EPROTO, "gc_ring_attach: the engine sent no notify descriptor");
	}
	r->eng = e;
	/* a ring attached to the engine of this process may be flushed from
	 * our threads: keep its flow table (see gc_ring_flush()) */
	struct gc_flowtab *tab = e->srv ? e->srv->tab : NULL;
	if (r->tab != tab) {
		if (r->tab)
			gc_flowtab_put(r->tab);
		if (tab)
			gc_flowtab_get(tab);
		r->tab = tab;
	}
	r->submit_flush = tab && (e->srv->p.flags & GC_RING_ENGINE_SUBMIT_FLUSH);
	r->engine_cpu = tab && !r->submit_flush ? engine_one_cpu(tab) : -1;
	r->cpu_checked_ns = gc_now_ns();
	r->last_submit_ns = 0;
	r->ring_id = rep.ring_id;
	atomic_store(&r->efd, efd);
	r->eng_prev = NULL;
	r->eng_next = e->rings;
	if (e->rings)
		e->rings->eng_prev = r;
	e->rings = r;
	/* the engine starts at its kern_i: nothing below is ours to modify */
	r->dev_cache = atomic_load_explicit(&r->sh->dev_i, memory_order_acquire);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* Forget the attachment (the engine handle's lock is held). */
static void ring_unlink(struct gc_ring *r)
{
	struct gc_ring_engine *e = r->eng;

	if (r->eng_prev)
		r->eng_prev->eng_next = r->eng_next;
	else
		e->rings = r->eng_next;
	if (r->eng_next)
		r->eng_next->eng_prev = r->eng_prev;
	r->eng_next = r->eng_prev = NULL;
	/* a notifier on the ring's thread may hold the descriptor (internal.h):
	 * it is inside one eventfd write, so the wait is short */
	int efd = atomic_exchange(&r->efd, -1);
	while (atomic_load_explicit(&r->efd_users, memory_order_acquire))
		sched_yield();
	close(efd);
	r->eng = NULL;
	/* r->tab stays: gc_ring_flush() may be reading it on another thread */
	/* no engine owns the ring now: it may not ask for notifications */
	atomic_store_explicit(&r->sh->kern_notify, 0, memory_order_relaxed);
}

GC_EXPORT int gc_ring_detach(struct gc_ring *r)
{
	if (!r)
		return gc_seterr(EFAULT, "gc_ring_detach: r is NULL");
	struct gc_ring_engine *e = r->eng;
	if (!e)
		return gc_seterr(ENOTCONN, "gc_ring_detach: r is not attached");

	struct gc_req q = { .op = GC_OP_DETACH, .version = GC_PROTO_VERSION, .ring_id = r->ring_id };
	struct gc_rep rep;
	int rfd = -1, ret = 0;

	pthread_mutex_lock(&e->lock);
	if (e->fd >= 0)
		/* the engine is gone or refused (ret < 0): forget the ring anyway */
		ret = gc_client_call(e, "gc_ring_detach", &q, NULL, 0, &rep, &rfd);
	if (rfd >= 0)
		close(rfd);
	ring_unlink(r);
	pthread_mutex_unlock(&e->lock);
	return (int)gc_err(ret);
}
