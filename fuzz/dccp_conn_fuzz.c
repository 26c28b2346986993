/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the packet input path of DCCP connections (lib/dccp/
 * conn.c, listener.c).  A listener and an OPEN client/server pair (made by a real
 * handshake at the start of every input) are fed hostile packets:
 *
 *   input := record*
 *   record := flags(1) len(2, big-endian) bytes(len)
 *     flags bit 0: to the client connection (else to the server side:
 *                  the server connection, then the listener)
 *     flags bits 1-3: milliseconds to advance the clock (x 50), timers run
 *     flags bit 4: the packet's sequence/ack numbers are rewritten near the
 *                  receiver's GSR/GSS (so that the §7.5 windows pass and the
 *                  state machine behind them is reached)
 *
 * DCCP-UDP framing (no DCCP checksum), so checksums do not stop the bytes.
 * Whatever the input: no crash, no leak, no read outside a packet; states
 * stay in range; a connection never takes more than its receive queue.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target dccp_conn_fuzz
 *   build-fuzz/fuzz/dccp_conn_fuzz -max_total_time=300 fuzz/corpus/dccp_conn
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccp/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                              \
	do {                                                                                    \
		if (!(c)) {                                                                     \
			fprintf(stderr, "dccp_conn_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                                \
		}                                                                               \
	} while (0)

#define MS 1000000ull

/* The last packet each side emitted (the handshake needs one at a time). */
struct box {
	uint8_t b[2048];
	size_t len;
	unsigned n;
};
static struct box to_server, to_client;

static int emit(void *arg, const uint8_t *p, size_t len)
{
	struct box *q = arg;
	if (len <= sizeof(q->b)) {
		memcpy(q->b, p, len);
		q->len = len;
	}
	q->n++;
	return 0;
}

static struct dccp_listener L;
static struct dccp_conn C, S, N; /* client, server, a connection the fuzzer opens */

static void deliver_box(struct box *q, struct dccp_conn *c, uint64_t now)
{
	struct dccp_hdr h;
	if (q->len && dccp_parse(q->b, q->len, NULL, &h, NULL) == DCCP_OK)
		dccp_conn_input(c, q->b, q->len, &h, now);
	q->len = 0;
}

static bool open_pair(uint64_t now)
{
	struct dccp_conn_params lp = {
		.ccid = 2, .mps = 1400, .seq_window = 200, .sport = 5001, .udp = true, .ph_out.family = 2
	};
	struct dccp_conn_params cp = lp;
	cp.sport = 40000;
	cp.dport = 5001;
	struct dccp_conn_env cenv = { .emit = emit, .arg = &to_server };
	struct dccp_pseudo ph = { .family = 2 };
	memset(&to_server, 0, sizeof(to_server));
	memset(&to_client, 0, sizeof(to_client));
	dccp_listener_init(&L, &lp);
	dccp_conn_connect(&C, &cp, &cenv, 123456, now);
	struct dccp_hdr h;
	struct dccp_conn_env senv = { .emit = emit, .arg = &to_client };
	REQUIRE(dccp_parse(to_server.b, to_server.len, NULL, &h, NULL) == DCCP_OK);
	dccp_listener_input(&L, to_server.b, to_server.len, &h, &ph, &ph, true, now, emit,
			    &to_client, &S, &senv);
	deliver_box(&to_client, &C, now);
	REQUIRE(C.state == DCCP_S_PARTOPEN);
	REQUIRE(dccp_parse(to_server.b, to_server.len, NULL, &h, NULL) == DCCP_OK);
	REQUIRE(dccp_listener_input(&L, to_server.b, to_server.len, &h, &ph, &ph, true, now, emit,
				    &to_client, &S, &senv));
	deliver_box(&to_client, &C, now);
	REQUIRE(C.state == DCCP_S_OPEN && S.state == DCCP_S_OPEN);
	return true;
}

static void put48(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 6; i++)
		b[i] = (uint8_t)(v >> (40 - 8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t now = 1000 * MS;
	open_pair(now);
	bool have_n = false;
	struct dccp_pseudo ph = { .family = 2 };
	struct dccp_conn_env nenv = { .emit = emit, .arg = &to_client };
	static uint8_t pkt[65536];
	while (size >= 3) {
		uint8_t flags = data[0];
		size_t len = (size_t)data[1] << 8 | data[2];
		data += 3, size -= 3;
		if (len > size)
			len = size;
		memcpy(pkt, data, len);
		data += len, size -= len;
		now += (uint64_t)((flags >> 1) & 7) * 50 * MS;
		struct dccp_conn *to = (flags & 1) ? &C : &S;
		struct dccp_hdr h;
		if (dccp_parse(pkt, len, NULL, &h, NULL) != DCCP_OK)
			continue;
		if ((flags & 0x10) && h.x && len >= 16) {
			/* near the receiver's numbers: Sequence at GSR + 1, Ack at GSS */
			put48(pkt + 8 + 2, dccp_seq_add(to->s.gsr, 1));
			if (h.has_ack && len >= 24)
				put48(pkt + 16 + 2, to->s.gss);
			REQUIRE(dccp_parse(pkt, len, NULL, &h, NULL) == DCCP_OK);
		}
		if (flags & 1) {
			/* the client sees the server's ports */
			dccp_conn_input(&C, pkt, len, &h, now);
		} else if (h.sport == S.p.dport && h.dport == S.p.sport) {
			dccp_conn_input(&S, pkt, len, &h, now);
		} else if (!have_n) {
			have_n = dccp_listener_input(&L, pkt, len, &h, &ph, &ph, true, now, emit,
						     &to_client, &N, &nenv);
		} else {
			dccp_conn_input(&N, pkt, len, &h, now);
		}
		dccp_conn_timer(&C, now);
		dccp_conn_timer(&S, now);
		if (have_n)
			dccp_conn_timer(&N, now);
		REQUIRE(C.state <= DCCP_S_TIMEWAIT && S.state <= DCCP_S_TIMEWAIT);
		REQUIRE(C.rxq_n <= DCCP_RX_QUEUE && S.rxq_n <= DCCP_RX_QUEUE);
	}
	/* the connections still send and close without trouble */
	uint64_t seq;
	dccp_conn_send(&C, "x", 1, now, &seq);
	dccp_conn_close(&C, now);
	dccp_conn_close(&S, now);
	dccp_conn_free(&C);
	dccp_conn_free(&S);
	if (have_n)
		dccp_conn_free(&N);
	return 0;
}
