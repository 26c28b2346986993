/* SPDX-License-Identifier: MIT */
/*
 * ccid3.h - what CCID 3 (ccid3.c) offers beyond the generic ops of ccid.h:
 * its ops tables for the registry (ccid.c) and counters for tests and the
 * fuzzer.
 */
#ifndef GC_DCCP_CCID3_H
#define GC_DCCP_CCID3_H

#include "dccp/ccid.h"

extern const struct dccp_ccid_tx_ops dccp_ccid3_tx_ops;
extern const struct dccp_ccid_rx_ops dccp_ccid3_rx_ops;

#define CCID3_TX_RECORD 1024 /* send times the sender keeps for RTT samples (power of 2) */
#define CCID3_RX_WINDOW 256  /* packets the receiver keeps for loss detection (power of 2) */
#define CCID3_NDUPACK 3	     /* RFC 5348 §5.1: lost after 3 later packets arrived */

struct ccid3_tx_counters {
	uint64_t feedback;     /* feedback packets used */
	uint64_t not_feedback; /* acks without Loss Intervals, Loss Event Rate or Receive Rate */
	uint64_t bad_ackno;    /* Acknowledgement Number we never sent: ignored */
	uint64_t bad_elapsed;  /* Elapsed Time longer than the packet's age: no RTT sample */
	uint64_t loss_events;  /* feedback that reported a new loss event */
	uint64_t nofeedback;   /* nofeedback timer expiries */
};
void dccp_ccid3_tx_counters(void *tx, struct ccid3_tx_counters *c);

struct ccid3_rx_counters {
	uint64_t lost;	      /* packets taken as lost */
	uint64_t loss_events; /* loss events (losses within one RTT merged) */
	uint64_t old, dup;    /* below the window; already received */
	uint64_t rtt_ns;      /* the receiver's RTT estimate from CCVal (0: none) */
};
void dccp_ccid3_rx_counters(void *rx, struct ccid3_rx_counters *c);

#endif
