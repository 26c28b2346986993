/* SPDX-License-Identifier: MIT */
/*
 * server.c - the engine thread: one thread that drains many rings and serves
 * the clients' requests.
 *
 * Each attached ring is a connection of a client (a control socket).  Active
 * connections are polled round robin, fairly per client: each round the
 * clients take turns worth `batch` packets, spread over their rings
 * (round_robin()).  A visit drains at most `batch` packets from a ring
 * (flow.c; if its congestion controller allows): one sendmmsg() per visit,
 * GSO runs inside.  A ring found empty is parked: the engine sets
 * kern_notify and stops polling it, until the application writes the ring's
 * eventfd (gc_ring_notify()).  With every ring parked, the thread blocks in
 * epoll.  Nothing else wakes it: not a timer, not a signal.
 *
 * The same thread serves the control sockets (proto.c): the socketpair of
 * the process that started the engine, and, in daemon mode, every process
 * that connected to the listening socket (listen.c).  A client sends only on
 * its own sockets, and a ring only names bytes of a zone its own client
 * passed.  A malformed request gets an error reply; a client that cannot take
 * a reply is dropped.  The engine never blocks on a client.
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
#include <unistd.h>
#include "ring/srv.h"

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

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

static void list_del(struct gc_srv *s, struct gc_flow *c)
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
static void list_add_active(struct gc_srv *s, struct gc_flow *c)
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

static void set_state(struct gc_srv *s, struct gc_flow *c, enum gc_flow_state st)
{
	list_del(s, c);
	c->state = st;
	if (st == CONN_ACTIVE)
		list_add_active(s, c);
	else if (st == CONN_CCWAIT)
		link_add_tail(&s->ccwait, &c->link);
}

/* ---- socket readiness --------------------------------------------------- */

static void sock_arm(struct gc_srv *s, struct gc_flow *c)
{
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLONESHOT, .data.ptr = &c->sock_tag };

	if (epoll_ctl(s->ep, c->sock_armed ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->sock, &ev) == 0)
		c->sock_armed = true;
}

static void sock_disarm(struct gc_srv *s, struct gc_flow *c)
{
	if (c->sock_armed)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, c->sock, NULL);
	c->sock_armed = false;
}

/* ---- one flow ----------------------------------------------------- */

static void conn_violation(struct gc_srv *s, struct gc_flow *c)
{
	char why[200];

	if (c->state == CONN_STOPPED)
		return;
	gc_kring_describe(&c->k, why, sizeof(why));
	/* the tools' log shape (groupcast(1) LOGS), without the journal's <N>
	 * prefix: the engine unit's SyslogLevel=warning gives it that level */
	if (!s->p.quiet)
		fprintf(stderr, "level=warning event=ring_violation ring=%u reason=\"%s\"\n", c->id, why);
	s->st.violations++;
	set_state(s, c, CONN_STOPPED);
	sock_disarm(s, c);
	c->pend_n = 0;
	gc_kring_wake(&c->k);
}

/* Serve c once (gc_flow_drain()) and move it where the drain left it.
 * Returns how many packets it consumed: at most the batch size. */
static unsigned pump(struct gc_srv *s, struct gc_flow *c, uint64_t now)
{
	unsigned n;

	switch (gc_flow_drain(c, now, &s->st, &n)) {
	case DRAIN_MORE: c->idle_since = 0; break;
	case DRAIN_BLOCKED:
		c->idle_since = 0;
		if (!s->h.xmit) {
			set_state(s, c, CONN_BLOCKED);
			sock_arm(s, c);
		}
		/* a test transport that declines stays active: retried next round */
		break;
	case DRAIN_CCWAIT: set_state(s, c, CONN_CCWAIT); break;
	case DRAIN_ERROR: conn_violation(s, c); break;
	case DRAIN_EMPTY:
		/* keep polling an idle ring for idle_us before parking it */
		if (s->idle_ns) {
			if (!c->idle_since)
				c->idle_since = now;
			if (now - c->idle_since < s->idle_ns)
				break;
		}
		int r = gc_kring_park(&c->k);
		if (r < 0) {
			conn_violation(s, c);
		} else if (r == 1) {
			c->idle_since = 0;
			set_state(s, c, CONN_PARKED);
		}
		break;
	}
	return n;
}

/* pump() unless an application thread is flushing the ring right now (it
 * sends; the connection stays active and is looked at next round). */
static unsigned pump_unless_busy(struct gc_srv *s, struct gc_flow *c, uint64_t now)
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
			struct gc_flow *c = container_of(cl->active.next, struct gc_flow, link);
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
		struct gc_flow *c = container_of(l, struct gc_flow, link);
		nx = l->next;
		if (c->cc_wake && c->cc_wake <= now)
			set_state(s, c, CONN_ACTIVE);
		else if (c->cc_wake && (!next || c->cc_wake < next))
			next = c->cc_wake;
	}
	return next;
}

static void zmap_put(struct gc_client *cl, struct gc_zmap *z);
static void listen_pause(struct gc_srv *s, bool pause);

/* A connection whose ring, zone and sockets are set up starts: it goes into
 * the epoll set and the flow table, and is looked at once. */
static int conn_start(struct gc_srv *s, struct gc_flow *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = &c->notify_tag };

	c->srv = s;
	c->notify_tag.kind = TAG_NOTIFY;
	c->sock_tag.kind = TAG_SOCK;
	/* edge-triggered: every write to the eventfd is one event; the engine
	 * never needs to read the counter */
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, c->efd, &ev) < 0)
		return -errno;
	c->cc = s->h.cc && s->h.cc->init ? s->h.cc->init(s->h.cc_arg, c) : NULL;
	c->state = CONN_PARKED;
	set_state(s, c, CONN_ACTIVE); /* look once: packets may be queued already */
	gc_flowtab_add(s->tab, c);
	s->nconns++;
	return 0;
}

static void conn_free(struct gc_srv *s, struct gc_flow *c)
{
	/* no new gc_ring_flush() finds it; one that did waits for the lock
	 * below, or is done */
	gc_flowtab_del(s->tab, c);
	/* DEL first: the application holds the same eventfd */
	if (c->efd >= 0)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, c->efd, NULL);
	if (s->h.cc && s->h.cc->release)
		s->h.cc->release(c->cc);
	/* out of PARKED under the lock, as every such change (srv.h) */
	pthread_mutex_lock(&c->xlock);
	list_del(s, c);
	c->state = CONN_STOPPED;
	sock_disarm(s, c);
	gc_flow_teardown(c, zmap_put);
	pthread_mutex_unlock(&c->xlock);
	c->dead = true;
	c->dead_next = s->graveyard;
	s->graveyard = c;
	s->nconns--;
}

/* Let go of the connections freed while handling the last batch of events
 * (epoll may have returned events that name them). */
static void bury(struct gc_srv *s)
{
	while (s->graveyard) {
		struct gc_flow *c = s->graveyard;
		s->graveyard = c->dead_next;
		gc_flow_put(c);
	}
}

/* ---- zones and requests ------------------------------------------------- */

/* The client's mapping of this zone, if the engine has one. */
static struct gc_zmap *zmap_find(struct gc_client *cl, const struct stat *st, uint64_t size)
{
	for (struct gc_zmap *z = cl->zones; z; z = z->next)
		if (z->dev == st->st_dev && z->ino == st->st_ino && z->size == size)
			return z;
	return NULL;
}

static struct gc_zmap *zmap_get(struct gc_client *cl, int fd, const struct stat *st, uint64_t size,
				struct gc_rep *rep)
{
	struct gc_zmap *z = zmap_find(cl, st, size);

	if (z) {
		z->refs++;
		return z;
	}
	z = calloc(1, sizeof(*z));
	if (!z) {
		gc_rep_err(rep, ENOMEM, "out of memory");
		return NULL;
	}
	/* Read-only, and always the engine's own mapping, also for the process
	 * that started it: what goes out is what the memfd holds, whatever
	 * the application does to its own mapping of the zone (unmaps it,
	 * mprotect()s it, maps something else over it).  Sent from the
	 * application's mapping, such a payload failed with EFAULT (issue 19,
	 * test_ring_mapping).  The memfd is sealed against shrinking
	 * (gc_srv_decode()), so this mapping never faults. */
	void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		gc_rep_err(rep, errno, "mapping the %llu-byte zone failed", (unsigned long long)size);
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

static void zmap_put(struct gc_client *cl, struct gc_zmap *z)
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
		return gc_rep_err(rep, EDQUOT,
				  "the client has %u rings, the engine's limit per client "
				  "(max_rings)",
				  cl->nrings);
	}
	if (cl->nfds > cl->max_fds || cl->max_fds - cl->nfds < GC_CONN_FDS) {
		s->st.limited++;
		return gc_rep_err(rep, EMFILE,
				  "the engine holds %u descriptors for the client; a ring "
				  "needs %u more and the limit per client is %u (max_fds)",
				  cl->nfds, GC_CONN_FDS, cl->max_fds);
	}
	uint64_t need = gc_shm_size(q->entries, q->ack_entries, (uint64_t)gc_page_size());
	if (fstat(fds[1], &zst) < 0)
		return gc_rep_err(rep, errno, "fstat of the zone failed");
	uint64_t more = need + (zmap_find(cl, &zst, q->zone_size) ? 0 : q->zone_size);
	if (more > cl->max_map || cl->mapped > cl->max_map - more) {
		s->st.limited++;
		return gc_rep_err(rep, EDQUOT,
				  "the engine maps %llu bytes for the client; this ring needs "
				  "%llu more and the limit per client is %llu (max_map_bytes)",
				  (unsigned long long)cl->mapped, (unsigned long long)more,
				  (unsigned long long)cl->max_map);
	}

	struct gc_flow *c = calloc(1, sizeof(*c));
	if (!c)
		return gc_rep_err(rep, ENOMEM, "out of memory");
	c->sock = c->efd = -1;
	c->cl = cl;
	if (gc_flow_init(c, &s->h, s->p.batch) < 0) {
		free(c);
		return gc_rep_err(rep, ENOMEM, "out of memory");
	}
	c->zone = zmap_get(cl, fds[1], &zst, q->zone_size, rep);
	if (!c->zone)
		goto fail;
	/* The ring's records and indexes: the process that started us shares
	 * its own mapping, so that ThreadSanitizer sees both sides' atomics at
	 * one address (internal.h, gc_own_share()).  Only the indexes and
	 * records, which the engine checks as it reads them; never the
	 * payloads (zmap_get()). */
	struct stat rst;
	c->shm = cl->local && fstat(fds[0], &rst) == 0 ? gc_own_share(rst.st_dev, rst.st_ino, need)
						       : NULL;
	c->shm_shared = c->shm != NULL;
	if (!c->shm)
		c->shm = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (c->shm == MAP_FAILED) {
		c->shm = NULL;
		gc_rep_err(rep, errno, "mapping the %llu-byte ring failed", (unsigned long long)need);
		goto fail;
	}
	c->shm_len = need;
	cl->mapped += need;
	gc_udp_init(&c->udp, fds[2]);
	if (gc_kring_init(&c->k, c->shm, need, q->entries, q->ack_entries, q->zone_size,
			  c->udp.max_len) < 0) {
		gc_rep_err(rep, EINVAL, "the ring's kern_i %u is not below entries %u",
			   atomic_load_explicit(&((struct gc_ring_shm *)c->shm)->kern_i,
						memory_order_relaxed),
			   q->entries);
		goto fail;
	}
	c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->efd < 0) {
		gc_rep_err(rep, errno, "eventfd failed");
		goto fail;
	}
	c->sock = fds[2];
	fds[2] = -1; /* the connection keeps the socket */
	c->id = ++s->next_id;
	int r = conn_start(s, c);
	if (r < 0) {
		gc_rep_err(rep, -r, "epoll_ctl failed");
		fds[2] = c->sock;
		c->sock = -1;
		goto fail;
	}
	c->cl_next = cl->conns;
	cl->conns = c;
	cl->nrings++;
	cl->nfds += GC_CONN_FDS;
	rep->ring_id = c->id;
	*rfd = c->efd;
	return 0;
fail:
	if (c->efd >= 0)
		close(c->efd);
	if (c->shm) {
		if (c->shm_shared)
			gc_own_unshare(c->shm);
		else
			munmap(c->shm, c->shm_len);
		cl->mapped -= c->shm_len;
	}
	if (c->zone)
		zmap_put(cl, c->zone);
	gc_flow_put(c);
	return -rep->err;
}

static int srv_detach(struct gc_srv *s, struct gc_client *cl, uint32_t id, struct gc_rep *rep)
{
	for (struct gc_flow **pp = &cl->conns; *pp; pp = &(*pp)->cl_next) {
		struct gc_flow *c = *pp;
		if (c->id == id) {
			*pp = c->cl_next;
			cl->nrings--;
			cl->nfds -= GC_CONN_FDS;
			conn_free(s, c);
			return 0;
		}
	}
	return gc_rep_err(rep, ENOENT, "no ring %u on this connection", id);
}

static int request(struct gc_srv *s, struct gc_client *cl)
{
	struct gc_req q;
	struct gc_rep rep;
	unsigned char buf[sizeof(struct gc_req)];
	int fds[GC_PROTO_MAX_FDS], nfds = 0, mflags = 0, rfd = -1;

	ssize_t n = gc_proto_recv(cl->fd, buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT, &mflags);
	if (n < 0)
		return n == -EAGAIN || n == -EINTR ? 0 : (int)n;
	if (n == 0)
		return -ECONNRESET; /* the client went away */
	memset(&rep, 0, sizeof(rep));
	if (gc_srv_decode(buf, (size_t)n, mflags, fds, nfds, &q, &rep) < 0) {
		/* refused: rep says why */
	} else if (q.op == GC_OP_ATTACH) {
		srv_attach(s, cl, &q, fds, &rep, &rfd);
	} else if (q.op == GC_OP_DETACH) {
		srv_detach(s, cl, q.ring_id, &rep);
	} else if (q.op == GC_OP_STATS) {
		struct gc_ring_engine_stats st = s->st;
		/* relaxed: statistics; gc_ring_flush() adds these on its threads */
		st.packets += atomic_load_explicit(&s->fl_packets, memory_order_relaxed);
		st.bytes += atomic_load_explicit(&s->fl_bytes, memory_order_relaxed);
		st.syscalls += atomic_load_explicit(&s->fl_syscalls, memory_order_relaxed);
		st.gso += atomic_load_explicit(&s->fl_gso, memory_order_relaxed);
		st.clients = s->nclients;
		st.rings = s->nconns;
		gc_stats_to_wire(&st, &rep.stats);
	} /* HELLO: the reply says we serve this client */
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Never block on a client: one that cannot take its reply is dropped. */
	ssize_t w = gc_proto_send(cl->fd, &rep, sizeof(rep), &rfd, rfd >= 0 ? 1 : 0, MSG_DONTWAIT);
	if (w < 0)
		return (int)w;
	return w == (ssize_t)sizeof(rep) ? 0 : -EMSGSIZE;
}

/* ---- clients ------------------------------------------------------------ */

/* 0, or -errno (nothing is registered then). */
static int client_new(struct gc_srv *s, int fd, bool local)
{
	struct gc_client *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return -ENOMEM;
	cl->tag.kind = TAG_CLIENT;
	cl->fd = fd;
	cl->local = local;
	link_init(&cl->active);
	/* The limits protect the engine from other processes.  The process
	 * that started it holds the engine in its own memory anyway: limited
	 * only if it asked for limits. */
	cl->max_rings = s->p.max_rings ? s->p.max_rings : local ? UINT_MAX : GC_MAX_RINGS_DEFAULT;
	cl->max_fds = s->p.max_fds ? s->p.max_fds : local ? UINT_MAX : GC_MAX_FDS_DEFAULT;
	cl->max_map = s->p.max_map_bytes ? s->p.max_map_bytes
		: local			 ? UINT64_MAX
					 : GC_MAX_MAP_DEFAULT;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cl->tag };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = errno;
		free(cl);
		return -err;
	}
	cl->next = s->clients;
	s->clients = cl;
	s->nclients++;
	s->nremote += !local;
	return 0;
}

static void client_free(struct gc_srv *s, struct gc_client *cl)
{
	for (struct gc_client **pp = &s->clients; *pp; pp = &(*pp)->next) {
		if (*pp == cl) {
			*pp = cl->next;
			break;
		}
	}
	while (cl->conns) {
		struct gc_flow *c = cl->conns;
		cl->conns = c->cl_next;
		conn_free(s, c);
	}
	epoll_ctl(s->ep, EPOLL_CTL_DEL, cl->fd, NULL);
	close(cl->fd);
	s->nclients--;
	s->nremote -= !cl->local;
	free(cl);
	listen_pause(s, false); /* a descriptor came free */
}

/* ---- the hooks congestion control calls (cc.h) -------------------------- */

int gc_flow_ack(struct gc_flow *c, const struct gc_sent *p)
{
	int r = gc_kring_ack(&c->k, p);
	if (r < 0) {
		conn_violation(c->srv, c);
		return r;
	}
	return 0;
}

void gc_flow_kick(struct gc_flow *c)
{
	if (c->state == CONN_CCWAIT)
		set_state(c->srv, c, CONN_ACTIVE);
}

static void accept_clients(struct gc_srv *s)
{
	char why[200];

	for (int i = 0; i < 64; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
				listen_pause(s, true); /* or the ready socket spins us */
			return;
		}
		if (!gc_srv_peer_allowed(s, fd, why, sizeof(why))) {
			gc_srv_refuse(s, fd, EACCES, why);
		} else if (s->nremote >= s->p.max_clients) {
			snprintf(why, sizeof(why),
				 "the engine serves %u clients, its limit "
				 "(max_clients)",
				 s->nremote);
			gc_srv_refuse(s, fd, EUSERS, why);
		} else if (client_new(s, fd, false) < 0) {
			close(fd);
		}
	}
}

/* Stop or resume accepting (while out of descriptors). */
static void listen_pause(struct gc_srv *s, bool pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.ptr = &s->listen_tag };

	if (s->lfd < 0 || s->listen_paused == pause)
		return;
	if (epoll_ctl(s->ep, EPOLL_CTL_MOD, s->lfd, &ev) == 0)
		s->listen_paused = pause;
}

/* ---- the loop ----------------------------------------------------------- */

static void handle(struct gc_srv *s, struct epoll_event *ev)
{
	struct gc_tag *t = ev->data.ptr;

	switch (t->kind) {
	case TAG_STOP: s->stop = 1; break;
	case TAG_LISTEN: accept_clients(s); break;
	case TAG_EVENT: s->h.event(s->h.event_arg, gc_now_ns()); break;
	case TAG_CLIENT: {
		struct gc_client *cl = container_of(t, struct gc_client, tag);
		if (((ev->events & EPOLLIN) && request(s, cl) < 0) ||
		    (!(ev->events & EPOLLIN) && (ev->events & (EPOLLHUP | EPOLLERR))))
			client_free(s, cl);
		break;
	}
	case TAG_NOTIFY: {
		struct gc_flow *c = container_of(t, struct gc_flow, notify_tag);
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
		struct gc_flow *c = container_of(t, struct gc_flow, sock_tag);
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

void *gc_srv_main(void *arg)
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
		CPU_SET((size_t)s->p.cpu, &set); /* checked >= 0 at start */
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	/* before any request is served: an attach finds it set */
	gc_flowtab_set_engine(s->tab, gettid());
	while (!s->stop) {
		uint64_t now = gc_now_ns();
		uint64_t next = s->ccwait.next != &s->ccwait ? ccwait_due(s, now) : 0;
		int n;

		if (s->h.event) {
			/* the transport's timers (hooks.next_timer) */
			uint64_t t = s->h.next_timer ? s->h.next_timer(s->h.event_arg) : 0;
			if (t && t <= now) {
				s->h.event(s->h.event_arg, now);
				t = s->h.next_timer(s->h.event_arg);
			}
			if (t && (!next || t < next))
				next = t;
		}

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
	gc_flowtab_set_engine(s->tab, 0);
	return NULL;
}

void gc_srv_stop(struct gc_srv *s)
{
	uint64_t one = 1;

	if (write(s->stopfd, &one, sizeof(one)) < 0) {
		/* cannot happen with a fresh eventfd; the join would hang */
	}
}

void gc_srv_free(struct gc_srv *s)
{
	while (s->clients)
		client_free(s, s->clients);
	bury(s);
	gc_srv_unlisten(s);
	if (s->stopfd >= 0)
		close(s->stopfd);
	if (s->ep >= 0)
		close(s->ep);
	if (s->tab)
		gc_flowtab_put(s->tab); /* rings attached here may hold it longer */
	free(s->listen_path);
	free(s->allow_uids);
	free(s->allow_gids);
	free(s);
}

int gc_srv_new(const struct gc_ring_engine_opts *p, const struct gc_ring_engine_hooks *hooks,
	       int fd, struct gc_srv **out)
{
	struct gc_srv *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return gc_errf(ENOMEM, "gc_ring_engine_create: out of memory");
	s->p = *p;
	s->p.listen = NULL;
	/* the caller's arrays need not outlive this call */
	s->p.allow_uids = NULL;
	s->p.allow_gids = NULL;
	s->lfd = s->stopfd = s->ep = -1;
	if (p->n_allow_uids) {
		s->allow_uids = malloc(p->n_allow_uids * sizeof(uid_t));
		if (s->allow_uids)
			memcpy(s->allow_uids, p->allow_uids, p->n_allow_uids * sizeof(uid_t));
	}
	if (p->n_allow_gids) {
		s->allow_gids = malloc(p->n_allow_gids * sizeof(gid_t));
		if (s->allow_gids)
			memcpy(s->allow_gids, p->allow_gids, p->n_allow_gids * sizeof(gid_t));
	}
	s->idle_ns = (uint64_t)p->idle_us * 1000u;
	if (hooks)
		s->h = *hooks;
	link_init(&s->aclients);
	link_init(&s->ccwait);
	s->stop_tag.kind = TAG_STOP;
	s->listen_tag.kind = TAG_LISTEN;
	s->tab = gc_flowtab_new();
	if ((p->n_allow_uids && !s->allow_uids) || (p->n_allow_gids && !s->allow_gids) || !s->tab) {
		r = gc_errf(ENOMEM, "gc_ring_engine_create: out of memory");
		goto fail;
	}
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	r = s->ep < 0 ? -errno : 0;
	s->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->stopfd < 0)
		r = -errno;
	if (r < 0) {
		r = gc_errf(-r, "gc_ring_engine_create: epoll or eventfd failed");
		goto fail;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->stop_tag };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->stopfd, &ev) < 0) {
		r = gc_errf(errno, "gc_ring_engine_create: epoll_ctl failed");
		goto fail;
	}
	if (s->h.event) {
		s->event_tag.kind = TAG_EVENT;
		struct epoll_event eev = { .events = EPOLLIN, .data.ptr = &s->event_tag };
		if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->h.event_fd, &eev) < 0) {
			r = gc_errf(errno, "gc_ring_engine_create: epoll_ctl on the event fd failed");
			goto fail;
		}
	}
	if (p->listen && (r = gc_srv_listen(s, p->listen)) < 0)
		goto fail;
	if ((p->flags & GC_RING_ENGINE_LISTEN_FD) && (r = gc_srv_adopt(s, p->listen_fd)) < 0)
		goto fail;
	r = client_new(s, fd, true);
	if (r < 0) {
		r = gc_errf(-r, "gc_ring_engine_create: registering the local client failed");
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (p->flags & GC_RING_ENGINE_LISTEN_FD) /* the caller's until we succeed */
		s->lfd = -1;
	gc_srv_free(s);
	return r;
}
