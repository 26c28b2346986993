/* SPDX-License-Identifier: MIT */
/*
 * tools/relay/relay.h - groupcast relay: a samplicator-compatible datagram
 * replicator and a live-broadcast (RTP) relay built on gc_sendgroup().
 *
 *   config.c   samplicator syntax: receivers and config-file lines (pure parser)
 *   fanout.c   replicate mode: sources, sampling, send sockets, one group send
 *              per send socket and input datagram, or its copies queued
 *   batch.c    the copies of one receive batch sent together; AUTO's choice
 *              per datagram between the kernel engine and one sendmmsg()
 *   spoof.c    -S: raw IPv4/IPv6 packets with the original source address
 *   rtp.c      broadcast mode: RTP/RTCP parsing and per-subscriber rewriting
 *   control.c  broadcast mode: subscriber table, admission (address checks,
 *              local addresses, per-source limits) and the control protocol
 *              with its return-routability handshake (cookies); the loop rule
 *              for relays that subscribe (relay= in JOIN, path= in replies)
 *   upstream.c broadcast mode: --upstream, this relay as a subscriber of
 *              other relays (handshake, keepalives, failover, revert)
 *   privs.c    pidfile, dropping capabilities and switching user after setup
 *   stats.c    counters, the status line, JSON, the stats socket
 *   metrics.c  --metrics: the counters for Prometheus over HTTP (libmicrohttpd)
 *   main.c     options, sockets, the event loop, signals, reload, shutdown
 *
 * Single-threaded: every event (datagram batch, control message, signal,
 * timer) is handled to the end before the next, so membership and
 * configuration only ever change between two group sends.
 * See groupcast-relay(1).
 */
#ifndef GROUPCAST_RELAY_H
#define GROUPCAST_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <groupcast/group.h>

#include "addr.h"     /* addr_port(), addr_str(), addr_same_host() ... */
#include "promhttp.h" /* --metrics */

#define RELAY_DEFAULT_PORT "2000" /* samplicator's default listen and receiver port */
#define RELAY_DEFAULT_TTL 64
#define RELAY_MAX_RECEIVERS 65536u /* receivers in all, after port ranges */
#define RELAY_MAX_LINE 65536u	   /* config file line length */
#define RELAY_BATCH 64		   /* datagrams per recvmmsg() */
#define RELAY_OUT_MAX 1024u	   /* copies per batched send: one sendmmsg() (UIO_MAXIOV) */

/* ---- config.c: samplicator syntax ------------------------------------- */

enum { RCV_SPOOF = 1, RCV_CHECKSUM = 2 };
enum rcv_path { PATH_GROUP, PATH_DIRECT, PATH_RAW };

struct rcv_stats {
	uint64_t packets, octets; /* datagrams handed to the kernel, their bytes */
	uint64_t errors;	  /* datagrams that failed */
	uint64_t skipped;	  /* not sent because of the sampling interval */
	int last_errno;
};

struct receiver {
	struct sockaddr_storage addr;
	uint32_t freq, freqcount; /* send 1 in freq; freqcount counts down to the next */
	uint8_t ttl, flags;	  /* RCV_* */
	/* set by fanout.c */
	uint8_t path; /* enum rcv_path */
	int sock;     /* index into the send socket table */
	struct rcv_stats st;
};

struct source {
	struct sockaddr_storage addr, mask;
	bool any;	  /* the command line's receivers: every datagram */
	const char *file; /* where it was read ("<command line>" for argv) */
	unsigned line;
	struct receiver *rcv;
	size_t n, cap;
	unsigned tx_delay_us; /* -x: only the command line's source has it, as in samplicator */
	uint64_t matched, matched_octets;
	/* set by fanout.c */
	struct gc_giovec *pre; /* prebuilt recipients when plain */
	bool plain;	       /* all receivers freq 1, PATH_GROUP, one socket, no delay */
	int plain_sock;
};

struct rc_conf {
	struct source *src;
	size_t n, cap;
	size_t receivers; /* in all sources */
};

struct rc_opts {
	int family;	      /* AF_UNSPEC, or AF_INET / AF_INET6 for -4 / -6 */
	uint8_t flags;	      /* RCV_* given to the receivers parsed now (-S, -n) */
	bool numeric;	      /* numeric addresses and ports only (no name lookups) */
	size_t max_receivers; /* 0: RELAY_MAX_RECEIVERS */
};

/* Receiver ADDR[/PORT[/INTERVAL][,TTL]] appended to s.  PORT may be a
 * number, a service name, FIRST-LAST or FIRST+COUNT.  Returns 0, or -1 with a
 * message "receiver 'ARG': what: expected ..." in err. */
int rc_parse_receiver(struct rc_conf *c, struct source *s, const char *arg, const struct rc_opts *o,
		      char *err, size_t errlen);
/* One config line (without the newline): "SRC[/MASK]: receiver ...", a
 * comment or blank.  Appends a source (file/line as given).  0 or -1. */
int rc_parse_line(struct rc_conf *c, const char *line, size_t len, const char *file,
		  unsigned lineno, const struct rc_opts *o, char *err, size_t errlen);
/* A whole file's text; err gets "FILE:LINE: ...".  0 or -1 (c may then hold
 * the lines before the bad one: free it). */
int rc_parse_buffer(struct rc_conf *c, const char *file, const char *buf, size_t len,
		    const struct rc_opts *o, char *err, size_t errlen);
int rc_parse_file(struct rc_conf *c, const char *path, const struct rc_opts *o, char *err, size_t errlen);
/* A new empty source at the end of c (NULL if out of memory). */
struct source *rc_add_source(struct rc_conf *c, const char *file, unsigned line);
void rc_free(struct rc_conf *c);
/* Whether a datagram from `from` matches s (samplicator rules, see config.c). */
bool rc_match(const struct source *s, const struct sockaddr_storage *from);

/* ---- counters (stats.c) ------------------------------------------------ */

struct relay_counters {
	uint64_t in, in_octets;	      /* datagrams read from the listen sockets */
	uint64_t out, out_octets;     /* datagrams handed to the kernel */
	uint64_t errors;	      /* datagrams that failed (per recipient) */
	uint64_t oversize;	      /* dropped: larger than -u / --max-size */
	uint64_t ingest_drops;	      /* dropped by the kernel before we read them (SO_RXQ_OVFL) */
	uint64_t unmatched;	      /* replicate: no source line matched */
	uint64_t skipped;	      /* replicate: not due by the sampling interval */
	uint64_t group_sends;	      /* gc_sendgroup() calls */
	uint64_t send_ns;	      /* thread CPU time inside gc_sendgroup() and raw sends */
	uint64_t raw_out, direct_out; /* replicate: -S raw sends, multicast/broadcast sendto() */
	uint64_t rtp_invalid;	      /* broadcast: not RTP version 2, or too short */
	uint64_t rtp_rejected;	      /* broadcast: not from --producer */
	uint64_t rtp_loops; /* broadcast: from a subscriber, or an SSRC the relay generated */
	uint64_t producer_changes; /* broadcast: SSRC changes and sequence jumps */
	uint64_t rtcp_in, rtcp_out, rtcp_invalid, rtcp_rejected, rtcp_from_subscribers;
	uint64_t ctl_in, ctl_join, ctl_leave, ctl_keepalive, ctl_unknown, ctl_bad, ctl_refused;
	uint64_t ctl_cookies;	 /* cookie replies to a first JOIN */
	uint64_t ctl_short;	 /* first JOIN shorter than CTL_JOIN_MIN: no answer */
	uint64_t ctl_bad_cookie; /* JOIN/LEAVE/KEEPALIVE with a wrong or expired cookie */
	uint64_t ctl_bad_addr; /* subscriber address refused (port 0, not unicast, family, local) */
	uint64_t ctl_per_source;   /* JOIN refused: --max-per-source reached */
	uint64_t ctl_rate_limited; /* dropped: over --control-rate for its source */
	uint64_t ctl_truncated;	   /* reply to an unverified request cut to its length */
	uint64_t expired;
	uint64_t reloads, reload_failures;
	uint64_t stats_queries, stats_refused;
	uint64_t metrics_scrapes, metrics_not_found, metrics_bad_method; /* --metrics requests */
	uint64_t ctl_loop; /* relay JOIN/KEEPALIVE refused: a loop, or deeper than RELAY_MAX_HOPS */
	uint64_t up_loops; /* --upstream: our own identity in an upstream's path: left */
	uint64_t up_subscribed;	 /* --upstream: subscriptions made (OK JOIN) */
	uint64_t up_failures;	 /* --upstream: upstreams given up (silent, refused, ERR) */
	uint64_t up_switches;	 /* --upstream: the stream taken from another upstream */
	uint64_t rtp_duplicates; /* --upstream: RTP dropped, SSRC and sequence already relayed */
	uint64_t up_gap;	 /* --upstream: packets missing across a switch (sequence gap) */
};

/* Every counter above, once: its JSON key and its Prometheus sample.  Both
 * stats_json() and metrics_write() walk this table, so a counter added here
 * shows in both.  The first sample of a family has its HELP text. */
enum { CM_BOTH, CM_REPLICATE, CM_BROADCAST };
struct counter_def {
	const char *json;   /* key in the JSON */
	size_t off;	    /* offsetof(struct relay_counters, ...) */
	uint8_t mode;	    /* CM_*: the mode that has it */
	bool ns;	    /* nanoseconds: seconds in the metrics */
	const char *family; /* after groupcast_relay_; a counter (_total) */
	const char *label;  /* the sample's label pair, or NULL */
	const char *help;   /* the family's HELP (on its first sample) */
};
extern const struct counter_def relay_counter_defs[];
extern const size_t relay_ncounter_defs;
struct relay;
/* Whether d applies in r's mode, and its value. */
bool counter_applies(const struct relay *r, const struct counter_def *d);
uint64_t counter_value(const struct relay *r, const struct counter_def *d);

/* ---- control.c: subscribers -------------------------------------------- */

#define CTL_MAX_LEN 512	    /* longest control request */
#define CTL_JOIN_MIN 64	    /* a JOIN without cookie= shorter than this gets no answer */
#define CTL_RATE_SLOTS 4096 /* per-source request budgets, indexed by a keyed hash */
#define SUBS_KEY_BYTES 16   /* crypto_shorthash_KEYBYTES (SipHash-2-4) */

struct sub {
	struct sockaddr_storage addr; /* RTP destination */
	uint16_t rtcp_port;	      /* 0: no RTCP */
	bool used, is_static, fresh;  /* fresh: seq_off set on its first packet */
	bool ssrc_ours;		      /* ssrc was generated here (not ssrc= in JOIN) */
	uint32_t ssrc, ts_off;
	uint16_t seq_base, seq_off;
	uint64_t cookie;   /* the cookie it joined with: LEAVE and KEEPALIVE show it */
	uint64_t relay_id; /* a relay (relay= in JOIN): gets the stream's own numbering; 0 if not */
	uint8_t hdr[12];   /* the RTP header of the datagram being sent */
	int32_t next;	   /* hash chain */
	int32_t ssrc_next; /* chain of the SSRC index (ssrc_ours only) */
	uint32_t active_idx;
	uint64_t joined_ns, seen_ns;
	uint64_t packets, payload_octets; /* RTP sent to it, for its sender reports */
	struct rcv_stats st;
	uint64_t rtcp_packets, rtcp_errors;
};

/* Subscribers per source (IPv4 address or IPv6 /64): exact counts in a
 * table of at most max entries (one per source that has a subscriber). */
struct srcent {
	uint8_t key[17];
	uint32_t count;
	int32_t next;
};

struct subs {
	struct sub *slot;
	uint32_t max, used;
	int32_t *bucket; /* head slot per hash bucket, -1 empty */
	uint32_t nbucket;
	int32_t free_head; /* free slots chained through next */
	uint32_t *active;  /* slot indices of subscribers */
	uint32_t nactive;
	bool dirty;		     /* membership changed: rebuild recipients */
	uint64_t seed;		     /* xorshift state for SSRCs and offsets */
	uint8_t key[SUBS_KEY_BYTES]; /* SipHash key of every table here (random) */
	int32_t *ssrc_bucket;	     /* SSRC index over slots with ssrc_ours */
	struct srcent *src;	     /* per-source counts: max entries */
	int32_t *src_bucket, src_free;
};

int subs_init(struct subs *t, uint32_t max);
void subs_free(struct subs *t);
struct sub *subs_find(struct subs *t, const struct sockaddr_storage *addr);
/* NULL with errno ENOSPC when full. */
struct sub *subs_add(struct subs *t, const struct sockaddr_storage *addr, uint64_t now_ns);
void subs_remove(struct subs *t, struct sub *s);
uint32_t subs_expire(struct subs *t, uint64_t now_ns, uint64_t ttl_ns);
/* Give s the SSRC chosen with ssrc= (no longer one the relay generated). */
void subs_set_ssrc(struct subs *t, struct sub *s, uint32_t ssrc);
/* Give s a new random SSRC (one the relay generated). */
void subs_new_ssrc(struct subs *t, struct sub *s);
/* The subscriber whose SSRC the relay generated and is ssrc, or NULL. */
struct sub *subs_by_ssrc(struct subs *t, uint32_t ssrc);
/* Subscribers whose address is in the same source (IPv4 address, IPv6 /64). */
uint32_t subs_per_source(const struct subs *t, const struct sockaddr_storage *addr);

struct relay;
/* One control datagram from `from`; writes a reply into reply (len 0: none). */
size_t control_handle(struct relay *r, const char *msg, size_t len,
		      const struct sockaddr_storage *from, char *reply, size_t cap);
/* May addr (with its port) be a subscriber?  0, or -1 with the reason in why
 * ("port 0", "not a unicast address", "a local address of this host", ...). */
int control_check_subscriber(const struct relay *r, const struct sockaddr_storage *addr, char *why,
			     size_t len);
/* (Re)read the host's addresses (getifaddrs); 0 or -1 with errno. */
int control_local_addrs(struct relay *r);
/* The cookie for addr (address and port) in time bucket `bucket`. */
uint64_t control_cookie(const struct relay *r, const struct sockaddr_storage *addr, uint64_t bucket);

/* ---- rtp.c ------------------------------------------------------------- */

struct producer {
	bool have;
	uint32_t ssrc;
	uint16_t last_seq, g_seq_off;
	uint32_t last_ts, g_ts_off;
	uint64_t last_ns;
	struct sockaddr_storage addr;
	uint64_t packets, octets;
};

/* Fan one RTP datagram out to every subscriber. */
void rtp_forward(struct relay *r, const uint8_t *d, size_t len, const struct sockaddr_storage *from,
		 uint64_t now_ns);
/* Fan one RTCP compound packet out, rewritten per subscriber. */
void rtcp_forward(struct relay *r, const uint8_t *d, size_t len,
		  const struct sockaddr_storage *from, uint64_t now_ns);

/* ---- spoof.c ------------------------------------------------------------ */

/* Send payload to dst as if from src, through raw socket fd of dst's family.
 * Returns 0 or an errno. */
int spoof_send(int fd, const void *payload, size_t len, const struct sockaddr_storage *src,
	       const struct sockaddr_storage *dst, int ttl, bool checksum);
/* A raw socket for family (IP_HDRINCL / IPPROTO_RAW), or -1 with errno. */
int spoof_socket(int family, int sndbuf);

/* ---- upstream.c: --upstream ----------------------------------------------- */

#define RELAY_MAX_HOPS 8      /* relays in a path: a deeper JOIN is refused */
#define RELAY_MAX_UPSTREAMS 8 /* --upstream options */
#define RELAY_MAX_JOINS 8     /* --join options */

enum up_state { UP_IDLE, UP_COOKIE, UP_JOINING, UP_ACTIVE };

struct upstream {
	const char *arg;	      /* as given */
	struct sockaddr_storage addr; /* its control port */
	int fd;			      /* connected UDP socket */
	enum up_state st;
	uint64_t cookie;
	uint64_t start_ns; /* this handshake started */
	uint64_t sent_ns;  /* last request sent */
	uint64_t heard_ns; /* last reply or datagram from it */
	uint64_t retry_ns; /* IDLE: not before */
	uint64_t backoff_ns;
	uint64_t path[RELAY_MAX_HOPS]; /* its path: itself first, then its upstreams */
	size_t npath;
};

/* Parse ADDR:PORT (numeric; [IPv6]:PORT) into u.  0 or -1 with err set. */
int upstream_parse(struct upstream *u, const char *arg, char *err, size_t errlen);
/* Open the sockets; each is added to epoll by main.c. 0 or -1 with errno. */
int upstream_open(struct relay *r);
/* Every UP_TICK_MS: timeouts, keepalives, the next upstream. */
void upstream_tick(struct relay *r, uint64_t now);
#define UP_TICK_MS 50
/* A reply on upstream i's socket. */
void upstream_read(struct relay *r, size_t i);
/* Whether from is the upstream the stream is taken from now (and mark it heard). */
bool upstream_is_current(struct relay *r, const struct sockaddr_storage *from, uint64_t now);
/* RTP dedupe across switches: false when (ssrc, seq) was relayed already. */
bool upstream_dedupe(struct relay *r, uint32_t ssrc, uint16_t seq);
/* The path this relay gives its relay subscribers: itself, then its upstreams. */
size_t relay_path(const struct relay *r, uint64_t *out);
void upstream_close(struct relay *r);

/* --join GROUP[,SOURCE][@IFACE] */
struct mjoin {
	const char *arg;
	struct sockaddr_storage group, source; /* source: AF_UNSPEC for any-source */
	unsigned ifindex;		       /* 0: the kernel's choice (the route to GROUP) */
};
/* Parse one --join.  0, or -1 with err set. */
int mjoin_parse(struct mjoin *j, const char *arg, char *err, size_t errlen);
/* Join every --join group on the data socket of its family.  0 or -1 with err. */
int mjoin_apply(struct relay *r, char *err, size_t errlen);

/* ---- the relay ---------------------------------------------------------- */

#define RELAY_MAX_SOCKS 1024

struct sendsock {
	int fd;
	int family;
	int ttl;
	bool raw;
	enum gc_engine engine; /* resolved */
	int twin;	       /* AUTO: a dup() of fd on the mmsg engine (batch.c), or -1 */
	struct gc_giovec *rec; /* recipients of the group send being built */
	struct receiver **who;
	size_t n, cap;
};

struct listener {
	int fd;
	int family;
	int kind; /* LS_DATA, LS_RTCP, LS_CONTROL */
};
enum { LS_DATA, LS_RTCP, LS_CONTROL };

struct relay {
	/* options */
	const char *listen_addr, *listen_port;
	int family; /* -4 / -6 / AF_UNSPEC */
	long rcvbuf, sndbuf;
	size_t max_size; /* -u */
	int debug;
	unsigned timeout_ms; /* -t */
	bool daemon;
	const char *pidfile;
	enum gc_engine engine;
	int cpu;
	unsigned status_s;
	const char *stats_socket;
	const char *metrics;		      /* --metrics as given, NULL: off */
	struct sockaddr_storage metrics_addr; /* parsed */
	bool json;
	bool time_sends; /* --time-sends: measure send_ns (two clock calls per send) */
	double duration_s;
	bool check; /* --check: the configuration only */
	/* config files (-c), each with the options in force where it was given */
	struct {
		const char *path;
		struct rc_opts o;
	} cfile[16];
	size_t ncfile;
	struct rc_opts argv_opts; /* for the command line's receivers */
	unsigned tx_delay_us;

	/* broadcast mode */
	bool rtp;
	const char *control_port, *rtcp_port_opt;
	uint32_t max_subs;
	unsigned expire_s;
	uint32_t clock_rate;
	bool have_producer_filter;
	bool any_producer;	 /* --any-producer: RTP from anyone */
	bool allow_local;	 /* --allow-local-subscribers */
	uint32_t max_per_source; /* --max-per-source */
	uint32_t ctl_rate;	 /* --control-rate: requests per second per source */
	unsigned cookie_s;	 /* --cookie-lifetime: one time bucket */
	struct sockaddr_storage producer_net, producer_mask;
	const char *user; /* --user */
	struct mjoin join[RELAY_MAX_JOINS];
	size_t njoin;
	struct upstream up[RELAY_MAX_UPSTREAMS];
	size_t nup;
	bool up_revert;		/* --upstream-revert */
	unsigned up_timeout_ms; /* --upstream-timeout */
	int up_cur;		/* the upstream the stream comes from, -1: none */
	int up_last;		/* the last one it came from, -1: none yet */
	uint64_t relay_id;	/* random at start, never 0 */
	struct relay_dedupe {	/* RTP dedupe (--upstream) */
		bool have, switched;
		uint32_t ssrc;
		uint16_t top;
		uint64_t win[16]; /* the last 1024 sequence numbers, bit (seq % 1024) */
	} dd;

	/* state */
	struct listener ls[8];
	size_t nls;
	int data_fd[2];		       /* [0] IPv4, [1] IPv6 data listen socket, -1 if none */
	int data_twin[2];	       /* AUTO: their dup()s on the mmsg engine (batch.c), or -1 */
	enum gc_engine data_engine[2]; /* what sends on data_fd (AUTO resolved) */
	int rtcp_fd[2];
	struct sendsock ss[RELAY_MAX_SOCKS];
	size_t nss;
	int raw_fd[2];
	struct rc_conf conf;
	struct subs subs;
	uint8_t cookie_key[SUBS_KEY_BYTES];
	struct sockaddr_storage *local; /* the host's addresses, then its IPv4 broadcast */
	size_t nlocal, nbcast;		/* addresses (control_local_addrs) */
	uint16_t own_port[3]; /* data, RTCP, control: never a subscriber on a local address */
	struct {
		uint64_t t_ns;
		uint32_t tokens;
	} * rate; /* CTL_RATE_SLOTS budgets, milli-requests */
	struct producer prod;
	struct relay_counters c;
	int *gerrno;
	size_t gerrno_cap;
	/* broadcast recipients, rebuilt when subs.dirty */
	struct gc_giovec *brec[2];
	struct sub **bwho[2];
	size_t bn[2], bcap;
	struct gc_giovec *rrec; /* RTCP recipients */
	struct sub **rwho;
	size_t rcap;
	uint8_t *rtcp_buf;
	size_t rtcp_buf_cap;
	uint64_t start_ns;
	uint64_t timer_ns; /* cost of one timer pair, for the record */
	/* batch.c: the copies of the receive batch being handled */
	struct outq {
		struct gc_giovec *rec; /* RELAY_OUT_MAX each */
		void **who;	       /* struct receiver * or struct sub * */
		uint32_t *payload;     /* broadcast: the copy's RTP payload octets */
		uint8_t (*hdr)[12];    /* broadcast: the copy's RTP header */
		size_t n;
		int fd; /* the socket they leave on */
		/* counts one copy (set by who queues: fanout.c or rtp.c) */
		void (*account)(struct relay *r, void *who, int e, size_t len, uint32_t payload);
	} q;
	unsigned rx_batch; /* datagrams in the receive batch being handled */
	bool rx_busy;	   /* input at RELAY_BUSY_RATE or more over the last tick */
};

int relay_family_index(int family);

/* fanout.c */
int fanout_install(struct relay *r, struct rc_conf *conf, char *err, size_t errlen);
void fanout_datagram(struct relay *r, const uint8_t *d, size_t len, const struct sockaddr_storage *from);
/* Carry sampling state and counters from o's receivers to the same ones in s. */
int carry_receivers(struct source *s, const struct source *o);
int fanout_sendsock(struct relay *r, int family, int ttl, bool raw, char *err, size_t errlen);
/* gc_sendgroup() on socket fd, timed into r->c.send_ns; gerrno sized by caller. */
int relay_group_send(struct relay *r, int fd, const struct iovec *shared,
		     const struct gc_giovec *rec, size_t n, int *gerrno);
int *relay_gerrno(struct relay *r, size_t n);
/* Count one copy to receiver v (struct receiver *): e is 0 or its errno. */
void fanout_account(struct relay *r, void *v, int e, size_t len);

/* rtp.c: count one RTP copy to subscriber s (struct sub *). */
void rtp_account(struct relay *r, void *s, int e, size_t len, uint32_t payload);

/* batch.c */
int batch_init(struct relay *r); /* 0, or -1 out of memory */
void batch_free(struct relay *r);
/* AUTO: a dup() of fd on the mmsg engine, else (or when it cannot be made) -1. */
int batch_twin(const struct relay *r, int fd);
void batch_twin_close(int *twin);
/* Where the n copies of one datagram go, sent on fd (engine e, twin or -1):
 * the socket to queue them for (room for n made), or -1: send them now on fd
 * (the queue was flushed first). */
int batch_pick(struct relay *r, int fd, int twin, enum gc_engine e, size_t n);
/* Send what is queued, count every copy. */
void batch_flush(struct relay *r);
/* AUTO: the group size from which the kernel engine sends a datagram that
 * came in a batch or at a busy input rate (busy), or alone at a low rate
 * (measured: batch.c). */
#define RELAY_BUSY_RATE 2000 /* datagrams/s: the lowest rate measured busy (batch.c) */
size_t relay_kernel_from(bool busy);

/* args.c: the command line.  The receivers given as arguments, kept for reload. */
struct relay_args {
	char **rcv;
	int nrcv;
	const char *producer;
};
/* Defaults, options, then the configuration (files and arguments) checked
 * against the mode into conf.  Exits 2 naming the option on bad arguments. */
void relay_configure(struct relay *r, struct relay_args *a, int argc, char **argv, struct rc_conf *conf);
/* Config files then the command line's receivers, in samplicator's order; on
 * reload (from != NULL) the command line's receivers come from the configuration
 * in force.  0, or -1 with err set. */
int relay_build_conf(struct relay *r, const struct relay_args *a, const struct rc_conf *from,
		     struct rc_conf *c, char *err, size_t errlen);
/* Port string (number or service) -> number, or exit 2 naming the option. */
uint16_t relay_port_number(const char *opt, const char *s);

/* privs.c */
/* Write the PID file with O_CREAT|O_EXCL|O_NOFOLLOW; a stale one (a regular
 * file of ours naming a process that is gone) is replaced.  Exits on error. */
void relay_write_pidfile(const char *path);
/* Keep only CAP_NET_ADMIN, CAP_BPF (and CAP_NET_RAW when raw is true) and, with
 * user, switch to that user keeping them.  Exits on error. */
void relay_drop_privileges(const char *user, bool raw);

/* main.c: the one epoll instance.  stats.c adds and removes its stats
 * connections there, tagged TAG_STATS_CONN | index in the low 32 bits of the
 * event data (the high 32 bits, main.c's tag kinds, are 0 for them). */
extern int relay_epfd;
#define TAG_STATS_CONN 0x53000000u

/* stats.c */
uint64_t relay_now_ns(void);
uint64_t relay_cpu_ns(void);
void stats_json(struct relay *r, FILE *f, bool detail);
/* The engine that sends now (AUTO resolved). */
const char *engine_resolved(const struct relay *r);
/* The library's sockets (gc_stats(3), gc_auto_reason(3)): the send sockets
 * (replicate), the RTP and RTCP listen sockets (broadcast). */
struct gc_sock {
	int fd, family, ttl; /* ttl 0: not a send socket of replicate mode */
	const char *role;    /* "send", "rtp", "rtcp" */
	int twin;	     /* its dup() on the mmsg engine (batch.c), or -1 */
};
size_t relay_gc_sockets(const struct relay *r, struct gc_sock *out, size_t cap);
/* gc_stats(3) of g: its descriptor's and its twin's added.  0 or -1. */
int relay_sock_stats(const struct gc_sock *g, struct gc_stats *st);
void stats_status_line(struct relay *r);
int stats_listen(struct relay *r, const char *path);
void stats_accept(struct relay *r, int lfd);
void stats_conn_event(struct relay *r, int idx, uint32_t events);
void stats_close_all(struct relay *r);
int stats_query(const char *path);

/* metrics.c: --metrics (the address, listening socket and HTTP: promhttp.h) */
/* Serve on lfd: returns the epoll descriptor to watch, or -1 with errno. */
int metrics_start(struct relay *r, int lfd);
/* The exposition (Prometheus text format 0.0.4). */
void metrics_write(const struct relay *r, FILE *f);

#endif /* GROUPCAST_RELAY_H */
