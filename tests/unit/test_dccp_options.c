/* SPDX-License-Identifier: MIT */
/*
 * lib/dccp/options.c: every option built and parsed back, the RFC's own
 * examples (RFC 4340 §11.4 Ack Vector, §11.7 Data Dropped, RFC 4342 §8.6.2
 * Loss Intervals), CRC-32c, and each rejection reason with its counter.
 */
#include "check.h"
#include "dccp/options.h"

/* Build a packet of type with the option bytes o[0..n) (padded) and parse
 * its options with flags. */
static enum dccp_drop parse_with(uint8_t type, const uint8_t *o, size_t n, unsigned flags,
				 struct dccp_opts *out, struct dccp_counters *c)
{
	static uint8_t pkt[2048];
	uint8_t area[1024];
	struct dccp_obuf b;
	struct dccp_hdr h = { .sport = 1, .dport = 2, .type = type, .x = 1, .seq = 1000, .ack = 100 };

	CHECK(n <= sizeof(area));
	memcpy(area, o, n);
	dccp_obuf_init(&b, area, sizeof(area));
	b.len = n;
	dccp_obuf_pad(&b);
	CHECK(!b.overflow);
	ssize_t len = dccp_build(pkt, sizeof(pkt), &h, area, b.len, "data", 4, NULL);
	CHECK(len > 0);
	struct dccp_hdr g;
	CHECK_EQ(dccp_parse(pkt, (size_t)len, NULL, &g, c), DCCP_OK);
	return dccp_opts_parse(&g, pkt, flags, out, c);
}

static void test_roundtrip(void)
{
	uint8_t area[512], vec[64];
	size_t nv = 0;
	struct dccp_obuf b;
	const uint8_t cookie[5] = { 1, 2, 3, 4, 5 };
	const struct dccp_loss_interval li[2] = { { 1000, 3, 1001, true },
						  { 70000, 0x7fffff, 5, false } };

	dccp_obuf_init(&b, area, sizeof(area));
	dccp_opt_put(&b, DCCP_OPT_SLOW_RECEIVER, NULL, 0);
	dccp_opt_put(&b, DCCP_OPT_INIT_COOKIE, cookie, sizeof(cookie));
	dccp_opt_put_ndp(&b, 300);
	dccp_opt_put_timestamp(&b, 0xdeadbeef);
	dccp_opt_put_ts_echo(&b, 0x01020304, 70000);
	dccp_opt_put_elapsed(&b, 123);
	dccp_opt_put_data_checksum(&b, "123456789", 9);
	dccp_opt_put_u32(&b, DCCP_OPT_LOSS_EVENT_RATE, UINT32_MAX);
	dccp_opt_put_u32(&b, DCCP_OPT_RECEIVE_RATE, 125000);
	dccp_opt_put_loss_intervals(&b, 2, li, 2);
	CHECK(dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_RECEIVED, 100)); /* 64 + 36 */
	CHECK(dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_NOT_RECEIVED, 1));
	CHECK(dccp_ackvec_rle(vec, &nv, sizeof(vec), DCCP_ACK_ECN_MARKED, 2));
	CHECK_EQ(nv, 4);
	dccp_opt_put_vector(&b, DCCP_OPT_ACKVEC1, vec, nv);
	dccp_obuf_pad(&b);
	CHECK(!b.overflow && b.len % 4 == 0);

	struct dccp_opts o;
	struct dccp_counters c = { 0 };
	/* a Response: not established yet, so the Ack Vector is refused but the cookie kept */
	CHECK_EQ(parse_with(DCCP_RESPONSE, area, b.len, 0, &o, &c), DCCP_OK);
	EXPECT_EQ(c.n[DCCP_DROP_OPT_EARLY], 1);
	/* a DataAck of an established connection: everything */
	memset(&c, 0, sizeof(c));
	CHECK_EQ(parse_with(DCCP_DATAACK, area, b.len, DCCP_PF_ESTABLISHED, &o, &c), DCCP_OK);
	for (int e = 0; e < DCCP_DROP_COUNT; e++)
		EXPECT_EQ(c.n[e], e == DCCP_DROP_OPT_EARLY); /* the Init Cookie, once established */
	EXPECT(o.slow_receiver);
	EXPECT(o.has_ndp && o.ndp_count == 300);
	EXPECT(o.has_ts && o.ts == 0xdeadbeef);
	EXPECT(o.has_ts_echo && o.ts_echo == 0x01020304 && o.ts_echo_elapsed == 70000);
	EXPECT(o.has_elapsed && o.elapsed == 123);
	EXPECT(o.has_data_csum && o.data_csum == 0xe3069283u);
	EXPECT(o.has_loss_rate && o.loss_rate == UINT32_MAX);
	EXPECT(o.has_recv_rate && o.recv_rate == 125000);
	struct dccp_loss_interval got[4];
	uint8_t skip;
	CHECK_EQ(dccp_loss_intervals(&o, got, 4, &skip), 2);
	EXPECT_EQ(skip, 2);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(got[i].lossless, li[i].lossless);
		EXPECT_EQ(got[i].loss, li[i].loss);
		EXPECT_EQ(got[i].data, li[i].data);
		EXPECT_EQ(got[i].ecn_echo, li[i].ecn_echo);
	}
	struct dccp_vec_iter it;
	struct dccp_run r;
	dccp_ackvec_iter(&it, &o, 100, DCCP_SEQ_MASK - 1000); /* ISS before the wrap */
	EXPECT_EQ(it.nonce, 1);
	CHECK(dccp_vec_next(&it, &r));
	EXPECT(r.hi == 100 && r.lo == 37 && r.len == 64 && r.state == DCCP_ACK_RECEIVED);
	CHECK(dccp_vec_next(&it, &r));
	EXPECT(r.hi == 36 && r.lo == 1 && r.state == DCCP_ACK_RECEIVED);
	CHECK(dccp_vec_next(&it, &r));
	EXPECT(r.hi == 0 && r.lo == 0 && r.state == DCCP_ACK_NOT_RECEIVED);
	CHECK(dccp_vec_next(&it, &r)); /* 2 packets before 0: wraps to 2^48 - 1 */
	EXPECT(r.hi == DCCP_SEQ_MASK && r.lo == DCCP_SEQ_MASK - 1 && r.state == DCCP_ACK_ECN_MARKED);
	EXPECT(!dccp_vec_next(&it, &r) && !it.clipped);
	/* the same vector against ISS = 10: the run reaching below it is cut at
	 * 10 and the iteration ends there (Linux 6.1 sends such vectors) */
	dccp_ackvec_iter(&it, &o, 100, 10);
	CHECK(dccp_vec_next(&it, &r));
	CHECK(dccp_vec_next(&it, &r));
	EXPECT(r.hi == 36 && r.lo == 10 && r.len == 27 && r.state == DCCP_ACK_RECEIVED);
	EXPECT(it.clipped && !dccp_vec_next(&it, &r));

	/* builder sizes: the smallest forms */
	static const struct {
		uint64_t ndp;
		unsigned len;
	} ndp[] = {
		{ 0, 3 }, { 255, 3 }, { 256, 4 }, { 65536, 5 }, { UINT64_C(1) << 40, 8 },
	};
	for (size_t i = 0; i < sizeof(ndp) / sizeof(ndp[0]); i++) {
		dccp_obuf_init(&b, area, sizeof(area));
		dccp_opt_put_ndp(&b, ndp[i].ndp);
		EXPECT_EQ(b.len, ndp[i].len);
		EXPECT_EQ(area[1], ndp[i].len);
	}
	static const struct {
		uint32_t el;
		unsigned echo, elapsed;
	} tl[] = {
		{ 0, 6, 4 },	 { 1, 8, 4 },	  { 49999, 8, 4 },
		{ 50000, 8, 6 }, { 65535, 8, 6 }, { 65536, 10, 6 },
	};
	for (size_t i = 0; i < sizeof(tl) / sizeof(tl[0]); i++) {
		dccp_obuf_init(&b, area, sizeof(area));
		dccp_opt_put_ts_echo(&b, 7, tl[i].el);
		EXPECT_EQ(b.len, tl[i].echo);
		dccp_obuf_init(&b, area, sizeof(area));
		dccp_opt_put_elapsed(&b, tl[i].el);
		EXPECT_EQ(b.len, tl[i].elapsed);
	}
	/* overflow is sticky and nothing is written past cap */
	dccp_obuf_init(&b, area, 7);
	dccp_opt_put_timestamp(&b, 1);
	dccp_opt_put_timestamp(&b, 2);
	dccp_opt_put(&b, DCCP_OPT_PADDING, NULL, 0);
	EXPECT(b.overflow && b.len == 6);
	/* a long vector is split into options of at most 253 bytes */
	uint8_t big[600];
	size_t nb = 0;
	CHECK(dccp_ackvec_rle(big, &nb, sizeof(big), DCCP_ACK_RECEIVED, 64 * 300));
	dccp_obuf_init(&b, area, sizeof(area));
	dccp_opt_put_vector(&b, DCCP_OPT_ACKVEC0, big, nb);
	EXPECT(!b.overflow && b.len == 255 + 49);
	EXPECT(!dccp_ackvec_rle(big, &nb, nb, DCCP_ACK_RECEIVED, 1));
}

static void test_rfc_examples(void)
{
	struct dccp_opts o;
	struct dccp_vec_iter it;
	struct dccp_run r;

	/* RFC 4340 §11.4: 0,192,3,64,5 with Acknowledgement Number 100 */
	const uint8_t av[] = { 38, 7, 0, 192, 3, 64, 5 };
	CHECK_EQ(parse_with(DCCP_ACK, av, sizeof(av), DCCP_PF_ESTABLISHED, &o, NULL), DCCP_OK);
	static const struct dccp_run want[] = {
		{ 100, 100, 1, 0 }, { 99, 99, 1, 3 }, { 98, 95, 4, 0 },
		{ 94, 94, 1, 1 },   { 93, 88, 6, 0 },
	};
	dccp_ackvec_iter(&it, &o, 100, 1);
	EXPECT_EQ(it.nonce, 0);
	for (size_t i = 0; i < 5; i++) {
		CHECK(dccp_vec_next(&it, &r));
		EXPECT(r.hi == want[i].hi && r.lo == want[i].lo && r.len == want[i].len &&
		       r.state == want[i].state);
	}
	EXPECT(!dccp_vec_next(&it, &r));

	/* RFC 4340 §11.7: Data Dropped 0,160,3,162 with Acknowledgement Number 100.
	 * (The RFC's prose says the last block covers "95, 94, and 93"; its Run
	 * Length 2 after the four packets 98-95 means 94, 93 and 92.) */
	const uint8_t dd[] = { 40, 6, 0, 160, 3, 162 };
	CHECK_EQ(parse_with(DCCP_ACK, dd, sizeof(dd), DCCP_PF_ESTABLISHED, &o, NULL), DCCP_OK);
	uint8_t ddv[8];
	size_t ndd = 0; /* the builder writes the same four blocks */
	CHECK(dccp_dropped_rle(ddv, &ndd, sizeof(ddv), DCCP_DROP_NONE, 1));
	CHECK(dccp_dropped_rle(ddv, &ndd, sizeof(ddv), 2, 1));
	CHECK(dccp_dropped_rle(ddv, &ndd, sizeof(ddv), DCCP_DROP_NONE, 4));
	CHECK(dccp_dropped_rle(ddv, &ndd, sizeof(ddv), 2, 3));
	EXPECT(ndd == 4 && memcmp(ddv, dd + 2, 4) == 0);
	ndd = 0; /* long runs split at 128 (Normal) and 16 (Drop) */
	CHECK(dccp_dropped_rle(ddv, &ndd, sizeof(ddv), DCCP_DROP_NONE, 129));
	CHECK(dccp_dropped_rle(ddv, &ndd, sizeof(ddv), 7, 17));
	EXPECT(ndd == 4 && ddv[0] == 127 && ddv[1] == 0 && ddv[2] == 0xff && ddv[3] == 0xf0);
	EXPECT(!dccp_dropped_rle(ddv, &ndd, sizeof(ddv), 8, 1));
	static const struct dccp_run wdd[] = {
		{ 100, 100, 1, DCCP_DROP_NONE },
		{ 99, 99, 1, 2 },
		{ 98, 95, 4, DCCP_DROP_NONE },
		{ 94, 92, 3, 2 },
	};
	dccp_dropped_iter(&it, &o, 100, 0);
	for (size_t i = 0; i < 4; i++) {
		CHECK(dccp_vec_next(&it, &r));
		EXPECT(r.hi == wdd[i].hi && r.lo == wdd[i].lo && r.len == wdd[i].len &&
		       r.state == wdd[i].state);
	}
	EXPECT(!dccp_vec_next(&it, &r));

	/* RFC 4342 §8.6.2 */
	const uint8_t lio[] = { 193, 39, 2, 0, 0, 10, 128, 0,	1, 0, 0, 10, 0,
				0,   8,	 0, 0, 5, 0,  0,   10,	0, 0, 8, 0,  0,
				1,   0,	 0, 8, 0, 0,  10,  128, 0, 0, 0, 0,  15 };
	CHECK_EQ(parse_with(DCCP_ACK, lio, sizeof(lio), DCCP_PF_ESTABLISHED, &o, NULL), DCCP_OK);
	struct dccp_loss_interval li[8];
	uint8_t skip;
	CHECK_EQ(dccp_loss_intervals(&o, li, 8, &skip), 4);
	EXPECT_EQ(skip, 2);
	static const struct dccp_loss_interval wli[] = {
		{ 10, 1, 10, true },
		{ 8, 5, 10, false },
		{ 8, 1, 8, false },
		{ 10, 0, 15, true },
	};
	for (int i = 0; i < 4; i++)
		EXPECT(li[i].lossless == wli[i].lossless && li[i].loss == wli[i].loss &&
		       li[i].data == wli[i].data && li[i].ecn_echo == wli[i].ecn_echo);
	/* and the builder writes exactly those bytes */
	uint8_t area[64];
	struct dccp_obuf b;
	dccp_obuf_init(&b, area, sizeof(area));
	dccp_opt_put_loss_intervals(&b, 2, wli, 4);
	EXPECT(b.len == sizeof(lio) && memcmp(area, lio, sizeof(lio)) == 0);

	/* CRC-32c check values (RFC 3720 B.4 / the "123456789" check) */
	EXPECT_EQ(dccp_crc32c("", 0), 0);
	EXPECT_EQ(dccp_crc32c("123456789", 9), 0xe3069283u);
	uint8_t zeros[32] = { 0 };
	EXPECT_EQ(dccp_crc32c(zeros, 32), 0x8a9136aau);
}

static void test_rejections(void)
{
	struct dccp_opts o;
	struct dccp_counters c = { 0 };

	/* length byte 1: this option and everything after it are ignored */
	const uint8_t len1[] = { 41, 1, 2, 3, 41, 6, 0, 0, 0, 9 };
	EXPECT_EQ(parse_with(DCCP_ACK, len1, sizeof(len1), 0, &o, &c), DCCP_OK);
	EXPECT(!o.has_ts && c.n[DCCP_DROP_OPT_LEN] == 1);
	/* length past the options area (the packet's Data Offset) */
	const uint8_t past[] = { 41, 6, 0, 0, 0, 9, 36, 200, 1 };
	EXPECT_EQ(parse_with(DCCP_ACK, past, sizeof(past), 0, &o, &c), DCCP_OK);
	EXPECT(o.has_ts && o.ts == 9 && c.n[DCCP_DROP_OPT_LEN] == 2 && o.n == 1);
	/* a truncated option at the very end */
	const uint8_t trunc[] = { 0, 0, 0, 41 };
	EXPECT_EQ(parse_with(DCCP_ACK, trunc, sizeof(trunc), 0, &o, &c), DCCP_OK);
	EXPECT_EQ(c.n[DCCP_DROP_OPT_LEN], 3);
	/* wrong sizes are ignored, the next option still counts */
	const uint8_t size[] = { 41, 5,	 1, 2,	 3, 44, 7, 1, 2,  3, 4, 5, 43, 3,
				 1,  42, 7, 0,	 0, 0,	0, 0, 37, 9, 1, 2, 3,  4,
				 5,  6,	 7, 192, 5, 1,	2, 3, 41, 6, 0, 0, 0,  1 };
	EXPECT_EQ(parse_with(DCCP_ACK, size, sizeof(size), 0, &o, &c), DCCP_OK);
	EXPECT(o.has_ts && o.ts == 1 && !o.has_data_csum && !o.has_elapsed && !o.has_ts_echo &&
	       !o.has_ndp && !o.has_loss_rate);
	EXPECT_EQ(c.n[DCCP_DROP_OPT_SIZE], 6);
	/* Mandatory last: Option Error */
	const uint8_t mlast[] = { 2, 0, 0, 1 };
	EXPECT_EQ(parse_with(DCCP_ACK, mlast, sizeof(mlast), 0, &o, &c), DCCP_DROP_OPT_MANDATORY);
	EXPECT(o.reset_code == DCCP_RESET_OPTION_ERROR && o.reset_data[0] == 1);
	/* Mandatory Mandatory: Option Error */
	const uint8_t mm[] = { 1, 1, 41, 6, 0, 0, 0, 1 };
	EXPECT_EQ(parse_with(DCCP_ACK, mm, sizeof(mm), 0, &o, &c), DCCP_DROP_OPT_MANDATORY);
	EXPECT_EQ(o.reset_code, DCCP_RESET_OPTION_ERROR);
	/* Mandatory before an option we do not know: Mandatory Error naming it */
	const uint8_t munk[] = { 1, 100, 4, 0xab, 0xcd };
	EXPECT_EQ(parse_with(DCCP_ACK, munk, sizeof(munk), 0, &o, &c), DCCP_DROP_OPT_MANDATORY);
	EXPECT(o.reset_code == DCCP_RESET_MANDATORY_ERROR && o.reset_data[0] == 100 &&
	       o.reset_data[1] == 0xab && o.reset_data[2] == 0xcd);
	EXPECT_EQ(c.n[DCCP_DROP_OPT_UNKNOWN], 1);
	/* Mandatory before a reserved one-byte option, or before a bad length */
	const uint8_t m3[] = { 1, 3 };
	EXPECT_EQ(parse_with(DCCP_ACK, m3, sizeof(m3), 0, &o, &c), DCCP_DROP_OPT_MANDATORY);
	EXPECT(o.reset_code == DCCP_RESET_MANDATORY_ERROR && o.reset_data[0] == 3);
	const uint8_t mlen[] = { 1, 41, 0 };
	EXPECT_EQ(parse_with(DCCP_ACK, mlen, sizeof(mlen), 0, &o, &c), DCCP_DROP_OPT_MANDATORY);
	EXPECT_EQ(o.reset_code, DCCP_RESET_MANDATORY_ERROR);
	/* Mandatory Padding is two Paddings; Mandatory before a known option is fine */
	const uint8_t mpad[] = { 1, 0, 1, 41, 6, 0, 0, 0, 5 };
	EXPECT_EQ(parse_with(DCCP_ACK, mpad, sizeof(mpad), 0, &o, &c), DCCP_OK);
	EXPECT(o.reset_code == 0 && o.n == 1 && o.opt[0].mandatory && o.ts == 5);
	/* on DCCP-Data: Mandatory and acknowledgement options are ignored, no Reset */
	const uint8_t ondata[] = { 1, 38, 3, 0, 32, 4, 1, 2, 41, 6, 0, 0, 0, 6 };
	memset(&c, 0, sizeof(c));
	EXPECT_EQ(parse_with(DCCP_DATA, ondata, sizeof(ondata), DCCP_PF_ESTABLISHED, &o, &c), DCCP_OK);
	EXPECT(o.n == 1 && o.ts == 6 && o.reset_code == 0);
	EXPECT_EQ(c.n[DCCP_DROP_OPT_ON_DATA], 3);
	/* Ack Vector before the connection is established, and on a Request */
	const uint8_t av[] = { 38, 3, 0 };
	memset(&c, 0, sizeof(c));
	EXPECT_EQ(parse_with(DCCP_ACK, av, sizeof(av), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && c.n[DCCP_DROP_OPT_EARLY] == 1);
	EXPECT_EQ(parse_with(DCCP_ACK, av, sizeof(av), DCCP_PF_ESTABLISHED, &o, &c), DCCP_OK);
	EXPECT_EQ(o.n, 1);
	EXPECT_EQ(parse_with(DCCP_REQUEST, av, sizeof(av), DCCP_PF_ESTABLISHED, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && c.n[DCCP_DROP_OPT_NO_ACKNO] == 1);
	/* Ack Vector State 2 is reserved */
	const uint8_t av2[] = { 39, 4, 0, 0x80 };
	EXPECT_EQ(parse_with(DCCP_ACK, av2, sizeof(av2), DCCP_PF_ESTABLISHED, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && c.n[DCCP_DROP_OPT_VALUE] == 1);
	/* Elapsed Time and Confirm need an Acknowledgement Number; Init Cookie not on Requests */
	const uint8_t noack[] = { 43, 4, 0, 1, 33, 3, 1, 36, 3, 9 };
	EXPECT_EQ(parse_with(DCCP_REQUEST, noack, sizeof(noack), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && c.n[DCCP_DROP_OPT_NO_ACKNO] == 3 && c.n[DCCP_DROP_OPT_EARLY] == 2);
	/* Loss Intervals: Skip Length > 3, and non-zero on a second option */
	const uint8_t lis[] = { 193, 12, 4, 0, 0, 1, 0,	  0,  1, 0, 0, 1, 193, 12, 0, 0, 0, 1,
				0,   0,	 1, 0, 0, 1, 193, 12, 1, 0, 0, 1, 0,   0,  1, 0, 0, 1 };
	EXPECT_EQ(parse_with(DCCP_ACK, lis, sizeof(lis), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == 1 && c.n[DCCP_DROP_OPT_VALUE] == 3);
	const uint8_t lisz[] = { 193, 11, 0, 0, 0, 1, 0, 0, 1, 0, 0 };
	EXPECT_EQ(parse_with(DCCP_ACK, lisz, sizeof(lisz), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && c.n[DCCP_DROP_OPT_SIZE] == 1);
	/* Change with no value */
	const uint8_t ch[] = { 32, 3, 1 };
	EXPECT_EQ(parse_with(DCCP_ACK, ch, sizeof(ch), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && c.n[DCCP_DROP_OPT_SIZE] == 2);
	/* more options than kept: counted, the first DCCP_OPTS_MAX kept */
	uint8_t many[6 * 70];
	for (int i = 0; i < 70; i++) {
		uint8_t t[6] = { 41, 6, 0, 0, 0, (uint8_t)i };
		memcpy(many + 6 * i, t, 6);
	}
	EXPECT_EQ(parse_with(DCCP_ACK, many, sizeof(many), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == DCCP_OPTS_MAX && o.ts == 69 && c.n[DCCP_DROP_OPT_TOO_MANY] == 70 - DCCP_OPTS_MAX);
	/* a Mandatory option past the ones kept cannot be processed: Mandatory Error */
	const uint8_t tail[] = { 1, 41, 6, 0, 0, 0, 1 };
	memcpy(many + 6 * DCCP_OPTS_MAX, tail, sizeof(tail));
	EXPECT_EQ(parse_with(DCCP_ACK, many, 6 * DCCP_OPTS_MAX + sizeof(tail), 0, &o, &c),
		  DCCP_DROP_OPT_MANDATORY);
	EXPECT(o.reset_code == DCCP_RESET_MANDATORY_ERROR && o.reset_data[0] == 41);
	/* DCCP-Listen: options ignored altogether (RFC 5596) */
	const uint8_t lst[] = { 1, 100, 2 };
	EXPECT_EQ(parse_with(DCCP_LISTEN, lst, sizeof(lst), 0, &o, &c), DCCP_OK);
	EXPECT(o.n == 0 && o.reset_code == 0);
}

int main(void)
{
	test_roundtrip();
	test_rfc_examples();
	test_rejections();
	return check_done("dccp_options");
}
