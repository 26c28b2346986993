// SPDX-License-Identifier: MIT
// The public headers from C++17, linked against the library: extern "C"
// linkage, the structs as C++ sees them, and one call into each part.
#include <groupcast/compat.h>
#include <groupcast/group.h>
#include <groupcast/lms.h>
#include <groupcast/ring.h>

#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <unistd.h>

static int fail(const char *what)
{
	std::printf("test_cxx: %s: %s\n", what, gc_errmsg());
	return 1;
}

int main()
{
	// group unicast: one member on loopback
	int rx = socket(AF_INET, SOCK_DGRAM, 0), sd = socket(AF_INET, SOCK_DGRAM, 0);
	sockaddr_in a{};
	socklen_t alen = sizeof(a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rx < 0 || sd < 0 || bind(rx, reinterpret_cast<sockaddr *>(&a), sizeof(a)) ||
	    getsockname(rx, reinterpret_cast<sockaddr *>(&a), &alen))
		return fail("sockets");
	sockaddr_storage m{};
	std::memcpy(&m, &a, sizeof(a));
	if (gc_set_engine(sd, GC_ENGINE_MMSG) || gc_setgroup(sd, &m, 1) || gc_send(sd, "c++", 3, 0) != 3)
		return fail("gc_send");
	char buf[8];
	if (recv(rx, buf, sizeof(buf), 0) != 3 || std::memcmp(buf, "c++", 3) != 0)
		return fail("recv");
	gc_release(sd);

	// packet ring: a zone and a ring, no engine
	gc_zone *z = gc_zone_create(1, 4096);
	gc_ring *r = z ? gc_ring_create(8, z) : nullptr;
	if (!r)
		return fail("gc_ring_create");
	static_assert(sizeof(gc_pkt::flags) == 4, "gc_pkt.flags");
	gc_ring_destroy(r);
	gc_zone_destroy(z);

	// LMS option bytes
	gc_lms_info info{};
	unsigned char opt[GC_LMS_OPTLEN];
	inet_pton(AF_INET, "10.1.2.3", &info.src);
	inet_pton(AF_INET, "239.1.2.3", &info.group);
	if (gc_lms_opt_build(opt, GC_LMS_REQUEST, &info) != GC_LMS_OPTLEN || opt[0] != GC_LMS_REQUEST)
		return fail("gc_lms_opt_build");
	close(rx);
	close(sd);
	std::printf("test_cxx: ok\n");
	return 0;
}
