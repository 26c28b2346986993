/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - --metrics ADDR:PORT: the relay's counters in the Prometheus text
 * format (0.0.4) on GET /metrics.
 *
 * The HTTP side is promhttp.c, shared with lmsd and the engine daemon: no
 * thread of its own, libmicrohttpd's epoll descriptor is one more event
 * source of the relay's loop, which calls prom_run() when it is readable and
 * on every tick (the connection timeouts).  So the counters are read on the
 * relay's thread, between two events, and nothing is done per datagram: the
 * writer reads the counters at scrape time.
 *
 * Every counter comes from relay_counter_defs (stats.c), the table the JSON
 * walks too; the gauges and the library's per-socket counters are written
 * here.
 */
#include "relay.h"

#include <string.h>

#define P "groupcast_relay_"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	prom_family(f, P, name, type, help);
}

/* The counters of relay_counter_defs, one family at a time (its samples
 * need not be adjacent in the table). */
static void write_counters(const struct relay *r, FILE *f)
{
	const struct counter_def *t = relay_counter_defs;
	for (size_t i = 0; i < relay_ncounter_defs; i++) {
		size_t k = 0;
		while (k < i && strcmp(t[k].family, t[i].family) != 0)
			k++;
		if (k < i)
			continue; /* written with the first of its family */
		bool any = false;
		for (size_t j = i; j < relay_ncounter_defs; j++) {
			if (strcmp(t[j].family, t[i].family) != 0 || !counter_applies(r, &t[j]))
				continue;
			if (!any)
				family(f, t[i].family, "counter", t[i].help);
			any = true;
			uint64_t v = counter_value(r, &t[j]);
			fprintf(f, P "%s", t[j].family);
			if (t[j].label)
				fprintf(f, "{%s}", t[j].label);
			if (t[j].ns)
				fprintf(f, " %.9f\n", (double)v / 1e9);
			else
				fprintf(f, " %llu\n", (unsigned long long)v);
		}
	}
}

static void sock_labels(FILE *f, const struct gc_sock *s)
{
	fprintf(f, "{socket=\"%s/%s", s->role, s->family == AF_INET6 ? "ipv6" : "ipv4");
	if (s->ttl)
		fprintf(f, "/ttl%d", s->ttl);
	fputc('"', f);
}

/* The library's per-socket counters (gc_stats(3)) and engines. */
static void write_sockets(const struct relay *r, FILE *f)
{
	static struct gc_sock gs[RELAY_MAX_SOCKS];
	static struct gc_stats st[RELAY_MAX_SOCKS];
	size_t n = relay_gc_sockets(r, gs, RELAY_MAX_SOCKS);
	for (size_t i = 0; i < n; i++) {
		st[i] = (struct gc_stats)GC_STATS_INIT();
		if (relay_sock_stats(&gs[i], &st[i]) != 0)
			st[i] = (struct gc_stats)GC_STATS_INIT();
	}
	family(f, "engine_info", "gauge",
	       "The engine that sends on each socket (AUTO resolved now), the one asked for, and why AUTO chose it.");
	for (size_t i = 0; i < n; i++) {
		enum gc_engine e = gc_get_engine(gs[i].fd);
		char why[256] = "";
		if (r->engine == GC_ENGINE_AUTO && gc_auto_reason(gs[i].fd, why, sizeof(why)) != 0)
			why[0] = 0;
		fputs(P "engine_info", f);
		sock_labels(f, &gs[i]);
		fprintf(f, ",engine=\"%s\",requested=\"%s\",reason=",
			gc_engine_name(e != GC_ENGINE_NONE ? e : r->engine), gc_engine_name(r->engine));
		prom_label_value(f, why);
		fputs("} 1\n", f);
	}
	static const struct {
		const char *name, *help;
		size_t off;
	} lib[] = {
		{ "socket_group_sends_total", "Group sends that reached an engine (gc_stats).",
		  offsetof(struct gc_stats, group_sends) },
		{ "socket_datagrams_sent_total", "Datagrams the library handed to the kernel (gc_stats).",
		  offsetof(struct gc_stats, datagrams) },
		{ "socket_sent_bytes_total", "Payload bytes of those datagrams (gc_stats).",
		  offsetof(struct gc_stats, bytes) },
		{ "socket_failed_datagrams_total", "Datagrams that failed or were refused (gc_stats).",
		  offsetof(struct gc_stats, failed) },
		{ "socket_kernel_fallback_datagrams_total",
		  "Datagrams the kernel engine left to a user engine: AUTO fallbacks (gc_stats).",
		  offsetof(struct gc_stats, user_fallback) },
	};
	for (size_t k = 0; k < sizeof(lib) / sizeof(lib[0]); k++) {
		family(f, lib[k].name, "counter", lib[k].help);
		for (size_t i = 0; i < n; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&st[i] + lib[k].off, sizeof(v));
			fprintf(f, P "%s", lib[k].name);
			sock_labels(f, &gs[i]);
			fprintf(f, "} %llu\n", (unsigned long long)v);
		}
	}
	family(f, "socket_last_errno", "gauge",
	       "errno of the socket's most recent failed datagram, 0 if none (gc_stats).");
	for (size_t i = 0; i < n; i++) {
		fputs(P "socket_last_errno", f);
		sock_labels(f, &gs[i]);
		fprintf(f, "} %d\n", st[i].last_errno);
	}
}

void metrics_write(const struct relay *r, FILE *f)
{
	family(f, "info", "gauge", "The relay's mode.");
	fprintf(f, P "info{mode=\"%s\"} 1\n", r->rtp ? "broadcast" : "replicate");
	prom_write_process(f, P, r->start_ns);
	write_counters(r, f);
	if (r->rtp) {
		family(f, "subscribers", "gauge", "Subscribers now (static ones included).");
		fprintf(f, P "subscribers %u\n", r->subs.nactive);
		family(f, "max_subscribers", "gauge", "--max-subscribers.");
		fprintf(f, P "max_subscribers %u\n", r->subs.max);
	} else {
		family(f, "receivers", "gauge", "Receivers in the configuration in force.");
		fprintf(f, P "receivers %zu\n", r->conf.receivers);
		family(f, "sources", "gauge", "Source lines in the configuration in force.");
		fprintf(f, P "sources %zu\n", r->conf.n);
	}
	write_sockets(r, f);
}

/* ---- HTTP: promhttp.c ---------------------------------------------------------- */

static void write_cb(void *r, FILE *f)
{
	metrics_write(r, f);
}

int metrics_start(struct relay *r, int lfd)
{
	return prom_start(lfd, write_cb, r,
			  (struct prom_requests){ &r->c.metrics_scrapes, &r->c.metrics_not_found,
						  &r->c.metrics_bad_method });
}
