/* SPDX-License-Identifier: MIT */
/*
 * dccp.c - the public API of DCCP connections (groupcast/dccp.h), gc_dccp_*:
 * argument checks, setup and teardown, connect, listen and accept (the
 * listener's socket shared with the connections it accepted), receive,
 * stats and close.  The glue to the ring engine is in engine.c.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sodium.h>

#include <groupcast/dccp.h>

#include "core/core.h"
#include "dccp/engine.h"

static const char *const state_names[] = {
	"CLOSED", "LISTEN",   "REQUEST", "RESPOND",  "PARTOPEN",
	"OPEN",	  "CLOSEREQ", "CLOSING", "TIMEWAIT",
};

GC_EXPORT const char *gc_dccp_state_name(int state)
{
	if (state < 0 || state >= (int)(sizeof(state_names) / sizeof(state_names[0])))
		return "?";
	return state_names[state];
}

/* sized (groupcast/common.h); 1.0 ends at timeout_ms */
static const struct gc_sized dccp_opts_t =
	GC_SIZED(gc_dccp_opts, GC_DCCP_OPTS_INIT, timeout_ms, timeout_ms);

static int check_opts(const char *fn, const struct gc_dccp_opts *o, struct gc_dccp_opts *out)
{
	int r = gc_sized_in(&dccp_opts_t, fn, "opts", out, o);
	if (r < 0)
		return r;
	out->sz = sizeof(*out);
	if (!out->ccid)
		out->ccid = 2;
	if (out->ccid != 2 && out->ccid != 3)
		return gc_errf(EINVAL, "%s: opts->ccid %d: expected 2 or 3", fn, out->ccid);
	if (out->encap != GC_DCCP_NATIVE && out->encap != GC_DCCP_UDP)
		return gc_errf(EINVAL, "%s: opts->encap %d: expected GC_DCCP_NATIVE or GC_DCCP_UDP",
			       fn, out->encap);
	if (!out->mps)
		out->mps = 1400;
	if (out->mps > 65000)
		return gc_errf(EINVAL, "%s: opts->mps %u: at most 65000", fn, out->mps);
	if (!out->ring_slots)
		out->ring_slots = 1024;
	if (out->ring_slots < 2 || out->ring_slots > GC_RING_MAX_ENTRIES ||
	    (out->ring_slots & (out->ring_slots - 1)))
		return gc_errf(EINVAL, "%s: opts->ring_slots %u: a power of 2 in 2..%u", fn,
			       out->ring_slots, GC_RING_MAX_ENTRIES);
	if (!out->zone_bufs)
		out->zone_bufs = out->ring_slots;
	if (out->zone_bufs < out->ring_slots)
		return gc_errf(EINVAL, "%s: opts->zone_bufs %u: at least ring_slots (%u)", fn,
			       out->zone_bufs, out->ring_slots);
	if (!out->seq_window)
		out->seq_window = 5 * out->ring_slots > 100 ? 5 * out->ring_slots : 100;
	if (out->seq_window < 32)
		return gc_errf(EINVAL, "%s: opts->seq_window %u: at least 32", fn, out->seq_window);
	if (out->ack_ratio && out->ccid != 2)
		return gc_errf(EINVAL, "%s: opts->ack_ratio %u: only CCID 2 has an Ack Ratio", fn,
			       out->ack_ratio);
	if (out->ack_ratio > 0xffff)
		return gc_errf(EINVAL, "%s: opts->ack_ratio %u: at most 65535 (RFC 4340 §11.3)", fn,
			       out->ack_ratio);
	if (!out->timeout_ms)
		out->timeout_ms = 10000;
	return 0;
}

static int addr_in(const char *fn, const struct sockaddr *sa, socklen_t len, struct sockaddr_storage *ss)
{
	if (!sa)
		return gc_errf(EFAULT, "%s: address is NULL", fn);
	if (!((sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
	      (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))))
		return gc_errf(EAFNOSUPPORT, "%s: address: expected sockaddr_in or sockaddr_in6", fn);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, sa,
	       sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	return 0;
}

/* ---- setup and teardown ----------------------------------------------------- */

static struct gc_dccp *c_new(const struct gc_dccp_opts *o)
{
	struct gc_dccp *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = c->attach_fd = -1;
	c->udp = o->encap == GC_DCCP_UDP;
	c->ninflight = 4 * (size_t)o->ring_slots;
	c->inflight = calloc(c->ninflight, sizeof(*c->inflight));
	c->rxbuf = malloc((size_t)DCCP_SOCK_BATCH * RXSLOT);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	if (!c->inflight || !c->rxbuf) {
		free(c->inflight);
		free(c->rxbuf);
		free(c);
		return NULL;
	}
	return c;
}

static void c_free(struct gc_dccp *c)
{
	if (c->eng)
		gc_ring_engine_destroy(c->eng);
	if (c->ring)
		gc_ring_destroy(c->ring);
	if (c->zone)
		gc_zone_destroy(c->zone);
	if (c->owner) {
		pthread_mutex_lock(&c->owner->mu);
		for (struct gc_dccp **pp = &c->owner->owned; *pp; pp = &(*pp)->next_owned)
			if (*pp == c) {
				*pp = c->next_owned;
				break;
			}
		pthread_mutex_unlock(&c->owner->mu);
	}
	dccp_conn_free(&c->conn);
	if (c->fd >= 0)
		close(c->fd);
	if (c->attach_fd >= 0)
		close(c->attach_fd);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c->inflight);
	free(c->rxbuf);
	free(c);
}

GC_EXPORT struct gc_dccp *gc_dccp_connect(const struct sockaddr *peer, socklen_t len,
					  const struct gc_dccp_opts *opts)
{
	static const char fn[] = "gc_dccp_connect";
	struct gc_dccp_opts o;
	struct sockaddr_storage ss;
	int r;
	if ((r = check_opts(fn, opts, &o)) < 0 || (r = addr_in(fn, peer, len, &ss)) < 0)
		return gc_err_ptr(r);
	if (ssport(&ss) == 0 && o.encap == GC_DCCP_UDP)
		ssset_port(&ss, GC_DCCP_UDP_PORT);
	if (ssport(&ss) == 0)
		return gc_seterr(EINVAL, "%s: peer port is 0", fn), NULL;
	struct gc_dccp *c = c_new(&o);
	if (!c)
		return gc_seterr(ENOMEM, "%s: out of memory", fn), NULL;
	c->peer = ss;
	r = dccp_sock_open(c->udp, ss.ss_family);
	if (r < 0) {
		r = gc_errf(-r, "%s: %s socket: %s%s", fn, c->udp ? "UDP" : "raw DCCP",
			    strerror(-r), r == -EPERM ? " (native DCCP needs CAP_NET_RAW)" : "");
		goto fail;
	}
	c->fd = r;
	r = dccp_sock_local_for(&ss, &c->local);
	if (r < 0) {
		r = gc_errf(-r, "%s: no route to the peer: %s", fn, strerror(-r));
		goto fail;
	}
	uint16_t sport = 0;
	if (c->udp) {
		ssset_port(&c->local, 0);
		if (bind(c->fd, (struct sockaddr *)&c->local, sslen(&c->local)) < 0 ||
		    connect(c->fd, (struct sockaddr *)&ss, sslen(&ss)) < 0) {
			r = gc_errf(errno, "%s: UDP socket: %s", fn, strerror(errno));
			goto fail;
		}
		socklen_t sl = sizeof(c->local);
		getsockname(c->fd, (struct sockaddr *)&c->local, &sl);
		sport = ssport(&c->local);
	} else {
		randombytes_buf(&sport, sizeof(sport));
		sport = (uint16_t)(32768 + sport % 28000);
	}
	struct dccp_conn_params p = { .ccid = (uint8_t)o.ccid,
				      .service = o.service,
				      .mps = o.mps,
				      .seq_window = o.seq_window,
				      .ack_ratio = o.ack_ratio,
				      .sport = sport,
				      .dport = ssport(&ss),
				      .udp = c->udp };
	dccp_pseudo_from(&p.ph_out, &c->local, &c->peer);
	dccp_pseudo_from(&c->ph_in, &c->peer, &c->local);
	struct dccp_conn_env env = dccp_engine_env(c);
	uint64_t iss;
	randombytes_buf(&iss, sizeof(iss));
	uint64_t t0 = gc_now_ns(), deadline = t0 + (uint64_t)o.timeout_ms * 1000000u;
	pthread_mutex_lock(&c->mu);
	dccp_conn_connect(&c->conn, &p, &env, iss, t0);
	/* the handshake runs here; the engine takes over once it is done */
	while (c->conn.state == DCCP_S_REQUEST) {
		uint64_t now = gc_now_ns();
		if (now >= deadline)
			break;
		uint64_t t = dccp_conn_next_timer(&c->conn);
		uint64_t wait = (t && t < deadline ? t : deadline);
		int ms = wait > now ? (int)((wait - now) / 1000000u) + 1 : 0;
		struct pollfd pf = { .fd = c->fd, .events = POLLIN };
		pthread_mutex_unlock(&c->mu);
		poll(&pf, 1, ms);
		pthread_mutex_lock(&c->mu);
		dccp_engine_poll(c, gc_now_ns());
	}
	enum dccp_state st = c->conn.state;
	uint8_t code = c->conn.st.reset_code_rx;
	pthread_mutex_unlock(&c->mu);
	if (st != DCCP_S_PARTOPEN && st != DCCP_S_OPEN) {
		if (st == DCCP_S_REQUEST) {
			dccp_conn_reset(&c->conn, DCCP_RESET_ABORTED, gc_now_ns());
			r = gc_errf(ETIMEDOUT, "%s: no Response within %u ms", fn, o.timeout_ms);
		} else {
			r = gc_errf(ECONNREFUSED, "%s: the peer reset the connection (code %u)", fn, code);
		}
		goto fail;
	}
	if ((r = dccp_engine_create(c, &o, fn)) < 0)
		goto fail;
	return c;
fail:
	c_free(c);
	return gc_err_ptr(r);
}

GC_EXPORT struct gc_dccp_listener *gc_dccp_listen(const struct sockaddr *local, socklen_t len,
						  const struct gc_dccp_opts *opts)
{
	static const char fn[] = "gc_dccp_listen";
	struct gc_dccp_opts o;
	struct sockaddr_storage ss;
	int r;
	if ((r = check_opts(fn, opts, &o)) < 0 || (r = addr_in(fn, local, len, &ss)) < 0)
		return gc_err_ptr(r);
	bool udp = o.encap == GC_DCCP_UDP;
	if (ssport(&ss) == 0 && udp)
		ssset_port(&ss, GC_DCCP_UDP_PORT);
	if (ssport(&ss) == 0)
		return gc_seterr(EINVAL, "%s: port 0 (native DCCP needs a port)", fn), NULL;
	struct gc_dccp_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return gc_seterr(ENOMEM, "%s: out of memory", fn), NULL;
	pthread_mutex_init(&l->mu, NULL);
	l->udp = udp;
	l->local = ss;
	l->o = o;
	l->fd = dccp_sock_open(udp, ss.ss_family);
	if (l->fd < 0) {
		gc_seterr(-l->fd, "%s: %s socket: %s%s", fn, udp ? "UDP" : "raw DCCP",
			  strerror(-l->fd), l->fd == -EPERM ? " (native DCCP needs CAP_NET_RAW)" : "");
		free(l);
		return NULL;
	}
	int one = 1;
	struct sockaddr_storage b = ss;
	if (!udp)
		ssset_port(&b, 0); /* raw sockets have no ports: ours is in the DCCP header */
	else {
		setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(l->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	}
	if (ss.ss_family == AF_INET6)
		setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(l->fd, (struct sockaddr *)&b, sslen(&b)) < 0) {
		gc_seterr(errno, "%s: bind: %s", fn, strerror(errno));
		close(l->fd);
		free(l);
		return NULL;
	}
	struct dccp_conn_params p = { .ccid = (uint8_t)o.ccid,
				      .service = o.service,
				      .mps = o.mps,
				      .seq_window = o.seq_window,
				      .ack_ratio = o.ack_ratio,
				      .sport = ssport(&ss),
				      .udp = udp };
	dccp_listener_init(&l->l, &p);
	return l;
}

static int l_emit(void *arg, const uint8_t *p, size_t len)
{
	const struct dccp_sock_pkt *sp = ((void **)arg)[1];
	const struct gc_dccp_listener *l = ((void **)arg)[0];
	return dccp_sock_send(l->fd, l->udp, &sp->from, l->udp ? NULL : &sp->to, p, len);
}

#define DRAIN_MAX 4096 /* datagrams taken from the listener's queue at accept */

/*
 * A connection accepted here owns this packet: the listener must not answer
 * it (no Reset to a live connection).  Native: the connection's raw socket
 * sees the packet too, so it is left be.  DCCP-UDP: only the listener's
 * socket has it (it arrived before the connection's socket was connected
 * and queued behind another peer's datagram, see drain()), so it is handed
 * to the connection.
 */
static bool owned(struct gc_dccp_listener *l, const struct dccp_sock_pkt *sp,
		  const struct dccp_hdr *h, uint64_t now)
{
	bool r = false;
	pthread_mutex_lock(&l->mu);
	for (struct gc_dccp *c = l->owned; c && !r; c = c->next_owned) {
		r = dccp_engine_is_peer(c, &sp->from) && h->sport == c->conn.p.dport &&
			h->dport == c->conn.p.sport;
		if (r && c->udp) {
			pthread_mutex_lock(&c->mu);
			dccp_engine_input(c, sp, now);
			dccp_engine_wake(c, now);
			pthread_mutex_unlock(&c->mu);
		}
	}
	pthread_mutex_unlock(&l->mu);
	return r;
}

/*
 * DCCP-UDP: the peer's datagrams that arrived at the listener's socket
 * between its handshake Ack and connect() of the connection's socket (its
 * PARTOPEN DataAcks, and Data once our Ack reached it), taken from the head
 * of the listener's queue for the new connection.  A datagram of another
 * source stops the drain (a UDP queue is read in order): what is behind it
 * reaches the connection through owned() on the next accept.  Bounded by
 * what was queued when connect() returned: new datagrams of this peer go to
 * the connected socket.
 */
static void drain(struct gc_dccp_listener *l, struct gc_dccp *c, uint8_t *buf, size_t cap)
{
	for (unsigned i = 0; i < DRAIN_MAX; i++) {
		struct sockaddr_storage from;
		struct dccp_sock_pkt sp;
		if (dccp_sock_peek_from(l->fd, &from) < 0 || !dccp_engine_is_peer(c, &from))
			break;
		ssize_t n = dccp_sock_recv(l->fd, true, buf, cap, &sp);
		if (n < 0)
			break;
		if (n > 0)
			dccp_engine_input(c, &sp, gc_now_ns());
	}
}

GC_EXPORT struct gc_dccp *gc_dccp_accept(struct gc_dccp_listener *l, int timeout_ms)
{
	static const char fn[] = "gc_dccp_accept";
	if (!l)
		return gc_seterr(EINVAL, "%s: listener is NULL", fn), NULL;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : gc_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct gc_dccp *c = c_new(&l->o);
	if (!c)
		return gc_seterr(ENOMEM, "%s: out of memory", fn), NULL;
	static _Thread_local uint8_t buf[65536 + 64];
	/* Native: the connection's raw socket is opened when the handshake
	 * starts (the first Request of a family), before we answer it.  A raw
	 * socket sees only what arrives once it exists.  Linux 6.1 sends its
	 * first DataAck 30 us behind the Ack; a socket opened on reading the
	 * Ack missed it whenever we read the Ack later than that (a loaded CI
	 * machine), and the listener, which drops packets of connections, lost
	 * it: one data packet short at 0 % loss. */
	int pre = -1, pre_family = AF_UNSPEC;
	for (;;) {
		uint64_t now = gc_now_ns();
		struct dccp_sock_pkt sp;
		ssize_t n = dccp_sock_recv(l->fd, l->udp, buf, sizeof(buf), &sp);
		if (n == -EAGAIN || n == -EWOULDBLOCK) {
			if (now >= deadline) {
				if (pre >= 0)
					close(pre);
				c_free(c);
				return gc_seterr(ETIMEDOUT, "%s: no connection within %d ms", fn,
						 timeout_ms),
				       NULL;
			}
			uint64_t left = deadline - now;
			int ms = left > 100000000u ? 100 : (int)(left / 1000000u) + 1;
			struct pollfd pf = { .fd = l->fd, .events = POLLIN };
			poll(&pf, 1, ms);
			continue;
		}
		if (n < 0) {
			if (pre >= 0)
				close(pre);
			c_free(c);
			return gc_seterr((int)-n, "%s: recv: %s", fn, strerror((int)-n)), NULL;
		}
		if (n == 0)
			continue;
		struct dccp_pseudo ph_in, ph_out;
		dccp_pseudo_from(&ph_in, &sp.from, &sp.to);
		dccp_pseudo_from(&ph_out, &sp.to, &sp.from);
		struct dccp_hdr h;
		if (dccp_parse(sp.pkt, sp.len, l->udp ? NULL : &ph_in, &h, &l->l.err) != DCCP_OK)
			continue;
		if (owned(l, &sp, &h, now))
			continue;
		if (!l->udp && (h.type == DCCP_REQUEST || h.type == DCCP_ACK || h.type == DCCP_DATAACK) &&
		    pre_family != sp.from.ss_family) {
			if (pre >= 0)
				close(pre);
			pre = dccp_sock_open(false, sp.from.ss_family);
			pre_family = pre >= 0 ? sp.from.ss_family : AF_UNSPEC;
		}
		void *ea[2] = { l, &sp };
		struct dccp_conn_env env = dccp_engine_env(c);
		/* the Ack that completes the handshake is answered through the
		 * listener's socket (borrowed): the connection's own does not
		 * exist yet */
		c->fd = l->fd;
		c->peer = sp.from;
		c->local = sp.to;
		ssset_port(&c->local, ssport(&l->local));
		pthread_mutex_lock(&c->mu);
		bool ok = dccp_listener_input(&l->l, sp.pkt, sp.len, &h, &ph_in, &ph_out, l->udp,
					      now, l_emit, ea, &c->conn, &env);
		pthread_mutex_unlock(&c->mu);
		c->fd = -1;
		if (!ok)
			continue;
		c->ph_in = ph_in;
		break;
	}
	/* the connection's own socket */
	int r = pre >= 0 && pre_family == c->peer.ss_family
		? pre
		: dccp_sock_open(c->udp, c->peer.ss_family);
	if (pre >= 0 && r != pre)
		close(pre);
	if (r >= 0 && c->udp) {
		int one = 1;
		setsockopt(r, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(r, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		if (c->peer.ss_family == AF_INET6)
			setsockopt(r, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(r, (struct sockaddr *)&c->local, sslen(&c->local)) < 0 ||
		    connect(r, (struct sockaddr *)&c->peer, sslen(&c->peer)) < 0) {
			gc_seterr(errno, "%s: the connection's UDP socket: %s", fn, strerror(errno));
			close(r);
			c_free(c);
			return NULL;
		}
	}
	if (r < 0) {
		gc_seterr(-r, "%s: socket: %s", fn, strerror(-r));
		c_free(c);
		return NULL;
	}
	c->fd = r;
	if (c->udp) {
		pthread_mutex_lock(&c->mu);
		drain(l, c, buf, sizeof(buf));
		pthread_mutex_unlock(&c->mu);
	}
	c->owner = l;
	pthread_mutex_lock(&l->mu);
	c->next_owned = l->owned;
	l->owned = c;
	pthread_mutex_unlock(&l->mu);
	if ((r = dccp_engine_create(c, &l->o, fn)) < 0) {
		c_free(c);
		return gc_err_ptr(r);
	}
	return c;
}

GC_EXPORT void gc_dccp_listener_destroy(struct gc_dccp_listener *l)
{
	if (!l)
		return;
	/* connections outlive their listener: they just stop being owned */
	pthread_mutex_lock(&l->mu);
	for (struct gc_dccp *c = l->owned; c; c = c->next_owned)
		c->owner = NULL;
	pthread_mutex_unlock(&l->mu);
	close(l->fd);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

GC_EXPORT struct gc_ring *gc_dccp_ring(struct gc_dccp *c)
{
	if (!c)
		return gc_seterr(EINVAL, "gc_dccp_ring: connection is NULL"), NULL;
	return c->ring;
}

GC_EXPORT struct gc_zone *gc_dccp_zone(struct gc_dccp *c)
{
	if (!c)
		return gc_seterr(EINVAL, "gc_dccp_zone: connection is NULL"), NULL;
	return c->zone;
}

static void deadline_ts(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* 0, or -ETIMEDOUT once the monotonic deadline ts has passed. */
static int cv_wait(struct gc_dccp *c, const struct timespec *ts)
{
	/* the condition variable is CLOCK_REALTIME by default: poll in short
	 * steps against our monotonic deadline instead of converting */
	struct timespec now, rt;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (ts && (now.tv_sec > ts->tv_sec || (now.tv_sec == ts->tv_sec && now.tv_nsec >= ts->tv_nsec)))
		return -ETIMEDOUT;
	clock_gettime(CLOCK_REALTIME, &rt);
	rt.tv_nsec += 10000000L;
	if (rt.tv_nsec >= 1000000000L) {
		rt.tv_sec++;
		rt.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&c->cv, &c->mu, &rt);
	return 0;
}

GC_EXPORT ssize_t gc_dccp_recv(struct gc_dccp *c, void *buf, size_t len, struct gc_dccp_rxinfo *ri,
			       int timeout_ms)
{
	if (!c)
		return gc_seterr(EINVAL, "gc_dccp_recv: connection is NULL");
	if (!buf && len)
		return gc_seterr(EFAULT, "gc_dccp_recv: buf is NULL");
	struct timespec ts;
	if (timeout_ms >= 0)
		deadline_ts(&ts, timeout_ms);
	struct gc_dccp_rxinfo dummy;
	if (!ri)
		ri = &dummy;
	memset(ri, 0, sizeof(*ri));
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct dccp_rxpkt p;
		if (dccp_conn_pop(&c->conn, &p)) {
			pthread_mutex_unlock(&c->mu);
			ri->seq = p.seq;
			ri->lost = p.lost;
			if (!p.data) {
				ri->eof = 1; /* losses after the last packet, told by the close */
				return 0;
			}
			memcpy(buf, p.data, p.len < len ? p.len : len);
			free(p.data);
			return p.len;
		}
		if (c->conn.peer_closed) {
			int reset = c->conn.st.resets_rx && c->conn.st.reset_code_rx != DCCP_RESET_CLOSED;
			pthread_mutex_unlock(&c->mu);
			if (reset)
				return gc_seterr(ECONNRESET,
						 "gc_dccp_recv: the peer reset the connection");
			ri->eof = 1;
			return 0;
		}
		if (cv_wait(c, timeout_ms >= 0 ? &ts : NULL) == -ETIMEDOUT) {
			pthread_mutex_unlock(&c->mu);
			return gc_seterr(EAGAIN, "gc_dccp_recv: nothing arrived in %d ms", timeout_ms);
		}
	}
}

/* sized (groupcast/common.h); 1.0 ends at invalid */
static const struct gc_sized dccp_stats_t = GC_SIZED(gc_dccp_stats, GC_DCCP_STATS_INIT, invalid, invalid);

GC_EXPORT int gc_dccp_stats(struct gc_dccp *c, struct gc_dccp_stats *stp)
{
	if (!c || !stp)
		return gc_seterr(EINVAL, "gc_dccp_stats: %s is NULL", c ? "st" : "connection");
	struct gc_dccp_stats now = { 0 }, *st = &now;
	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	if (c->ring && gc_ring_status(c->ring, &rs) == 0)
		st->dead = rs.dead;
	pthread_mutex_lock(&c->mu);
	st->state = (int)c->conn.state;
	st->ccid = c->conn.p.ccid;
	if (c->conn.tx) {
		struct dccp_ccid_tx_stats t;
		c->conn.txo->stats(c->conn.tx, &t);
		st->cwnd = t.cwnd;
		st->pipe = t.pipe;
		st->x_bps = t.x_bps;
		st->rtt_us = t.rtt_ns / 1000u;
		st->p = t.p;
	}
	st->sent = c->conn.st.sent;
	st->acked = c->acked;
	st->lost = c->lost;
	st->received = c->conn.st.received;
	st->rx_lost = c->conn.st.rx_lost;
	st->syncs = c->conn.st.syncs;
	st->invalid = c->conn.st.invalid;
	pthread_mutex_unlock(&c->mu);
	return (int)gc_err(gc_sized_out(&dccp_stats_t, "gc_dccp_stats", "st", stp, st));
}

GC_EXPORT int gc_dccp_close(struct gc_dccp *c, int timeout_ms)
{
	if (!c)
		return gc_seterr(EINVAL, "gc_dccp_close: connection is NULL");
	struct timespec ts;
	deadline_ts(&ts, timeout_ms < 0 ? 10000 : timeout_ms);
	/* let the engine take what the ring holds first */
	if (c->ring)
		gc_ring_wait(c->ring, gc_ring_entries(c->ring) - 1, timeout_ms < 0 ? 10000 : timeout_ms);
	pthread_mutex_lock(&c->mu);
	dccp_conn_close(&c->conn, gc_now_ns());
	int rc = 0;
	while (c->conn.state != DCCP_S_CLOSED && c->conn.state != DCCP_S_TIMEWAIT) {
		if (cv_wait(c, &ts) == -ETIMEDOUT) {
			dccp_conn_reset(&c->conn, DCCP_RESET_ABORTED, gc_now_ns());
			rc = gc_seterr(ETIMEDOUT, "gc_dccp_close: the close was not acknowledged in %d ms",
				       timeout_ms);
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	c_free(c);
	return rc;
}
