// SPDX-License-Identifier: MIT
/*
 * mfc.c - the kernel's multicast forwarding state, as the routing daemon
 * (smcroute, pimd) left it: /proc/net/ip_mr_vif (vif -> interface) and
 * /proc/net/ip_mr_cache ((S,G) -> incoming vif, outgoing vifs).  Both are
 * the current network namespace's (default table).  lmsd never changes them.
 */
#include "lmsd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define VIFF_TUNNEL 0x1
#define VIFF_REGISTER 0x4

int lmsd_vifs_read(struct lmsd_vif *v, int max)
{
	FILE *f = fopen("/proc/net/ip_mr_vif", "r");
	char line[256];
	int n = 0;

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) { /* header */
		fclose(f);
		return 0;
	}
	/* "%2td %-10s %8ld %7ld  %8ld %7ld %05X %08X %08X" */
	while (n < max && fgets(line, sizeof(line), f)) {
		char name[IF_NAMESIZE];
		unsigned flags;
		int vif;

		if (sscanf(line, "%d %15s %*d %*d %*d %*d %x", &vif, name, &flags) != 3)
			continue;
		v[n].vif = vif;
		memcpy(v[n].name, name, sizeof(name));
		v[n].ifindex = (flags & (VIFF_TUNNEL | VIFF_REGISTER)) ? 0 : if_nametoindex(name);
		n++;
	}
	fclose(f);
	return n;
}

static uint32_t vif_ifindex(const struct lmsd_vif *v, int nv, int vif)
{
	for (int i = 0; i < nv; i++)
		if (v[i].vif == vif)
			return v[i].ifindex;
	return 0;
}

int lmsd_mfc_read(const struct lmsd_vif *v, int nv, struct lmsd_sg *sg, int max)
{
	FILE *f = fopen("/proc/net/ip_mr_cache", "r");
	char line[1024];
	int n = 0;

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return 0;
	}
	/* "%08X %08X %-3hd %8lu %8lu %8lu" then " %2d:%-3d" per outgoing vif.
	 * The addresses are the raw __be32 printed as a number, so reading them
	 * back as a number gives the network-order value on any endianness. */
	while (n < max && fgets(line, sizeof(line), f)) {
		struct lmsd_sg *e = &sg[n];
		unsigned long grp, src;
		int iif, off = 0;
		char *p;

		if (sscanf(line, "%lx %lx %d %*u %*u %*u%n", &grp, &src, &iif, &off) < 3 || !off)
			continue;
		e->group = (uint32_t)grp;
		e->src = (uint32_t)src;
		e->parent = iif >= 0 ? vif_ifindex(v, nv, iif) : 0;
		e->noifs = 0;
		p = line + off;
		for (;;) {
			int vif, ttl, used = 0;

			if (sscanf(p, " %d:%d%n", &vif, &ttl, &used) != 2 || !used)
				break;
			p += used;
			uint32_t ifi = vif_ifindex(v, nv, vif);
			if (ifi && e->noifs < LMSD_MAX_VIFS)
				e->oifs[e->noifs++] = ifi;
		}
		/* (*,G) (no source), unresolved entries and routes without a usable
		 * upstream or downstream interface carry no LMS state. */
		if (e->src && e->parent && e->noifs)
			n++;
	}
	fclose(f);
	return n;
}
