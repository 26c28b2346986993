/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the glue between a DCCP connection (conn.c) and the ring
 * engine (ring/cc.h): the connection's callbacks (packets out, with
 * DCCP-UDP data batched into UDP_SEGMENT runs; the in-flight map from a
 * DCCP sequence number to the ring packet it carried, acked or lost),
 * input from the socket, the CC and transmit hooks the engine calls, and
 * starting the engine.  See engine.h; the public API is in dccp.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "dccp/engine.h"

/* ---- the connection's callbacks (called with c->mu held) -------------------- */

/* Send the run of equal-sized packets gathered so far. */
static int gso_flush(struct gc_dccp *c)
{
	int r = 0;
	if (c->gso_n)
		r = dccp_sock_sendv(c->fd, c->gso_iov, 2 * (size_t)c->gso_n,
				    c->gso_n > 1 ? c->gso_seg : 0);
	c->gso_n = 0;
	c->gso_len = 0;
	return r;
}

static int c_emit(void *arg, const uint8_t *p, size_t len)
{
	struct gc_dccp *c = arg;
	if (c->batching)
		gso_flush(c); /* in order: a control packet between data packets */
	return dccp_sock_send(c->fd, c->udp, &c->peer, c->udp ? NULL : &c->local, p, len);
}

/* A DCCP-UDP data packet: into the current run when the engine's xmit is
 * framing (the run ends at a packet of another size), else at once. */
static int c_emitv(void *arg, const uint8_t *hdr, size_t hlen, const void *data, size_t dlen)
{
	struct gc_dccp *c = arg;
	size_t len = hlen + dlen;
	int r = 0;
	if (!c->batching || hlen > GSO_HDR || len > DCCP_SOCK_GSO_BYTES) {
		if (c->batching)
			gso_flush(c);
		struct iovec iov[2] = { { (void *)hdr, hlen }, { (void *)data, dlen } };
		return dccp_sock_sendv(c->fd, iov, 2, 0);
	}
	if (c->gso_n &&
	    (len != c->gso_seg || c->gso_n == DCCP_SOCK_GSO_SEGS || c->gso_len + len > DCCP_SOCK_GSO_BYTES))
		r = gso_flush(c);
	if (!c->gso_n)
		c->gso_seg = len;
	memcpy(c->gso_hdr[c->gso_n], hdr, hlen);
	c->gso_iov[2 * c->gso_n] = (struct iovec){ c->gso_hdr[c->gso_n], hlen };
	c->gso_iov[2 * c->gso_n + 1] = (struct iovec){ (void *)data, dlen };
	c->gso_len += len;
	c->gso_n++;
	return r;
}

static struct inflight *slot(struct gc_dccp *c, uint64_t seq)
{
	struct inflight *f = &c->inflight[seq % c->ninflight];
	return f->used && f->seq == seq ? f : NULL;
}

static void c_acked(void *arg, uint64_t seq)
{
	struct gc_dccp *c = arg;
	struct inflight *f = slot(c, seq);
	if (!f)
		return;
	c->acked++;
	f->used = false;
	if (c->flow)
		gc_flow_ack(c->flow, &f->p);
}

static void c_lost(void *arg, uint64_t seq)
{
	struct gc_dccp *c = arg;
	struct inflight *f = slot(c, seq);
	if (!f)
		return;
	c->lost++;
	f->used = false;
}

struct dccp_conn_env dccp_engine_env(struct gc_dccp *c)
{
	return (struct dccp_conn_env){
		.emit = c_emit, .emitv = c_emitv, .acked = c_acked, .lost = c_lost, .arg = c
	};
}

/* The packet came from c's peer (its address; with DCCP-UDP its port too). */
bool dccp_engine_is_peer(const struct gc_dccp *c, const struct sockaddr_storage *from)
{
	return same_ip(&c->peer, from) && (!c->udp || ssport(&c->peer) == ssport(from));
}

/* One packet read for c, from its socket or the listener's. */
void dccp_engine_input(struct gc_dccp *c, const struct dccp_sock_pkt *sp, uint64_t now)
{
	if (!dccp_engine_is_peer(c, &sp->from))
		return;
	struct dccp_hdr h;
	if (dccp_parse(sp->pkt, sp->len, c->udp ? NULL : &c->ph_in, &h, &c->conn.err) != DCCP_OK) {
		c->conn.st.invalid++;
		return;
	}
	dccp_conn_input(&c->conn, sp->pkt, sp->len, &h, now);
}

/* After input: the timers, the engine and the application. */
void dccp_engine_wake(struct gc_dccp *c, uint64_t now)
{
	dccp_conn_timer(&c->conn, now);
	if (c->flow)
		gc_flow_kick(c->flow); /* acks may have opened the window */
	pthread_cond_broadcast(&c->cv);
}

/* Read what the socket holds (DCCP_SOCK_BATCH packets per system call) and
 * run the timers. */
void dccp_engine_poll(struct gc_dccp *c, uint64_t now)
{
	for (int round = 0; round < 256 / DCCP_SOCK_BATCH; round++) { /* bounded: the timers run too */
		struct dccp_sock_pkt sp[DCCP_SOCK_BATCH];
		ssize_t lens[DCCP_SOCK_BATCH];
		int got = dccp_sock_recv_batch(c->fd, c->udp, c->rxbuf, RXSLOT, DCCP_SOCK_BATCH, sp, lens);
		if (got <= 0)
			break;
		for (int i = 0; i < got; i++)
			if (lens[i] > 0)
				dccp_engine_input(c, &sp[i], now);
		if (got < DCCP_SOCK_BATCH)
			break; /* drained: no further call to hear EAGAIN */
	}
	dccp_engine_wake(c, now);
}

/* ---- the ring engine's hooks ------------------------------------------------ */

static void *cc_init(void *arg, struct gc_flow *gc)
{
	struct gc_dccp *c = arg;
	pthread_mutex_lock(&c->mu);
	c->flow = gc;
	pthread_mutex_unlock(&c->mu);
	return c;
}

static void cc_release(void *cc)
{
	struct gc_dccp *c = cc;
	pthread_mutex_lock(&c->mu);
	c->flow = NULL;
	pthread_mutex_unlock(&c->mu);
}

static uint32_t cc_budget(void *cc, uint64_t now, uint64_t *wake)
{
	struct gc_dccp *c = cc;
	pthread_mutex_lock(&c->mu);
	uint32_t b = dccp_conn_budget(&c->conn, now, wake);
	pthread_mutex_unlock(&c->mu);
	return b;
}

static void cc_sent(void *cc, const struct gc_sent *p, unsigned n, uint64_t now)
{
	(void)cc, (void)p, (void)n, (void)now; /* xmit() did the bookkeeping */
}

static const struct gc_cc_ops dccp_cc_ops = {
	.init = cc_init,
	.release = cc_release,
	.budget = cc_budget,
	.sent = cc_sent,
};

static unsigned hk_xmit(void *arg, struct gc_flow *gc, const struct gc_sent *p, unsigned n,
			const unsigned char *zone)
{
	struct gc_dccp *c = arg;
	unsigned i;
	(void)gc;
	pthread_mutex_lock(&c->mu);
	uint64_t now = gc_now_ns();
	/* DCCP-UDP: frame them all, send runs of equal sizes with UDP_SEGMENT
	 * (an error of a run is seen at its end: its packets count as sent,
	 * and lost, as one refused packet does below) */
	c->batching = c->udp;
	for (i = 0; i < n; i++) {
		uint64_t seq;
		int r = dccp_conn_send(&c->conn, zone + p[i].off, p[i].len, now, &seq);
		if (r == -ENOTCONN)
			break; /* not open (yet, or any more) */
		struct inflight *f = &c->inflight[seq % c->ninflight];
		*f = (struct inflight){ .seq = seq, .p = p[i], .used = true };
		if (r == -EAGAIN || r == -ENOBUFS || r == -EWOULDBLOCK) {
			i++; /* it has its number: it counts as sent (and lost); pause */
			break;
		}
	}
	if (c->batching) {
		c->batching = false;
		gso_flush(c);
	}
	pthread_mutex_unlock(&c->mu);
	return i;
}

static void hk_event(void *arg, uint64_t now)
{
	struct gc_dccp *c = arg;
	pthread_mutex_lock(&c->mu);
	dccp_engine_poll(c, now);
	pthread_mutex_unlock(&c->mu);
}

static uint64_t hk_next_timer(void *arg)
{
	struct gc_dccp *c = arg;
	pthread_mutex_lock(&c->mu);
	uint64_t t = dccp_conn_next_timer(&c->conn);
	pthread_mutex_unlock(&c->mu);
	return t;
}

/* ---- starting the engine ---------------------------------------------------- */

/*
 * The ring and its engine, once the connection exists.  gc_ring_attach()
 * wants a connected UDP socket; with our xmit hook the engine never sends on
 * it, so a native connection attaches a UDP socket connected to the peer's
 * address (connect() sends nothing).
 */
int dccp_engine_create(struct gc_dccp *c, const struct gc_dccp_opts *o, const char *fn)
{
	/* the public calls set errno and the message */
	c->zone = gc_zone_create(o->zone_bufs, o->mps);
	if (!c->zone)
		return -errno;
	c->ring = gc_ring_create(o->ring_slots, c->zone);
	if (!c->ring)
		return -errno;
	c->attach_fd = socket(c->peer.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage p = c->peer;
	if (!c->udp)
		ssset_port(&p, 9);
	if (c->attach_fd < 0 || connect(c->attach_fd, (struct sockaddr *)&p, sslen(&p)) < 0)
		return gc_errf(errno, "%s: the ring's UDP socket: %s", fn, strerror(errno));
	struct gc_ring_engine_hooks hk = {
		.cc = &dccp_cc_ops,
		.cc_arg = c,
		.xmit = hk_xmit,
		.xmit_arg = c,
		.event = hk_event,
		.next_timer = hk_next_timer,
		.event_fd = c->fd,
		.event_arg = c,
	};
	struct gc_ring_engine_opts ep = GC_RING_ENGINE_OPTS_INIT(.quiet = 1);
	int r = gc_ring_engine_create_hooks(&ep, &hk, &c->eng);
	if (r < 0)
		return r;
	if (gc_ring_attach(c->ring, c->eng, c->attach_fd) < 0)
		return -errno;
	return 0;
}
