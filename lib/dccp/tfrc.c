/* SPDX-License-Identifier: MIT */
/*
 * TFRC for CCID 3:
 *   RFC 5348 §3.1, §8.1  TCP throughput equation (b = 1, t_RTO = 4R)
 *   RFC 5348 §4.1        segment size s: mean payload over the last four loss
 *                        intervals (RFC 4342 §5.3 allows this or the MPS)
 *   RFC 5348 §4.2        initial rate;  §4.3/§4.4 nofeedback timer (with a
 *                        100 ms floor, ours);  §4.6 inter-packet interval
 *   RFC 5348 §5.4        average loss interval with weights 1,1,1,1,.8,.6,.4,.2
 *                        and the rule for including the open interval I_0
 * Double precision throughout; times out in nanoseconds.
 */
#include <math.h>

#include "dccp/tfrc.h"

const double tfrc_weights[TFRC_NINTERVAL] = { 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2 };

double tfrc_x_bps_general(double s, double R, double p, double b, double t_rto)
{
	if (!(p > 0))
		return INFINITY;
	double den = R * sqrt(2 * b * p / 3) + t_rto * (3 * sqrt(3 * b * p / 8) * p * (1 + 32 * p * p));
	return den > 0 ? s / den : INFINITY;
}

double tfrc_x_bps(double s, double R, double p)
{
	return tfrc_x_bps_general(s, R, p, 1, 4 * R);
}

double tfrc_i_mean(const uint32_t *I, unsigned k)
{
	double tot0 = 0, tot1 = 0, wtot = 0;

	if (k > TFRC_NINTERVAL)
		k = TFRC_NINTERVAL;
	if (k == 0)
		return 0;
	for (unsigned i = 0; i < k; i++) { /* with the open interval I_0 */
		tot0 += I[i] * tfrc_weights[i];
		wtot += tfrc_weights[i];
	}
	for (unsigned i = 1; i <= k; i++) /* without it */
		tot1 += I[i] * tfrc_weights[i - 1];
	/* I_0 counts only if it raises the average */
	return (tot0 > tot1 ? tot0 : tot1) / wtot;
}

double tfrc_p(const uint32_t *I, unsigned k)
{
	double m = tfrc_i_mean(I, k);
	return m > 0 ? 1 / m : 0;
}

double tfrc_initial_rate(double mss, double R)
{
	double w = fmin(4 * mss, fmax(2 * mss, 4380));
	return R > 0 ? w / R : INFINITY;
}

uint64_t tfrc_send_interval_ns(double s, double x_bps)
{
	if (!(x_bps > 0) || !(s > 0))
		return TFRC_T_MBI_NS;
	double t = ceil(s / x_bps * 1e9);
	if (!(t >= 1))
		return 1;
	return t >= (double)TFRC_T_MBI_NS ? TFRC_T_MBI_NS : (uint64_t)t;
}

uint64_t tfrc_nofeedback_ns(double R, double s, double x_bps, bool have_rtt)
{
	if (!have_rtt)
		return TFRC_NOFEEDBACK_INIT_NS;
	double t = 4 * R;
	double two_ipi = x_bps > 0 ? 2 * s / x_bps : 2 * TFRC_T_MBI_NS / 1e9;
	if (two_ipi > t)
		t = two_ipi;
	t = ceil(t * 1e9);
	if (!(t >= (double)TFRC_NOFEEDBACK_MIN_NS))
		return TFRC_NOFEEDBACK_MIN_NS;
	return t >= 2.0 * TFRC_T_MBI_NS ? 2 * TFRC_T_MBI_NS : (uint64_t)t;
}

void tfrc_s_add(struct tfrc_s_mean *m, size_t payload)
{
	m->bytes[m->cur] += payload;
	m->pkts[m->cur]++;
}

void tfrc_s_loss_interval(struct tfrc_s_mean *m)
{
	m->cur = (m->cur + 1) % 5;
	m->bytes[m->cur] = m->pkts[m->cur] = 0;
}

double tfrc_s_get(const struct tfrc_s_mean *m, double fallback)
{
	uint64_t b = 0, n = 0;

	for (unsigned i = 0; i < 5; i++) {
		b += m->bytes[i];
		n += m->pkts[i];
	}
	return n ? (double)b / (double)n : fallback;
}
