/* SPDX-License-Identifier: MIT */
/*
 * Library-internal view of the packet ring module.
 *
 * The files, in dependency order: each calls only files above it (never one
 * below, never a sibling on its line); tests/e2e/test_ring_layers.py checks it.
 *
 *   sys.c            page size, futex
 *   zone.c           packet zones (memfds)
 *   ring.c kring.c   the shared ring: the application's side, the engine's
 *   udp.c            the UDP transport (cc.h: where others plug in beside it)
 *   proto.c          the control protocol: messages, passing descriptors,
 *                    gc_client_call(), gc_srv_decode()
 *   flow.c           one flow: the one drain (engine loop and flush),
 *                    its lifetime, the flow table by ring id
 *   listen.c         the listening socket: bind, who may connect
 *   server.c         the engine thread: epoll, clients, requests, fair share
 *   handle.c         the public handles: engine start/connect/stop/stats,
 *                    gc_ring_attach/detach/flush/free
 *
 * This header holds what the application side and the protocol need;
 * srv.h (the engine's state) what flow.c, listen.c, server.c and handle.c
 * share.
 */
#ifndef GC_RING_INTERNAL_H
#define GC_RING_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <groupcast/ring.h>

#include "core/core.h" /* gc_errf(), gc_err(), GC_EXPORT, gc_now_ns() */
#include "ring/cc.h"
#include "ring/shm.h"

/* ---- application side --------------------------------------------------- */

struct gc_zone {
	int fd;
	unsigned char *base;
	size_t size;
	size_t nbufs, buf_size; /* buf_size is a multiple of the page size */
	_Atomic unsigned rings; /* rings created on this zone */
};

/*
 * zone.c: the ring memfds this process created and mapped
 * (gc_ring_create()).  An engine started in this process uses the
 * application's own mapping of a ring's records and indexes instead of
 * mapping them a second time: the two sides' atomics are then at one
 * address, which ThreadSanitizer can pair.  Never a zone's: the engine
 * sends payloads from its own mapping of the zone (server.c, zmap_get()),
 * so what the application does to its mapping cannot make a send fail.
 * gc_own_add(): register one (gc_ring_create()); gc_own_share(): the
 * mapping of the file dev/ino of size bytes with a reference, or NULL if
 * it is not ours; gc_own_unshare() gives it back; gc_own_forget() before
 * unmapping: -EBUSY while an engine uses it.
 */
void gc_own_add(int fd, const void *base, uint64_t size);
void *gc_own_share(dev_t dev, ino_t ino, uint64_t size);
void gc_own_unshare(const void *base);
int gc_own_forget(const void *base, const char *fn);

struct gc_ring {
	struct gc_ring_shm *sh;
	struct gc_pkt *pkts;
	_Atomic uint64_t *acks;
	size_t map_len;
	int fd; /* the ring's memfd */
	uint32_t n;
	/* private copies of the indexes this side owns, and a cache of dev_i */
	uint32_t user, umod, dev_cache;
	/* [mod_from, user) is modifiable: claimed after the last publish, or
	 * at and above the first safe position of the last rewind */
	uint32_t mod_from;
	uint32_t wait_seq;
	uint64_t ack_tail;
	struct gc_zone *zone;
	/* attachment */
	struct gc_ring_engine *eng;
	/* The flow table of the engine this process started, if the
	 * ring was attached to one (gc_ring_flush() looks ring_id up in it).
	 * Written by the ring's own thread only (attach, free): an engine
	 * stopped on another thread leaves it, and the table, in place. */
	struct gc_flowtab *tab;
	bool submit_flush; /* the engine's GC_RING_ENGINE_SUBMIT_FLUSH */
	/* The one CPU the in-process engine thread may run on (-1: several,
	 * or not ours), as its affinity mask said when last read (at attach
	 * and at most every 100 ms after, cpu_checked_ns), and when
	 * gc_ring_submit() last ran: a submit on that CPU, long enough after
	 * the previous one, sends in the caller's thread (handle.c,
	 * submit_here()). */
	int engine_cpu;
	uint64_t cpu_checked_ns;
	uint64_t last_submit_ns;
	uint32_t ring_id;
	/* The notify eventfd.  gc_ring_notify() may run on the ring's thread
	 * while gc_ring_engine_destroy() unlinks the ring on another: the notifier
	 * counts itself in efd_users before loading efd, and the unlink takes
	 * efd (exchange with -1) and closes it only once no notifier holds it,
	 * so a write never lands on a descriptor number reused meanwhile. */
	_Atomic int efd;
	_Atomic unsigned efd_users;
	struct gc_ring *eng_next; /* the engine handle's list of attached rings */
	struct gc_ring *eng_prev;
};

struct gc_flow;
struct gc_flowtab;

/* ring.c, for handle.c: umod_i = user_i (what gc_ring_publish() and
 * gc_ring_flush() share), and -EPIPE with the message naming the engine's
 * reason err. */
void gc_ring_publish_store(struct gc_ring *r);
int gc_ring_stopped(const struct gc_ring *r, const char *fn, uint32_t err);

/* An engine handle: a started engine (srv != NULL) or a connection to one. */
struct gc_srv;
struct gc_ring_engine {
	pthread_mutex_t lock; /* one request at a time; guards rings */
	int fd;		      /* control socket (SOCK_SEQPACKET) */
	struct gc_srv *srv;   /* started here: the engine's state */
	pthread_t thread;
	struct gc_ring *rings; /* attached through this handle */
	uint32_t seq;	       /* of the last request sent */
	uint64_t stale;	       /* replies discarded: not the answer to the request */
};

/* ---- the control protocol (proto.c) ------------------------------------- */

/*
 * Version 2 numbers requests: every reply carries its request's seq, and a
 * client discards a reply that is not the answer to what it asked (a late
 * reply to a request it gave up on).  Every version starts a request with
 * {op, version} and a reply with {version, err}, so that a peer speaking
 * another version is told so (EPROTONOSUPPORT), not "malformed".
 * Version 3 carries the engine's counters as struct gc_wire_stats, not as
 * the public struct gc_ring_engine_stats, so that the public struct can grow.
 */
#define GC_PROTO_VERSION 3u

/* The largest zone an engine maps. */
#define GC_ZONE_MAX ((uint64_t)64 << 30)

enum gc_op { GC_OP_ATTACH = 1, GC_OP_DETACH, GC_OP_STATS, GC_OP_HELLO };

struct gc_req {
	uint32_t op, version;
	uint32_t seq;		       /* the client's number for it, never 0 */
	uint32_t entries, ack_entries; /* ATTACH */
	uint32_t ring_id;	       /* DETACH */
	uint64_t zone_size;	       /* ATTACH */
};

/*
 * The engine's counters on the wire: n values, in the order of the table in
 * proto.c (append only: a counter keeps its index forever).  A client takes
 * the first min(n, what it knows) and zeroes the rest, so an engine with more
 * counters and a client with fewer (or the other way round) still agree; the
 * public struct gc_ring_engine_stats can grow without a new protocol version.
 */
#define GC_WIRE_STATS_MAX 32
struct gc_wire_stats {
	uint32_t n, pad;
	uint64_t v[GC_WIRE_STATS_MAX];
};
void gc_stats_to_wire(const struct gc_ring_engine_stats *st, struct gc_wire_stats *w);
/* Returns how many of w's counters were known here. */
unsigned gc_stats_from_wire(const struct gc_wire_stats *w, struct gc_ring_engine_stats *st);

struct gc_rep {
	uint32_t version;
	int32_t err;  /* 0 or an errno */
	uint32_t seq; /* the request's; 0: a notice that answers no request
			 (the engine refused the client and hung up) */
	uint32_t op;  /* the request's */
	uint32_t ring_id;
	uint32_t pad;
	uint64_t reserved;	    /* 0 (version 1 once sent an address here) */
	struct gc_wire_stats stats; /* STATS */
	char msg[200];		    /* the reason, when err != 0 */
};

/* The smallest reply a client reads (version, err, seq) before it knows
 * whether the rest is laid out as it expects. */
#define GC_REP_HEAD 12u

/* Room for one more descriptor than any message carries, to notice extras. */
#define GC_PROTO_MAX_FDS 4

/* sendmsg() with nfds descriptors (MSG_NOSIGNAL added to flags): the bytes
 * sent or -errno. */
ssize_t gc_proto_send(int sock, const void *buf, size_t len, const int *fds, int nfds, int flags);
/* Receive one message and up to GC_PROTO_MAX_FDS descriptors (all others
 * closed); *mflags gets the message's flags (MSG_TRUNC, MSG_CTRUNC).  The
 * bytes received or -errno. */
ssize_t gc_proto_recv(int sock, void *buf, size_t len, int *fds, int *nfds, int flags, int *mflags);
/* rep->err = err and rep->msg from fmt; returns -err. */
int gc_rep_err(struct gc_rep *rep, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Client side: send q (q->seq is set here) with nfds descriptors, wait for
 * its reply and at most one descriptor (*rfd, -1 if none).  Replies to
 * earlier requests are discarded (e->stale counts them).  Returns 0, or
 * -errno with gc_errmsg() set from the reply or the failure. */
int gc_client_call(struct gc_ring_engine *e, const char *fn, struct gc_req *q, const int *fds,
		   int nfds, struct gc_rep *rep, int *rfd);

/*
 * Server side: decode and check one request as it came off the socket, n
 * bytes at buf (recvmsg() flags mflags: MSG_TRUNC, MSG_CTRUNC) and the nfds
 * descriptors that came with it.  This is everything another process
 * controls; it checks all that can be checked without the client's state:
 * the header, the op and its sizes, and what each descriptor is (ATTACH:
 * two memfds on tmpfs sealed against shrinking and large enough for the
 * layout, and a connected UDP socket).  It maps nothing and keeps nothing.
 * Returns 0 with *q filled, or -errno with rep->err and rep->msg set (rep->seq
 * and rep->op as far as they could be read).  fuzz/ring_req_fuzz.c feeds it.
 */
int gc_srv_decode(const void *buf, size_t n, int mflags, const int *fds, int nfds, struct gc_req *q,
		  struct gc_rep *rep);

/* ---- the engine's view of one ring (kring.c) ---------------------------- */

/* struct gc_sent, a packet the engine took from a ring: cc.h */

struct gc_kring {
	struct gc_ring_shm *sh;
	struct gc_pkt *pkts;
	_Atomic uint64_t *acks;
	uint32_t n, ack_n; /* the engine's own sizes, never re-read */
	uint64_t zone_size;
	uint32_t max_len; /* largest payload the transport can send */
	/* private copies of the four indexes */
	uint32_t dev, kern, user, umod;
	uint64_t ack_head;
	uint32_t error;	    /* enum gc_ring_violation; the ring is not served */
	uint32_t woken_seq; /* gc_ring_wait() sequence last woken */
	uint64_t sent, bytes, dead, send_errors, acks_lost;
};

/* The layout of a ring memfd of `entries` records is checked by the caller
 * (shm_size bytes mapped at shm).  Reads kern_i as the starting position.
 * 0, -EINVAL (sizes) or -ERANGE (kern_i not below entries). */
int gc_kring_init(struct gc_kring *k, void *shm, uint64_t shm_size, uint32_t entries,
		  uint32_t ack_entries, uint64_t zone_size, uint32_t max_len);
/* How many records are published and not taken ([kern_i, umod_i)). */
int gc_kring_plan(struct gc_kring *k, uint32_t *avail);
/* Take up to want records: claim them (move kern_i), confirm against a
 * concurrent rewind, then read and check them.  out[] gets the live ones. */
int gc_kring_claim(struct gc_kring *k, uint32_t want, struct gc_sent *out, uint32_t *nout,
		   uint32_t *ntaken);
/* plan + claim */
int gc_kring_take(struct gc_kring *k, uint32_t max, struct gc_sent *out, uint32_t *nout, uint32_t *ntaken);
/* Every record before pos is finished: move dev_i to pos.  Returns 1 if a
 * gc_ring_wait() caller should be woken (gc_kring_wake()). */
int gc_kring_done(struct gc_kring *k, uint32_t pos);
void gc_kring_wake(struct gc_kring *k);
/* Nothing to take: set kern_notify and stop polling, unless packets came in
 * meanwhile.  Returns 1 if parked, 0 if there is work, -EPROTO on a violation. */
int gc_kring_park(struct gc_kring *k);
void gc_kring_unpark(struct gc_kring *k);
/* Acknowledge a sent packet: kern_acked (if the slot still holds it) and
 * user_seq into the acknowledgement log. */
int gc_kring_ack(struct gc_kring *k, const struct gc_sent *p);
/* Stop serving the ring (code: enum gc_ring_violation); returns -EPROTO,
 * what every gc_kring_*() returns for a ring that broke a rule. */
int gc_kring_stop(struct gc_kring *k, int code, uint32_t pos, uint64_t val);
/* Account datagrams the transport refused. */
void gc_kring_errors(struct gc_kring *k, uint64_t n, int err);
/* A one-line description of why the ring was stopped. */
void gc_kring_describe(const struct gc_kring *k, char *buf, size_t len);

/* ---- the UDP transport (udp.c) ------------------------------------------ */

struct gc_udp {
	int fd;
	int family;
	uint32_t max_len; /* 65507 (IPv4) or 65527 (IPv6) */
	uint32_t gso_max; /* largest GSO segment; 0: no GSO */
};

struct gc_udp_out {
	uint64_t sent, bytes, errors, syscalls, gso;
	int last_errno;
};

/* Check that fd is a connected UDP socket: 0, or -errno and why names the
 * problem. */
int gc_udp_check(int fd, char *why, size_t whylen);
int gc_udp_init(struct gc_udp *u, int fd);
/* Send p[0..n) from zone.  Returns how many packets were consumed (sent, or
 * refused and counted in out->errors); fewer than n when the socket is full. */
unsigned gc_udp_send(struct gc_udp *u, const struct gc_sent *p, unsigned n,
		     const unsigned char *zone, struct gc_udp_out *out);

/* ---- the engine (server.c, handle.c) ------------------------------------- */

/* gc_ring_engine_create_hooks(), an engine with other plugs: cc.h */

/* Helpers shared by the files of the module. */
int gc_memfd_sealed(const char *name, size_t size, void **map); /* zone.c */
long gc_page_size(void);
int gc_futex_wait(_Atomic uint32_t *word, uint32_t val, int timeout_ms);
void gc_futex_wake(_Atomic uint32_t *word);

#endif
