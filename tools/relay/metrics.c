/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - --metrics ADDR:PORT: the counters in the Prometheus text format
 * (0.0.4) on GET /metrics, over HTTP with libmicrohttpd.
 *
 * No thread of its own: libmicrohttpd runs in its "external epoll" mode; its
 * epoll descriptor is one more event source of the relay's loop, which calls
 * MHD_run() when it is readable and on every tick (the connection timeouts).
 * So the counters are read on the relay's thread, between two events, and
 * nothing is done per datagram: the writer reads the counters at scrape time.
 * A hostile client cannot hold more than METRICS_CONNS connections
 * (METRICS_PER_IP from one address), each for at most METRICS_TIMEOUT_S of
 * silence, and every socket is non-blocking: the loop never waits on one.
 *
 * Every counter comes from relay_counter_defs (stats.c), the table the JSON
 * walks too; the gauges and the library's per-socket counters are written
 * here.
 */
#include "relay.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>

#define METRICS_CONNS 16
#define METRICS_PER_IP 4
#define METRICS_TIMEOUT_S 5
#define METRICS_MEM (32 * 1024) /* per connection: request headers only */
#define P "groupcast_relay_"

int metrics_parse_addr(const char *arg, struct sockaddr_storage *ss, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 2] = "127.0.0.1";
	const char *port = arg, *colon = strrchr(arg, ':');
	if (arg[0] == '[') { /* [IPv6]:PORT */
		const char *close = strchr(arg, ']');
		if (!close || close[1] != ':' || (size_t)(close - arg - 1) >= sizeof(host)) {
			snprintf(err, errlen, "expected [IPv6]:PORT");
			return -1;
		}
		memcpy(host, arg + 1, (size_t)(close - arg - 1));
		host[close - arg - 1] = 0;
		port = close + 2;
	} else if (colon) {
		size_t hl = (size_t)(colon - arg);
		if (hl >= sizeof(host)) {
			snprintf(err, errlen, "address too long");
			return -1;
		}
		if (hl) { /* ":PORT" keeps loopback */
			memcpy(host, arg, hl);
			host[hl] = 0;
		}
		port = colon + 1;
	}
	char *end;
	errno = 0;
	unsigned long p = strtoul(port, &end, 10);
	if (!*port || *end || errno || p < 1 || p > 65535 || port[0] == '-' || port[0] == '+') {
		snprintf(err, errlen, "bad port '%s': expected 1..65535", port);
		return -1;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV },
			*res = NULL;
	char ps[8];
	snprintf(ps, sizeof(ps), "%lu", p);
	if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) {
		snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address", host);
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int metrics_listen(const struct sockaddr_storage *ss)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, addr_len(ss)) != 0 || listen(fd, 64) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* A label value: \, " and newline escaped. */
static void label_value(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*s, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP " P "%s %s\n# TYPE " P "%s %s\n", name, help, name, type);
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
		label_value(f, why);
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
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	double now_real = (double)rt.tv_sec + (double)rt.tv_nsec / 1e9;
	double up = (double)(relay_now_ns() - r->start_ns) / 1e9;
	family(f, "info", "gauge", "The relay's mode.");
	fprintf(f, P "info{mode=\"%s\"} 1\n", r->rtp ? "broadcast" : "replicate");
	family(f, "start_time_seconds", "gauge", "When the relay started, seconds since the epoch.");
	fprintf(f, P "start_time_seconds %.3f\n", now_real - up);
	family(f, "uptime_seconds", "gauge", "Seconds since the relay started.");
	fprintf(f, P "uptime_seconds %.3f\n", up);
	family(f, "cpu_seconds_total", "counter", "CPU time of the relay process.");
	fprintf(f, P "cpu_seconds_total %.9f\n", (double)relay_cpu_ns() / 1e9);
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

/* ---- HTTP -------------------------------------------------------------------- */

static struct MHD_Daemon *mhd;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *body)
{
	struct MHD_Response *rsp =
		MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!rsp)
		return MHD_NO;
	(void)MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		(void)MHD_add_response_header(rsp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, code, rsp);
	MHD_destroy_response(rsp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **req)
{
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)req;
	struct relay *r = cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		r->c.metrics_bad_method++;
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "405 method not allowed: GET /metrics\n");
	}
	if (strcmp(url, "/metrics") != 0) {
		r->c.metrics_not_found++;
		return reply(c, MHD_HTTP_NOT_FOUND, "404 not found: GET /metrics\n");
	}
	r->c.metrics_scrapes++;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return MHD_NO;
	metrics_write(r, f);
	if (fclose(f) != 0) {
		free(buf);
		return MHD_NO;
	}
	struct MHD_Response *rsp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!rsp) {
		free(buf);
		return MHD_NO;
	}
	(void)MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE,
				      "text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, rsp);
	MHD_destroy_response(rsp);
	return ret;
}

int metrics_start(struct relay *r, int lfd)
{
	mhd = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, on_request, r, MHD_OPTION_LISTEN_SOCKET,
			       (MHD_socket)lfd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_CONNS,
			       MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_PER_IP,
			       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_TIMEOUT_S,
			       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_MEM, MHD_OPTION_END);
	if (!mhd) {
		errno = EINVAL;
		return -1;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di || di->epoll_fd < 0) {
		MHD_stop_daemon(mhd);
		mhd = NULL;
		errno = ENOTSUP;
		return -1;
	}
	return di->epoll_fd;
}

void metrics_run(void)
{
	if (mhd)
		(void)MHD_run(mhd);
}

void metrics_stop(void)
{
	if (mhd)
		MHD_stop_daemon(mhd); /* closes the listening socket too */
	mhd = NULL;
}
