/* SPDX-License-Identifier: MIT */
/*
 * control.c - broadcast mode: the subscriber table and the control protocol.
 *
 * The table has a fixed capacity (--max-subscribers), allocated at start:
 * a flood of JOINs fills it and is then refused, and nothing else grows.
 * Lookup is by (address, RTP port) through a chained hash.
 *
 * Control protocol: one UDP datagram per request, ASCII, at most 512 bytes,
 * words separated by blanks, command case-insensitive:
 *
 *   JOIN [PORT] [rtcp=PORT|rtcp=none] [ssrc=HEX]   subscribe, or refresh
 *   LEAVE [PORT]                                   unsubscribe
 *   KEEPALIVE [PORT]   (or PING)                   refresh
 *   STATS                                          one line of JSON totals
 *
 * The subscriber is always the request's source address: a request cannot
 * subscribe a third party's address.  PORT defaults to the request's source
 * port; RTCP goes to PORT+1 unless rtcp= says otherwise.  Replies go to the
 * request's source:
 *
 *   OK JOIN ADDR PORT ssrc=0xSSRC rtcp=PORT expires=SECONDS
 *   OK LEAVE ADDR PORT
 *   OK KEEPALIVE ADDR PORT expires=SECONDS
 *   ERR REASON ...
 *
 * Unknown commands are counted and get no reply (no reflection).
 * Subscribers that send nothing (no JOIN, KEEPALIVE, or RTCP receiver report
 * from their address and RTCP port) for --expire seconds are dropped.
 */
#include "relay.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

static uint64_t rnd(struct subs *t)
{
	uint64_t x = t->seed; /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->seed = x;
	return x * 2685821657736338717ull;
}

int subs_init(struct subs *t, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max;
	t->nbucket = 64;
	while (t->nbucket < max)
		t->nbucket *= 2;
	t->slot = calloc(max, sizeof(*t->slot));
	t->bucket = malloc(t->nbucket * sizeof(*t->bucket));
	t->active = calloc(max, sizeof(*t->active));
	if (!t->slot || !t->bucket || !t->active) {
		subs_free(t);
		return -1;
	}
	for (uint32_t i = 0; i < t->nbucket; i++)
		t->bucket[i] = -1;
	for (uint32_t i = 0; i < max; i++)
		t->slot[i].next = i + 1 < max ? (int32_t)(i + 1) : -1;
	t->free_head = max ? 0 : -1;
	if (getrandom(&t->seed, sizeof(t->seed), 0) != sizeof(t->seed) || !t->seed)
		t->seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)t;
	return 0;
}

void subs_free(struct subs *t)
{
	free(t->slot);
	free(t->bucket);
	free(t->active);
	memset(t, 0, sizeof(*t));
}

static uint32_t hash(const struct subs *t, const struct sockaddr_storage *a)
{
	const uint8_t *b;
	size_t n;
	if (a->ss_family == AF_INET) {
		b = (const uint8_t *)&((const struct sockaddr_in *)a)->sin_addr;
		n = 4;
	} else {
		b = ((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr;
		n = 16;
	}
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	uint16_t p = relay_port(a);
	h = (h ^ (p >> 8)) * 16777619u;
	h = (h ^ (p & 0xff)) * 16777619u;
	return h & (t->nbucket - 1);
}

static bool same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return relay_same_addr(a, b) && relay_port(a) == relay_port(b);
}

struct sub *subs_find(struct subs *t, const struct sockaddr_storage *addr)
{
	if (!t->nbucket)
		return NULL;
	for (int32_t i = t->bucket[hash(t, addr)]; i >= 0; i = t->slot[i].next)
		if (same(&t->slot[i].addr, addr))
			return &t->slot[i];
	return NULL;
}

struct sub *subs_add(struct subs *t, const struct sockaddr_storage *addr, uint64_t now_ns)
{
	if (t->free_head < 0) {
		errno = ENOSPC;
		return NULL;
	}
	int32_t i = t->free_head;
	struct sub *s = &t->slot[i];
	t->free_head = s->next;
	memset(s, 0, sizeof(*s));
	s->used = true;
	s->fresh = true;
	s->addr = *addr;
	s->rtcp_port = (uint16_t)(relay_port(addr) + 1);
	uint64_t x = rnd(t);
	s->ssrc = (uint32_t)x;
	s->ts_off = (uint32_t)(x >> 32);
	s->seq_base = (uint16_t)rnd(t);
	s->joined_ns = s->seen_ns = now_ns;
	uint32_t h = hash(t, addr);
	s->next = t->bucket[h];
	t->bucket[h] = i;
	s->active_idx = t->nactive;
	t->active[t->nactive++] = (uint32_t)i;
	t->used++;
	t->dirty = true;
	return s;
}

void subs_remove(struct subs *t, struct sub *s)
{
	int32_t i = (int32_t)(s - t->slot);
	uint32_t h = hash(t, &s->addr);
	for (int32_t *pp = &t->bucket[h]; *pp >= 0; pp = &t->slot[*pp].next) {
		if (*pp == i) {
			*pp = s->next;
			break;
		}
	}
	uint32_t last = t->active[--t->nactive];
	t->active[s->active_idx] = last;
	t->slot[last].active_idx = s->active_idx;
	s->used = false;
	s->next = t->free_head;
	t->free_head = i;
	t->used--;
	t->dirty = true;
}

uint32_t subs_expire(struct subs *t, uint64_t now_ns, uint64_t ttl_ns)
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < t->nactive;) {
		struct sub *s = &t->slot[t->active[k]];
		if (!s->is_static && ttl_ns && now_ns - s->seen_ns > ttl_ns) {
			subs_remove(t, s); /* the last one moved into position k */
			n++;
		} else {
			k++;
		}
	}
	return n;
}

/* ---- the protocol -------------------------------------------------------- */

#define CTL_MAX_WORDS 8

static bool parse_u16(const char *s, uint16_t *out)
{
	unsigned long v = 0;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 65535)
			return false;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	if (v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

static bool parse_hex32(const char *s, uint32_t *out)
{
	uint64_t v = 0;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!*s || strlen(s) > 8)
		return false;
	for (; *s; s++) {
		int d = (*s >= '0' && *s <= '9') ? *s - '0'
		      : (*s >= 'a' && *s <= 'f') ? *s - 'a' + 10
		      : (*s >= 'A' && *s <= 'F') ? *s - 'A' + 10 : -1;
		if (d < 0)
			return false;
		v = v * 16 + (uint64_t)d;
	}
	*out = (uint32_t)v;
	return true;
}

static size_t reply(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static size_t reply(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	if (n < 0)
		return 0;
	return (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t control_handle(struct relay *r, const char *msg, size_t len,
		      const struct sockaddr_storage *from, char *out, size_t cap)
{
	char buf[513], *w[CTL_MAX_WORDS];
	size_t nw = 0;
	r->c.ctl_in++;
	if (len == 0 || len > 512) {
		r->c.ctl_unknown++;
		return 0;
	}
	memcpy(buf, msg, len);
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];
		if (ch == '\0' || ch > 0x7e || (ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n')) {
			r->c.ctl_unknown++; /* not text */
			return 0;
		}
	}
	for (char *save = NULL, *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
		if (nw == CTL_MAX_WORDS) {
			r->c.ctl_bad++;
			return reply(out, cap, "ERR too many words\n");
		}
		w[nw++] = t;
	}
	if (nw == 0) {
		r->c.ctl_unknown++;
		return 0;
	}
	char a[80];
	uint64_t now = relay_now_ns();
	bool join = !strcasecmp(w[0], "JOIN"), leave = !strcasecmp(w[0], "LEAVE");
	bool keep = !strcasecmp(w[0], "KEEPALIVE") || !strcasecmp(w[0], "PING");
	if (!strcasecmp(w[0], "STATS") && nw == 1) {
		r->c.ctl_stats++;
		FILE *f = fmemopen(out, cap, "w");
		if (!f)
			return 0;
		setvbuf(f, NULL, _IONBF, 0);
		stats_json(r, f, false);
		long n = ftell(f);
		fclose(f);
		return n > 0 && (size_t)n < cap ? (size_t)n : 0;
	}
	if (!join && !leave && !keep) {
		r->c.ctl_unknown++;
		return 0;
	}
	/* PORT, then key=value options (JOIN only) */
	struct sockaddr_storage dest = *from;
	uint16_t port = relay_port(from), rtcp = 0;
	bool rtcp_set = false, ssrc_set = false;
	uint32_t ssrc = 0;
	for (size_t i = 1; i < nw; i++) {
		if (i == 1 && parse_u16(w[i], &port)) {
			if (port == 0) {
				r->c.ctl_bad++;
				return reply(out, cap, "ERR port 0\n");
			}
			continue;
		}
		if (join && !strncasecmp(w[i], "rtcp=", 5)) {
			if (!strcasecmp(w[i] + 5, "none")) {
				rtcp = 0;
			} else if (!parse_u16(w[i] + 5, &rtcp) || rtcp == 0) {
				r->c.ctl_bad++;
				return reply(out, cap, "ERR bad rtcp= (expected 1..65535 or none)\n");
			}
			rtcp_set = true;
		} else if (join && !strncasecmp(w[i], "ssrc=", 5)) {
			if (!parse_hex32(w[i] + 5, &ssrc)) {
				r->c.ctl_bad++;
				return reply(out, cap, "ERR bad ssrc= (expected 1 to 8 hex digits)\n");
			}
			ssrc_set = true;
		} else {
			r->c.ctl_bad++;
			return reply(out, cap, "ERR unexpected '%.40s' (expected %s)\n", w[i],
				     join ? "JOIN [PORT] [rtcp=PORT|none] [ssrc=HEX]"
					  : leave ? "LEAVE [PORT]" : "KEEPALIVE [PORT]");
		}
	}
	if (dest.ss_family == AF_INET)
		((struct sockaddr_in *)&dest)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&dest)->sin6_port = htons(port);
	relay_addr_str(&dest, a, sizeof(a));
	char *sp = strrchr(a, ':');
	if (sp)
		*sp = ' '; /* "ADDR PORT" */
	struct sub *s = subs_find(&r->subs, &dest);
	if (join) {
		r->c.ctl_join++;
		if (!s) {
			if (r->family && dest.ss_family != r->family) {
				r->c.ctl_refused++;
				return reply(out, cap, "ERR address family not served\n");
			}
			s = subs_add(&r->subs, &dest, now);
			if (!s) {
				r->c.ctl_refused++;
				return reply(out, cap, "ERR full (%u subscribers)\n", r->subs.max);
			}
		}
		s->seen_ns = now;
		if (rtcp_set)
			s->rtcp_port = rtcp;
		if (ssrc_set)
			s->ssrc = ssrc;
		return reply(out, cap, "OK JOIN %s ssrc=0x%08x rtcp=%u expires=%u\n", a, s->ssrc,
			     s->rtcp_port, r->expire_s);
	}
	if (leave) {
		r->c.ctl_leave++;
		if (!s)
			return reply(out, cap, "ERR not subscribed: %s\n", a);
		if (s->is_static)
			return reply(out, cap, "ERR static subscriber: %s\n", a);
		subs_remove(&r->subs, s);
		return reply(out, cap, "OK LEAVE %s\n", a);
	}
	r->c.ctl_keepalive++;
	if (!s)
		return reply(out, cap, "ERR not subscribed: %s\n", a);
	s->seen_ns = now;
	return reply(out, cap, "OK KEEPALIVE %s expires=%u\n", a, r->expire_s);
}
