/* SPDX-License-Identifier: MIT */
/*
 * pkg_client.c - a program built against the installed libgroupcast-dev with
 * nothing but `pkg-config --cflags --libs groupcast` (tests/pkg/test_deb.sh).
 * It includes every public header, checks that the library it runs with is
 * the one of the headers, makes a packet zone and a ring, sees a bad
 * argument refused with a message, and sends one datagram with the mmsg
 * engine to two receivers on 127.0.0.1.  Exit 0 when all of that holds.
 */
#include <groupcast/common.h>
#include <groupcast/compat.h>
#include <groupcast/dccp.h>
#include <groupcast/group.h>
#include <groupcast/lms.h>
#include <groupcast/ltp.h>
#include <groupcast/ring.h>
#include <groupcast/version.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what)
{
	fprintf(stderr, "pkg_client: %s (errno %d: %s; gc_errmsg: %s)\n", what, errno,
		strerror(errno), gc_errmsg());
	return 1;
}

int main(void)
{
	if (gc_version() != GC_VERSION) {
		fprintf(stderr, "pkg_client: gc_version() 0x%06x, headers GC_VERSION 0x%06x\n",
			gc_version(), (unsigned)GC_VERSION);
		return 1;
	}

	struct gc_zone *z = gc_zone_create(8, 2048);
	if (!z)
		return fail("gc_zone_create(8, 2048)");
	if (gc_zone_size(z) < 8 * 2048 || !gc_zone_buf(z, 7))
		return fail("zone smaller than 8 buffers of 2048 bytes");
	struct gc_ring *r = gc_ring_create(16, z);
	if (!r)
		return fail("gc_ring_create(16, zone)");
	if (gc_ring_entries(r) != 16)
		return fail("gc_ring_entries() is not 16");
	gc_ring_destroy(r);
	if (gc_zone_destroy(z) != 0)
		return fail("gc_zone_destroy()");
	errno = 0;
	if (gc_zone_create(0, 2048) != NULL || errno != EINVAL || !strstr(gc_errmsg(), "nbufs"))
		return fail("gc_zone_create(0, 2048) not refused with EINVAL naming nbufs");

	/* One group send through the mmsg engine: each receiver gets it once. */
	int rx[2], sd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_storage members[2];
	if (sd < 0)
		return fail("socket");
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in *a = (struct sockaddr_in *)&members[i];
		socklen_t alen = sizeof(*a);
		memset(&members[i], 0, sizeof(members[i]));
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		rx[i] = socket(AF_INET, SOCK_DGRAM, 0);
		if (rx[i] < 0 || bind(rx[i], (struct sockaddr *)a, alen) < 0 ||
		    getsockname(rx[i], (struct sockaddr *)a, &alen) < 0)
			return fail("receiver socket on 127.0.0.1");
	}
	static const char msg[] = "one send, two receivers";
	if (gc_set_engine(sd, GC_ENGINE_MMSG) < 0)
		return fail("gc_set_engine(mmsg)");
	if (gc_setgroup(sd, members, 2) < 0)
		return fail("gc_setgroup");
	if (gc_send(sd, msg, sizeof(msg), 0) != (ssize_t)sizeof(msg))
		return fail("gc_send");
	for (int i = 0; i < 2; i++) {
		char buf[64];
		struct pollfd p = { .fd = rx[i], .events = POLLIN };
		if (poll(&p, 1, 2000) != 1)
			return fail("receiver got nothing in 2 s");
		ssize_t n = recv(rx[i], buf, sizeof(buf), 0);
		if (n != (ssize_t)sizeof(msg) || memcmp(buf, msg, sizeof(msg)) != 0)
			return fail("receiver got other bytes");
		close(rx[i]);
	}
	gc_release(sd);
	close(sd);
	printf("pkg_client: libgroupcast %u.%u.%u, zone and ring, mmsg send to 2 receivers: ok\n",
	       gc_version() >> 16, (gc_version() >> 8) & 0xff, gc_version() & 0xff);
	return 0;
}
