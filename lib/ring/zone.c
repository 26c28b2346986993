/* SPDX-License-Identifier: MIT */
/*
 * zone.c - packet zones: page-aligned packet buffers in a memfd.
 *
 * The application writes payloads into the zone; ring records name them by
 * offset and length; the engine maps the same memfd read-only and sends from
 * it, so no byte is copied between the two.  The memfd is sealed against
 * shrinking (F_SEAL_SHRINK): a mapping of it can never fault with SIGBUS, which
 * is what lets an engine in another process map a zone it does not trust.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ring/internal.h"

/* The ring memfds this process created and mapped, which an engine started
 * here uses instead of mapping them again (internal.h). */
struct own_map {
	struct own_map *next;
	dev_t dev;
	ino_t ino;
	const void *base;
	uint64_t size;
	unsigned refs; /* engine connections using it */
};
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct own_map *own_maps;

void gc_own_add(int fd, const void *base, uint64_t size)
{
	struct stat st;
	struct own_map *m = calloc(1, sizeof(*m));

	if (!m || fstat(fd, &st) < 0) {
		free(m); /* not shared then: the engine maps its own */
		return;
	}
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->base = base;
	m->size = size;
	pthread_mutex_lock(&own_lock);
	m->next = own_maps;
	own_maps = m;
	pthread_mutex_unlock(&own_lock);
}

void *gc_own_share(dev_t dev, ino_t ino, uint64_t size)
{
	void *base = NULL;

	pthread_mutex_lock(&own_lock);
	for (struct own_map *m = own_maps; m; m = m->next) {
		if (m->dev == dev && m->ino == ino && m->size == size) {
			m->refs++;
			base = (void *)m->base;
			break;
		}
	}
	pthread_mutex_unlock(&own_lock);
	return base;
}

void gc_own_unshare(const void *base)
{
	pthread_mutex_lock(&own_lock);
	for (struct own_map *m = own_maps; m; m = m->next) {
		if (m->base == base) {
			m->refs--;
			break;
		}
	}
	pthread_mutex_unlock(&own_lock);
}

int gc_own_forget(const void *base, const char *fn)
{
	int busy = 0;

	pthread_mutex_lock(&own_lock);
	for (struct own_map **pp = &own_maps; *pp; pp = &(*pp)->next) {
		struct own_map *m = *pp;
		if (m->base == base) {
			busy = m->refs != 0;
			if (!busy) {
				*pp = m->next;
				free(m);
			}
			break;
		}
	}
	pthread_mutex_unlock(&own_lock);
	/* the engine lets go when the ring is detached (synchronously), so
	 * this guards the rule rather than happening */
	return busy ? gc_errf(EBUSY, "%s: an engine still uses the memory", fn) : 0;
}

/* A sealed memfd of size bytes, mapped read-write at *map: its descriptor,
 * or -errno with the message. */
int gc_memfd_sealed(const char *name, size_t size, void **map)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return gc_errf(errno, "memfd_create(%s) failed", name);
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int err = errno;
		close(fd);
		return gc_errf(err, "%s: sizing or sealing a %zu-byte memfd failed", name, size);
	}
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		int err = errno;
		close(fd);
		return gc_errf(err, "%s: mmap of %zu bytes failed", name, size);
	}
	return fd;
}

GC_EXPORT struct gc_zone *gc_zone_create(size_t nbufs, size_t buf_size)
{
	size_t page = (size_t)gc_page_size();

	if (nbufs == 0) {
		gc_seterr(EINVAL, "gc_zone_create: nbufs is 0");
		return NULL;
	}
	if (buf_size == 0) {
		gc_seterr(EINVAL, "gc_zone_create: buf_size is 0");
		return NULL;
	}
	if (buf_size > GC_ZONE_MAX || nbufs > GC_ZONE_MAX / ((buf_size + page - 1) / page * page)) {
		gc_seterr(E2BIG, "gc_zone_create: nbufs %zu * buf_size %zu is above the 64 GiB limit",
			  nbufs, buf_size);
		return NULL;
	}
	struct gc_zone *z = calloc(1, sizeof(*z));
	if (!z) {
		gc_seterr(ENOMEM, "gc_zone_create: out of memory");
		return NULL;
	}
	z->buf_size = (buf_size + page - 1) / page * page;
	z->nbufs = nbufs;
	z->size = z->buf_size * nbufs;
	void *map;
	z->fd = gc_memfd_sealed("gc-zone", z->size, &map);
	if (z->fd < 0) {
		int err = z->fd;
		free(z);
		return gc_err_ptr(err);
	}
	z->base = map;
	return z;
}

GC_EXPORT int gc_zone_destroy(struct gc_zone *z)
{
	if (!z)
		return 0;
	if (atomic_load_explicit(&z->rings, memory_order_relaxed))
		return gc_seterr(EBUSY, "gc_zone_destroy: %u ring(s) still use the zone",
				 atomic_load_explicit(&z->rings, memory_order_relaxed));
	/* an engine has its own mapping (server.c): ours is ours alone */
	munmap(z->base, z->size);
	close(z->fd);
	free(z);
	return 0;
}

GC_EXPORT void *gc_zone_buf(const struct gc_zone *z, size_t i)
{
	if (!z || i >= z->nbufs) {
		gc_seterr(EINVAL, "gc_zone_buf: i %zu is not below nbufs %zu", i, z ? z->nbufs : 0);
		return NULL;
	}
	return z->base + i * z->buf_size;
}

GC_EXPORT uint64_t gc_zone_offset(const struct gc_zone *z, const void *p)
{
	const unsigned char *c = p;

	if (!z || c < z->base || c > z->base + z->size) {
		gc_seterr(EINVAL, "gc_zone_offset: p %p is not inside the zone", p);
		return UINT64_MAX;
	}
	return (uint64_t)(c - z->base);
}

GC_EXPORT size_t gc_zone_size(const struct gc_zone *z)
{
	return z ? z->size : 0;
}

GC_EXPORT void *gc_zone_base(const struct gc_zone *z)
{
	return z ? z->base : NULL;
}
