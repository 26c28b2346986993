/* SPDX-License-Identifier: MIT */
/*
 * LMS-API on real sockets, loopback only: a request leaves with its option
 * and comes back with it through IP_RECVOPTS; plain datagrams have none; an
 * option the kernel lets through but LMS cannot accept is rejected and
 * counted; argument checks; membership errors; and without CAP_NET_RAW the
 * request and the raw socket fail with EPERM naming the capability.
 */
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <groupcast/lms.h>
#include "check.h"

static struct in_addr A(const char *s) {
	struct in_addr a;
	CHECK(inet_pton(AF_INET, s, &a) == 1);
	return a;
}

static bool
have_net_raw(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	CHECK(syscall(SYS_capget, &h, d) == 0);
	return d[0].effective & CAP_TO_MASK(CAP_NET_RAW);
}

/* A UDP receiver on 127.0.0.1 with IP_RECVOPTS and a receive timeout. */
static int receiver(struct sockaddr_in *at)
{
	int sd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(sd >= 0);
	*at = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr = A("127.0.0.1") };
	socklen_t l = sizeof(*at);
	CHECK(bind(sd, (struct sockaddr *)at, l) == 0);
	CHECK(getsockname(sd, (struct sockaddr *)at, &l) == 0);
	struct timeval tv = { .tv_sec = RX_TIMEOUT_MS / 1000 };
	CHECK(setsockopt(sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	CHECK_OK(gc_lms_recvopts(sd, 1));
	return sd;
}

static void test_request_roundtrip(void)
{
	struct sockaddr_in at, from;
	int rx = receiver(&at);
	int tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct gc_lms_info info;
	struct gc_lms_stats s0 = GC_LMS_STATS_INIT(), s1 = GC_LMS_STATS_INIT();
	char buf[64];
	static const char nak[12] = "lo..hi..seq";

	CHECK_OK(gc_lms_stats(&s0));
	CHECK_EQ(gc_lms_request(tx, &at, A("10.0.0.1"), A("239.1.2.3"), nak, sizeof(nak), 0),
		 sizeof(nak));
	CHECK_EQ(gc_lms_recv(rx, buf, sizeof(buf), 0, &from, &info), sizeof(nak));
	CHECK(memcmp(buf, nak, sizeof(nak)) == 0);
	CHECK_EQ(from.sin_addr.s_addr, A("127.0.0.1").s_addr);
	CHECK_EQ(info.code, GC_LMS_REQUEST);
	CHECK_EQ(info.tpif, 0);
	CHECK_EQ(info.tpaddr.s_addr, 0);
	CHECK_EQ(info.src.s_addr, A("10.0.0.1").s_addr);
	CHECK_EQ(info.group.s_addr, A("239.1.2.3").s_addr);

	/* a plain datagram: no option */
	CHECK(sendto(tx, "plain", 5, 0, (struct sockaddr *)&at, sizeof(at)) == 5);
	CHECK_EQ(gc_lms_recv(rx, buf, sizeof(buf), 0, NULL, &info), 5);
	CHECK_EQ(info.code, 0);

	/* an option area the kernel accepts (lengths consistent) but LMS does not:
	 * a request option of 12 bytes, then 4 NOPs */
	uint8_t opts[16] = { 138, 12, 0 };
	memset(opts + 12, 1, 4);
	union {
		char b[CMSG_SPACE(16)];
		struct cmsghdr a;
	} ctl = { 0 };
	struct iovec iov = { "bad", 3 };
	struct msghdr m = { .msg_name = &at,
			    .msg_namelen = sizeof(at),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = IPPROTO_IP;
	c->cmsg_type = IP_RETOPTS;
	c->cmsg_len = CMSG_LEN(16);
	memcpy(CMSG_DATA(c), opts, 16);
	CHECK(sendmsg(tx, &m, 0) == 3);
	CHECK_ERR(gc_lms_recv(rx, buf, sizeof(buf), 0, NULL, &info), EBADMSG);
	CHECK(strstr(gc_errmsg(), "length 12"));

	/* too long for the buffer: EMSGSIZE, consumed, not silently cut */
	CHECK_EQ(gc_lms_request(tx, &at, A("10.0.0.1"), A("239.1.2.3"), nak, sizeof(nak), 0), 12);
	CHECK_ERR(gc_lms_recv(rx, buf, 4, 0, NULL, &info), EMSGSIZE);
	CHECK(strstr(gc_errmsg(), "12-byte"));

	/* IP_RECVOPTS off: the option is not delivered (documented) */
	CHECK_OK(gc_lms_recvopts(rx, 0));
	CHECK_EQ(gc_lms_request(tx, &at, A("10.0.0.1"), A("239.1.2.3"), nak, sizeof(nak), 0), 12);
	CHECK_EQ(gc_lms_recv(rx, buf, sizeof(buf), 0, NULL, &info), 12);
	CHECK_EQ(info.code, 0);

	CHECK_OK(gc_lms_stats(&s1));
	CHECK_EQ(s1.requests_sent - s0.requests_sent, 3);
	CHECK_EQ(s1.requests_received - s0.requests_received, 1);
	CHECK_EQ(s1.plain_received - s0.plain_received, 2);
	CHECK_EQ(s1.bad_options - s0.bad_options, 1);

	/* nothing left over */
	CHECK_ERR(gc_lms_recv(rx, buf, sizeof(buf), MSG_DONTWAIT, NULL, &info), EAGAIN);
	close(rx);
	close(tx);
}

static void test_request_arguments(void)
{
	struct sockaddr_in at = { .sin_family = AF_INET, .sin_addr = A("127.0.0.1"), .sin_port = htons(9) };
	int tx = socket(AF_INET, SOCK_DGRAM, 0);
	int tx6 = socket(AF_INET6, SOCK_DGRAM, 0);
	int tcp = socket(AF_INET, SOCK_STREAM, 0);
	struct in_addr s = A("10.0.0.1"), g = A("239.1.2.3");
	static char big[65536];

	CHECK_ERR(gc_lms_request(tx, &at, s, A("10.1.2.3"), "x", 1, 0), EINVAL);
	CHECK(strstr(gc_errmsg(), "group"));
	CHECK_ERR(gc_lms_request(tx, &at, A("0.0.0.0"), g, "x", 1, 0), EINVAL);
	CHECK(strstr(gc_errmsg(), "src"));
	CHECK_ERR(gc_lms_request(tx, &at, g, g, "x", 1, 0), EINVAL);
	struct sockaddr_in p0 = at;
	p0.sin_port = 0;
	CHECK_ERR(gc_lms_request(tx, &p0, s, g, "x", 1, 0), EINVAL);
	CHECK(strstr(gc_errmsg(), "to"));
	CHECK_ERR(gc_lms_request(tx, &at, s, g, NULL, 1, 0), EFAULT);
	CHECK_ERR(gc_lms_request(tx, &at, s, g, big, 65535 - 44 + 1, 0), EMSGSIZE);
	CHECK_ERR(gc_lms_request(tx6, &at, s, g, "x", 1, 0), EPROTOTYPE);
	CHECK_ERR(gc_lms_request(tcp, &at, s, g, "x", 1, 0), EPROTOTYPE);
	CHECK_ERR(gc_lms_request(-1, &at, s, g, "x", 1, 0), EBADF);
	CHECK_ERR(gc_lms_recv(tx, big, 10, 0, NULL, NULL), EFAULT);
	CHECK_ERR(gc_lms_recvopts(tx6, 1), EPROTOTYPE);
	CHECK_ERR(gc_lms_stats(NULL), EFAULT);
	close(tx);
	close(tx6);
	close(tcp);
}

static void test_membership(void)
{
	int sd = socket(AF_INET, SOCK_DGRAM, 0);
	struct in_addr g = A("239.7.7.7"), any = { 0 };
	int all = 1;
	socklen_t l = sizeof(all);

	CHECK_OK(gc_lms_join(sd, g, any, 1)); /* lo */
	CHECK(getsockopt(sd, IPPROTO_IP, IP_MULTICAST_ALL, &all, &l) == 0);
	CHECK_EQ(all, 0);
	CHECK_ERR(gc_lms_join(sd, g, any, 1), EADDRINUSE);
	CHECK(strstr(gc_errmsg(), "already joined"));
	CHECK_OK(gc_lms_leave(sd, g, any, 1));
	CHECK_ERR(gc_lms_leave(sd, g, any, 1), EADDRNOTAVAIL);
	CHECK(strstr(gc_errmsg(), "not joined"));
	/* source-specific */
	CHECK_OK(gc_lms_join(sd, g, A("10.0.0.1"), 1));
	CHECK_OK(gc_lms_leave(sd, g, A("10.0.0.1"), 1));
	CHECK_ERR(gc_lms_join(sd, A("10.1.2.3"), any, 1), EINVAL);
	CHECK(strstr(gc_errmsg(), "group"));
	CHECK_ERR(gc_lms_join(sd, g, A("239.0.0.1"), 1), EINVAL);
	CHECK(strstr(gc_errmsg(), "source"));
	CHECK_ERR(gc_lms_join(sd, g, any, 999999), ENODEV);
	int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
	CHECK_ERR(gc_lms_join(s6, g, any, 1), EPROTOTYPE);
	close(s6);
	close(sd);
}

/* Drop CAP_NET_RAW from the effective set of this (child) process. */
static void drop_net_raw(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	CHECK(syscall(SYS_capget, &h, d) == 0);
	d[0].effective &= ~CAP_TO_MASK(CAP_NET_RAW);
	CHECK(syscall(SYS_capset, &h, d) == 0);
}

static void test_no_net_raw(void)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (have_net_raw())
			drop_net_raw();
		CHECK(!have_net_raw());
		struct sockaddr_in at;
		int rx = receiver(&at);
		int tx = socket(AF_INET, SOCK_DGRAM, 0);
		CHECK_ERR(gc_lms_request(tx, &at, A("10.0.0.1"), A("239.1.2.3"), "x", 1, 0), EPERM);
		CHECK(strstr(gc_errmsg(), "CAP_NET_RAW"));
		CHECK_ERR(gc_lms_raw_socket(), EPERM);
		CHECK(strstr(gc_errmsg(), "CAP_NET_RAW"));
		/* plain datagrams and receiving need no privilege */
		struct gc_lms_info info;
		char b[4];
		CHECK(sendto(tx, "ok", 2, 0, (struct sockaddr *)&at, sizeof(at)) == 2);
		CHECK_EQ(gc_lms_recv(rx, b, sizeof(b), 0, NULL, &info), 2);
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	if (have_net_raw())
		test_request_roundtrip();
	else
		skip("no CAP_NET_RAW: request round trip not tried");
	test_request_arguments();
	test_membership();
	test_no_net_raw();
	return check_done("lms_sock");
}
