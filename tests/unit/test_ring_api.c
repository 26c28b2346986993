/* SPDX-License-Identifier: MIT */
/*
 * The ring and zone API on its own (no engine): sizes, alignment and seals
 * of zones, claiming up to N - 1, positions, the modifiable region, and
 * every argument error with errno and a message naming the argument.
 */
#include "ring_util.h"

#include <fcntl.h>
#include <stddef.h>

static void expect_msg(const char *want, int line)
{
	if (!strstr(gc_errmsg(), want))
		check_fail(__FILE__, line, "gc_errmsg \"%s\" does not name \"%s\"", gc_errmsg(), want);
}
#define MSG(s) expect_msg(s, __LINE__)

static void zones(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct gc_zone *z = gc_zone_create(5, 1400);

	CHECK(z != NULL);
	CHECK_EQ(gc_zone_size(z), 5 * page);
	for (size_t i = 0; i < 5; i++) {
		unsigned char *b = gc_zone_buf(z, i);
		CHECK(b != NULL);
		CHECK_EQ((uintptr_t)b % (uintptr_t)page, 0);
		CHECK_EQ(gc_zone_offset(z, b), i * (size_t)page);
		memset(b, (int)i, 1400); /* writable */
	}
	CHECK_EQ(gc_zone_offset(z, gc_zone_base(z)), 0);
	CHECK_EQ(gc_zone_offset(z, (char *)gc_zone_base(z) + gc_zone_size(z)), gc_zone_size(z));
	int seals = fcntl(z->fd, F_GET_SEALS);
	CHECK((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
	      (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	CHECK(ftruncate(z->fd, 0) < 0); /* nobody can shrink it under the engine */

	errno = 0;
	CHECK(gc_zone_buf(z, 5) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("nbufs");
	errno = 0;
	CHECK_EQ(gc_zone_offset(z, (char *)gc_zone_base(z) - 1), UINT64_MAX);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(gc_zone_offset(z, &seals), UINT64_MAX);
	CHECK_OK(gc_zone_destroy(z));
	CHECK_OK(gc_zone_destroy(NULL));

	CHECK(gc_zone_create(0, 100) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("nbufs");
	CHECK(gc_zone_create(1, 0) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("buf_size");
	CHECK(gc_zone_create(1u << 30, 1u << 20) == NULL);
	CHECK_EQ(errno, E2BIG);
	CHECK(gc_zone_create(1, SIZE_MAX) == NULL);
	CHECK_EQ(errno, E2BIG);
}

static void rings(void)
{
	struct gc_zone *z = gc_zone_create(1, 4096);
	unsigned first;

	CHECK(gc_ring_create(1, z) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("entries");
	CHECK(gc_ring_create(GC_RING_MAX_ENTRIES + 1, z) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(gc_ring_create(8, NULL) == NULL);
	CHECK_EQ(errno, EFAULT);
	MSG("z");

	struct gc_ring *r = gc_ring_create(5, z);
	CHECK(r != NULL);
	CHECK_EQ(gc_ring_entries(r), 5);
	CHECK_EQ(gc_ring_space(r), 4);
	/* claim clears the flags and counts the claims of the slot */
	struct gc_pkt *p0 = gc_ring_get_pkt(r);
	CHECK(p0 != NULL);
	CHECK_EQ(gc_ring_pos(r, p0), 0);
	CHECK(gc_ring_pkt(r, 0) == p0);
	CHECK_EQ(atomic_load(&p0->flags), 1u << 16);
	CHECK_EQ(gc_ring_mark_dead(r, 0), 1); /* claimed, not published: certain */
	CHECK_EQ(atomic_load(&p0->flags), (1u << 16) | GC_PKT_DEAD);
	for (int i = 1; i < 4; i++)
		CHECK(gc_ring_get_pkt(r) != NULL);
	CHECK(gc_ring_get_pkt(r) == NULL); /* N - 1 = 4 */
	CHECK_EQ(errno, EAGAIN);
	MSG("N-1");
	CHECK_EQ(gc_ring_space(r), 0);
	/* the modifiable region: claimed and unpublished */
	CHECK_OK(gc_ring_swap(r, 0, 3));
	CHECK_EQ(atomic_load(&gc_ring_pkt(r, 3)->flags) & GC_PKT_DEAD, GC_PKT_DEAD);
	CHECK_EQ(atomic_load(&p0->flags) & GC_PKT_DEAD, 0);
	CHECK_ERR(gc_ring_swap(r, 0, 4), EBUSY); /* 4 is a free slot */
	MSG("b 4");
	CHECK_EQ(gc_ring_publish(r), 0); /* detached: nobody asks for notify */
	CHECK_ERR(gc_ring_swap(r, 0, 1), EBUSY);
	MSG("gc_ring_rewind");
	CHECK_EQ(gc_ring_mark_dead(r, 1), 0);
	/* nothing taken (no engine): the rewind gets all four back */
	CHECK_EQ(gc_ring_rewind(r, GC_RING_OLDEST, &first), 4);
	CHECK_EQ(first, 0);
	CHECK_ERR(gc_ring_rewind(r, 2, &first), EINVAL); /* above umod_i (0) now */
	CHECK_EQ(gc_ring_publish(r), 0);
	CHECK_EQ(gc_ring_rewind(r, 2, &first), 2); /* to 2: only 2 and 3 ... */
	CHECK_EQ(first, 2);
	CHECK_EQ(gc_ring_mark_dead(r, 1), 0);		 /* ... and 1 is published again */
	CHECK_ERR(gc_ring_rewind(r, 3, &first), EINVAL); /* above umod_i */
	MSG("umod_i");

	CHECK_ERR(gc_ring_rewind(r, 5, &first), EINVAL);
	MSG("to 5");
	CHECK_ERR(gc_ring_rewind(r, GC_RING_OLDEST, NULL), EFAULT);
	CHECK(gc_ring_pkt(r, 5) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("pos 5");
	CHECK_ERR(gc_ring_mark_dead(r, 5), EINVAL);
	CHECK_ERR(gc_ring_swap(r, 9, 0), EINVAL);
	MSG("a 9");
	CHECK_ERR(gc_ring_acked(r, 7), EINVAL);
	CHECK_ERR(gc_ring_acks(r, NULL, 1), EFAULT);
	CHECK_ERR(gc_ring_notify(r), ENOTCONN);
	MSG("not attached");
	CHECK_ERR(gc_ring_wait(r, 5, 0), EINVAL);
	MSG("nfree");
	CHECK_ERR(gc_ring_wait(r, 4, 0), ENOTCONN);
	CHECK_ERR(gc_ring_detach(r), ENOTCONN);
	CHECK_ERR(gc_ring_detach(NULL), EFAULT);
	CHECK_ERR(gc_ring_status(r, NULL), EFAULT);
	CHECK_ERR(gc_ring_status(NULL, NULL), EFAULT);
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &st));
	CHECK_EQ(st.user_i, 4);
	CHECK_EQ(st.umod_i, 2);
	CHECK_EQ(st.attached, 0);
	gc_ring_destroy(r);
	gc_ring_destroy(NULL);
	CHECK_OK(gc_zone_destroy(z));
}

static void names(void)
{
	CHECK(strcmp(gc_ring_violation_name(GC_RING_OK), "ok") == 0);
	CHECK(strcmp(gc_ring_violation_name(GC_RING_BAD_OFFSET), "bad_offset") == 0);
	CHECK(strcmp(gc_ring_violation_name(GC_RING_DETACHED), "detached") == 0);
	CHECK(strcmp(gc_ring_violation_name(-1), "unknown") == 0);
	CHECK(strcmp(gc_ring_violation_name(GC_RING_VIOLATION_COUNT), "unknown") == 0);
	for (int v = 0; v < GC_RING_VIOLATION_COUNT; v++)
		CHECK(gc_ring_violation_name(v) != NULL && *gc_ring_violation_name(v));
}

static void engines(void)
{
	CHECK(gc_ring_engine_destroy(NULL) == 0); /* every _destroy() takes NULL */
	CHECK(gc_ring_engine_connect(NULL) == NULL);
	CHECK_EQ(errno, EFAULT);
	char longpath[200];
	memset(longpath, 'x', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	CHECK(gc_ring_engine_connect(longpath) == NULL);
	CHECK_EQ(errno, ENAMETOOLONG);
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = longpath);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, ENAMETOOLONG);
	p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = 0x80);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("flags");
	CHECK_ERR(gc_ring_engine_stats(NULL, NULL), EFAULT);
	/* pinned, then stopped at once */
	p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_PIN_CPU,
								 .cpu = 0);
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	CHECK(e != NULL);
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.clients, 1);
	CHECK_EQ(st.rings, 0);
	CHECK_OK(gc_ring_engine_destroy(e));
}

/*
 * opts carry their size (sz, groupcast/common.h): below the 1.0 size is
 * refused; a newer caller's larger struct is taken if the fields this
 * library does not know are zero.  Every sized struct: test_opts.c.
 */
static void params_sizes(void)
{
	struct gc_ring_engine_opts p = { 0 }; /* no sz */
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("opts->sz");
	struct {
		struct gc_ring_engine_opts p;
		unsigned char more[64];
	} big;
	/* an older caller's size: {sz, flags, cpu} */
	memset(&big, 0, sizeof(big));
	big.p.sz = offsetof(struct gc_ring_engine_opts, listen);
	CHECK(gc_ring_engine_create(&big.p) == NULL);
	CHECK_EQ(errno, EINVAL);
	MSG("GC_RING_ENGINE_OPTS_INIT");
	struct gc_ring_engine *e;
	/* a newer caller: zero beyond our struct is fine... */
	memset(&big, 0, sizeof(big));
	big.p.sz = sizeof(big);
	e = gc_ring_engine_create(&big.p);
	CHECK(e != NULL);
	CHECK_OK(gc_ring_engine_destroy(e));
	/* ...a field we do not know is refused, not ignored */
	big.more[5] = 1;
	CHECK(gc_ring_engine_create(&big.p) == NULL);
	CHECK_EQ(errno, E2BIG);
	MSG("this library knows");
	/* NULL stays the defaults */
	e = gc_ring_engine_create(NULL);
	CHECK(e != NULL);
	CHECK_OK(gc_ring_engine_destroy(e));
}

int main(void)
{
	zones();
	rings();
	names();
	engines();
	params_sizes();
	return check_done("ring_api");
}
