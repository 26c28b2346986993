/* SPDX-License-Identifier: MIT */
/*
 * rtp.c - broadcast mode (the Helix role): one RTP stream in, one RTP stream
 * per subscriber out, as one gc_sendgroup() per address family.
 *
 * RTP (RFC 3550): every subscriber gets its own 12-byte fixed header as the
 * per-recipient prepend, the rest of the datagram (CSRCs, extension, payload,
 * padding) is the shared part:
 *   V P X CC M PT  copied from the producer
 *   sequence       producer's + the subscriber's offset: the first datagram it
 *                  gets carries its random base, then +1 per producer packet
 *                  (the producer's own gaps stay visible)
 *   timestamp      producer's + the subscriber's random offset
 *   SSRC           the subscriber's (random, or ssrc= in JOIN)
 * When the producer restarts (new SSRC, or a sequence jump of more than 3000
 * ahead or 100 back), every subscriber's numbering carries on from where it
 * was: sequence +1, timestamp + the wall time since the last packet at
 * --clock-rate.
 *
 * RTCP: compound packets from the producer's address to the RTCP port are
 * rewritten per subscriber and sent to its RTCP port: the producer's SSRC in
 * SR, RR, SDES, BYE and APP becomes the subscriber's, the SR's RTP timestamp
 * gets the subscriber's offset, its packet and octet counts become what the
 * relay sent that subscriber.  Receiver reports from subscribers are counted
 * and keep the subscriber alive when they report on the SSRC the relay gave
 * that subscriber (only the subscriber saw it, in its OK JOIN reply and its
 * stream); they are not passed to the producer.
 *
 * Input is taken only from --producer (or from anyone with --any-producer).
 * Loops are cut: RTP from an address and port that is one of the subscribers
 * (a relay subscribed to us that we are subscribed to: with symmetric RTP its
 * stream comes from the port we send to), or carrying an SSRC this relay
 * generated for a subscriber (our own stream come back), is dropped and
 * counted (rtp_loops).  Relay subscribers (relay= in JOIN) get the stream's
 * own SSRC, sequence and timestamp instead of their own (see upstream.c).
 */
#include "relay.h"
#include "../log.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DROPOUT 3000
#define MAX_MISORDER 100
#define RTCP_MAX 1500
#define RTCP_MAX_PATCH 64

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static bool same_port(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return addr_same_host(a, b) && addr_port(a) == addr_port(b);
}

static bool producer_ok(struct relay *r, const struct sockaddr_storage *from, uint64_t now)
{
	if (r->nup && upstream_is_current(r, from, now))
		return true; /* --upstream: the one the stream comes from now */
	if (!r->have_producer_filter)
		return r->any_producer;
	struct source s = { .addr = r->producer_net, .mask = r->producer_mask };
	return rc_match(&s, from);
}

/* Rebuild the recipient arrays after joins, leaves and expiries. */
static bool rebuild(struct relay *r)
{
	struct subs *t = &r->subs;
	if (!t->dirty)
		return true;
	if (t->nactive > r->bcap) {
		size_t cap = r->bcap ? r->bcap : 64;
		while (cap < t->nactive)
			cap *= 2;
		for (int f = 0; f < 2; f++) {
			struct gc_giovec *g = realloc(r->brec[f], cap * sizeof(*g));
			if (!g)
				return false;
			r->brec[f] = g;
			struct sub **w = realloc(r->bwho[f], cap * sizeof(*w));
			if (!w)
				return false;
			r->bwho[f] = w;
		}
		r->bcap = cap;
	}
	if (!relay_gerrno(r, t->nactive))
		return false;
	r->bn[0] = r->bn[1] = 0;
	for (uint32_t k = 0; k < t->nactive; k++) {
		struct sub *s = &t->slot[t->active[k]];
		int f = relay_family_index(s->addr.ss_family);
		if (r->data_fd[f] < 0)
			continue; /* no socket of that family: never sent */
		size_t i = r->bn[f]++;
		r->brec[f][i] = (struct gc_giovec){ .dest = s->addr, .prepend = { s->hdr, 12 } };
		r->bwho[f][i] = s;
	}
	t->dirty = false;
	return true;
}

/* RFC 3550 header checks; returns the payload octet count for SR counts, or -1. */
static long rtp_check(const uint8_t *d, size_t len)
{
	if (len < 12 || (d[0] >> 6) != 2)
		return -1;
	size_t h = 12 + 4u * (d[0] & 0x0f);
	if (len < h)
		return -1;
	if (d[0] & 0x10) { /* extension */
		if (len < h + 4)
			return -1;
		h += 4 + 4u * get16(d + h + 2);
		if (len < h)
			return -1;
	}
	size_t pad = 0;
	if (d[0] & 0x20) {
		pad = d[len - 1];
		if (pad == 0 || h + pad > len)
			return -1;
	}
	return (long)(len - h - pad);
}

/* Remote senders drive these: rate-limited (log.h). */
static struct log_limit lim_rejected = LOG_LIMIT_INIT(LL_WARNING, "rtp_rejected");
static struct log_limit lim_invalid = LOG_LIMIT_INIT(LL_WARNING, "rtp_invalid");
static struct log_limit lim_loop = LOG_LIMIT_INIT(LL_WARNING, "rtp_loop");
static struct log_limit lim_rtcp = LOG_LIMIT_INIT(LL_WARNING, "rtcp_rejected");
static struct log_limit lim_producer = LOG_LIMIT_INIT(LL_NOTICE, "producer_changed");

/* One line for a datagram from `from` dropped for lim's reason. */
static void dropped(struct log_limit *lim, const struct sockaddr_storage *from, size_t len,
		    const char *why)
{
	char a[80];
	if (log_enabled(lim->level))
		log_limited(lim, "src=%s bytes=%zu reason=%s", addr_str(from, a, sizeof(a)), len, why);
}

static void producer_track(struct relay *r, uint32_t ssrc, uint16_t seq, uint32_t ts,
			   const struct sockaddr_storage *from, uint64_t now)
{
	struct producer *p = &r->prod;
	if (!p->have) {
		p->have = true;
		p->ssrc = ssrc;
		p->addr = *from;
		p->last_seq = seq;
		p->last_ts = ts;
		p->last_ns = now;
		return;
	}
	uint16_t ahead = (uint16_t)(seq - p->last_seq);
	bool jump = ahead >= MAX_DROPOUT && ahead < (uint16_t)(65536 - MAX_MISORDER);
	if (ssrc != p->ssrc || jump) {
		/* carry on: next out sequence = last + 1, timestamp advanced by wall time */
		uint64_t el = now - p->last_ns;
		uint32_t adv = (uint32_t)((double)el * r->clock_rate / 1e9);
		p->g_seq_off = (uint16_t)(p->g_seq_off + (uint16_t)(p->last_seq + 1 - seq));
		p->g_ts_off = p->g_ts_off + (p->last_ts + adv - ts);
		r->c.producer_changes++;
		if (r->debug || ssrc != p->ssrc) {
			char a[80];
			log_limited(&lim_producer,
				    "src=%s ssrc=0x%08x seq=%u was_ssrc=0x%08x was_seq=%u numbering=%s",
				    addr_str(from, a, sizeof(a)), ssrc, seq, p->ssrc, p->last_seq,
				    "continues");
		}
		p->ssrc = ssrc;
		p->addr = *from;
		p->last_seq = seq;
		p->last_ts = ts;
	} else if (ahead < (uint16_t)(65536 - MAX_MISORDER)) {
		p->last_seq = seq; /* in order (or a small gap): newest so far */
		p->last_ts = ts;
	}
	p->last_ns = now;
}

void rtp_forward(struct relay *r, const uint8_t *d, size_t len, const struct sockaddr_storage *from,
		 uint64_t now)
{
	if (!producer_ok(r, from, now)) {
		r->c.rtp_rejected++;
		dropped(&lim_rejected, from, len, "not_from_producer");
		return;
	}
	long payload = rtp_check(d, len);
	if (payload < 0) {
		r->c.rtp_invalid++;
		dropped(&lim_invalid, from, len, "not_rtp_v2");
		return;
	}
	if (d[1] >= 200 && d[1] <= 204) { /* RTCP multiplexed on the RTP port (RFC 5761) */
		rtcp_forward(r, d, len, from, now);
		return;
	}
	uint16_t seq = get16(d + 2);
	uint32_t ts = get32(d + 4), ssrc = get32(d + 8);
	struct sub *own = subs_by_ssrc(&r->subs, ssrc);
	if (own || subs_find(&r->subs, from)) {
		/* A loop: this datagram goes no further.  When it comes from the
		 * producer we follow (its address and port), it may instead be a
		 * producer that picked one of our SSRCs (odds of one in 2^32 per
		 * subscriber): that subscriber gets a new SSRC, and the stream
		 * passes from the next datagram on.  Not for other sources: a
		 * reflector's datagrams still in flight with the old SSRC would
		 * then pass as new. */
		if (own && r->prod.have && same_port(from, &r->prod.addr))
			subs_new_ssrc(&r->subs, own);
		r->c.rtp_loops++;
		dropped(&lim_loop, from, len, own ? "relay_ssrc" : "from_subscriber");
		return;
	}
	if (r->nup && !upstream_dedupe(r, ssrc, seq))
		return; /* relayed already, from the upstream before a switch */
	if (r->nup)
		r->prod.addr = *from; /* RTCP too comes from the new upstream */
	producer_track(r, ssrc, seq, ts, from, now);
	r->prod.packets++;
	r->prod.octets += (uint64_t)payload;
	if (!rebuild(r)) {
		r->c.errors += r->subs.nactive;
		return;
	}
	uint16_t gseq = (uint16_t)(seq + r->prod.g_seq_off);
	uint32_t gts = ts + r->prod.g_ts_off;
	struct iovec shared = { (void *)(d + 12), len - 12 };
	for (int f = 0; f < 2; f++) {
		size_t n = r->bn[f];
		if (!n)
			continue;
		struct sub **who = r->bwho[f];
		int fd = r->data_fd[f];
		/* the copies join the receive batch's (batch.c): each with its
		 * header of its own, the rest of the datagram after it */
		bool queue = batch_pick(r, fd, r->data_twin[f], r->data_engine[f], n) >= 0;
		struct outq *q = &r->q;
		q->account = rtp_account;
		for (size_t i = 0; i < n; i++) {
			struct sub *s = who[i];
			if (s->fresh) {
				s->seq_off = (uint16_t)(s->seq_base - gseq);
				s->fresh = false;
			}
			uint8_t *h = queue ? q->hdr[q->n + i] : s->hdr;
			h[0] = d[0];
			h[1] = d[1];
			if (s->relay_id) {
				/* a relay: the header as the producer sent it, not this
				 * relay's continuity offsets (g_seq_off, g_ts_off), which
				 * depend on when it saw a producer change: two upstreams
				 * then number alike, and the relay below dedupes across a
				 * switch on the producer's own numbers */
				put16(h + 2, seq);
				put32(h + 4, ts);
				put32(h + 8, ssrc);
			} else {
				put16(h + 2, (uint16_t)(gseq + s->seq_off));
				put32(h + 4, gts + s->ts_off);
				put32(h + 8, s->ssrc);
			}
			if (queue) {
				struct gc_giovec *g = &q->rec[q->n + i];
				g->dest = s->addr;
				g->prepend = (struct iovec){ h, 12 };
				g->append = shared;
				q->who[q->n + i] = s;
				q->payload[q->n + i] = (uint32_t)payload;
			}
		}
		if (queue) {
			q->n += n;
			continue;
		}
		int *ge = r->gerrno;
		relay_group_send(r, fd, &shared, r->brec[f], n, ge);
		for (size_t i = 0; i < n; i++)
			rtp_account(r, who[i], ge[i], len, (uint32_t)payload);
	}
}

void rtp_account(struct relay *r, void *sub, int e, size_t len, uint32_t payload)
{
	struct sub *s = sub;
	if (e) {
		s->st.errors++;
		s->st.last_errno = e;
		r->c.errors++;
	} else {
		s->st.packets++;
		s->st.octets += len;
		s->packets++;
		s->payload_octets += payload;
		r->c.out++;
		r->c.out_octets += len;
	}
}

/* ---- RTCP ---------------------------------------------------------------- */

enum { P_SSRC, P_SR };
struct patch {
	uint16_t off;
	uint8_t kind;
};

/* Validate a compound packet and list the fields to rewrite; -1 if invalid. */
static int rtcp_scan(const uint8_t *d, size_t len, uint32_t prod, struct patch *pt, size_t *np)
{
	size_t off = 0, n = 0;
	if (len < 8)
		return -1;
#define ADD(o, k)                                               \
	do {                                                    \
		if (n == RTCP_MAX_PATCH)                        \
			return -1;                              \
		pt[n++] = (struct patch){ (uint16_t)(o), (k) }; \
	} while (0)
	while (off < len) {
		if (len - off < 4 || (d[off] >> 6) != 2)
			return -1;
		uint8_t pt_ = d[off + 1], cnt = d[off] & 0x1f;
		size_t plen = 4u * (get16(d + off + 2) + 1u);
		if (plen > len - off)
			return -1;
		const uint8_t *q = d + off;
		switch (pt_) {
		case 200: /* SR */
			if (plen < 28)
				return -1;
			if (get32(q + 4) == prod)
				ADD(off + 4, P_SSRC);
			ADD(off, P_SR);
			break;
		case 201: /* RR */
		case 204: /* APP */
			if (plen < 8)
				return -1;
			if (get32(q + 4) == prod)
				ADD(off + 4, P_SSRC);
			break;
		case 202: { /* SDES: cnt chunks of SSRC + items, each padded to 4 */
			size_t c = 4;
			for (unsigned k = 0; k < cnt; k++) {
				if (c + 4 > plen)
					return -1;
				if (get32(q + c) == prod)
					ADD(off + c, P_SSRC);
				c += 4;
				for (;;) {
					if (c >= plen)
						return -1;
					if (q[c] == 0) {
						c = (c + 4) & ~(size_t)3; /* end of items, pad */
						break;
					}
					if (c + 2 > plen || c + 2 + q[c + 1] > plen)
						return -1;
					c += 2u + q[c + 1];
				}
				if (c > plen)
					return -1;
			}
			break;
		}
		case 203: /* BYE */
			if (4 + 4u * cnt > plen)
				return -1;
			for (unsigned k = 0; k < cnt; k++)
				if (get32(q + 4 + 4 * k) == prod)
					ADD(off + 4 + 4 * k, P_SSRC);
			break;
		default: break;
		}
		off += plen;
	}
#undef ADD
	*np = n;
	return 0;
}

static struct sub *sub_by_rtcp(struct relay *r, const struct sockaddr_storage *from)
{
	uint16_t port = addr_port(from);
	struct sockaddr_storage k = *from;
	/* common case: RTCP port = RTP port + 1 */
	if (port > 1) {
		if (k.ss_family == AF_INET)
			((struct sockaddr_in *)&k)->sin_port = htons((uint16_t)(port - 1));
		else
			((struct sockaddr_in6 *)&k)->sin6_port = htons((uint16_t)(port - 1));
		struct sub *s = subs_find(&r->subs, &k);
		if (s && s->rtcp_port == port)
			return s;
	}
	return NULL;
}

/* Whether a compound packet has a report block (SR or RR) about ssrc. */
static bool reports_on(const uint8_t *d, size_t len, uint32_t ssrc)
{
	for (size_t off = 0; len - off >= 8;) {
		uint8_t pt = d[off + 1], rc = d[off] & 0x1f;
		size_t plen = 4u * (get16(d + off + 2) + 1u), first = pt == 200 ? 28 : 8;
		if ((d[off] >> 6) != 2 || plen > len - off)
			return false;
		if (pt == 200 || pt == 201)
			for (size_t k = 0; k < rc && first + 24 * (k + 1) <= plen; k++)
				if (get32(d + off + first + 24 * k) == ssrc)
					return true;
		off += plen;
	}
	return false;
}

void rtcp_forward(struct relay *r, const uint8_t *d, size_t len,
		  const struct sockaddr_storage *from, uint64_t now)
{
	batch_flush(r); /* sender reports count what was sent before them */
	r->c.rtcp_in++;
	struct sub *me = sub_by_rtcp(r, from);
	if (me) {
		/* a subscriber's receiver report is proof of life only when it is
		 * about the SSRC that subscriber alone was told: a forged source
		 * address cannot keep a stream going to someone who left */
		if (reports_on(d, len, me->ssrc)) {
			me->seen_ns = now;
			r->c.rtcp_from_subscribers++;
		} else {
			r->c.rtcp_rejected++;
		}
		return;
	}
	bool ok = producer_ok(r, from, now);
	bool from_producer = r->prod.have ? addr_same_host(from, &r->prod.addr) : ok;
	if (!from_producer || !ok) {
		r->c.rtcp_rejected++;
		dropped(&lim_rtcp, from, len, "not_from_producer");
		return;
	}
	struct patch pt[RTCP_MAX_PATCH];
	size_t np = 0;
	if (len > RTCP_MAX || !r->prod.have || rtcp_scan(d, len, r->prod.ssrc, pt, &np)) {
		r->c.rtcp_invalid++;
		dropped(&lim_rtcp, from, len, "invalid_rtcp");
		return;
	}
	if (!rebuild(r))
		return;
	size_t n = r->bn[0] + r->bn[1];
	if (n * len > r->rtcp_buf_cap) {
		uint8_t *b = realloc(r->rtcp_buf, n * len);
		if (!b)
			return;
		r->rtcp_buf = b;
		r->rtcp_buf_cap = n * len;
	}
	size_t used = 0;
	for (int f = 0; f < 2; f++) {
		if (r->rtcp_fd[f] < 0 || r->bn[f] == 0)
			continue;
		struct gc_giovec *rec = r->brec[f];
		size_t m = 0;
		/* a compact recipient list: subscribers that want RTCP */
		if (r->bn[f] > r->rcap) {
			struct gc_giovec *g = realloc(r->rrec, r->bn[f] * sizeof(*g));
			if (g)
				r->rrec = g;
			struct sub **w = g ? realloc(r->rwho, r->bn[f] * sizeof(*w)) : NULL;
			if (!g || !w)
				return;
			r->rwho = w;
			r->rcap = r->bn[f];
		}
		struct gc_giovec *rr = r->rrec;
		struct sub **rw = r->rwho;
		for (size_t i = 0; i < r->bn[f]; i++) {
			struct sub *s = r->bwho[f][i];
			if (!s->rtcp_port || s->fresh)
				continue; /* no RTCP wanted, or no RTP sent yet */
			uint8_t *b = r->rtcp_buf + used;
			used += len;
			memcpy(b, d, len);
			for (size_t k = 0; k < np; k++) {
				uint8_t *q = b + pt[k].off;
				if (pt[k].kind == P_SSRC) {
					if (!s->relay_id) /* a relay keeps the stream's SSRC */
						put32(q, s->ssrc);
				} else { /* SR sender info */
					uint32_t ts = get32(q + 16) +
						(s->relay_id ? 0 : r->prod.g_ts_off + s->ts_off);
					put32(q + 16, ts);
					put32(q + 20, (uint32_t)s->packets);
					put32(q + 24, (uint32_t)s->payload_octets);
				}
			}
			rr[m] = (struct gc_giovec){ .dest = rec[i].dest, .prepend = { b, len } };
			if (rr[m].dest.ss_family == AF_INET)
				((struct sockaddr_in *)&rr[m].dest)->sin_port = htons(s->rtcp_port);
			else
				((struct sockaddr_in6 *)&rr[m].dest)->sin6_port = htons(s->rtcp_port);
			rw[m++] = s;
		}
		if (!m)
			continue;
		int *ge = r->gerrno;
		relay_group_send(r, r->rtcp_fd[f], NULL, rr, m, ge);
		for (size_t i = 0; i < m; i++) {
			if (ge[i]) {
				rw[i]->rtcp_errors++;
				r->c.errors++;
			} else {
				rw[i]->rtcp_packets++;
				r->c.rtcp_out++;
			}
		}
	}
}
