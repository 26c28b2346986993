/* SPDX-License-Identifier: MIT */
/*
 * ltp_window.c - LTP's receive window: where datagrams wait to be delivered,
 * which sequence numbers are missing, and the pending NAK ranges with their
 * retry timers (see ltp.h).  No sockets and no clock here: the caller passes
 * the time, so tests/unit/test_ltp_window.c drives it with a fake one.
 *
 * Sequence numbers are 32 bits on the wire and 64 bits here, extended around
 * the window's base (a datagram more than 2^31 away is old).
 *
 * Bounds: nslots datagrams of slot_size bytes (the reorder window), and
 * max_ranges pending ranges.  A datagram beyond the window is dropped and
 * counted (window_drops), but it still tells us how far the stream has got,
 * so its number is requested once the window has moved.  When every range
 * is in use, new gaps wait (unrequested) until one frees up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lms/ltp.h"

static struct ltp_slot *slot_of(struct ltp_window *w, uint64_t seq)
{
	return &w->slot[seq % w->nslots];
}

static bool in_window(const struct ltp_window *w, uint64_t seq)
{
	return seq >= w->base && seq - w->base < w->nslots;
}

int ltp_window_init(struct ltp_window *w, uint32_t nslots, uint32_t slot_size, uint32_t max_ranges,
		    uint64_t nak_ns, uint32_t max_tries, uint32_t escalate_after, bool unordered,
		    struct gc_ltp_stats *st)
{
	memset(w, 0, sizeof(*w));
	w->nslots = nslots;
	w->slot_size = slot_size;
	w->max_ranges = max_ranges;
	w->nak_ns = nak_ns;
	w->max_tries = max_tries;
	w->escalate_after = escalate_after;
	w->unordered = unordered;
	w->st = st;
	w->slot = calloc(nslots, sizeof(*w->slot));
	w->mem = malloc((size_t)nslots * slot_size);
	w->range = calloc(max_ranges, sizeof(*w->range));
	w->fifo = unordered ? calloc(nslots, sizeof(*w->fifo)) : NULL;
	w->samples = calloc(LTP_RECOVERY_SAMPLES, sizeof(*w->samples));
	if (!w->slot || !w->mem || !w->range || (unordered && !w->fifo) || !w->samples) {
		ltp_window_free(w);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nslots; i++)
		w->slot[i].data = w->mem + (size_t)i * slot_size;
	return 0;
}

void ltp_window_free(struct ltp_window *w)
{
	free(w->slot);
	free(w->mem);
	free(w->range);
	free(w->fifo);
	free(w->samples);
	memset(w, 0, sizeof(*w));
}

/* The 64-bit number of a wire seq, or UINT64_MAX when it would be negative. */
static uint64_t extend(const struct ltp_window *w, uint32_t seq)
{
	int64_t v = (int64_t)w->base + (int32_t)(seq - (uint32_t)w->base);
	return v < 0 ? UINT64_MAX : (uint64_t)v;
}

/* The first datagram or heartbeat fixes where delivery starts: at 0 when the
 * sender still holds the stream's start (trail 0) and it fits the window
 * (receivers started before the sender get everything, even a lost first
 * datagram), else at seq (a late joiner starts where it joined). */
static void start(struct ltp_window *w, uint32_t seq, uint32_t trail)
{
	w->base = trail == 0 && seq < w->nslots ? 0 : seq;
	w->registered = w->base;
	w->started = true;
}

static void learn_high(struct ltp_window *w, uint64_t seq)
{
	if (!w->have_high || seq > w->high) {
		w->high = seq;
		w->have_high = true;
	}
}

static void sample(struct ltp_window *w, uint64_t ns)
{
	uint64_t us = ns / 1000;
	struct gc_ltp_stats *st = w->st;

	st->recovered++;
	st->recovery_us_sum += us;
	if (us > st->recovery_us_max)
		st->recovery_us_max = us;
	w->samples[w->nsamples++ % LTP_RECOVERY_SAMPLES] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

int ltp_window_put(struct ltp_window *w, uint32_t seq, uint32_t trail, bool fin, bool repair,
		   const void *data, size_t len, uint64_t now)
{
	struct gc_ltp_stats *st = w->st;

	if (!w->started)
		start(w, seq, trail);
	if (repair)
		st->repairs_received++;
	uint64_t s = extend(w, seq);
	if (s == UINT64_MAX || s < w->base) {
		st->duplicates++;
		st->repairs_unneeded += repair;
		return LTP_PUT_OLD;
	}
	learn_high(w, s);
	if (fin && !w->have_end) {
		w->have_end = true;
		w->end = s + 1;
	}
	if (!in_window(w, s)) {
		st->window_drops++;
		return LTP_PUT_BEYOND;
	}
	struct ltp_slot *sl = slot_of(w, s);
	if (sl->state == LTP_HAVE || sl->state == LTP_DONE) {
		st->duplicates++;
		st->repairs_unneeded += repair;
		return LTP_PUT_DUP;
	}
	if (sl->state == LTP_LOST) /* given up on, but here after all: deliver it */
		st->lost--;
	memcpy(sl->data, data, len);
	sl->len = (uint16_t)len;
	sl->state = LTP_HAVE;
	sl->seq = s;
	sl->fin = fin;
	st->data_received++;
	if (sl->missing_ns)
		sample(w, now > sl->missing_ns ? now - sl->missing_ns : 0);
	if (w->unordered)
		w->fifo[(w->fifo_head + w->fifo_len++) % w->nslots] = s;
	/* In order so far: no gap to look for (out-of-order datagrams read in
	 * the same batch are not requested either). */
	while (w->registered <= w->high && in_window(w, w->registered) &&
	       (slot_of(w, w->registered)->state == LTP_HAVE ||
		slot_of(w, w->registered)->state == LTP_DONE))
		w->registered++;
	return LTP_PUT_NEW;
}

void ltp_window_heartbeat(struct ltp_window *w, uint32_t next, uint32_t trail, bool fin)
{
	if (!w->started)
		start(w, next, trail);
	uint64_t n = extend(w, next);
	if (n == UINT64_MAX)
		return;
	if (n > w->base)
		learn_high(w, n - 1);
	if (fin && !w->have_end) {
		w->have_end = true;
		w->end = n;
	}
}

static void remove_range(struct ltp_window *w, uint32_t i)
{
	w->range[i] = w->range[--w->nranges]; /* order does not matter */
}

static uint64_t backoff(const struct ltp_window *w, uint32_t tries)
{
	uint64_t t = w->nak_ns;

	for (uint32_t i = 1; i < tries && t < LTP_MAX_BACKOFF_NS; i++)
		t *= 2;
	return t < LTP_MAX_BACKOFF_NS ? t : LTP_MAX_BACKOFF_NS;
}

static void register_gaps(struct ltp_window *w, uint64_t now)
{
	if (!w->have_high)
		return;
	uint64_t upto = w->high < w->base + w->nslots - 1 ? w->high : w->base + w->nslots - 1;
	while (w->registered <= upto) {
		if (slot_of(w, w->registered)->state != LTP_EMPTY) {
			w->registered++;
			continue;
		}
		if (w->nranges == w->max_ranges)
			return; /* bounded: the rest waits for a free range */
		uint64_t lo = w->registered, hi = lo;
		while (hi < upto && slot_of(w, hi + 1)->state == LTP_EMPTY)
			hi++;
		for (uint64_t s = lo; s <= hi; s++)
			slot_of(w, s)->missing_ns = now ? now : 1;
		w->st->gaps_detected += hi - lo + 1;
		w->range[w->nranges++] = (struct ltp_range){ .lo = lo, .hi = hi, .deadline_ns = now };
		w->registered = hi + 1;
	}
}

static size_t due_ranges(struct ltp_window *w, uint64_t now, struct ltp_nak *naks, size_t max,
			 size_t n, bool *freed);

size_t ltp_window_due(struct ltp_window *w, uint64_t now, struct ltp_nak *naks, size_t max)
{
	size_t n = 0;

	if (!w->started)
		return 0;
	/* Twice when ranges were freed: gaps that waited for one go out now. */
	for (int pass = 0; pass < 2; pass++) {
		uint32_t before = w->nranges;
		bool freed = false;
		register_gaps(w, now);
		n = due_ranges(w, now, naks, max, n, &freed);
		if (!freed || before < w->max_ranges)
			break;
	}
	return n;
}

static size_t due_ranges(struct ltp_window *w, uint64_t now, struct ltp_nak *naks, size_t max,
			 size_t n, bool *freed)
{
	for (uint32_t i = 0; i < w->nranges;) {
		struct ltp_range *r = &w->range[i];
		if (r->hi < w->base) {
			remove_range(w, i);
			*freed = true;
			continue;
		}
		if (r->deadline_ns > now || n == max) {
			i++;
			continue;
		}
		/* What is still missing: runs of empty slots in [lo, hi]. */
		struct ltp_nak *k = &naks[n];
		uint64_t first = UINT64_MAX, last = 0, missing = 0;
		k->n = 0;
		for (uint64_t s = r->lo > w->base ? r->lo : w->base; s <= r->hi; s++) {
			if (slot_of(w, s)->state != LTP_EMPTY)
				continue;
			if (first == UINT64_MAX)
				first = s;
			if (missing && s == last + 1 && k->n)
				k->pair[k->n - 1].hi = (uint32_t)s;
			else if (k->n < LTP_NAK_MAX_RANGES)
				k->pair[k->n++] = (struct ltp_pair){ (uint32_t)s, (uint32_t)s };
			else /* out of pairs: the last one stretches over the rest */
				k->pair[k->n - 1].hi = (uint32_t)s;
			last = s;
			missing++;
		}
		if (!missing) {
			remove_range(w, i);
			*freed = true;
			continue;
		}
		r->lo = first;
		r->hi = last;
		if (r->tries >= w->max_tries) {
			for (uint64_t s = first; s <= last; s++) {
				if (slot_of(w, s)->state == LTP_EMPTY)
					slot_of(w, s)->state = LTP_LOST;
			}
			w->st->lost += missing;
			remove_range(w, i);
			*freed = true;
			continue;
		}
		r->tries++;
		k->escalate = r->tries > w->escalate_after;
		r->deadline_ns = now + backoff(w, r->tries);
		n++;
		i++;
	}
	return n;
}

uint64_t ltp_window_deadline(const struct ltp_window *w, uint64_t now)
{
	uint64_t d = UINT64_MAX;

	if (!w->started)
		return d;
	if (w->have_high && w->registered <= w->high && in_window(w, w->registered) &&
	    w->nranges < w->max_ranges)
		return now;
	for (uint32_t i = 0; i < w->nranges; i++) {
		if (w->range[i].deadline_ns < d)
			d = w->range[i].deadline_ns;
	}
	return d;
}

static void clear(struct ltp_slot *sl)
{
	sl->state = LTP_EMPTY;
	sl->missing_ns = 0;
	sl->fin = 0;
	sl->len = 0;
}

static void advance(struct ltp_window *w)
{
	while (slot_of(w, w->base)->state == LTP_DONE && (!w->have_end || w->base < w->end)) {
		clear(slot_of(w, w->base));
		w->base++;
	}
	if (w->registered < w->base)
		w->registered = w->base;
}

static bool end_here(const struct ltp_window *w)
{
	return w->have_end && w->base >= w->end;
}

bool ltp_window_peek(struct ltp_window *w, struct gc_ltp_msg *m, const uint8_t **data, size_t *len)
{
	if (!w->started)
		return false;
	memset(m, 0, sizeof(*m));
	if (w->unordered)
		advance(w);
	if (!end_here(w)) {
		struct ltp_slot *sl = slot_of(w, w->base);
		if (sl->state == LTP_LOST) {
			uint64_t hi = w->base;
			while (in_window(w, hi + 1) && slot_of(w, hi + 1)->state == LTP_LOST &&
			       (!w->have_end || hi + 1 < w->end))
				hi++;
			m->type = GC_LTP_LOSS;
			m->lo = w->base;
			m->hi = hi;
			return true;
		}
		if (!w->unordered && sl->state == LTP_HAVE) {
			m->type = GC_LTP_DATA;
			m->seq = w->base;
			*data = sl->data;
			*len = sl->len;
			return true;
		}
	}
	if (w->unordered && w->fifo_len) {
		uint64_t s = w->fifo[w->fifo_head];
		m->type = GC_LTP_DATA;
		m->seq = s;
		*data = slot_of(w, s)->data;
		*len = slot_of(w, s)->len;
		return true;
	}
	if (end_here(w) && !w->end_reported) {
		m->type = GC_LTP_END;
		m->seq = w->end;
		return true;
	}
	return false;
}

void ltp_window_consume(struct ltp_window *w, const struct gc_ltp_msg *m)
{
	switch (m->type) {
	case GC_LTP_DATA:
		w->st->bytes_delivered += slot_of(w, m->seq)->len;
		if (w->unordered) {
			slot_of(w, m->seq)->state = LTP_DONE;
			w->fifo_head = (w->fifo_head + 1) % w->nslots;
			w->fifo_len--;
			advance(w);
		} else {
			clear(slot_of(w, m->seq));
			w->base++;
		}
		break;
	case GC_LTP_LOSS:
		for (uint64_t s = m->lo; s <= m->hi; s++)
			clear(slot_of(w, s));
		w->base = m->hi + 1;
		if (w->unordered)
			advance(w);
		break;
	case GC_LTP_END: w->end_reported = true; break;
	}
	if (w->registered < w->base)
		w->registered = w->base;
}
