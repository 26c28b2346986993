/* SPDX-License-Identifier: MIT */
/*
 * upstream.c - broadcast mode: --upstream ADDR:PORT, this relay as a
 * subscriber of other relays, and --join, its input from a multicast group.
 *
 * Each --upstream (in priority order) gets a UDP socket connected to that
 * relay's control port.  The relay subscribes to one of them at a time with
 * the same handshake as any subscriber (control.c): a padded JOIN, the
 * COOKIE reply, JOIN cookie=; the JOIN names this relay's data and RTCP
 * ports and carries relay=ID, its random 64-bit identity.  The upstream
 * refuses it (ERR loop) when ID is in its own path, and otherwise answers
 * with path=ID1.ID2... (itself, then its upstreams); every KEEPALIVE answer
 * carries the path again, so a loop closed elsewhere later is seen within a
 * keepalive.  A relay that finds its own identity in its upstream's path
 * leaves that upstream (up_loops).
 *
 * Liveness: KEEPALIVE every --upstream-timeout / 4; anything heard (a reply,
 * RTP, RTCP) counts.  Silence for --upstream-timeout, an ICMP error on the
 * socket (the upstream's port closed: it was killed) or an ERR to a
 * handshake gives that upstream up (backoff from 200 ms doubling to 2 s)
 * and starts the handshake with the next one at once.  An ERR to a
 * KEEPALIVE (the upstream restarted: new cookie key, empty table) starts the
 * handshake with the same upstream again.  With --upstream-revert a better
 * (earlier) upstream is tried again whenever its backoff ends, and the
 * stream moves to it once it answers OK JOIN; the one left gets a LEAVE.
 * Only RTP and RTCP from the current upstream are relayed.
 *
 * Relay subscribers get the stream's own SSRC, sequence numbers and
 * timestamps (control.c marks them, rtp.c writes them), so the streams of
 * two upstreams fed from the same origin line up: across a switch a
 * datagram whose (SSRC, sequence) was relayed already is dropped
 * (rtp_duplicates), and the sequence numbers missing between the last one
 * before the switch and the first one after it are counted (up_gap) and
 * logged.
 */
#include "relay.h"
#include "../log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sodium.h>

#define UP_BACKOFF_MIN_NS 200000000ull
#define UP_BACKOFF_MAX_NS 2000000000ull
#define UP_RESEND_NS 100000000ull /* a handshake request unanswered: sent again */

static const char *up_name(const struct upstream *u)
{
	return u->arg;
}

static uint64_t timeout_ns(const struct relay *r)
{
	return (uint64_t)r->up_timeout_ms * 1000000u;
}

size_t relay_path(const struct relay *r, uint64_t *out)
{
	size_t n = 0;
	out[n++] = r->relay_id;
	if (r->up_cur >= 0 && r->up[r->up_cur].st == UP_ACTIVE)
		for (size_t i = 0; i < r->up[r->up_cur].npath && n < RELAY_MAX_HOPS + 1; i++)
			out[n++] = r->up[r->up_cur].path[i];
	return n;
}

/* ---- parsing ------------------------------------------------------------------ */

static int parse_ip(const char *s, struct sockaddr_storage *ss)
{
	return addr_numeric(s, 0, ss) < 0 ? -1 : 0;
}

int upstream_parse(struct upstream *u, const char *arg, char *err, size_t errlen)
{
	char buf[160], *host, *port;
	enum addr_split_error why;
	memset(u, 0, sizeof(*u));
	u->arg = arg;
	u->fd = -1;
	if (strlen(arg) >= sizeof(buf)) {
		snprintf(err, errlen, "too long");
		return -1;
	}
	strcpy(buf, arg);
	if (addr_split(buf, &host, &port, &why)) {
		snprintf(err, errlen, "expected ADDR:PORT (numeric; [IPv6]:PORT)");
		return -1;
	}
	char *end;
	errno = 0;
	unsigned long p = strtoul(port, &end, 10);
	if (!*port || *end || errno || p == 0 || p > 65535) {
		snprintf(err, errlen, "bad port '%s' (expected 1..65535)", port);
		return -1;
	}
	if (addr_numeric(host, (uint16_t)p, &u->addr) < 0) {
		snprintf(err, errlen, "'%s' is not a numeric IPv4 or IPv6 address", host);
		return -1;
	}
	return 0;
}

int mjoin_parse(struct mjoin *j, const char *arg, char *err, size_t errlen)
{
	char buf[160];
	memset(j, 0, sizeof(*j));
	j->arg = arg;
	if (strlen(arg) >= sizeof(buf)) {
		snprintf(err, errlen, "too long");
		return -1;
	}
	strcpy(buf, arg);
	char *at = strrchr(buf, '@');
	if (at) {
		*at = '\0';
		if (!at[1] || !(j->ifindex = if_nametoindex(at + 1))) {
			snprintf(err, errlen, "no interface '%s'", at + 1);
			return -1;
		}
	}
	char *comma = strchr(buf, ',');
	if (comma)
		*comma = '\0';
	if (parse_ip(buf, &j->group)) {
		snprintf(err, errlen, "'%s' is not a numeric IPv4 or IPv6 address", buf);
		return -1;
	}
	bool mc = j->group.ss_family == AF_INET
		? IN_MULTICAST(ntohl(((struct sockaddr_in *)&j->group)->sin_addr.s_addr))
		: IN6_IS_ADDR_MULTICAST(&((struct sockaddr_in6 *)&j->group)->sin6_addr);
	if (!mc) {
		snprintf(err, errlen, "'%s' is not a multicast group", buf);
		return -1;
	}
	if (comma) {
		if (parse_ip(comma + 1, &j->source)) {
			snprintf(err, errlen, "source '%s' is not a numeric IPv4 or IPv6 address",
				 comma + 1);
			return -1;
		}
		if (j->source.ss_family != j->group.ss_family) {
			snprintf(err, errlen, "source '%s' is not of the group's address family",
				 comma + 1);
			return -1;
		}
	}
	return 0;
}

/* ---- requests ------------------------------------------------------------------- */

static void send_req(struct relay *r, struct upstream *u, uint64_t now, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void send_req(struct relay *r, struct upstream *u, uint64_t now, const char *fmt, ...)
{
	(void)r;
	char m[CTL_MAX_LEN + 1];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n < CTL_JOIN_MIN) { /* a first JOIN must be this long to get its cookie */
		memset(m + n, ' ', (size_t)(CTL_JOIN_MIN - n));
		n = CTL_JOIN_MIN;
		m[n] = '\0';
	}
	u->sent_ns = now;
	(void)send(u->fd, m, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void send_join(struct relay *r, struct upstream *u, uint64_t now)
{
	if (u->st == UP_COOKIE)
		send_req(r, u, now, "JOIN %u rtcp=%u relay=%016llx", r->own_port[0], r->own_port[1],
			 (unsigned long long)r->relay_id);
	else
		send_req(r, u, now, "JOIN %u rtcp=%u relay=%016llx cookie=%016llx", r->own_port[0],
			 r->own_port[1], (unsigned long long)r->relay_id, (unsigned long long)u->cookie);
}

static void leave(struct relay *r, struct upstream *u, uint64_t now)
{
	if (u->st == UP_ACTIVE || u->st == UP_JOINING)
		send_req(r, u, now, "LEAVE %u cookie=%016llx", r->own_port[0],
			 (unsigned long long)u->cookie);
	u->st = UP_IDLE;
	u->npath = 0;
}

/* Give upstream i up for now: backoff, and the stream from elsewhere. */
static void fail(struct relay *r, size_t i, uint64_t now, const char *why)
{
	struct upstream *u = &r->up[i];
	u->st = UP_IDLE;
	u->npath = 0;
	u->backoff_ns = u->backoff_ns ? u->backoff_ns * 2 : UP_BACKOFF_MIN_NS;
	if (u->backoff_ns > UP_BACKOFF_MAX_NS)
		u->backoff_ns = UP_BACKOFF_MAX_NS;
	/* up to a quarter more, so that relays that failed together retry apart */
	u->retry_ns = now + u->backoff_ns + randombytes_uniform((uint32_t)(u->backoff_ns / 4000u)) * 1000u;
	r->c.up_failures++;
	log_event(LL_WARNING, "upstream_down", "upstream=%s reason=%s retry_ms=%llu", up_name(u),
		  why, (unsigned long long)((u->retry_ns - now) / 1000000u));
	if ((int)i == r->up_cur) {
		r->up_cur = -1;
		r->dd.switched = true;
	}
}

static void start(struct relay *r, size_t i, uint64_t now)
{
	struct upstream *u = &r->up[i];
	u->st = UP_COOKIE;
	u->start_ns = now;
	log_event(LL_NOTICE, "upstream_subscribing", "upstream=%s", up_name(u));
	/* (again): a route that appeared since, or the address the host uses now */
	if (connect(u->fd, (struct sockaddr *)&u->addr, addr_len(&u->addr)) != 0) {
		char why[96];
		snprintf(why, sizeof(why), "connect: %s", strerror(errno));
		fail(r, i, now, why);
		return;
	}
	send_join(r, u, now);
}

/* ---- the loop's calls ------------------------------------------------------------ */

int upstream_open(struct relay *r)
{
	r->up_cur = r->up_last = -1;
	for (size_t i = 0; i < r->nup; i++) {
		struct upstream *u = &r->up[i];
		u->fd = socket(u->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (u->fd < 0)
			return -1; /* connected by each handshake's start() */
	}
	return 0;
}

void upstream_close(struct relay *r)
{
	uint64_t now = relay_now_ns();
	for (size_t i = 0; i < r->nup; i++) {
		if (r->up[i].fd < 0)
			continue;
		leave(r, &r->up[i], now);
		close(r->up[i].fd);
		r->up[i].fd = -1;
	}
}

void upstream_tick(struct relay *r, uint64_t now)
{
	uint64_t to = timeout_ns(r);
	bool busy = false; /* a handshake in progress */
	for (size_t i = 0; i < r->nup; i++) {
		struct upstream *u = &r->up[i];
		if (u->st == UP_COOKIE || u->st == UP_JOINING) {
			if (now - u->start_ns > to) {
				fail(r, i, now, "no answer to the handshake");
				continue;
			}
			if (now - u->sent_ns >= UP_RESEND_NS)
				send_join(r, u, now);
			busy = true;
		} else if (u->st == UP_ACTIVE) {
			if (now - u->heard_ns > to) {
				char why[64];
				snprintf(why, sizeof(why), "silent for %llu ms",
					 (unsigned long long)((now - u->heard_ns) / 1000000u));
				fail(r, i, now, why);
			} else if (now - u->sent_ns >= to / 4) {
				send_req(r, u, now, "KEEPALIVE %u cookie=%016llx", r->own_port[0],
					 (unsigned long long)u->cookie);
			}
		}
	}
	if (busy)
		return;
	/* none: the first one due; with --upstream-revert, a better one than now */
	size_t lim = r->up_cur < 0 ? r->nup : r->up_revert ? (size_t)r->up_cur : 0;
	for (size_t i = 0; i < lim; i++) {
		if (r->up[i].st == UP_IDLE && now >= r->up[i].retry_ns) {
			start(r, i, now);
			return;
		}
	}
}

static bool path_has(const struct upstream *u, uint64_t id)
{
	for (size_t i = 0; i < u->npath; i++)
		if (u->path[i] == id)
			return true;
	return false;
}

/* path=ID.ID...; false if malformed or longer than RELAY_MAX_HOPS */
static bool parse_path(const char *s, struct upstream *u)
{
	u->npath = 0;
	while (*s && *s != ' ' && *s != '\n') {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 16);
		if (end == s || errno || end - s > 16 || u->npath == RELAY_MAX_HOPS)
			return false;
		u->path[u->npath++] = v;
		s = end;
		if (*s == '.')
			s++;
	}
	return true;
}

/* The reply's path= (none from a relay without it: an empty path). */
static bool reply_path(struct relay *r, size_t i, const char *msg, uint64_t now)
{
	struct upstream *u = &r->up[i];
	const char *p = strstr(msg, " path=");
	if (!p) {
		u->npath = 0;
		return true;
	}
	if (!parse_path(p + 6, u)) {
		fail(r, i, now, "bad path= in its reply");
		return false;
	}
	if (path_has(u, r->relay_id)) {
		r->c.up_loops++;
		log_event(LL_WARNING, "upstream_loop",
			  "upstream=%s relay_id=%016llx reason=\"in its path\"", up_name(u),
			  (unsigned long long)r->relay_id);
		leave(r, u, now);
		fail(r, i, now, "loop");
		return false;
	}
	return true;
}

static void became_active(struct relay *r, size_t i, uint64_t now)
{
	struct upstream *u = &r->up[i];
	u->st = UP_ACTIVE;
	u->backoff_ns = 0;
	r->c.up_subscribed++;
	int old = r->up_cur;
	if (old >= 0 && (size_t)old == i) {
		log_event(LL_NOTICE, "upstream_subscribed",
			  "upstream=%s relays_upstream=%zu again=yes", up_name(u), u->npath);
		return;
	}
	if (old >= 0 && (size_t)old < i) { /* cannot happen: better ones are not tried while active */
		leave(r, u, now);
		return;
	}
	r->up_cur = (int)i;
	if (r->up_last >= 0) /* after a failure, the same upstream again: a gap, not a switch */
		r->dd.switched = true;
	if (r->up_last >= 0 && (size_t)r->up_last != i)
		r->c.up_switches++;
	r->up_last = (int)i;
	log_event(LL_NOTICE, "upstream_subscribed", "upstream=%s relays_upstream=%zu again=no left=%s",
		  up_name(u), u->npath, old >= 0 ? up_name(&r->up[old]) : "none");
	if (old >= 0)
		leave(r, &r->up[old], now);
}

void upstream_read(struct relay *r, size_t i)
{
	struct upstream *u = &r->up[i];
	char m[1500];
	for (int k = 0; k < 16; k++) {
		ssize_t n = recv(u->fd, m, sizeof(m) - 1, MSG_DONTWAIT);
		uint64_t now = relay_now_ns();
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			if (u->st != UP_IDLE) { /* ICMP: port unreachable, no route... */
				char why[96];
				snprintf(why, sizeof(why), "%s", strerror(errno));
				fail(r, i, now, why);
			}
			continue;
		}
		m[n] = '\0';
		char *nl = strchr(m, '\n');
		if (nl)
			*nl = '\0';
		if (u->st == UP_IDLE)
			continue; /* late: a reply to what was given up */
		u->heard_ns = now;
		unsigned port;
		char hex[17];
		if (u->st == UP_COOKIE && sscanf(m, "COOKIE %u %16[0-9a-fA-F]", &port, hex) == 2) {
			u->cookie = strtoull(hex, NULL, 16);
			u->st = UP_JOINING;
			send_join(r, u, now);
		} else if (u->st == UP_JOINING && !strncmp(m, "OK JOIN ", 8)) {
			if (reply_path(r, i, m, now))
				became_active(r, i, now);
		} else if (u->st == UP_ACTIVE && !strncmp(m, "OK KEEPALIVE ", 13)) {
			(void)reply_path(r, i, m, now);
		} else if (!strncmp(m, "ERR loop", 8)) {
			log_event(LL_WARNING, "upstream_refused", "upstream=%s reply=%s", up_name(u), m);
			fail(r, i, now, "it would close a loop");
		} else if (!strncmp(m, "ERR", 3) && u->st == UP_ACTIVE) {
			/* it restarted (new cookie key, empty table) or dropped us */
			log_event(LL_NOTICE, "upstream_restarted", "upstream=%s reply=%s", up_name(u), m);
			start(r, i, now);
		} else if (!strncmp(m, "ERR", 3)) {
			fail(r, i, now, m);
		}
		/* anything else (OK LEAVE, a reply to an earlier request): heard */
	}
}

bool upstream_is_current(struct relay *r, const struct sockaddr_storage *from, uint64_t now)
{
	if (r->up_cur < 0)
		return false;
	struct upstream *u = &r->up[r->up_cur];
	if (!addr_same_host(from, &u->addr))
		return false;
	u->heard_ns = now;
	return true;
}

bool upstream_dedupe(struct relay *r, uint32_t ssrc, uint16_t seq)
{
	struct relay_dedupe *d = &r->dd;
	bool switched = d->switched;
	d->switched = false;
	if (!d->have || ssrc != d->ssrc) {
		memset(d->win, 0, sizeof(d->win));
		d->have = true;
		d->ssrc = ssrc;
		d->top = seq;
		d->win[(seq % 1024) / 64] |= 1ull << (seq % 64);
		return true;
	}
	int16_t ahead = (int16_t)(uint16_t)(seq - d->top);
	if (ahead > 0) {
		if (ahead >= 1024) {
			memset(d->win, 0, sizeof(d->win));
		} else {
			for (uint16_t s = (uint16_t)(d->top + 1); s != seq; s++)
				d->win[(s % 1024) / 64] &= ~(1ull << (s % 64));
		}
		if (switched && ahead > 1) {
			r->c.up_gap += (uint64_t)(ahead - 1);
			log_event(LL_WARNING, "upstream_gap",
				  "packets=%d ssrc=0x%08x first_seq=%u last_seq=%u", ahead - 1,
				  ssrc, (uint16_t)(d->top + 1), (uint16_t)(seq - 1));
		}
		d->top = seq;
		d->win[(seq % 1024) / 64] |= 1ull << (seq % 64);
		return true;
	}
	if (-ahead >= 1024) { /* older than the window: the stream jumped back */
		memset(d->win, 0, sizeof(d->win));
		d->top = seq;
		d->win[(seq % 1024) / 64] |= 1ull << (seq % 64);
		return true;
	}
	uint64_t bit = 1ull << (seq % 64);
	if (d->win[(seq % 1024) / 64] & bit) {
		r->c.rtp_duplicates++;
		d->switched = switched; /* still waiting for the first new one */
		return false;
	}
	d->win[(seq % 1024) / 64] |= bit;
	return true;
}

/* ---- --join --------------------------------------------------------------------- */

int mjoin_apply(struct relay *r, char *err, size_t errlen)
{
	for (size_t i = 0; i < r->njoin; i++) {
		const struct mjoin *j = &r->join[i];
		int fam = j->group.ss_family, fd = r->data_fd[relay_family_index(fam)];
		int level = fam == AF_INET ? IPPROTO_IP : IPPROTO_IPV6, rc;
		if (fd < 0) {
			snprintf(err, errlen, "--join '%s': no %s data socket (-4/-6?)", j->arg,
				 fam == AF_INET ? "IPv4" : "IPv6");
			return -1;
		}
		if (j->source.ss_family) {
			struct group_source_req g = { .gsr_interface = j->ifindex };
			memcpy(&g.gsr_group, &j->group, sizeof(g.gsr_group));
			memcpy(&g.gsr_source, &j->source, sizeof(g.gsr_source));
			rc = setsockopt(fd, level, MCAST_JOIN_SOURCE_GROUP, &g, sizeof(g));
		} else {
			struct group_req g = { .gr_interface = j->ifindex };
			memcpy(&g.gr_group, &j->group, sizeof(g.gr_group));
			rc = setsockopt(fd, level, MCAST_JOIN_GROUP, &g, sizeof(g));
		}
		if (rc != 0) {
			snprintf(err, errlen, "--join '%s': %s", j->arg, strerror(errno));
			return -1;
		}
		log_event(LL_NOTICE, "group_joined", "join=%s", j->arg);
	}
	return 0;
}
