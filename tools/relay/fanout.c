/* SPDX-License-Identifier: MIT */
/*
 * fanout.c - replicate mode: each input datagram goes to the receivers of
 * every source that matches its sender, in one gc_sendgroup() per send
 * socket.
 *
 * Send sockets: one unbound UDP socket per (family, TTL) in use, with the
 * relay's engine, SO_SNDBUF large and MSG_DONTWAIT on every send, so that a
 * receiver whose packets pile up (no ARP answer, a full queue) costs an
 * error count for that receiver and never blocks the others.  Receivers that
 * gc_sendgroup() cannot take go another way, one sendto()/raw send each:
 *   -S (spoof)                     raw socket with the original source (spoof.c)
 *   multicast or broadcast address plain sendto() on the same socket
 * Sampling is samplicator's: a receiver with interval N gets the first
 * datagram its source matches, then every Nth.
 */
#include "relay.h"
#include "../log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int relay_family_index(int family)
{
	return family == AF_INET6 ? 1 : 0;
}

int *relay_gerrno(struct relay *r, size_t n)
{
	if (n > r->gerrno_cap) {
		size_t cap = r->gerrno_cap ? r->gerrno_cap : 64;
		while (cap < n)
			cap *= 2;
		int *p = realloc(r->gerrno, cap * sizeof(int));
		if (!p)
			return NULL;
		r->gerrno = p;
		r->gerrno_cap = cap;
	}
	return r->gerrno;
}

/*
 * This thread's CPU time with --time-sends, else 0.  The clock is a system
 * call: instrumentation for benchmarks (the Amdahl fraction of G4), so a
 * relay in production does not pay two of them per input datagram.
 */
static uint64_t send_clock(const struct relay *r)
{
	struct timespec ts;

	if (!r->time_sends)
		return 0;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One gc_sendgroup(); a recipient the library refuses (a bad address) fails
 * alone in gerrno, the others are sent (gc_sendgroup(3)). */
int relay_group_send(struct relay *r, int fd, const struct iovec *shared,
		     const struct gc_giovec *rec, size_t n, int *gerrno)
{
	uint64_t t0 = send_clock(r);
	int sent = gc_sendgroup(fd, shared, rec, n, MSG_DONTWAIT | MSG_NOSIGNAL, gerrno);
	int e = errno;

	r->c.send_ns += send_clock(r) - t0;
	r->c.group_sends++;
	if (sent < 0) { /* the call itself was refused: every recipient failed alike */
		for (size_t i = 0; i < n; i++)
			gerrno[i] = e;
		sent = 0;
	}
	return sent;
}

static bool is_direct(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		in_addr_t a = ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr);
		return IN_MULTICAST(a) || a == INADDR_BROADCAST || a == INADDR_ANY;
	}
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_MULTICAST(a) || IN6_IS_ADDR_UNSPECIFIED(a);
}

int fanout_sendsock(struct relay *r, int family, int ttl, bool raw, char *err, size_t errlen)
{
	for (size_t i = 0; i < r->nss; i++)
		if (r->ss[i].family == family && r->ss[i].ttl == ttl && r->ss[i].raw == raw)
			return (int)i;
	if (r->nss == RELAY_MAX_SOCKS) {
		snprintf(err, errlen, "more than %d send sockets", RELAY_MAX_SOCKS);
		return -1;
	}
	struct sendsock *s = &r->ss[r->nss];
	memset(s, 0, sizeof(*s));
	s->family = family;
	s->ttl = ttl;
	s->raw = raw;
	if (raw) {
		int ri = relay_family_index(family);
		if (r->raw_fd[ri] < 0) {
			r->raw_fd[ri] = spoof_socket(family, (int)r->sndbuf);
			if (r->raw_fd[ri] < 0) {
				snprintf(err, errlen, "-S needs a raw %s socket: %s%s",
					 family == AF_INET ? "IPv4" : "IPv6", strerror(errno),
					 errno == EPERM ? " (needs CAP_NET_RAW: run as root)" : "");
				return -1;
			}
		}
		s->fd = r->raw_fd[ri];
		s->engine = GC_ENGINE_NONE;
		s->twin = -1;
		return (int)r->nss++;
	}
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket(%s): %s", family == AF_INET ? "AF_INET" : "AF_INET6",
			 strerror(errno));
		return -1;
	}
	int one = 1, v = ttl;
	if (family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	int lvl = family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
	if (setsockopt(fd, lvl, family == AF_INET ? IP_TTL : IPV6_UNICAST_HOPS, &v, sizeof(v)) != 0 ||
	    setsockopt(fd, lvl, family == AF_INET ? IP_MULTICAST_TTL : IPV6_MULTICAST_HOPS, &v,
		       sizeof(v)) != 0) {
		snprintf(err, errlen, "TTL %d: %s", ttl, strerror(errno));
		close(fd);
		return -1;
	}
	if (family == AF_INET)
		(void)setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one));
	int sb = (int)r->sndbuf;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sb, sizeof(sb)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
	if (gc_set_engine(fd, r->engine) != 0) {
		snprintf(err, errlen, "--engine %s: %s", gc_engine_name(r->engine), gc_errmsg());
		close(fd);
		return -1;
	}
	s->fd = fd;
	s->engine = gc_get_engine(fd);
	s->twin = batch_twin(r, fd);
	return (int)r->nss++;
}

static int grow_batch(struct sendsock *s, size_t n)
{
	if (n <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap : 64;
	while (cap < n)
		cap *= 2;
	struct gc_giovec *rec = realloc(s->rec, cap * sizeof(*rec));
	if (!rec)
		return -1;
	s->rec = rec;
	struct receiver **who = realloc(s->who, cap * sizeof(*who));
	if (!who)
		return -1;
	s->who = who;
	s->cap = cap;
	return 0;
}

/* Receiver identity for the carry-over: address, port, interval, flags, TTL. */
static uint64_t rcv_hash(const struct receiver *v, uint64_t seed)
{
	const uint8_t *b = (const uint8_t *)&v->addr;
	uint64_t h = seed ^ 14695981039346656037ull; /* FNV-1a, seeded per reload */
	for (size_t i = 0; i < addr_len(&v->addr); i++)
		h = (h ^ b[i]) * 1099511628211ull;
	h = (h ^ v->freq) * 1099511628211ull;
	h = (h ^ v->flags) * 1099511628211ull;
	return (h ^ v->ttl) * 1099511628211ull;
}

static bool rcv_same(const struct receiver *a, const struct receiver *b)
{
	return memcmp(&a->addr, &b->addr, sizeof(a->addr)) == 0 && a->freq == b->freq &&
		a->flags == b->flags && a->ttl == b->ttl;
}

/*
 * Each receiver of s that o had too takes o's sampling state and counters:
 * one pass to hash o's receivers, one to look s's up, O(n + m).  A receiver
 * listed k times pairs with its k-th old copy (each old one is taken once).
 * The hash is seeded per call from the clock: config files are the
 * operator's, but nothing here should degrade on a crafted file either.
 */
int carry_receivers(struct source *s, const struct source *o)
{
	if (!s->n || !o->n)
		return 0;
	size_t nb = 16;
	while (nb < 2 * o->n)
		nb *= 2;
	int32_t *head = malloc(nb * sizeof(*head)), *next = malloc(o->n * sizeof(*next));
	if (!head || !next) {
		free(head);
		free(next);
		return -1;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
	for (size_t j = 0; j < nb; j++)
		head[j] = -1;
	for (size_t j = o->n; j-- > 0;) { /* backwards: chains list the old ones in order */
		size_t b = rcv_hash(&o->rcv[j], seed) & (nb - 1);
		next[j] = head[b];
		head[b] = (int32_t)j;
	}
	for (size_t k = 0; k < s->n; k++) {
		struct receiver *a = &s->rcv[k];
		for (int32_t *pp = &head[rcv_hash(a, seed) & (nb - 1)]; *pp >= 0; pp = &next[*pp]) {
			const struct receiver *b = &o->rcv[*pp];
			if (rcv_same(a, b)) {
				a->freqcount = b->freqcount;
				a->st = b->st;
				*pp = next[*pp]; /* taken */
				break;
			}
		}
	}
	free(head);
	free(next);
	return 0;
}

/*
 * Give every receiver of conf its path and send socket, prebuild the
 * recipients of plain sources, carry sampling state and counters over from
 * the configuration in force (same source position, receiver, interval), and
 * make conf the one in force.  On error nothing changes.
 */
int fanout_install(struct relay *r, struct rc_conf *conf, char *err, size_t errlen)
{
	size_t total = 0;
	for (size_t i = 0; i < conf->n; i++) {
		struct source *s = &conf->src[i];
		s->plain = s->n > 0 && s->tx_delay_us == 0;
		s->plain_sock = -1;
		for (size_t k = 0; k < s->n; k++) {
			struct receiver *v = &s->rcv[k];
			bool raw = v->flags & RCV_SPOOF;
			v->path = raw ? PATH_RAW : is_direct(&v->addr) ? PATH_DIRECT : PATH_GROUP;
			v->sock = fanout_sendsock(r, v->addr.ss_family, v->ttl, raw, err, errlen);
			if (v->sock < 0)
				return -1;
			if (v->path != PATH_GROUP || v->freq != 1)
				s->plain = false;
			if (s->plain_sock < 0)
				s->plain_sock = v->sock;
			else if (s->plain_sock != v->sock)
				s->plain = false;
		}
		total += s->n;
	}
	for (size_t i = 0; i < r->nss; i++)
		if (!r->ss[i].raw && grow_batch(&r->ss[i], total)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	if (!relay_gerrno(r, total)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < conf->n; i++) {
		struct source *s = &conf->src[i];
		free(s->pre);
		s->pre = NULL;
		if (!s->plain)
			continue;
		s->pre = calloc(s->n, sizeof(*s->pre));
		if (!s->pre) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		for (size_t k = 0; k < s->n; k++)
			s->pre[k].dest = s->rcv[k].addr;
	}
	/* carry over: a source at the same position with the same address and mask */
	struct rc_conf *old = &r->conf;
	for (size_t i = 0; i < conf->n && i < old->n; i++) {
		struct source *s = &conf->src[i], *o = &old->src[i];
		if (s->any != o->any || memcmp(&s->addr, &o->addr, sizeof(s->addr)) ||
		    memcmp(&s->mask, &o->mask, sizeof(s->mask)))
			continue;
		s->matched = o->matched;
		s->matched_octets = o->matched_octets;
		if (carry_receivers(s, o)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	rc_free(old);
	*old = *conf;
	memset(conf, 0, sizeof(*conf));
	return 0;
}

void fanout_account(struct relay *r, void *rcv, int e, size_t len)
{
	struct receiver *v = rcv;
	if (e) {
		v->st.errors++;
		v->st.last_errno = e;
		r->c.errors++;
	} else {
		v->st.packets++;
		v->st.octets += len;
		r->c.out++;
		r->c.out_octets += len;
	}
}

static void account_queued(struct relay *r, void *v, int e, size_t len, uint32_t payload)
{
	(void)payload;
	fanout_account(r, v, e, len);
}

static void send_one(struct relay *r, struct receiver *v, const uint8_t *d, size_t len,
		     const struct sockaddr_storage *from)
{
	struct sendsock *s = &r->ss[v->sock];
	int e = 0;
	if (v->path == PATH_RAW) {
		uint64_t t0 = send_clock(r);
		e = from->ss_family == v->addr.ss_family
			? spoof_send(s->fd, d, len, from, &v->addr, v->ttl, v->flags & RCV_CHECKSUM)
			: EAFNOSUPPORT; /* cannot spoof an IPv4 source to an IPv6 receiver */
		r->c.send_ns += send_clock(r) - t0;
		if (!e)
			r->c.raw_out++;
	} else if (v->path == PATH_DIRECT) {
		uint64_t t0 = send_clock(r);
		ssize_t w = sendto(s->fd, d, len, MSG_DONTWAIT | MSG_NOSIGNAL,
				   (const struct sockaddr *)&v->addr, addr_len(&v->addr));
		e = w < 0 ? errno : 0;
		r->c.send_ns += send_clock(r) - t0;
		if (!e)
			r->c.direct_out++;
	} else {
		struct iovec sh = { (void *)d, len };
		struct gc_giovec g = { .dest = v->addr };
		int ge = 0;
		relay_group_send(r, s->fd, &sh, &g, 1, &ge);
		e = ge;
	}
	fanout_account(r, v, e, len);
}

static bool due(struct relay *r, struct receiver *v)
{
	if (v->freqcount == 0) {
		v->freqcount = v->freq - 1;
		return true;
	}
	v->freqcount--;
	v->st.skipped++;
	r->c.skipped++;
	return false;
}

static void sleep_us(unsigned us)
{
	struct timespec t = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR)
		;
}

static void debug_sent(struct relay *r, const struct receiver *v, size_t len)
{
	char a[80];
	if (r->debug > 1)
		log_event(LL_DEBUG, v->st.last_errno ? "send_failed" : "sent", "bytes=%zu dst=%s",
			  len, addr_str(&v->addr, a, sizeof(a)));
}

void fanout_datagram(struct relay *r, const uint8_t *d, size_t len, const struct sockaddr_storage *from)
{
	struct rc_conf *c = &r->conf;
	struct iovec shared = { (void *)d, len };
	size_t matched = 0, last = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (rc_match(&c->src[i], from)) {
			matched++;
			last = i;
		}
	}
	if (matched == 0) {
		r->c.unmatched++;
		if (r->debug) {
			char a[80];
			log_event(LL_DEBUG, "unmatched", "bytes=%zu src=%s", len,
				  addr_str(from, a, sizeof(a)));
		}
		return;
	}
	/* The common case: one source, every receiver due, one socket: the
	 * copies join the receive batch's (batch.c), or go now. */
	if (matched == 1 && c->src[last].plain && r->debug < 2) {
		struct source *s = &c->src[last];
		struct sendsock *ss = &r->ss[s->plain_sock];
		s->matched++;
		s->matched_octets += len;
		if (batch_pick(r, ss->fd, ss->twin, ss->engine, s->n) >= 0) {
			struct outq *q = &r->q;
			q->account = account_queued;
			for (size_t k = 0; k < s->n; k++, q->n++) {
				q->rec[q->n].dest = s->pre[k].dest;
				q->rec[q->n].prepend = (struct iovec){ (void *)d, len };
				q->rec[q->n].append = (struct iovec){ NULL, 0 };
				q->who[q->n] = &s->rcv[k];
			}
			return;
		}
		int *ge = r->gerrno;
		relay_group_send(r, ss->fd, &shared, s->pre, s->n, ge);
		for (size_t k = 0; k < s->n; k++)
			fanout_account(r, &s->rcv[k], ge[k], len);
		return;
	}
	batch_flush(r); /* the copies queued before this datagram go first */
	for (size_t i = 0; i < r->nss; i++)
		r->ss[i].n = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct source *s = &c->src[i];
		if (!rc_match(s, from))
			continue;
		s->matched++;
		s->matched_octets += len;
		for (size_t k = 0; k < s->n; k++) {
			struct receiver *v = &s->rcv[k];
			bool go = due(r, v);
			if (go && (s->tx_delay_us || v->path != PATH_GROUP)) {
				send_one(r, v, d, len, from); /* -x spaces receivers apart, as samplicator does */
				debug_sent(r, v, len);
			} else if (go) {
				struct sendsock *ss = &r->ss[v->sock];
				ss->rec[ss->n] = (struct gc_giovec){ .dest = v->addr };
				ss->who[ss->n++] = v;
			}
			if (s->tx_delay_us)
				sleep_us(s->tx_delay_us);
		}
	}
	for (size_t i = 0; i < r->nss; i++) {
		struct sendsock *ss = &r->ss[i];
		if (ss->raw || ss->n == 0)
			continue;
		int *ge = r->gerrno;
		relay_group_send(r, ss->fd, &shared, ss->rec, ss->n, ge);
		for (size_t k = 0; k < ss->n; k++) {
			fanout_account(r, ss->who[k], ge[k], len);
			debug_sent(r, ss->who[k], len);
		}
	}
}
