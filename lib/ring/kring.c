/* SPDX-License-Identifier: MIT */
/*
 * kring.c - the engine's ("kernel's") side of one packet ring.
 *
 * The engine owns kern_i and dev_i and keeps private copies of all four
 * indexes, of the ring size and of the zone size.  It reads the application's
 * umod_i, user_i, records and acknowledgement-log index as untrusted input:
 * every value is read once (no double fetch), checked, and only then used.  A
 * ring that breaks a rule is stopped (gc_kring_stop) and nothing else is
 * affected: no loop here depends on a value the application controls, except
 * bounded ones, so a hostile application can neither crash nor hang the
 * engine, nor make it read outside the zone.
 *
 * Positions are compared in circular ring space relative to dev_i:
 * pos(x) = (x - dev_i) mod N.
 *
 * Memory ordering, the three handshakes with the application (ring.c):
 *
 *  publish   app: records...; umod_i = u (release)
 *            eng: umod_i (acquire); then records            -> sees the records
 *  rewind    app: umod_i = v; fence(seq_cst); kern_i
 *  (Fig. 6)  eng: kern_i = k + m; fence(seq_cst); umod_i    -> at least one side
 *            sees the other's store, so the engine never reads a record the
 *            application may be modifying: records are read only after the
 *            confirming load, and only below it.
 *  notify    app: umod_i = u; fence(seq_cst); kern_notify
 *            eng: kern_notify = 1; fence(seq_cst); umod_i  -> no lost wake-up
 *  wait      app: user_wait = w (release); fence(seq_cst); dev_i
 *            eng: dev_i = d; fence(seq_cst); user_wait (acquire), user_i
 *                                                          -> no lost wake-up:
 *            the engine wakes only when the waiter's own test (free slots
 *            counted from its user_i) passes, so a waiter that saw this
 *            dev_i does not sleep, and one that did not sees it differ in
 *            FUTEX_WAIT
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "ring/internal.h"

/* One read of a plain field the application may be writing concurrently. */
#define READ_ONCE_U64(p) (*(const volatile uint64_t *)(p))
#define READ_ONCE_U32(p) (*(const volatile uint32_t *)(p))

static inline uint32_t rpos(const struct gc_kring *k, uint32_t x)
{
	return x >= k->dev ? x - k->dev : x + k->n - k->dev;
}

static inline uint32_t radd(const struct gc_kring *k, uint32_t x, uint32_t d)
{
	uint64_t y = (uint64_t)x + d;

	return y >= k->n ? (uint32_t)(y - k->n) : (uint32_t)y;
}

int gc_kring_stop(struct gc_kring *k, int code, uint32_t pos, uint64_t val)
{
	if (k->error)
		return -EPROTO;
	k->error = (uint32_t)code;
	/* relaxed: the application reads the error after it sees kern_notify or
	 * wakes up; error is stored last with release so the details come first */
	atomic_store_explicit(&k->sh->error_pos, pos, memory_order_relaxed);
	atomic_store_explicit(&k->sh->error_val, val, memory_order_relaxed);
	atomic_store_explicit(&k->sh->error, (uint32_t)code, memory_order_release);
	/* ask for a notify, so that the next gc_ring_submit() reports EPIPE */
	atomic_store_explicit(&k->sh->kern_notify, 1, memory_order_release);
	return -EPROTO;
}

int gc_kring_init(struct gc_kring *k, void *shm, uint64_t shm_size, uint32_t entries,
		  uint32_t ack_entries, uint64_t zone_size, uint32_t max_len)
{
	memset(k, 0, sizeof(*k));
	if (entries < 2 || entries > GC_RING_MAX_ENTRIES || ack_entries == 0 ||
	    ack_entries > GC_RING_MAX_ENTRIES ||
	    shm_size < gc_shm_ack_off(entries) + (uint64_t)ack_entries * sizeof(uint64_t))
		return -EINVAL;
	k->sh = shm;
	k->pkts = (struct gc_pkt *)((unsigned char *)shm + GC_SHM_PKT_OFF);
	k->acks = (_Atomic uint64_t *)((unsigned char *)shm + gc_shm_ack_off(entries));
	k->n = entries;
	k->ack_n = ack_entries;
	k->zone_size = zone_size;
	k->max_len = max_len;

	/* Start where a previous engine stopped (kern_i), or at 0 for a new ring.
	 * The value is untrusted; any position < N is a valid start. */
	uint32_t start = atomic_load_explicit(&k->sh->kern_i, memory_order_relaxed);
	if (start >= entries)
		return -ERANGE;
	k->dev = k->kern = k->user = k->umod = start;
	/* the acknowledgement log goes on too, if its indexes make sense */
	uint64_t tail = atomic_load_explicit(&k->sh->ack_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&k->sh->ack_head, memory_order_relaxed);
	k->ack_head = head >= tail && head - tail <= ack_entries ? head : tail;
	k->woken_seq = 0;
	/* the counters go on from a previous attachment (statistics only) */
	k->sent = atomic_load_explicit(&k->sh->sent, memory_order_relaxed);
	k->bytes = atomic_load_explicit(&k->sh->bytes, memory_order_relaxed);
	k->dead = atomic_load_explicit(&k->sh->dead, memory_order_relaxed);
	k->send_errors = atomic_load_explicit(&k->sh->send_errors, memory_order_relaxed);
	k->acks_lost = atomic_load_explicit(&k->sh->acks_lost, memory_order_relaxed);
	atomic_store_explicit(&k->sh->error, GC_RING_OK, memory_order_relaxed);
	atomic_store_explicit(&k->sh->error_pos, 0, memory_order_relaxed);
	atomic_store_explicit(&k->sh->error_val, 0, memory_order_relaxed);
	atomic_store_explicit(&k->sh->ack_head, k->ack_head, memory_order_relaxed);
	atomic_store_explicit(&k->sh->dev_i, start, memory_order_relaxed);
	atomic_store_explicit(&k->sh->kern_notify, 0, memory_order_relaxed);
	/* release: the fields above are visible to whoever sees kern_i */
	atomic_store_explicit(&k->sh->kern_i, start, memory_order_release);
	return 0;
}

/* Read user_i: it must be < N and must not move backwards (nor lap dev_i). */
static int load_user(struct gc_kring *k)
{
	/* relaxed: user_i only bounds umod_i; the records themselves are
	 * published by umod_i's release store, loaded (acquire) before this */
	uint32_t us = atomic_load_explicit(&k->sh->user_i, memory_order_relaxed);

	if (us >= k->n)
		return gc_kring_stop(k, GC_RING_BAD_USER_I, 0, us);
	if (rpos(k, us) < rpos(k, k->user))
		return gc_kring_stop(k, GC_RING_USER_I_BACK, k->user, us);
	k->user = us;
	return 0;
}

/*
 * umod_i as read: how many records [kern_i, umod_i) it publishes.  umod_i
 * outside (kern_i, user_i] publishes nothing: at or below kern_i the
 * application rewound (Figures 5 and 6); "behind" dev_i, in the free slots, it
 * rewound to a kern_i it read before the engine sent more, and has not yet
 * raised umod_i to the kern_i it read after its fence (ring.c).  Neither is
 * an error; the engine just does not send.  Only umod_i >= N is.  (umod_i must
 * not stay behind: once user_i came round past it, it would publish.)
 */
static int published(struct gc_kring *k, uint32_t um, uint32_t *avail)
{
	*avail = 0;
	if (um >= k->n)
		return gc_kring_stop(k, GC_RING_BAD_UMOD_I, 0, um);
	k->umod = um;
	uint32_t pk = rpos(k, k->kern), pm = rpos(k, um), pu = rpos(k, k->user);
	if (pm > pk && pm <= pu)
		*avail = pm - pk;
	return 0;
}

int gc_kring_plan(struct gc_kring *k, uint32_t *avail)
{
	*avail = 0;
	if (k->error)
		return -EPROTO;
	/* acquire: pairs with the application's release in gc_ring_publish() */
	uint32_t um = atomic_load_explicit(&k->sh->umod_i, memory_order_acquire);
	if (load_user(k) < 0)
		return -EPROTO;
	return published(k, um, avail);
}

int gc_kring_claim(struct gc_kring *k, uint32_t want, struct gc_sent *out, uint32_t *nout, uint32_t *ntaken)
{
	*nout = *ntaken = 0;
	if (k->error)
		return -EPROTO;
	if (want == 0)
		return 0;
	if (want > k->n - 1)
		want = k->n - 1;

	uint32_t start = k->kern, end = radd(k, start, want);
	/*
	 * Claim first, then confirm.  relaxed store + seq_cst fence, paired
	 * with the application's umod_i store + fence + kern_i load in
	 * gc_ring_rewind(): either the application sees kern_i = end (and
	 * leaves these records alone), or we see its smaller umod_i below and
	 * give back what it may now be modifying.
	 */
	atomic_store_explicit(&k->sh->kern_i, end, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	uint32_t um = atomic_load_explicit(&k->sh->umod_i, memory_order_acquire);
	uint32_t avail;
	if (load_user(k) < 0 || published(k, um, &avail) < 0) {
		atomic_store_explicit(&k->sh->kern_i, start, memory_order_relaxed);
		return -EPROTO;
	}
	uint32_t got = avail < want ? avail : want;
	if (got < want) {
		end = radd(k, start, got);
		/* release: hand back records we never read */
		atomic_store_explicit(&k->sh->kern_i, end, memory_order_release);
	}

	/* The records [start, end) are ours now: read each field once, check. */
	uint32_t n = 0, p = start;
	for (uint32_t i = 0; i < got; i++, p = radd(k, p, 1)) {
		const struct gc_pkt *r = &k->pkts[p];
		uint64_t off = READ_ONCE_U64(&r->off);
		uint32_t len = READ_ONCE_U32(&r->len);
		uint64_t seq = READ_ONCE_U64(&r->user_seq);
		/* relaxed: ordered after the acquire load of umod_i above */
		uint32_t fl = atomic_load_explicit(&r->flags, memory_order_relaxed);

		if (len > k->max_len) {
			atomic_store_explicit(&k->sh->kern_i, start, memory_order_relaxed);
			return gc_kring_stop(k, GC_RING_BAD_LENGTH, p, len);
		}
		if (off > k->zone_size || len > k->zone_size - off) {
			atomic_store_explicit(&k->sh->kern_i, start, memory_order_relaxed);
			return gc_kring_stop(k, GC_RING_BAD_OFFSET, p, off);
		}
		if (fl & GC_PKT_DEAD) {
			k->dead++;
			continue;
		}
		out[n++] = (struct gc_sent){
			.off = off, .user_seq = seq, .len = len, .pos = p, .stamp = gc_pkt_stamp(fl)
		};
	}
	k->kern = end;
	*nout = n;
	*ntaken = got;
	return 0;
}

int gc_kring_take(struct gc_kring *k, uint32_t max, struct gc_sent *out, uint32_t *nout, uint32_t *ntaken)
{
	uint32_t avail;

	*nout = *ntaken = 0;
	if (gc_kring_plan(k, &avail) < 0)
		return -EPROTO;
	if (avail == 0)
		return 0;
	return gc_kring_claim(k, avail < max ? avail : max, out, nout, ntaken);
}

int gc_kring_done(struct gc_kring *k, uint32_t pos)
{
	/* pos comes from the engine itself: between dev_i and kern_i */
	if (pos >= k->n || rpos(k, pos) > rpos(k, k->kern))
		return 0;
	k->dev = pos;
	/* relaxed: counters are statistics */
	atomic_store_explicit(&k->sh->sent, k->sent, memory_order_relaxed);
	atomic_store_explicit(&k->sh->bytes, k->bytes, memory_order_relaxed);
	atomic_store_explicit(&k->sh->dead, k->dead, memory_order_relaxed);
	/* release: we are done reading these records and their zone bytes
	 * (the socket copied them) before the application reuses them */
	atomic_store_explicit(&k->sh->dev_i, pos, memory_order_release);
	/* seq_cst fence: the wait handshake (see the top of the file) */
	atomic_thread_fence(memory_order_seq_cst);
	/* acquire: pairs with gc_ring_wait()'s release store, so the user_i
	 * the waiter stored before it is visible below */
	uint64_t w = atomic_load_explicit(&k->sh->user_wait, memory_order_acquire);
	if (!w)
		return 0;
	uint32_t seq = (uint32_t)(w >> 32), want = (uint32_t)w;
	/*
	 * Free slots as the waiter counts them: with its user_i, not with our
	 * copy from the last claim, which may be older.  Waking on an
	 * overestimate would be lost: the waiter, still short of room, sleeps
	 * on the dev_i we just stored, and we would not wake it again.  (A
	 * user_i that makes no sense only decides this wake-up.)
	 */
	uint32_t us = atomic_load_explicit(&k->sh->user_i, memory_order_relaxed);
	uint32_t used = us < k->n ? rpos(k, us) : rpos(k, k->user);
	if (seq == k->woken_seq || used > k->n - 1 || k->n - 1 - used < want)
		return 0;
	k->woken_seq = seq;
	return 1;
}

void gc_kring_wake(struct gc_kring *k)
{
	gc_futex_wake(&k->sh->dev_i);
}

int gc_kring_park(struct gc_kring *k)
{
	uint32_t avail;

	if (k->error)
		return -EPROTO;
	atomic_store_explicit(&k->sh->kern_notify, 1, memory_order_relaxed);
	/* seq_cst fence: the notify handshake (see the top of the file) */
	atomic_thread_fence(memory_order_seq_cst);
	if (gc_kring_plan(k, &avail) < 0)
		return -EPROTO;
	if (avail) {
		atomic_store_explicit(&k->sh->kern_notify, 0, memory_order_relaxed);
		return 0;
	}
	return 1;
}

void gc_kring_unpark(struct gc_kring *k)
{
	if (k->error)
		return;
	/* relaxed: the engine polls umod_i (acquire) after this */
	atomic_store_explicit(&k->sh->kern_notify, 0, memory_order_relaxed);
}

int gc_kring_ack(struct gc_kring *k, const struct gc_sent *p)
{
	if (k->error)
		return -EPROTO;
	if (p->pos < k->n) {
		_Atomic uint32_t *f = &k->pkts[p->pos].flags;
		uint32_t cur = atomic_load_explicit(f, memory_order_relaxed);
		/* Bounded: the application may keep changing the word. */
		for (int tries = 0; tries < 8; tries++) {
			if (gc_pkt_stamp(cur) != p->stamp || (cur & GC_PKT_ACKED))
				break; /* slot reused (the log still has it), or done */
			/* release: pairs with gc_ring_acked()'s acquire */
			if (atomic_compare_exchange_weak_explicit(f, &cur, cur | GC_PKT_ACKED,
								  memory_order_release,
								  memory_order_relaxed))
				break;
		}
	}
	/* acquire: the application read the entries before moving ack_tail */
	uint64_t tail = atomic_load_explicit(&k->sh->ack_tail, memory_order_acquire);
	if (tail > k->ack_head || k->ack_head - tail > k->ack_n)
		return gc_kring_stop(k, GC_RING_BAD_ACK_TAIL, 0, tail);
	if (k->ack_head - tail == k->ack_n) {
		k->acks_lost++;
		atomic_store_explicit(&k->sh->acks_lost, k->acks_lost, memory_order_relaxed);
		return 0;
	}
	atomic_store_explicit(&k->acks[k->ack_head % k->ack_n], p->user_seq, memory_order_relaxed);
	k->ack_head++;
	/* release: the entry is written before the head that covers it */
	atomic_store_explicit(&k->sh->ack_head, k->ack_head, memory_order_release);
	return 0;
}

void gc_kring_errors(struct gc_kring *k, uint64_t n, int err)
{
	if (!n)
		return;
	k->send_errors += n;
	atomic_store_explicit(&k->sh->send_errors, k->send_errors, memory_order_relaxed);
	atomic_store_explicit(&k->sh->last_errno, err, memory_order_relaxed);
}

void gc_kring_describe(const struct gc_kring *k, char *buf, size_t len)
{
	uint32_t pos = atomic_load_explicit(&k->sh->error_pos, memory_order_relaxed);
	unsigned long long val = atomic_load_explicit(&k->sh->error_val, memory_order_relaxed);

	switch (k->error) {
	case GC_RING_BAD_USER_I:
		snprintf(buf, len, "user_i %llu is not below the ring size %u", val, k->n);
		break;
	case GC_RING_USER_I_BACK:
		snprintf(buf, len,
			 "user_i moved from %u to %llu: backwards, or past dev_i %u (more than "
			 "N-1 = %u packets)",
			 pos, val, k->dev, k->n - 1);
		break;
	case GC_RING_BAD_UMOD_I:
		snprintf(buf, len, "umod_i %llu is not below the ring size %u", val, k->n);
		break;
	case GC_RING_BAD_OFFSET:
		snprintf(buf, len, "record %u: offset %llu with its length is outside the %llu-byte zone",
			 pos, val, (unsigned long long)k->zone_size);
		break;
	case GC_RING_BAD_LENGTH:
		snprintf(buf, len, "record %u: length %llu is above the largest datagram (%u)", pos,
			 val, k->max_len);
		break;
	case GC_RING_BAD_ACK_TAIL:
		snprintf(buf, len, "ack_tail %llu is outside [%llu, %llu]", val,
			 (unsigned long long)(k->ack_head >= k->ack_n ? k->ack_head - k->ack_n : 0),
			 (unsigned long long)k->ack_head);
		break;
	case GC_RING_DETACHED: snprintf(buf, len, "detached"); break;
	default: snprintf(buf, len, "served"); break;
	}
}
