/* SPDX-License-Identifier: MIT */
/*
 * cc.h - where congestion control and transports plug into the engine.
 *
 * The engine drains rings (flow.c); it does not decide when a connection may
 * send, nor how.  Two plugs, both fixed when the engine starts
 * (gc_ring_engine_create_hooks(), below):
 *
 *  - A congestion controller (struct gc_cc_ops).  Before taking packets from
 *    a ring the engine asks it for a budget; after sending it reports what
 *    went out; when the controller learns that packets arrived (DCCP
 *    acknowledgements) it calls gc_flow_ack(), which sets kern_acked and
 *    logs user_seq for the application.  Without one (plain UDP) every ring
 *    may send as fast as the socket takes packets.
 *  - A transport (xmit): how the packets a drain took go out.  NULL is UDP
 *    (udp.c: sendmmsg() with UDP_SEGMENT runs, on the connected socket the
 *    application attached).  The tests plug in recorders here.
 *
 * How DCCP plugs in beside UDP (lib/dccp/engine.c): its xmit frames each packet
 * (the generic header, sequence numbers, options) and sends it over its own
 * socket (raw IP protocol 33, or UDP port 6511 for RFC 6773), reaching its
 * per-connection state through gc_flow_id() or the cc state its init()
 * made; its cc ops are CCID 2 or CCID 3 (budget: the window or the rate,
 * with *wake_ns for the next send time; sent: what went, for the
 * acknowledgement bookkeeping); the engine thread reads its sockets (an
 * event source it adds) and calls gc_flow_ack() for every packet
 * acknowledged, and gc_flow_kick() when the window opens.  Dead marks and
 * rewinds keep taking effect until budget() lets a packet be taken: the
 * drain takes only what the budget allows.
 *
 * Everything here runs on the engine thread (an engine with hooks never
 * sends from an application thread: gc_ring_flush() and
 * GC_RING_ENGINE_SUBMIT_FLUSH wake the engine instead).
 *
 * Who implements what: flow.c gc_flow_id() and gc_flow_socket() (the
 * connection), server.c gc_flow_ack() and gc_flow_kick() (they move the
 * connection between the engine's lists), handle.c
 * gc_ring_engine_create_hooks().
 *
 * This header is the ring module's interface for the modules that plug in
 * (lib/dccp): they include it, never ring/internal.h (tests/build/layers.sh).
 */
#ifndef GC_RING_CC_H
#define GC_RING_CC_H

#include <stdint.h>

struct gc_flow; /* one ring served by an engine, and its socket */
struct gc_ring_engine;
struct gc_ring_engine_opts;

/* A packet the engine took from a ring, as read (and checked) at that time. */
struct gc_sent {
	uint64_t off; /* payload offset in the zone: [off, off + len) is inside */
	uint64_t user_seq;
	uint32_t len;
	uint32_t pos;	/* ring position it was taken from */
	uint32_t stamp; /* claim count of the slot then (for kern_acked) */
	uint32_t pad;
};

struct gc_cc_ops {
	/* A ring was attached: make its state (NULL is a valid state). */
	void *(*init)(void *arg, struct gc_flow *c);
	void (*release)(void *cc);
	/*
	 * How many packets the connection may send now.  0: none; the engine
	 * asks again at *wake_ns (CLOCK_MONOTONIC; leave it 0 for "when
	 * gc_flow_kick() is called").  UINT32_MAX: no limit.
	 */
	uint32_t (*budget)(void *cc, uint64_t now_ns, uint64_t *wake_ns);
	/* These packets just went out (or were refused by the network). */
	void (*sent)(void *cc, const struct gc_sent *p, unsigned n, uint64_t now_ns);
};

struct gc_ring_engine_hooks {
	const struct gc_cc_ops *cc;
	void *cc_arg;
	/*
	 * Transport: send p[0..n) (payload at zone + p[i].off) on connection c.
	 * Returns how many were consumed; fewer than n means "try again later"
	 * (the engine retries on its next round).  NULL: UDP (udp.c).
	 */
	unsigned (*xmit)(void *arg, struct gc_flow *c, const struct gc_sent *p, unsigned n,
			 const unsigned char *zone);
	void *xmit_arg;
	/*
	 * Event source (NULL: none, and the engine does no extra work): the
	 * engine thread calls event() when event_fd is readable (level
	 * triggered: read until EAGAIN) and when the time next_timer() last
	 * returned has come (0: no timer).  A DCCP connection reads its socket
	 * and runs its timers here.  next_timer() is asked once per loop.
	 */
	void (*event)(void *arg, uint64_t now_ns);
	uint64_t (*next_timer)(void *arg);
	int event_fd;
	void *event_arg;
};

/* Start an engine with a transport or congestion controller other than the
 * defaults (UDP, no congestion control).  hooks may be NULL.  0 with *out,
 * or -errno with the message (gc_ring_engine_create()'s). */
int gc_ring_engine_create_hooks(const struct gc_ring_engine_opts *p,
				const struct gc_ring_engine_hooks *hooks, struct gc_ring_engine **out);

/* The controller learned that packet p (as passed to sent()) arrived: 0, or
 * -EPROTO (the ring broke a rule: the engine stops serving it). */
int gc_flow_ack(struct gc_flow *c, const struct gc_sent *p);
/* The controller's budget may have grown: ask it again on the next round. */
void gc_flow_kick(struct gc_flow *c);
/* The ring's identifier in its engine (as gc_ring_attach() got it). */
uint32_t gc_flow_id(const struct gc_flow *c);
/* The connection's socket (the engine's own descriptor). */
int gc_flow_socket(const struct gc_flow *c);

#endif
