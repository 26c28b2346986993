/* SPDX-License-Identifier: MIT */
/*
 * promhttp.h - --metrics [ADDR:]PORT for the daemons (the relay, lmsd, the
 * engine daemon): the Prometheus text format (0.0.4) on GET /metrics over
 * HTTP with libmicrohttpd, run from the daemon's own event loop.
 *
 * No thread: libmicrohttpd runs in its "external epoll" mode.  prom_start()
 * returns its epoll descriptor; the daemon watches it among its own event
 * sources and calls prom_run() when it is readable and at least once a
 * second (libmicrohttpd's connection timeouts are whole seconds).  The
 * exposition is written by the daemon's callback at scrape time, between
 * two of its events: nothing is done per packet.  A hostile client cannot
 * hold more than PROM_CONNS connections (PROM_PER_IP from one address), each
 * for at most PROM_TIMEOUT_S of silence; every socket is non-blocking.
 * One server per process.
 */
#ifndef GC_TOOL_PROMHTTP_H
#define GC_TOOL_PROMHTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#define PROM_CONNS 16
#define PROM_PER_IP 4
#define PROM_TIMEOUT_S 5

/* PORT, :PORT (127.0.0.1), ADDR:PORT, [IPv6]:PORT; numeric only.  0, or -1
 * with err set. */
int prom_parse_addr(const char *arg, struct sockaddr_storage *ss, char *err, size_t errlen);
/* A listening TCP socket on ss (non-blocking), or -1 with errno. */
int prom_listen(const struct sockaddr_storage *ss);

/* The HTTP requests served, by status: where the daemon keeps them. */
struct prom_requests {
	uint64_t *ok, *not_found, *bad_method; /* 200 (scrapes of /metrics), 404, 405 */
};
/* Serve on lfd (taken: prom_stop() closes it); write(ctx, f) writes the
 * exposition.  Returns the epoll descriptor to watch, or -1 with errno. */
int prom_start(int lfd, void (*write)(void *ctx, FILE *f), void *ctx, struct prom_requests req);
void prom_run(void);
void prom_stop(void);

/* The exposition's pieces.  A family's # HELP and # TYPE lines, name
 * prefixed by prefix. */
void prom_family(FILE *f, const char *prefix, const char *name, const char *type, const char *help);
/* A label value in quotes: \, " and newline escaped. */
void prom_label_value(FILE *f, const char *s);
/* One sample, labels the text between the braces (NULL: none). */
void prom_sample(FILE *f, const char *prefix, const char *name, const char *labels, uint64_t v);
/* PREFIXmetrics_requests_total{code} from req (for the daemons that keep no
 * table of their own counters). */
void prom_write_requests(FILE *f, const char *prefix, struct prom_requests req);
/* PREFIXstart_time_seconds, PREFIXuptime_seconds and PREFIXcpu_seconds_total
 * of a process that started at start_ns (CLOCK_MONOTONIC). */
void prom_write_process(FILE *f, const char *prefix, uint64_t start_ns);

#endif
