/* SPDX-License-Identifier: MIT */
/* tools/addr.c - see addr.h. */
#include "addr.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

uint16_t addr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

void addr_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

socklen_t addr_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

const char *addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, addr_port(ss));
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, addr_port(ss));
	} else {
		snprintf(buf, len, "(family %d)", ss->ss_family);
	}
	return buf;
}

bool addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
			((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

int addr_split(char *buf, char **addr, char **rest, enum addr_split_error *why)
{
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');
		if (!close || close[1] != ':')
			return *why = ADDR_SPLIT_BRACKET, -1;
		*close = '\0';
		*addr = buf + 1;
		*rest = close + 2;
		return 0;
	}
	char *colon = strchr(buf, ':');
	if (!colon)
		return *why = ADDR_SPLIT_NO_COLON, -1;
	if (strchr(colon + 1, ':'))
		return *why = ADDR_SPLIT_BARE_IPV6, -1;
	*colon = '\0';
	*addr = buf;
	*rest = colon + 1;
	return 0;
}

int addr_numeric(const char *s, uint16_t port, struct sockaddr_storage *ss)
{
	const struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_DGRAM,
		.ai_flags = AI_NUMERICHOST,
	};
	char unb[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
	size_t sl = strlen(s);
	if (sl > 2 && s[0] == '[' && s[sl - 1] == ']' && sl - 2 < sizeof(unb)) {
		memcpy(unb, s + 1, sl - 2); /* accept [IPv6] too */
		unb[sl - 2] = '\0';
		s = unb;
	}
	struct addrinfo *res = NULL;
	struct in_addr a4;
	/* getaddrinfo() takes inet_aton() shorthands such as "10.1"; be strict. */
	if (*s == '\0' || (!strchr(s, ':') && inet_pton(AF_INET, s, &a4) != 1))
		return -1;
	if (getaddrinfo(s, NULL, &hints, &res) != 0 || !res)
		return -1;
	int fam = res->ai_family;
	if (res->ai_addrlen > sizeof(*ss) || (fam != AF_INET && fam != AF_INET6)) {
		freeaddrinfo(res);
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	addr_set_port(ss, port);
	return fam;
}
