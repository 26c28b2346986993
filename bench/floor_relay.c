/* SPDX-License-Identifier: MIT */
/*
 * floor_relay: the least a user-space replicator can do per input datagram,
 * as a yardstick for bench/relay_floor.py (issue 24).  It blocks in one
 * recvmmsg() for whatever is waiting (up to BATCH datagrams), then sends
 * every copy of the batch with sendmmsg() calls of up to UIO_MAXIOV
 * messages, from one unconnected UDP socket: no epoll, no timers, no
 * configuration, no statistics, no per-receiver errors (a copy the kernel
 * refuses is skipped).  Nothing a real relay must do is here; what it costs
 * is the kernel's receive and send paths plus two system calls per batch.
 *
 *   floor_relay -p PORT [-b RCVBUF] ADDR/PORT...   (samplicator's receiver syntax)
 *
 * Runs until SIGTERM or SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define DGRAM 65536
#define MAXOUT 1024 /* UIO_MAXIOV: the most one sendmmsg() takes */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: floor_relay -p PORT [-b RCVBUF] ADDR/PORT...\n");
	exit(2);
}

static long number(const char *s, const char *what, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "floor_relay: %s: '%s' is not a number in %ld..%ld\n", what, s, lo, hi);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long port = -1, rcvbuf = 0;
	int opt;
	while ((opt = getopt(argc, argv, "p:b:")) != -1) {
		if (opt == 'p')
			port = number(optarg, "-p", 1, 65535);
		else if (opt == 'b')
			rcvbuf = number(optarg, "-b", 1, INT_MAX);
		else
			usage();
	}
	size_t n = (size_t)(argc - optind);
	if (port < 0 || n == 0)
		usage();
	if (n > MAXOUT) {
		fprintf(stderr, "floor_relay: %zu receivers: at most %d\n", n, MAXOUT);
		return 2;
	}
	struct sockaddr_in *to = calloc(n, sizeof(*to));
	if (!to)
		return 1;
	for (size_t i = 0; i < n; i++) {
		char a[64];
		const char *arg = argv[optind + (int)i], *slash = strchr(arg, '/');
		if (!slash || (size_t)(slash - arg) >= sizeof(a)) {
			fprintf(stderr, "floor_relay: receiver '%s': want ADDR/PORT\n", arg);
			return 2;
		}
		memcpy(a, arg, (size_t)(slash - arg));
		a[slash - arg] = '\0';
		to[i].sin_family = AF_INET;
		to[i].sin_port = htons((uint16_t)number(slash + 1, "receiver port", 1, 65535));
		if (inet_pton(AF_INET, a, &to[i].sin_addr) != 1) {
			fprintf(stderr, "floor_relay: receiver '%s': '%s' is not an IPv4 address\n",
				arg, a);
			return 2;
		}
	}
	int in = socket(AF_INET, SOCK_DGRAM, 0), out = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int rb = (int)rcvbuf;
	if (in < 0 || out < 0 || (rcvbuf && setsockopt(in, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb))) ||
	    bind(in, (struct sockaddr *)&me, sizeof(me))) {
		perror("floor_relay: input socket");
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: recvmmsg returns */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	static char buf[BATCH][DGRAM];
	static struct iovec riov[BATCH], siov[MAXOUT];
	static struct mmsghdr rmsg[BATCH], smsg[MAXOUT];
	for (int i = 0; i < BATCH; i++) {
		riov[i] = (struct iovec){ buf[i], DGRAM };
		rmsg[i].msg_hdr = (struct msghdr){ .msg_iov = &riov[i], .msg_iovlen = 1 };
	}
	while (!stop) {
		int got = recvmmsg(in, rmsg, BATCH, MSG_WAITFORONE, NULL);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			perror("floor_relay: recvmmsg");
			return 1;
		}
		size_t q = 0;
		for (int d = 0; d <= got; d++) {
			/* the queue goes out when full, and after the last datagram */
			if (q && (d == got || q + n > MAXOUT)) {
				for (size_t off = 0; off < q;) {
					int s = sendmmsg(out, smsg + off, (unsigned)(q - off), 0);
					off += s > 0 ? (size_t)s : 1; /* refused: skip that copy */
				}
				q = 0;
			}
			if (d == got)
				break;
			for (size_t i = 0; i < n; i++, q++) {
				siov[q] = (struct iovec){ buf[d], rmsg[d].msg_len };
				smsg[q].msg_hdr = (struct msghdr){ .msg_name = &to[i],
								   .msg_namelen = sizeof(to[i]),
								   .msg_iov = &siov[q],
								   .msg_iovlen = 1 };
			}
		}
	}
	return 0;
}
