/* SPDX-License-Identifier: MIT */
/*
 * promhttp.c - --metrics for the daemons: the listening socket, the HTTP
 * server (libmicrohttpd in external-epoll mode, no thread of its own) and the
 * exposition's pieces.  See promhttp.h.
 */
#include "promhttp.h"
#include "addr.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>

#define PROM_MEM (32 * 1024) /* per connection: request headers only */

int prom_parse_addr(const char *arg, struct sockaddr_storage *ss, char *err, size_t errlen)
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

int prom_listen(const struct sockaddr_storage *ss)
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

/* ---- the exposition -------------------------------------------------------- */

void prom_label_value(FILE *f, const char *s)
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

void prom_family(FILE *f, const char *prefix, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", prefix, name, help, prefix, name, type);
}

void prom_sample(FILE *f, const char *prefix, const char *name, const char *labels, uint64_t v)
{
	fprintf(f, "%s%s", prefix, name);
	if (labels)
		fprintf(f, "{%s}", labels);
	fprintf(f, " %llu\n", (unsigned long long)v);
}

void prom_write_requests(FILE *f, const char *prefix, struct prom_requests req)
{
	prom_family(f, prefix, "metrics_requests_total", "counter",
		    "HTTP requests on --metrics by status (200: scrapes of /metrics, this one included).");
	prom_sample(f, prefix, "metrics_requests_total", "code=\"200\"", *req.ok);
	prom_sample(f, prefix, "metrics_requests_total", "code=\"404\"", *req.not_found);
	prom_sample(f, prefix, "metrics_requests_total", "code=\"405\"", *req.bad_method);
}

static double seconds(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void prom_write_process(FILE *f, const char *prefix, uint64_t start_ns)
{
	double up = seconds(CLOCK_MONOTONIC) - (double)start_ns / 1e9;
	prom_family(f, prefix, "start_time_seconds", "gauge",
		    "When the daemon started, seconds since the epoch.");
	fprintf(f, "%sstart_time_seconds %.3f\n", prefix, seconds(CLOCK_REALTIME) - up);
	prom_family(f, prefix, "uptime_seconds", "gauge", "Seconds since the daemon started.");
	fprintf(f, "%suptime_seconds %.3f\n", prefix, up);
	prom_family(f, prefix, "cpu_seconds_total", "counter", "CPU time of the daemon's process.");
	fprintf(f, "%scpu_seconds_total %.9f\n", prefix, seconds(CLOCK_PROCESS_CPUTIME_ID));
}

/* ---- HTTP -------------------------------------------------------------------- */

static struct MHD_Daemon *mhd;
static void (*prom_writer)(void *ctx, FILE *f);
static void *prom_ctx;
static struct prom_requests prom_req;

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
	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)req;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		(*prom_req.bad_method)++;
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "405 method not allowed: GET /metrics\n");
	}
	if (strcmp(url, "/metrics") != 0) {
		(*prom_req.not_found)++;
		return reply(c, MHD_HTTP_NOT_FOUND, "404 not found: GET /metrics\n");
	}
	(*prom_req.ok)++;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return MHD_NO;
	prom_writer(prom_ctx, f);
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

int prom_start(int lfd, void (*write)(void *ctx, FILE *f), void *ctx, struct prom_requests req)
{
	prom_writer = write;
	prom_ctx = ctx;
	prom_req = req;
	mhd = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET,
			       (MHD_socket)lfd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)PROM_CONNS,
			       MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PROM_PER_IP,
			       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)PROM_TIMEOUT_S,
			       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)PROM_MEM, MHD_OPTION_END);
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

void prom_run(void)
{
	if (mhd)
		(void)MHD_run(mhd);
}

void prom_stop(void)
{
	if (mhd)
		MHD_stop_daemon(mhd); /* closes the listening socket too */
	mhd = NULL;
}
