/* SPDX-License-Identifier: MIT */
/*
 * lib/dccp/feature.c: the byte encodings of RFC 4340 §6.5, decoding with
 * its invalid cases (§6.6.8), server-priority reconciliation (§6.3.1), the
 * Confirm check and FGSR/FGSS reordering (§6.6.4).
 */
#include "check.h"
#include "dccp/feature.h"

/* The bytes one builder call produced must equal want. */
#define BYTES(call, ...)                                                                         \
	do {                                                                                     \
		const uint8_t w_[] = { __VA_ARGS__ };                                            \
		uint8_t a_[64];                                                                  \
		struct dccp_obuf b_;                                                             \
		dccp_obuf_init(&b_, a_, sizeof(a_));                                             \
		call;                                                                            \
		EXPECT(!b_.overflow && b_.len == sizeof(w_) && memcmp(a_, w_, sizeof(w_)) == 0); \
	} while (0)

static struct dccp_opt opt_of(const uint8_t *bytes, bool mandatory)
{
	return (struct dccp_opt){ bytes[0], (uint8_t)(bytes[1] - 2), mandatory, bytes + 2 };
}

static void test_encodings(void)
{
	const uint8_t l23[] = { 2, 3 }, sel223[] = { 2, 2, 3 }, l32[] = { 3, 2 }, sel232[] = { 2, 3, 2 };

	/* RFC 4340 §6.5, option by option */
	BYTES(dccp_feat_put_sp(&b_, DCCP_OPT_CHANGE_L, DCCP_F_CCID, l23, 2), 32, 5, 1, 2, 3);
	BYTES(dccp_feat_put_nn(&b_, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, 1024), 32, 9, 3, 0, 0, 0,
	      0, 4, 0);
	BYTES(dccp_feat_put_sp(&b_, DCCP_OPT_CONFIRM_L, DCCP_F_CCID, sel223, 3), 33, 6, 1, 2, 2, 3);
	BYTES(dccp_feat_put_empty_confirm(&b_, DCCP_OPT_CONFIRM_L, 126), 33, 3, 126);
	BYTES(dccp_feat_put_sp(&b_, DCCP_OPT_CHANGE_R, DCCP_F_CCID, l32, 2), 34, 5, 1, 3, 2);
	BYTES(dccp_feat_put_sp(&b_, DCCP_OPT_CONFIRM_R, DCCP_F_CCID, sel232, 3), 35, 6, 1, 2, 3, 2);
	BYTES(dccp_feat_put_nn(&b_, DCCP_OPT_CONFIRM_R, DCCP_F_SEQ_WINDOW, 1024), 35, 9, 3, 0, 0, 0,
	      0, 4, 0);
	BYTES(dccp_feat_put_empty_confirm(&b_, DCCP_OPT_CONFIRM_R, 126), 35, 3, 126);
	BYTES(dccp_feat_put_nn(&b_, DCCP_OPT_CHANGE_L, DCCP_F_ACK_RATIO, 3), 32, 5, 5, 0, 3);

	/* refused: NN values out of range, NN in Change R, unknown NN feature, empty lists */
	uint8_t a[64];
	struct dccp_obuf b;
	dccp_obuf_init(&b, a, sizeof(a));
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_SEQ_WINDOW, 31);
	EXPECT(b.overflow);
	dccp_obuf_init(&b, a, sizeof(a));
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_ACK_RATIO, 0);
	EXPECT(b.overflow);
	dccp_obuf_init(&b, a, sizeof(a));
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_R, DCCP_F_SEQ_WINDOW, 100);
	EXPECT(b.overflow);
	dccp_obuf_init(&b, a, sizeof(a));
	dccp_feat_put_nn(&b, DCCP_OPT_CHANGE_L, DCCP_F_CCID, 2);
	EXPECT(b.overflow);
	dccp_obuf_init(&b, a, sizeof(a));
	dccp_feat_put_sp(&b, DCCP_OPT_CHANGE_L, DCCP_F_CCID, l23, 0);
	EXPECT(b.overflow && b.len == 0);

	/* the table (§6.4 Table 4, §7.5.2) */
	const struct dccp_feat_info *fi = dccp_feat_info(DCCP_F_SEQ_WINDOW);
	CHECK(fi != NULL);
	EXPECT(fi->rule == DCCP_RULE_NN && fi->len == 6 && fi->initial == 100 && fi->min == 32 &&
	       fi->max == 70368744177663ull && fi->required);
	fi = dccp_feat_info(DCCP_F_CCID);
	EXPECT(fi && fi->rule == DCCP_RULE_SP && fi->initial == 2 && fi->required);
	fi = dccp_feat_info(DCCP_F_ACK_RATIO);
	EXPECT(fi && fi->rule == DCCP_RULE_NN && fi->len == 2 && fi->initial == 2 && !fi->required);
	for (uint8_t f = DCCP_F_SHORT_SEQNOS; f <= DCCP_F_CHECK_DATA_CSUM; f++)
		EXPECT(dccp_feat_info(f) != NULL);
	EXPECT(dccp_feat_info(0) == NULL && dccp_feat_info(10) == NULL && dccp_feat_info(126) == NULL);
	EXPECT(dccp_feat_info(DCCP_F_SEND_LOSS_EVENT_RATE) != NULL);
}

static void test_decode(void)
{
	struct dccp_feat_opt f;
	struct dccp_counters c = { 0 };

	const uint8_t chg[] = { 34, 6, 1, 2, 3, 1 };
	struct dccp_opt op = opt_of(chg, true);
	CHECK_EQ(dccp_feat_decode(&op, &f, &c), DCCP_OK);
	EXPECT(f.type == DCCP_OPT_CHANGE_R && f.feat == 1 && f.mandatory && f.nprefs == 3 &&
	       f.prefs[0] == 2 && f.prefs[2] == 1 && !f.empty);
	const uint8_t cnf[] = { 33, 6, 1, 3, 3, 2 };
	op = opt_of(cnf, false);
	CHECK_EQ(dccp_feat_decode(&op, &f, &c), DCCP_OK);
	EXPECT(f.value == 3 && f.nprefs == 2 && f.prefs[0] == 3);
	const uint8_t sw[] = { 32, 9, 3, 0, 0, 0, 0, 4, 0 };
	op = opt_of(sw, false);
	CHECK_EQ(dccp_feat_decode(&op, &f, &c), DCCP_OK);
	EXPECT_EQ(f.value, 1024);
	const uint8_t empty[] = { 35, 3, 6 };
	op = opt_of(empty, false);
	CHECK_EQ(dccp_feat_decode(&op, &f, &c), DCCP_OK);
	EXPECT(f.empty && f.feat == 6);

	/* invalid (§6.6.8) and unknown (§6.6.7) */
	static const uint8_t bad[][10] = {
		{ 34, 9, 3, 0, 0, 0, 0, 4, 0 },	 /* Change R for an NN feature */
		{ 33, 9, 3, 0, 0, 0, 0, 4, 0 },	 /* Confirm L for an NN feature */
		{ 32, 9, 3, 0, 0, 0, 0, 0, 31 }, /* Sequence Window below 32 */
		{ 32, 9, 3, 64, 0, 0, 0, 0, 0 }, /* 2^46, above 2^46 - 1 */
		{ 32, 8, 3, 0, 0, 0, 4, 0 },	 /* 5 bytes */
		{ 32, 5, 5, 0, 0 },		 /* Ack Ratio 0 */
		{ 32, 3, 1 },			 /* Change without a value */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		op = opt_of(bad[i], false);
		EXPECT_EQ(dccp_feat_decode(&op, &f, &c), DCCP_DROP_FEAT_INVALID);
	}
	const uint8_t unk[] = { 34, 4, 126, 1 };
	op = opt_of(unk, true);
	EXPECT_EQ(dccp_feat_decode(&op, &f, &c), DCCP_DROP_FEAT_UNKNOWN);
	EXPECT(f.feat == 126 && f.mandatory);
	EXPECT_EQ(c.n[DCCP_DROP_FEAT_INVALID], 7);
	EXPECT_EQ(c.n[DCCP_DROP_FEAT_UNKNOWN], 1);
}

static void test_reconcile(void)
{
	uint8_t v = 0;
	const uint8_t client[] = { 2, 3, 1 }, server[] = { 3, 2, 1 };

	/* §6.5: Change R(CCID, 2 3 1) meets the server's 3 2 1: 3 */
	EXPECT(dccp_feat_reconcile(server, 3, client, 3, &v) && v == 3);
	/* the server's order decides, not the client's */
	const uint8_t s2[] = { 1, 2 }, c2[] = { 2, 1 };
	EXPECT(dccp_feat_reconcile(s2, 2, c2, 2, &v) && v == 1);
	EXPECT(dccp_feat_reconcile(c2, 2, s2, 2, &v) && v == 2);
	/* a shared entry further down */
	const uint8_t s3[] = { 4, 5, 6, 2 }, c3[] = { 9, 2 };
	EXPECT(dccp_feat_reconcile(s3, 4, c3, 2, &v) && v == 2);
	/* nothing shared, or an empty list */
	const uint8_t s4[] = { 3 }, c4[] = { 2 };
	v = 77;
	EXPECT(!dccp_feat_reconcile(s4, 1, c4, 1, &v) && v == 77);
	EXPECT(!dccp_feat_reconcile(s4, 0, c4, 1, &v));

	/* Confirms: the client sent Change R(CCID, 2 3 1) */
	const uint8_t ok[] = { 33, 7, 1, 3, 3, 2, 1 }; /* Confirm L(CCID, 3, 3 2 1) */
	struct dccp_opt op = opt_of(ok, false);
	struct dccp_feat_opt f;
	CHECK_EQ(dccp_feat_decode(&op, &f, NULL), DCCP_OK);
	EXPECT(dccp_feat_confirm_ok(&f, client, 3, false, 2));
	f.value = 2; /* the server picked its second choice: wrong */
	EXPECT(!dccp_feat_confirm_ok(&f, client, 3, false, 2));
	/* the server sent Change L(CCID, 3 2) and the client confirms with its list 2 */
	const uint8_t cr[] = { 35, 5, 1, 2, 2 };
	op = opt_of(cr, false);
	CHECK_EQ(dccp_feat_decode(&op, &f, NULL), DCCP_OK);
	const uint8_t l32[] = { 3, 2 };
	EXPECT(dccp_feat_confirm_ok(&f, l32, 2, true, 2));
	/* nothing shared: the Confirm repeats the old value */
	const uint8_t cn[] = { 35, 5, 1, 2, 4 };
	op = opt_of(cn, false);
	CHECK_EQ(dccp_feat_decode(&op, &f, NULL), DCCP_OK);
	const uint8_t three[] = { 3 };
	EXPECT(dccp_feat_confirm_ok(&f, three, 1, true, 2));
	EXPECT(!dccp_feat_confirm_ok(&f, three, 1, true, 3));
	/* NN: Confirm R repeats our Change L's value */
	const uint8_t nn[] = { 35, 5, 5, 0, 4 };
	op = opt_of(nn, false);
	CHECK_EQ(dccp_feat_decode(&op, &f, NULL), DCCP_OK);
	EXPECT(dccp_feat_confirm_ok(&f, NULL, 0, false, 4));
	EXPECT(!dccp_feat_confirm_ok(&f, NULL, 0, false, 5));
}

static void test_order(void)
{
	const uint64_t M = DCCP_SEQ_MASK;

	EXPECT(dccp_feat_in_order(DCCP_OPT_CHANGE_L, 11, false, 0, 10, 0));
	EXPECT(!dccp_feat_in_order(DCCP_OPT_CHANGE_R, 10, true, 50, 10, 0));
	EXPECT(!dccp_feat_in_order(DCCP_OPT_CHANGE_R, 9, true, 50, 10, 0));
	EXPECT(dccp_feat_in_order(DCCP_OPT_CONFIRM_L, 11, true, 50, 10, 50));
	EXPECT(!dccp_feat_in_order(DCCP_OPT_CONFIRM_L, 11, true, 49, 10, 50));
	EXPECT(!dccp_feat_in_order(DCCP_OPT_CONFIRM_R, 11, false, 50, 10, 50));
	/* across the wrap */
	EXPECT(dccp_feat_in_order(DCCP_OPT_CONFIRM_R, 0, true, 1, M, M));
	EXPECT(!dccp_feat_in_order(DCCP_OPT_CONFIRM_R, 0, true, M - 1, M, M));
}

int main(void)
{
	test_encodings();
	test_decode();
	test_reconcile();
	test_order();
	return check_done("dccp_feature");
}
