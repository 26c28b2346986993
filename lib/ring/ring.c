/* SPDX-License-Identifier: MIT */
/*
 * ring.c - the application's side of the packet ring.
 *
 * The application owns user_i and umod_i and keeps private copies of them
 * (it is their only writer); it reads the engine's kern_i and dev_i.  See
 * kring.c for the engine's side and the three handshakes (publish, rewind,
 * notify, wait) that pair a fence here with one there.
 *
 * Attaching, detaching, flushing and freeing involve the engine: handle.c.
 *
 * Positions are compared in circular ring space relative to a dev_i value
 * read before the positions being compared (dev_i <= kern_i <= user_i holds
 * at every moment, and dev_i only moves forward).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ring/internal.h"

static inline uint32_t pos_from(uint32_t base, uint32_t x, uint32_t n)
{
	return x >= base ? x - base : x + n - base;
}

static inline uint32_t next_pos(const struct gc_ring *r, uint32_t x)
{
	return x + 1 == r->n ? 0 : x + 1;
}

static const char *const violation_names[GC_RING_VIOLATION_COUNT] = {
	[GC_RING_OK] = "ok",
	[GC_RING_BAD_USER_I] = "bad_user_i",
	[GC_RING_USER_I_BACK] = "user_i_back",
	[GC_RING_BAD_UMOD_I] = "bad_umod_i",
	[GC_RING_BAD_OFFSET] = "bad_offset",
	[GC_RING_BAD_LENGTH] = "bad_length",
	[GC_RING_BAD_ACK_TAIL] = "bad_ack_tail",
	[GC_RING_DETACHED] = "detached",
};

GC_EXPORT const char *gc_ring_violation_name(int v)
{
	if (v < 0 || v >= GC_RING_VIOLATION_COUNT)
		return "unknown";
	return violation_names[v];
}

int gc_ring_stopped(const struct gc_ring *r, const char *fn, uint32_t err)
{
	return gc_errf(EPIPE, "%s: the engine stopped serving the ring: %s (position %u, value %llu)",
		       fn, gc_ring_violation_name((int)err),
		       atomic_load_explicit(&r->sh->error_pos, memory_order_relaxed),
		       (unsigned long long)atomic_load_explicit(&r->sh->error_val, memory_order_relaxed));
}

GC_EXPORT struct gc_ring *gc_ring_create(unsigned entries, struct gc_zone *z)
{
	if (entries < 2 || entries > GC_RING_MAX_ENTRIES) {
		gc_seterr(EINVAL, "gc_ring_create: entries %u is not in [2, %u]", entries,
			  GC_RING_MAX_ENTRIES);
		return NULL;
	}
	if (!z) {
		gc_seterr(EFAULT, "gc_ring_create: z is NULL");
		return NULL;
	}
	struct gc_ring *r = calloc(1, sizeof(*r));
	if (!r) {
		gc_seterr(ENOMEM, "gc_ring_create: out of memory");
		return NULL;
	}
	uint64_t size = gc_shm_size(entries, entries, (uint64_t)gc_page_size());
	void *map;
	r->fd = gc_memfd_sealed("gc-ring", size, &map);
	if (r->fd < 0) {
		int err = r->fd;
		free(r);
		return gc_err_ptr(err);
	}
	r->sh = map;
	r->pkts = (struct gc_pkt *)((unsigned char *)map + GC_SHM_PKT_OFF);
	r->acks = (_Atomic uint64_t *)((unsigned char *)map + gc_shm_ack_off(entries));
	r->map_len = size;
	r->n = entries;
	atomic_init(&r->efd, -1);
	r->engine_cpu = -1;
	r->zone = z;
	/* a new memfd reads as zeros: every index and flag starts at 0 */
	r->sh->magic = GC_SHM_MAGIC;
	r->sh->version = GC_SHM_VERSION;
	r->sh->entries = entries;
	r->sh->ack_entries = entries;
	r->sh->size = size;
	gc_own_add(r->fd, map, size);
	atomic_fetch_add_explicit(&z->rings, 1, memory_order_relaxed);
	return r;
}

GC_EXPORT unsigned gc_ring_entries(const struct gc_ring *r)
{
	return r->n;
}

GC_EXPORT struct gc_pkt *gc_ring_get_pkt(struct gc_ring *r)
{
	uint32_t u = r->user, nx = next_pos(r, u);

	if (nx == r->dev_cache) {
		/* acquire: pairs with the engine's release of dev_i; the engine is
		 * done with the record and its zone bytes before we reuse them */
		r->dev_cache = atomic_load_explicit(&r->sh->dev_i, memory_order_acquire);
		if (nx == r->dev_cache) {
			gc_seterr(EAGAIN, "gc_ring_get_pkt: the ring holds N-1 = %u packets", r->n - 1);
			return NULL;
		}
	}
	struct gc_pkt *p = &r->pkts[u];
	/* relaxed: the slot is free; a late kern_acked for the packet that
	 * used it before fails on the new claim count (kring.c) */
	uint32_t f = atomic_load_explicit(&p->flags, memory_order_relaxed);
	atomic_store_explicit(&p->flags, (gc_pkt_stamp(f) + 1) << GC_PKT_STAMP_SHIFT,
			      memory_order_relaxed);
	r->user = nx;
	/* relaxed: published together with the record by umod_i's release */
	atomic_store_explicit(&r->sh->user_i, nx, memory_order_relaxed);
	return p;
}

GC_EXPORT struct gc_pkt *gc_ring_pkt(struct gc_ring *r, unsigned pos)
{
	if (pos >= r->n) {
		gc_seterr(EINVAL, "gc_ring_pkt: pos %u is not below the ring size %u", pos, r->n);
		return NULL;
	}
	return &r->pkts[pos];
}

GC_EXPORT unsigned gc_ring_pos(const struct gc_ring *r, const struct gc_pkt *p)
{
	return (unsigned)(p - r->pkts);
}

void gc_ring_publish_store(struct gc_ring *r)
{
	r->umod = r->user;
	r->mod_from = r->user;
	/* release: the records and zone bytes written before are visible to
	 * the engine's acquire load of umod_i */
	atomic_store_explicit(&r->sh->umod_i, r->user, memory_order_release);
}

GC_EXPORT int gc_ring_publish(struct gc_ring *r)
{
	gc_ring_publish_store(r);
	/* seq_cst fence: the notify handshake (kring.c): umod_i is stored
	 * before kern_notify is loaded, and the engine sets kern_notify before
	 * it loads umod_i, so one of us sees the other */
	atomic_thread_fence(memory_order_seq_cst);
	return (int)atomic_load_explicit(&r->sh->kern_notify, memory_order_relaxed);
}

GC_EXPORT int gc_ring_notify(struct gc_ring *r)
{
	/* seq_cst both: either the unlink's exchange comes first and we load
	 * -1, or it sees us counted and waits before closing (internal.h) */
	atomic_fetch_add(&r->efd_users, 1);
	int efd = atomic_load(&r->efd);
	int ret = 0;
	/* acquire: the error details were stored before it */
	uint32_t err = atomic_load_explicit(&r->sh->error, memory_order_acquire);
	uint64_t one = 1;
	if (efd < 0)
		ret = gc_errf(ENOTCONN, "gc_ring_notify: the ring is not attached to an engine");
	else if (err)
		ret = gc_ring_stopped(r, "gc_ring_notify", err);
	else if (write(efd, &one, sizeof(one)) != (ssize_t)sizeof(one) && errno != EAGAIN)
		ret = gc_errf(errno, "gc_ring_notify: write to the ring's eventfd failed");
	atomic_fetch_sub_explicit(&r->efd_users, 1, memory_order_release);
	return (int)gc_err(ret);
}

GC_EXPORT int gc_ring_rewind(struct gc_ring *r, unsigned to, unsigned *first)
{
	if (!first)
		return gc_seterr(EFAULT, "gc_ring_rewind: first is NULL");
	if (to != GC_RING_OLDEST && to >= r->n)
		return gc_seterr(EINVAL, "gc_ring_rewind: to %u is not below the ring size %u", to,
				 r->n);
	/* dev_i first, then kern_i: every position read after d is >= d */
	uint32_t d = atomic_load_explicit(&r->sh->dev_i, memory_order_acquire);
	uint32_t k0 = atomic_load_explicit(&r->sh->kern_i, memory_order_acquire);
	uint32_t n = r->n, pu = pos_from(d, r->user, n), target = k0;

	r->dev_cache = d;
	if (to != GC_RING_OLDEST) {
		uint32_t pt = pos_from(d, to, n), pk = pos_from(d, k0, n);
		uint32_t pm = pos_from(d, r->umod, n);
		/* our umod_i outside [dev_i, user_i] is an older rewind the engine
		 * has sent past: nothing above kern_i is published */
		if (pm > pu || pm < pk)
			pm = pk;
		if (pt > pm && pt <= pu)
			return gc_seterr(EINVAL, "gc_ring_rewind: to %u is above umod_i %u: not published",
					 to, r->umod);
		/* at or below kern_i (or already sent): as far as possible */
		if (pt <= pu && pt > pk)
			target = to;
	}
	/* release: target may lie above our last umod_i (after a rewind the
	 * engine gave records back); what was published stays published, with
	 * what we changed since */
	atomic_store_explicit(&r->sh->umod_i, target, memory_order_release);
	/* seq_cst fence: the rewind handshake of Figure 6 (kring.c): our
	 * umod_i store comes before our kern_i load, and the engine's kern_i
	 * store before its umod_i load, so it never reads [safe, user_i) */
	atomic_thread_fence(memory_order_seq_cst);
	uint32_t k1 = atomic_load_explicit(&r->sh->kern_i, memory_order_acquire);
	uint32_t safe = target;
	if (pos_from(d, k1, n) > pos_from(d, target, n)) {
		/*
		 * The engine took more meanwhile (Figure 6).  Raise umod_i to
		 * its kern_i: left below it, umod_i would fall behind dev_i,
		 * and once user_i came round the ring past it, the engine would
		 * read it as publishing everything claimed since.  The records
		 * below k1 are the engine's (or it gave them back unread and
		 * sends them as they are); release as above.
		 */
		safe = k1;
		atomic_store_explicit(&r->sh->umod_i, k1, memory_order_release);
	}
	r->umod = safe;
	r->mod_from = safe;
	*first = safe;
	return (int)(pu - pos_from(d, safe, n));
}

static int modifiable(const struct gc_ring *r, uint32_t pos)
{
	return pos_from(r->mod_from, pos, r->n) < pos_from(r->mod_from, r->user, r->n);
}

GC_EXPORT int gc_ring_mark_dead(struct gc_ring *r, unsigned pos)
{
	if (pos >= r->n)
		return gc_seterr(EINVAL, "gc_ring_mark_dead: pos %u is not below the ring size %u",
				 pos, r->n);
	/* relaxed: a modifiable record reaches the engine with the next
	 * publish (release); a published one may be skipped or not either way */
	atomic_fetch_or_explicit(&r->pkts[pos].flags, GC_PKT_DEAD, memory_order_relaxed);
	return modifiable(r, pos);
}

GC_EXPORT int gc_ring_swap(struct gc_ring *r, unsigned a, unsigned b)
{
	if (a >= r->n || b >= r->n)
		return gc_seterr(EINVAL, "gc_ring_swap: %s %u is not below the ring size %u",
				 a >= r->n ? "a" : "b", a >= r->n ? a : b, r->n);
	if (!modifiable(r, a) || !modifiable(r, b))
		return gc_seterr(EBUSY,
				 "gc_ring_swap: %s %u is not modifiable (published; "
				 "gc_ring_rewind() first)",
				 !modifiable(r, a) ? "a" : "b", !modifiable(r, a) ? a : b);
	if (a == b)
		return 0;
	struct gc_pkt *pa = &r->pkts[a], *pb = &r->pkts[b];
	uint64_t off = pa->off, seq = pa->user_seq;
	uint32_t len = pa->len;
	pa->off = pb->off;
	pa->len = pb->len;
	pa->user_seq = pb->user_seq;
	pb->off = off;
	pb->len = len;
	pb->user_seq = seq;
	/* move user_dead with the packet; relaxed as in gc_ring_mark_dead() */
	uint32_t fa = atomic_load_explicit(&pa->flags, memory_order_relaxed);
	uint32_t fb = atomic_load_explicit(&pb->flags, memory_order_relaxed);
	if ((fa ^ fb) & GC_PKT_DEAD) {
		atomic_fetch_xor_explicit(&pa->flags, GC_PKT_DEAD, memory_order_relaxed);
		atomic_fetch_xor_explicit(&pb->flags, GC_PKT_DEAD, memory_order_relaxed);
	}
	return 0;
}

GC_EXPORT int gc_ring_acked(const struct gc_ring *r, unsigned pos)
{
	if (pos >= r->n)
		return gc_seterr(EINVAL, "gc_ring_acked: pos %u is not below the ring size %u", pos,
				 r->n);
	/* acquire: pairs with the engine's release CAS */
	return !!(atomic_load_explicit(&r->pkts[pos].flags, memory_order_acquire) & GC_PKT_ACKED);
}

GC_EXPORT ssize_t gc_ring_acks(struct gc_ring *r, uint64_t *user_seq, size_t max)
{
	if (!user_seq && max)
		return gc_seterr(EFAULT, "gc_ring_acks: user_seq is NULL");
	/* acquire: the entries below head were written before it */
	uint64_t head = atomic_load_explicit(&r->sh->ack_head, memory_order_acquire);
	uint64_t t = r->ack_tail;
	size_t n = 0;

	while (t < head && n < max) {
		user_seq[n++] = atomic_load_explicit(&r->acks[t % r->n], memory_order_relaxed);
		t++;
	}
	r->ack_tail = t;
	/* release: we are done reading the entries before the engine reuses them */
	atomic_store_explicit(&r->sh->ack_tail, t, memory_order_release);
	return (ssize_t)n;
}

GC_EXPORT unsigned gc_ring_space(struct gc_ring *r)
{
	/* acquire: as in gc_ring_get_pkt() */
	r->dev_cache = atomic_load_explicit(&r->sh->dev_i, memory_order_acquire);
	return r->n - 1 - pos_from(r->dev_cache, r->user, r->n);
}

GC_EXPORT int gc_ring_wait(struct gc_ring *r, unsigned nfree, int timeout_ms)
{
	if (nfree > r->n - 1)
		return gc_seterr(EINVAL, "gc_ring_wait: nfree %u is above N-1 = %u", nfree, r->n - 1);
	uint64_t deadline = timeout_ms >= 0 ? gc_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;

	for (;;) {
		/* acquire: the error details were stored before it */
		uint32_t err = atomic_load_explicit(&r->sh->error, memory_order_acquire);
		if (err)
			return (int)gc_err(gc_ring_stopped(r, "gc_ring_wait", err));
		if (gc_ring_space(r) >= nfree)
			return 0;
		if (!r->eng)
			return gc_seterr(ENOTCONN, "gc_ring_wait: the ring is not attached to an engine");
		if (++r->wait_seq == 0)
			r->wait_seq = 1;
		/* release: the engine (acquire) then sees our user_i; + seq_cst
		 * fence: the wait handshake (kring.c) */
		atomic_store_explicit(&r->sh->user_wait, (uint64_t)r->wait_seq << 32 | nfree,
				      memory_order_release);
		atomic_thread_fence(memory_order_seq_cst);
		uint32_t d = atomic_load_explicit(&r->sh->dev_i, memory_order_acquire);
		int ms = -1;
		if (timeout_ms >= 0) {
			uint64_t now = gc_now_ns();
			ms = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
		}
		if (r->n - 1 - pos_from(d, r->user, r->n) < nfree && ms != 0 &&
		    !atomic_load_explicit(&r->sh->error, memory_order_acquire))
			gc_futex_wait(&r->sh->dev_i, d, ms);
		atomic_store_explicit(&r->sh->user_wait, 0, memory_order_relaxed);
		if (timeout_ms >= 0 && gc_now_ns() >= deadline && gc_ring_space(r) < nfree)
			return gc_seterr(ETIMEDOUT,
					 "gc_ring_wait: %u free slots did not come within "
					 "%d ms",
					 nfree, timeout_ms);
	}
}

/* sized (groupcast/common.h); 1.0 ends at acks_lost */
static const struct gc_sized status_t =
	GC_SIZED(gc_ring_status, GC_RING_STATUS_INIT, acks_lost, acks_lost);

GC_EXPORT int gc_ring_status(const struct gc_ring *r, struct gc_ring_status *stp)
{
	if (!r || !stp)
		return gc_seterr(EFAULT, "gc_ring_status: %s is NULL", r ? "st" : "r");
	const struct gc_ring_shm *sh = r->sh;
	struct gc_ring_status now = { 0 }, *st = &now;

	/* relaxed throughout: a snapshot for diagnostics */
	st->dev_i = atomic_load_explicit(&sh->dev_i, memory_order_relaxed);
	st->kern_i = atomic_load_explicit(&sh->kern_i, memory_order_relaxed);
	st->umod_i = atomic_load_explicit(&sh->umod_i, memory_order_relaxed);
	st->user_i = atomic_load_explicit(&sh->user_i, memory_order_relaxed);
	st->kern_notify = atomic_load_explicit(&sh->kern_notify, memory_order_relaxed);
	st->attached = r->eng != NULL;
	st->error = (int)atomic_load_explicit(&sh->error, memory_order_relaxed);
	st->error_pos = atomic_load_explicit(&sh->error_pos, memory_order_relaxed);
	st->error_val = atomic_load_explicit(&sh->error_val, memory_order_relaxed);
	st->sent = atomic_load_explicit(&sh->sent, memory_order_relaxed);
	st->bytes = atomic_load_explicit(&sh->bytes, memory_order_relaxed);
	st->dead = atomic_load_explicit(&sh->dead, memory_order_relaxed);
	st->send_errors = atomic_load_explicit(&sh->send_errors, memory_order_relaxed);
	st->last_errno = atomic_load_explicit(&sh->last_errno, memory_order_relaxed);
	st->acks = atomic_load_explicit(&sh->ack_head, memory_order_relaxed);
	st->acks_lost = atomic_load_explicit(&sh->acks_lost, memory_order_relaxed);
	return (int)gc_err(gc_sized_out(&status_t, "gc_ring_status", "st", stp, st));
}
