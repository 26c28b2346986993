/* SPDX-License-Identifier: MIT */
/*
 * lib/lms/ltp.h - what ltp.c (the endpoint) and ltp_window.c (the receive
 * window and its NAK bookkeeping) share: the wire format, the window, and a
 * token bucket.  See gc_ltp(3).
 *
 * Wire format (every field in network order), the same 20-byte header on
 * every datagram:
 *
 *   0  'L' 'T'  magic
 *   2  u8       version (1)
 *   3  u8       type: DATA, HEARTBEAT, NAK
 *   4  u32      session id
 *   8  u32      seq: DATA its number; HEARTBEAT the next number the sender
 *               will use (one past the highest sent); NAK the request's own
 *               number (the thesis's nak_seqn)
 *  12  u32      trail: DATA/HEARTBEAT the oldest number still in the
 *               sender's retransmit buffer; NAK 0
 *  16  u16      flags: FIN (DATA: the last datagram; HEARTBEAT: the stream
 *               ends before seq), REPAIR (a retransmission), ESCALATED (a
 *               NAK sent straight to the source by unicast)
 *  18  u16      length of what follows
 *
 * A NAK's body is up to LTP_NAK_MAX_RANGES pairs (u32 lo, u32 hi), both
 * inclusive: the thesis's struct LmsNak {nak_lo, nak_hi, nak_seqn} with
 * several ranges in one datagram.
 */
#ifndef GC_LTP_H
#define GC_LTP_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <groupcast/lms.h>
#include <groupcast/ltp.h>

#define LTP_VERSION 1
enum { LTP_DATA = 1, LTP_HEARTBEAT = 2, LTP_NAK = 3 };
enum { LTP_FIN = 1, LTP_REPAIR = 2, LTP_ESCALATED = 4 };
#define LTP_NAK_MAX_RANGES 64
#define LTP_RECOVERY_SAMPLES 65536
#define LTP_MAX_BACKOFF_NS 500000000ull /* NAK retry timeout never grows beyond 500 ms */

struct ltp_hdr {
	uint8_t magic[2];
	uint8_t version, type;
	uint32_t session, seq, trail;
	uint16_t flags, len;
};
_Static_assert(sizeof(struct ltp_hdr) == GC_LTP_HDRLEN, "LTP header");

struct ltp_pair {
	uint32_t lo, hi;
};

/* A token bucket: rate units per second, at most burst saved up. */
struct ltp_bucket {
	double tokens, rate, burst;
	uint64_t last_ns;
};

static inline void ltp_bucket_init(struct ltp_bucket *b, double rate, double burst, uint64_t now)
{
	b->rate = rate;
	b->burst = burst;
	b->tokens = burst;
	b->last_ns = now;
}

static inline void ltp_bucket_fill(struct ltp_bucket *b, uint64_t now)
{
	if (now > b->last_ns) {
		b->tokens += (double)(now - b->last_ns) * b->rate / 1e9;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ns = now;
	}
}

/* Take n tokens if there are that many. */
static inline bool ltp_bucket_take(struct ltp_bucket *b, double n, uint64_t now)
{
	ltp_bucket_fill(b, now);
	if (b->tokens < n)
		return false;
	b->tokens -= n;
	return true;
}

/* ---- the receive window (ltp_window.c) ---------------------------------- */

enum { LTP_EMPTY = 0, LTP_HAVE, LTP_DONE, LTP_LOST };

struct ltp_slot {
	uint8_t state, fin;
	uint16_t len;
	uint64_t seq;
	uint64_t missing_ns; /* when the gap holding it was detected; 0: never missing */
	uint8_t *data;
};

/* A pending NAK range: [lo, hi] held missing seqs when it was made; the
 * ones that arrived since are left out of the next request. */
struct ltp_range {
	uint64_t lo, hi, deadline_ns;
	uint32_t tries;
};

struct ltp_window {
	uint32_t nslots, slot_size;
	struct ltp_slot *slot;
	uint8_t *mem;
	bool started, have_end, end_reported, unordered;
	uint64_t base; /* lowest seq not yet delivered or reported lost */
	uint64_t high; /* highest seq known to exist (valid when have_high) */
	bool have_high;
	uint64_t registered; /* every seq below it has been checked for a gap */
	uint64_t end;	     /* one past the last seq (valid when have_end) */
	struct ltp_range *range;
	uint32_t nranges, max_ranges;
	uint64_t nak_ns;
	uint32_t max_tries, escalate_after;
	uint64_t *fifo; /* unordered: seqs to deliver, in arrival order */
	uint32_t fifo_head, fifo_len;
	struct gc_ltp_stats *st;
	uint32_t *samples; /* recovery latencies, a ring of LTP_RECOVERY_SAMPLES */
	uint64_t nsamples;
};

/* 0, or -ENOMEM (w freed). */
int ltp_window_init(struct ltp_window *w, uint32_t nslots, uint32_t slot_size, uint32_t max_ranges,
		    uint64_t nak_ns, uint32_t max_tries, uint32_t escalate_after, bool unordered,
		    struct gc_ltp_stats *st);
void ltp_window_free(struct ltp_window *w);

/* What ltp_window_put() did with a datagram. */
enum { LTP_PUT_NEW, LTP_PUT_DUP, LTP_PUT_OLD, LTP_PUT_BEYOND };
/* A data datagram (seq and trail as on the wire) arrived at now. */
int ltp_window_put(struct ltp_window *w, uint32_t seq, uint32_t trail, bool fin, bool repair,
		   const void *data, size_t len, uint64_t now);
/* A heartbeat: next is one past the highest seq sent; fin: the stream ends there. */
void ltp_window_heartbeat(struct ltp_window *w, uint32_t next, uint32_t trail, bool fin);

/* One request to send: the still-missing runs of a range. */
struct ltp_nak {
	struct ltp_pair pair[LTP_NAK_MAX_RANGES];
	uint32_t n;
	bool escalate; /* this try also goes to the source by unicast */
};
/* Register new gaps, give up on ranges that ran out of tries, and for each
 * range whose timer expired fill naks[] (at most max); returns how many. */
size_t ltp_window_due(struct ltp_window *w, uint64_t now, struct ltp_nak *naks, size_t max);
/* The earliest deadline of a pending range or gap (UINT64_MAX: none). */
uint64_t ltp_window_deadline(const struct ltp_window *w, uint64_t now);
/* The next event for gc_ltp_recv(): fills m; for DATA, data and len point into
 * the window until ltp_window_consume().  Returns false when none. */
bool ltp_window_peek(struct ltp_window *w, struct gc_ltp_msg *m, const uint8_t **data, size_t *len);
void ltp_window_consume(struct ltp_window *w, const struct gc_ltp_msg *m);

#endif
