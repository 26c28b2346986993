/* SPDX-License-Identifier: MIT */
/*
 * lib/dccp/tfrc.c against values worked out by hand from RFC 5348.
 *
 * §3.1 with b = 1, t_RTO = 4R:  X = s / (R * f(p)),
 *   f(p) = sqrt(2p/3) + 12 * sqrt(3p/8) * p * (1 + 32 p^2)
 *
 *   p = 0.01:  sqrt(0.0066667) = 0.0816496581, sqrt(0.00375) = 0.0612372436,
 *              12 * 0.0612372436 * 0.01 * 1.0032 = 0.0073719843,
 *              f = 0.0890216424;  s = 1460, R = 0.1 s:
 *              X = 1460 / 0.00890216424 = 164005.0622 B/s
 *   p = 0.1:   sqrt(0.0666667) = 0.2581988897, sqrt(0.0375) = 0.1936491673,
 *              12 * 0.1936491673 * 0.1 * 1.32 = 0.3067402810,
 *              f = 0.5649391708;  s = 1000, R = 0.05 s:
 *              X = 1000 / 0.02824695854 = 35402.0416 B/s
 *   p = 0.001: sqrt(0.00066667) = 0.0258198890, sqrt(0.000375) = 0.0193649167,
 *              12 * 0.0193649167 * 0.001 * 1.000032 = 0.0002323864,
 *              f = 0.0260522754;  s = 1460, R = 200 us:
 *              X = 1460 / 0.00000521045508 = 280205850.92 B/s
 *   p = 1:     f = 0.8164965809 + 12 * 0.6123724357 * 33 = 243.3159811;
 *              s = 1, R = 1: X = 1 / 243.3159811 = 0.004109882119 B/s
 *   p = 0.05:  sqrt(0.0333333) = 0.1825741858, sqrt(0.01875) = 0.1369306394,
 *              s = 1200, R = 30 ms, t_RTO = 4R = 0.12 s:
 *              R * 0.1825741858 = 0.0054772256,
 *              0.12 * 3 * 0.1369306394 * 0.05 * 1.08 = 0.0026619316,
 *              den = 0.0081391572;  X = 1200 / 0.0081391572 = 147435.4125 B/s
 *   heavy loss at loopback RTT (the t_RTO term dominates):
 *   p = 0.3, R = 100 us, s = 1000: sqrt(0.2) = 0.4472135955,
 *              sqrt(0.1125) = 0.3354101966, R * 0.4472135955 = 0.0000447214,
 *              0.0004 * 3 * 0.3354101966 * 0.3 * 3.88 = 0.0004685010,
 *              den = 0.0005132223;  X = 1948473.3161 B/s
 * and the general form (b = 2 packets per ack, t_RTO = 1 s):
 *   p = 0.01, s = 1460, R = 0.1: sqrt(4p/3) = 0.1154700538,
 *              sqrt(6p/8) = 0.0866025404, 0.1 * 0.1154700538 = 0.0115470054,
 *              1 * 3 * 0.0866025404 * 0.01 * 1.0032 = 0.0026063901,
 *              den = 0.0141533954;  X = 103155.4588 B/s
 * (the digits were carried to 12 places; the test allows 1e-9 relative error)
 *
 * §5.4, n = 8, weights 1 1 1 1 .8 .6 .4 .2 (sum 6):
 *   I = 50 | 100 x 8:  I_tot0 = 50 + 100 * 5 = 550, I_tot1 = 100 * 6 = 600,
 *                      I_mean = 600 / 6 = 100, p = 0.01 (the short open
 *                      interval does not count)
 *   I = 400 | 100 x 8: I_tot0 = 400 + 500 = 900 > 600, I_mean = 150
 *   I = 10 | 20, 30 (k = 2): I_tot0 = 30, I_tot1 = 50, W_tot = 2, I_mean = 25
 *   I = 0 | 1,2,...,8: I_tot1 = 1+2+3+4 + 5*.8+6*.6+7*.4+8*.2 = 22, I_mean = 22/6
 */
#include <math.h>

#include "check.h"
#include "dccp/tfrc.h"

static int close_to(double got, double want)
{
	return fabs(got - want) <= 1e-9 * fabs(want);
}
#define NEAR(got, want)                                                              \
	do {                                                                         \
		double g_ = (got), w_ = (want);                                      \
		if (!EXPECT(close_to(g_, w_)))                                       \
			fprintf(stderr, "  %s = %.12g, want %.12g\n", #got, g_, w_); \
	} while (0)

int main(void)
{
	NEAR(tfrc_x_bps(1460, 0.1, 0.01), 164005.0621699698);
	NEAR(tfrc_x_bps(1000, 0.05, 0.1), 35402.0415558265);
	NEAR(tfrc_x_bps(1460, 0.0002, 0.001), 280205850.9156157970);
	NEAR(tfrc_x_bps(1, 1, 1), 0.00410988211876372);
	NEAR(tfrc_x_bps(1200, 0.03, 0.05), 147435.412518214297);
	NEAR(tfrc_x_bps(1000, 0.0001, 0.3), 1948473.31605070556);
	NEAR(tfrc_x_bps_general(1460, 0.1, 0.01, 2, 1.0), 103155.458793629901);
	/* test_ccid3's target: s = 1000, R = 0.1, p = 0.01 (f as for the first line) */
	NEAR(tfrc_x_bps(1000, 0.1, 0.01), 112332.234362992994);
	/* the general form with b = 1, t_RTO = 4R is the same equation */
	for (double p = 1e-6; p < 1; p *= 3.7)
		NEAR(tfrc_x_bps_general(1460, 0.03, p, 1, 0.12), tfrc_x_bps(1460, 0.03, p));
	/* b = 2 and t_RTO = max(4R, 1 s) as RFC 5348 allows: smaller rate */
	EXPECT(tfrc_x_bps_general(1460, 0.03, 0.01, 2, 1.0) < tfrc_x_bps(1460, 0.03, 0.01));
	EXPECT(isinf(tfrc_x_bps(1460, 0.1, 0)));
	/* monotone: more loss, less rate; longer RTT, less rate */
	EXPECT(tfrc_x_bps(1460, 0.1, 0.02) < tfrc_x_bps(1460, 0.1, 0.01));
	EXPECT(tfrc_x_bps(1460, 0.2, 0.01) < tfrc_x_bps(1460, 0.1, 0.01));

	EXPECT(tfrc_weights[0] == 1.0 && tfrc_weights[3] == 1.0 && tfrc_weights[4] == 0.8 &&
	       tfrc_weights[5] == 0.6 && tfrc_weights[6] == 0.4 && tfrc_weights[7] == 0.2);
	for (int i = 0; i < TFRC_NINTERVAL; i++) /* §5.4's formula for n = 8 */
		NEAR(tfrc_weights[i], i < 4 ? 1.0 : 2.0 * (8 - i) / (8 + 2));
	uint32_t I[9] = { 50, 100, 100, 100, 100, 100, 100, 100, 100 };
	NEAR(tfrc_i_mean(I, 8), 100);
	NEAR(tfrc_p(I, 8), 0.01);
	I[0] = 400;
	NEAR(tfrc_i_mean(I, 8), 150);
	NEAR(tfrc_i_mean(I, 12), 150); /* at most n intervals */
	uint32_t J[3] = { 10, 20, 30 };
	NEAR(tfrc_i_mean(J, 2), 25);
	uint32_t K[9] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };
	NEAR(tfrc_i_mean(K, 8), 22.0 / 6);
	EXPECT_EQ(tfrc_i_mean(K, 0), 0);
	EXPECT_EQ(tfrc_p(K, 0), 0);

	/* §4.2: W_init = min(4 MSS, max(2 MSS, 4380)) */
	NEAR(tfrc_initial_rate(1460, 0.1), 43800);
	NEAR(tfrc_initial_rate(536, 0.1), 21440);
	NEAR(tfrc_initial_rate(9000, 0.5), 36000);

	/* send interval: s / X, rounded up to whole ns, never 0 */
	EXPECT_EQ(tfrc_send_interval_ns(1460, 1e9), 1460);
	EXPECT_EQ(tfrc_send_interval_ns(1460, 3e9), 487);
	EXPECT_EQ(tfrc_send_interval_ns(1460, 1e13), 1);
	EXPECT_EQ(tfrc_send_interval_ns(1460, INFINITY), 1);
	EXPECT_EQ(tfrc_send_interval_ns(1460, 0), TFRC_T_MBI_NS);
	EXPECT_EQ(tfrc_send_interval_ns(1460, NAN), TFRC_T_MBI_NS);
	EXPECT_EQ(tfrc_send_interval_ns(1460, 1460.0 / 100), TFRC_T_MBI_NS); /* capped at t_mbi */
	/* loopback: RTT 20 us, p = 1e-4, 100 B packets: f = 0.0081722,
	 * X = 100 / (20e-6 * 0.0081722) = 6.118e8 B/s, t_ipi = 163.4 ns -> 164
	 * (in whole microseconds, as Linux 6.1 computes it, this is 0) */
	double x = tfrc_x_bps(100, 20e-6, 1e-4);
	NEAR(x, 611821795.903276898);
	EXPECT_EQ(tfrc_send_interval_ns(100, x), 164);

	/* nofeedback: max(4R, 2s/X), at least 100 ms; 2 s with no RTT sample */
	EXPECT_EQ(tfrc_nofeedback_ns(0.0005, 1460, 1e7, true), TFRC_NOFEEDBACK_MIN_NS);
	EXPECT_EQ(tfrc_nofeedback_ns(0.2, 1460, 1e6, true), 800000000ull);
	EXPECT_EQ(tfrc_nofeedback_ns(0.1, 1460, 1460, true), 2000000000ull);
	EXPECT_EQ(tfrc_nofeedback_ns(0.1, 1460, 0, true), 2 * TFRC_T_MBI_NS);
	EXPECT_EQ(tfrc_nofeedback_ns(0, 0, 0, false), TFRC_NOFEEDBACK_INIT_NS);

	/* s: mean payload over the current and four previous loss intervals */
	struct tfrc_s_mean m = { 0 };
	NEAR(tfrc_s_get(&m, 1400), 1400);
	tfrc_s_add(&m, 100);
	tfrc_s_add(&m, 200);
	NEAR(tfrc_s_get(&m, 1400), 150);
	for (int i = 0; i < 4; i++) {
		tfrc_s_loss_interval(&m);
		tfrc_s_add(&m, 1000);
	}
	NEAR(tfrc_s_get(&m, 1400), (300 + 4000) / 6.0);
	tfrc_s_loss_interval(&m); /* the first interval (100, 200) drops out */
	NEAR(tfrc_s_get(&m, 1400), 1000);
	return check_done("dccp_tfrc");
}
