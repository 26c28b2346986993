/* SPDX-License-Identifier: MIT */
/*
 * srv.h - the engine's state: clients, their zones, and the connections
 * (one per attached ring).  flow.c drains one flow, listen.c owns the
 * listening socket, server.c runs the loop and serves the clients' requests,
 * handle.c holds the public handles.  Everything here is touched by the
 * engine thread only, except what says otherwise (a connection's xlock and
 * what it guards, its refs, and the flow table).
 */
#ifndef GC_RING_SRV_H
#define GC_RING_SRV_H

#include <pthread.h>
#include <sys/types.h>
#include "ring/internal.h"

#define GC_BATCH_MAX 1024u

/* A ring's engine-side descriptors: its UDP socket and its notify eventfd
 * (what max_fds counts). */
#define GC_CONN_FDS 2u

/* Defaults of the limits on clients of the listening socket. */
#define GC_MAX_RINGS_DEFAULT 64u
#define GC_MAX_FDS_DEFAULT 128u
#define GC_MAX_MAP_DEFAULT ((uint64_t)4 << 30)
#define GC_MAX_CLIENTS_DEFAULT 256u

/* A node of a circular doubly linked list (a head is a node of its own). */
struct gc_link {
	struct gc_link *prev, *next; /* NULL: not on a list */
};

/* What an epoll event points at. */
enum gc_tag_kind { TAG_STOP, TAG_LISTEN, TAG_CLIENT, TAG_NOTIFY, TAG_SOCK, TAG_EVENT };
struct gc_tag {
	enum gc_tag_kind kind;
};

enum gc_flow_state {
	CONN_ACTIVE,  /* polled every round */
	CONN_PARKED,  /* kern_notify set: waits for the ring's eventfd */
	CONN_BLOCKED, /* the socket is full: waits for EPOLLOUT */
	CONN_CCWAIT,  /* congestion control said 0: waits for its time or a kick */
	CONN_STOPPED  /* broke a rule: not served until detached */
};

/* A zone of one client, mapped read-only once however many rings use it: the
 * engine's own mapping, never the application's (server.c, zmap_get()). */
struct gc_zmap {
	struct gc_zmap *next;
	dev_t dev;
	ino_t ino;
	uint64_t size;
	const unsigned char *map;
	unsigned refs;
};

struct gc_flow {
	struct gc_tag notify_tag, sock_tag;
	struct gc_kring k;
	struct gc_srv *srv;
	struct gc_client *cl;
	struct gc_zmap *zone;
	void *shm;
	size_t shm_len;
	bool shm_shared; /* the application's own mapping (gc_own_share()) */
	uint32_t id;
	int sock, efd;
	/* fixed at start: the engine's hooks (in its gc_srv) and batch size */
	const struct gc_ring_engine_hooks *h;
	uint32_t batch;
	/* Held by whoever works on the connection: the engine thread (pump and
	 * the events that move it out of PARKED) or an application thread in
	 * gc_ring_flush() (gc_flow_flush()).  state changes to and from PARKED
	 * only under it, and the teardown (gc_flow_teardown()) happens under
	 * it: a thread holding it and seeing !gone may use the connection's
	 * ring, zone, socket, eventfd, h and srv. */
	pthread_mutex_t xlock;
	bool gone;
	/* The memory's owners: the engine (until the connection is buried)
	 * and each gc_ring_flush() that found it in the table (flow.c). */
	_Atomic unsigned refs;
	struct gc_flow *tab_next; /* its bucket of the flow table */
	enum gc_flow_state state;
	bool sock_armed;	 /* the socket is in the epoll set, for EPOLLOUT */
	struct gc_link link;	 /* its client's active list, or the congestion-wait list */
	struct gc_flow *cl_next; /* the client's connections */
	struct gc_udp udp;
	void *cc;
	uint64_t cc_wake;
	uint64_t idle_since;
	/* [0, pend_n): taken, not yet sent (the socket was full); the whole
	 * array (batch records) is the scratch a drain takes records into */
	struct gc_sent *pend;
	uint32_t pend_n, pend_end;
	/* freed: unhooked from everything, its memory kept until the events
	 * already returned by epoll_wait() are handled (they may name it) */
	bool dead;
	struct gc_flow *dead_next;
};

struct gc_client {
	struct gc_tag tag;
	int fd;
	bool local; /* the socketpair of the process that started the engine */
	struct gc_flow *conns;
	unsigned nrings, nfds;	     /* held now */
	unsigned max_rings, max_fds; /* its limits */
	uint64_t mapped, max_map; /* bytes of its rings and zones the engine maps, and the limit */
	struct gc_zmap *zones;
	struct gc_client *next;
	/* Fair share: the engine serves clients round robin, then each
	 * client's active rings round robin (server.c). */
	struct gc_link active; /* its active connections (gc_flow.link) */
	unsigned nactive;
	struct gc_link alink; /* on the engine's list of clients with active rings */
	int32_t credit;	      /* packets it may still take this turn (may be < 0) */
};

struct gc_srv {
	struct gc_ring_engine_opts p;
	char *listen_path;
	dev_t listen_dev; /* the socket file we bound (0/0: unknown) */
	ino_t listen_ino;
	uid_t uid;	   /* ours, at listen time: such clients are always served */
	uid_t *allow_uids; /* copies of p's */
	gid_t *allow_gids;
	struct gc_ring_engine_hooks h;
	uint64_t idle_ns;
	int ep, stopfd, lfd;
	bool listen_paused; /* out of descriptors: not accepting for now */
	struct gc_tag stop_tag, listen_tag, event_tag;
	struct gc_client *clients;
	unsigned nclients, nremote; /* all, and those of the listening socket */
	struct gc_link aclients;    /* clients with active connections */
	unsigned naclients;
	struct gc_link ccwait;	   /* connections waiting for congestion control */
	struct gc_flow *graveyard; /* freed connections, see gc_flow.dead */
	unsigned nactive, nconns;  /* active connections (of all clients), all */
	uint32_t next_id;
	struct gc_ring_engine_stats st; /* the engine thread's */
	/* what gc_ring_flush() sent from application threads (handle.c) */
	_Atomic uint64_t fl_packets, fl_bytes, fl_syscalls, fl_gso;
	struct gc_flowtab *tab; /* connections by ring id, for gc_ring_flush() */
	volatile int stop;
};

/* ---- flow.c: one flow ---------------------------------------------- */

/* What a drain left the connection waiting for. */
enum gc_drain {
	DRAIN_MORE,    /* took (or sent) what it could: look again */
	DRAIN_EMPTY,   /* nothing published to take */
	DRAIN_BLOCKED, /* the transport took part: the rest is pending */
	DRAIN_CCWAIT,  /* congestion control said 0 (c->cc_wake) */
	DRAIN_ERROR    /* the ring broke a rule (c->k.error) */
};

/* Make c ready to drain (h, batch: the engine's); its pending array is
 * allocated here.  The caller holds the first reference. */
int gc_flow_init(struct gc_flow *c, const struct gc_ring_engine_hooks *h, uint32_t batch);
/*
 * Serve c once, the one drain both the engine loop and gc_ring_flush() use:
 * send what is pending, else take at most a batch (or what congestion control
 * allows) and send it, then move dev_i.  *consumed counts the records sent,
 * refused by the transport or skipped as dead.  Counts into st.  The caller
 * holds c->xlock; the state changes (which lists c is on) are the caller's.
 */
enum gc_drain gc_flow_drain(struct gc_flow *c, uint64_t now, struct gc_ring_engine_stats *st,
			    unsigned *consumed);
/*
 * gc_ring_flush()'s engine half, on an application thread: under c->xlock,
 * drain a parked ring until it is empty.  Returns 0 (done, or the engine is
 * polling the ring anyway), 1 (the engine thread was woken for the rest),
 * -EPROTO (the ring broke a rule; the engine was woken to stop it) or
 * -ENOTCONN (the connection is gone: detached, or its engine stopped).  *sent counts the
 * datagrams sent here (added to the engine's statistics).
 */
int gc_flow_flush(struct gc_flow *c, unsigned *sent);
/* Under c->xlock: stop the ring, close and unmap what c holds, mark it gone.
 * put_zone gives the zone back (the engine thread's, see server.c). */
void gc_flow_teardown(struct gc_flow *c, void (*put_zone)(struct gc_client *, struct gc_zmap *));
/* Drop a reference; the last one frees the memory. */
void gc_flow_put(struct gc_flow *c);

/* The connections of one engine by ring id.  Referenced by the engine and
 * by every ring attached through the process that started it (a ring keeps
 * its reference until it is freed or attached again), so gc_ring_flush()
 * can look a ring up while another thread stops the engine. */
struct gc_flowtab *gc_flowtab_new(void);
void gc_flowtab_get(struct gc_flowtab *t);
void gc_flowtab_put(struct gc_flowtab *t);
void gc_flowtab_add(struct gc_flowtab *t, struct gc_flow *c);
void gc_flowtab_del(struct gc_flowtab *t, struct gc_flow *c);
/* The connection of ring id, with a reference (gc_flow_put()), or NULL. */
struct gc_flow *gc_flowtab_find(struct gc_flowtab *t, uint32_t id);
/* The engine thread's id (gettid()) while it runs, 0 before and after: the
 * rings attached here read its CPU affinity through it (handle.c). */
void gc_flowtab_set_engine(struct gc_flowtab *t, pid_t tid);
pid_t gc_flowtab_engine(struct gc_flowtab *t);

/* ---- listen.c: the listening socket --------------------------------------- */

/* Listen at path: 0, or -errno with the message. */
int gc_srv_listen(struct gc_srv *s, const char *path);
/* Serve the listening socket fd instead (GC_RING_ENGINE_LISTEN_FD). */
int gc_srv_adopt(struct gc_srv *s, int fd);
/* Is the peer of fd served?  why says why not. */
bool gc_srv_peer_allowed(const struct gc_srv *s, int fd, char *why, size_t len);
/* Tell a client why it is refused (a notice: seq 0), and hang up. */
void gc_srv_refuse(struct gc_srv *s, int fd, int err, const char *why);
/* Remove the socket file if it is still ours; close the socket. */
void gc_srv_unlisten(struct gc_srv *s);

/* ---- server.c: the engine thread ------------------------------------------ */

/* A server with its local client on fd (the starting process's end of a
 * socketpair), listening at p->listen if set; p is checked by the caller.
 * 0 with *out, or -errno with the message. */
int gc_srv_new(const struct gc_ring_engine_opts *p, const struct gc_ring_engine_hooks *hooks,
	       int fd, struct gc_srv **out);
void *gc_srv_main(void *arg);
/* Ask the engine thread to return (from any thread). */
void gc_srv_stop(struct gc_srv *s);
/* After the thread returned (or was never started). */
void gc_srv_free(struct gc_srv *s);

#endif
