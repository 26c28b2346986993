/* SPDX-License-Identifier: MIT */
/*
 * stats.c - what the relay counts, and three ways to read it:
 *   - a status line every --status seconds on stderr (rates since the last one);
 *   - JSON from the stats socket (--stats-socket PATH): connect, read until
 *     EOF; `groupcast relay --query PATH` does that and prints it;
 *   - JSON on stdout at exit (--json).
 * Never on the network: the JSON has the pid and CPU time, and a UDP answer
 * to a forged source would be a reflector (the control port had STATS once).
 * The socket serves at most STATS_CONNS readers at a time; more are refused
 * and counted, so a flood of connections cannot grow the relay's memory
 * beyond STATS_CONNS buffers.
 */
#include "relay.h"
#include "../cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define STATS_CONNS 4

uint64_t relay_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t relay_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *errname(int e)
{
	const char *n = e ? strerrorname_np(e) : NULL;
	return n ? n : "";
}

static const char *engine_resolved(const struct relay *r)
{
	/* Asked now, not remembered from setup: AUTO may change its engine
	 * between sends (gc_set_engine(3)), and this is where that shows. */
	for (size_t i = 0; i < r->nss; i++)
		if (!r->ss[i].raw) {
			enum gc_engine e = gc_get_engine(r->ss[i].fd);
			return gc_engine_name(e != GC_ENGINE_NONE ? e : r->ss[i].engine);
		}
	for (int f = 0; f < 2; f++)
		if (r->data_fd[f] >= 0 && r->rtp) {
			enum gc_engine e = gc_get_engine(r->data_fd[f]);
			if (e != GC_ENGINE_NONE)
				return gc_engine_name(e);
		}
	return gc_engine_name(r->engine);
}

void stats_json(struct relay *r, FILE *f, bool detail)
{
	const struct relay_counters *c = &r->c;
	uint64_t now = relay_now_ns();
	fprintf(f,
		"{\"pid\":%ld,\"mode\":\"%s\",\"engine\":\"%s\",\"engine_resolved\":\"%s\","
		"\"uptime_s\":%.3f,\"cpu_ns\":%llu,\"send_ns\":%llu,\"timer_ns\":%llu",
		(long)getpid(), r->rtp ? "broadcast" : "replicate", gc_engine_name(r->engine),
		engine_resolved(r), (double)(now - r->start_ns) / 1e9,
		(unsigned long long)relay_cpu_ns(), (unsigned long long)c->send_ns,
		(unsigned long long)r->timer_ns);
#define F(name) fprintf(f, ",\"" #name "\":%llu", (unsigned long long)c->name)
	F(in);
	F(in_octets);
	F(out);
	F(out_octets);
	F(errors);
	F(oversize);
	F(ingest_drops);
	F(group_sends);
	if (r->rtp) {
		F(rtp_invalid);
		F(rtp_rejected);
		F(rtp_loops);
		F(producer_changes);
		F(rtcp_in);
		F(rtcp_out);
		F(rtcp_invalid);
		F(rtcp_rejected);
		F(rtcp_from_subscribers);
		F(ctl_in);
		F(ctl_join);
		F(ctl_leave);
		F(ctl_keepalive);
		F(ctl_unknown);
		F(ctl_bad);
		F(ctl_refused);
		F(ctl_cookies);
		F(ctl_short);
		F(ctl_bad_cookie);
		F(ctl_bad_addr);
		F(ctl_per_source);
		F(ctl_rate_limited);
		F(ctl_truncated);
		F(expired);
		fprintf(f, ",\"subscriber_count\":%u,\"max_subscribers\":%u", r->subs.nactive,
			r->subs.max);
	} else {
		F(unmatched);
		F(skipped);
		F(raw_out);
		F(direct_out);
		F(reloads);
		F(reload_failures);
		fprintf(f, ",\"receiver_count\":%zu,\"source_count\":%zu", r->conf.receivers, r->conf.n);
		/* the library's own counters of the send sockets (gc_stats(3)): which
		 * way the datagrams really went, whatever engine_resolved says now */
		uint64_t lib_dgrams = 0, lib_fallback = 0;
		for (size_t i = 0; i < r->nss; i++) {
			struct gc_stats st = GC_STATS_INIT();
			if (!r->ss[i].raw && gc_stats(r->ss[i].fd, &st) == 0) {
				lib_dgrams += st.datagrams;
				lib_fallback += st.user_fallback;
			}
		}
		fprintf(f, ",\"lib_datagrams\":%llu,\"lib_user_fallback\":%llu",
			(unsigned long long)lib_dgrams, (unsigned long long)lib_fallback);
	}
	F(stats_queries);
	F(stats_refused);
#undef F
	if (!detail) {
		fputs("}\n", f);
		return;
	}
	char a[80];
	if (r->rtp) {
		const struct producer *p = &r->prod;
		fputs(",\"producer\":", f);
		if (p->have) {
			fputs("{\"addr\":", f);
			cli_json_str(f, addr_str(&p->addr, a, sizeof(a)));
			fprintf(f, ",\"ssrc\":\"0x%08x\",\"packets\":%llu,\"payload_octets\":%llu}",
				p->ssrc, (unsigned long long)p->packets, (unsigned long long)p->octets);
		} else {
			fputs("null", f);
		}
		fputs(",\"subscribers\":[", f);
		for (uint32_t k = 0; k < r->subs.nactive; k++) {
			const struct sub *s = &r->subs.slot[r->subs.active[k]];
			fprintf(f, "%s{\"addr\":", k ? "," : "");
			cli_json_str(f, addr_str(&s->addr, a, sizeof(a)));
			fprintf(f,
				",\"ssrc\":\"0x%08x\",\"rtcp_port\":%u,\"static\":%s,\"packets\":%llu,"
				"\"octets\":%llu,\"errors\":%llu,\"last_error\":\"%s\",\"rtcp_packets\":%llu,"
				"\"rtcp_errors\":%llu,\"age_s\":%.1f,\"idle_s\":%.1f}",
				s->ssrc, s->rtcp_port, s->is_static ? "true" : "false",
				(unsigned long long)s->st.packets, (unsigned long long)s->st.octets,
				(unsigned long long)s->st.errors, errname(s->st.last_errno),
				(unsigned long long)s->rtcp_packets, (unsigned long long)s->rtcp_errors,
				(double)(now - s->joined_ns) / 1e9, (double)(now - s->seen_ns) / 1e9);
		}
		fputs("]}\n", f);
		return;
	}
	fputs(",\"sources\":[", f);
	for (size_t i = 0; i < r->conf.n; i++) {
		const struct source *s = &r->conf.src[i];
		fprintf(f, "%s{\"where\":", i ? "," : "");
		char w[300];
		snprintf(w, sizeof(w), "%s:%u", s->file ? s->file : "?", s->line);
		cli_json_str(f, w);
		fprintf(f, ",\"any\":%s,\"matched\":%llu,\"matched_octets\":%llu,\"receivers\":[",
			s->any ? "true" : "false", (unsigned long long)s->matched,
			(unsigned long long)s->matched_octets);
		for (size_t k = 0; k < s->n; k++) {
			const struct receiver *v = &s->rcv[k];
			fprintf(f, "%s{\"addr\":", k ? "," : "");
			cli_json_str(f, addr_str(&v->addr, a, sizeof(a)));
			fprintf(f,
				",\"interval\":%u,\"ttl\":%u,\"path\":\"%s\",\"packets\":%llu,\"octets\":%llu,"
				"\"errors\":%llu,\"skipped\":%llu,\"last_error\":\"%s\"}",
				v->freq, v->ttl,
				v->path == PATH_RAW		 ? "raw"
					: v->path == PATH_DIRECT ? "sendto"
								 : "group",
				(unsigned long long)v->st.packets, (unsigned long long)v->st.octets,
				(unsigned long long)v->st.errors, (unsigned long long)v->st.skipped,
				errname(v->st.last_errno));
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}

void stats_status_line(struct relay *r, FILE *f)
{
	static uint64_t t0, cpu0, send0, in0, out0, oct0;
	uint64_t now = relay_now_ns(), cpu = relay_cpu_ns();
	if (!t0) {
		t0 = r->start_ns;
	}
	double dt = (double)(now - t0) / 1e9;
	if (dt <= 0)
		dt = 1e-9;
	const struct relay_counters *c = &r->c;
	double dcpu = (double)(cpu - cpu0), dsend = (double)(c->send_ns - send0);
	uint64_t din = c->in - in0;
	char sendpct[16] = "-"; /* without --time-sends nothing measures it */
	if (r->time_sends)
		snprintf(sendpct, sizeof(sendpct), "%.0f%%", dcpu > 0 ? 100.0 * dsend / dcpu : 0.0);
	fprintf(f,
		"relay: in %.0f/s %.2f Mbit/s  out %.0f/s  %s %u  drops %llu  oversize %llu  errors %llu  "
		"cpu %.1f%%  send %s  %.1f us/datagram  engine %s\n",
		(double)din / dt, (double)(c->in_octets - oct0) * 8 / dt / 1e6,
		(double)(c->out - out0) / dt, r->rtp ? "subscribers" : "receivers",
		r->rtp ? r->subs.nactive : (unsigned)r->conf.receivers,
		(unsigned long long)c->ingest_drops, (unsigned long long)c->oversize,
		(unsigned long long)c->errors, dcpu / dt / 1e7, sendpct,
		din ? dcpu / (double)din / 1e3 : 0.0, engine_resolved(r));
	fflush(f);
	t0 = now;
	cpu0 = cpu;
	send0 = c->send_ns;
	in0 = c->in;
	out0 = c->out;
	oct0 = c->in_octets;
}

/* ---- the stats socket ------------------------------------------------------ */

static struct conn {
	int fd;
	char *buf;
	size_t len, off;
} conns[STATS_CONNS] = { [0 ... STATS_CONNS - 1] = { .fd = -1 } };

static void conn_close(int i)
{
	if (conns[i].fd >= 0) {
		epoll_ctl(relay_epfd, EPOLL_CTL_DEL, conns[i].fd, NULL);
		close(conns[i].fd);
	}
	free(conns[i].buf);
	conns[i] = (struct conn){ .fd = -1 };
}

static void conn_write(int i)
{
	struct conn *c = &conns[i];
	while (c->off < c->len) {
		ssize_t w = send(c->fd, c->buf + c->off, c->len - c->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* EPOLLOUT brings us back */
		if (w <= 0)
			break;
		c->off += (size_t)w;
	}
	conn_close(i);
}

int stats_listen(struct relay *r, const char *path)
{
	(void)r;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) { /* never remove what is not a socket */
			close(fd);
			errno = EEXIST;
			return -1;
		}
		unlink(path); /* a stale socket of an earlier run */
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void stats_accept(struct relay *r, int lfd)
{
	for (int tries = 0; tries < 16; tries++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int i = 0;
		while (i < STATS_CONNS && conns[i].fd >= 0)
			i++;
		if (i == STATS_CONNS) {
			r->c.stats_refused++;
			close(fd);
			continue;
		}
		r->c.stats_queries++;
		struct conn *c = &conns[i];
		c->fd = fd;
		FILE *f = open_memstream(&c->buf, &c->len);
		if (!f) {
			conn_close(i);
			continue;
		}
		stats_json(r, f, true);
		if (fclose(f) != 0) {
			conn_close(i);
			continue;
		}
		struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = TAG_STATS_CONN | (unsigned)i };
		if (epoll_ctl(relay_epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			conn_close(i);
			continue;
		}
		conn_write(i);
	}
}

void stats_conn_event(struct relay *r, int idx, uint32_t events)
{
	(void)r;
	if (idx < 0 || idx >= STATS_CONNS || conns[idx].fd < 0)
		return;
	if (events & (EPOLLERR | EPOLLHUP))
		conn_close(idx);
	else
		conn_write(idx);
}

void stats_close_all(struct relay *r)
{
	(void)r;
	for (int i = 0; i < STATS_CONNS; i++)
		conn_close(i);
}

int stats_query(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "groupcast relay: --query: path '%s' is too long\n", path);
		return 2;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "groupcast relay: --query: cannot connect to '%s': %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	char buf[65536];
	ssize_t n;
	size_t total = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		if (n > 0) {
			fwrite(buf, 1, (size_t)n, stdout);
			total += (size_t)n;
		}
	}
	close(fd);
	if (fflush(stdout) != 0 || total == 0)
		return 1;
	return 0;
}
