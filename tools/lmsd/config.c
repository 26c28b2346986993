// SPDX-License-Identifier: MIT
/*
 * config.c - lmsd's replier configuration: static repliers, one per (S,G).
 *
 *     # source     group      replier-interface  replier-address  [cost]
 *     replier 10.64.1.2 239.1.2.3 veth3 10.64.3.2 1
 *
 * The replier interface is this router's interface toward the replier; the
 * replier address is the host that answers requests and sends dmcasts (the
 * router accepts dmcasts for (S,G) only from it, or from S upstream).
 */
#include "lmsd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int addr(const char *s, uint32_t *out)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -1;
	*out = a.s_addr;
	return 0;
}

int lmsd_config_read(const char *path, struct lmsd_config *c, FILE *err)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int ln = 0, bad = 0;

	c->n = 0;
	if (!f) {
		fprintf(err, "lmsd: config %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *save, *w[7] = { 0 };
		int nw = 0;

		ln++;
		*strchrnul(line, '#') = 0;
		for (char *t = strtok_r(line, " \t\r\n", &save); t && nw < 7;
		     t = strtok_r(NULL, " \t\r\n", &save))
			w[nw++] = t;
		if (!nw)
			continue;
		struct lmsd_replier r = { .cost = 1 };
		const char *why = NULL;
		char *endp;
		unsigned long cost = 1; /* strtoul()'s own width: checked before it narrows */

		if (strcmp(w[0], "replier"))
			why = "unknown keyword (expected: replier SOURCE GROUP IFNAME ADDRESS [COST])";
		else if (nw < 5 || nw > 6)
			why = "expected: replier SOURCE GROUP IFNAME ADDRESS [COST]";
		else if (addr(w[1], &r.src))
			why = "SOURCE is not an IPv4 address";
		else if (addr(w[2], &r.group) || (ntohl(r.group) >> 28) != 0xe)
			why = "GROUP is not an IPv4 multicast address";
		else if (strlen(w[3]) >= IF_NAMESIZE || !*w[3])
			why = "IFNAME is not an interface name";
		else if (addr(w[4], &r.addr))
			why = "ADDRESS is not an IPv4 address";
		else if (nw == 6 &&
			 (errno = 0, cost = strtoul(w[5], &endp, 10),
			  errno || *endp || cost > 65535 || *w[5] == '-'))
			why = "COST is not an integer in 0..65535";
		else if (lmsd_config_find(c, r.src, r.group))
			why = "a second replier for the same (SOURCE, GROUP)";
		else if (c->n == LMSD_MAX_REPLIERS)
			why = "too many repliers";
		if (why) {
			fprintf(err, "lmsd: %s:%d: %s\n", path, ln, why);
			bad = 1;
			continue;
		}
		strcpy(r.ifname, w[3]);
		r.cost = (uint32_t)cost; /* 0..65535 */
		c->r[c->n++] = r;
	}
	fclose(f);
	if (bad)
		errno = EINVAL;
	return bad ? -1 : 0;
}

const struct lmsd_replier *lmsd_config_find(const struct lmsd_config *c, uint32_t src, uint32_t group)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->r[i].src == src && c->r[i].group == group)
			return &c->r[i];
	return NULL;
}
