/* SPDX-License-Identifier: MIT */
/*
 * lmsd.h - the LMS router daemon's parts: the replier configuration
 * (config.c), the kernel's multicast forwarding state (nl.c), LMS-FWD's TC
 * filter (tc.c), the replier hierarchy (hier.c) and the daemon
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
	uint32_t table; /* the multicast routing table it is in */
};

struct lmsd_vif {
	int vif;
	uint32_t table;
	uint32_t devindex; /* the vif's device */
	uint32_t ifindex;  /* the same, or 0 for tunnels and the PIM register vif: no LMS there */
};

struct lmsd_link {
	uint32_t ifindex;
	char name[IF_NAMESIZE];
	uint8_t mac[6];
};

struct lmsd_addr {
	uint32_t ifindex, addr; /* addr in network order */
	uint8_t prefixlen;
	bool secondary; /* IFA_F_SECONDARY: not the interface's own (primary) address */
};

/* A main-table route through a gateway on interface ifindex. */
struct lmsd_gw {
	uint32_t ifindex, dst; /* dst in network order */
	uint8_t prefixlen;
};

#define LMSD_MAX_TABLES 8
#define LMSD_MAX_IFS 256 /* vif interfaces, over all named tables (GC_LMS_MAX_IFS) */
#define LMSD_MAX_LINKS 1024
#define LMSD_MAX_ADDRS 4096
#define LMSD_MAX_GWS 4096

/* What lmsd reads from the kernel (nl.c), all of it over rtnetlink. */
struct lmsd_kstate {
	uint32_t tables[LMSD_MAX_TABLES]; /* the multicast routing tables followed, in order */
	int ntables;
	struct lmsd_vif vifs[LMSD_MAX_IFS];
	int nvifs;
	struct lmsd_sg sg[LMSD_MAX_SG];
	int nsg;
	/* cache entries not followed: the kernel's (*,G), unresolved, an (S,G)
	 * already in a table named earlier, no room */
	int star, unresolved, shadowed, full;
	struct lmsd_link links[LMSD_MAX_LINKS];
	int nlinks;
	struct lmsd_addr addrs[LMSD_MAX_ADDRS];
	int naddrs;
	struct lmsd_gw gws[LMSD_MAX_GWS];
	int ngws;
};

/* What changed (lmsd_nl_drain), what to read (lmsd_nl_read). */
#define LMSD_NL_LINKS 0x01
#define LMSD_NL_VIFS 0x02
#define LMSD_NL_MFC 0x04
#define LMSD_NL_ADDRS 0x08
#define LMSD_NL_GW 0x10
#define LMSD_NL_ALL 0x1f
#define LMSD_NL_OVERRUN 0x20 /* notifications were lost (ENOBUFS) */

/* The notification socket (poll it), -1 with errno. */
int lmsd_nl_open(void);
/* Read every waiting notification: which parts of the state changed. */
int lmsd_nl_drain(int fd);
/* Dump the parts named by what into k (k->tables says which multicast
 * tables); 0, or -1 with errno. */
int lmsd_nl_read(struct lmsd_kstate *k, int what);

/* TC (tc.c): LMS-FWD's filter, tc ingress priority GC_LMS_TC_PRIO handle
 * GC_LMS_TC_HANDLE.  A filter there is ours when its program is named
 * LMSD_PROG_NAME; any other is left alone. */
#define LMSD_PROG_NAME "gc_lms_fwd"
/* Attach prog_fd, replacing our filter if one is there (an earlier lmsd's);
 * -EBUSY when someone else's filter holds the place. */
int lmsd_tc_attach(uint32_t ifindex, int prog_fd);
/* Remove our filter from ifindex; 1 when one was removed, 0 when none was there. */
int lmsd_tc_detach(uint32_t ifindex);
/* Who holds our place on ifindex: 0 nobody, 1 an LMS-FWD, -1 someone else. */
int lmsd_tc_holder(uint32_t ifindex);
/* One lmsd per network namespace: hold the namespace's lock (an abstract
 * socket, which dies with the process); -1 with errno EADDRINUSE when an
 * lmsd runs here. */
int lmsd_lock(void);

/* Is from on a subnet of one of ifindex's addresses (and not one of them)?
 * (main.c, from the addresses read last) */
bool lmsd_onlink(uint32_t ifindex, uint32_t from);
/* Is a one of ifindex's addresses? */
bool lmsd_addr_of(uint32_t ifindex, uint32_t a);

/* LMS-HIER (hier.c): replier reports from hosts and child routers. */
struct lmsd_hier_stats {
	uint64_t accepted, leaves, expired, sent_up;		 /* reports */
	uint64_t ttl, offlink, rpf, notdown, limited, bad, full; /* refused, by reason */
};
/* Open the report socket (port GC_LMS_HIER_PORT); hold_ms goes into the
 * reports sent up.  Returns the descriptor to poll, -1 with errno. */
int lmsd_hier_open(uint32_t hold_ms);
/* Join 224.0.0.2 on every interface of ifs not joined yet. */
void lmsd_hier_join(const uint32_t *ifs, int n);
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
