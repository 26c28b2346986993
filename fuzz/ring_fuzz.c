/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the engine's side of a packet ring (lib/ring/kring.c) fed
 * arbitrary ring memory, records and indexes, with a zone of arbitrary size
 * allocated to the exact byte (so AddressSanitizer sees any read outside it).
 * The input is a ring size, a zone size and a program of operations: write
 * bytes anywhere in the ring's memory (what a hostile application can do),
 * take packets, finish them, park, unpark, acknowledge (sent packets or made
 * up ones).  The mock transport reads every byte of every packet from the
 * zone.  After each operation the engine's private state must still satisfy
 * dev_i <= kern_i <= user_i, every packet taken must lie in the zone, be no
 * longer than a datagram, come from the next ring position, not be dead, and
 * a stopped ring must give nothing more.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target ring_fuzz
 *   build-fuzz/fuzz/ring_fuzz -max_total_time=600 fuzz/corpus/ring
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ring/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct in {
	const uint8_t *p;
	size_t n;
};

static uint32_t get(struct in *in, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v = v << 8 | (in->n ? *in->p : 0);
		if (in->n) {
			in->p++;
			in->n--;
		}
	}
	return v;
}

#define REQUIRE(c)                                                                         \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "ring_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                           \
		}                                                                          \
	} while (0)

static uint32_t rpos(const struct gc_kring *k, uint32_t x)
{
	return x >= k->dev ? x - k->dev : x + k->n - k->dev;
}

static void invariants(const struct gc_kring *k)
{
	if (k->error)
		return;
	REQUIRE(k->dev < k->n && k->kern < k->n && k->user < k->n);
	REQUIRE(rpos(k, k->kern) <= rpos(k, k->user));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint32_t n = 2 + get(&in, 1) % 64;
	uint64_t zone_size = get(&in, 2) % 9000;
	uint32_t max_len = get(&in, 1) & 1 ? 65507 : 1400;
	uint64_t shm_size = gc_shm_size(n, n, 64);
	struct gc_ring_shm *sh = aligned_alloc(64, shm_size);
	unsigned char *zone = malloc(zone_size ? zone_size : 1);
	struct gc_sent *out = calloc(n, sizeof(*out));
	struct gc_sent sent[64]; /* the last packets taken, for acknowledgements */
	unsigned nsent = 0;
	struct gc_kring k;

	if (!sh || !zone || !out)
		abort();
	memset(sh, 0, shm_size);
	memset(zone, 0xa5, zone_size ? zone_size : 1);
	/* the application's starting indexes, possibly garbage */
	atomic_store(&sh->kern_i, get(&in, 1) % (n + 2));
	atomic_store(&sh->ack_tail, get(&in, 1));
	atomic_store(&sh->ack_head, get(&in, 1));
	if (gc_kring_init(&k, sh, shm_size, n, n, zone_size, max_len) < 0) {
		REQUIRE(atomic_load(&sh->kern_i) >= n);
		goto out;
	}
	invariants(&k);

	for (unsigned steps = 0; in.n && steps < 512; steps++) {
		uint32_t op = get(&in, 1);
		switch (op % 8) {
		case 0:
		case 1: { /* the application writes up to 8 bytes anywhere */
			uint32_t at = get(&in, 2) % (uint32_t)shm_size;
			uint32_t len = 1 + get(&in, 1) % 8;
			for (uint32_t i = 0; i < len && at + i < shm_size; i++)
				((unsigned char *)sh)[at + i] = (unsigned char)get(&in, 1);
			break;
		}
		case 2: { /* a well-formed record at user_i, published */
			uint32_t u = atomic_load(&sh->user_i) % n;
			struct gc_pkt *p = (struct gc_pkt *)((unsigned char *)sh + GC_SHM_PKT_OFF) + u;
			p->off = get(&in, 2) % (zone_size + 1);
			p->len = get(&in, 2) % (uint32_t)(zone_size - p->off + 1);
			p->user_seq = get(&in, 4);
			atomic_store(&p->flags, (get(&in, 1) & 1) ? GC_PKT_DEAD : 0);
			atomic_store(&sh->user_i, (u + 1) % n);
			if (op & 0x80)
				atomic_store(&sh->umod_i, (u + 1) % n);
			break;
		}
		case 3: { /* take */
			uint32_t max = 1 + get(&in, 1) % n;
			uint32_t nout = 0, ntaken = 0, start = k.kern, was_error = k.error;
			int r = op & 0x80 ? gc_kring_claim(&k, max, out, &nout, &ntaken)
					  : gc_kring_take(&k, max, out, &nout, &ntaken);
			if (r < 0 || was_error) {
				REQUIRE(r < 0 && nout == 0 && ntaken == 0 && k.error);
				break;
			}
			REQUIRE(nout <= ntaken && ntaken <= max && ntaken < n);
			uint32_t prev = UINT32_MAX;
			for (uint32_t i = 0; i < nout; i++) {
				const struct gc_sent *s = &out[i];
				REQUIRE(s->len <= max_len);
				REQUIRE(s->off <= zone_size && s->len <= zone_size - s->off);
				uint32_t d = s->pos >= start ? s->pos - start : s->pos + n - start;
				REQUIRE(d < ntaken && (prev == UINT32_MAX || d > prev));
				prev = d;
				/* the transport reads every byte (ASan checks the bounds) */
				volatile unsigned char sum = 0;
				for (uint32_t b = 0; b < s->len; b++)
					sum ^= zone[s->off + b];
				(void)sum;
				sent[nsent++ % 64] = *s;
			}
			break;
		}
		case 4: /* the transport finished everything taken, or part of it */
			if (!k.error) {
				uint32_t pos = k.kern;
				if (op & 0x80)
					pos = (k.dev + get(&in, 1) % (rpos(&k, k.kern) + 1)) % n;
				gc_kring_done(&k, pos);
				REQUIRE(k.dev == pos);
			} else {
				gc_kring_done(&k, get(&in, 1) % n);
			}
			break;
		case 5: { /* park / unpark */
			int r = op & 0x80 ? (gc_kring_unpark(&k), 0) : gc_kring_park(&k);
			REQUIRE(r <= 1 && (r >= 0 || k.error));
			break;
		}
		case 6: { /* acknowledge a sent packet, or a made-up one */
			struct gc_sent s;
			if ((op & 0x80) && nsent) {
				s = sent[get(&in, 1) % (nsent < 64 ? nsent : 64)];
			} else {
				memset(&s, 0, sizeof(s));
				s.pos = get(&in, 4);
				s.stamp = get(&in, 2);
				s.user_seq = get(&in, 4);
			}
			uint64_t head = k.ack_head;
			if (gc_kring_ack(&k, &s) == 0 && k.ack_head == head + 1)
				REQUIRE(atomic_load(&sh->ack_head) == k.ack_head);
			break;
		}
		case 7: { /* plan */
			uint32_t avail = 0;
			if (gc_kring_plan(&k, &avail) == 0)
				REQUIRE(avail < n);
			else
				REQUIRE(k.error && avail == 0);
			break;
		}
		}
		invariants(&k);
	}
	char why[200];
	gc_kring_describe(&k, why, sizeof(why));
out:
	free(out);
	free(zone);
	free(sh);
	return 0;
}
