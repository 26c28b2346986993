/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the ring engine daemon's request decoder
 * (gc_srv_decode() in lib/ring/proto.c), the one input another process
 * controls.  The input is a header choosing how many descriptors came with
 * the message and which (from a fixed pool of real ones: sealed memfds of
 * various sizes, unsealed memfds, connected and unconnected UDP sockets, a
 * TCP socket, a pipe, an eventfd, a Unix socket, a directory, /dev/null, a
 * closed number), the recvmsg() flags, and then the message bytes.
 *
 * Whatever comes, the decoder must answer: every refusal has an errno and a
 * message, the reply header is always there, and an accepted request is
 * exactly what the engine may act on: the right version and size, a
 * sequence number, a known op, and for ATTACH three descriptors that are two
 * sealed memfds big enough for the layout and a connected UDP socket.  It
 * must not close, keep or change any descriptor.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target ring_req_fuzz
 *   build-fuzz/fuzz/ring_req_fuzz -max_total_time=300 fuzz/corpus/ring_req
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ring/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                             \
	do {                                                                                   \
		if (!(c)) {                                                                    \
			fprintf(stderr, "ring_req_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                               \
		}                                                                              \
	} while (0)

enum { POOL = 16 };
static int pool[POOL];

static int memfd(uint64_t size, int seals)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0 || (seals && fcntl(fd, F_ADD_SEALS, seals) < 0))
		abort();
	return fd;
}

static int udp(int connected)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(9),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	if (fd < 0 || (connected && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0))
		abort();
	return fd;
}

static void make_pool(void)
{
	int p[2];
	uint64_t page = (uint64_t)gc_page_size();

	pool[0] = memfd(gc_shm_size(2, 2, page), F_SEAL_SHRINK);
	pool[1] = memfd(gc_shm_size(64, 64, page), F_SEAL_SHRINK | F_SEAL_GROW);
	pool[2] = memfd(4096, F_SEAL_SHRINK | F_SEAL_SEAL);
	pool[3] = memfd((uint64_t)1 << 20, F_SEAL_SHRINK);
	pool[4] = memfd(0, F_SEAL_SHRINK);
	pool[5] = memfd(8192, 0);			    /* not sealed */
	pool[6] = memfd((uint64_t)64 << 30, F_SEAL_SHRINK); /* sparse: the largest zone */
	pool[7] = udp(1);
	pool[8] = udp(0);
	pool[9] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pipe2(p, O_CLOEXEC) < 0)
		abort();
	pool[10] = p[0];
	pool[11] = eventfd(0, EFD_CLOEXEC);
	pool[12] = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	pool[13] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pool[14] = open("/dev/null", O_RDWR | O_CLOEXEC);
	pool[15] = 1000000; /* not open */
	for (int i = 0; i < POOL - 1; i++)
		REQUIRE(pool[i] >= 0);
}

static int is_sealed_memfd(int fd, uint64_t need)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	return fstat(fd, &st) == 0 && seals >= 0 && (seals & F_SEAL_SHRINK) &&
		(uint64_t)st.st_size >= need;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		make_pool();
		ready = 1;
	}
	if (size < 3)
		return 0;
	/* header: byte 0 is nfds (0..4, low bits) and flags (MSG_TRUNC 0x40,
	 * MSG_CTRUNC 0x80); bytes 1..2 hold one pool index per descriptor,
	 * 4 bits each, lowest first */
	int nfds = (data[0] & 0x3f) % 5;
	int mflags = (data[0] & 0x40 ? MSG_TRUNC : 0) | (data[0] & 0x80 ? MSG_CTRUNC : 0);
	unsigned picks = (unsigned)data[1] | (unsigned)data[2] << 8;
	int fds[4];
	for (int i = 0; i < nfds; i++)
		fds[i] = pool[(picks >> (4 * i)) & (POOL - 1)];
	data += 3;
	size -= 3;
	/* the message, as recvmsg() would deliver it into a gc_req buffer */
	unsigned char buf[sizeof(struct gc_req)];
	size_t n = size < sizeof(buf) ? size : sizeof(buf);
	if (size > sizeof(buf))
		mflags |= MSG_TRUNC;
	memcpy(buf, data, n);

	struct gc_req q;
	struct gc_rep rep;
	memset(&rep, 0, sizeof(rep));
	int r = gc_srv_decode(buf, n, mflags, fds, nfds, &q, &rep);

	REQUIRE(rep.version == GC_PROTO_VERSION);
	REQUIRE(memchr(rep.msg, '\0', sizeof(rep.msg)) != NULL);
	if (r < 0) {
		REQUIRE(r == -rep.err && rep.err > 0 && rep.msg[0]);
	} else {
		REQUIRE(r == 0 && rep.err == 0);
		REQUIRE(n == sizeof(q) && !(mflags & (MSG_TRUNC | MSG_CTRUNC)));
		REQUIRE(memcmp(&q, buf, sizeof(q)) == 0);
		REQUIRE(q.version == GC_PROTO_VERSION && q.seq != 0 && rep.seq == q.seq);
		REQUIRE(q.op >= GC_OP_ATTACH && q.op <= GC_OP_HELLO);
		if (q.op == GC_OP_ATTACH) {
			REQUIRE(nfds == 3);
			REQUIRE(q.entries >= 2 && q.entries <= GC_RING_MAX_ENTRIES);
			REQUIRE(q.ack_entries == q.entries);
			REQUIRE(q.zone_size >= 1 && q.zone_size <= ((uint64_t)64 << 30));
			uint64_t need = gc_shm_size(q.entries, q.ack_entries, (uint64_t)gc_page_size());
			REQUIRE(is_sealed_memfd(fds[0], need));
			REQUIRE(is_sealed_memfd(fds[1], q.zone_size));
			char why[160];
			REQUIRE(gc_udp_check(fds[2], why, sizeof(why)) == 0);
		} else {
			REQUIRE(nfds == 0);
		}
	}
	/* nothing closed */
	for (int i = 0; i < POOL - 1; i++)
		REQUIRE(fcntl(pool[i], F_GETFD) >= 0);
	return 0;
}
