/* SPDX-License-Identifier: MIT */
/*
 * groupcast relay - receive datagrams on a port, in batches, and fan each one
 * out with gc_sendgroup().  Two modes:
 *   replicate (default)  samplicator's command line and config file
 *   broadcast (--rtp)    one RTP producer, subscribers that join and leave
 *                        through the control protocol (control.c), each with
 *                        its own RTP header (rtp.c)
 * This file: sockets, the event loop, signals, reload, shutdown; args.c has
 * the command line.
 * See groupcast-relay(1).
 */
#include "relay.h"
#include "../cli.h"
#include "../log.h"
#include "../sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <sodium.h>

int relay_epfd = -1;

enum { TAG_LS = 1, TAG_SIG, TAG_TIMER, TAG_STATS, TAG_METRICS, TAG_UP, TAG_UPTIMER };
#define TAG(kind, i) (((uint64_t)(kind) << 32) | (uint32_t)(i))
/*
 * The tick: TICK_MS while -t or -d needs that precision, else IDLE_TICK_MS,
 * and never more than half the systemd watchdog interval.  Each tick is a
 * wake-up of its own: at 100 input datagrams a second, five ticks are 5 %
 * more wake-ups, paid by the relay that is otherwise cheapest to run.
 */
#define TICK_MS 200
#define IDLE_TICK_MS 1000
#define CTL_BATCH 32
#define LOCAL_ADDRS_NS 5000000000u /* broadcast mode: re-read the host's addresses this often */

/* ---- sockets ------------------------------------------------------------------ */

static int bind_one(const struct sockaddr_storage *ss, long rcvbuf, bool ovfl, char *err, size_t errlen)
{
	int fd = socket(ss->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	char a[80];
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int one = 1;
	if (ss->ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (rcvbuf > 0) {
		int v = (int)rcvbuf;
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	}
	if (ovfl)
		(void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, addr_len(ss)) != 0) {
		snprintf(err, errlen, "bind %s: %s", addr_str(ss, a, sizeof(a)), strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Listen sockets of one kind on port: -s ADDR, or the wildcard of each family. */
static void open_listeners(struct relay *r, int kind, uint16_t port, const char *opt)
{
	char err[256];
	struct sockaddr_storage ss[2];
	int n = 0;
	if (r->listen_addr) {
		struct addrinfo hints = { .ai_family = r->family,
					  .ai_socktype = SOCK_DGRAM,
					  .ai_flags = AI_PASSIVE },
				*res = NULL;
		int rc = getaddrinfo(r->listen_addr, NULL, &hints, &res);
		if (rc != 0 || !res)
			cli_usage_error("-s: cannot resolve '%s': %s", r->listen_addr,
					rc ? gai_strerror(rc) : "no address");
		memset(&ss[0], 0, sizeof(ss[0]));
		memcpy(&ss[0], res->ai_addr, res->ai_addrlen);
		freeaddrinfo(res);
		n = 1;
	} else {
		if (r->family != AF_INET6) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss[n++];
			memset(s4, 0, sizeof(ss[0]));
			s4->sin_family = AF_INET;
		}
		if (r->family != AF_INET) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss[n++];
			memset(s6, 0, sizeof(ss[0]));
			s6->sin6_family = AF_INET6;
		}
	}
	int opened = 0;
	for (int i = 0; i < n; i++) {
		if (ss[i].ss_family == AF_INET)
			((struct sockaddr_in *)&ss[i])->sin_port = htons(port);
		else
			((struct sockaddr_in6 *)&ss[i])->sin6_port = htons(port);
		int fd = bind_one(&ss[i], kind == LS_CONTROL ? 0 : r->rcvbuf, kind != LS_CONTROL,
				  err, sizeof(err));
		if (fd < 0) {
			/* the wildcard of a family this host does not have is not an error */
			if (!r->listen_addr && !r->family && n == 2 &&
			    (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
				continue;
			cli_fail("%s: %s", opt, err);
		}
		if (r->nls == sizeof(r->ls) / sizeof(r->ls[0]))
			cli_fail("too many listen sockets");
		r->ls[r->nls++] = (struct listener){ fd, ss[i].ss_family, kind };
		int fi = relay_family_index(ss[i].ss_family);
		if (kind == LS_DATA)
			r->data_fd[fi] = fd;
		else if (kind == LS_RTCP)
			r->rtcp_fd[fi] = fd;
		opened++;
	}
	if (!opened)
		cli_fail("%s: no socket could be bound", opt);
}

/* Broadcast mode sends from its listen sockets: symmetric RTP ports. */
static void prepare_rtp_senders(struct relay *r)
{
	for (size_t i = 0; i < r->nls; i++) {
		if (r->ls[i].kind == LS_CONTROL)
			continue;
		int fd = r->ls[i].fd, sb = (int)r->sndbuf;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sb, sizeof(sb)) != 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
		if (gc_set_engine(fd, r->engine) != 0)
			cli_fail("--engine %s: %s", gc_engine_name(r->engine), gc_errmsg());
		if (r->ls[i].kind == LS_DATA) {
			int f = relay_family_index(r->ls[i].family);
			r->data_engine[f] = gc_get_engine(fd);
			r->data_twin[f] = batch_twin(r, fd);
		}
	}
}

/* ---- privileges ------------------------------------------------------------------ */

/* Whether -S receivers may come (now or with a reload): CAP_NET_RAW stays. */
static bool needs_raw(const struct relay *r)
{
	bool raw = r->argv_opts.flags & RCV_SPOOF;
	for (size_t i = 0; i < r->ncfile; i++)
		raw |= r->cfile[i].o.flags & RCV_SPOOF;
	return raw;
}

/*
 * Before --user: attach the kernel engine where AUTO took it, while the relay
 * is still root (the engine writes its owner file under /run/groupcast, a
 * root directory).  Asking for the kernel engine by name prepares it;
 * asking for AUTO again then keeps what AUTO picks (the same engine).
 */
static void attach_engines(struct relay *r)
{
	if (r->engine != GC_ENGINE_AUTO)
		return; /* a named engine was prepared when it was set */
	int fds[RELAY_MAX_SOCKS + 8];
	size_t n = 0;
	for (size_t i = 0; i < r->nls; i++)
		if (r->ls[i].kind != LS_CONTROL && r->rtp)
			fds[n++] = r->ls[i].fd;
	for (size_t i = 0; i < r->nss; i++)
		if (!r->ss[i].raw)
			fds[n++] = r->ss[i].fd;
	for (size_t i = 0; i < n; i++) {
		if (gc_get_engine(fds[i]) != GC_ENGINE_KERNEL)
			continue;
		if (gc_set_engine(fds[i], GC_ENGINE_KERNEL) != 0)
			log_event(LL_WARNING, "kernel_engine_attach_failed",
				  "when=before_user error=%s then=%s", gc_errmsg(),
				  "sends use the user path if it cannot attach later");
		(void)gc_set_engine(fds[i], GC_ENGINE_AUTO);
	}
}

/*
 * SIGHUP.  Host and service names are refused here: resolving them could
 * block the loop (and every stream) for as long as DNS takes, so a reloaded
 * file must use addresses and port numbers (names are fine at start).
 */
static void reload(struct relay *r, const struct relay_args *a)
{
	char err[512];
	struct rc_conf c;
	if (!r->ncfile) {
		log_event(LL_WARNING, "reload_skipped", "reason=%s", "no config file (-c) to reload");
		return;
	}
	uint64_t t0 = relay_now_ns();
	bool numeric[16];
	for (size_t i = 0; i < r->ncfile; i++) {
		numeric[i] = r->cfile[i].o.numeric;
		r->cfile[i].o.numeric = true;
	}
	int bad = relay_build_conf(r, a, &r->conf, &c, err, sizeof(err)) ||
		fanout_install(r, &c, err, sizeof(err));
	for (size_t i = 0; i < r->ncfile; i++)
		r->cfile[i].o.numeric = numeric[i];
	if (bad) {
		rc_free(&c);
		r->c.reload_failures++;
		if (strstr(err, "is not an IPv4 or IPv6 address") || strstr(err, "bad port"))
			log_event(LL_ERR, "reload_failed", "error=%s hint=%s config=%s", err,
				  "host and service names are resolved at start only: use addresses in a file you reload",
				  "the configuration in force stays");
		else
			log_event(LL_ERR, "reload_failed", "error=%s config=%s", err,
				  "the configuration in force stays");
		return;
	}
	r->c.reloads++;
	log_event(LL_NOTICE, "reloaded", "sources=%zu receivers=%zu ms=%.1f", r->conf.n,
		  r->conf.receivers, (double)(relay_now_ns() - t0) / 1e6);
}

/* ---- the loop ------------------------------------------------------------------ */

struct inbuf {
	struct mmsghdr mv[RELAY_BATCH];
	struct iovec iov[RELAY_BATCH];
	struct sockaddr_storage from[RELAY_BATCH];
	char cmsg[RELAY_BATCH][CMSG_SPACE(sizeof(uint32_t))];
	uint8_t *data;
	size_t size;
	uint32_t ovfl[8]; /* last SO_RXQ_OVFL value per listener */
	int used;	  /* headers the last recvmmsg() filled in: set up again */
};

/* Receive headers: all once (inbuf_setup), then only those a recvmmsg()
 * wrote into (it changes msg_namelen, msg_controllen, msg_flags and
 * msg_len of the datagrams it returned): at a low rate, one per wake-up
 * instead of RELAY_BATCH. */
static void inbuf_reset(struct inbuf *b, int from, int to)
{
	for (int i = from; i < to; i++) {
		b->iov[i] = (struct iovec){ b->data + (size_t)i * b->size, b->size };
		b->mv[i].msg_hdr = (struct msghdr){ .msg_name = &b->from[i],
						    .msg_namelen = sizeof(b->from[i]),
						    .msg_iov = &b->iov[i],
						    .msg_iovlen = 1,
						    .msg_control = b->cmsg[i],
						    .msg_controllen = sizeof(b->cmsg[i]) };
		b->mv[i].msg_len = 0;
	}
}

static uint64_t last_data_ns;

static void read_data(struct relay *r, struct inbuf *b, size_t li)
{
	struct listener *l = &r->ls[li];
	for (int round = 0; round < 8; round++) {
		inbuf_reset(b, 0, b->used);
		b->used = 0;
		int n = recvmmsg(l->fd, b->mv, RELAY_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		b->used = n;
		/* no clock read per batch where nothing needs the time (replicate
		 * mode): -t learns of the input at the next tick (on_tick) */
		uint64_t now = r->rtp ? relay_now_ns() : 0;
		r->rx_batch = (unsigned)n; /* AUTO's choice per datagram (batch.c) */
		for (int i = 0; i < n; i++) {
			struct msghdr *h = &b->mv[i].msg_hdr;
			size_t len = b->mv[i].msg_len;
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm)) {
				if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
					uint32_t v;
					memcpy(&v, CMSG_DATA(cm), sizeof(v));
					r->c.ingest_drops += (uint32_t)(v - b->ovfl[li]);
					b->ovfl[li] = v;
				}
			}
			r->c.in++;
			r->c.in_octets += len;
			const struct sockaddr_storage *from = &b->from[i];
			if (r->debug) {
				char a[80];
				log_event(LL_DEBUG, "received", "bytes=%zu src=%s", len,
					  addr_str(from, a, sizeof(a)));
			}
			if ((h->msg_flags & MSG_TRUNC) || len > r->max_size) {
				r->c.oversize++;
				continue;
			}
			if (!r->rtp)
				fanout_datagram(r, b->iov[i].iov_base, len, from);
			else if (l->kind == LS_RTCP)
				rtcp_forward(r, b->iov[i].iov_base, len, from, now);
			else
				rtp_forward(r, b->iov[i].iov_base, len, from, now);
		}
		batch_flush(r); /* before the buffers are read into again */
		if (n < RELAY_BATCH)
			return;
	}
}

static void read_control(struct relay *r, int fd)
{
	static char buf[CTL_BATCH][600];
	static char out[1400];
	struct mmsghdr mv[CTL_BATCH];
	struct iovec iov[CTL_BATCH];
	struct sockaddr_storage from[CTL_BATCH];
	for (int round = 0; round < 4; round++) { /* bounded work per wakeup: data goes first */
		for (int i = 0; i < CTL_BATCH; i++) {
			iov[i] = (struct iovec){ buf[i], sizeof(buf[i]) };
			mv[i].msg_hdr = (struct msghdr){ .msg_name = &from[i],
							 .msg_namelen = sizeof(from[i]),
							 .msg_iov = &iov[i],
							 .msg_iovlen = 1 };
		}
		int n = recvmmsg(fd, mv, CTL_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			size_t len = mv[i].msg_len;
			if (mv[i].msg_hdr.msg_flags & MSG_TRUNC)
				len = sizeof(buf[i]); /* > 512: counted as unknown */
			size_t rl = control_handle(r, buf[i], len, &from[i], out, sizeof(out));
			if (rl)
				(void)sendto(fd, out, rl, MSG_DONTWAIT | MSG_NOSIGNAL,
					     (struct sockaddr *)&from[i], addr_len(&from[i]));
		}
		if (n < CTL_BATCH)
			return;
	}
}

static double timer_pair_ns(void)
{
	uint64_t sum = 0;
	for (int i = 0; i < 1000; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		sum += (uint64_t)((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
	}
	return (double)sum / 1000;
}

static void daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0)
		cli_fail("-f: fork: %s", strerror(errno));
	if (pid > 0)
		_exit(0);
	setsid();
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

/* ---- setup ------------------------------------------------------------------ */

/* What the loop owns besides struct relay: its descriptors and receive buffers. */
struct loop {
	struct relay_args a;	/* kept for reload() */
	int sfd, tfd, stats_fd; /* signalfd, the tick timer, --stats-socket */
	int metrics_fd;		/* --metrics: the listening socket, then libmicrohttpd's epoll */
	int utfd;		/* --upstream: the UP_TICK_MS timer, -1 without */
	struct inbuf in;
	uint64_t last_status, last_expire, last_addrs;
	uint64_t last_in, last_tick; /* r->c.in at the last tick, and when */
	/* systemd's watchdog: WATCHDOG=1 every wd_ns (0: off) */
	uint64_t wd_ns, last_wd;
	int rc; /* exit status */
	bool stop;
};

/* The data, RTCP and control ports, bound; broadcast mode's subscriber table,
 * cookie key and rate budgets.  Exits on failure. */
static void open_ports(struct relay *r)
{
	uint16_t port = relay_port_number("-p", r->listen_port);
	if (r->rtp && ((!r->rtcp_port_opt && port > 65534) || (!r->control_port && port > 65533)))
		cli_usage_error("-p %u: the %s port (-p + %d) would be past 65535; give a lower port or %s",
				port, !r->rtcp_port_opt && port > 65534 ? "RTCP" : "control",
				!r->rtcp_port_opt && port > 65534 ? 1 : 2,
				!r->rtcp_port_opt && port > 65534 ? "--rtcp-port" : "--control");
	uint16_t rp = 0, cp = 0;
	if (r->rtp) {
		rp = r->rtcp_port_opt ? relay_port_number("--rtcp-port", r->rtcp_port_opt)
				      : (uint16_t)(port + 1);
		cp = r->control_port ? relay_port_number("--control", r->control_port)
				     : (uint16_t)(port + 2);
		if (rp == port || cp == port || cp == rp)
			cli_usage_error("-p %u, --rtcp-port %u and --control %u must differ", port,
					rp, cp);
	}
	r->data_twin[0] = r->data_twin[1] = -1;
	open_listeners(r, LS_DATA, port, "-p");
	char err[256];
	if (mjoin_apply(r, err, sizeof(err)))
		cli_fail("%s", err);
	if (!r->rtp)
		return;
	open_listeners(r, LS_RTCP, rp, "--rtcp-port");
	open_listeners(r, LS_CONTROL, cp, "--control");
	if (subs_init(&r->subs, r->max_subs))
		cli_fail("cannot make the table of %u subscribers: %s", r->max_subs, strerror(errno));
	r->own_port[0] = port;
	r->own_port[1] = rp;
	r->own_port[2] = cp;
	randombytes_buf(r->cookie_key, sizeof(r->cookie_key));
	do /* the identity in relay= and path= (loop rule, control.c) */
		randombytes_buf(&r->relay_id, sizeof(r->relay_id));
	while (!r->relay_id);
	r->up_cur = -1;
	if (upstream_open(r))
		cli_fail("--upstream: socket: %s", strerror(errno));
	r->rate = calloc(CTL_RATE_SLOTS, sizeof(*r->rate));
	if (!r->rate)
		cli_fail("out of memory");
	if (control_local_addrs(r))
		cli_fail("cannot list the host's addresses (getifaddrs): %s", strerror(errno));
}

/* Broadcast mode: the receivers given at start become static subscribers. */
static void add_static_subscribers(struct relay *r, struct rc_conf *conf)
{
	uint64_t now = relay_now_ns();
	for (size_t i = 0; i < conf->n; i++) {
		for (size_t k = 0; k < conf->src[i].n; k++) {
			char why[96], a[80];
			if (control_check_subscriber(r, &conf->src[i].rcv[k].addr, why, sizeof(why)))
				cli_usage_error("argument %zu: subscriber %s: %s", k + 1,
						addr_str(&conf->src[i].rcv[k].addr, a, sizeof(a)), why);
			struct sub *s = subs_find(&r->subs, &conf->src[i].rcv[k].addr);
			if (!s && !(s = subs_add(&r->subs, &conf->src[i].rcv[k].addr, now)))
				cli_fail("more static subscribers than --max-subscribers %u", r->max_subs);
			s->is_static = true;
		}
	}
}

/* Everything that may need privileges, then drop them: sockets (raw ones
 * before the fork, so that a missing privilege shows), the stats socket,
 * -f, the PID file, the receivers or subscribers, the engines. */
static void relay_setup(struct relay *r, struct loop *lp, struct rc_conf *conf)
{
	char err[512];
	open_ports(r);
	for (size_t i = 0; i < conf->n; i++)
		for (size_t k = 0; k < conf->src[i].n; k++)
			if (conf->src[i].rcv[k].flags & RCV_SPOOF &&
			    fanout_sendsock(r, conf->src[i].rcv[k].addr.ss_family,
					    conf->src[i].rcv[k].ttl, true, err, sizeof(err)) < 0)
				cli_fail("%s", err);
	lp->stats_fd = -1;
	if (r->stats_socket && (lp->stats_fd = stats_listen(r, r->stats_socket)) < 0)
		cli_fail("--stats-socket: cannot listen on '%s': %s", r->stats_socket, strerror(errno));
	lp->metrics_fd = -1;
	if (r->metrics && (lp->metrics_fd = prom_listen(&r->metrics_addr)) < 0)
		cli_fail("--metrics: cannot listen on '%s': %s", r->metrics, strerror(errno));

	if (r->daemon)
		daemonize();
	if (r->pidfile)
		relay_write_pidfile(r->pidfile);
	cli_pin("--cpu", r->cpu);
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

	if (r->rtp) {
		prepare_rtp_senders(r);
		add_static_subscribers(r, conf);
		rc_free(conf);
	} else if (fanout_install(r, conf, err, sizeof(err))) { /* takes conf over into r->conf */
		cli_fail("%s", err);
	}
	if (r->user)
		attach_engines(r);
	relay_drop_privileges(r->user, needs_raw(r));
}

/* Signals as a signalfd, the tick timer, the epoll set, the receive buffers. */
static void loop_setup(struct relay *r, struct loop *lp)
{
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
		cli_fail("sigprocmask: %s", strerror(errno));
	lp->sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	lp->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	relay_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (lp->sfd < 0 || lp->tfd < 0 || relay_epfd < 0)
		cli_fail("signalfd/timerfd/epoll: %s", strerror(errno));
	uint64_t tick_ns = (r->timeout_ms || r->duration_s > 0 ? TICK_MS : IDLE_TICK_MS) * 1000000ull;
	if (lp->wd_ns && tick_ns > lp->wd_ns / 2)
		tick_ns = lp->wd_ns / 2 ? lp->wd_ns / 2 : 1;
	struct timespec tick = { (time_t)(tick_ns / 1000000000u), (long)(tick_ns % 1000000000u) };
	struct itimerspec its = { tick, tick };
	timerfd_settime(lp->tfd, 0, &its, NULL);
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.u64 = TAG(TAG_SIG, 0);
	epoll_ctl(relay_epfd, EPOLL_CTL_ADD, lp->sfd, &ev);
	ev.data.u64 = TAG(TAG_TIMER, 0);
	epoll_ctl(relay_epfd, EPOLL_CTL_ADD, lp->tfd, &ev);
	if (lp->stats_fd >= 0) {
		ev.data.u64 = TAG(TAG_STATS, 0);
		epoll_ctl(relay_epfd, EPOLL_CTL_ADD, lp->stats_fd, &ev);
	}
	if (lp->metrics_fd >= 0) { /* after the fork of -f: no thread, one epoll of its own */
		int lfd = lp->metrics_fd;
		if ((lp->metrics_fd = metrics_start(r, lfd)) < 0)
			cli_fail("--metrics: libmicrohttpd could not start on '%s'", r->metrics);
		ev.data.u64 = TAG(TAG_METRICS, 0);
		if (epoll_ctl(relay_epfd, EPOLL_CTL_ADD, lp->metrics_fd, &ev) != 0)
			cli_fail("epoll_ctl: %s", strerror(errno));
	}
	for (size_t i = 0; i < r->nls; i++) {
		ev.data.u64 = TAG(TAG_LS, i);
		if (epoll_ctl(relay_epfd, EPOLL_CTL_ADD, r->ls[i].fd, &ev) != 0)
			cli_fail("epoll_ctl: %s", strerror(errno));
	}
	lp->utfd = -1;
	if (r->nup) { /* failover within a second needs a finer tick than TICK_MS */
		lp->utfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		struct itimerspec uts = { { 0, UP_TICK_MS * 1000000L }, { 0, UP_TICK_MS * 1000000L } };
		ev.data.u64 = TAG(TAG_UPTIMER, 0);
		if (lp->utfd < 0 || timerfd_settime(lp->utfd, 0, &uts, NULL) != 0 ||
		    epoll_ctl(relay_epfd, EPOLL_CTL_ADD, lp->utfd, &ev) != 0)
			cli_fail("--upstream: timer: %s", strerror(errno));
	}
	for (size_t i = 0; i < r->nup; i++) {
		ev.data.u64 = TAG(TAG_UP, i);
		if (epoll_ctl(relay_epfd, EPOLL_CTL_ADD, r->up[i].fd, &ev) != 0)
			cli_fail("epoll_ctl: %s", strerror(errno));
	}

	if (batch_init(r))
		cli_fail("out of memory");
	lp->in.size = r->max_size + 1 < 65536 ? r->max_size + 1 : 65536;
	lp->in.data = malloc((size_t)RELAY_BATCH * lp->in.size);
	if (!lp->in.data)
		cli_fail("out of memory");
	inbuf_reset(&lp->in, 0, RELAY_BATCH);
	if (r->time_sends) /* what one pair of send_ns's clock reads costs */
		r->timer_ns = (uint64_t)timer_pair_ns();
	r->start_ns = last_data_ns = relay_now_ns();
	lp->last_status = lp->last_expire = lp->last_addrs = lp->last_tick = r->start_ns;
}

/* "level=notice event=started mode=replicate listen=0.0.0.0:2000 receivers=3 engine=auto" */
static void print_banner(const struct relay *r)
{
	char lst[256] = "";
	size_t off = 0;
	for (size_t i = 0; i < r->nls && off < sizeof(lst); i++) {
		char s[80];
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(r->ls[i].fd, (struct sockaddr *)&ss, &sl);
		off += (size_t)snprintf(lst + off, sizeof(lst) - off, "%s%s%s", i ? " " : "",
					r->ls[i].kind == LS_DATA	   ? ""
						: r->ls[i].kind == LS_RTCP ? "rtcp="
									   : "control=",
					addr_str(&ss, s, sizeof(s)));
	}
	log_event(LL_NOTICE, "started", "mode=%s listen=%s %s=%zu engine=%s",
		  r->rtp ? "broadcast" : "replicate", lst, r->rtp ? "static_subscribers" : "receivers",
		  r->rtp ? (size_t)r->subs.nactive : r->conf.receivers, gc_engine_name(r->engine));
	if (r->rtp)
		log_event(LL_NOTICE, "identity", "relay_id=%016llx upstreams=%zu",
			  (unsigned long long)r->relay_id, r->nup);
}

/* ---- the loop's events ----------------------------------------------------------- */

static void on_signals(struct relay *r, struct loop *lp)
{
	struct signalfd_siginfo si;
	while (read(lp->sfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) /* READY=1 below, once it is done */
			(void)sd_notify_reloading();
		if (si.ssi_signo == SIGHUP && !r->rtp)
			reload(r, &lp->a);
		else if (si.ssi_signo == SIGHUP && control_local_addrs(r) == 0)
			log_event(LL_NOTICE, "local_addresses", "count=%zu refused_as=subscribers",
				  r->nlocal);
		else if (si.ssi_signo == SIGHUP)
			log_event(LL_ERR, "local_addresses_failed", "error=%s", strerror(errno));
		else if (si.ssi_signo == SIGUSR1)
			stats_status_line(r);
		else if (!lp->stop) {
			log_event(LL_NOTICE, "stopping", "signal=%s", sigabbrev_np((int)si.ssi_signo));
			lp->stop = true;
		}
		if (si.ssi_signo == SIGHUP)
			(void)sd_notify_state("READY=1");
	}
}

/* Every tick: the status line, local addresses, subscriber expiry, -d and -t. */
static void on_tick(struct relay *r, struct loop *lp)
{
	uint64_t ticks;
	while (read(lp->tfd, &ticks, sizeof(ticks)) == sizeof(ticks))
		;
	uint64_t now = relay_now_ns();
	/* the input rate since the last tick: AUTO's choice in batch.c */
	if (now > lp->last_tick)
		r->rx_busy = (double)(r->c.in - lp->last_in) * 1e9 / (double)(now - lp->last_tick) >=
			RELAY_BUSY_RATE;
	lp->last_tick = now;
	if (r->c.in != lp->last_in) { /* data since the last tick: -t starts over */
		lp->last_in = r->c.in;
		last_data_ns = now;
	}
	if (lp->wd_ns && now - lp->last_wd >= lp->wd_ns) { /* the loop turns: we are alive */
		(void)sd_notify_state("WATCHDOG=1");
		lp->last_wd = now;
	}
	if (r->status_s && now - lp->last_status >= (uint64_t)r->status_s * 1000000000u) {
		stats_status_line(r);
		lp->last_status = now;
	}
	if (r->rtp && now - lp->last_addrs >= LOCAL_ADDRS_NS) {
		/* addresses come and go (DHCP, SLAAC): a new one must not stay a
		 * possible subscriber for long */
		(void)control_local_addrs(r);
		lp->last_addrs = now;
	}
	if (r->rtp && now - lp->last_expire >= 1000000000u) {
		uint32_t gone = subs_expire(&r->subs, now, (uint64_t)r->expire_s * 1000000000u);
		if (gone)
			log_event(LL_INFO, "subscribers_expired", "count=%u silent_s=%u", gone,
				  r->expire_s);
		r->c.expired += gone;
		lp->last_expire = now;
	}
	/* what AUTO sends with now (it may change between sends): batch.c's choice */
	for (size_t i = 0; i < r->nss; i++)
		if (!r->ss[i].raw && r->ss[i].twin >= 0)
			r->ss[i].engine = gc_get_engine(r->ss[i].fd);
	for (int f = 0; f < 2; f++)
		if (r->data_twin[f] >= 0)
			r->data_engine[f] = gc_get_engine(r->data_fd[f]);
	log_tick(); /* the summaries of rate-limited warnings */
	prom_run(); /* idle connections time out (libmicrohttpd's timeouts are seconds) */
	if (r->duration_s > 0 && (double)(now - r->start_ns) / 1e9 >= r->duration_s)
		lp->stop = true;
	if (r->timeout_ms && now - last_data_ns > (uint64_t)r->timeout_ms * 1000000u) {
		log_event(LL_ERR, "timeout", "ms=%u msg=%s", r->timeout_ms, "no data received (-t)");
		lp->rc = 5;
		lp->stop = true;
	}
}

static void on_up_tick(struct relay *r, struct loop *lp)
{
	uint64_t ticks;
	while (read(lp->utfd, &ticks, sizeof(ticks)) == sizeof(ticks))
		;
	upstream_tick(r, relay_now_ns());
}

/* Until a signal, -d or -t stops it. */
static void relay_loop(struct relay *r, struct loop *lp)
{
	struct epoll_event evs[32];
	while (!lp->stop) {
		int n = epoll_wait(relay_epfd, evs, 32, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			cli_fail("epoll_wait: %s", strerror(errno));
		}
		for (int k = 0; k < n; k++) {
			uint64_t tag = evs[k].data.u64;
			uint32_t kind = (uint32_t)(tag >> 32), idx = (uint32_t)tag;
			if (kind == 0 && (idx & 0xff000000u) == TAG_STATS_CONN)
				stats_conn_event(r, (int)(idx & 0xffffff), evs[k].events);
			else if (kind == TAG_LS && r->ls[idx].kind == LS_CONTROL)
				read_control(r, r->ls[idx].fd);
			else if (kind == TAG_LS)
				read_data(r, &lp->in, idx);
			else if (kind == TAG_STATS)
				stats_accept(r, lp->stats_fd);
			else if (kind == TAG_METRICS)
				prom_run();
			else if (kind == TAG_SIG)
				on_signals(r, lp);
			else if (kind == TAG_TIMER)
				on_tick(r, lp);
			else if (kind == TAG_UP)
				upstream_read(r, idx);
			else if (kind == TAG_UPTIMER)
				on_up_tick(r, lp);
		}
	}
}

/* ---- teardown --------------------------------------------------------------------- */

/* The last status line and JSON, then every socket, file and buffer. */
static void relay_teardown(struct relay *r, struct loop *lp)
{
	if (r->status_s)
		stats_status_line(r);
	log_flush();
	if (r->json) {
		stats_json(r, stdout, true);
		fflush(stdout);
	}
	stats_close_all(r);
	prom_stop();
	upstream_close(r); /* LEAVE the upstream: it stops sending now */
	if (lp->utfd >= 0)
		close(lp->utfd);
	if (lp->stats_fd >= 0) {
		close(lp->stats_fd);
		unlink(r->stats_socket);
	}
	if (r->pidfile)
		unlink(r->pidfile);
	for (size_t i = 0; i < r->nls; i++) {
		gc_release(r->ls[i].fd);
		close(r->ls[i].fd);
	}
	for (size_t i = 0; i < r->nss; i++) {
		if (!r->ss[i].raw) {
			batch_twin_close(&r->ss[i].twin);
			gc_release(r->ss[i].fd);
			close(r->ss[i].fd);
		}
		free(r->ss[i].rec);
		free(r->ss[i].who);
	}
	for (int f = 0; f < 2; f++) {
		batch_twin_close(&r->data_twin[f]);
		if (r->raw_fd[f] >= 0)
			close(r->raw_fd[f]);
		free(r->brec[f]);
		free(r->bwho[f]);
	}
	rc_free(&r->conf);
	subs_free(&r->subs);
	free(r->local);
	free(r->rate);
	free(r->gerrno);
	free(r->rrec);
	free(r->rwho);
	free(r->rtcp_buf);
	free(lp->in.data);
	batch_free(r);
	close(lp->sfd);
	close(lp->tfd);
	close(relay_epfd);
}

int cmd_relay(int argc, char **argv)
{
	/* static: struct relay and the receive buffers are large */
	static struct relay R;
	static struct loop L;
	struct relay *r = &R;
	struct loop *lp = &L;
	struct rc_conf conf;

	log_init();
	relay_configure(r, &lp->a, argc, argv, &conf);
	if (r->check) { /* nothing bound, nothing sent */
		printf("groupcast relay: configuration ok: %s mode, %zu sources, %zu receivers\n",
		       r->rtp ? "broadcast" : "replicate", conf.n, conf.receivers);
		rc_free(&conf);
		return 0;
	}
	relay_setup(r, lp, &conf);
	lp->wd_ns = sd_watchdog_usec() * 1000u / 2; /* WATCHDOG=1 this often (the tick follows it) */
	loop_setup(r, lp);
	print_banner(r);
	/* bound, privileges dropped, the loop next: systemd may send traffic */
	lp->last_wd = relay_now_ns();
	(void)sd_notify_state("READY=1");
	if (r->nup)
		upstream_tick(r, relay_now_ns()); /* the first JOIN now, not a tick later */
	relay_loop(r, lp);
	(void)sd_notify_state("STOPPING=1");
	relay_teardown(r, lp);
	return lp->rc;
}
