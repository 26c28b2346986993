/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: LTP's receive window (lib/lms/ltp_window.c) driven by
 * arbitrary sequences of datagrams, heartbeats, timer runs and deliveries, as
 * a hostile or broken sender could cause.  A tiny window (16 slots) and 4
 * ranges so that every bound is hit.  What must hold:
 *   - the window never holds more ranges than max_ranges, and every range
 *     and every NAK pair lies inside the window;
 *   - a NAK has 1..64 pairs, each lo <= hi (as 32-bit serial numbers);
 *   - in order: DATA and LOSS come in strictly increasing sequence, each
 *     number once; unordered: each DATA number once;
 *   - delivered data is what was put for that number; END comes at most once.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target ltp_window_fuzz
 *   build-fuzz/fuzz/ltp_window_fuzz -max_total_time=300 fuzz/corpus/ltp_window
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lms/ltp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                               \
	do {                                                                                     \
		if (!(c)) {                                                                      \
			fprintf(stderr, "ltp_window_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

#define NSLOTS 16
#define MAX_RANGES 4

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gc_ltp_stats st;
	struct ltp_window w;
	struct ltp_nak naks[4];
	bool unordered = size && (data[0] & 1);
	uint64_t now = 1, next = 0, seen_lo = 0;
	bool any = false;
	int ends = 0;
	uint8_t delivered[4096] = { 0 }; /* unordered: seen_lo + i delivered */

	memset(&st, 0, sizeof(st));
	if (ltp_window_init(&w, NSLOTS, 8, MAX_RANGES, 10000000, 3, 2, unordered, &st))
		return 0;
	for (size_t i = 1; i + 7 <= size; i += 7) {
		const uint8_t *op = data + i;
		uint32_t seq = get32(op + 1) % 64; /* near 0 mostly; the 32-bit wrap via trail */
		if (op[5] & 0x80)
			seq = get32(op + 1);
		now += (uint64_t)op[6] * 1000000;
		switch (op[0] % 4) {
		case 0: {
			uint8_t b[8];
			for (int k = 0; k < 8; k++)
				b[k] = (uint8_t)(seq >> (8 * (k % 4)));
			ltp_window_put(&w, seq, op[5] & 1 ? 0 : seq, op[5] & 2, op[5] & 4, b,
				       1 + op[5] % 8, now);
			break;
		}
		case 1: ltp_window_heartbeat(&w, seq, op[5] & 1 ? 0 : seq, op[5] & 2); break;
		case 2: {
			size_t n = ltp_window_due(&w, now, naks, 4);
			REQUIRE(n <= 4 && w.nranges <= MAX_RANGES);
			for (size_t k = 0; k < n; k++) {
				REQUIRE(naks[k].n >= 1 && naks[k].n <= LTP_NAK_MAX_RANGES);
				for (uint32_t j = 0; j < naks[k].n; j++) {
					struct ltp_pair p = naks[k].pair[j];
					REQUIRE((int32_t)(p.hi - p.lo) >= 0);
					REQUIRE((uint32_t)(p.lo - (uint32_t)w.base) < NSLOTS);
					REQUIRE((uint32_t)(p.hi - (uint32_t)w.base) < NSLOTS);
				}
			}
			for (uint32_t k = 0; k < w.nranges; k++)
				REQUIRE(w.range[k].lo <= w.range[k].hi && w.range[k].hi < w.base + NSLOTS);
			break;
		}
		default: {
			struct gc_ltp_msg m;
			const uint8_t *d;
			size_t len;
			for (int k = 0; k < 1 + op[5] % 8 && ltp_window_peek(&w, &m, &d, &len); k++) {
				if (!any)
					seen_lo = w.base; /* nothing below it is ever delivered */
				if (m.type == GC_LTP_DATA) {
					REQUIRE(len >= 1 && len <= 8);
					REQUIRE(d[0] == (uint8_t)m.seq);
					if (!unordered) {
						REQUIRE(!any || m.seq >= next);
						next = m.seq + 1;
					} else if (m.seq - seen_lo < sizeof(delivered)) {
						REQUIRE(!delivered[m.seq - seen_lo]);
						delivered[m.seq - seen_lo] = 1;
					}
					any = true;
				} else if (m.type == GC_LTP_LOSS) {
					REQUIRE(m.lo <= m.hi && m.lo == w.base);
					if (!unordered) {
						REQUIRE(!any || m.lo >= next);
						next = m.hi + 1;
						any = true;
					}
				} else {
					REQUIRE(m.type == GC_LTP_END && ++ends == 1);
				}
				ltp_window_consume(&w, &m);
				REQUIRE(w.registered >= w.base);
			}
			break;
		}
		}
		REQUIRE(w.nranges <= MAX_RANGES);
		REQUIRE(!w.unordered || w.fifo_len <= NSLOTS);
	}
	ltp_window_free(&w);
	return 0;
}
