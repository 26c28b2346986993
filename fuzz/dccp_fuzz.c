/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: lib/dccp's packet and option parsers on arbitrary bytes.
 * The first input byte chooses the mode (tools/dccp_pcap writes seeds in
 * this format): bit 0 IPv6 pseudo-header, bit 1 connection established
 * (Ack Vectors parsed), bit 3 the rest is a DCCP-UDP datagram (UDP header
 * first).  The rest is a packet, allocated to the exact byte so that
 * AddressSanitizer sees any read past it.  Whatever the bytes:
 *   - parsing never reads outside the packet, and a parsed header's areas
 *     (options, data) lie inside it;
 *   - options and vectors stay inside the options area; iterators end;
 *   - a parsed packet rebuilt with dccp_build() parses back to the same
 *     fields and bytes, with a correct checksum over the pseudo-header, and
 *     survives DCCP-UDP wrapping and checking;
 *   - 24-bit extension and the validity rules give consistent answers.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target dccp_fuzz
 *   build-fuzz/fuzz/dccp_fuzz -max_total_time=300 fuzz/corpus/dccp
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dccp/feature.h"
#include "dccp/options.h"
#include "dccp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                         \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "dccp_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                           \
		}                                                                          \
	} while (0)

static void check_options(const uint8_t *pkt, const struct dccp_hdr *h, unsigned flags,
			  struct dccp_counters *c)
{
	struct dccp_opts o;
	enum dccp_drop e = dccp_opts_parse(h, pkt, flags, &o, c);
	const uint8_t *lo = pkt + h->opt_off, *hi = lo + h->opt_len;

	REQUIRE(o.n <= DCCP_OPTS_MAX);
	REQUIRE(e == DCCP_OK ? o.reset_code == 0
			     : e == DCCP_DROP_OPT_MANDATORY &&
				(o.reset_code == DCCP_RESET_OPTION_ERROR ||
				 o.reset_code == DCCP_RESET_MANDATORY_ERROR));
	for (unsigned i = 0; i < o.n; i++) {
		const struct dccp_opt *op = &o.opt[i];
		REQUIRE(op->type >= 32 && op->data >= lo + 2 && op->data + op->len <= hi);
		if (op->type >= DCCP_OPT_CHANGE_L && op->type <= DCCP_OPT_CONFIRM_R) {
			struct dccp_feat_opt f;
			if (dccp_feat_decode(op, &f, c) != DCCP_OK)
				continue;
			const uint8_t mine[] = { 3, 2 };
			uint8_t v;
			if (f.prefs && dccp_feat_reconcile(mine, 2, f.prefs, f.nprefs, &v))
				REQUIRE(v == 3 || v == 2);
			(void)dccp_feat_confirm_ok(&f, mine, 2, (h->seq & 1) != 0, 2);
			(void)dccp_feat_in_order(f.type, h->seq, h->has_ack, h->ack, h->seq - 1, h->ack);
		}
	}
	/* vectors: runs of 1..64 (or 128) packets, newest first, ending */
	uint64_t lowest = dccp_seq_sub(h->ack, 1u << 20);
	struct dccp_vec_iter it;
	struct dccp_run r;
	unsigned runs = 0;
	dccp_ackvec_iter(&it, &o, h->ack, lowest);
	while (dccp_vec_next(&it, &r)) {
		REQUIRE(r.len >= 1 && r.len <= 64 && r.state != 2);
		REQUIRE(dccp_seq_sub(r.hi, r.lo) == r.len - 1u);
		REQUIRE(++runs <= DCCP_MAX_HDR);
	}
	runs = 0;
	dccp_dropped_iter(&it, &o, h->ack, lowest);
	while (dccp_vec_next(&it, &r)) {
		REQUIRE(r.len >= 1 && r.len <= 128);
		REQUIRE(++runs <= DCCP_MAX_HDR);
	}
	struct dccp_loss_interval li[32];
	uint8_t skip;
	REQUIRE(dccp_loss_intervals(&o, li, 32, &skip) <= 32 && skip <= 3);
}

/* Rebuild a parsed packet and parse it back: same fields, same bytes. */
static void check_rebuild(const uint8_t *pkt, const struct dccp_hdr *h, const struct dccp_pseudo *ph)
{
	static uint8_t out[65536 + 8];
	ssize_t n = dccp_build(out + 8, sizeof(out) - 8, h, pkt + h->opt_off, h->opt_len,
			       pkt + h->data_off, h->data_len, ph);
	REQUIRE(n == (ssize_t)(h->data_off + h->data_len));
	struct dccp_hdr g;
	REQUIRE(dccp_parse(out + 8, (size_t)n, ph, &g, NULL) == DCCP_OK);
	REQUIRE(g.type == h->type && g.x == h->x && g.seq == h->seq && g.sport == h->sport &&
		g.dport == h->dport && g.ccval == h->ccval && g.cscov == h->cscov && g.doff == h->doff &&
		g.has_ack == h->has_ack && g.ack == h->ack && g.service == h->service &&
		g.reset_code == h->reset_code && memcmp(g.reset_data, h->reset_data, 3) == 0 &&
		g.opt_len == h->opt_len && g.data_len == h->data_len);
	REQUIRE(memcmp(out + 8 + g.opt_off, pkt + h->opt_off, h->opt_len) == 0);
	REQUIRE(memcmp(out + 8 + g.data_off, pkt + h->data_off, h->data_len) == 0);
	/* and as DCCP-UDP */
	dccp_udp_wrap(out, 1234, DCCP_UDP_PORT, (size_t)n, ph);
	REQUIRE(dccp_udp_check(out, (size_t)n + 8, ph, NULL) == n);
}

static void check_seq(const struct dccp_hdr *h)
{
	/* the extension keeps the low 24 bits and lands within 2^23 of ref */
	uint64_t ext = dccp_seq_extend((uint32_t)h->seq, h->ack);
	REQUIRE((ext & 0xffffff) == (h->seq & 0xffffff));
	int64_t d = dccp_seq_delta(ext, h->ack);
	REQUIRE(d >= -(1 << 23) && d <= (1 << 23));

	/* a consistent state: ISR <= GSR and ISS <= GSS */
	struct dccp_seqstate s = { .isr = dccp_seq_sub(h->ack, h->reset_data[0]),
				   .iss = dccp_seq_sub(h->seq, h->reset_data[1]),
				   .gsr = h->ack,
				   .gss = h->seq,
				   .gar = dccp_seq_sub(h->seq, 7),
				   .w_rx = 32 + (h->service & 0xffff),
				   .w_tx = 32 + (h->service >> 16),
				   .initial = h->ccval & 1 };
	struct dccp_windows w = dccp_windows(&s);
	REQUIRE(dccp_seq_between(s.gsr, w.swl, w.swh) && dccp_seq_between(s.gss, w.awl, w.awh));
	for (int m = DCCP_SEQCHK_NORMAL; m <= DCCP_SEQCHK_STRICT; m++) {
		enum dccp_seqvalid v = dccp_seq_valid(&s, h, (enum dccp_seqcheck)m, h->cscov & 1);
		uint64_t ack;
		if (v != DCCP_SEQ_VALID && dccp_invalid_response(&s, h, &ack))
			REQUIRE(ack <= DCCP_SEQ_MASK);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	uint8_t mode = data[0];
	size_t len = size - 1;
	uint8_t *pkt = malloc(len ? len : 1);
	struct dccp_pseudo ph = { .family = mode & 1 ? AF_INET6 : AF_INET };
	struct dccp_counters c = { 0 };
	struct dccp_hdr h;

	if (!pkt)
		abort();
	memcpy(pkt, data + 1, len);
	/* the addresses tools/dccp_pcap uses, so its seeds' checksums hold */
	if (ph.family == AF_INET) {
		memcpy(ph.src, (const uint8_t[]){ 10, 0, 0, 1 }, 4);
		memcpy(ph.dst, (const uint8_t[]){ 10, 0, 0, 2 }, 4);
	} else {
		ph.src[0] = ph.dst[0] = 0xfd;
		ph.src[15] = 1;
		ph.dst[15] = 2;
	}
	const uint8_t *p = pkt;
	if (mode & 8) { /* DCCP-UDP: the UDP rules, then the inner packet */
		ssize_t n = dccp_udp_check(pkt, len, &ph, &c);
		REQUIRE(n < 0 || (size_t)n + 8 <= len);
		p = len >= 8 ? pkt + 8 : pkt;
		len = n >= 0 ? (size_t)n : len >= 8 ? len - 8 : 0;
	}
	enum dccp_drop e = dccp_parse(p, len, NULL, &h, &c);
	if (e == DCCP_OK) {
		REQUIRE(h.type < DCCP_TYPE_COUNT && h.fixed_len == dccp_fixed_len(h.type, h.x));
		REQUIRE(h.opt_off + h.opt_len == h.data_off && h.data_off + h.data_len == len);
		REQUIRE(h.opt_len % 4 == 0 && h.data_off <= DCCP_MAX_HDR);
		check_options(p, &h, mode & 2 ? DCCP_PF_ESTABLISHED : 0, &c);
		check_rebuild(p, &h, &ph);
		check_seq(&h);
		/* with the checksum over ph: valid only if the field is right */
		struct dccp_hdr g;
		size_t cov = dccp_csum_cov(h.cscov, h.data_off, len);
		REQUIRE(cov >= h.data_off && cov <= len);
		bool right = dccp_csum(p, len, cov, &ph) == h.csum;
		REQUIRE((dccp_parse(p, len, &ph, &g, &c) == DCCP_OK) == right);
	} else {
		REQUIRE(e > DCCP_OK && e <= DCCP_DROP_CHECKSUM && c.n[e] == 1);
	}
	for (int i = 0; i < DCCP_DROP_COUNT; i++)
		(void)dccp_drop_name((enum dccp_drop)i);
	free(pkt);
	return 0;
}
