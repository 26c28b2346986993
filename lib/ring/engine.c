/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the transport engine: one thread that drains many rings.
 *
 * Each attached ring is a connection of a client (a control socket).  Active
 * connections are polled round robin, fairly per client: each round the
 * clients take turns worth `batch` packets, spread over their rings
 * (round_robin()).  A visit takes at most `batch` packets from a ring (if its
 * congestion controller allows), sends them (udp.c: one sendmmsg() per visit,
 * GSO runs inside), and moves dev_i.  A ring found empty is parked:
 * the engine sets kern_notify and stops polling it, until the application
 * writes the ring's eventfd (gc_ring_notify()).  With every ring parked, the
 * thread blocks in epoll.  Nothing else wakes it: not a timer, not a signal.
 *
 * The same thread serves the control sockets (daemon.c): the socketpair of
 * the process that started the engine, and, in daemon mode, every process
 * that connected to the listening socket.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
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

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* ---- connection lists ---------------------------------------------------- */

static void link_init(struct gc_link *head)
{
	head->next = head->prev = head;
}

static void link_del(struct gc_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->next = l->prev = NULL;
}

static void link_add_tail(struct gc_link *head, struct gc_link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

/* Move l, which is on head's list, to its tail. */
static void link_to_tail(struct gc_link *head, struct gc_link *l)
{
	link_del(l);
	link_add_tail(head, l);
}

static void list_del(struct gc_srv *s, struct gc_conn *c)
{
	if (!c->link.next)
		return;
	link_del(&c->link);
	if (c->state == CONN_ACTIVE) {
		s->nactive--;
		if (--c->cl->nactive == 0) {
			link_del(&c->cl->alink);
			s->naclients--;
		}
	}
}

/* An active connection goes on its client's list, and the client on the
 * engine's list of clients to serve. */
static void list_add_active(struct gc_srv *s, struct gc_conn *c)
{
	struct gc_client *cl = c->cl;

	link_add_tail(&cl->active, &c->link);
	s->nactive++;
	if (cl->nactive++ == 0) {
		cl->credit = 0; /* an idle client saves nothing up, nor owes */
		link_add_tail(&s->aclients, &cl->alink);
		s->naclients++;
	}
}

static void set_state(struct gc_srv *s, struct gc_conn *c, enum gc_conn_state st)
{
	list_del(s, c);
	c->state = st;
	if (st == CONN_ACTIVE)
		list_add_active(s, c);
	else if (st == CONN_CCWAIT)
		link_add_tail(&s->ccwait, &c->link);
}

/* ---- socket readiness --------------------------------------------------- */

static void sock_arm(struct gc_srv *s, struct gc_conn *c)
{
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLONESHOT, .data.ptr = &c->sock_tag };

	if (epoll_ctl(s->ep, c->sock_armed ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->sock, &ev) == 0)
		c->sock_armed = true;
}

static void sock_disarm(struct gc_srv *s, struct gc_conn *c)
{
	if (c->sock_armed)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, c->sock, NULL);
	c->sock_armed = false;
}

/* ---- one connection ----------------------------------------------------- */

static void conn_violation(struct gc_srv *s, struct gc_conn *c)
{
	char why[200];

	if (c->state == CONN_STOPPED)
		return;
	gc_kring_describe(&c->k, why, sizeof(why));
	if (!s->p.quiet)
		fprintf(stderr, "groupcast engine: ring %u: %s; ring stopped\n", c->id, why);
	s->st.violations++;
	set_state(s, c, CONN_STOPPED);
	sock_disarm(s, c);
	c->pend_n = 0;
	gc_kring_wake(&c->k);
}

unsigned gc_srv_xmit(struct gc_srv *s, struct gc_conn *c, const struct gc_sent *p, unsigned n,
		     uint64_t now, struct gc_ring_engine_stats *st)
{
	unsigned done;

	if (!n)
		return 0;
	if (s->h.xmit) {
		done = s->h.xmit(s->h.xmit_arg, c, p, n, c->zone->map);
		if (done > n)
			done = n;
		for (unsigned i = 0; i < done; i++)
			c->k.bytes += p[i].len;
		c->k.sent += done;
		st->packets += done;
	} else {
		struct gc_udp_out o = { 0 };
		done = gc_udp_send(&c->udp, p, n, c->zone->map, &o);
		c->k.sent += o.sent;
		c->k.bytes += o.bytes;
		gc_kring_errors(&c->k, o.errors, o.last_errno);
		st->packets += o.sent;
		st->bytes += o.bytes;
		st->syscalls += o.syscalls;
		st->gso += o.gso;
	}
	if (done && s->h.cc && s->h.cc->sent)
		s->h.cc->sent(c->cc, p, done, now);
	return done;
}

static unsigned xmit(struct gc_srv *s, struct gc_conn *c, const struct gc_sent *p, unsigned n,
		     uint64_t now)
{
	return gc_srv_xmit(s, c, p, n, now, &s->st);
}

/* Some of the batch did not go: keep it, wait for the socket. */
static void keep_pending(struct gc_srv *s, struct gc_conn *c, const struct gc_sent *p,
			 unsigned n, uint32_t end)
{
	if (p != c->pend)
		memmove(c->pend, p, n * sizeof(*p));
	c->pend_n = n;
	c->pend_end = end;
	if (gc_kring_done(&c->k, c->pend[0].pos))
		gc_kring_wake(&c->k);
	if (!s->h.xmit) {
		set_state(s, c, CONN_BLOCKED);
		sock_arm(s, c);
	}
	/* a test transport that declines stays active: retried next round */
}

/* Serve c once: send what is pending, or take and send at most a batch.
 * Returns how many packets it consumed (sent, refused by the transport, or
 * skipped as dead): at most the batch size. */
static unsigned pump(struct gc_srv *s, struct gc_conn *c, uint64_t now)
{
	if (c->pend_n) {
		/* taken already: the ring's turn is spent sending them */
		unsigned done = xmit(s, c, c->pend, c->pend_n, now);
		if (c->state == CONN_STOPPED) /* the controller's sent() broke a rule */
			return done;
		if (done < c->pend_n) {
			keep_pending(s, c, c->pend + done, c->pend_n - done, c->pend_end);
			return done;
		}
		c->pend_n = 0;
		if (gc_kring_done(&c->k, c->pend_end))
			gc_kring_wake(&c->k);
		return done;
	}

	uint32_t budget = s->p.batch;
	if (s->h.cc && s->h.cc->budget) {
		uint64_t wake = 0;
		uint32_t b = s->h.cc->budget(c->cc, now, &wake);
		if (c->k.error) {
			conn_violation(s, c);
			return 0;
		}
		if (b == 0) {
			c->cc_wake = wake;
			set_state(s, c, CONN_CCWAIT);
			return 0;
		}
		if (b < budget)
			budget = b;
	}

	uint32_t nout, ntaken;
	if (gc_kring_take(&c->k, budget, s->out, &nout, &ntaken) < 0) {
		conn_violation(s, c);
		return 0;
	}
	if (ntaken == 0) {
		if (s->idle_ns) {
			if (!c->idle_since)
				c->idle_since = now;
			if (now - c->idle_since < s->idle_ns)
				return 0;
		}
		int r = gc_kring_park(&c->k);
		if (r < 0) {
			conn_violation(s, c);
		} else if (r == 1) {
			c->idle_since = 0;
			set_state(s, c, CONN_PARKED);
		}
		return 0;
	}
	c->idle_since = 0;
	uint32_t end = c->k.kern;
	unsigned done = xmit(s, c, s->out, nout, now);
	if (c->state == CONN_STOPPED)
		return done;
	if (done < nout) {
		keep_pending(s, c, s->out + done, nout - done, end);
		return done;
	}
	if (gc_kring_done(&c->k, end))
		gc_kring_wake(&c->k);
	/* dead records count: skipping them is work the ring asked for */
	return ntaken;
}

/* pump() unless an application thread is flushing the ring right now (it
 * sends; the connection stays active and is looked at next round). */
static unsigned pump_unless_busy(struct gc_srv *s, struct gc_conn *c, uint64_t now)
{
	if (pthread_mutex_trylock(&c->xlock) != 0)
		return 0;
	unsigned n = pump(s, c, now);
	pthread_mutex_unlock(&c->xlock);
	return n;
}

/*
 * One round.  Fair share per client, not per ring (deficit round robin): the
 * clients with active rings take turns, and each turn adds `batch` packets to
 * the client's credit, spent on its active rings in turn (each visited at
 * most once a turn; the next turn starts where this one stopped).  A ring
 * may take a whole batch even if that overdraws the credit (sendmmsg()
 * batches stay full); the next turn pays it back.  So a client with 16 busy
 * rings gets what a client with one gets.  Everything is moved to a tail as
 * it is visited; both loops are bounded by the counts at their start.
 */
static void round_robin(struct gc_srv *s, uint64_t now)
{
	unsigned ncl = s->naclients;

	while (ncl-- && s->aclients.next != &s->aclients) {
		struct gc_client *cl = container_of(s->aclients.next, struct gc_client, alink);
		link_to_tail(&s->aclients, &cl->alink);
		/* no saving up either: a turn is worth one batch at most (a
		 * client whose rings could not send kept its credit) */
		cl->credit += (int32_t)s->p.batch;
		if (cl->credit > (int32_t)s->p.batch)
			cl->credit = (int32_t)s->p.batch;
		unsigned visits = cl->nactive;
		while (visits-- && cl->credit > 0 && cl->active.next != &cl->active) {
			struct gc_conn *c = container_of(cl->active.next, struct gc_conn, link);
			link_to_tail(&cl->active, &c->link);
			cl->credit -= (int32_t)pump_unless_busy(s, c, now);
		}
	}
	s->st.rounds++;
}

/* Wake connections whose congestion-control time came; returns the next
 * such time (0: none). */
static uint64_t ccwait_due(struct gc_srv *s, uint64_t now)
{
	uint64_t next = 0;

	for (struct gc_link *l = s->ccwait.next, *nx; l != &s->ccwait; l = nx) {
		struct gc_conn *c = container_of(l, struct gc_conn, link);
		nx = l->next;
		if (c->cc_wake && c->cc_wake <= now)
			set_state(s, c, CONN_ACTIVE);
		else if (c->cc_wake && (!next || c->cc_wake < next))
			next = c->cc_wake;
	}
	return next;
}

int gc_srv_conn_start(struct gc_srv *s, struct gc_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = &c->notify_tag };

	c->srv = s;
	pthread_mutex_init(&c->xlock, NULL);
	c->notify_tag.kind = TAG_NOTIFY;
	c->sock_tag.kind = TAG_SOCK;
	/* edge-triggered: every write to the eventfd is one event; the engine
	 * never needs to read the counter */
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, c->efd, &ev) < 0)
		return -1;
	c->cc = s->h.cc && s->h.cc->init ? s->h.cc->init(s->h.cc_arg, c) : NULL;
	c->state = CONN_PARKED;
	set_state(s, c, CONN_ACTIVE); /* look once: packets may be queued already */
	s->nconns++;
	return 0;
}

void gc_srv_conn_free(struct gc_srv *s, struct gc_conn *c)
{
	list_del(s, c);
	c->state = CONN_STOPPED;
	sock_disarm(s, c);
	if (c->efd >= 0) {
		/* DEL first: the application holds the same eventfd */
		epoll_ctl(s->ep, EPOLL_CTL_DEL, c->efd, NULL);
		close(c->efd);
	}
	if (c->sock >= 0)
		close(c->sock);
	if (s->h.cc && s->h.cc->release)
		s->h.cc->release(c->cc);
	if (c->shm) {
		/* the application learns from gc_ring_wait()/gc_ring_submit()
		 * (EPIPE) that nobody serves the ring any more */
		gc_kring_stop(&c->k, GC_RING_DETACHED, 0, 0);
		gc_kring_wake(&c->k);
		munmap(c->shm, c->shm_len);
		c->cl->mapped -= c->shm_len;
	}
	if (c->zone)
		gc_zmap_put(c->cl, c->zone);
	c->zone = NULL;
	c->shm = NULL;
	c->efd = c->sock = -1;
	c->dead = true;
	c->dead_next = s->graveyard;
	s->graveyard = c;
	s->nconns--;
}

/* Free the connections freed while handling the last batch of events. */
static void bury(struct gc_srv *s)
{
	while (s->graveyard) {
		struct gc_conn *c = s->graveyard;
		s->graveyard = c->dead_next;
		if (c->srv) /* started: the lock was initialised */
			pthread_mutex_destroy(&c->xlock);
		free(c->pend);
		free(c);
	}
}

/* ---- clients ------------------------------------------------------------ */

struct gc_client *gc_srv_client_new(struct gc_srv *s, int fd, bool local)
{
	struct gc_client *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return NULL;
	cl->tag.kind = TAG_CLIENT;
	cl->fd = fd;
	cl->local = local;
	link_init(&cl->active);
	/* The limits protect the engine from other processes.  The process
	 * that started it holds the engine in its own memory anyway: limited
	 * only if it asked for limits. */
	cl->max_rings = s->p.max_rings ? s->p.max_rings : local ? UINT_MAX : GC_MAX_RINGS_DEFAULT;
	cl->max_fds = s->p.max_fds ? s->p.max_fds : local ? UINT_MAX : GC_MAX_FDS_DEFAULT;
	cl->max_map = s->p.max_map_bytes ? s->p.max_map_bytes : local ? UINT64_MAX : GC_MAX_MAP_DEFAULT;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cl->tag };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(cl);
		return NULL;
	}
	cl->next = s->clients;
	s->clients = cl;
	s->nclients++;
	s->nremote += !local;
	return cl;
}

void gc_srv_client_free(struct gc_srv *s, struct gc_client *cl)
{
	for (struct gc_client **pp = &s->clients; *pp; pp = &(*pp)->next) {
		if (*pp == cl) {
			*pp = cl->next;
			break;
		}
	}
	while (cl->conns) {
		struct gc_conn *c = cl->conns;
		cl->conns = c->cl_next;
		gc_srv_conn_free(s, c);
	}
	epoll_ctl(s->ep, EPOLL_CTL_DEL, cl->fd, NULL);
	close(cl->fd);
	s->nclients--;
	s->nremote -= !cl->local;
	free(cl);
	gc_srv_listen_pause(s, false); /* a descriptor came free */
}

/* ---- the hooks congestion control calls (cc.h) -------------------------- */

int gc_conn_ack(struct gc_conn *c, const struct gc_sent *p)
{
	if (gc_kring_ack(&c->k, p) < 0) {
		conn_violation(c->srv, c);
		return -1;
	}
	return 0;
}

void gc_conn_kick(struct gc_conn *c)
{
	if (c->state == CONN_CCWAIT)
		set_state(c->srv, c, CONN_ACTIVE);
}

uint32_t gc_conn_id(const struct gc_conn *c)
{
	return c->id;
}

int gc_conn_socket(const struct gc_conn *c)
{
	return c->sock;
}

/* ---- the loop ----------------------------------------------------------- */

static void handle(struct gc_srv *s, struct epoll_event *ev)
{
	struct gc_tag *t = ev->data.ptr;

	switch (t->kind) {
	case TAG_STOP:
		s->stop = 1;
		break;
	case TAG_LISTEN:
		gc_srv_accept(s);
		break;
	case TAG_CLIENT: {
		struct gc_client *cl = container_of(t, struct gc_client, tag);
		if (((ev->events & EPOLLIN) && gc_srv_request(s, cl) < 0) ||
		    (!(ev->events & EPOLLIN) && (ev->events & (EPOLLHUP | EPOLLERR))))
			gc_srv_client_free(s, cl);
		break;
	}
	case TAG_NOTIFY: {
		struct gc_conn *c = container_of(t, struct gc_conn, notify_tag);
		if (c->dead)
			break;
		s->st.notifies++;
		pthread_mutex_lock(&c->xlock);
		if (c->state == CONN_PARKED) {
			gc_kring_unpark(&c->k);
			set_state(s, c, CONN_ACTIVE);
		}
		pthread_mutex_unlock(&c->xlock);
		break;
	}
	case TAG_SOCK: {
		struct gc_conn *c = container_of(t, struct gc_conn, sock_tag);
		if (c->dead)
			break;
		pthread_mutex_lock(&c->xlock);
		sock_disarm(s, c);
		if (c->state == CONN_BLOCKED)
			set_state(s, c, CONN_ACTIVE);
		pthread_mutex_unlock(&c->xlock);
		break;
	}
	}
}

static void *engine_main(void *arg)
{
	struct gc_srv *s = arg;
	struct epoll_event ev[64];
	sigset_t all;

	/* signals go to the application's threads, never here */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (s->p.flags & GC_RING_ENGINE_PIN_CPU) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(s->p.cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	while (!s->stop) {
		uint64_t now = gc_now_ns();
		uint64_t next = s->ccwait.next != &s->ccwait ? ccwait_due(s, now) : 0;
		int n;

		if (s->nactive) {
			round_robin(s, now);
			n = epoll_wait(s->ep, ev, 64, 0);
		} else {
			struct timespec ts, *tp = NULL;
			if (next) {
				uint64_t d = next > now ? next - now : 0;
				ts.tv_sec = (time_t)(d / 1000000000u);
				ts.tv_nsec = (long)(d % 1000000000u);
				tp = &ts;
			}
			s->st.sleeps++;
			n = epoll_pwait2(s->ep, ev, 64, tp, NULL);
		}
		for (int i = 0; i < n; i++)
			handle(s, &ev[i]);
		bury(s);
	}
	return NULL;
}

static void srv_free(struct gc_srv *s)
{
	while (s->clients)
		gc_srv_client_free(s, s->clients);
	bury(s);
	if (s->lfd >= 0) {
		close(s->lfd);
		/* not if another engine's socket replaced ours at that path */
		struct stat st;
		if (s->listen_path && lstat(s->listen_path, &st) == 0 && st.st_ino == s->listen_ino &&
		    st.st_dev == s->listen_dev)
			unlink(s->listen_path);
	}
	if (s->stopfd >= 0)
		close(s->stopfd);
	if (s->ep >= 0)
		close(s->ep);
	free(s->listen_path);
	free(s->allow_uids);
	free(s->allow_gids);
	free(s->out);
	free(s);
}

GC_EXPORT struct gc_ring_engine *gc_ring_engine_start(const struct gc_ring_engine_params *p)
{
	return gc_ring_engine_start_hooks(p, NULL);
}

struct gc_ring_engine *gc_ring_engine_start_hooks(const struct gc_ring_engine_params *p,
					const struct gc_ring_engine_hooks *hooks)
{
	struct gc_ring_engine_params d = { 0 };

	if (p)
		d = *p;
	const unsigned known = GC_RING_ENGINE_PIN_CPU | GC_RING_ENGINE_LISTEN_GID;
	if (d.flags & ~known) {
		gc_seterr(EINVAL, "gc_ring_engine_start: unknown flags 0x%x", d.flags & ~known);
		return NULL;
	}
	if (d.listen_mode & ~0777u) {
		gc_seterr(EINVAL, "gc_ring_engine_start: listen_mode 0%o has bits other than 0777",
			  d.listen_mode);
		return NULL;
	}
	if ((d.n_allow_uids && !d.allow_uids) || (d.n_allow_gids && !d.allow_gids)) {
		gc_seterr(EFAULT, "gc_ring_engine_start: %s is NULL",
			  d.n_allow_uids && !d.allow_uids ? "allow_uids" : "allow_gids");
		return NULL;
	}
	if (d.n_allow_uids > 65536 || d.n_allow_gids > 65536) {
		gc_seterr(EINVAL, "gc_ring_engine_start: more than 65536 %s",
			  d.n_allow_uids > 65536 ? "allow_uids" : "allow_gids");
		return NULL;
	}
	if ((d.flags & GC_RING_ENGINE_PIN_CPU) && (d.cpu < 0 || d.cpu >= CPU_SETSIZE)) {
		gc_seterr(EINVAL, "gc_ring_engine_start: cpu %d is not a CPU number", d.cpu);
		return NULL;
	}
	if (d.batch > GC_BATCH_MAX) {
		gc_seterr(EINVAL, "gc_ring_engine_start: batch %u is above %u", d.batch, GC_BATCH_MAX);
		return NULL;
	}
	if (!d.batch)
		d.batch = 64;
	if (!d.listen_mode)
		d.listen_mode = 0600;
	if (!d.max_clients)
		d.max_clients = GC_MAX_CLIENTS_DEFAULT;

	struct gc_srv *s = calloc(1, sizeof(*s));
	struct gc_ring_engine *e = calloc(1, sizeof(*e));
	int sp[2] = { -1, -1 };
	if (!s || !e) {
		free(s);
		free(e);
		gc_seterr(ENOMEM, "gc_ring_engine_start: out of memory");
		return NULL;
	}
	s->p = d;
	s->p.listen = NULL;
	/* the caller's arrays need not outlive this call */
	s->p.allow_uids = NULL;
	s->p.allow_gids = NULL;
	if (d.n_allow_uids) {
		s->allow_uids = malloc(d.n_allow_uids * sizeof(uid_t));
		if (s->allow_uids)
			memcpy(s->allow_uids, d.allow_uids, d.n_allow_uids * sizeof(uid_t));
	}
	if (d.n_allow_gids) {
		s->allow_gids = malloc(d.n_allow_gids * sizeof(gid_t));
		if (s->allow_gids)
			memcpy(s->allow_gids, d.allow_gids, d.n_allow_gids * sizeof(gid_t));
	}
	s->idle_ns = (uint64_t)d.idle_us * 1000u;
	s->lfd = s->stopfd = -1;
	if (hooks)
		s->h = *hooks;
	link_init(&s->aclients);
	link_init(&s->ccwait);
	s->stop_tag.kind = TAG_STOP;
	s->listen_tag.kind = TAG_LISTEN;
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	s->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->out = calloc(d.batch, sizeof(*s->out));
	if ((d.n_allow_uids && !s->allow_uids) || (d.n_allow_gids && !s->allow_gids)) {
		gc_seterr(ENOMEM, "gc_ring_engine_start: out of memory");
		goto fail;
	}
	if (s->ep < 0 || s->stopfd < 0 || !s->out) {
		gc_seterr(errno ? errno : ENOMEM, "gc_ring_engine_start: epoll or eventfd failed");
		goto fail;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->stop_tag };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->stopfd, &ev) < 0) {
		gc_seterr(errno, "gc_ring_engine_start: epoll_ctl failed");
		goto fail;
	}
	if (d.listen && gc_srv_listen(s, d.listen) < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		gc_seterr(errno, "gc_ring_engine_start: socketpair failed");
		goto fail;
	}
	if (!gc_srv_client_new(s, sp[0], true)) {
		gc_seterr(errno ? errno : ENOMEM, "gc_ring_engine_start: registering the local client failed");
		goto fail;
	}
	sp[0] = -1;
	pthread_mutex_init(&e->lock, NULL);
	e->fd = sp[1];
	e->srv = s;
	int err = pthread_create(&e->thread, NULL, engine_main, s);
	if (err) {
		gc_seterr(err, "gc_ring_engine_start: pthread_create failed");
		pthread_mutex_destroy(&e->lock);
		goto fail;
	}
	return e;
fail:
	if (sp[0] >= 0)
		close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	srv_free(s);
	free(e);
	return NULL;
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
		return gc_seterr(errno, "gc_ring_engine_connect: %s: no credentials of the engine", path);
	if (any_of_ours ? uc.uid == 0 || uc.uid == geteuid() : uc.uid == want)
		return 0;
	if (any_of_ours)
		return gc_seterr(EPERM, "gc_ring_engine_connect: the engine at %s runs as uid %u, "
				 "neither root nor uid %u: not trusted (gc_ring_engine_connect_uid() "
				 "names another)", path, (unsigned)uc.uid, (unsigned)geteuid());
	return gc_seterr(EPERM, "gc_ring_engine_connect: the engine at %s runs as uid %u, not %u",
			 path, (unsigned)uc.uid, (unsigned)want);
}

static struct gc_ring_engine *engine_connect(const char *path, bool any_of_ours, uid_t want)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (!path) {
		gc_seterr(EFAULT, "gc_ring_engine_connect: path is NULL");
		return NULL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		gc_seterr(ENAMETOOLONG, "gc_ring_engine_connect: path is longer than %zu bytes",
			  sizeof(sa.sun_path) - 1);
		return NULL;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		gc_seterr(errno, "gc_ring_engine_connect: socket failed");
		return NULL;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;
		close(fd);
		if (err == EACCES)
			gc_seterr(err, "gc_ring_engine_connect: %s: no permission to connect (the "
				  "engine's socket mode and group decide)", path);
		else
			gc_seterr(err, "gc_ring_engine_connect: no engine at %s", path);
		return NULL;
	}
	if (engine_trusted(fd, path, any_of_ours, want) < 0) {
		close(fd);
		return NULL;
	}
	/* a daemon that stops answering must not hang the application */
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct gc_ring_engine *e = calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		gc_seterr(ENOMEM, "gc_ring_engine_connect: out of memory");
		return NULL;
	}
	pthread_mutex_init(&e->lock, NULL);
	e->fd = fd;
	/* Ask once now: an engine that refuses us (not allowed, too many
	 * clients) or speaks another version says so here, not at the first
	 * attach. */
	struct gc_req q = { .op = GC_OP_HELLO, .version = GC_PROTO_VERSION };
	struct gc_rep rep;
	int rfd = -1;
	if (gc_client_call(e, "gc_ring_engine_connect", &q, NULL, 0, &rep, &rfd) < 0) {
		int err = errno;
		pthread_mutex_destroy(&e->lock);
		close(fd);
		free(e);
		errno = err;
		return NULL;
	}
	if (rfd >= 0)
		close(rfd);
	return e;
}

GC_EXPORT struct gc_ring_engine *gc_ring_engine_connect(const char *path)
{
	return engine_connect(path, true, 0);
}

GC_EXPORT struct gc_ring_engine *gc_ring_engine_connect_uid(const char *path, uid_t engine_uid)
{
	return engine_connect(path, false, engine_uid);
}

GC_EXPORT int gc_ring_engine_stop(struct gc_ring_engine *e)
{
	if (!e)
		return gc_seterr(EFAULT, "gc_ring_engine_stop: e is NULL");
	pthread_mutex_lock(&e->lock);
	while (e->rings)
		gc_ring_unlink(e->rings);
	if (e->srv) {
		uint64_t one = 1;
		if (write(e->srv->stopfd, &one, sizeof(one)) < 0) {
			/* cannot happen with a fresh eventfd; the join would hang */
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (e->srv) {
		pthread_join(e->thread, NULL);
		srv_free(e->srv);
	}
	close(e->fd);
	pthread_mutex_destroy(&e->lock);
	free(e);
	return 0;
}

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
		return -1;
	*st = rep.stats;
	return 0;
}
