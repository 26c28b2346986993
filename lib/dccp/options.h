/* SPDX-License-Identifier: MIT */
/*
 * DCCP options, library-internal: parse (with per-type rules and counted
 * rejections), build, and bounded iterators over Ack Vector, Data Dropped
 * and CCID 3 Loss Intervals.  See options.c for the RFC sections.
 */
#ifndef GC_DCCP_OPTIONS_H
#define GC_DCCP_OPTIONS_H

#include "dccp/wire.h"

enum dccp_opt_type {
	DCCP_OPT_PADDING = 0,
	DCCP_OPT_MANDATORY = 1,
	DCCP_OPT_SLOW_RECEIVER = 2,
	DCCP_OPT_CHANGE_L = 32,
	DCCP_OPT_CONFIRM_L = 33,
	DCCP_OPT_CHANGE_R = 34,
	DCCP_OPT_CONFIRM_R = 35,
	DCCP_OPT_INIT_COOKIE = 36,
	DCCP_OPT_NDP_COUNT = 37,
	DCCP_OPT_ACKVEC0 = 38, /* Ack Vector [Nonce 0] */
	DCCP_OPT_ACKVEC1 = 39, /* Ack Vector [Nonce 1] */
	DCCP_OPT_DATA_DROPPED = 40,
	DCCP_OPT_TIMESTAMP = 41,
	DCCP_OPT_TS_ECHO = 42,
	DCCP_OPT_ELAPSED = 43,
	DCCP_OPT_DATA_CHECKSUM = 44,
	/* CCID 3, HC-Receiver to HC-Sender (RFC 4342 §8) */
	DCCP_OPT_LOSS_EVENT_RATE = 192,
	DCCP_OPT_LOSS_INTERVALS = 193,
	DCCP_OPT_RECEIVE_RATE = 194,
};

/* dccp_opts_parse() flags */
#define DCCP_PF_ESTABLISHED \
	0x1 /* connection is OPEN or later: parse Ack Vectors, ignore Init Cookies */

/* One multi-byte option as received (Padding and the one-byte options are not kept). */
struct dccp_opt {
	uint8_t type;
	uint8_t len;	/* bytes of option data (option length - 2) */
	bool mandatory; /* preceded by Mandatory */
	const uint8_t *data;
};

#define DCCP_OPTS_MAX 64

struct dccp_opts {
	unsigned n;
	struct dccp_opt opt[DCCP_OPTS_MAX]; /* accepted multi-byte options, in packet order */
	/* decoded single-valued options: the last valid occurrence */
	bool slow_receiver;
	bool has_ndp, has_ts, has_ts_echo, has_elapsed, has_data_csum;
	bool has_loss_rate, has_recv_rate;
	uint64_t ndp_count;
	uint32_t ts;			   /* Timestamp, 10 us units */
	uint32_t ts_echo, ts_echo_elapsed; /* Timestamp Echo and its Elapsed Time (0 if absent) */
	uint32_t elapsed;		   /* Elapsed Time, hundredths of ms */
	uint32_t data_csum;		   /* CRC-32c of the application data */
	uint32_t loss_rate;		   /* inverse loss event rate; UINT32_MAX: no loss yet */
	uint32_t recv_rate;		   /* bytes per second */
	/* Set when the options call for a Reset (RFC 4340 §5.8.2, §6.6.9):
	 * 5 Option Error or 6 Mandatory Error, with Data 1-3 as in §5.6. */
	uint8_t reset_code, reset_data[3];
};

/*
 * Parse the options of a packet parsed by dccp_parse() (pkt is that packet).
 * Applies RFC 4340 §5.8: options not allowed on the packet's type (DCCP-Data,
 * packets without an Acknowledgement Number, Ack Vector before the
 * connection is established, Init Cookie on Request or after establishment),
 * unknown options and options of the wrong size are ignored and counted; a
 * length byte < 2 or past the options area ends parsing (what follows is
 * ignored).  Returns DCCP_OK, or the reason the caller must reset the
 * connection (o->reset_code and o->reset_data say with what).
 */
enum dccp_drop dccp_opts_parse(const struct dccp_hdr *h, const uint8_t *pkt, unsigned flags,
			       struct dccp_opts *o, struct dccp_counters *c);

/* ---- run-length vectors ------------------------------------------------- */

enum dccp_ackstate {
	DCCP_ACK_RECEIVED = 0,
	DCCP_ACK_ECN_MARKED = 1,
	DCCP_ACK_NOT_RECEIVED = 3,
};
#define DCCP_DROP_NONE 0xff /* a Data Dropped Normal Block */

/* A run of packets [lo, hi] (mod 2^48) in one state. */
struct dccp_run {
	uint64_t hi, lo;
	uint32_t len;
	uint8_t state; /* Ack Vector: enum dccp_ackstate; Data Dropped: Drop Code or DCCP_DROP_NONE */
};

/*
 * Iterate over the runs of all Ack Vector (or Data Dropped) options of a
 * packet, newest first, starting at its Acknowledgement Number, bounded by
 * the option bytes.  Nothing below lowest (our ISS) is ours to learn about:
 * the run that reaches below it is cut at lowest and the iteration ends
 * there, with it->clipped set.  RFC 4340 §11.4 has the receiver never
 * describe packets before the ISS, but Linux 6.1 does after a long loss
 * burst (its vector of 204 lost then 448 received reached 2 below our ISS
 * in tests/interop), and refusing the whole vector stalled CCID 2 until its
 * retransmission timer fired.  The cut part carries no information about
 * any packet we sent, so taking the rest gives a peer no new power.
 */
struct dccp_vec_iter {
	const struct dccp_opts *o;
	unsigned k, i;
	uint8_t kind;
	uint64_t next, lowest, ackno;
	bool clipped;
	int nonce; /* the Ack Vector's ECN nonce option (0 or 1); -1 if mixed or none */
};
void dccp_ackvec_iter(struct dccp_vec_iter *it, const struct dccp_opts *o, uint64_t ackno,
		      uint64_t lowest);
void dccp_dropped_iter(struct dccp_vec_iter *it, const struct dccp_opts *o, uint64_t ackno,
		       uint64_t lowest);
bool dccp_vec_next(struct dccp_vec_iter *it, struct dccp_run *r);

/* CCID 3 Loss Intervals (RFC 4342 §8.6), newest first. */
struct dccp_loss_interval {
	uint32_t lossless, loss, data; /* 24, 23 and 24 bits */
	bool ecn_echo;
};
/* Up to max intervals from the packet's Loss Intervals options; *skip is the
 * first option's Skip Length.  Returns how many were stored. */
unsigned dccp_loss_intervals(const struct dccp_opts *o, struct dccp_loss_interval *out,
			     unsigned max, uint8_t *skip);

/* ---- building ----------------------------------------------------------- */

/* An options area under construction; overflow is sticky. */
struct dccp_obuf {
	uint8_t *p;
	size_t len, cap;
	bool overflow;
};

static inline void dccp_obuf_init(struct dccp_obuf *b, uint8_t *p, size_t cap)
{
	b->p = p;
	b->len = 0;
	b->cap = cap;
	b->overflow = false;
}

/* Any option: one byte for types < 32 (dlen must be 0), else type, length, data. */
void dccp_opt_put(struct dccp_obuf *b, uint8_t type, const void *data, size_t dlen);
void dccp_obuf_pad(struct dccp_obuf *b);		    /* Padding to a multiple of 4 bytes */
void dccp_opt_put_ndp(struct dccp_obuf *b, uint64_t count); /* smallest form (§7.7) */
void dccp_opt_put_timestamp(struct dccp_obuf *b, uint32_t ts);
/* Timestamp Echo with Elapsed Time in hundredths of ms: 0, 2 or 4 bytes (§13.3) */
void dccp_opt_put_ts_echo(struct dccp_obuf *b, uint32_t echo, uint32_t elapsed);
void dccp_opt_put_elapsed(struct dccp_obuf *b, uint32_t elapsed); /* 2 bytes below 0.5 s (§13.2) */
void dccp_opt_put_data_checksum(struct dccp_obuf *b, const void *data, size_t len);
void dccp_opt_put_u32(struct dccp_obuf *b, uint8_t type, uint32_t v); /* 192, 194 */
void dccp_opt_put_loss_intervals(struct dccp_obuf *b, uint8_t skip,
				 const struct dccp_loss_interval *li, unsigned n);
/* Ack Vector (or Data Dropped) bytes, split into options of at most 253 bytes. */
void dccp_opt_put_vector(struct dccp_obuf *b, uint8_t type, const uint8_t *vec, size_t n);

/* Append the run-length bytes for count packets in state (Ack Vector: 2-bit
 * state, 64 per byte) to vec[*n..cap).  Returns false if it does not fit. */
bool dccp_ackvec_rle(uint8_t *vec, size_t *n, size_t cap, uint8_t state, uint64_t count);

/* The same for Data Dropped (§11.7): count packets with Drop Code code (0-7)
 * in Drop Blocks of up to 16, or DCCP_DROP_NONE in Normal Blocks of up to 128. */
bool dccp_dropped_rle(uint8_t *vec, size_t *n, size_t cap, uint8_t code, uint64_t count);

/* CRC-32c (Castagnoli, as SCTP's, RFC 3309) for the Data Checksum option (§9.3). */
uint32_t dccp_crc32c(const void *data, size_t len);

#endif /* GC_DCCP_OPTIONS_H */
