/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the reload carry-over (tools/relay/fanout.c, carry_receivers):
 * receivers in both the old and the new configuration keep their counters and
 * their place in the sampling interval; a receiver listed twice pairs with its
 * old copies in order; new ones start from zero.  At 10000 receivers in the
 * reverse order (the worst case of the old nested loop, 0.49 s) it must take
 * a few milliseconds: it runs inside the event loop.
 */
#include "relay.h"
#include "check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 10000

static struct receiver rcv(unsigned i, uint32_t freq)
{
	struct receiver v;
	memset(&v, 0, sizeof(v));
	struct sockaddr_in *s = (struct sockaddr_in *)&v.addr;
	s->sin_family = AF_INET;
	s->sin_addr.s_addr = htonl(0x0a000000u | (i / 50));
	s->sin_port = htons((uint16_t)(20000 + i % 50));
	v.freq = freq;
	v.ttl = 64;
	return v;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(void)
{
	struct source o = { 0 }, s = { 0 };
	o.rcv = calloc(N + 2, sizeof(*o.rcv));
	s.rcv = calloc(N + 100 + 2, sizeof(*s.rcv));
	if (!o.rcv || !s.rcv)
		return 2;
	for (unsigned i = 0; i < N; i++) {
		o.rcv[o.n] = rcv(i, 1 + i % 3);
		o.rcv[o.n].st.packets = 1000 + i;
		o.rcv[o.n++].freqcount = i % 3;
	}
	/* one receiver listed twice, with different state per copy */
	struct receiver dup = rcv(N + 7, 1);
	o.rcv[o.n] = dup;
	o.rcv[o.n++].st.packets = 1;
	o.rcv[o.n] = dup;
	o.rcv[o.n++].st.packets = 2;
	/* the new configuration: the old receivers reversed, 100 new ones,
	 * the duplicate twice, one old receiver with another interval */
	for (unsigned i = N; i-- > 0;)
		s.rcv[s.n++] = rcv(i, i == 5 ? 9 : 1 + i % 3);
	for (unsigned i = 0; i < 100; i++)
		s.rcv[s.n++] = rcv(N + 100 + i, 1);
	s.rcv[s.n++] = dup;
	s.rcv[s.n++] = dup;

	double t0 = now_ms();
	CHECK(carry_receivers(&s, &o) == 0, "out of memory");
	double ms = now_ms() - t0;

	for (size_t k = 0; k < N; k++) {
		unsigned i = N - 1 - (unsigned)k;
		if (i == 5) {
			CHECK(s.rcv[k].st.packets == 0,
			      "receiver %u: interval changed, counters kept", i);
			continue;
		}
		CHECK(s.rcv[k].st.packets == 1000 + i && s.rcv[k].freqcount == i % 3,
		      "receiver %u: packets %llu freqcount %u", i,
		      (unsigned long long)s.rcv[k].st.packets, s.rcv[k].freqcount);
	}
	for (size_t k = N; k < N + 100; k++)
		CHECK(s.rcv[k].st.packets == 0 && s.rcv[k].freqcount == 0,
		      "new receiver %zu has state", k);
	CHECK(s.rcv[N + 100].st.packets == 1 && s.rcv[N + 101].st.packets == 2,
	      "duplicates pair in order: %llu %llu", (unsigned long long)s.rcv[N + 100].st.packets,
	      (unsigned long long)s.rcv[N + 101].st.packets);
	printf("carry-over of %d receivers (reversed): %.2f ms\n", N, ms);
	CHECK(ms < 150, "carry-over took %.1f ms (the old nested loop took about 490 ms)", ms);
	free(o.rcv);
	free(s.rcv);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
