/* SPDX-License-Identifier: MIT */
/*
 * The papers' spelling, through <groupcast/compat.h> only: Figure 1 of the
 * kernel-groupcast paper (setsockopt(SO_SETSENDGRP) + send()), the slides'
 * sendgroup() with struct giobuf/giovec, and every other setsockopt()/send()
 * passed to the C library untouched.
 *
 * On purpose this file includes nothing of the project but <groupcast/compat.h>
 * (no check.h): it is written the way a program of the papers would be.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <groupcast/compat.h>

#define N 16

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: FAIL: %s (errno %d %s)\n", __FILE__, __LINE__, #c, \
				errno, strerror(errno));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int rx[N];
static struct sockaddr_in rx_addr[N];

/* N receivers on 127.0.0.1 with a receive timeout set through setsockopt(). */
static void open_receivers(void)
{
	struct timeval tv = { .tv_sec = 2 }, got;
	socklen_t len;

	for (int i = 0; i < N; i++) {
		rx[i] = socket(AF_INET, SOCK_DGRAM, 0);
		CHECK(rx[i] >= 0);
		CHECK(setsockopt(rx[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
		len = sizeof(got);
		CHECK(getsockopt(rx[i], SOL_SOCKET, SO_RCVTIMEO, &got, &len) == 0);
		CHECK(got.tv_sec == 2);
		memset(&rx_addr[i], 0, sizeof(rx_addr[i]));
		rx_addr[i].sin_family = AF_INET;
		rx_addr[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		CHECK(bind(rx[i], (struct sockaddr *)&rx_addr[i], sizeof(rx_addr[i])) == 0);
		len = sizeof(rx_addr[i]);
		CHECK(getsockname(rx[i], (struct sockaddr *)&rx_addr[i], &len) == 0);
	}
}

/* Receiver fd must get exactly want[0..len) (timeout 2 s). */
static void expect(int fd, const void *want, size_t len)
{
	static char buf[70000];
	ssize_t got = recv(fd, buf, sizeof(buf), MSG_TRUNC);

	CHECK(got == (ssize_t)len);
	CHECK(memcmp(buf, want, len) == 0);
}

static void expect_none(int fd)
{
	char c;

	usleep(20000);
	CHECK(recv(fd, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
}

/* The paper's maintgroup(): the current addresses, a different set each round. */
static int maintgroup(int round, struct sockaddr_in *addrs, int max)
{
	int n = 0;

	if (round == 4) { /* a group of one */
		addrs[0] = rx_addr[1];
		return 1;
	}
	for (int i = 0; i < max; i++)
		if ((i + round) % 3 != 0)
			addrs[n++] = rx_addr[i];
	return n;
}

static int in_group(int round, int i)
{
	return round == 4 ? i == 1 : (i + round) % 3 != 0;
}

/* Figure 1: "Example use of kernel-groupcast". */
static void figure1(void)
{
	struct sockaddr_in addrs[N];
	char buf[1000];
	int grp, n;
	ssize_t bytes;

	grp = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(grp >= 0);
	for (int round = 0; round < 6; round++) {
		/* get current addresses, return group size */
		n = maintgroup(round, addrs, N);
		/* set the group membership */
		CHECK(setsockopt(grp, SOL_SOCKET, SO_SETSENDGRP, addrs,
				 (socklen_t)((size_t)n * sizeof(struct sockaddr_in))) == 0);
		/* send a message to each group member */
		bytes = sizeof(buf);
		memset(buf, 'a' + round, sizeof(buf));
		bytes = send(grp, buf, sizeof(buf), 0);
		CHECK(bytes == (ssize_t)sizeof(buf));
		for (int i = 0; i < N; i++)
			if (in_group(round, i))
				expect(rx[i], buf, sizeof(buf));
		for (int i = 0; i < N; i++)
			if (!in_group(round, i))
				expect_none(rx[i]);
	}

	/* the slides' name for the option */
	addrs[0] = rx_addr[1];
	addrs[1] = rx_addr[2];
	CHECK(setsockopt(grp, SOL_SOCKET, SO_SETGRP, addrs, 2 * sizeof(struct sockaddr_in)) == 0);
	CHECK(send(grp, "slides", 6, 0) == 6);
	expect(rx[1], "slides", 6);
	expect(rx[2], "slides", 6);

	/* optlen not a multiple of sizeof(struct sockaddr_in): refused, group kept */
	CHECK(setsockopt(grp, SOL_SOCKET, SO_SETSENDGRP, addrs, sizeof(struct sockaddr_in) + 3) == -1);
	CHECK(send(grp, "kept", 4, 0) == 4);
	expect(rx[1], "kept", 4);
	expect(rx[2], "kept", 4);
	expect_none(rx[0]);
	expect_none(rx[3]);

	/* optlen 0 clears: send() on the unconnected socket has no destination */
	CHECK(setsockopt(grp, SOL_SOCKET, SO_SETSENDGRP, NULL, 0) == 0);
	errno = 0;
	CHECK(send(grp, "x", 1, 0) == -1 && errno == EDESTADDRREQ);
	close(grp);
}

/* The same on an AF_INET6 socket with sockaddr_in6 members. */
static void figure1_v6(void)
{
	int r6 = socket(AF_INET6, SOCK_DGRAM, 0), grp = socket(AF_INET6, SOCK_DGRAM, 0);
	struct sockaddr_in6 a, addrs[3];
	socklen_t len = sizeof(a);
	struct timeval tv = { .tv_sec = 2 };

	CHECK(r6 >= 0 && grp >= 0);
	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	a.sin6_addr = in6addr_loopback;
	CHECK(bind(r6, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(getsockname(r6, (struct sockaddr *)&a, &len) == 0);
	CHECK(setsockopt(r6, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	addrs[0] = addrs[1] = addrs[2] = a;
	CHECK(setsockopt(grp, SOL_SOCKET, SO_SETSENDGRP, addrs, 3 * sizeof(struct sockaddr_in6)) == 0);
	CHECK(send(grp, "six", 3, 0) == 3);
	for (int i = 0; i < 3; i++)
		expect(r6, "six", 3);
	expect_none(r6);
	close(grp);
	close(r6);
}

/* The sendgroup() slides: shared buffer plus per-recipient prepend/append. */
static void slides_sendgroup(void)
{
	int sd = socket(AF_INET, SOCK_DGRAM, 0);
	struct giobuf *buf = malloc(GIOBUF_SIZE(N));
	int gerrno[N];
	char hdr[N][16], tail[N][16];
	static const char shared[] = "live broadcast frame";

	CHECK(sd >= 0 && buf != NULL);
	buf->shared.iov_base = (void *)shared;
	buf->shared.iov_len = sizeof(shared) - 1;
	for (int i = 0; i < N; i++) {
		struct giovec *g = &buf->recinfo[i];
		g->giov_dest = rx_addr[i];
		g->giov_prepend.iov_base = hdr[i];
		g->giov_prepend.iov_len = (size_t)snprintf(hdr[i], sizeof(hdr[i]), "H%d|", i);
		g->giov_append.iov_base = tail[i];
		g->giov_append.iov_len = (size_t)snprintf(tail[i], sizeof(tail[i]), "|T%d", i);
		gerrno[i] = -1;
	}
	CHECK(sendgroup(sd, buf, N, 0, gerrno) == N);
	for (int i = 0; i < N; i++) {
		char want[64];
		int len = snprintf(want, sizeof(want), "H%d|%s|T%d", i, shared, i);
		CHECK(gerrno[i] == 0);
		expect(rx[i], want, (size_t)len);
	}

	/* empty prepend/append */
	for (int i = 0; i < N; i++) {
		buf->recinfo[i].giov_prepend.iov_base = NULL;
		buf->recinfo[i].giov_prepend.iov_len = 0;
		buf->recinfo[i].giov_append.iov_len = 0;
	}
	CHECK(sendgroup(sd, buf, 3, MSG_DONTWAIT, NULL) == 3);
	for (int i = 0; i < 3; i++)
		expect(rx[i], shared, sizeof(shared) - 1);
	expect_none(rx[3]);
	free(buf);
	close(sd);
}

/* Everything else goes to the C library untouched. */
static void passthrough(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1, v = 0, ttl = 7;
	socklen_t len = sizeof(v);

	CHECK(s >= 0);
	CHECK(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
	CHECK(getsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, &len) == 0 && v == 1);
	CHECK(setsockopt(s, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)) == 0);
	len = sizeof(v);
	CHECK(getsockopt(s, IPPROTO_IP, IP_TTL, &v, &len) == 0 && v == 7);
	/* an option the kernel does not know still gets the kernel's answer */
	errno = 0;
	CHECK(setsockopt(s, SOL_SOCKET, 0x4754, &one, sizeof(one)) == -1 && errno == ENOPROTOOPT);
	errno = 0;
	CHECK(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, 1) == -1 && errno == EINVAL);

	/* send() on a connected UDP socket without a group */
	CHECK(connect(s, (struct sockaddr *)&rx_addr[5], sizeof(rx_addr[5])) == 0);
	CHECK(send(s, "connected", 9, 0) == 9);
	expect(rx[5], "connected", 9);
	CHECK(send(s, "flags", 5, MSG_DONTWAIT) == 5);
	expect(rx[5], "flags", 5);
	close(s);

	/* send() on a stream socket pair, with a flag the group path refuses */
	int sv[2];
	char buf[16];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(send(sv[0], "unix", 4, MSG_MORE) == 4);
	CHECK(recv(sv[1], buf, sizeof(buf), 0) == 4 && memcmp(buf, "unix", 4) == 0);
	close(sv[0]);
	close(sv[1]);

	/* send() on an unconnected UDP socket without a group: the kernel's error */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	errno = 0;
	CHECK(send(u, "x", 1, 0) == -1 && errno == EDESTADDRREQ);
	/* and on a pipe: the kernel's ENOTSOCK */
	int p[2];
	CHECK(pipe(p) == 0);
	errno = 0;
	CHECK(send(p[1], "x", 1, 0) == -1 && errno == ENOTSOCK);
	close(p[0]);
	close(p[1]);
	close(u);

	/* SO_SETSENDGRP on a TCP socket is refused */
	int t = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(setsockopt(t, SOL_SOCKET, SO_SETSENDGRP, rx_addr, sizeof(rx_addr[0])) == -1);
	close(t);
}

int main(void)
{
	open_receivers();
	figure1();
	figure1_v6();
	slides_sendgroup();
	passthrough();
	for (int i = 0; i < N; i++)
		expect_none(rx[i]);
	printf("test_compat: ok\n");
	return 0;
}
