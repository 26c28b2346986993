/* SPDX-License-Identifier: MIT */
/*
 * srv.h - the engine's state: clients, their zones, and the connections
 * (one per attached ring).  engine.c runs it; daemon.c serves the clients'
 * requests.  Everything here is touched by the engine thread only.
 */
#ifndef GC_RING_SRV_H
#define GC_RING_SRV_H

#include <pthread.h>
#include <sys/types.h>
#include "ring/internal.h"

#define GC_ZONE_MAX ((uint64_t)64 << 30)
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
enum gc_tag_kind { TAG_STOP, TAG_LISTEN, TAG_CLIENT, TAG_NOTIFY, TAG_SOCK };
struct gc_tag {
	enum gc_tag_kind kind;
};

enum gc_conn_state {
	CONN_ACTIVE,  /* polled every round */
	CONN_PARKED,  /* kern_notify set: waits for the ring's eventfd */
	CONN_BLOCKED, /* the socket is full: waits for EPOLLOUT */
	CONN_CCWAIT,  /* congestion control said 0: waits for its time or a kick */
	CONN_STOPPED  /* broke a rule: not served until detached */
};

/* A zone of one client, mapped read-only once however many rings use it. */
struct gc_zmap {
	struct gc_zmap *next;
	dev_t dev;
	ino_t ino;
	uint64_t size;
	const unsigned char *map;
	unsigned refs;
};

struct gc_conn {
	struct gc_tag notify_tag, sock_tag;
	struct gc_kring k;
	struct gc_srv *srv;
	struct gc_client *cl;
	struct gc_zmap *zone;
	void *shm;
	size_t shm_len;
	uint32_t id;
	int sock, efd;
	/* Held by whoever works on the connection: the engine thread (pump and
	 * the events that move it out of PARKED) or an application thread in
	 * gc_ring_flush() (flush.c).  state changes to and from PARKED only
	 * under it. */
	pthread_mutex_t xlock;
	enum gc_conn_state state;
	bool sock_armed; /* the socket is in the epoll set, for EPOLLOUT */
	struct gc_link link;         /* its client's active list, or the congestion-wait list */
	struct gc_conn *cl_next;     /* the client's connections */
	struct gc_udp udp;
	void *cc;
	uint64_t cc_wake;
	uint64_t idle_since;
	/* taken, not yet sent (the socket was full) */
	struct gc_sent *pend;
	uint32_t pend_i, pend_n, pend_end;
	/* freed: unhooked from everything, its memory kept until the events
	 * already returned by epoll_wait() are handled (they may name it) */
	bool dead;
	struct gc_conn *dead_next;
};

struct gc_client {
	struct gc_tag tag;
	int fd;
	bool local; /* the socketpair of the process that started the engine */
	struct gc_conn *conns;
	unsigned nrings, nfds;         /* held now */
	unsigned max_rings, max_fds;   /* its limits */
	uint64_t mapped, max_map;      /* bytes of its rings and zones the engine maps, and the limit */
	struct gc_zmap *zones;
	struct gc_client *next;
	/* Fair share: the engine serves clients round robin, then each
	 * client's active rings round robin (engine.c). */
	struct gc_link active; /* its active connections (gc_conn.link) */
	unsigned nactive;
	struct gc_link alink; /* on the engine's list of clients with active rings */
	int32_t credit;       /* packets it may still take this turn (may be < 0) */
};

struct gc_srv {
	struct gc_ring_engine_params p;
	char *listen_path;
	dev_t listen_dev; /* the socket file we bound (0/0: unknown) */
	ino_t listen_ino;
	uid_t uid;        /* ours, at listen time: such clients are always served */
	uid_t *allow_uids; /* copies of p's */
	gid_t *allow_gids;
	struct gc_ring_engine_hooks h;
	uint64_t idle_ns;
	int ep, stopfd, lfd;
	bool listen_paused; /* out of descriptors: not accepting for now */
	struct gc_tag stop_tag, listen_tag;
	struct gc_client *clients;
	unsigned nclients, nremote; /* all, and those of the listening socket */
	struct gc_link aclients;    /* clients with active connections */
	unsigned naclients;
	struct gc_link ccwait;      /* connections waiting for congestion control */
	struct gc_conn *graveyard;  /* freed connections, see gc_conn.dead */
	unsigned nactive, nconns;   /* active connections (of all clients), all */
	uint32_t next_id;
	struct gc_ring_engine_stats st; /* the engine thread's */
	/* what gc_ring_flush() sent from application threads (flush.c) */
	_Atomic uint64_t fl_packets, fl_bytes, fl_syscalls, fl_gso;
	struct gc_sent *out; /* batch scratch */
	volatile int stop;
};

/* engine.c */
struct gc_client *gc_srv_client_new(struct gc_srv *s, int fd, bool local);
void gc_srv_client_free(struct gc_srv *s, struct gc_client *cl);
int gc_srv_conn_start(struct gc_srv *s, struct gc_conn *c);
/* Send p[0..n) on c's transport, counting into st; returns how many went. */
unsigned gc_srv_xmit(struct gc_srv *s, struct gc_conn *c, const struct gc_sent *p, unsigned n,
		     uint64_t now, struct gc_ring_engine_stats *st);

void gc_srv_conn_free(struct gc_srv *s, struct gc_conn *c);

/* daemon.c */
int gc_srv_request(struct gc_srv *s, struct gc_client *cl);
int gc_srv_listen(struct gc_srv *s, const char *path);
void gc_srv_accept(struct gc_srv *s);
void gc_srv_listen_pause(struct gc_srv *s, bool pause);
void gc_zmap_put(struct gc_client *cl, struct gc_zmap *z);

#endif
