// SPDX-License-Identifier: MIT
/* The C side of bench/bindings_go.py: gc_send() to N members on an engine,
 * the process CPU (getrusage) per group send as JSON.
 *   bindings_send ENGINE ADDR PORT N SIZE SENDS PACE_US
 * PACE_US: sleep between sends (the receiver's queues drain). */
#include <groupcast/group.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

static double cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
		(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static double wall_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: %s ENGINE ADDR PORT N SIZE SENDS PACE_US\n", argv[0]);
		return 2;
	}
	size_t n = strtoul(argv[4], NULL, 10), size = strtoul(argv[5], NULL, 10);
	long sends = strtol(argv[6], NULL, 10), pace_us = strtol(argv[7], NULL, 10);
	struct timespec pace = { pace_us / 1000000, (pace_us % 1000000) * 1000 };
	size_t port = strtoul(argv[3], NULL, 10);
	struct sockaddr_storage *m = calloc(n, sizeof(*m));
	char *buf = calloc(1, size ? size : 1);
	int sd = socket(AF_INET, SOCK_DGRAM, 0), sndbuf = 8 << 20;
	if (!m || !buf || sd < 0)
		return 1;
	setsockopt(sd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_in *s = (struct sockaddr_in *)&m[i];
		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)(port + i));
		inet_pton(AF_INET, argv[2], &s->sin_addr);
	}
	if (gc_set_engine(sd, gc_engine_from_name(argv[1])) != 0 || gc_setgroup(sd, m, n) != 0 ||
	    gc_send(sd, buf, size, MSG_DONTWAIT) < 0) {
		fprintf(stderr, "bindings_send: %s\n", gc_errmsg());
		return 1;
	}
	/* CPU summed over the sends alone, as bench/bindings_go does */
	double spent = 0, w0 = wall_us();
	for (long i = 0; i < sends; i++) {
		double c0 = cpu_us();
		if (gc_send(sd, buf, size, MSG_DONTWAIT) < 0) {
			fprintf(stderr, "bindings_send: %s\n", gc_errmsg());
			return 1;
		}
		spent += cpu_us() - c0;
		if (pace_us > 0)
			nanosleep(&pace, NULL);
	}
	printf("{\"cpu_us_per_send\": %.3f, \"wall_us_per_send\": %.3f}\n", spent / (double)sends,
	       (wall_us() - w0) / (double)sends);
	return 0;
}
