/* SPDX-License-Identifier: MIT */
/*
 * ccid2.h - what CCID 2 (ccid2.c) offers beyond the generic ops of ccid.h:
 * its ops tables for the registry (ccid.c), and its Ack Ratio and counters
 * for the unit tests and the fuzzer.  The connection reaches all of it
 * through the ops (ccid.h feature, acks_lost and finish hooks).
 */
#ifndef GC_DCCP_CCID2_H
#define GC_DCCP_CCID2_H

#include "dccp/ccid.h"

extern const struct dccp_ccid_tx_ops dccp_ccid2_tx_ops;
extern const struct dccp_ccid_rx_ops dccp_ccid2_rx_ops;

#define CCID2_RECORD 4096    /* sent packets the sender remembers (power of 2) */
#define CCID2_MAX_CWND 1024  /* packets; keeps the record and 5 x cwnd bounded */
#define CCID2_RX_WINDOW 4096 /* packets the receiver's Ack Vector can describe */

/*
 * Ack Ratio (RFC 4341 §6.1.2): a feature located at the HC-Sender and
 * obeyed by the HC-Receiver.  The sender says which value it wants:
 * max(the §6.1.2 rule, cwnd / min(32, w / 4), 2), at most max(1, cwnd / 4)
 * (ccid2.c ratio_floor(), ratio_max()); its feature_update() asks the
 * connection to send Change L(Ack Ratio) when it moves, and the receiver's
 * feature_changed() takes the value a peer's Change L sets.
 */
uint32_t dccp_ccid2_tx_ack_ratio(void *tx);
void dccp_ccid2_rx_set_ack_ratio(void *rx, uint32_t r);
/*
 * w: the peer's Sequence Window for its own numbers (its Change L(Sequence
 * Window), 100 by default), which bounds how many Acks it may send while one
 * of our packets travels: the ratio keeps them to at most w / 4 a window.
 */
void dccp_ccid2_tx_peer_window(void *tx, uint64_t w);
/*
 * r > 0: ask for Ack Ratio r on a path that loses no Acks, instead of
 * cwnd / K (gc_dccp_opts.ack_ratio, which reaches init() as env->ack_ratio).  The §6.1.2 rule still doubles it
 * after lost Acks and brings it back to r, and ceil(cwnd / 2) still caps it.
 */
void dccp_ccid2_tx_set_ratio(void *tx, uint32_t r);
/*
 * The connection saw n of the peer's Acks missing (a gap in the sequence
 * numbers of the peer's Ack packets, §6.1.2): Ack Ratio doubles at the end
 * of this window of data.  Without this call the ratio only falls back
 * (to the floor), as §6.1.2 says for a path that loses no Acks.
 */
void dccp_ccid2_tx_acks_lost(void *tx, uint64_t n);

/*
 * The connection ends (CLOSED or TIMEWAIT): no Ack can come any more, so the
 * data packets no Ack Vector has settled are reported lost (env->lost) now.
 */
void dccp_ccid2_tx_finish(void *tx);

/*
 * The negotiation of our Ack Ratio with the peer (feature_update()): the
 * value in force at the peer for our data (2 until a Confirm), that of our
 * Change L awaiting its Confirm (0: none), whether the Change goes on the
 * next packet with an Ack, and when we last sent one.  For tests.
 */
struct ccid2_ratio_neg {
	uint32_t in_force, pending;
	bool due;
	uint64_t at;
};
struct ccid2_ratio_neg *dccp_ccid2_tx_ratio_neg(void *tx);

/* What the sender refused or corrected (untrusted feedback). */
struct ccid2_tx_counters {
	uint64_t sent_data;   /* data packets recorded */
	uint64_t acked, lost; /* data packets reported to env->acked / env->lost */
	uint64_t ecn;	      /* reported received but ECN-marked (congestion, still acked) */
	uint64_t bad_ackno;   /* Acknowledgement Number we never sent: whole ack ignored */
	uint64_t clipped_vector; /* Ack Vector reaching below ISS: the part below ignored (options.h) */
	uint64_t late_ack;	 /* received after we had declared it lost (spurious loss) */
	uint64_t contradiction;	  /* not-received after an earlier received (ignored) */
	uint64_t overflow;	  /* record full: oldest outstanding forced lost */
	uint64_t rto;		  /* retransmission timeouts */
	uint64_t acked_after_rto; /* out when an RTO fired, then reported received */
	uint64_t probes;	  /* loss probes allowed (ccid2.c probe_timeout()) */
	uint64_t unknown_at_end;  /* never settled by an Ack: lost at dccp_ccid2_tx_finish() */
	uint64_t halvings;	  /* window reductions on loss or ECN */
};
void dccp_ccid2_tx_counters(void *tx, struct ccid2_tx_counters *c);

struct ccid2_rx_counters {
	uint64_t old;	   /* below the Ack Vector window: not described */
	uint64_t dup;	   /* already received */
	uint64_t jumps;	   /* a gap wider than the window: the window restarted */
	uint64_t acks_due; /* acknowledgements asked for */
};
void dccp_ccid2_rx_counters(void *rx, struct ccid2_rx_counters *c);

#endif
