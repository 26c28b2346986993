/* SPDX-License-Identifier: MIT */
/*
 * The engine maps only memfds on tmpfs.  A hugetlbfs memfd (MFD_HUGETLB)
 * takes F_SEAL_SHRINK like any memfd, but a hole punched into it frees the
 * huge page under the engine's mapping, which then faults (SIGBUS): as ring
 * or as zone, it is refused with EINVAL and a reason, and the engine goes on
 * serving.
 *
 * MFD_HUGETLB memfds need reserved huge pages: the test reserves two through
 * /proc/sys/vm/nr_hugepages (root) and puts the old value back.  Exit 77
 * (skipped) when that is not possible.
 */
#include "ring_util.h"

#include <fcntl.h>
#include <sys/mman.h>

#define HUGE (2u << 20)

static long saved_pages = -1;

static long read_long(const char *file)
{
	FILE *f = fopen(file, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_long(const char *file, long v)
{
	FILE *f = fopen(file, "w");

	if (!f)
		return -1;
	int ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void restore_pages(void)
{
	if (saved_pages >= 0)
		write_long("/proc/sys/vm/nr_hugepages", saved_pages);
}

/* The number of free 2 MiB huge pages, from /proc/meminfo. */
static long free_huge_pages(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	long v = -1, size = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Free: %ld", &v);
		sscanf(line, "Hugepagesize: %ld kB", &size);
	}
	fclose(f);
	return size == 2048 ? v : -1;
}

/* A hugetlbfs memfd of `size` bytes sealed against shrinking, or -1. */
static int huge_memfd(size_t size)
{
	int fd = memfd_create("t-huge", MFD_CLOEXEC | MFD_HUGETLB | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int raw_attach(struct gc_ring_engine *e, uint32_t entries, uint64_t zone_size, int ringfd,
		      int zonefd, int sd)
{
	struct gc_req q = { .op = GC_OP_ATTACH,
			    .version = GC_PROTO_VERSION,
			    .entries = entries,
			    .ack_entries = entries,
			    .zone_size = zone_size };
	const int fds[3] = { ringfd, zonefd, sd };
	struct gc_rep rep;
	int rfd = -1;
	int r = gc_client_call(e, "attach", &q, fds, 3, &rep, &rfd);

	if (rfd >= 0)
		close(rfd);
	return (int)gc_err(r);
}

int main(void)
{
	if (free_huge_pages() < 1) {
		long now = read_long("/proc/sys/vm/nr_hugepages");
		if (now < 0 || geteuid() != 0) {
			skip("no free huge pages, and cannot reserve any (needs root)");
			return 77;
		}
		saved_pages = now;
		atexit(restore_pages);
		if (write_long("/proc/sys/vm/nr_hugepages", now + 2) < 0 || free_huge_pages() < 1) {
			skip("the kernel gave no huge pages");
			return 77;
		}
	}
	int huge = huge_memfd(HUGE);
	if (huge < 0) {
		printf("SKIP: cannot make a sealed MFD_HUGETLB memfd: %s\n", strerror(errno));
		return 77;
	}

	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.quiet = 1);
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	struct rx *rx = rx_open(AF_INET, 1);
	struct gc_zone *z = gc_zone_create(1, 4096);
	int sd = udp_connected(&rx[0]);
	enum { N = 8 };
	size_t rsize = gc_shm_size(N, N, (uint64_t)gc_page_size());
	void *map;
	int ringfd = gc_memfd_sealed("t-ring", rsize, &map);
	CHECK(e && z && ringfd >= 0);
	munmap(map, rsize);

	/* as the zone */
	CHECK_ERR(raw_attach(e, N, HUGE, ringfd, huge, sd), EINVAL);
	CHECK(strstr(gc_errmsg(), "zone") && strstr(gc_errmsg(), "hugetlbfs"));
	/* as the ring */
	CHECK_ERR(raw_attach(e, N, z->size, huge, z->fd, sd), EINVAL);
	CHECK(strstr(gc_errmsg(), "ring") && strstr(gc_errmsg(), "hugetlbfs"));
	/* the same request with tmpfs memfds is served */
	CHECK_OK(raw_attach(e, N, z->size, ringfd, z->fd, sd));

	/* and the engine serves a ring as usual */
	struct gc_ring *r = gc_ring_create(N, z);
	CHECK(r != NULL);
	CHECK_OK(gc_ring_attach(r, e, sd));
	memcpy(gc_zone_buf(z, 0), "tmpfs", 5);
	put_pkt(r, 0, 5, 0);
	CHECK(gc_ring_submit(r) >= 0);
	RX_EXPECT(&rx[0], "tmpfs", 5);

	gc_ring_destroy(r);
	close(huge);
	close(ringfd);
	close(sd);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	rx_close(rx, 1);
	return check_done("ring_hugetlb");
}
