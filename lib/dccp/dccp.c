/* SPDX-License-Identifier: MIT */
/*
 * dccp.c - the public API of DCCP connections (groupcast/dccp.h): argument
 * checks and glue between the connection (conn.c), its sockets (sock.c)
 * and the ring engine.
 */
#include <errno.h>
#include <string.h>

#include <groupcast/dccp.h>

#include "group/internal.h"

static const char *const state_names[] = {
	"CLOSED", "LISTEN", "REQUEST", "RESPOND", "PARTOPEN", "OPEN", "CLOSEREQ", "CLOSING", "TIMEWAIT",
};

GC_EXPORT const char *gc_dccp_state_name(int state)
{
	if (state < 0 || state >= (int)(sizeof(state_names) / sizeof(state_names[0])))
		return "?";
	return state_names[state];
}

GC_EXPORT struct gc_dccp *gc_dccp_connect(const struct sockaddr *peer, socklen_t len,
				const struct gc_dccp_opts *o)
{
	(void)peer, (void)len, (void)o;
	gc_seterr(ENOSYS, "gc_dccp_connect: not implemented yet");
	return NULL;
}

GC_EXPORT struct gc_dccp_listener *gc_dccp_listen(const struct sockaddr *local, socklen_t len,
					const struct gc_dccp_opts *o)
{
	(void)local, (void)len, (void)o;
	gc_seterr(ENOSYS, "gc_dccp_listen: not implemented yet");
	return NULL;
}

GC_EXPORT struct gc_dccp *gc_dccp_accept(struct gc_dccp_listener *l, int timeout_ms)
{
	(void)l, (void)timeout_ms;
	gc_seterr(ENOSYS, "gc_dccp_accept: not implemented yet");
	return NULL;
}

GC_EXPORT void gc_dccp_listener_close(struct gc_dccp_listener *l)
{
	(void)l;
}

GC_EXPORT struct gc_ring *gc_dccp_ring(struct gc_dccp *c)
{
	(void)c;
	gc_seterr(ENOSYS, "gc_dccp_ring: not implemented yet");
	return NULL;
}

GC_EXPORT struct gc_zone *gc_dccp_zone(struct gc_dccp *c)
{
	(void)c;
	gc_seterr(ENOSYS, "gc_dccp_zone: not implemented yet");
	return NULL;
}

GC_EXPORT ssize_t gc_dccp_recv(struct gc_dccp *c, void *buf, size_t len, struct gc_dccp_rxinfo *ri,
		     int timeout_ms)
{
	(void)c, (void)buf, (void)len, (void)ri, (void)timeout_ms;
	return gc_seterr(ENOSYS, "gc_dccp_recv: not implemented yet");
}

GC_EXPORT int gc_dccp_stats(struct gc_dccp *c, struct gc_dccp_stats *st)
{
	(void)c, (void)st;
	return gc_seterr(ENOSYS, "gc_dccp_stats: not implemented yet");
}

GC_EXPORT int gc_dccp_close(struct gc_dccp *c, int timeout_ms)
{
	(void)c, (void)timeout_ms;
	return gc_seterr(ENOSYS, "gc_dccp_close: not implemented yet");
}
