/* SPDX-License-Identifier: MIT */
/*
 * The engine thread sends a ring's packets on its UDP socket, byte-exact and
 * in ring order, straight from the zone: every size from 0 to the largest
 * datagram, IPv4 and IPv6, GSO runs, dead packets skipped, a rewind honoured;
 * detach and re-attach continue where the engine stopped; gc_ring_attach()
 * refuses what is not a connected UDP socket.
 */
#include "ring_util.h"

enum { N = 64 };

/* Deterministic payload of packet i in buffer i of the zone. */
static void *payload(struct gc_zone *z, unsigned i, size_t len, unsigned tag)
{
	void *b = gc_zone_buf(z, i);

	CHECK(b != NULL);
	fill(b, len, tag);
	return b;
}

static void wait_drained(struct gc_ring *r)
{
	CHECK_OK(gc_ring_wait(r, gc_ring_entries(r) - 1, 5000));
}

static void sizes(int family)
{
	const size_t max = family == AF_INET ? 65507 : 65527;
	/* 4 x 1400 + 1000: one GSO run with a shorter last segment */
	const size_t len[] = { 0, 1, 100, 1400, 1400, 1400, 1400, 1000, 1472, 9000, max, 0, 7 };
	const unsigned n = sizeof(len) / sizeof(len[0]);
	struct rx *rx = rx_open(family, 1);
	int sd = udp_connected(&rx[0]);
	int big = 4 << 20;
	struct gc_zone *z = gc_zone_create(n, 65536);
	struct gc_ring *r = gc_ring_create(N, z);
	struct gc_ring_engine *e = gc_ring_engine_create(NULL);
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	uint64_t bytes = 0;

	CHECK(z && r && e);
	CHECK_OK(setsockopt(rx[0].fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)));
	CHECK_OK(gc_ring_attach(r, e, sd));
	close(sd); /* the engine keeps its own reference */
	for (unsigned i = 0; i < n; i++) {
		void *b = payload(z, i, len[i], i + 7u * (unsigned)family);
		put_pkt(r, gc_zone_offset(z, b), (uint32_t)len[i], i);
		bytes += len[i];
	}
	CHECK(gc_ring_submit(r) >= 0);
	for (unsigned i = 0; i < n; i++)
		RX_EXPECT(&rx[0], gc_zone_buf(z, i), len[i]);
	RX_NONE(&rx[0]);
	wait_drained(r);

	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &rs));
	CHECK_EQ(rs.sent, n);
	CHECK_EQ(rs.bytes, bytes);
	CHECK_EQ(rs.send_errors, 0);
	CHECK_EQ(rs.error, GC_RING_OK);
	CHECK_EQ(rs.attached, 1);
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.packets, n);
	CHECK_EQ(st.rings, 1);
	CHECK(st.gso >= 5); /* the 1400 x 4 + 1000 run went as one message */
	CHECK(st.syscalls >= 1 && st.syscalls < n);

	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_ring_status(r, &rs));
	CHECK_EQ(rs.attached, 0); /* stopping the engine detached the ring */
	CHECK_ERR(gc_ring_notify(r), ENOTCONN);
	gc_ring_destroy(r);
	CHECK_OK(gc_zone_destroy(z));
	rx_close(rx, 1);
}

/* Dead packets are skipped, a rewind's changes go out, the order is the
 * ring's; detach and re-attach continue at kern_i. */
static void late_choice(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	struct gc_zone *z = gc_zone_create(N, 4096);
	struct gc_ring *r = gc_ring_create(16, z);
	struct gc_ring_engine *e = gc_ring_engine_create(NULL);
	unsigned first;
	char msg[16];

	CHECK(z && r && e);
	for (unsigned i = 0; i < 10; i++) {
		snprintf(gc_zone_buf(z, i), 16, "pkt%u", i);
		put_pkt(r, gc_zone_offset(z, gc_zone_buf(z, i)), 5, i);
	}
	/* not published yet: all certain */
	CHECK_EQ(gc_ring_mark_dead(r, 3), 1);
	CHECK_EQ(gc_ring_mark_dead(r, 7), 1);
	CHECK_OK(gc_ring_swap(r, 8, 9));
	/* not attached: publishing keeps them queued */
	CHECK_EQ(gc_ring_publish(r), 0);
	CHECK_OK(gc_ring_attach(r, e, sd));
	const unsigned order[] = { 0, 1, 2, 4, 5, 6, 9, 8 };
	for (unsigned i = 0; i < 8; i++) {
		snprintf(msg, sizeof(msg), "pkt%u", order[i]);
		RX_EXPECT(&rx[0], msg, 5);
	}
	RX_NONE(&rx[0]);
	wait_drained(r);

	/* a detached ring keeps its packets; re-attached, they go */
	CHECK_OK(gc_ring_detach(r));
	CHECK_ERR(gc_ring_detach(r), ENOTCONN);
	put_pkt(r, gc_zone_offset(z, gc_zone_buf(z, 0)), 5, 100);
	put_pkt(r, gc_zone_offset(z, gc_zone_buf(z, 1)), 5, 101);
	CHECK_EQ(gc_ring_publish(r), 0);
	RX_NONE(&rx[0]);
	/* rewinding a detached ring: nothing taken since, so all of it */
	CHECK_EQ(gc_ring_rewind(r, GC_RING_OLDEST, &first), 2);
	gc_ring_pkt(r, first)->off = gc_zone_offset(z, gc_zone_buf(z, 2));
	gc_ring_publish(r);
	CHECK_OK(gc_ring_attach(r, e, sd));
	RX_EXPECT(&rx[0], "pkt2", 5);
	RX_EXPECT(&rx[0], "pkt1", 5);
	RX_NONE(&rx[0]);

	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	wait_drained(r);
	CHECK_OK(gc_ring_status(r, &rs));
	CHECK_EQ(rs.dead, 2);
	gc_ring_destroy(r); /* detaches */
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	close(sd);
	rx_close(rx, 1);
}

static void attach_errors(void)
{
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = gc_ring_create(8, z);
	struct gc_ring_engine *e = gc_ring_engine_create(NULL);
	struct rx *rx = rx_open(AF_INET, 1);
	int fds[2];

	CHECK(z && r && e);
	CHECK_ERR(gc_ring_attach(r, e, -1), EBADF);
	CHECK_ERR(gc_ring_attach(r, e, 12345), EBADF);
	CHECK_OK(pipe(fds));
	CHECK_ERR(gc_ring_attach(r, e, fds[0]), ENOTSOCK);
	close(fds[0]);
	close(fds[1]);
	int tcp = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_ERR(gc_ring_attach(r, e, tcp), EPROTOTYPE);
	CHECK(strstr(gc_errmsg(), "sd") != NULL);
	close(tcp);
	int un = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHECK_ERR(gc_ring_attach(r, e, un), EPROTOTYPE);
	close(un);
	int udp = udp_socket(AF_INET);
	CHECK_ERR(gc_ring_attach(r, e, udp), ENOTCONN);
	CHECK(strstr(gc_errmsg(), "connect") != NULL);
	CHECK_ERR(gc_ring_attach(NULL, e, udp), EFAULT);
	CHECK_ERR(gc_ring_attach(r, NULL, udp), EFAULT);
	close(udp);
	udp = udp_connected(&rx[0]);
	CHECK_OK(gc_ring_attach(r, e, udp));
	CHECK_ERR(gc_ring_attach(r, e, udp), EISCONN);
	CHECK_ERR(gc_zone_destroy(z), EBUSY);
	gc_ring_destroy(r);
	CHECK_OK(gc_zone_destroy(z));
	CHECK_OK(gc_ring_engine_destroy(e));
	close(udp);
	rx_close(rx, 1);

	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.batch = 5000);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(strstr(gc_errmsg(), "batch") != NULL);
	p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_PIN_CPU,
								 .cpu = -3);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK(strstr(gc_errmsg(), "cpu") != NULL);
	CHECK(gc_ring_engine_connect("/nonexistent/gc-engine.sock") == NULL);
	CHECK(errno == ENOENT);
}

int main(void)
{
	sizes(AF_INET);
	sizes(AF_INET6);
	late_choice();
	attach_errors();
	return check_done("ring_engine");
}
