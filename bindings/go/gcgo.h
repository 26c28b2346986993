/* SPDX-License-Identifier: MIT */
/* What the C shims of package groupcast and package groupcast/dccp share
 * (static inline: each cgo package compiles its own copy). */
#ifndef GCGO_H
#define GCGO_H
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <groupcast/common.h>

/* errno and gc_errmsg() of a failed call, read on the thread that failed. */
struct gcgo_err {
	int errnum;
	char msg[256];
};

static inline int gcgo_fail(struct gcgo_err *e)
{
	e->errnum = errno;
	const char *m = gc_errmsg();
	strncpy(e->msg, m ? m : "", sizeof(e->msg) - 1);
	e->msg[sizeof(e->msg) - 1] = 0;
	return -1;
}

/* An address as Go writes it (internal/addr): family 4 or 6, the address
 * in network order (v4 in addr[0..4)), the port, the IPv6 scope id. */
struct gcgo_member {
	unsigned char addr[16];
	unsigned short port;
	unsigned char family;
	unsigned int scope;
};

/* m as a sockaddr_in or sockaddr_in6 in ss; returns its length. */
static inline socklen_t gcgo_sockaddr(const struct gcgo_member *m, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (m->family == 4) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(m->port);
		memcpy(&s->sin_addr, m->addr, 4);
		return sizeof(*s);
	}
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(m->port);
	memcpy(&s->sin6_addr, m->addr, 16);
	s->sin6_scope_id = m->scope;
	return sizeof(*s);
}
#endif
