/* SPDX-License-Identifier: MIT */
/*
 * groupcast/ring.h - the packet ring with late data choice (Lai & Kohler,
 * "Efficiency and late data choice in a user-kernel interface for
 * congestion-controlled datagrams"), packet zones, and the transport engine
 * that drains rings.
 *
 * A ring is an array of N packet records in shared memory (a memfd) with four
 * indexes.  The application owns user_i and umod_i; the engine (the paper's
 * "kernel": a thread of this process, or a daemon other processes attach to)
 * owns kern_i and dev_i and keeps private copies of all four:
 *
 *      dev_i <= i <  kern_i    taken by the engine, on their way out
 *     kern_i <= i <  umod_i    published: the engine may take them any time
 *        max(kern_i, umod_i)
 *            <= i <  user_i    claimed by the application, still modifiable
 *     user_i <= i <  dev_i     free (previously sent; kern_acked lives here)
 *
 * Comparisons are made in circular ring space, relative to dev_i.  The ring
 * is empty when dev_i == user_i, so it holds at most N - 1 packets.
 *
 * A packet record names its payload by offset and length in the ring's packet
 * zone, a memfd of page-aligned buffers that the engine maps read-only and
 * sends from directly: no byte is copied between the application and the
 * engine.  The engine sends from its own mapping, even in the application's
 * process: what the application does to its own mapping of the zone does not
 * change what is sent.
 *
 * Sending:
 *     struct gc_pkt *p = gc_ring_get_pkt(r);   claim a slot (moves user_i)
 *     p->off = ...; p->len = ...; p->user_seq = ...;
 *     gc_ring_submit(r);                       publish (moves umod_i) and
 *                                              notify only if kern_notify asks
 * Late data choice:
 *     n = gc_ring_rewind(r, GC_RING_OLDEST, &first);   move umod_i back
 *     ... change, gc_ring_swap() or gc_ring_mark_dead() packets in
 *         [first, first + n) ...
 *     gc_ring_submit(r);
 *
 * Threads: one thread at a time per ring on the application side (like a
 * liburing ring); different rings are independent.  Engine handles are
 * thread-safe.
 *
 * Contract: errors, sized structs, names and lifetime as in every module
 * (groupcast/common.h).
 *
 * Man page: gc_ring(3).
 */
#ifndef GROUPCAST_RING_H
#define GROUPCAST_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <groupcast/common.h>

/* The records' flags word is atomic: _Atomic in C, std::atomic in C++ (the
 * same size and representation with GCC and Clang; checked below). */
#ifdef __cplusplus
#include <atomic>
#define GC_ATOMIC_U32 std::atomic<uint32_t>
#else
#include <stdatomic.h>
#define GC_ATOMIC_U32 _Atomic uint32_t
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- packet records ---------------------------------------------------- */

#define GC_PKT_DEAD 0x1u  /* user_dead: the engine skips this packet */
#define GC_PKT_ACKED 0x2u /* kern_acked: the engine says the packet was acknowledged */

/*
 * One packet record.  The application writes off, len and user_seq of the
 * records it claimed; flags belongs to the library and the engine (use
 * gc_ring_mark_dead() and gc_ring_acked(); bits 16..31 count the claims of
 * this slot so that a late acknowledgement never marks a newer packet).
 */
struct gc_pkt {
	uint64_t off;	     /* payload: zone bytes [off, off + len) */
	uint32_t len;	     /* payload length; 0 sends an empty datagram */
	GC_ATOMIC_U32 flags; /* GC_PKT_DEAD | GC_PKT_ACKED | claim count << 16 */
	uint64_t user_seq;   /* the application's number for this packet */
};
#ifdef __cplusplus
static_assert(sizeof(GC_ATOMIC_U32) == 4 && alignof(GC_ATOMIC_U32) == 4, "gc_pkt.flags layout");
#else
_Static_assert(sizeof(GC_ATOMIC_U32) == 4 && _Alignof(GC_ATOMIC_U32) == 4, "gc_pkt.flags layout");
#endif

/* Largest ring: N records (N - 1 packets). */
#define GC_RING_MAX_ENTRIES (1u << 20)
/* gc_ring_rewind(): move umod_i back as far as the engine allows */
#define GC_RING_OLDEST 0xffffffffu

/* ---- packet zones ------------------------------------------------------- */

struct gc_zone;

/*
 * A packet zone: nbufs page-aligned buffers of buf_size bytes (rounded up to
 * a multiple of the page size) in a sealed memfd.  Records may name any bytes
 * of the zone; the buffers are a convenience.  Errors: EINVAL (nbufs or
 * buf_size 0), E2BIG (the zone would exceed 64 GiB), ENOMEM, and memfd errors.
 */
struct gc_zone *gc_zone_create(size_t nbufs, size_t buf_size);
/* Free a zone.  Rings using it must be freed first (EBUSY otherwise). */
int gc_zone_destroy(struct gc_zone *z);
/* Buffer i (page-aligned), or NULL with EINVAL if i >= nbufs. */
void *gc_zone_buf(const struct gc_zone *z, size_t i);
/* Offset of p in the zone (for gc_pkt.off), or UINT64_MAX with EINVAL. */
uint64_t gc_zone_offset(const struct gc_zone *z, const void *p);
/* The zone's size in bytes, and its first byte. */
size_t gc_zone_size(const struct gc_zone *z);
void *gc_zone_base(const struct gc_zone *z);

/* ---- rings -------------------------------------------------------------- */

struct gc_ring;

/*
 * A ring of `entries` records (entries - 1 packets at most) whose payloads
 * live in zone z.  Several rings may share a zone.  Errors: EINVAL (entries
 * below 2 or above GC_RING_MAX_ENTRIES), EFAULT (z NULL), ENOMEM.
 */
struct gc_ring *gc_ring_create(unsigned entries, struct gc_zone *z);
/* Detach (if attached) and free the ring. */
void gc_ring_destroy(struct gc_ring *r);
unsigned gc_ring_entries(const struct gc_ring *r);

/*
 * Claim the slot at user_i and move user_i forward.  The record's flags are
 * cleared; fill off, len and user_seq.  NULL with errno EAGAIN when the ring
 * holds N - 1 packets (gc_ring_wait() for room).
 */
struct gc_pkt *gc_ring_get_pkt(struct gc_ring *r);
/* The record at position pos (0..N-1), or NULL with EINVAL. */
struct gc_pkt *gc_ring_pkt(struct gc_ring *r, unsigned pos);
/* The position of record p. */
unsigned gc_ring_pos(const struct gc_ring *r, const struct gc_pkt *p);

/*
 * Publish every claimed packet: umod_i = user_i.  Returns 1 when the engine
 * asks to be notified (kern_notify), 0 when it is still polling the ring.
 */
int gc_ring_publish(struct gc_ring *r);
/*
 * Wake the engine for this ring (one write to the ring's eventfd).  Call it
 * when gc_ring_publish() returned 1.  Errors: ENOTCONN (not attached), EPIPE
 * (the engine stopped serving the ring; gc_errmsg() says why).
 */
int gc_ring_notify(struct gc_ring *r);
/*
 * gc_ring_publish(), then gc_ring_notify() if asked.  Returns 1 if it
 * notified, or sent the packets itself instead, as gc_ring_flush() does:
 * it does that on a ring parked by an engine started in this process, with
 * GC_RING_ENGINE_SUBMIT_FLUSH, or when that engine thread can run only on
 * the caller's CPU (pinned with GC_RING_ENGINE_PIN_CPU, or a one-CPU mask it
 * inherited, e.g. under taskset -c 0; read at attach and every 100 ms) and
 * the ring's previous submit was 50 us ago or more (a paced burst: the woken
 * engine could only run after the caller anyway).
 */
int gc_ring_submit(struct gc_ring *r);
/*
 * Publish, and send the published packets now from the calling thread, as
 * the paper's dccp_notify() system call did: no hand-off to the engine
 * thread, no wait for it to be scheduled.  This happens when the ring's
 * engine runs in this process (gc_ring_engine_create()) and has parked the
 * ring (kern_notify); the ring stays parked, so every flush sends in the
 * caller.  Otherwise the engine sends them: it is polling the ring already,
 * or it is woken as by gc_ring_submit() (a daemon's ring, an engine with a
 * congestion controller, or a socket that is full for now).  Flushing trades
 * the engine's batching across publishes for latency: flush every few
 * packets, not after each one, when throughput matters.  Returns the number
 * of datagrams sent by this call.  Errors: ENOTCONN (not attached), EPIPE
 * (the engine stopped serving the ring).
 */
int gc_ring_flush(struct gc_ring *r);

/*
 * Move umod_i back to position `to` (GC_RING_OLDEST: as far as the engine
 * allows) to modify packets the engine has not taken yet.  *first receives
 * the first modifiable position, max(kern_i, to); the return value is the
 * number of modifiable packets [*first, user_i).  Nothing is sent from there
 * until the next gc_ring_publish().  Errors: EINVAL (`to` is not a position
 * between the engine's kern_i and umod_i), EFAULT (first NULL).
 */
int gc_ring_rewind(struct gc_ring *r, unsigned to, unsigned *first);
/*
 * Set user_dead on the packet at pos.  Returns 1 when the packet is certain
 * not to be sent (it is modifiable: claimed and not published, or at or above
 * *first after gc_ring_rewind()), 0 when the engine may have taken it
 * already.  Errors: EINVAL (pos >= N).
 */
int gc_ring_mark_dead(struct gc_ring *r, unsigned pos);
/*
 * Exchange the packets at positions a and b (off, len, user_seq and
 * user_dead), to reorder.  Both must be modifiable (EBUSY) and < N (EINVAL).
 */
int gc_ring_swap(struct gc_ring *r, unsigned a, unsigned b);

/* 1 if the packet at pos is acknowledged (kern_acked), 0 if not, -1 EINVAL. */
int gc_ring_acked(const struct gc_ring *r, unsigned pos);
/*
 * Copy the user_seq of acknowledged packets, oldest first, into
 * user_seq[0..max); returns how many.  This log survives the ring wrapping
 * around (kern_acked does not: the slot is reused).  The engine keeps the
 * last N acknowledgements; older unread ones are counted in
 * gc_ring_status.acks_lost.
 */
ssize_t gc_ring_acks(struct gc_ring *r, uint64_t *user_seq, size_t max);

/* Free slots now (N - 1 minus queued and unsent packets). */
unsigned gc_ring_space(struct gc_ring *r);
/*
 * Wait until at least nfree slots are free (the engine moved dev_i), at most
 * timeout_ms (-1: no limit).  The engine frees only what it took: publish
 * (and notify if asked) first.  A slot is freed whether its datagram was sent
 * or refused by the network: refusals are counted in gc_ring_status()
 * (send_errors, last_errno), not reported here.  Errors: EINVAL
 * (nfree > N - 1), ETIMEDOUT, ENOTCONN (not attached), EPIPE (the engine
 * stopped serving the ring).
 */
int gc_ring_wait(struct gc_ring *r, unsigned nfree, int timeout_ms);

/* Why the engine stopped serving a ring (gc_ring_status.error). */
enum gc_ring_violation {
	GC_RING_OK = 0,
	GC_RING_BAD_USER_I,   /* user_i >= N */
	GC_RING_USER_I_BACK,  /* user_i moved backwards, or past dev_i */
	GC_RING_BAD_UMOD_I,   /* umod_i >= N */
	GC_RING_BAD_OFFSET,   /* a record's [off, off + len) is not inside the zone */
	GC_RING_BAD_LENGTH,   /* a record's len is larger than a datagram can be */
	GC_RING_BAD_ACK_TAIL, /* the acknowledgement log's read index is out of range */
	GC_RING_DETACHED,     /* detached, or the engine went away */
	GC_RING_VIOLATION_COUNT
};
/* A short name for an enum gc_ring_violation value ("bad_offset", ...). */
const char *gc_ring_violation_name(int v);

/* A sized struct (groupcast/common.h) the library fills: GC_RING_STATUS_INIT(). */
struct gc_ring_status {
	size_t sz; /* sizeof(struct gc_ring_status) */
	/* the shared indexes, as last written */
	uint32_t dev_i, kern_i, umod_i, user_i;
	uint32_t kern_notify; /* 1: the engine asks for gc_ring_notify() */
	int attached;	      /* 1 if attached to an engine */
	int error;	      /* enum gc_ring_violation; GC_RING_OK while served */
	uint32_t error_pos;   /* the record or index that broke the rule */
	uint64_t error_val;   /* the offending value */
	uint64_t sent;	      /* datagrams handed to the network */
	uint64_t bytes;	      /* their payload bytes */
	uint64_t dead;	      /* records skipped because of user_dead */
	uint64_t send_errors; /* datagrams the network refused (dropped; every
				 packet taken is sent, refused or dead) */
	int last_errno;	      /* errno of the last refused datagram */
	uint64_t acks;	      /* acknowledgements logged */
	uint64_t acks_lost;   /* acknowledgements dropped from a full log */
};
#define GC_RING_STATUS_INIT(...)                                 \
	{                                                        \
		.sz = sizeof(struct gc_ring_status), __VA_ARGS__ \
	}
int gc_ring_status(const struct gc_ring *r, struct gc_ring_status *st);

/* ---- the engine --------------------------------------------------------- */

struct gc_ring_engine;

#define GC_RING_ENGINE_PIN_CPU 0x1u    /* pin the engine thread to opts.cpu */
#define GC_RING_ENGINE_LISTEN_GID 0x2u /* give the socket file the group listen_gid */
/* gc_ring_submit() on a ring this engine has parked sends in the caller's
 * thread, as gc_ring_flush() does, instead of waking the engine thread (an
 * engine started in this process, UDP, no congestion control; see gc_ring(3)) */
#define GC_RING_ENGINE_SUBMIT_FLUSH 0x4u
/* serve on the listening socket listen_fd (already bound and listening, e.g.
 * handed over by systemd's socket activation) instead of binding opts.listen */
#define GC_RING_ENGINE_LISTEN_FD 0x8u

/*
 * A sized struct (groupcast/common.h): fill it with
 * GC_RING_ENGINE_OPTS_INIT(), which sets sz:
 *
 *   struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = path);
 */
struct gc_ring_engine_opts {
	size_t sz;	    /* sizeof(struct gc_ring_engine_opts) */
	unsigned flags;	    /* GC_RING_ENGINE_PIN_CPU | GC_RING_ENGINE_LISTEN_GID |
			       GC_RING_ENGINE_SUBMIT_FLUSH | GC_RING_ENGINE_LISTEN_FD */
	int cpu;	    /* with GC_RING_ENGINE_PIN_CPU */
	const char *listen; /* also serve other processes on this Unix socket path */
	unsigned batch;	    /* most packets taken from a ring at a time, and each
			       client's share of a round (0: 64) */
	unsigned idle_us;   /* keep polling an empty ring this long before setting
			       kern_notify (0, the default: at once, as the paper) */
	unsigned max_rings; /* rings per client (0: 64 for clients of the listening
			       socket, no limit for the process that started the engine) */
	int quiet;	    /* do not log ring violations to stderr */
	/* Daemon mode (listen): who may attach, and how much each client may
	 * hold.  Zero values are the safe defaults. */
	unsigned listen_mode;	 /* permission bits of the socket file (0: 0600) */
	gid_t listen_gid;	 /* with GC_RING_ENGINE_LISTEN_GID */
	const uid_t *allow_uids; /* also serve these uids (root and the engine's own
				    uid are always served) */
	size_t n_allow_uids;
	const gid_t *allow_gids; /* and these groups (the client's primary or
				    supplementary groups) */
	size_t n_allow_gids;
	unsigned max_fds;	/* descriptors the engine holds per client, 2 per ring
				 (0: 128 for clients of the listening socket, no
				 limit for the process that started the engine) */
	unsigned max_clients;	/* clients of the listening socket at a time (0: 256) */
	uint64_t max_map_bytes; /* ring and zone bytes the engine maps per client
				   (0: 4 GiB for clients of the listening socket, no
				   limit for the process that started the engine):
				   sparse 64 GiB zones must not exhaust the daemon's
				   address space */
	int listen_fd;		/* with GC_RING_ENGINE_LISTEN_FD: a listening
				   AF_UNIX SOCK_SEQPACKET socket to serve instead of
				   listen (which must then be NULL); the engine owns
				   it once created and closes it, leaving the socket
				   file to whoever bound it */
};

#define GC_RING_ENGINE_OPTS_INIT(...)                                 \
	{                                                             \
		.sz = sizeof(struct gc_ring_engine_opts), __VA_ARGS__ \
	}

/*
 * Start an engine thread in this process.  p may be NULL (defaults).  With
 * p->listen set, the engine also serves processes that gc_ring_engine_connect()
 * to that path (the daemon mode); a stale socket file there is replaced.  The
 * socket file gets mode listen_mode (0600) and, if asked, group listen_gid
 * before it appears at that path.  A client is served only if its uid is
 * root, the engine's own, or allowed (allow_uids, allow_gids); others are told
 * EACCES and disconnected.  Errors: EINVAL (a field of opts, named), EADDRINUSE (an engine
 * already listens there), EPERM (listen_gid is not one of ours), and errors
 * of socket(), bind(), pthread_create().
 */
struct gc_ring_engine *gc_ring_engine_create(const struct gc_ring_engine_opts *p);
/*
 * Attach to an engine serving path.  The engine must run as root or as this
 * process's effective uid (EPERM otherwise: anyone could listen at a path).
 * Errors: those of connect(), EPERM, EACCES (the engine does not serve this
 * uid), EUSERS (the engine serves as many clients as it may),
 * EPROTONOSUPPORT (it speaks another version of the protocol).
 */
struct gc_ring_engine *gc_ring_engine_connect(const char *path);
/* gc_ring_engine_connect(), trusting only an engine that runs as engine_uid. */
struct gc_ring_engine *gc_ring_engine_connect_uid(const char *path, uid_t engine_uid);
/*
 * Stop a started engine (its thread and every ring it serves) or disconnect
 * from a daemon.  Rings still attached through this handle are detached.
 */
int gc_ring_engine_destroy(struct gc_ring_engine *e);

/*
 * Have engine e send ring r's packets on socket sd: a connected UDP socket
 * (AF_INET or AF_INET6).  The engine keeps its own reference to the socket
 * and maps the ring and its zone itself.  Errors: EBADF, ENOTSOCK, EINVAL (sd
 * is not a UDP socket), ENOTCONN (not connected), EISCONN (r is attached
 * already), EDQUOT (the client has as many rings as the engine allows one
 * client: max_rings), EMFILE (the engine holds as many descriptors for the
 * client as it may: max_fds), and whatever the engine refused, named by
 * gc_errmsg().
 */
int gc_ring_attach(struct gc_ring *r, struct gc_ring_engine *e, int sd);
/* Stop sending from r; packets the engine has not taken stay in the ring. */
int gc_ring_detach(struct gc_ring *r);

/* A sized struct (groupcast/common.h) the library fills: GC_RING_ENGINE_STATS_INIT(). */
struct gc_ring_engine_stats {
	size_t sz;	     /* sizeof(struct gc_ring_engine_stats) */
	uint64_t clients;    /* connected clients (the starter counts as one) */
	uint64_t rings;	     /* rings served now */
	uint64_t rounds;     /* passes over the active rings */
	uint64_t sleeps;     /* times the engine blocked with every ring parked */
	uint64_t notifies;   /* notifications received */
	uint64_t packets;    /* datagrams sent */
	uint64_t bytes;	     /* payload bytes sent */
	uint64_t syscalls;   /* sendmmsg() calls */
	uint64_t gso;	     /* of the datagrams, sent in UDP GSO batches */
	uint64_t violations; /* rings stopped for breaking the rules */
	uint64_t refused;    /* clients disconnected at accept: not allowed, or too many */
	uint64_t limited;    /* attach requests refused by a per-client limit */
};
#define GC_RING_ENGINE_STATS_INIT(...)                                 \
	{                                                              \
		.sz = sizeof(struct gc_ring_engine_stats), __VA_ARGS__ \
	}
int gc_ring_engine_stats(struct gc_ring_engine *e, struct gc_ring_engine_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_RING_H */
