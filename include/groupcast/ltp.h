/* SPDX-License-Identifier: MIT */
/*
 * groupcast/ltp.h - LTP: reliable multicast on LMS (gc_ltp(3)).  Its own
 * API, riding on groupcast/lms.h's requests and dmcasts.
 *
 * One sender S multicasts sequenced datagrams to group G at a configured
 * rate (a token bucket, not a window: LMS has no acknowledgements, only
 * NAKs, and a window would need feedback from every receiver).  Receivers
 * detect gaps (also at the tail, from the sender's heartbeats) and multicast
 * NAKs with the LMS request option; routers steer them to a replier, which
 * answers with a dmcast to the turning point; a replier that lacks the data
 * stays silent and the requester retries with backoff.  After
 * escalate_after silent tries a receiver also asks S directly (unicast),
 * and S answers by unicast: recovery goes on when a configured replier is
 * dead.  After max_tries the loss is reported as unrecoverable.
 *
 * Event-loop use: poll gc_ltp_fd() for POLLIN with the timeout
 * gc_ltp_timeout() returns, then call gc_ltp_process(); read delivered data
 * with gc_ltp_recv() until EAGAIN.  Requests and dmcasts need CAP_NET_RAW
 * (see gc_lms_request()).
 *
 * Threads: not thread-safe; one thread per endpoint.
 *
 * Contract: errors, sized structs, names and lifetime as in every module
 * (groupcast/common.h).
 *
 * Man page: gc_ltp(3).
 */
#ifndef GROUPCAST_LTP_H
#define GROUPCAST_LTP_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>
#include <groupcast/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GC_LTP_HDRLEN 20	/* LTP header on every datagram */
#define GC_LTP_MAX_PAYLOAD 1416 /* 1500 - 64 (dmcast headers) - 20 (LTP header) */

enum {
	GC_LTP_SENDER = 1 << 0,	   /* this endpoint is the source S */
	GC_LTP_RECEIVER = 1 << 1,  /* receives and delivers the stream */
	GC_LTP_REPLIER = 1 << 2,   /* keeps a repair cache and answers requests (receivers) */
	GC_LTP_UNORDERED = 1 << 3, /* deliver in arrival order (default: in sequence order) */
	/* the routers run lmsd --no-provisional: a request's tpif is the whole
	 * 16-bit ifindex, never a provisional mark (repliers and the sender) */
	GC_LTP_NO_PROVISIONAL = 1 << 4,
};

/* A sized struct (groupcast/common.h): fill it with GC_LTP_OPTS_INIT(). */
struct gc_ltp_opts {
	size_t sz;	       /* sizeof(struct gc_ltp_opts) */
	int flags;	       /* GC_LTP_* */
	struct in_addr group;  /* G */
	struct in_addr source; /* S: the sender's address (receivers accept data only from it) */
	struct in_addr ifaddr; /* local address of the interface to use (IP_MULTICAST_IF) */
	unsigned ifindex;      /* its index (for the join); 0: by route */
	uint16_t port;	       /* G's port; the sender sends from this port too */
	uint8_t ttl;	       /* multicast TTL of data and requests; 0: 16 */
	uint32_t session;      /* sender: 0 picks a random one; receiver: 0 takes the first seen */
	/* sender */
	uint64_t rate;	       /* bytes per second (payload + headers); 0: 1000000 */
	uint32_t burst;	       /* token bucket depth in bytes; 0: 16 packets */
	uint32_t heartbeat_ms; /* first heartbeat after data stops; doubles up to 1 s; 0: 20 */
	/* buffers (bytes, rounded down to whole GC_LTP_MAX_PAYLOAD slots, at least 16) */
	uint32_t cache_bytes;  /* sender retransmit buffer / replier repair cache; 0: 4 MiB */
	uint32_t window_bytes; /* receiver reorder window; 0: 4 MiB */
	uint32_t max_ranges;   /* pending NAK ranges per receiver; 0: 256 */
	/* receiver timers */
	uint32_t nak_ms;	 /* first retry timeout; doubles each try up to 500 ms; 0: 10 */
	uint32_t max_tries;	 /* requests per gap before it is reported lost; 0: 12 */
	uint32_t escalate_after; /* tries after which S is also asked directly; 0: 3 */
	/* request limits at repliers and the source (token buckets) */
	uint32_t req_rate_peer; /* requests/s from one requester address; 0: 1000 */
	uint32_t req_rate_all;	/* requests/s from everyone; 0: 5000 */
	uint32_t repair_rate;	/* repair packets/s sent; 0: 5000 */
	/* LMS-HIER (lmsd(8)): a replier with a cost reports itself to its router */
	uint32_t replier_cost; /* 0: no reports (the router's configuration names repliers) */
	uint32_t report_ms;    /* report interval; the router forgets it after 3; 0: 100 */
};
#define GC_LTP_OPTS_INIT(...)                                 \
	{                                                     \
		.sz = sizeof(struct gc_ltp_opts), __VA_ARGS__ \
	}

struct gc_ltp;

/* Open an endpoint (its UDP socket bound to port, joined to G, and for
 * repliers and the sender a raw socket for dmcasts).  NULL with errno:
 * EINVAL (a field, named), EPERM (no CAP_NET_RAW), ENOMEM, socket errors. */
struct gc_ltp *gc_ltp_create(const struct gc_ltp_opts *opts);
/* Close it; the sender's last heartbeats are not repeated.  NULL is fine. */
void gc_ltp_destroy(struct gc_ltp *l);

/* The descriptor to poll for POLLIN. */
int gc_ltp_fd(const struct gc_ltp *l);
/* Milliseconds until gc_ltp_process() has timer work (-1: none, 0: now). */
int gc_ltp_timeout(struct gc_ltp *l);
/* Read every datagram waiting (at most 256 per call), run the timers
 * (NAK retries, heartbeats).  Returns 0, or -1 with errno on a socket error. */
int gc_ltp_process(struct gc_ltp *l);

/* Sender: multicast one datagram of len (1..GC_LTP_MAX_PAYLOAD) bytes.
 * Returns len; -1 with EAGAIN when the token bucket is empty (poll with
 * gc_ltp_timeout() and retry), EMSGSIZE, EINVAL (not a sender or finished). */
ssize_t gc_ltp_send(struct gc_ltp *l, const void *buf, size_t len);
/* Sender: mark the stream finished (heartbeats then carry the end). */
int gc_ltp_finish(struct gc_ltp *l);

enum { GC_LTP_DATA = 1, GC_LTP_LOSS = 2, GC_LTP_END = 3 };
struct gc_ltp_msg {
	int type;	 /* GC_LTP_DATA, GC_LTP_LOSS (lo..hi unrecoverable), GC_LTP_END */
	uint64_t seq;	 /* DATA: its sequence number */
	uint64_t lo, hi; /* LOSS: the lost sequence numbers, inclusive */
};
/* Receiver: the next event.  DATA returns its length (copied into buf;
 * EMSGSIZE if len is short, the datagram stays); LOSS and END return 0.
 * -1 with EAGAIN when nothing is ready.  END comes once, after the last
 * datagram (or loss) of a finished stream. */
ssize_t gc_ltp_recv(struct gc_ltp *l, void *buf, size_t len, struct gc_ltp_msg *m);

/* A sized struct (groupcast/common.h) the library fills: GC_LTP_STATS_INIT(). */
struct gc_ltp_stats {
	size_t sz;					     /* sizeof(struct gc_ltp_stats) */
	uint64_t data_sent, bytes_sent, heartbeats_sent;     /* sender */
	uint64_t data_received, bytes_delivered, duplicates; /* receiver */
	uint64_t repairs_received, repairs_unneeded;	     /* repairs: all, already had */
	uint64_t requests_sent, escalations_sent;	     /* NAK datagrams */
	uint64_t gaps_detected, lost;			     /* seqs missed, seqs given up */
	uint64_t window_drops;				     /* beyond the reorder window */
	uint64_t requests_received, repairs_sent, repairs_missing; /* replier/source: missing: not cached */
	uint64_t requests_limited, repairs_limited, bad_packets; /* rate limits, rejected datagrams */
	uint64_t recovered, recovery_us_sum, recovery_us_max;	 /* gap seen -> repair arrived */
	uint64_t reports_sent;					 /* LMS-HIER replier reports */
};
#define GC_LTP_STATS_INIT(...)                                 \
	{                                                      \
		.sz = sizeof(struct gc_ltp_stats), __VA_ARGS__ \
	}
int gc_ltp_stats(const struct gc_ltp *l, struct gc_ltp_stats *st);
/* Copy up to max of the most recent recovery latencies (microseconds, at
 * most 65536 kept) into us.  Returns how many. */
size_t gc_ltp_recovery_samples(const struct gc_ltp *l, uint32_t *us, size_t max);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_LTP_H */
