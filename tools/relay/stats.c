/* SPDX-License-Identifier: MIT */
/*
 * stats.c - what the relay counts, and three ways to read it:
 *   - a status line (event=status) every --status seconds on stderr (rates since the last one);
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
#include "../log.h"

#include <errno.h>
#include <stddef.h>
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

/* ---- the counters: one table for the JSON and the metrics ---------------- */

#define C(key, mode, fam, lab, help)                                                    \
	{                                                                               \
#key, offsetof(struct relay_counters, key), mode, false, fam, lab, help \
	}
const struct counter_def relay_counter_defs[] = {
	C(in, CM_BOTH, "datagrams_received_total", NULL,
	  "Datagrams read from the listen sockets (RTP and RTCP in broadcast mode)."),
	C(in_octets, CM_BOTH, "received_bytes_total", NULL, "Bytes of the datagrams received."),
	C(out, CM_BOTH, "datagrams_sent_total", NULL, "Datagrams handed to the kernel, one per recipient."),
	C(out_octets, CM_BOTH, "sent_bytes_total", NULL, "Bytes of the datagrams sent."),
	C(errors, CM_BOTH, "send_errors_total", NULL, "Datagrams that failed, per recipient."),
	C(oversize, CM_BOTH, "drops_total", "reason=\"oversize\"",
	  "Datagrams received and not relayed, by reason."),
	C(ingest_drops, CM_BOTH, "drops_total", "reason=\"socket_overflow\"", NULL),
	C(unmatched, CM_REPLICATE, "drops_total", "reason=\"unmatched\"", NULL),
	C(rtp_invalid, CM_BROADCAST, "drops_total", "reason=\"rtp_invalid\"", NULL),
	C(rtp_rejected, CM_BROADCAST, "drops_total", "reason=\"not_producer\"", NULL),
	C(rtp_loops, CM_BROADCAST, "drops_total", "reason=\"rtp_loop\"", NULL),
	C(rtcp_invalid, CM_BROADCAST, "drops_total", "reason=\"rtcp_invalid\"", NULL),
	C(rtcp_rejected, CM_BROADCAST, "drops_total", "reason=\"rtcp_rejected\"", NULL),
	C(rtp_duplicates, CM_BROADCAST, "drops_total", "reason=\"duplicate\"", NULL),
	C(group_sends, CM_BOTH, "group_sends_total", NULL, "gc_sendgroup() calls."),
	{ "send_ns", offsetof(struct relay_counters, send_ns), CM_BOTH, true, "send_cpu_seconds_total",
	  NULL, "CPU time inside the sends (measured only with --time-sends)." },
	/* replicate mode */
	C(skipped, CM_REPLICATE, "datagrams_skipped_total", NULL,
	  "Datagrams not sent to a receiver because of its sampling interval."),
	C(raw_out, CM_REPLICATE, "datagrams_sent_by_path_total", "path=\"raw\"",
	  "Datagrams sent outside gc_sendgroup() (part of datagrams_sent_total), by path."),
	C(direct_out, CM_REPLICATE, "datagrams_sent_by_path_total", "path=\"sendto\"", NULL),
	C(reloads, CM_REPLICATE, "reloads_total", NULL, "Configuration reloads (SIGHUP) that took."),
	C(reload_failures, CM_REPLICATE, "reload_failures_total", NULL,
	  "Configuration reloads refused (the old configuration stayed)."),
	/* broadcast mode */
	C(producer_changes, CM_BROADCAST, "producer_changes_total", NULL,
	  "RTP SSRC changes and sequence jumps of the producer."),
	C(rtcp_in, CM_BROADCAST, "rtcp_received_total", NULL, "RTCP packets received."),
	C(rtcp_out, CM_BROADCAST, "rtcp_sent_total", NULL, "RTCP packets sent to subscribers."),
	C(rtcp_from_subscribers, CM_BROADCAST, "rtcp_from_subscribers_total", NULL,
	  "Receiver reports of subscribers (their proof of life)."),
	C(ctl_in, CM_BROADCAST, "control_received_total", NULL, "Control datagrams received."),
	C(ctl_join, CM_BROADCAST, "control_requests_total", "type=\"join\"", "Control requests by type."),
	C(ctl_leave, CM_BROADCAST, "control_requests_total", "type=\"leave\"", NULL),
	C(ctl_keepalive, CM_BROADCAST, "control_requests_total", "type=\"keepalive\"", NULL),
	C(ctl_unknown, CM_BROADCAST, "control_requests_total", "type=\"unknown\"", NULL),
	C(ctl_bad, CM_BROADCAST, "control_failures_total", "reason=\"bad_request\"",
	  "Control requests refused or not answered, by reason."),
	C(ctl_bad_addr, CM_BROADCAST, "control_failures_total", "reason=\"bad_address\"", NULL),
	C(ctl_short, CM_BROADCAST, "control_failures_total", "reason=\"short_join\"", NULL),
	C(ctl_bad_cookie, CM_BROADCAST, "control_failures_total", "reason=\"bad_cookie\"", NULL),
	C(ctl_per_source, CM_BROADCAST, "control_failures_total", "reason=\"per_source_limit\"", NULL),
	C(ctl_refused, CM_BROADCAST, "control_failures_total", "reason=\"full\"", NULL),
	C(ctl_rate_limited, CM_BROADCAST, "control_failures_total", "reason=\"rate_limited\"", NULL),
	C(ctl_loop, CM_BROADCAST, "control_failures_total", "reason=\"loop\"", NULL),
	C(ctl_cookies, CM_BROADCAST, "handshake_cookies_sent_total", NULL,
	  "Cookie replies to a first JOIN (the return-routability handshake)."),
	C(ctl_truncated, CM_BROADCAST, "control_replies_truncated_total", NULL,
	  "Replies to unverified requests cut to the request's length."),
	C(up_loops, CM_BROADCAST, "upstream_loops_total", NULL,
	  "Upstreams left because this relay was in their path (a loop seen from below)."),
	C(up_subscribed, CM_BROADCAST, "upstream_subscriptions_total", NULL,
	  "Subscriptions to an upstream relay that it answered OK JOIN (--upstream)."),
	C(up_failures, CM_BROADCAST, "upstream_failures_total", NULL,
	  "Upstream relays given up: silent, unreachable, refused (--upstream)."),
	C(up_switches, CM_BROADCAST, "upstream_switches_total", NULL,
	  "Times the stream moved to another upstream relay (--upstream)."),
	C(up_gap, CM_BROADCAST, "upstream_gap_packets_total", NULL,
	  "RTP packets missing across upstream switches (sequence numbers never relayed)."),
	C(expired, CM_BROADCAST, "subscribers_expired_total", NULL,
	  "Subscribers dropped after --expire seconds of silence."),
	/* the readers */
	C(stats_queries, CM_BOTH, "stats_socket_queries_total", NULL, "Readers served on --stats-socket."),
	C(stats_refused, CM_BOTH, "stats_socket_refused_total", NULL,
	  "Readers refused on --stats-socket (too many at once)."),
	C(metrics_scrapes, CM_BOTH, "metrics_requests_total", "code=\"200\"",
	  "HTTP requests on --metrics by status (200: scrapes of /metrics, this one included)."),
	C(metrics_not_found, CM_BOTH, "metrics_requests_total", "code=\"404\"", NULL),
	C(metrics_bad_method, CM_BOTH, "metrics_requests_total", "code=\"405\"", NULL),
};
#undef C
const size_t relay_ncounter_defs = sizeof(relay_counter_defs) / sizeof(relay_counter_defs[0]);

bool counter_applies(const struct relay *r, const struct counter_def *d)
{
	return d->mode == CM_BOTH || d->mode == (r->rtp ? CM_BROADCAST : CM_REPLICATE);
}

uint64_t counter_value(const struct relay *r, const struct counter_def *d)
{
	uint64_t v;
	memcpy(&v, (const char *)&r->c + d->off, sizeof(v));
	return v;
}

static const char *errname(int e)
{
	const char *n = e ? strerrorname_np(e) : NULL;
	return n ? n : "";
}

const char *engine_resolved(const struct relay *r)
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

size_t relay_gc_sockets(const struct relay *r, struct gc_sock *out, size_t cap)
{
	size_t n = 0;
	if (r->rtp) {
		for (size_t i = 0; i < r->nls && n < cap; i++)
			if (r->ls[i].kind != LS_CONTROL) {
				out[n] = (struct gc_sock){
					r->ls[i].fd, r->ls[i].family, 0,
					r->ls[i].kind == LS_RTCP ? "rtcp" : "rtp",
					r->ls[i].kind == LS_RTCP
						? -1
						: r->data_twin[relay_family_index(r->ls[i].family)]
				};
				n++;
			}
		return n;
	}
	for (size_t i = 0; i < r->nss && n < cap; i++)
		if (!r->ss[i].raw) {
			out[n] = (struct gc_sock){ r->ss[i].fd, r->ss[i].family, r->ss[i].ttl,
						   "send", r->ss[i].twin };
			n++;
		}
	return n;
}

int relay_sock_stats(const struct gc_sock *g, struct gc_stats *st)
{
	struct gc_stats t = GC_STATS_INIT();
	if (gc_stats(g->fd, st) != 0)
		return -1;
	if (g->twin >= 0 && gc_stats(g->twin, &t) == 0) {
		st->group_sends += t.group_sends;
		st->datagrams += t.datagrams;
		st->bytes += t.bytes;
		st->failed += t.failed;
		st->user_fallback += t.user_fallback;
		if (t.last_errno && !st->last_errno)
			st->last_errno = t.last_errno;
	}
	return 0;
}

void stats_json(struct relay *r, FILE *f, bool detail)
{
	uint64_t now = relay_now_ns();
	fprintf(f,
		"{\"pid\":%ld,\"mode\":\"%s\",\"engine\":\"%s\",\"engine_resolved\":\"%s\","
		"\"uptime_s\":%.3f,\"cpu_ns\":%llu,\"timer_ns\":%llu",
		(long)getpid(), r->rtp ? "broadcast" : "replicate", gc_engine_name(r->engine),
		engine_resolved(r), (double)(now - r->start_ns) / 1e9,
		(unsigned long long)relay_cpu_ns(), (unsigned long long)r->timer_ns);
	/* the choice batch.c makes per datagram, and why */
	fputs(",\"batching\":", f);
	if (r->engine == GC_ENGINE_AUTO && !strcmp(engine_resolved(r), "kernel"))
		fprintf(f,
			"\"AUTO: a datagram with %zu copies or more (%zu when it came alone at under %d/s) "
			"takes the kernel engine, one trigger per datagram; fewer copies are queued with the "
			"rest of the receive batch and sent by one sendmmsg(), where the kernel engine would "
			"cost more (bench/results/relay-points/crossover.md); input now %s\"",
			relay_kernel_from(true), relay_kernel_from(false), RELAY_BUSY_RATE,
			r->rx_busy ? "busy" : "at a low rate");
	else if (!strcmp(engine_resolved(r), "kernel"))
		fputs("\"none: the kernel engine, one trigger per datagram\"", f);
	else
		fprintf(f, "\"the copies of a receive batch go in one group send on the %s engine, up to %u\"",
			engine_resolved(r), RELAY_OUT_MAX);
	for (size_t i = 0; i < relay_ncounter_defs; i++)
		if (counter_applies(r, &relay_counter_defs[i]))
			fprintf(f, ",\"%s\":%llu", relay_counter_defs[i].json,
				(unsigned long long)counter_value(r, &relay_counter_defs[i]));
	if (r->rtp) {
		fprintf(f, ",\"subscriber_count\":%u,\"max_subscribers\":%u", r->subs.nactive,
			r->subs.max);
		uint64_t path[RELAY_MAX_HOPS + 1];
		size_t np = relay_path(r, path);
		fprintf(f, ",\"relay_id\":\"%016llx\",\"path\":[", (unsigned long long)r->relay_id);
		for (size_t i = 0; i < np; i++)
			fprintf(f, "%s\"%016llx\"", i ? "," : "", (unsigned long long)path[i]);
		fputs("],\"upstream\":", f);
		if (r->up_cur >= 0)
			cli_json_str(f, r->up[r->up_cur].arg);
		else
			fputs("null", f);
	} else {
		fprintf(f, ",\"receiver_count\":%zu,\"source_count\":%zu", r->conf.receivers, r->conf.n);
		/* the library's own counters of the send sockets (gc_stats(3)): which
		 * way the datagrams really went, whatever engine_resolved says now */
		uint64_t lib_dgrams = 0, lib_fallback = 0;
		struct gc_sock gs[RELAY_MAX_SOCKS];
		size_t ns = relay_gc_sockets(r, gs, RELAY_MAX_SOCKS);
		for (size_t i = 0; i < ns; i++) {
			struct gc_stats st = GC_STATS_INIT();
			if (relay_sock_stats(&gs[i], &st) == 0) {
				lib_dgrams += st.datagrams;
				lib_fallback += st.user_fallback;
			}
		}
		fprintf(f, ",\"lib_datagrams\":%llu,\"lib_user_fallback\":%llu",
			(unsigned long long)lib_dgrams, (unsigned long long)lib_fallback);
	}
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

void stats_status_line(struct relay *r)
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
	log_event(LL_NOTICE, "status",
		  "in_per_s=%.0f in_mbit_s=%.2f out_per_s=%.0f %s=%u drops=%llu oversize=%llu "
		  "errors=%llu cpu_pct=%.1f send_pct=%s us_per_datagram=%.1f engine=%s",
		  (double)din / dt, (double)(c->in_octets - oct0) * 8 / dt / 1e6,
		  (double)(c->out - out0) / dt, r->rtp ? "subscribers" : "receivers",
		  r->rtp ? r->subs.nactive : (unsigned)r->conf.receivers,
		  (unsigned long long)c->ingest_drops, (unsigned long long)c->oversize,
		  (unsigned long long)c->errors, dcpu / dt / 1e7, sendpct,
		  din ? dcpu / (double)din / 1e3 : 0.0, engine_resolved(r));
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
