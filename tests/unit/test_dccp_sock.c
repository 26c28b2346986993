/* SPDX-License-Identifier: MIT */
/*
 * test_dccp_sock - the DCCP-UDP socket paths of lib/dccp/sock.c on
 * loopback: dccp_sock_sendv() sends header + payload iovecs as one datagram,
 * or as a UDP_SEGMENT run that arrives as one datagram per packet (the last
 * shorter), and dccp_sock_recv_batch() reads several per call with their
 * addresses.
 */
#include "check.h"

#include <sys/uio.h>

#include "dccp/sock.h"

static int udp_bound(struct sockaddr_storage *ss)
{
	int fd = dccp_sock_open(true, AF_INET);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(*ss);
	CHECK(fd >= 0);
	CHECK_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
	CHECK_OK(getsockname(fd, (struct sockaddr *)ss, &l));
	return fd;
}

/* Read until n packets came (or the timeout): they may come in pieces. */
static int read_n(int fd, uint8_t *buf, size_t cap, struct dccp_sock_pkt *sp, ssize_t *lens, int n)
{
	int got = 0;
	while (got < n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, RX_TIMEOUT_MS) != 1)
			break;
		int r = dccp_sock_recv_batch(fd, true, buf + (size_t)got * cap, cap,
					     (unsigned)(n - got), sp + got, lens + got);
		if (r <= 0)
			break;
		got += r;
	}
	return got;
}

int main(void)
{
	struct sockaddr_storage sa, ra;
	int s = udp_bound(&sa), r = udp_bound(&ra);
	CHECK_OK(connect(s, (struct sockaddr *)&ra, sizeof(struct sockaddr_in)));

	/* three packets of a 16-byte header and a 100-byte payload, the last
	 * one's payload 50 bytes: one UDP_SEGMENT run of 116-byte segments */
	uint8_t hdr[3][16], pay[3][100];
	struct iovec iov[6];
	for (int i = 0; i < 3; i++) {
		memset(hdr[i], 'a' + i, sizeof(hdr[i]));
		memset(pay[i], 'A' + i, sizeof(pay[i]));
		iov[2 * i] = (struct iovec){ hdr[i], 16 };
		iov[2 * i + 1] = (struct iovec){ pay[i], i == 2 ? 50 : 100 };
	}
	CHECK_EQ(dccp_sock_sendv(s, iov, 6, 116), 0);

	enum { CAP = 2048 };
	static uint8_t buf[DCCP_SOCK_BATCH * CAP];
	struct dccp_sock_pkt sp[DCCP_SOCK_BATCH];
	ssize_t lens[DCCP_SOCK_BATCH];
	CHECK_EQ(read_n(r, buf, CAP, sp, lens, 3), 3);
	for (int i = 0; i < 3; i++) {
		size_t want = i == 2 ? 66 : 116;
		EXPECT_EQ(sp[i].len, want);
		EXPECT_EQ(lens[i], (ssize_t)want + 1);
		EXPECT(!memcmp(sp[i].pkt, hdr[i], 16));
		EXPECT(!memcmp(sp[i].pkt + 16, pay[i], want - 16));
		EXPECT(!memcmp(&((struct sockaddr_in *)&sp[i].from)->sin_port,
			       &((struct sockaddr_in *)&sa)->sin_port, 2));
		EXPECT_EQ(((struct sockaddr_in *)&sp[i].to)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	}

	/* seg 0: header and payload as one datagram */
	CHECK_EQ(dccp_sock_sendv(s, iov, 2, 0), 0);
	CHECK_EQ(read_n(r, buf, CAP, sp, lens, 1), 1);
	EXPECT_EQ(sp[0].len, 116);
	EXPECT(!memcmp(sp[0].pkt, hdr[0], 16) && !memcmp(sp[0].pkt + 16, pay[0], 100));

	/* nothing more: the next read says EAGAIN */
	EXPECT_EQ(dccp_sock_recv_batch(r, true, buf, CAP, DCCP_SOCK_BATCH, sp, lens), -EAGAIN);

	/* a datagram larger than a slot is truncated: dropped (0), as dccp_sock_recv() does */
	static uint8_t big[3000];
	struct iovec one = { big, sizeof(big) };
	CHECK_EQ(dccp_sock_sendv(s, &one, 1, 0), 0);
	CHECK_EQ(read_n(r, buf, CAP, sp, lens, 1), 1);
	EXPECT_EQ(lens[0], 0);

	close(s);
	close(r);
	return check_done("dccp_sock");
}
