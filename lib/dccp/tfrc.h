/* SPDX-License-Identifier: MIT */
/*
 * TFRC arithmetic for CCID 3 (RFC 5348, RFC 4342), library-internal and
 * pure: the throughput equation, the average loss interval, the send
 * interval, the nofeedback timer and the segment size s.  See tfrc.c.
 */
#ifndef GC_DCCP_TFRC_H
#define GC_DCCP_TFRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TFRC_NINTERVAL 8		      /* n of RFC 5348 §5.4 */
#define TFRC_T_MBI_NS 64000000000ull	      /* t_mbi, maximum backoff interval (§4.3) */
#define TFRC_NOFEEDBACK_MIN_NS 100000000ull   /* our floor on the nofeedback timer (100 ms) */
#define TFRC_NOFEEDBACK_INIT_NS 2000000000ull /* before the first RTT sample (§4.2) */

extern const double tfrc_weights[TFRC_NINTERVAL]; /* 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2 */

/* §3.1: X_Bps for segment size s (bytes), RTT R (s), loss event rate p,
 * t_RTO (s) and b.  p <= 0 gives +infinity (no loss: no equation limit). */
double tfrc_x_bps_general(double s, double R, double p, double b, double t_rto);
/* The same with b = 1 and t_RTO = 4R (§3.1, §8.1). */
double tfrc_x_bps(double s, double R, double p);

/* §5.4: the average loss interval.  I[0] is the current (open) interval,
 * I[1..k] the k most recent closed ones, newest first, k <= 8.  Returns
 * I_mean, or 0 when k == 0 (no closed interval: p is not computed). */
double tfrc_i_mean(const uint32_t *I, unsigned k);
/* p = 1 / I_mean (0 when there is no I_mean). */
double tfrc_p(const uint32_t *I, unsigned k);

/* §4.2: initial_rate = W_init / R, W_init = min(4*MSS, max(2*MSS, 4380)). */
double tfrc_initial_rate(double mss, double R);

/* §4.6: t_ipi = s / X in ns, rounded up, in [1 ns, t_mbi]: never 0, even
 * when a sub-millisecond RTT makes X huge (Linux 6.1's CCID 3 computes it
 * in microseconds and hits 0 on loopback). */
uint64_t tfrc_send_interval_ns(double s, double x_bps);

/* §4.3 step 3 / §4.4 step 2: max(4R, 2s/X), but at least 100 ms (a LAN's
 * 4R would fire the timer between every two feedback packets; Linux uses
 * the same floor).  Without an RTT sample: 2 s (§4.2). */
uint64_t tfrc_nofeedback_ns(double R, double s, double x_bps, bool have_rtt);

/*
 * s, the segment size (§4.1): the mean application payload of the data
 * packets sent (bytes, excluding IP, UDP and DCCP headers) over the current
 * and the last four loss intervals, as §4.1 says a sender whose packet
 * size varies SHOULD do.  The sender starts a new interval when feedback
 * reports a new loss event.  fallback (the MPS) is returned before the
 * first packet.
 */
struct tfrc_s_mean {
	uint64_t bytes[5], pkts[5];
	unsigned cur;
};
void tfrc_s_add(struct tfrc_s_mean *m, size_t payload);
void tfrc_s_loss_interval(struct tfrc_s_mean *m);
double tfrc_s_get(const struct tfrc_s_mean *m, double fallback);

#endif /* GC_DCCP_TFRC_H */
