/* SPDX-License-Identifier: MIT */
/*
 * One engine thread serves 1000 rings (connections), all sharing one zone:
 * each sends its packets, in order, to one of 10 loopback receivers, and the
 * engine parks the idle ones and wakes each on its own notification.
 */
#include "ring_util.h"

enum { RINGS = 1000, RX = 10, PER = 3, N = 8 };

int main(void)
{
	if (fd_limit_max() < 6 * RINGS) {
		skip("fewer than 6000 descriptors allowed");
		return 77;
	}
	struct rx *rx = rx_open(AF_INET, RX);
	struct gc_zone *z = gc_zone_create(RINGS, 64); /* one page per ring */
	struct gc_ring_engine *e = gc_ring_engine_create(NULL);
	struct gc_ring **r = calloc(RINGS, sizeof(*r));
	int big = 4 << 20;

	CHECK(z && e && r);
	for (int i = 0; i < RX; i++)
		setsockopt(rx[i].fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	for (int i = 0; i < RINGS; i++) {
		r[i] = gc_ring_create(N, z);
		CHECK(r[i] != NULL);
		int sd = udp_connected(&rx[i % RX]);
		CHECK_OK(gc_ring_attach(r[i], e, sd));
		close(sd);
	}
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.rings, RINGS);

	/* round by round: every ring gets one packet per round */
	for (int k = 0; k < PER; k++) {
		for (int i = 0; i < RINGS; i++) {
			char *b = gc_zone_buf(z, (size_t)i);
			int len = snprintf(b + 16 * k, 16, "r%d.%d", i, k);
			put_pkt(r[i], gc_zone_offset(z, b + 16 * k), (uint32_t)len, (uint64_t)k);
			/* publish, and notify when asked (gc_ring_submit() would
			 * send a parked ring itself on an engine confined to our
			 * CPU: this is about the engine waking for each ring) */
			if (gc_ring_publish(r[i]))
				CHECK_OK(gc_ring_notify(r[i]));
		}
	}
	/* every receiver gets its rings' packets, each ring's in order */
	int next[RINGS] = { 0 };
	char buf[64];
	for (int j = 0; j < RX; j++) {
		for (int got = 0; got < RINGS / RX * PER; got++) {
			struct sockaddr_storage from;
			ssize_t n = rx_recv(&rx[j], buf, sizeof(buf) - 1, RX_TIMEOUT_MS, &from);
			if (n < 0)
				check_fail(__FILE__, __LINE__, "receiver %d: %d of %d packets", j,
					   got, RINGS / RX * PER);
			buf[n] = '\0';
			int ri, k;
			CHECK_EQ(sscanf(buf, "r%d.%d", &ri, &k), 2);
			CHECK(ri >= 0 && ri < RINGS && ri % RX == j);
			CHECK_EQ(k, next[ri]);
			next[ri]++;
		}
		RX_NONE(&rx[j]);
	}
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.packets, RINGS * PER);
	CHECK(st.notifies >= RINGS); /* parked rings woke on their own eventfd */
	printf("ring_many: %d rings, %llu packets, %llu notifies, %llu rounds, %llu sleeps\n",
	       RINGS, (unsigned long long)st.packets, (unsigned long long)st.notifies,
	       (unsigned long long)st.rounds, (unsigned long long)st.sleeps);
	for (int i = 0; i < RINGS; i++)
		gc_ring_destroy(r[i]);
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.rings, 0);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	free(r);
	rx_close(rx, RX);
	return check_done("ring_many");
}
