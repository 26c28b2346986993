/* SPDX-License-Identifier: MIT */
/*
 * lib/dccp/wire.c: every packet type built and parsed back, checksums over
 * the IPv4 and IPv6 pseudo-headers with CsCov, each malformed-packet reason,
 * DCCP-UDP's UDP checksum, and the sequence arithmetic and validity rules of
 * RFC 4340 §7.
 */
#include <arpa/inet.h>
#include <sys/socket.h>

#include "check.h"
#include "dccp/wire.h"

static struct dccp_pseudo ph4, ph6;

/* Reference RFC 1071 checksum written independently of wire.c: the sum of
 * the pseudo-header and the covered bytes (checksum field included) must
 * fold to 0xffff. */
static int ref_ok(const uint8_t *p, size_t len, size_t cov, const struct dccp_pseudo *ph)
{
	uint32_t s = 0;
	uint8_t buf[40];
	size_t n;

	if (ph->family == AF_INET) {
		memcpy(buf, ph->src, 4), memcpy(buf + 4, ph->dst, 4);
		buf[8] = 0, buf[9] = 33, buf[10] = (uint8_t)(len >> 8), buf[11] = (uint8_t)len;
		n = 12;
	} else {
		memcpy(buf, ph->src, 16), memcpy(buf + 16, ph->dst, 16);
		buf[32] = buf[33] = 0, buf[34] = (uint8_t)(len >> 8), buf[35] = (uint8_t)len;
		buf[36] = buf[37] = buf[38] = 0, buf[39] = 33;
		n = 40;
	}
	for (size_t i = 0; i < n; i += 2)
		s += (uint32_t)buf[i] << 8 | buf[i + 1];
	for (size_t i = 0; i < cov; i += 2)
		s += (uint32_t)p[i] << 8 | (i + 1 < cov ? p[i + 1] : 0);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

static void test_types(void)
{
	static const struct {
		uint8_t type;
		bool x;
		size_t fixed;
	} t[] = {
		{ DCCP_REQUEST, 1, 20 }, { DCCP_RESPONSE, 1, 28 }, { DCCP_DATA, 1, 16 },
		{ DCCP_DATA, 0, 12 },	 { DCCP_ACK, 1, 24 },	   { DCCP_ACK, 0, 16 },
		{ DCCP_DATAACK, 1, 24 }, { DCCP_DATAACK, 0, 16 },  { DCCP_CLOSEREQ, 1, 24 },
		{ DCCP_CLOSE, 1, 24 },	 { DCCP_RESET, 1, 28 },	   { DCCP_SYNC, 1, 24 },
		{ DCCP_SYNCACK, 1, 24 }, { DCCP_LISTEN, 1, 20 },
	};
	const uint8_t opts[8] = { 41, 6, 1, 2, 3, 4, 0, 0 }; /* Timestamp, Padding x2 */
	const char data[] = "hello, dccp";

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		for (int fam = 0; fam < 2; fam++) {
			const struct dccp_pseudo *ph = fam ? &ph6 : &ph4;
			struct dccp_hdr h = { .sport = 5001,
					      .dport = 6001,
					      .ccval = 9,
					      .type = t[i].type,
					      .x = t[i].x,
					      .service = 0x47433031,
					      .reset_code = 5,
					      .reset_data = { 41, 7, 8 } };
			uint64_t lim = t[i].x ? DCCP_SEQ_MASK : 0xffffff;
			h.seq = lim - i;
			h.ack = lim / 3 + i;
			uint8_t pkt[256];
			ssize_t n = dccp_build(pkt, sizeof(pkt), &h, opts, sizeof(opts), data,
					       sizeof(data), ph);
			CHECK_EQ(n, (ssize_t)(t[i].fixed + sizeof(opts) + sizeof(data)));
			CHECK_EQ(dccp_fixed_len(t[i].type, t[i].x), t[i].fixed);
			CHECK(ref_ok(pkt, (size_t)n, (size_t)n, ph));
			struct dccp_hdr g;
			struct dccp_counters c = { 0 };
			CHECK_EQ(dccp_parse(pkt, (size_t)n, ph, &g, &c), DCCP_OK);
			EXPECT_EQ(g.sport, 5001);
			EXPECT_EQ(g.dport, 6001);
			EXPECT_EQ(g.ccval, 9);
			EXPECT_EQ(g.type, t[i].type);
			EXPECT_EQ(g.x, t[i].x);
			EXPECT_EQ(g.seq, h.seq);
			EXPECT_EQ(g.has_ack, dccp_type_has_ack(t[i].type));
			if (g.has_ack)
				EXPECT_EQ(g.ack, h.ack);
			if (t[i].type == DCCP_REQUEST || t[i].type == DCCP_RESPONSE ||
			    t[i].type == DCCP_LISTEN)
				EXPECT_EQ(g.service, 0x47433031);
			if (t[i].type == DCCP_RESET) {
				EXPECT_EQ(g.reset_code, 5);
				EXPECT(memcmp(g.reset_data, h.reset_data, 3) == 0);
			}
			EXPECT_EQ(g.doff * 4, t[i].fixed + sizeof(opts));
			EXPECT_EQ(g.opt_off, t[i].fixed);
			EXPECT_EQ(g.opt_len, sizeof(opts));
			EXPECT_EQ(g.data_len, sizeof(data));
			EXPECT(memcmp(pkt + g.data_off, data, sizeof(data)) == 0);
			for (int e = 0; e < DCCP_DROP_COUNT; e++)
				EXPECT_EQ(c.n[e], 0);
		}
	}
}

static void test_checksum(void)
{
	uint8_t data[64], pkt[256];
	fill(data, sizeof(data), 3);

	for (uint8_t cscov = 0; cscov <= 15; cscov++) {
		struct dccp_hdr h = {
			.sport = 1, .dport = 2, .type = DCCP_DATAACK, .x = 1, .cscov = cscov, .seq = 77, .ack = 66
		};
		ssize_t n = dccp_build(pkt, sizeof(pkt), &h, NULL, 0, data, 41, &ph4);
		if ((cscov ? (cscov - 1) * 4 : 0) > 41) { /* CsCov past the data */
			CHECK_EQ(n, -EINVAL);
			continue;
		}
		CHECK(n == 24 + 41);
		size_t cov = dccp_csum_cov(cscov, 24, (size_t)n);
		EXPECT_EQ(cov, cscov ? 24 + (cscov - 1) * 4u : 24 + 41u);
		CHECK(ref_ok(pkt, (size_t)n, cov, &ph4));
		/* every covered bit matters; uncovered data does not */
		for (size_t bit = 0; bit < (size_t)n * 8; bit += 7) {
			struct dccp_hdr g;
			struct dccp_counters c = { 0 };
			pkt[bit / 8] ^= (uint8_t)(1 << (bit % 8));
			enum dccp_drop e = dccp_parse(pkt, (size_t)n, &ph4, &g, &c);
			pkt[bit / 8] ^= (uint8_t)(1 << (bit % 8));
			if (bit / 8 >= cov)
				EXPECT_EQ(e, DCCP_OK);
			else if (bit / 8 >= 4 && bit / 8 <= 8) /* Data Offset, CsCov, Type: other checks may fire first */
				EXPECT(e != DCCP_OK);
			else
				EXPECT_EQ(e, DCCP_DROP_CHECKSUM);
		}
	}
	/* the pseudo-header is part of it: another address fails */
	struct dccp_hdr h = { .sport = 1, .dport = 2, .type = DCCP_ACK, .x = 1, .seq = 1, .ack = 1 };
	ssize_t n = dccp_build(pkt, sizeof(pkt), &h, NULL, 0, NULL, 0, &ph6);
	struct dccp_pseudo other = ph6;
	other.dst[15] ^= 1;
	struct dccp_hdr g;
	CHECK_EQ(dccp_parse(pkt, (size_t)n, &ph6, &g, NULL), DCCP_OK);
	CHECK_EQ(dccp_parse(pkt, (size_t)n, &other, &g, NULL), DCCP_DROP_CHECKSUM);
	CHECK_EQ(dccp_parse(pkt, (size_t)n, &ph4, &g, NULL), DCCP_DROP_CHECKSUM);
}

static void test_malformed(void)
{
	uint8_t pkt[128];
	struct dccp_hdr h = { .sport = 1, .dport = 2, .type = DCCP_ACK, .x = 1, .seq = 5, .ack = 4 };
	struct dccp_counters c = { 0 };
	struct dccp_hdr g;
	ssize_t n = dccp_build(pkt, sizeof(pkt), &h, NULL, 0, "abcdefgh", 8, NULL);
	CHECK(n == 32);

	CHECK_EQ(dccp_parse(pkt, 11, NULL, &g, &c), DCCP_DROP_SHORT);
	CHECK_EQ(dccp_parse(pkt, 0, NULL, &g, &c), DCCP_DROP_SHORT);
	pkt[8] = 11 << 1 | 1; /* reserved type */
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_DROP_TYPE_RESERVED);
	pkt[8] = DCCP_SYNC << 1; /* X=0 on a Sync */
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_DROP_SHORT_SEQNO);
	pkt[8] = DCCP_REQUEST << 1;
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_DROP_SHORT_SEQNO);
	pkt[8] = DCCP_ACK << 1 | 1;
	pkt[4] = 5; /* 20 bytes < 24 for an Ack with X=1 */
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_DROP_DOFF_SMALL);
	pkt[4] = 9; /* 36 bytes > 32 */
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_DROP_DOFF_LARGE);
	pkt[4] = 6;
	pkt[5] = 4; /* CsCov 4: 12 bytes of data, only 8 */
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_DROP_CSCOV);
	pkt[5] = 3; /* 8 bytes: fine */
	CHECK_EQ(dccp_parse(pkt, (size_t)n, NULL, &g, &c), DCCP_OK);
	CHECK_EQ(dccp_parse(pkt, (size_t)n, &ph4, &g, &c), DCCP_DROP_CHECKSUM); /* built without one */
	EXPECT_EQ(c.n[DCCP_DROP_SHORT], 2);
	EXPECT_EQ(c.n[DCCP_DROP_TYPE_RESERVED], 1);
	EXPECT_EQ(c.n[DCCP_DROP_SHORT_SEQNO], 2);
	EXPECT_EQ(c.n[DCCP_DROP_DOFF_SMALL], 1);
	EXPECT_EQ(c.n[DCCP_DROP_DOFF_LARGE], 1);
	EXPECT_EQ(c.n[DCCP_DROP_CSCOV], 1);
	EXPECT_EQ(c.n[DCCP_DROP_CHECKSUM], 1);
	for (int e = 0; e < DCCP_DROP_COUNT; e++)
		EXPECT(strcmp(dccp_drop_name((enum dccp_drop)e), "?") != 0);

	/* the builder refuses what the parser would */
	struct dccp_hdr b = { .type = DCCP_REQUEST, .x = 0 };
	CHECK_EQ(dccp_build(pkt, sizeof(pkt), &b, NULL, 0, NULL, 0, NULL), -EINVAL);
	b = (struct dccp_hdr){ .type = DCCP_DATA, .x = 0, .seq = 1u << 24 };
	CHECK_EQ(dccp_build(pkt, sizeof(pkt), &b, NULL, 0, NULL, 0, NULL), -EINVAL);
	b = (struct dccp_hdr){ .type = DCCP_DATA, .x = 1, .seq = 1 };
	CHECK_EQ(dccp_build(pkt, sizeof(pkt), &b, (const uint8_t *)"\0\0\0", 3, NULL, 0, NULL), -EINVAL);
	CHECK_EQ(dccp_build(pkt, 15, &b, NULL, 0, NULL, 0, NULL), -EMSGSIZE);
	b.type = 11;
	CHECK_EQ(dccp_build(pkt, sizeof(pkt), &b, NULL, 0, NULL, 0, NULL), -EINVAL);
	/* the header (Data Offset: 8 bits of words) ends at 1020 bytes */
	static uint8_t big[2048], zero[1008];
	b.type = DCCP_DATA;
	CHECK_EQ(dccp_build(big, sizeof(big), &b, zero, 1004, NULL, 0, NULL), 1020);
	CHECK_EQ(dccp_parse(big, 1020, NULL, &g, NULL), DCCP_OK);
	EXPECT(g.doff == 255 && g.opt_len == 1004 && g.data_len == 0);
	CHECK_EQ(dccp_build(big, sizeof(big), &b, zero, 1008, NULL, 0, NULL), -EMSGSIZE);
}

static void test_udp(void)
{
	uint8_t dgram[128];
	struct dccp_hdr h = {
		.sport = 5001, .dport = 5002, .type = DCCP_REQUEST, .x = 1, .seq = 9, .service = 42
	};
	ssize_t n = dccp_build(dgram + 8, sizeof(dgram) - 8, &h, NULL, 0, "x", 1, NULL);
	CHECK(n == 21);
	EXPECT(dgram[8 + 6] == 0 && dgram[8 + 7] == 0); /* RFC 6773: DCCP checksum sent as 0 */
	dccp_udp_wrap(dgram, 40000, DCCP_UDP_PORT, (size_t)n, &ph4);
	struct dccp_counters c = { 0 };
	CHECK_EQ(dccp_udp_check(dgram, (size_t)n + 8, &ph4, &c), n);
	struct dccp_hdr g;
	CHECK_EQ(dccp_parse(dgram + 8, (size_t)n, NULL, &g, &c), DCCP_OK);
	EXPECT_EQ(g.service, 42);
	/* a flipped bit anywhere in the datagram, the pseudo-header, or a
	 * zero checksum, or a bad UDP Length: dropped */
	dgram[20] ^= 0x10;
	EXPECT_EQ(dccp_udp_check(dgram, (size_t)n + 8, &ph4, &c), -1);
	dgram[20] ^= 0x10;
	EXPECT_EQ(dccp_udp_check(dgram, (size_t)n + 8, &ph6, &c), -1);
	uint8_t z[2] = { dgram[6], dgram[7] };
	dgram[6] = dgram[7] = 0;
	EXPECT_EQ(dccp_udp_check(dgram, (size_t)n + 8, &ph4, &c), -1);
	dgram[6] = z[0], dgram[7] = z[1];
	EXPECT_EQ(dccp_udp_check(dgram, (size_t)n + 7, &ph4, &c), -1); /* Length past the datagram */
	EXPECT_EQ(dccp_udp_check(dgram, 7, &ph4, &c), -1);
	EXPECT_EQ(c.n[DCCP_DROP_UDP], 5);
	/* UDP Length 19 < 8 + 12 */
	uint8_t small[19] = { 0 };
	dccp_udp_wrap(small, 1, 2, 11, &ph6);
	EXPECT_EQ(dccp_udp_check(small, sizeof(small), &ph6, &c), -1);
	/* IPv6, with the checksum right */
	dccp_udp_wrap(dgram, 40000, DCCP_UDP_PORT, (size_t)n, &ph6);
	EXPECT_EQ(dccp_udp_check(dgram, (size_t)n + 8, &ph6, &c), n);
}

static void test_seq(void)
{
	const uint64_t M = DCCP_SEQ_MASK;

	EXPECT_EQ(dccp_seq_add(M, 1), 0);
	EXPECT_EQ(dccp_seq_add(0, -1), M);
	EXPECT_EQ(dccp_seq_sub(2, M), 3);
	EXPECT_EQ(dccp_seq_delta(2, M), 3);
	EXPECT_EQ(dccp_seq_delta(M, 2), -3);
	EXPECT(dccp_seq_before(M, 2));
	EXPECT(dccp_seq_after(2, M));
	EXPECT(!dccp_seq_before(5, 5) && !dccp_seq_after(5, 5));
	EXPECT(dccp_seq_between(1, M - 3, 4));
	EXPECT(!dccp_seq_between(5, M - 3, 4));
	EXPECT(dccp_seq_between(M - 3, M - 3, 4));
	/* half the space away: 2^47 is "before" (delta in [-2^47, 2^47)) */
	EXPECT(dccp_seq_before(UINT64_C(1) << 47, 0));

	/* §7.6 extension */
	EXPECT_EQ(dccp_seq_extend(0x000002, UINT64_C(0x000001fffffe)), UINT64_C(0x000002000002));
	EXPECT_EQ(dccp_seq_extend(0xfffffe, UINT64_C(0x000002000001)), UINT64_C(0x000001fffffe));
	EXPECT_EQ(dccp_seq_extend(0xffffff, 0), M);
	EXPECT_EQ(dccp_seq_extend(0x000000, M), 0);
	EXPECT_EQ(dccp_seq_extend(0x123456, UINT64_C(0xabcdef123450)), UINT64_C(0xabcdef123456));
	EXPECT_EQ(dccp_seq_extend(0x123450, UINT64_C(0xabcdef123456)), UINT64_C(0xabcdef123450));
}

static void test_windows(void)
{
	struct dccp_seqstate s = {
		.isr = 900, .iss = 5000, .gsr = 1000, .gss = 5200, .gar = 5100, .w_rx = 100, .w_tx = 101
	};
	struct dccp_windows w = dccp_windows(&s);
	EXPECT_EQ(w.swl, 1000 + 1 - 25);
	EXPECT_EQ(w.swh, 1000 + 75);
	EXPECT_EQ(w.awl, 5200 + 1 - 101);
	EXPECT_EQ(w.awh, 5200);
	s.w_rx = 101; /* floor(W/4) = 25, ceil(3W/4) = 76 */
	w = dccp_windows(&s);
	EXPECT_EQ(w.swl, 976);
	EXPECT_EQ(w.swh, 1076);
	/* beginning of the connection: not below ISR/ISS */
	s.initial = true;
	s.isr = 990;
	s.gss = 5010;
	w = dccp_windows(&s);
	EXPECT_EQ(w.swl, 990);
	EXPECT_EQ(w.awl, 5000);
	/* a long-lived connection wraps: no clamp */
	s = (struct dccp_seqstate){ .isr = 10, .iss = 10, .gsr = 2, .gss = 3, .w_rx = 100, .w_tx = 100 };
	w = dccp_windows(&s);
	EXPECT_EQ(w.swl, DCCP_SEQ_MASK - 21);
	EXPECT_EQ(w.awl, DCCP_SEQ_MASK - 95);
}

static enum dccp_seqvalid valid(const struct dccp_seqstate *s, uint8_t type, uint64_t seq,
				uint64_t ack, enum dccp_seqcheck mode)
{
	struct dccp_hdr h = { .type = type,
			      .x = 1,
			      .seq = seq & DCCP_SEQ_MASK,
			      .ack = ack & DCCP_SEQ_MASK,
			      .has_ack = dccp_type_has_ack(type) };
	return dccp_seq_valid(s, &h, mode, false);
}

static void test_validity(void)
{
	/* SWL 976, SWH 1075, AWL 5100, AWH 5200, GAR 5150 */
	struct dccp_seqstate s = {
		.isr = 1, .iss = 1, .gsr = 1000, .gss = 5200, .gar = 5150, .w_rx = 100, .w_tx = 101
	};
	const enum dccp_seqcheck N = DCCP_SEQCHK_NORMAL, A = DCCP_SEQCHK_ACTIVE, S = DCCP_SEQCHK_STRICT;

	for (uint8_t t = DCCP_REQUEST; t <= DCCP_DATAACK; t++) {
		EXPECT_EQ(valid(&s, t, 976, 5100, N), DCCP_SEQ_VALID);
		EXPECT_EQ(valid(&s, t, 1075, 5200, N), DCCP_SEQ_VALID);
		EXPECT_EQ(valid(&s, t, 975, 5150, N), DCCP_SEQ_BAD_SEQNO);
		EXPECT_EQ(valid(&s, t, 1076, 5150, N), DCCP_SEQ_BAD_SEQNO);
		bool acks = t != DCCP_REQUEST && t != DCCP_DATA;
		EXPECT_EQ(valid(&s, t, 1000, 5099, N), acks ? DCCP_SEQ_BAD_ACKNO : DCCP_SEQ_VALID);
		EXPECT_EQ(valid(&s, t, 1000, 5201, N), acks ? DCCP_SEQ_BAD_ACKNO : DCCP_SEQ_VALID);
	}
	/* Request/Response seqnos are not checked in LISTEN/REQUEST */
	struct dccp_hdr rq = { .type = DCCP_REQUEST, .x = 1, .seq = 123456789 };
	EXPECT_EQ(dccp_seq_valid(&s, &rq, N, true), DCCP_SEQ_VALID);
	EXPECT_EQ(dccp_seq_valid(&s, &rq, N, false), DCCP_SEQ_BAD_SEQNO);
	for (uint8_t t = DCCP_CLOSEREQ; t <= DCCP_RESET; t++) {
		EXPECT_EQ(valid(&s, t, 1000, 5150, N), DCCP_SEQ_BAD_SEQNO); /* seqno == GSR */
		EXPECT_EQ(valid(&s, t, 1001, 5150, N), DCCP_SEQ_VALID);
		EXPECT_EQ(valid(&s, t, 1075, 5200, N), DCCP_SEQ_VALID);
		EXPECT_EQ(valid(&s, t, 1076, 5150, N), DCCP_SEQ_BAD_SEQNO);
		EXPECT_EQ(valid(&s, t, 1001, 5149, N), DCCP_SEQ_BAD_ACKNO); /* below GAR */
		EXPECT_EQ(valid(&s, t, 1002, 5150, S), DCCP_SEQ_BAD_SEQNO); /* experimental == GSR + 1 */
		EXPECT_EQ(valid(&s, t, 1001, 5150, S), DCCP_SEQ_VALID);
	}
	for (uint8_t t = DCCP_SYNC; t <= DCCP_SYNCACK; t++) {
		EXPECT_EQ(valid(&s, t, 1000 + 1000000, 5150, N), DCCP_SEQ_VALID); /* SWL <= seqno */
		EXPECT_EQ(valid(&s, t, 1000 + 1000000, 5150, A), DCCP_SEQ_BAD_SEQNO);
		EXPECT_EQ(valid(&s, t, 975, 5150, N), DCCP_SEQ_BAD_SEQNO);
		EXPECT_EQ(valid(&s, t, 1000, 5201, N), DCCP_SEQ_BAD_ACKNO);
	}
	EXPECT_EQ(valid(&s, DCCP_LISTEN, 0, 0, A), DCCP_SEQ_VALID);
	/* 24-bit numbers are extended against GSR/GSS */
	struct dccp_hdr sh = { .type = DCCP_ACK, .x = 0, .seq = 1010, .ack = 5190, .has_ack = true };
	EXPECT_EQ(dccp_seq_valid(&s, &sh, N, false), DCCP_SEQ_VALID);
	sh.seq = 0xffffff & (1000 + 0x800000); /* far away in 24-bit space */
	EXPECT_EQ(dccp_seq_valid(&s, &sh, N, false), DCCP_SEQ_BAD_SEQNO);

	/* §7.5.4 answers */
	uint64_t ack = 0;
	struct dccp_hdr p = { .type = DCCP_RESET, .x = 1, .seq = 99999 };
	EXPECT(dccp_invalid_response(&s, &p, &ack) && ack == 1000);
	p.type = DCCP_DATAACK;
	EXPECT(dccp_invalid_response(&s, &p, &ack) && ack == 99999);
	p.type = DCCP_SYNC;
	EXPECT(!dccp_invalid_response(&s, &p, &ack));
	p.type = DCCP_SYNCACK;
	EXPECT(!dccp_invalid_response(&s, &p, &ack));

	struct dccp_sync_limit l = { 0 };
	uint64_t t0 = 5000000000ull;
	for (int i = 0; i < DCCP_SYNC_RATE; i++)
		EXPECT(dccp_sync_allow(&l, t0 + (uint64_t)i * 1000));
	EXPECT(!dccp_sync_allow(&l, t0 + 999999999ull));
	EXPECT(dccp_sync_allow(&l, t0 + 1000000000ull));
	/* a sliding window: 8 more only as the old ones age, never 9 in a second */
	EXPECT(!dccp_sync_allow(&l, t0 + 1000000999ull));
	EXPECT(dccp_sync_allow(&l, t0 + 1000001000ull));
	uint64_t sent[64];
	unsigned ns = 0;
	for (uint64_t t = t0 + 2000000000ull; t < t0 + 6000000000ull; t += 7000000ull)
		if (dccp_sync_allow(&l, t) && ns < 64)
			sent[ns++] = t;
	EXPECT(ns >= 4 * DCCP_SYNC_RATE - 1);
	for (unsigned i = DCCP_SYNC_RATE; i < ns; i++)
		EXPECT(sent[i] - sent[i - DCCP_SYNC_RATE] >= 1000000000ull);
}

int main(void)
{
	ph4.family = AF_INET;
	inet_pton(AF_INET, "10.1.2.3", ph4.src);
	inet_pton(AF_INET, "10.9.8.7", ph4.dst);
	ph6.family = AF_INET6;
	inet_pton(AF_INET6, "fd00::1:2", ph6.src);
	inet_pton(AF_INET6, "fd00::ab:cdef", ph6.dst);
	test_types();
	test_checksum();
	test_malformed();
	test_udp();
	test_seq();
	test_windows();
	test_validity();
	return check_done("dccp_wire");
}
