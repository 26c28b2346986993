/* SPDX-License-Identifier: MIT */
/*
 * tools/addr.h - socket addresses for the command line tool and the relay:
 * port, length, text and comparison of a sockaddr_storage holding
 * AF_INET or AF_INET6, and the "ADDR:PORT" / "[IPv6]:PORT" split.
 *
 * Nothing here prints or exits: cli_ip() / cli_split_addr() (groupcast.c)
 * turn the failures into usage errors, the relay's config parser into its
 * own messages.
 */
#ifndef GROUPCAST_TOOLS_ADDR_H
#define GROUPCAST_TOOLS_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Port of ss in host order; 0 for a family other than AF_INET/AF_INET6. */
uint16_t addr_port(const struct sockaddr_storage *ss);
/* Set the port of an AF_INET or AF_INET6 ss (host order). */
void addr_set_port(struct sockaddr_storage *ss, uint16_t port);
/* Length to pass to bind()/sendto() for ss. */
socklen_t addr_len(const struct sockaddr_storage *ss);
/* "a.b.c.d:port" or "[IPv6]:port" of ss into buf; returns buf. */
const char *addr_str(const struct sockaddr_storage *ss, char *buf, size_t len);
/* Same family and host address (ports and IPv6 scope are not compared). */
bool addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/*
 * Split "ADDR:REST" or "[IPv6]:REST" in buf, in place: *addr and *rest point
 * into buf.  Returns 0, or -1 with *why one of the ADDR_SPLIT_* reasons.
 */
enum addr_split_error {
	ADDR_SPLIT_NO_COLON = 1, /* no ':' after the address */
	ADDR_SPLIT_BRACKET,	 /* "[" without "]:" */
	ADDR_SPLIT_BARE_IPV6,	 /* more than one ':' without brackets */
};
int addr_split(char *buf, char **addr, char **rest, enum addr_split_error *why);

/*
 * Numeric IPv4 (a.b.c.d only, no inet_aton() shorthands) or IPv6 literal,
 * optionally in brackets and with a %scope, and port into *ss.  Returns the
 * family, or -1 (no name look-ups: a host name is -1 too).
 */
int addr_numeric(const char *s, uint16_t port, struct sockaddr_storage *ss);

#endif /* GROUPCAST_TOOLS_ADDR_H */
