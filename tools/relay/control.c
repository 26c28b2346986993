/* SPDX-License-Identifier: MIT */
/*
 * control.c - broadcast mode: the subscriber table, who may be a subscriber,
 * and the control protocol.
 *
 * The table has a fixed capacity (--max-subscribers), allocated at start:
 * a flood of JOINs fills it and is then refused, and nothing else grows.
 * Lookup is by (address, RTP port) through a chained hash keyed with a
 * random SipHash key (libsodium's crypto_shorthash), so that nobody can aim
 * requests at one chain.  Two more indexes live beside it: the SSRCs the
 * relay generated (loop detection, rtp.c) and the number of subscribers per
 * source (an IPv4 address or an IPv6 /64) for --max-per-source.
 *
 * Control protocol: one UDP datagram per request, ASCII, at most 512 bytes,
 * words separated by blanks, command case-insensitive:
 *
 *   JOIN [PORT] [rtcp=PORT|rtcp=none] [ssrc=HEX] [relay=HEX] [cookie=HEX]
 *   LEAVE [PORT] cookie=HEX
 *   KEEPALIVE [PORT] cookie=HEX     (or PING)
 *
 * The subscriber is the request's source address at PORT (default: the
 * request's source port).  Since a source address can be forged, nothing is
 * sent to it before it proved that it receives there (return routability,
 * as TURN and ICE consent checks do):
 *
 *   1. JOIN without cookie=, padded with blanks to at least CTL_JOIN_MIN
 *      bytes, gets   COOKIE PORT HEX   (shorter than the request): HEX is
 *      SipHash(secret key; address, PORT, time bucket of --cookie-lifetime).
 *      A shorter JOIN gets nothing.
 *   2. JOIN ... cookie=HEX (cookie of this or the previous bucket) makes the
 *      subscriber; the reply is  OK JOIN ADDR PORT ssrc=0xSSRC rtcp=PORT expires=S.
 *   3. LEAVE and KEEPALIVE carry the cookie the subscriber joined with.
 *
 * Replies to a request that proved nothing (no valid cookie) are never longer
 * than the request: they are cut to its length (ctl_truncated), so the port
 * amplifies nothing.  Unknown commands are counted and get no reply.  Each
 * source (IPv4 address, IPv6 /64) has a budget of --control-rate requests a
 * second in a fixed table of CTL_RATE_SLOTS entries indexed by a keyed hash
 * (sources that collide share a budget); requests over it are dropped.
 * Subscribers that send nothing (no JOIN, KEEPALIVE, or RTCP receiver report
 * about their SSRC from their address and RTCP port) for --expire seconds are
 * dropped.  STATS is not served here (it was a reflector): use the Unix stats
 * socket.
 *
 * Relays (--upstream, upstream.c) add relay=ID, their 64-bit identity.  Once
 * the cookie is good, such a JOIN (and each KEEPALIVE of such a subscriber)
 * is refused with "ERR loop: ..." (ctl_loop) when ID is this relay's own or
 * in its path (this relay, then the relays it takes its stream from), which
 * is the subscription that would close a cycle, or when the path would be
 * longer than RELAY_MAX_HOPS; a subscriber refused on KEEPALIVE is removed.
 * Otherwise OK JOIN and OK KEEPALIVE end in path=ID.ID... so the subscriber
 * can check the path itself and knows it as its own.  A relay subscriber
 * gets the stream's own SSRC, sequence and timestamp (rtp.c).  Plain JOINs
 * (no relay=) are unchanged.
 */
#include "relay.h"
#include "../log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sodium.h>

_Static_assert(SUBS_KEY_BYTES == crypto_shorthash_KEYBYTES, "SipHash key size");
_Static_assert(crypto_shorthash_BYTES == sizeof(uint64_t), "SipHash output size");

static uint64_t rnd(struct subs *t)
{
	uint64_t x = t->seed; /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->seed = x;
	return x * 2685821657736338717ull;
}

static uint64_t sip(const uint8_t key[SUBS_KEY_BYTES], const void *in, size_t n)
{
	uint64_t h;
	crypto_shorthash((unsigned char *)&h, in, n, key);
	return h;
}

/* family | 16 address bytes | port (big endian): a subscriber */
static void sub_key(const struct sockaddr_storage *a, uint8_t k[19])
{
	memset(k, 0, 19);
	k[0] = (uint8_t)a->ss_family;
	if (a->ss_family == AF_INET)
		memcpy(k + 1, &((const struct sockaddr_in *)a)->sin_addr, 4);
	else if (a->ss_family == AF_INET6)
		memcpy(k + 1, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	uint16_t p = addr_port(a);
	k[17] = (uint8_t)(p >> 8);
	k[18] = (uint8_t)p;
}

/* family | IPv4 address or IPv6 /64: a source, for the per-source limits
 * (an IPv6 host usually has a whole /64 to pick addresses from) */
static void src_key(const struct sockaddr_storage *a, uint8_t k[17])
{
	memset(k, 0, 17);
	k[0] = (uint8_t)a->ss_family;
	if (a->ss_family == AF_INET)
		memcpy(k + 1, &((const struct sockaddr_in *)a)->sin_addr, 4);
	else if (a->ss_family == AF_INET6)
		memcpy(k + 1, &((const struct sockaddr_in6 *)a)->sin6_addr, 8);
}

int subs_init(struct subs *t, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	if (sodium_init() < 0) {
		errno = EIO;
		return -1;
	}
	t->max = max;
	t->nbucket = 64;
	while (t->nbucket < max)
		t->nbucket *= 2;
	t->slot = calloc(max, sizeof(*t->slot));
	t->bucket = malloc(t->nbucket * sizeof(*t->bucket));
	t->ssrc_bucket = malloc(t->nbucket * sizeof(*t->ssrc_bucket));
	t->src_bucket = malloc(t->nbucket * sizeof(*t->src_bucket));
	t->src = calloc(max, sizeof(*t->src));
	t->active = calloc(max, sizeof(*t->active));
	if (!t->slot || !t->bucket || !t->ssrc_bucket || !t->src_bucket || !t->src || !t->active) {
		subs_free(t);
		errno = ENOMEM;
		return -1;
	}
	for (uint32_t i = 0; i < t->nbucket; i++)
		t->bucket[i] = t->ssrc_bucket[i] = t->src_bucket[i] = -1;
	for (uint32_t i = 0; i < max; i++) {
		t->slot[i].next = i + 1 < max ? (int32_t)(i + 1) : -1;
		t->src[i].next = i + 1 < max ? (int32_t)(i + 1) : -1;
	}
	t->free_head = t->src_free = max ? 0 : -1;
	randombytes_buf(t->key, sizeof(t->key));
	do
		randombytes_buf(&t->seed, sizeof(t->seed));
	while (!t->seed);
	return 0;
}

void subs_free(struct subs *t)
{
	free(t->slot);
	free(t->bucket);
	free(t->ssrc_bucket);
	free(t->src_bucket);
	free(t->src);
	free(t->active);
	memset(t, 0, sizeof(*t));
}

static uint32_t hash(const struct subs *t, const struct sockaddr_storage *a)
{
	uint8_t k[19];
	sub_key(a, k);
	return (uint32_t)sip(t->key, k, sizeof(k)) & (t->nbucket - 1);
}

static uint32_t ssrc_hash(const struct subs *t, uint32_t ssrc)
{
	return (uint32_t)sip(t->key, &ssrc, sizeof(ssrc)) & (t->nbucket - 1);
}

static bool same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return addr_same_host(a, b) && addr_port(a) == addr_port(b);
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

/* ---- the SSRC index --------------------------------------------------------- */

static void ssrc_link(struct subs *t, struct sub *s)
{
	uint32_t h = ssrc_hash(t, s->ssrc);
	s->ssrc_next = t->ssrc_bucket[h];
	t->ssrc_bucket[h] = (int32_t)(s - t->slot);
	s->ssrc_ours = true;
}

static void ssrc_unlink(struct subs *t, struct sub *s)
{
	if (!s->ssrc_ours)
		return;
	int32_t i = (int32_t)(s - t->slot);
	for (int32_t *pp = &t->ssrc_bucket[ssrc_hash(t, s->ssrc)]; *pp >= 0;
	     pp = &t->slot[*pp].ssrc_next) {
		if (*pp == i) {
			*pp = s->ssrc_next;
			break;
		}
	}
	s->ssrc_ours = false;
}

struct sub *subs_by_ssrc(struct subs *t, uint32_t ssrc)
{
	if (!t->nbucket)
		return NULL;
	for (int32_t i = t->ssrc_bucket[ssrc_hash(t, ssrc)]; i >= 0; i = t->slot[i].ssrc_next)
		if (t->slot[i].ssrc == ssrc)
			return &t->slot[i];
	return NULL;
}

void subs_set_ssrc(struct subs *t, struct sub *s, uint32_t ssrc)
{
	ssrc_unlink(t, s);
	s->ssrc = ssrc;
}

void subs_new_ssrc(struct subs *t, struct sub *s)
{
	ssrc_unlink(t, s);
	s->ssrc = (uint32_t)rnd(t);
	ssrc_link(t, s);
}

/* ---- subscribers per source ----------------------------------------------------- */

/* The link that points at key's entry, or the chain's end (-1). */
static int32_t *src_link(const struct subs *t, const uint8_t key[17])
{
	int32_t *pp = &t->src_bucket[sip(t->key, key, 17) & (t->nbucket - 1)];
	while (*pp >= 0 && memcmp(t->src[*pp].key, key, 17))
		pp = &t->src[*pp].next;
	return pp;
}

uint32_t subs_per_source(const struct subs *t, const struct sockaddr_storage *addr)
{
	uint8_t k[17];
	if (!t->nbucket)
		return 0;
	src_key(addr, k);
	int32_t i = *src_link(t, k);
	return i >= 0 ? t->src[i].count : 0;
}

static void src_add(struct subs *t, const struct sockaddr_storage *addr, int d)
{
	uint8_t k[17];
	src_key(addr, k);
	int32_t *pp = src_link(t, k);
	if (*pp < 0) {
		if (d < 0 || t->src_free < 0)
			return; /* cannot happen: one entry per source of a subscriber */
		int32_t i = t->src_free;
		t->src_free = t->src[i].next;
		memcpy(t->src[i].key, k, 17);
		t->src[i].count = 0;
		t->src[i].next = -1;
		*pp = i;
	}
	struct srcent *e = &t->src[*pp];
	if (d > 0) {
		e->count++;
	} else if (--e->count == 0) {
		int32_t i = *pp;
		*pp = e->next;
		e->next = t->src_free;
		t->src_free = i;
	}
}

/* ---- the table ------------------------------------------------------------------ */

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
	s->rtcp_port = (uint16_t)(addr_port(addr) + 1);
	uint64_t x = rnd(t);
	s->ssrc = (uint32_t)x;
	s->ts_off = (uint32_t)(x >> 32);
	s->seq_base = (uint16_t)rnd(t);
	s->joined_ns = s->seen_ns = now_ns;
	uint32_t h = hash(t, addr);
	s->next = t->bucket[h];
	t->bucket[h] = i;
	ssrc_link(t, s);
	src_add(t, addr, +1);
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
	ssrc_unlink(t, s);
	src_add(t, &s->addr, -1);
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

/* ---- who may be a subscriber ---------------------------------------------------- */

static bool listed(const struct sockaddr_storage *v, size_t n, const struct sockaddr *a)
{
	struct sockaddr_storage ss = { 0 };
	memcpy(&ss, a,
	       a->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	for (size_t i = 0; i < n; i++)
		if (addr_same_host(&v[i], &ss))
			return true;
	return false;
}

/* The host's addresses, and after them (from nlocal on) the broadcast
 * addresses of its IPv4 networks (refused as subscribers, like 255.255.255.255). */
int control_local_addrs(struct relay *r)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) != 0)
		return -1;
	size_t n = 0;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr &&
		    (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
			n += 2;
	struct sockaddr_storage *v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		freeifaddrs(ifa);
		errno = ENOMEM;
		return -1;
	}
	size_t k = 0, b = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (struct ifaddrs *i = ifa; i && k < n; i = i->ifa_next) {
			if (!i->ifa_addr ||
			    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
				continue;
			if (pass == 0)
				memcpy(&v[k++], i->ifa_addr,
				       i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
									 : sizeof(struct sockaddr_in6));
			else if ((i->ifa_flags & IFF_BROADCAST) && i->ifa_broadaddr &&
				 i->ifa_broadaddr->sa_family == AF_INET &&
				 !listed(v, k - b, i->ifa_broadaddr)) {
				/* an address with no brd set shows its own address here */
				memcpy(&v[k++], i->ifa_broadaddr, sizeof(struct sockaddr_in));
				b++;
			}
		}
	}
	freeifaddrs(ifa);
	free(r->local);
	r->local = v;
	r->nlocal = k - b;
	r->nbcast = b;
	return 0;
}

static bool is_bcast(const struct relay *r, const struct sockaddr_storage *a)
{
	for (size_t i = r->nlocal; i < r->nlocal + r->nbcast; i++)
		if (addr_same_host(a, &r->local[i]))
			return true;
	return false;
}

static bool is_local(const struct relay *r, const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET &&
	    (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127)
		return true;
	if (a->ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr))
		return true;
	for (size_t i = 0; i < r->nlocal; i++)
		if (addr_same_host(a, &r->local[i]))
			return true;
	return false;
}

/* A local address at one of the relay's own ports (any of its sockets). */
static bool is_own(const struct relay *r, const struct sockaddr_storage *a)
{
	uint16_t p = addr_port(a);
	return (p == r->own_port[0] || p == r->own_port[1] || p == r->own_port[2]) && is_local(r, a);
}

static int refuse(char *why, size_t len, const char *msg)
{
	snprintf(why, len, "%s", msg);
	return -1;
}

/*
 * The library's rules for a destination of gc_sendgroup() (lib/group/group.c,
 * check_dest(): a unicast address of the socket's family, a port), checked
 * here so that a member the library would refuse never enters the table,
 * then the relay's own: no local address (a loop through this host), never
 * one of the relay's own ports.
 */
int control_check_subscriber(const struct relay *r, const struct sockaddr_storage *a, char *why, size_t len)
{
	if (a->ss_family != AF_INET && a->ss_family != AF_INET6)
		return refuse(why, len, "not an IPv4 or IPv6 address");
	if ((r->family && a->ss_family != r->family) || r->data_fd[relay_family_index(a->ss_family)] < 0)
		return refuse(why, len, "address family not served");
	if (addr_port(a) == 0)
		return refuse(why, len, "port 0");
	if (a->ss_family == AF_INET) {
		in_addr_t v = ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr);
		if (v == INADDR_ANY || v == INADDR_BROADCAST || IN_MULTICAST(v))
			return refuse(why, len, "not a unicast address");
		if (is_bcast(r, a))
			return refuse(why, len, "the broadcast address of one of this host's networks");
	} else {
		const struct in6_addr *v = &((const struct sockaddr_in6 *)a)->sin6_addr;
		if (IN6_IS_ADDR_UNSPECIFIED(v) || IN6_IS_ADDR_MULTICAST(v))
			return refuse(why, len, "not a unicast address");
		if (IN6_IS_ADDR_V4MAPPED(v) || IN6_IS_ADDR_V4COMPAT(v))
			return refuse(why, len, "an IPv4-mapped address (the IPv6 sockets are IPv6 only)");
	}
	if (is_local(r, a)) {
		if (is_own(r, a))
			return refuse(why, len, "one of the relay's own sockets");
		if (!r->allow_local)
			return refuse(why, len,
				      "a local address of this host (--allow-local-subscribers)");
	}
	return 0;
}

/* ---- cookies and budgets ----------------------------------------------------------- */

uint64_t control_cookie(const struct relay *r, const struct sockaddr_storage *addr, uint64_t bucket)
{
	uint8_t in[19 + 8];
	sub_key(addr, in);
	for (int i = 0; i < 8; i++)
		in[19 + i] = (uint8_t)(bucket >> (8 * i));
	return sip(r->cookie_key, in, sizeof(in));
}

static bool cookie_eq(uint64_t a, uint64_t b)
{
	return sodium_memcmp(&a, &b, sizeof(a)) == 0;
}

/* Take one request from from's budget; false when it has none left. */
static bool budget(struct relay *r, const struct sockaddr_storage *from, uint64_t now)
{
	if (!r->rate || !r->ctl_rate)
		return true;
	uint8_t k[17];
	src_key(from, k);
	uint32_t i = (uint32_t)sip(r->subs.key, k, sizeof(k)) & (CTL_RATE_SLOTS - 1);
	uint64_t full = (uint64_t)r->ctl_rate * 1000, el = now - r->rate[i].t_ns;
	uint64_t tok = el >= 1000000000u ? full : r->rate[i].tokens + el * r->ctl_rate / 1000000u;
	if (tok > full)
		tok = full;
	r->rate[i].t_ns = now;
	if (tok < 1000) {
		r->rate[i].tokens = (uint32_t)tok;
		return false;
	}
	r->rate[i].tokens = (uint32_t)(tok - 1000);
	return true;
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

/* 1..digits hex digits, optional 0x */
static bool parse_hex(const char *s, unsigned digits, uint64_t *out)
{
	uint64_t v = 0;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!*s || strlen(s) > digits)
		return false;
	for (; *s; s++) {
		int d = (*s >= '0' && *s <= '9')   ? *s - '0'
			: (*s >= 'a' && *s <= 'f') ? *s - 'a' + 10
			: (*s >= 'A' && *s <= 'F') ? *s - 'A' + 10
						   : -1;
		if (d < 0)
			return false;
		v = v * 16 + (uint64_t)d;
	}
	*out = v;
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

/* Remote senders drive these (forged sources too): rate-limited (log.h).
 * Cookies sent to a first JOIN are per datagram, hence debug. */
static struct log_limit lim_malformed = LOG_LIMIT_INIT(LL_WARNING, "control_malformed");
static struct log_limit lim_cookie = LOG_LIMIT_INIT(LL_WARNING, "bad_cookie");
static struct log_limit lim_addr = LOG_LIMIT_INIT(LL_WARNING, "subscriber_refused");
static struct log_limit lim_per_source = LOG_LIMIT_INIT(LL_WARNING, "per_source_limit");
static struct log_limit lim_rate = LOG_LIMIT_INIT(LL_WARNING, "control_rate_limited");
static struct log_limit lim_full = LOG_LIMIT_INIT(LL_WARNING, "subscribers_full");
static struct log_limit lim_short = LOG_LIMIT_INIT(LL_WARNING, "join_short");
static struct log_limit lim_cookie_sent = LOG_LIMIT_INIT(LL_DEBUG, "cookie_sent");
static struct log_limit lim_joined = LOG_LIMIT_INIT(LL_INFO, "joined");
static struct log_limit lim_left = LOG_LIMIT_INIT(LL_INFO, "left");
static struct log_limit lim_loop = LOG_LIMIT_INIT(LL_WARNING, "relay_loop_refused");

/* One line for a request from `from`: why it went no further (or what it did). */
static void ctl_log(struct log_limit *lim, const struct sockaddr_storage *from, const char *why)
{
	char a[80];
	if (log_enabled(lim->level))
		log_limited(lim, "src=%s reason=%s", addr_str(from, a, sizeof(a)), why);
}

/* Whether a relay with identity id may subscribe here: not when id is this
 * relay or one upstream of it (it would get its own stream back), nor when
 * the path would grow past RELAY_MAX_HOPS.  A refused subscriber is removed. */
static bool loop_refused(struct relay *r, uint64_t id, struct sub **s, char *out, size_t cap, size_t *n)
{
	uint64_t path[RELAY_MAX_HOPS + 1];
	size_t np = relay_path(r, path);
	const char *why = NULL;
	for (size_t i = 0; i < np && !why; i++)
		if (path[i] == id)
			why = i == 0 ? "is this relay" : "is upstream of this relay";
	if (!why && np >= RELAY_MAX_HOPS)
		why = "would be deeper than the hop limit";
	if (!why)
		return false;
	r->c.ctl_loop++;
	if (log_enabled(LL_WARNING))
		log_limited(&lim_loop, "relay=%016llx reason=%s path_len=%zu",
			    (unsigned long long)id, why, np);
	if (*s && !(*s)->is_static) {
		subs_remove(&r->subs, *s);
		*s = NULL;
	}
	*n = reply(out, cap, "ERR loop: relay=%016llx %s (path of %zu relays)\n",
		   (unsigned long long)id, why, np);
	return true;
}

/* " path=ID.ID...\n" after a reply of length n to relay subscriber s; just
 * "\n" for a plain one. */
static size_t path_reply(const struct relay *r, const struct sub *s, char *out, size_t cap, size_t n)
{
	if (s->relay_id) {
		uint64_t path[RELAY_MAX_HOPS + 1];
		size_t np = relay_path(r, path);
		for (size_t i = 0; i < np; i++)
			n += reply(out + n, cap - n, "%s%016llx",
				   i ? "." : " path=", (unsigned long long)path[i]);
	}
	return n + reply(out + n, cap - n, "\n");
}

static size_t handle(struct relay *r, const char *msg, size_t len, const struct sockaddr_storage *from,
		     uint64_t now, char *out, size_t cap, bool *verified)
{
	char buf[CTL_MAX_LEN + 1], *w[CTL_MAX_WORDS];
	size_t nw = 0;
	if (len == 0 || len > CTL_MAX_LEN) {
		r->c.ctl_unknown++;
		ctl_log(&lim_malformed, from, "length");
		return 0;
	}
	memcpy(buf, msg, len);
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];
		if (ch == '\0' || ch > 0x7e || (ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n')) {
			r->c.ctl_unknown++; /* not text */
			ctl_log(&lim_malformed, from, "not_text");
			return 0;
		}
	}
	for (char *save = NULL, *t = strtok_r(buf, " \t\r\n", &save); t;
	     t = strtok_r(NULL, " \t\r\n", &save)) {
		if (nw == CTL_MAX_WORDS) {
			r->c.ctl_bad++;
			ctl_log(&lim_malformed, from, "bad_argument");
			return reply(out, cap, "ERR too many words\n");
		}
		w[nw++] = t;
	}
	if (nw == 0) {
		r->c.ctl_unknown++;
		ctl_log(&lim_malformed, from, "empty");
		return 0;
	}
	bool join = !strcasecmp(w[0], "JOIN"), leave = !strcasecmp(w[0], "LEAVE");
	bool keep = !strcasecmp(w[0], "KEEPALIVE") || !strcasecmp(w[0], "PING");
	if (!join && !leave && !keep) {
		r->c.ctl_unknown++; /* STATS too: the Unix stats socket has it */
		ctl_log(&lim_malformed, from, "unknown_command");
		return 0;
	}
	/* PORT, then key=value options */
	struct sockaddr_storage dest = *from;
	uint16_t port = addr_port(from), rtcp = 0;
	bool rtcp_set = false, ssrc_set = false, cookie_set = false;
	uint64_t ssrc = 0, cookie = 0, relay_id = 0;
	for (size_t i = 1; i < nw; i++) {
		if (i == 1 && parse_u16(w[i], &port))
			continue;
		if (join && !strncasecmp(w[i], "rtcp=", 5)) {
			if (!strcasecmp(w[i] + 5, "none")) {
				rtcp = 0;
			} else if (!parse_u16(w[i] + 5, &rtcp) || rtcp == 0) {
				r->c.ctl_bad++;
				ctl_log(&lim_malformed, from, "bad_argument");
				return reply(out, cap, "ERR bad rtcp= (expected 1..65535 or none)\n");
			}
			rtcp_set = true;
		} else if (join && !strncasecmp(w[i], "ssrc=", 5)) {
			if (!parse_hex(w[i] + 5, 8, &ssrc)) {
				r->c.ctl_bad++;
				ctl_log(&lim_malformed, from, "bad_argument");
				return reply(out, cap, "ERR bad ssrc= (expected 1 to 8 hex digits)\n");
			}
			ssrc_set = true;
		} else if (join && !strncasecmp(w[i], "relay=", 6)) {
			if (!parse_hex(w[i] + 6, 16, &relay_id) || relay_id == 0) {
				r->c.ctl_bad++;
				return reply(out, cap,
					     "ERR bad relay= (expected 1 to 16 hex digits, not 0)\n");
			}
		} else if (!strncasecmp(w[i], "cookie=", 7)) {
			if (!parse_hex(w[i] + 7, 16, &cookie)) {
				r->c.ctl_bad++;
				ctl_log(&lim_malformed, from, "bad_argument");
				return reply(out, cap,
					     "ERR bad cookie= (expected the 16 hex digits of COOKIE)\n");
			}
			cookie_set = true;
		} else {
			r->c.ctl_bad++;
			ctl_log(&lim_malformed, from, "bad_argument");
			return reply(out, cap, "ERR unexpected '%.40s' (expected %s)\n", w[i],
				     join ? "JOIN [PORT] [rtcp=PORT|none] [ssrc=HEX] [relay=HEX] [cookie=HEX]"
					     : leave ? "LEAVE [PORT] cookie=HEX"
						     : "KEEPALIVE [PORT] cookie=HEX");
		}
	}
	if (dest.ss_family == AF_INET)
		((struct sockaddr_in *)&dest)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&dest)->sin6_port = htons(port);
	char why[96];
	if (control_check_subscriber(r, &dest, why, sizeof(why))) {
		r->c.ctl_bad_addr++;
		ctl_log(&lim_addr, from, why);
		return reply(out, cap, "ERR refused: %s\n", why);
	}
	char a[80];
	size_t n;
	addr_str(&dest, a, sizeof(a));
	char *sp = strrchr(a, ':');
	if (sp)
		*sp = ' '; /* "ADDR PORT" */
	struct sub *s = subs_find(&r->subs, &dest);
	uint64_t bucket = now / ((uint64_t)r->cookie_s * 1000000000u);
	*verified = cookie_set &&
		((s && s->cookie && cookie_eq(cookie, s->cookie)) ||
		 cookie_eq(cookie, control_cookie(r, &dest, bucket)) ||
		 (bucket && cookie_eq(cookie, control_cookie(r, &dest, bucket - 1))));
	if (join) {
		r->c.ctl_join++;
		if (!cookie_set) {
			if (len < CTL_JOIN_MIN) {
				r->c.ctl_short++; /* the cookie would be longer than the request */
				ctl_log(&lim_short, from, "shorter_than_64_bytes");
				return 0;
			}
			r->c.ctl_cookies++;
			ctl_log(&lim_cookie_sent, from, "first_join");
			return reply(out, cap, "COOKIE %u %016llx\n", port,
				     (unsigned long long)control_cookie(r, &dest, bucket));
		}
		if (!*verified) {
			r->c.ctl_bad_cookie++;
			ctl_log(&lim_cookie, from, "wrong_or_expired");
			return reply(out, cap, "ERR bad cookie (expired? JOIN again without it)\n");
		}
		if (relay_id && loop_refused(r, relay_id, &s, out, cap, &n))
			return n;
		if (!s) {
			uint32_t k = subs_per_source(&r->subs, &dest);
			if (k >= r->max_per_source) {
				r->c.ctl_per_source++;
				if (log_enabled(LL_WARNING))
					log_limited(&lim_per_source, "src=%s subscribers=%u limit=%u",
						    addr_str(from, a, sizeof(a)), k, r->max_per_source);
				return reply(out, cap,
					     "ERR too many subscribers from this address (%u, --max-per-source)\n",
					     k);
			}
			s = subs_add(&r->subs, &dest, now);
			if (!s) {
				r->c.ctl_refused++;
				ctl_log(&lim_full, from, "max_subscribers");
				return reply(out, cap, "ERR full (%u subscribers)\n", r->subs.max);
			}
			/* never the producer's SSRC: its stream would look like a loop */
			while (r->prod.have && s->ssrc == r->prod.ssrc)
				subs_new_ssrc(&r->subs, s);
		}
		s->seen_ns = now;
		s->cookie = cookie;
		if (rtcp_set)
			s->rtcp_port = rtcp;
		if (ssrc_set)
			subs_set_ssrc(&r->subs, s, (uint32_t)ssrc);
		char d[80];
		if (log_enabled(LL_INFO))
			log_limited(&lim_joined, "subscriber=%s ssrc=0x%08x rtcp=%u relay=%016llx",
				    addr_str(&dest, d, sizeof(d)), s->ssrc, s->rtcp_port,
				    (unsigned long long)relay_id);
		s->relay_id = relay_id;
		n = reply(out, cap, "OK JOIN %s ssrc=0x%08x rtcp=%u expires=%u", a, s->ssrc,
			  s->rtcp_port, r->expire_s);
		return path_reply(r, s, out, cap, n);
	}
	if (!cookie_set || !*verified) {
		r->c.ctl_bad_cookie++;
		ctl_log(&lim_cookie, from, cookie_set ? "wrong_or_expired" : "missing");
		return reply(out, cap, cookie_set ? "ERR bad cookie\n" : "ERR cookie= required\n");
	}
	if (leave) {
		r->c.ctl_leave++;
		if (!s)
			return reply(out, cap, "ERR not subscribed: %s\n", a);
		if (s->is_static)
			return reply(out, cap, "ERR static subscriber: %s\n", a);
		char d[80];
		if (log_enabled(LL_INFO))
			log_limited(&lim_left, "subscriber=%s", addr_str(&dest, d, sizeof(d)));
		subs_remove(&r->subs, s);
		return reply(out, cap, "OK LEAVE %s\n", a);
	}
	r->c.ctl_keepalive++;
	if (!s)
		return reply(out, cap, "ERR not subscribed: %s\n", a);
	if (s->relay_id && loop_refused(r, s->relay_id, &s, out, cap, &n))
		return n;
	s->seen_ns = now;
	n = reply(out, cap, "OK KEEPALIVE %s expires=%u", a, r->expire_s);
	return path_reply(r, s, out, cap, n);
}

size_t control_handle(struct relay *r, const char *msg, size_t len,
		      const struct sockaddr_storage *from, char *out, size_t cap)
{
	r->c.ctl_in++;
	if (addr_port(from) == 0 || is_own(r, from)) {
		/* no reply can reach port 0, and one to our own sockets (a forged
		 * source: IPv6 takes the host's own address from outside) would
		 * feed the relay itself */
		r->c.ctl_bad_addr++;
		ctl_log(&lim_addr, from, addr_port(from) ? "own_port" : "port_0");
		return 0;
	}
	uint64_t now = relay_now_ns();
	if (!budget(r, from, now)) {
		r->c.ctl_rate_limited++;
		ctl_log(&lim_rate, from, "control_rate");
		return 0;
	}
	bool verified = false;
	size_t n = handle(r, msg, len, from, now, out, cap, &verified);
	if (n > len && !verified) {
		/* the source proved nothing: never send it more than it sent */
		r->c.ctl_truncated++;
		n = len;
	}
	return n;
}
