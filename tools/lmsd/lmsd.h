/* SPDX-License-Identifier: MIT */
/*
 * lmsd.h - the LMS router daemon's parts: the replier configuration
 * (config.c), the kernel's multicast forwarding state (mfc.c) and the daemon
 * that loads LMS-FWD and keeps its maps (main.c).  See lmsd(8).
 */
#ifndef GC_LMSD_H
#define GC_LMSD_H

#include <linux/types.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>

#define LMSD_MAX_REPLIERS 1024
#define LMSD_MAX_VIFS 32 /* MAXVIFS */
#define LMSD_MAX_SG 4096

/* One "replier S G IFNAME ADDR [COST]" line. */
struct lmsd_replier {
	uint32_t src, group, addr; /* network order */
	char ifname[IF_NAMESIZE];
	uint32_t cost;
};

struct lmsd_config {
	struct lmsd_replier r[LMSD_MAX_REPLIERS];
	size_t n;
};

/* Parse path into *c; on error print "PATH:LINE: why" to err and return -1. */
int lmsd_config_read(const char *path, struct lmsd_config *c, FILE *err);
const struct lmsd_replier *lmsd_config_find(const struct lmsd_config *c, uint32_t src, uint32_t group);

/* One multicast route of the kernel's forwarding cache, vifs as ifindexes. */
struct lmsd_sg {
	uint32_t src, group; /* network order */
	uint32_t parent;     /* ifindex of the incoming vif */
	uint32_t oifs[LMSD_MAX_VIFS];
	int noifs;
};

struct lmsd_vif {
	int vif;
	uint32_t ifindex; /* 0 for tunnels and the PIM register vif: no LMS there */
	char name[IF_NAMESIZE];
};

/* Read /proc/net/ip_mr_vif and ip_mr_cache of the current network namespace.
 * Returns the number of (S,G) written to sg (at most max), -1 with errno. */
int lmsd_vifs_read(struct lmsd_vif *v, int max);
int lmsd_mfc_read(const struct lmsd_vif *v, int nv, struct lmsd_sg *sg, int max);

#endif
