/* SPDX-License-Identifier: MIT */
/* The C side of package dccp: one cgo call per Go call; gc_errmsg() read in
 * the call that failed; no pointer given by Go kept past a call. */
#ifndef GCGO_DCCP_SHIM_H
#define GCGO_DCCP_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <groupcast/dccp.h>

#include "../gcgo.h"

/* An address and the options, as Go fills them (no pointers). */
struct gcgo_cfg {
	struct gcgo_member where;
	int encap;
	int ccid;
	uint32_t service, mps, ring_slots, timeout_ms;
};

struct gc_dccp *gcgo_connect(const struct gcgo_cfg *c, struct gcgo_err *e);
struct gc_dccp_listener *gcgo_listen(const struct gcgo_cfg *c, struct gcgo_err *e);
struct gc_dccp *gcgo_accept(struct gc_dccp_listener *l, int timeout_ms, struct gcgo_err *e);
ssize_t gcgo_recv(struct gc_dccp *c, void *buf, size_t len, uint64_t *seq, uint64_t *lost, int *eof,
		  int timeout_ms, struct gcgo_err *e);
/* Copy buf into the zone buffer of a free ring slot, queue and submit it;
 * its position into *pos.  -1 EAGAIN when the ring is full. */
int gcgo_write(struct gc_dccp *c, const void *buf, size_t len, uint64_t seq, unsigned *pos,
	       struct gcgo_err *e);
/* Wait at most timeout_ms for a free slot: 0, or -1 (ETIMEDOUT, ...). */
int gcgo_wait(struct gc_dccp *c, int timeout_ms, struct gcgo_err *e);
/* Late data choice: mark dead every packet the engine has not taken whose
 * queued[pos] is non-zero and below cutoff, and clear its queued[pos];
 * returns how many are certain not to be sent. */
int gcgo_drop(struct gc_dccp *c, uint64_t *queued, unsigned n, uint64_t cutoff, struct gcgo_err *e);
unsigned gcgo_entries(struct gc_dccp *c);

struct gcgo_dccp_stats {
	int state, ccid;
	uint32_t cwnd, pipe;
	uint64_t x_bps, rtt_us, sent, acked, lost, dead, received, rx_lost, invalid;
};
int gcgo_stats(struct gc_dccp *c, struct gcgo_dccp_stats *st, struct gcgo_err *e);
int gcgo_close(struct gc_dccp *c, int timeout_ms, struct gcgo_err *e);
#endif
