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
#include <stdbool.h>
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

/* LMS-HIER (hier.c): replier reports from hosts and child routers. */
struct lmsd_hier_stats {
	uint64_t accepted, leaves, expired, sent_up;		 /* reports */
	uint64_t ttl, offlink, rpf, notdown, limited, bad, full; /* refused, by reason */
};
/* Open the report socket (port GC_LMS_HIER_PORT); hold_ms goes into the
 * reports sent up.  Returns the descriptor to poll, -1 with errno. */
int lmsd_hier_open(uint32_t hold_ms);
/* Join 224.0.0.2 on every vif interface not joined yet. */
void lmsd_hier_join(const struct lmsd_vif *v, int nv);
/* Read waiting reports, check them against the routes, expire old ones;
 * true when the candidates changed. */
bool lmsd_hier_input(const struct lmsd_sg *sg, int nsg);
/* The elected replier of route e (cur_*: the current choice, kept on ties). */
bool lmsd_hier_best(const struct lmsd_sg *e, uint32_t cur_if, uint32_t cur_addr, uint32_t *ifindex,
		    uint32_t *replier, uint32_t *cost);
/* Report e's best replier (cost + 1), or its withdrawal (have false), up
 * through the parent interface whose address is parent_addr. */
void lmsd_hier_send(const struct lmsd_sg *e, uint32_t parent_addr, bool have, uint32_t replier,
		    uint32_t cost);
const struct lmsd_hier_stats *lmsd_hier_stats(void);

#endif
