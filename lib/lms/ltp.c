/* SPDX-License-Identifier: MIT */
/*
 * ltp.c - LTP, a reliable multicast transport on LMS (gc_ltp(3)): the
 * sender (rate control, retransmit buffer, heartbeats), the receiver's
 * requests (its window is ltp_window.c) and the replier's answers.
 *
 * Rate control is a token bucket in bytes: LMS gives a NAK-only protocol
 * with no acknowledgements, so there is nothing a window could slide on, and
 * the streams we carry have a target rate.  Repairs are not charged to it;
 * they have their own bucket (repair_rate) so that a flood of requests can
 * neither stall the stream nor make the sender send without bound.
 *
 * Who answers what:
 *   - a request with a turning point (tpaddr set): any replier or the
 *     source that has the datagram sends it as a dmcast to that turning
 *     point, which multicasts it down the one link the request came up;
 *     a replier without it stays silent (the requester retries);
 *   - a request that reached the source with a provisional turning point
 *     (the first router that sent it up unturned: the replier asked itself,
 *     or no replier below there): the source sends a dmcast to that router,
 *     which multicasts it down the one link the request came up; only the
 *     source answers these (they never reach a replier).  With
 *     GC_LTP_NO_PROVISIONAL (routers in lmsd --no-provisional) there are
 *     none: bit 15 of tpif is part of the ifindex, every marked request
 *     was turned;
 *   - a request that reached the source unmarked (a router that does not
 *     mark provisionally, lmsd --no-provisional, or none on the way): the
 *     source multicasts the repair;
 *   - an escalated request (unicast to the source after escalate_after
 *     silent tries: the replier may be dead): the source multicasts the
 *     repair too.  Never a unicast answer: the requester's address is not
 *     authenticated, and answering it would make the source a reflector.
 * Every request is charged to its requester's bucket and to a global one
 * first; over either, it is dropped and counted (requests_limited).  One
 * request gets at most LTP_NAK_MAX_RANGES repairs, and at most four times
 * that many sequence numbers are looked up for it (a request for 2^31
 * datagrams costs no more than one for 256).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/types.h>

#include "lms/internal.h"
#include "lms/ltp.h"
#include "lms.h" /* bpf/lms.h: the LMS-HIER report */

#define LTP_PEERS 64	   /* requesters with their own bucket (least recently used goes) */
#define LTP_READ_BATCH 256 /* datagrams per gc_ltp_process() */
#define LTP_MAX_HB_NS 1000000000ull
#define LTP_PKT_MAX (GC_LTP_HDRLEN + GC_LTP_MAX_PAYLOAD)
#define LTP_MIN_SLOTS 16u
#define LTP_FLAGS \
	(GC_LTP_SENDER | GC_LTP_RECEIVER | GC_LTP_REPLIER | GC_LTP_UNORDERED | GC_LTP_NO_PROVISIONAL)

/* A ring of whole datagrams by sequence number: the sender's retransmit
 * buffer and a replier's repair cache. */
struct ltp_cache {
	uint32_t nslots;
	uint8_t *mem;
	struct {
		uint32_t seq;
		uint16_t len; /* of the whole datagram; 0: empty */
	} * meta;
};

struct ltp_peer {
	uint32_t addr;
	uint64_t used_ns;
	struct ltp_bucket b;
};

struct gc_ltp {
	struct gc_ltp_opts c;
	int fd, rawfd;
	uint32_t session;
	bool have_session;
	struct gc_ltp_stats st;
	/* sender */
	uint32_t next_seq;
	bool finished;
	struct ltp_bucket rate;
	double want;
	uint64_t next_hb_ns, hb_ns;
	/* sender and repliers */
	struct ltp_cache cache;
	struct ltp_peer peer[LTP_PEERS];
	struct ltp_bucket req_all, repairs;
	/* LMS-HIER replier reports */
	int hierfd;
	uint64_t next_report_ns;
	/* receivers */
	struct ltp_window win;
	uint32_t reqseq;
	uint8_t buf[65536];
};

/* ---- the cache ----------------------------------------------------------- */

static int cache_init(struct ltp_cache *c, uint32_t nslots)
{
	c->nslots = nslots;
	c->mem = malloc((size_t)nslots * LTP_PKT_MAX);
	c->meta = calloc(nslots, sizeof(*c->meta));
	return c->mem && c->meta ? 0 : -ENOMEM;
}

static uint8_t *cache_slot(struct ltp_cache *c, uint32_t seq)
{
	return c->mem + (size_t)(seq % c->nslots) * LTP_PKT_MAX;
}

static void cache_put(struct ltp_cache *c, uint32_t seq, const void *pkt, size_t len)
{
	memcpy(cache_slot(c, seq), pkt, len);
	c->meta[seq % c->nslots].seq = seq;
	c->meta[seq % c->nslots].len = (uint16_t)len;
}

static const uint8_t *cache_get(struct ltp_cache *c, uint32_t seq, size_t *len)
{
	if (!c->mem || !c->meta[seq % c->nslots].len || c->meta[seq % c->nslots].seq != seq)
		return NULL;
	*len = c->meta[seq % c->nslots].len;
	return cache_slot(c, seq);
}

/* ---- opening ------------------------------------------------------------- */

static uint32_t or_default(uint32_t v, uint32_t d)
{
	return v ? v : d;
}

static uint32_t slots(uint32_t bytes)
{
	uint32_t n = bytes / GC_LTP_MAX_PAYLOAD;
	return n < LTP_MIN_SLOTS ? LTP_MIN_SLOTS : n;
}

/* 0, or -errno with the message. */
static int open_socket(struct gc_ltp *l)
{
	const struct gc_ltp_opts *c = &l->c;
	int one = 1, zero = 0, ttl = c->ttl;

	l->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l->fd < 0)
		return gc_errf(errno, "socket");
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(c->port) };
	if (setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(l->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		return gc_errf(errno, "opts->port: %u: bind", c->port);
	if (c->ifaddr.s_addr &&
	    setsockopt(l->fd, IPPROTO_IP, IP_MULTICAST_IF, &c->ifaddr, sizeof(c->ifaddr)) != 0)
		return gc_errf(errno, "opts->ifaddr: %s: IP_MULTICAST_IF", gc_lms_ntoa(c->ifaddr));
	if (setsockopt(l->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) != 0 ||
	    setsockopt(l->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero, sizeof(zero)) != 0)
		return gc_errf(errno, "IP_MULTICAST_TTL/LOOP");
	/* Every role joins G: receivers for the data, repliers and the
	 * source for the requests routers steer to them (addressed to G). */
	struct in_addr any = { INADDR_ANY };
	/* public calls: errno and the message are set */
	if (gc_lms_join(l->fd, c->group, any, c->ifindex) < 0 || gc_lms_recvopts(l->fd, 1) < 0)
		return -errno;
	if (c->flags & (GC_LTP_SENDER | GC_LTP_REPLIER)) {
		l->rawfd = gc_lms_raw_socket();
		if (l->rawfd < 0)
			return -errno;
	}
	if ((c->flags & GC_LTP_REPLIER) && c->replier_cost) {
		/* Reports stay on the link: TTL 1, to the all-routers group. */
		l->hierfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (l->hierfd < 0 ||
		    setsockopt(l->hierfd, IPPROTO_IP, IP_MULTICAST_TTL, &one, sizeof(one)) != 0 ||
		    (c->ifaddr.s_addr &&
		     setsockopt(l->hierfd, IPPROTO_IP, IP_MULTICAST_IF, &c->ifaddr, sizeof(c->ifaddr)) != 0))
			return gc_errf(errno, "replier report socket");
	}
	return 0;
}

/* sized (groupcast/common.h); 1.0 ends at report_ms */
static const struct gc_sized ltp_opts_t = GC_SIZED(gc_ltp_opts, GC_LTP_OPTS_INIT, report_ms, report_ms);

GC_EXPORT struct gc_ltp *gc_ltp_create(const struct gc_ltp_opts *opts)
{
	if (!opts) {
		gc_seterr(EFAULT, "opts: NULL");
		return NULL;
	}
	struct gc_ltp_opts c;
	int r = gc_sized_in(&ltp_opts_t, "gc_ltp_create", "opts", &c, opts);
	if (r < 0)
		return gc_err_ptr(r);
	const char *bad = !(c.flags & (GC_LTP_SENDER | GC_LTP_RECEIVER))
		? "opts->flags: neither GC_LTP_SENDER nor GC_LTP_RECEIVER"
		: (c.flags & GC_LTP_SENDER) && (c.flags & (GC_LTP_RECEIVER | GC_LTP_REPLIER))
		? "opts->flags: a sender is not also a receiver or replier (it answers requests anyway)"
		: c.flags & ~LTP_FLAGS ? "opts->flags: unknown bits"
		: (c.flags & (GC_LTP_REPLIER | GC_LTP_UNORDERED)) && !(c.flags & GC_LTP_RECEIVER)
		? "opts->flags: GC_LTP_REPLIER and GC_LTP_UNORDERED need GC_LTP_RECEIVER"
		: c.replier_cost && (!(c.flags & GC_LTP_REPLIER) || c.ifaddr.s_addr == INADDR_ANY)
		? "opts->replier_cost: needs GC_LTP_REPLIER and opts->ifaddr (the address reported)"
		: !gc_lms_is_mcast(c.group) ? "opts->group: not a multicast address"
		: c.port == 0		    ? "opts->port: 0"
		: c.source.s_addr == INADDR_ANY || gc_lms_is_mcast(c.source)
		? "opts->source: not a unicast address"
		: c.window_bytes > (1u << 30) || c.cache_bytes > (1u << 30)
		? "opts->window_bytes/cache_bytes: more than 1 GiB"
		: c.max_ranges > 65536	  ? "opts->max_ranges: more than 65536"
		: c.rate > 10000000000ull ? "opts->rate: more than 10 GB/s"
					  : NULL;
	if (bad) {
		gc_seterr(EINVAL, "%s", bad);
		return NULL;
	}
	c.ttl = c.ttl ? c.ttl : 16;
	c.rate = c.rate ? c.rate : 1000000;
	c.burst = or_default(c.burst, 16 * (LTP_PKT_MAX + 28));
	c.heartbeat_ms = or_default(c.heartbeat_ms, 20);
	c.cache_bytes = or_default(c.cache_bytes, 4u << 20);
	c.window_bytes = or_default(c.window_bytes, 4u << 20);
	c.max_ranges = or_default(c.max_ranges, 256);
	c.nak_ms = or_default(c.nak_ms, 10);
	c.max_tries = or_default(c.max_tries, 12);
	c.escalate_after = or_default(c.escalate_after, 3);
	c.req_rate_peer = or_default(c.req_rate_peer, 1000);
	c.req_rate_all = or_default(c.req_rate_all, 5000);
	c.repair_rate = or_default(c.repair_rate, 5000);
	c.report_ms = or_default(c.report_ms, 100);

	struct gc_ltp *l = calloc(1, sizeof(*l));
	if (!l) {
		gc_seterr(ENOMEM, "gc_ltp_create: no memory");
		return NULL;
	}
	l->c = c;
	l->fd = l->rawfd = l->hierfd = -1;
	uint64_t now = gc_now_ns();
	if (c.flags & GC_LTP_SENDER) {
		l->session = c.session;
		while (!l->session && getrandom(&l->session, sizeof(l->session), 0) < 0 && errno == EINTR)
			;
		if (!l->session)
			l->session = (uint32_t)now | 1;
		l->have_session = true;
		ltp_bucket_init(&l->rate, (double)c.rate, c.burst, now);
		l->hb_ns = (uint64_t)c.heartbeat_ms * 1000000ull;
	} else if (c.session) {
		l->session = c.session;
		l->have_session = true;
	}
	ltp_bucket_init(&l->req_all, c.req_rate_all, c.req_rate_all / 10.0 + 1, now);
	ltp_bucket_init(&l->repairs, c.repair_rate, c.repair_rate / 10.0 + 1, now);
	int rc = 0;
	if (c.flags & (GC_LTP_SENDER | GC_LTP_REPLIER))
		rc = cache_init(&l->cache, slots(c.cache_bytes));
	if (!rc && (c.flags & GC_LTP_RECEIVER))
		rc = ltp_window_init(&l->win, slots(c.window_bytes), GC_LTP_MAX_PAYLOAD,
				     c.max_ranges, (uint64_t)c.nak_ms * 1000000ull, c.max_tries,
				     c.escalate_after, c.flags & GC_LTP_UNORDERED, &l->st);
	if (rc) {
		gc_seterr(ENOMEM, "gc_ltp_create: no memory for the buffers");
		gc_ltp_destroy(l);
		return NULL;
	}
	if ((rc = open_socket(l)) < 0) {
		gc_ltp_destroy(l);
		return gc_err_ptr(rc);
	}
	return l;
}

static void report(struct gc_ltp *l, bool leave)
{
	struct gc_lms_hier m = { .magic = { 'L', 'H' },
				 .version = GC_LMS_HIER_VERSION,
				 .flags = leave ? GC_LMS_HIER_LEAVE : 0,
				 .src = l->c.source.s_addr,
				 .group = l->c.group.s_addr,
				 .replier = l->c.ifaddr.s_addr,
				 .cost = htonl(l->c.replier_cost),
				 .hold_ms = htonl(3 * l->c.report_ms) };
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons(GC_LMS_HIER_PORT),
				  .sin_addr.s_addr = htonl(GC_LMS_HIER_GROUP) };

	if (sendto(l->hierfd, &m, sizeof(m), 0, (struct sockaddr *)&to, sizeof(to)) == sizeof(m))
		l->st.reports_sent++;
}

GC_EXPORT void gc_ltp_destroy(struct gc_ltp *l)
{
	if (!l)
		return;
	if (l->hierfd >= 0) {
		report(l, true); /* withdraw at once rather than after the hold time */
		close(l->hierfd);
	}
	if (l->fd >= 0)
		close(l->fd);
	if (l->rawfd >= 0)
		close(l->rawfd);
	free(l->cache.mem);
	free(l->cache.meta);
	if (l->win.slot)
		ltp_window_free(&l->win);
	free(l);
}

GC_EXPORT int gc_ltp_fd(const struct gc_ltp *l)
{
	return l ? l->fd : gc_seterr(EFAULT, "l: NULL");
}

/* ---- packets ------------------------------------------------------------- */

static void put_hdr(uint8_t *p, const struct gc_ltp *l, int type, uint32_t seq, uint32_t trail,
		    uint16_t flags, uint16_t len)
{
	struct ltp_hdr h = { .magic = { 'L', 'T' },
			     .version = LTP_VERSION,
			     .type = (uint8_t)type,
			     .session = htonl(l->session),
			     .seq = htonl(seq),
			     .trail = htonl(trail),
			     .flags = htons(flags),
			     .len = htons(len) };
	memcpy(p, &h, sizeof(h));
}

static uint32_t trail(const struct gc_ltp *l)
{
	return l->next_seq > l->cache.nslots ? l->next_seq - l->cache.nslots : 0;
}

static struct sockaddr_in group_addr(const struct gc_ltp *l)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_port = htons(l->c.port),
				     .sin_addr = l->c.group };
}

/* ---- sender -------------------------------------------------------------- */

GC_EXPORT ssize_t gc_ltp_send(struct gc_ltp *l, const void *buf, size_t len)
{
	if (!l || (!buf && len))
		return gc_seterr(EFAULT, "%s: NULL", l ? "buf" : "l");
	if (!(l->c.flags & GC_LTP_SENDER))
		return gc_seterr(EINVAL, "l: not a sender");
	if (l->finished)
		return gc_seterr(EINVAL, "l: the stream is finished (gc_ltp_finish())");
	if (len == 0 || len > GC_LTP_MAX_PAYLOAD)
		return gc_seterr(len ? EMSGSIZE : EINVAL, "len: %zu, not in 1..%d", len,
				 GC_LTP_MAX_PAYLOAD);
	uint64_t now = gc_now_ns();
	double cost = (double)(len + GC_LTP_HDRLEN + 28); /* + IPv4 and UDP headers */
	if (!ltp_bucket_take(&l->rate, cost, now)) {
		l->want = cost;
		return gc_seterr(EAGAIN, "rate: %llu bytes/s reached; poll with gc_ltp_timeout()",
				 (unsigned long long)l->c.rate);
	}
	l->want = 0;
	uint8_t *p = l->buf;
	put_hdr(p, l, LTP_DATA, l->next_seq, trail(l), 0, (uint16_t)len);
	memcpy(p + GC_LTP_HDRLEN, buf, len);
	struct sockaddr_in to = group_addr(l);
	if (sendto(l->fd, p, len + GC_LTP_HDRLEN, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		l->rate.tokens += cost; /* not sent, not charged */
		return gc_seterr(errno, "sendto %s:%u", gc_lms_ntoa(l->c.group), l->c.port);
	}
	cache_put(&l->cache, l->next_seq, p, len + GC_LTP_HDRLEN);
	l->next_seq++;
	l->st.data_sent++;
	l->st.bytes_sent += len;
	l->hb_ns = (uint64_t)l->c.heartbeat_ms * 1000000ull;
	l->next_hb_ns = now + l->hb_ns;
	return (ssize_t)len;
}

static void heartbeat(struct gc_ltp *l, uint64_t now)
{
	uint8_t p[GC_LTP_HDRLEN];
	struct sockaddr_in to = group_addr(l);

	put_hdr(p, l, LTP_HEARTBEAT, l->next_seq, trail(l), l->finished ? LTP_FIN : 0, 0);
	if (sendto(l->fd, p, sizeof(p), 0, (struct sockaddr *)&to, sizeof(to)) == sizeof(p))
		l->st.heartbeats_sent++;
	/* Back off while idle: the tail is found quickly, an idle stream costs little. */
	l->hb_ns = l->hb_ns * 2 < LTP_MAX_HB_NS ? l->hb_ns * 2 : LTP_MAX_HB_NS;
	l->next_hb_ns = now + l->hb_ns;
}

GC_EXPORT int gc_ltp_finish(struct gc_ltp *l)
{
	if (!l)
		return gc_seterr(EFAULT, "l: NULL");
	if (!(l->c.flags & GC_LTP_SENDER))
		return gc_seterr(EINVAL, "l: not a sender");
	if (!l->finished) {
		l->finished = true;
		l->hb_ns = (uint64_t)l->c.heartbeat_ms * 1000000ull / 2;
		heartbeat(l, gc_now_ns());
	}
	return 0;
}

/* ---- requests and repairs ------------------------------------------------- */

static bool admit(struct gc_ltp *l, uint32_t from, uint64_t now)
{
	struct ltp_peer *p = NULL, *old = &l->peer[0];

	for (int i = 0; i < LTP_PEERS; i++) {
		if (l->peer[i].addr == from && l->peer[i].used_ns) {
			p = &l->peer[i];
			break;
		}
		if (l->peer[i].used_ns < old->used_ns)
			old = &l->peer[i];
	}
	if (!p) { /* a new requester takes the least recently used entry */
		p = old;
		p->addr = from;
		ltp_bucket_init(&p->b, l->c.req_rate_peer, l->c.req_rate_peer / 10.0 + 1, now);
	}
	p->used_ns = now;
	/* The global bucket is charged only for what the requester's own
	 * admits: one flooder cannot use up everybody's share. */
	if (!ltp_bucket_take(&p->b, 1, now) || !ltp_bucket_take(&l->req_all, 1, now)) {
		l->st.requests_limited++;
		return false;
	}
	return true;
}

static void repair(struct gc_ltp *l, const struct gc_lms_info *tp, const uint8_t *pkt, size_t len)
{
	uint8_t *p = l->buf;
	struct ltp_hdr h;

	memcpy(p, pkt, len);
	memcpy(&h, p, sizeof(h));
	h.flags = htons(ntohs(h.flags) | LTP_REPAIR);
	memcpy(p, &h, sizeof(h));
	ssize_t n;
	if (tp) {
		/* GC_LTP_NO_PROVISIONAL: bit 15 of tpif is the ifindex's */
		unsigned fl = l->c.flags & GC_LTP_NO_PROVISIONAL ? GC_LMS_DMCAST_NO_PROVISIONAL : 0;
		struct gc_lms_dmcast d = GC_LMS_DMCAST_INIT(.flags = fl, .tp = *tp,
							    .sport = l->c.port, .dport = l->c.port);
		n = gc_lms_dmcast(l->rawfd, &d, p, len, 0);
	} else {
		struct sockaddr_in to = group_addr(l);
		n = sendto(l->fd, p, len, 0, (struct sockaddr *)&to, sizeof(to));
	}
	if (n == (ssize_t)len)
		l->st.repairs_sent++;
}

static void answer(struct gc_ltp *l, const struct ltp_hdr *h, const uint8_t *body,
		   const struct sockaddr_in *from, const struct gc_lms_info *info, uint64_t now)
{
	bool escalated = info->code != GC_LMS_REQUEST;
	const struct gc_lms_info *tp = NULL;
	struct gc_lms_info prov;

	if (escalated) {
		/* Only the source takes a request without the option. */
		if (!(l->c.flags & GC_LTP_SENDER) || !(ntohs(h->flags) & LTP_ESCALATED)) {
			l->st.bad_packets++;
			return;
		}
	} else if (info->src.s_addr != l->c.source.s_addr || info->group.s_addr != l->c.group.s_addr) {
		l->st.bad_packets++;
		return;
	} else if (info->tpaddr.s_addr != INADDR_ANY && (l->c.flags & GC_LTP_NO_PROVISIONAL)) {
		/* Routers without provisional marks: bit 15 is the ifindex's
		 * (repair() says so in the dmcast's flags). */
		tp = info;
	} else if (info->tpaddr.s_addr != INADDR_ANY && (info->tpif & GC_LMS_PROVISIONAL)) {
		/* Not turned: it went up to the source, a replier never sees one. */
		if (!(l->c.flags & GC_LTP_SENDER)) {
			l->st.bad_packets++;
			return;
		}
		prov = *info;
		prov.tpif &= ~(unsigned)GC_LMS_PROVISIONAL;
		tp = &prov;
	} else if (info->tpaddr.s_addr != INADDR_ANY) {
		tp = info;
	} else if (!(l->c.flags & GC_LTP_SENDER)) {
		/* Unmarked requests go up to the source; a replier never sees one. */
		l->st.bad_packets++;
		return;
	}
	uint16_t n = ntohs(h->len) / sizeof(struct ltp_pair);
	if (ntohs(h->len) % sizeof(struct ltp_pair) || n == 0 || n > LTP_NAK_MAX_RANGES) {
		l->st.bad_packets++;
		return;
	}
	if (!admit(l, from->sin_addr.s_addr, now))
		return;
	l->st.requests_received++;
	/* Bounded work per request, whatever it asks for: at most 64 repairs
	 * sent and 256 sequence numbers looked up. */
	unsigned budget = LTP_NAK_MAX_RANGES, lookups = 4 * LTP_NAK_MAX_RANGES;
	for (uint16_t i = 0; i < n && budget && lookups; i++) {
		struct ltp_pair pr;
		memcpy(&pr, body + i * sizeof(pr), sizeof(pr));
		uint32_t lo = ntohl(pr.lo), hi = ntohl(pr.hi);
		if ((int32_t)(hi - lo) < 0) {
			l->st.bad_packets++;
			return;
		}
		for (uint32_t s = lo; budget && lookups; s++, lookups--) {
			size_t len;
			const uint8_t *pkt = cache_get(&l->cache, s, &len);
			if (!pkt) {
				l->st.repairs_missing++; /* the thesis: a replier without it keeps quiet */
			} else if (!ltp_bucket_take(&l->repairs, 1, now)) {
				l->st.repairs_limited++;
				return;
			} else {
				repair(l, tp, pkt, len);
				budget--;
			}
			if (s == hi)
				break;
		}
	}
}

/* Receivers take data and heartbeats only from S's address and port. */
static bool from_source(const struct gc_ltp *l, const struct sockaddr_in *from)
{
	return from->sin_addr.s_addr == l->c.source.s_addr && from->sin_port == htons(l->c.port);
}

static void handle(struct gc_ltp *l, const uint8_t *p, size_t n, const struct sockaddr_in *from,
		   const struct gc_lms_info *info, uint64_t now)
{
	struct ltp_hdr h;

	if (n < GC_LTP_HDRLEN) {
		l->st.bad_packets++;
		return;
	}
	memcpy(&h, p, sizeof(h));
	uint32_t session = ntohl(h.session);
	if (h.magic[0] != 'L' || h.magic[1] != 'T' || h.version != LTP_VERSION ||
	    ntohs(h.len) != n - GC_LTP_HDRLEN || (l->have_session && session != l->session)) {
		l->st.bad_packets++;
		return;
	}
	const uint8_t *body = p + GC_LTP_HDRLEN;
	size_t blen = n - GC_LTP_HDRLEN;
	uint16_t flags = ntohs(h.flags);
	if (h.type == LTP_NAK) {
		if (!(l->c.flags & (GC_LTP_SENDER | GC_LTP_REPLIER)) || !l->have_session) {
			l->st.bad_packets++;
			return;
		}
		answer(l, &h, body, from, info, now);
		return;
	}
	if (!(l->c.flags & GC_LTP_RECEIVER) || !from_source(l, from) ||
	    (h.type != LTP_DATA && h.type != LTP_HEARTBEAT) || (h.type == LTP_DATA && blen == 0) ||
	    blen > GC_LTP_MAX_PAYLOAD) {
		l->st.bad_packets++;
		return;
	}
	if (!l->have_session) {
		l->session = session;
		l->have_session = true;
	}
	uint32_t seq = ntohl(h.seq), tr = ntohl(h.trail);
	if (h.type == LTP_HEARTBEAT) {
		ltp_window_heartbeat(&l->win, seq, tr, flags & LTP_FIN);
		return;
	}
	int r = ltp_window_put(&l->win, seq, tr, flags & LTP_FIN, flags & LTP_REPAIR, body, blen, now);
	if ((l->c.flags & GC_LTP_REPLIER) && (r == LTP_PUT_NEW || r == LTP_PUT_BEYOND)) {
		/* Cache what we got as we got it, minus the repair flag. */
		h.flags = htons((uint16_t)(flags & ~(unsigned)LTP_REPAIR));
		cache_put(&l->cache, seq, p, n);
		memcpy(cache_slot(&l->cache, seq), &h, sizeof(h));
	}
}

/* 0, or -errno (-EPERM, -EINVAL: no request can go out) with the message. */
static int send_nak(struct gc_ltp *l, const struct ltp_nak *k)
{
	uint8_t p[GC_LTP_HDRLEN + sizeof(k->pair)];
	size_t blen = k->n * sizeof(struct ltp_pair);

	put_hdr(p, l, LTP_NAK, ++l->reqseq, 0, 0, (uint16_t)blen);
	for (uint32_t i = 0; i < k->n; i++) {
		struct ltp_pair pr = { htonl(k->pair[i].lo), htonl(k->pair[i].hi) };
		memcpy(p + GC_LTP_HDRLEN + i * sizeof(pr), &pr, sizeof(pr));
	}
	struct sockaddr_in to = group_addr(l);
	if (gc_lms_request(l->fd, &to, l->c.source, l->c.group, p, GC_LTP_HDRLEN + blen, 0) < 0) {
		if (errno == EPERM || errno == EINVAL)
			return -errno; /* the message says why */
	} else {
		l->st.requests_sent++;
	}
	if (k->escalate) {
		struct sockaddr_in s = { .sin_family = AF_INET,
					 .sin_port = htons(l->c.port),
					 .sin_addr = l->c.source };
		put_hdr(p, l, LTP_NAK, l->reqseq, 0, LTP_ESCALATED, (uint16_t)blen);
		if (sendto(l->fd, p, GC_LTP_HDRLEN + blen, 0, (struct sockaddr *)&s, sizeof(s)) > 0)
			l->st.escalations_sent++;
	}
	return 0;
}

GC_EXPORT int gc_ltp_process(struct gc_ltp *l)
{
	if (!l)
		return gc_seterr(EFAULT, "l: NULL");
	uint64_t now = gc_now_ns();
	for (int i = 0; i < LTP_READ_BATCH; i++) {
		struct sockaddr_in from;
		struct gc_lms_info info;
		ssize_t n = gc_lms_recv(l->fd, l->buf, sizeof(l->buf), MSG_DONTWAIT, &from, &info);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EBADMSG || errno == EMSGSIZE) {
				l->st.bad_packets++;
				continue;
			}
			return -1;
		}
		/* handle() may reuse l->buf for a repair: work on a copy. */
		uint8_t pkt[LTP_PKT_MAX + sizeof(struct ltp_pair) * LTP_NAK_MAX_RANGES];
		if ((size_t)n > sizeof(pkt)) {
			l->st.bad_packets++;
			continue;
		}
		memcpy(pkt, l->buf, (size_t)n);
		handle(l, pkt, (size_t)n, &from, &info, now);
	}
	now = gc_now_ns();
	if (l->c.flags & GC_LTP_RECEIVER) {
		struct ltp_nak naks[8];
		size_t k;
		do {
			k = ltp_window_due(&l->win, now, naks, 8);
			for (size_t i = 0; i < k; i++) {
				int r = send_nak(l, &naks[i]);
				if (r < 0)
					return (int)gc_err(r);
			}
		} while (k == 8);
	}
	if ((l->c.flags & GC_LTP_SENDER) && (l->next_seq || l->finished) && now >= l->next_hb_ns)
		heartbeat(l, now);
	if (l->hierfd >= 0 && now >= l->next_report_ns) {
		report(l, false);
		l->next_report_ns = now + (uint64_t)l->c.report_ms * 1000000ull;
	}
	return 0;
}

GC_EXPORT int gc_ltp_timeout(struct gc_ltp *l)
{
	if (!l)
		return gc_seterr(EFAULT, "l: NULL");
	uint64_t now = gc_now_ns(), d = UINT64_MAX;
	if ((l->c.flags & GC_LTP_SENDER) && (l->next_seq || l->finished))
		d = l->next_hb_ns;
	if (l->want > 0) {
		ltp_bucket_fill(&l->rate, now);
		double missing = l->want - l->rate.tokens;
		uint64_t t = missing > 0 ? now + (uint64_t)(missing * 1e9 / l->rate.rate) : now;
		d = t < d ? t : d;
	}
	if (l->c.flags & GC_LTP_RECEIVER) {
		uint64_t t = ltp_window_deadline(&l->win, now);
		d = t < d ? t : d;
	}
	if (l->hierfd >= 0 && l->next_report_ns < d)
		d = l->next_report_ns;
	if (d == UINT64_MAX)
		return -1;
	if (d <= now)
		return 0;
	uint64_t ms = (d - now + 999999) / 1000000;
	return ms > 60000 ? 60000 : (int)ms;
}

GC_EXPORT ssize_t gc_ltp_recv(struct gc_ltp *l, void *buf, size_t len, struct gc_ltp_msg *m)
{
	if (!l || !m || (!buf && len))
		return gc_seterr(EFAULT, "%s: NULL", !l ? "l" : !m ? "m" : "buf");
	if (!(l->c.flags & GC_LTP_RECEIVER))
		return gc_seterr(EINVAL, "l: not a receiver");
	const uint8_t *data = NULL;
	size_t dlen = 0;
	if (!ltp_window_peek(&l->win, m, &data, &dlen))
		return gc_seterr(EAGAIN, "nothing to deliver yet");
	if (m->type == GC_LTP_DATA) {
		if (dlen > len)
			return gc_seterr(EMSGSIZE, "len: %zu, the next datagram has %zu bytes", len, dlen);
		memcpy(buf, data, dlen);
	}
	ltp_window_consume(&l->win, m);
	return m->type == GC_LTP_DATA ? (ssize_t)dlen : 0;
}

/* sized (groupcast/common.h); 1.0 ends at reports_sent */
static const struct gc_sized ltp_stats_t =
	GC_SIZED(gc_ltp_stats, GC_LTP_STATS_INIT, reports_sent, reports_sent);

GC_EXPORT int gc_ltp_stats(const struct gc_ltp *l, struct gc_ltp_stats *st)
{
	if (!l || !st)
		return gc_seterr(EFAULT, "%s: NULL", l ? "st" : "l");
	return (int)gc_err(gc_sized_out(&ltp_stats_t, "gc_ltp_stats", "st", st, &l->st));
}

GC_EXPORT size_t gc_ltp_recovery_samples(const struct gc_ltp *l, uint32_t *us, size_t max)
{
	if (!l || !us || !l->win.samples)
		return 0;
	uint64_t have = l->win.nsamples < LTP_RECOVERY_SAMPLES ? l->win.nsamples : LTP_RECOVERY_SAMPLES;
	size_t n = have < max ? (size_t)have : max;
	for (size_t i = 0; i < n; i++)
		us[i] = l->win.samples[(l->win.nsamples - n + i) % LTP_RECOVERY_SAMPLES];
	return n;
}
