/* SPDX-License-Identifier: MIT */
/*
 * gc_dccp_accept() over DCCP-UDP (RFC 6773) on loopback, with the peer's
 * packets queued at the listener's socket before the connection's own
 * (connected) socket exists: the race of an accept that runs late.
 *
 * The client is lib/dccp/conn.c on a UDP socket of ours, so the test decides
 * what is queued where: the listener answers the Request in a first accept
 * (which then times out), the client's handshake Ack, two DataAcks, another
 * peer's Request and three more DataAcks all wait in the listener's queue
 * before the second accept.  That accept must hand the first two to the new
 * connection (they were in the queue before its socket was connected), and
 * the next accept, after answering the other peer, the last three: five
 * payloads, none lost, and no Reset to the client.
 */
#include "check.h"
#include "dccp/conn.h"

#include <time.h>

#include <groupcast/dccp.h>

#define MS 1000000ull

static int cfd[2]; /* the client's and the other peer's UDP sockets */

static int emit_fd(void *arg, const uint8_t *p, size_t len)
{
	int fd = *(int *)arg;
	return send(fd, p, len, 0) < 0 ? -errno : 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Feed what arrives at fd within ms to c; returns the number of Resets seen. */
static unsigned client_read(int fd, struct dccp_conn *c, int ms)
{
	uint8_t b[2048];
	unsigned resets = 0;
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	while (poll(&pf, 1, ms) == 1) {
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n <= 0)
			break;
		struct dccp_hdr h;
		if (dccp_parse(b, (size_t)n, NULL, &h, NULL) != DCCP_OK)
			continue;
		resets += h.type == DCCP_RESET;
		dccp_conn_input(c, b, (size_t)n, &h, now_ns());
		ms = 0; /* what is there already */
	}
	return resets;
}

static int udp_to(const struct sockaddr_storage *to)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	struct sockaddr_storage any = sa_make(AF_INET, "127.0.0.1", 0);
	CHECK_OK(bind(fd, (struct sockaddr *)&any, sa_len(AF_INET)));
	CHECK_OK(connect(fd, (const struct sockaddr *)to, sa_len(AF_INET)));
	return fd;
}

static unsigned local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	CHECK_OK(getsockname(fd, (struct sockaddr *)&ss, &sl));
	return sa_port(&ss);
}

int main(void)
{
	/* a free loopback port for the listener */
	int probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage at = sa_make(AF_INET, "127.0.0.1", 0);
	CHECK_OK(bind(probe, (struct sockaddr *)&at, sa_len(AF_INET)));
	at = sa_make(AF_INET, "127.0.0.1", local_port(probe));
	close(probe);

	struct gc_dccp_opts o = GC_DCCP_OPTS_INIT(.encap = GC_DCCP_UDP, .ring_slots = 64);
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&at, sa_len(AF_INET), &o);
	CHECK(l != NULL);
	for (int i = 0; i < 2; i++)
		cfd[i] = udp_to(&at);

	struct dccp_conn c, other;
	struct dccp_conn_env env[2] = { { .emit = emit_fd, .arg = &cfd[0] },
					{ .emit = emit_fd, .arg = &cfd[1] } };
	struct dccp_conn_params p = { .ccid = 2,
				      .mps = 1400,
				      .seq_window = 100,
				      .sport = (uint16_t)local_port(cfd[0]),
				      .dport = (uint16_t)sa_port(&at),
				      .udp = true };
	CHECK_OK(dccp_conn_connect(&c, &p, &env[0], 7000, now_ns()));
	/* the Request answered, no connection yet */
	CHECK(gc_dccp_accept(l, 100) == NULL && errno == ETIMEDOUT);
	EXPECT_EQ(client_read(cfd[0], &c, 1000), 0u);
	CHECK(c.state == DCCP_S_PARTOPEN); /* its Ack is queued at the listener */

	uint64_t seq;
	char d[100];
	for (int i = 0; i < 5; i++) {
		if (i == 2) { /* another peer's Request between them */
			struct dccp_conn_params p2 = p;
			p2.sport = (uint16_t)local_port(cfd[1]);
			CHECK_OK(dccp_conn_connect(&other, &p2, &env[1], 9000, now_ns()));
		}
		memset(d, 'a' + i, sizeof(d));
		CHECK_OK(dccp_conn_send(&c, d, sizeof(d), now_ns(), &seq)); /* DataAcks */
	}
	usleep(20000); /* on loopback they are all queued by now */

	struct gc_dccp *s = gc_dccp_accept(l, 1000);
	CHECK(s != NULL);
	struct gc_dccp_rxinfo ri;
	char got[200];
	int n = 0;
	/* the two DataAcks queued before the other peer's Request */
	for (; n < 2; n++) {
		ssize_t r = gc_dccp_recv(s, got, sizeof(got), &ri, 2000);
		CHECK(r == (ssize_t)sizeof(d));
		EXPECT(got[0] == 'a' + n && ri.lost == 0);
	}
	EXPECT(gc_dccp_recv(s, got, sizeof(got), &ri, 50) < 0 && errno == EAGAIN);
	/* the next accept answers the other peer and hands the rest over */
	CHECK(gc_dccp_accept(l, 200) == NULL && errno == ETIMEDOUT);
	for (; n < 5; n++) {
		ssize_t r = gc_dccp_recv(s, got, sizeof(got), &ri, 2000);
		CHECK(r == (ssize_t)sizeof(d));
		EXPECT(got[0] == 'a' + n && ri.lost == 0);
	}
	EXPECT_EQ(client_read(cfd[1], &other, 1000), 0u);
	EXPECT(other.state == DCCP_S_PARTOPEN); /* it got its Response */
	/* the client: the server's Acks, no Reset; OPEN */
	EXPECT_EQ(client_read(cfd[0], &c, 300), 0u);
	EXPECT(c.state == DCCP_S_OPEN);
	EXPECT_EQ(c.st.resets_rx, 0u);
	struct gc_dccp_stats st = GC_DCCP_STATS_INIT();
	CHECK_OK(gc_dccp_stats(s, &st));
	EXPECT_EQ(st.received, 5u);
	EXPECT_EQ(st.rx_lost, 0u);
	EXPECT(st.state == GC_DCCP_OPEN);

	gc_dccp_close(s, 0);
	gc_dccp_listener_destroy(l);
	dccp_conn_free(&c);
	dccp_conn_free(&other);
	close(cfd[0]);
	close(cfd[1]);
	return check_done("dccp_accept");
}
