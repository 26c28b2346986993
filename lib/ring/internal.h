/* SPDX-License-Identifier: MIT */
/*
 * Library-internal view of the packet ring module:
 *   - struct gc_zone, struct gc_ring: the application's handles (zone.c, ring.c)
 *   - struct gc_kring: the engine's private view of one ring (kring.c)
 *   - struct gc_udp: the UDP transport (udp.c)
 *   - the control protocol between a client and an engine (daemon.c)
 *   - the hooks a transport and a congestion controller plug into (cc.h)
 */
#ifndef GC_RING_INTERNAL_H
#define GC_RING_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <groupcast/ring.h>

#include "group/internal.h" /* gc_seterr(), GC_EXPORT */
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
	struct gc_conn *conn; /* the engine's side, if it runs in this process */
	uint32_t ring_id;
	int efd;                  /* notify eventfd */
	struct gc_ring *eng_next; /* the engine handle's list of attached rings */
	struct gc_ring *eng_prev;
};

struct gc_conn;
/* Forget r's attachment; the engine handle's lock is held (ring.c). */
void gc_ring_unlink(struct gc_ring *r);

/* An engine handle: a started engine (srv != NULL) or a connection to one. */
struct gc_srv;
struct gc_ring_engine {
	pthread_mutex_t lock; /* one request at a time; guards rings */
	int fd;               /* control socket (SOCK_SEQPACKET) */
	struct gc_srv *srv;   /* started here: the engine's state */
	pthread_t thread;
	struct gc_ring *rings; /* attached through this handle */
	uint32_t seq;          /* of the last request sent */
	uint64_t stale;        /* replies discarded: not the answer to the request */
};

/* ---- the control protocol (daemon.c) ------------------------------------ */

/*
 * Version 2 numbers requests: every reply carries its request's seq, and a
 * client discards a reply that is not the answer to what it asked (a late
 * reply to a request it gave up on).  Every version starts a request with
 * {op, version} and a reply with {version, err}, so that a peer speaking
 * another version is told so (EPROTONOSUPPORT), not "malformed".
 */
#define GC_PROTO_VERSION 2u

enum gc_op { GC_OP_ATTACH = 1, GC_OP_DETACH, GC_OP_STATS, GC_OP_HELLO };

struct gc_req {
	uint32_t op, version;
	uint32_t seq;                  /* the client's number for it, never 0 */
	uint32_t entries, ack_entries; /* ATTACH */
	uint32_t ring_id;              /* DETACH */
	uint64_t zone_size;            /* ATTACH */
};

struct gc_rep {
	uint32_t version;
	int32_t err; /* 0 or an errno */
	uint32_t seq; /* the request's; 0: a notice that answers no request
			 (the engine refused the client and hung up) */
	uint32_t op;  /* the request's */
	uint32_t ring_id;
	uint32_t pad;
	uint64_t conn; /* ATTACH, to the starting process only: its struct gc_conn */
	struct gc_ring_engine_stats stats;
	char msg[200]; /* the reason, when err != 0 */
};

/* The smallest reply a client reads (version, err, seq) before it knows
 * whether the rest is laid out as it expects. */
#define GC_REP_HEAD 12u

/* Client side: send q (q->seq is set here) with nfds descriptors, wait for
 * its reply and at most one descriptor (*rfd, -1 if none).  Replies to
 * earlier requests are discarded (e->stale counts them).  Returns 0, or -1
 * with errno and gc_errmsg() set from the reply or the failure. */
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
 * Returns 0 with *q filled, or -1 with rep->err and rep->msg set (rep->seq
 * and rep->op as far as they could be read).  fuzz/ring_req_fuzz.c feeds it.
 */
int gc_srv_decode(const void *buf, size_t n, int mflags, const int *fds, int nfds,
		  struct gc_req *q, struct gc_rep *rep);

/* ---- the engine's view of one ring (kring.c) ---------------------------- */

/* A packet the engine took from a ring, as read (and checked) at that time. */
struct gc_sent {
	uint64_t off;      /* payload offset in the zone: [off, off + len) is inside */
	uint64_t user_seq;
	uint32_t len;
	uint32_t pos;      /* ring position it was taken from */
	uint32_t stamp;    /* claim count of the slot then (for kern_acked) */
	uint32_t pad;
};

struct gc_kring {
	struct gc_ring_shm *sh;
	struct gc_pkt *pkts;
	_Atomic uint64_t *acks;
	uint32_t n, ack_n;   /* the engine's own sizes, never re-read */
	uint64_t zone_size;
	uint32_t max_len;    /* largest payload the transport can send */
	/* private copies of the four indexes */
	uint32_t dev, kern, user, umod;
	uint64_t ack_head;
	uint32_t error;      /* enum gc_ring_violation; the ring is not served */
	uint32_t woken_seq;  /* gc_ring_wait() sequence last woken */
	uint64_t sent, bytes, dead, send_errors, acks_lost;
};

/* The layout of a ring memfd of `entries` records is checked by the caller
 * (shm_size bytes mapped at shm).  Reads kern_i as the starting position. */
int gc_kring_init(struct gc_kring *k, void *shm, uint64_t shm_size, uint32_t entries,
		  uint32_t ack_entries, uint64_t zone_size, uint32_t max_len);
/* How many records are published and not taken ([kern_i, umod_i)). */
int gc_kring_plan(struct gc_kring *k, uint32_t *avail);
/* Take up to want records: claim them (move kern_i), confirm against a
 * concurrent rewind, then read and check them.  out[] gets the live ones. */
int gc_kring_claim(struct gc_kring *k, uint32_t want, struct gc_sent *out, uint32_t *nout,
		   uint32_t *ntaken);
/* plan + claim */
int gc_kring_take(struct gc_kring *k, uint32_t max, struct gc_sent *out, uint32_t *nout,
		  uint32_t *ntaken);
/* Every record before pos is finished: move dev_i to pos.  Returns 1 if a
 * gc_ring_wait() caller should be woken (gc_kring_wake()). */
int gc_kring_done(struct gc_kring *k, uint32_t pos);
void gc_kring_wake(struct gc_kring *k);
/* Nothing to take: set kern_notify and stop polling, unless packets came in
 * meanwhile.  Returns 1 if parked, 0 if there is work, -1 on a violation. */
int gc_kring_park(struct gc_kring *k);
void gc_kring_unpark(struct gc_kring *k);
/* Acknowledge a sent packet: kern_acked (if the slot still holds it) and
 * user_seq into the acknowledgement log. */
int gc_kring_ack(struct gc_kring *k, const struct gc_sent *p);
/* Stop serving the ring (code: enum gc_ring_violation); returns -1. */
int gc_kring_stop(struct gc_kring *k, int code, uint32_t pos, uint64_t val);
/* Account datagrams the transport refused. */
void gc_kring_errors(struct gc_kring *k, uint64_t n, int err);
/* A one-line description of why the ring was stopped. */
void gc_kring_describe(const struct gc_kring *k, char *buf, size_t len);

/* ---- the UDP transport (udp.c) ------------------------------------------ */

struct gc_udp {
	int fd;
	int family;
	uint32_t max_len;  /* 65507 (IPv4) or 65527 (IPv6) */
	uint32_t gso_max;  /* largest GSO segment; 0: no GSO */
};

struct gc_udp_out {
	uint64_t sent, bytes, errors, syscalls, gso;
	int last_errno;
};

/* Check that fd is a connected UDP socket; why names the problem. */
int gc_udp_check(int fd, char *why, size_t whylen);
int gc_udp_init(struct gc_udp *u, int fd);
/* Send p[0..n) from zone.  Returns how many packets were consumed (sent, or
 * refused and counted in out->errors); fewer than n when the socket is full. */
unsigned gc_udp_send(struct gc_udp *u, const struct gc_sent *p, unsigned n,
		     const unsigned char *zone, struct gc_udp_out *out);

/* ---- the engine (engine.c) ---------------------------------------------- */

/* Start an engine with a transport or congestion controller other than the
 * defaults (UDP, no congestion control).  hooks may be NULL. */
struct gc_ring_engine *gc_ring_engine_start_hooks(const struct gc_ring_engine_params *p,
					const struct gc_ring_engine_hooks *hooks);

/* flush.c: gc_ring_flush()'s engine half, on an application thread.  Sends
 * what c's ring has published if the engine has parked it.  Returns 0 (done,
 * or the engine is polling the ring anyway), 1 (the engine must be woken for
 * the rest) or -1 (the ring broke a rule; the engine was woken to stop it);
 * *sent counts the datagrams sent here. */
int gc_srv_flush(struct gc_conn *c, unsigned *sent);

/* Helpers shared by the files of the module. */
int gc_memfd_sealed(const char *name, size_t size, void **map); /* zone.c */
uint64_t gc_now_ns(void);
long gc_page_size(void);
int gc_futex_wait(_Atomic uint32_t *word, uint32_t val, int timeout_ms);
void gc_futex_wake(_Atomic uint32_t *word);

#endif
