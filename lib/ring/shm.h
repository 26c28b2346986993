/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the layout of a ring's memfd, shared by the application and the
 * engine (possibly in another process).
 *
 *   offset 0            struct gc_ring_shm (header, indexes, counters)
 *   GC_SHM_PKT_OFF      struct gc_pkt records[entries]
 *   ack_off             _Atomic uint64_t acks[entries]   (acknowledged user_seq log)
 *
 * Every field has one writer.  The engine never trusts what the application
 * wrote: it keeps its own entries, offsets and indexes and checks every value
 * it reads (kring.c).  The application trusts the engine.
 */
#ifndef GC_RING_SHM_H
#define GC_RING_SHM_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <groupcast/ring.h>

#define GC_SHM_MAGIC 0x67637269u /* "gcri" */
#define GC_SHM_VERSION 1u
#define GC_SHM_PKT_OFF 512u

struct gc_ring_shm {
	/* Written once by the creator (informative: the engine keeps its own). */
	uint32_t magic, version, entries, ack_entries;
	uint64_t size;

	/* Engine-owned: only the engine writes these. */
	alignas(64) _Atomic uint32_t kern_i;
	_Atomic uint32_t dev_i;	      /* also the futex word of gc_ring_wait() */
	_Atomic uint32_t kern_notify; /* 1: the engine stopped polling, notify it */
	_Atomic uint32_t error;	      /* enum gc_ring_violation */
	_Atomic uint32_t error_pos;
	_Atomic int32_t last_errno;
	_Atomic uint64_t error_val;
	_Atomic uint64_t ack_head; /* acknowledgements written so far */

	/* Engine-owned counters, on their own line (written once per batch). */
	alignas(64) _Atomic uint64_t sent;
	_Atomic uint64_t bytes, dead, send_errors, acks_lost;

	/* Application-owned. */
	alignas(64) _Atomic uint32_t umod_i;
	_Atomic uint32_t user_i;

	/* Application-owned, rarely written. */
	alignas(64) _Atomic uint64_t user_wait; /* wait sequence << 32 | free slots wanted */
	_Atomic uint64_t ack_tail;		/* acknowledgements read so far */
};

_Static_assert(sizeof(struct gc_ring_shm) <= GC_SHM_PKT_OFF, "header overlaps records");
_Static_assert(sizeof(struct gc_pkt) == 24, "packet record is 24 bytes");

/* Offset of the acknowledgement log, and the memfd size, for `entries` records. */
static inline uint64_t gc_shm_ack_off(uint32_t entries)
{
	return (GC_SHM_PKT_OFF + (uint64_t)entries * sizeof(struct gc_pkt) + 63) & ~(uint64_t)63;
}
static inline uint64_t gc_shm_size(uint32_t entries, uint32_t ack_entries, uint64_t page)
{
	uint64_t end = gc_shm_ack_off(entries) + (uint64_t)ack_entries * sizeof(uint64_t);

	return (end + page - 1) / page * page;
}

/* flags: bits 0..15 are GC_PKT_*, bits 16..31 count the claims of the slot */
#define GC_PKT_STAMP_SHIFT 16
static inline uint32_t gc_pkt_stamp(uint32_t flags)
{
	return flags >> GC_PKT_STAMP_SHIFT;
}

#endif
