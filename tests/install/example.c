/* SPDX-License-Identifier: MIT */
/* Send MESSAGE once to every member, with the named engine.  Members are
 * ADDR:PORT+K (K ports from PORT; "+K" optional; ADDR IPv4 or [IPv6]).
 * usage: example ENGINE MESSAGE ADDR:PORT[+K]...   exit 3: engine not here */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <groupcast/group.h>

int main(int argc, char **argv)
{
	static struct sockaddr_storage m[1024];
	size_t n = 0;
	int fam = AF_INET;
	for (int a = 3; a < argc; a++) {
		char host[64] = "", *c = strrchr(argv[a], ':');
		unsigned port = 0, k = 1;
		if (!c || c - argv[a] >= 64 || sscanf(c + 1, "%u+%u", &port, &k) < 1)
			return 2;
		memcpy(host, argv[a] + (argv[a][0] == '['),
		       (size_t)(c - argv[a]) - 2 * (argv[a][0] == '['));
		for (unsigned i = 0; i < k && n < 1024; i++, n++) {
			struct sockaddr_in *s4 = (void *)&m[n];
			struct sockaddr_in6 *s6 = (void *)&m[n];
			if (inet_pton(AF_INET, host, &s4->sin_addr) == 1)
				s4->sin_family = AF_INET, s4->sin_port = htons((uint16_t)(port + i));
			else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1)
				s6->sin6_family = fam = AF_INET6,
				s6->sin6_port = htons((uint16_t)(port + i));
			else
				return fprintf(stderr, "bad address %s\n", host), 2;
		}
	}
	int sd = argc > 3 ? socket(fam, SOCK_DGRAM, 0) : -1; /* AF_INET6 is dual-stack by default */
	if (sd < 0)
		return fprintf(stderr, "usage: %s ENGINE MESSAGE ADDR:PORT[+K]...\n", argv[0]), 2;
	if (gc_set_engine(sd, gc_engine_from_name(argv[1])) < 0)
		return fprintf(stderr, "%s\n", gc_errmsg()), errno == ENOTSUP ? 3 : 1;
	if (gc_setgroup(sd, m, n) < 0 || gc_send(sd, argv[2], strlen(argv[2]), 0) < 0)
		return fprintf(stderr, "%s\n", gc_errmsg()), 1;
	printf("sent %zu bytes to %zu members with %s\n", strlen(argv[2]), n,
	       gc_engine_name(gc_get_engine(sd)));
	return 0;
}
