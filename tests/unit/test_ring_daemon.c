/* SPDX-License-Identifier: MIT */
/*
 * Daemon mode: one process runs the engine on a Unix socket; two client
 * processes attach their own rings (zones and sockets passed as memfds and
 * descriptors) and send through it, byte-exact, at the same time.  A client
 * cannot touch the other's rings; a client that dies is cleaned up; a second
 * engine cannot take a live engine's socket, but replaces a stale one.
 */
#include "ring_util.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>

enum { N = 128, PKTS = 3000, CHUNK = 100 };

static char path[108];

/* A child dies with the test: a failing check must not leave daemons behind. */
static pid_t fork_child(void)
{
	pid_t parent = getpid(), pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(3);
	}
	return pid;
}

static pid_t start_daemon(void)
{
	int p[2];
	char c;

	CHECK_OK(pipe(p));
	pid_t pid = fork_child();
	if (pid == 0) {
		sigset_t set;
		int sig;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, NULL);
		struct gc_ring_engine_opts prm = GC_RING_ENGINE_OPTS_INIT(.listen = path, .quiet = 1);
		struct gc_ring_engine *e = gc_ring_engine_create(&prm);
		if (!e) {
			fprintf(stderr, "daemon: %s\n", gc_errmsg());
			_exit(2);
		}
		if (write(p[1], "r", 1) != 1)
			_exit(2);
		sigwait(&set, &sig);
		gc_ring_engine_destroy(e);
		_exit(0);
	}
	close(p[1]);
	CHECK_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

/* A client: PKTS packets of 1 to 1400 bytes through the daemon, checked. */
static void client(int id, int ready_fd, int go_fd)
{
	struct rx *rx = rx_open(id ? AF_INET6 : AF_INET, 1);
	int sd = udp_connected(&rx[0]);
	int big = 8 << 20;
	struct gc_zone *z = gc_zone_create(N, 2048);
	struct gc_ring *r = gc_ring_create(N, z);
	struct gc_ring_engine *e = gc_ring_engine_connect(path);
	static unsigned char want[1400];
	char c = 'x';

	CHECK(z && r && e);
	setsockopt(rx[0].fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	CHECK_OK(gc_ring_attach(r, e, sd));
	close(sd);
	/* both attached before either sends */
	CHECK_EQ(write(ready_fd, &c, 1), 1);
	CHECK_EQ(read(go_fd, &c, 1), 1);

	/* the other client's ring is not ours to detach */
	struct gc_req q = { .op = GC_OP_DETACH, .version = GC_PROTO_VERSION };
	struct gc_rep rep;
	int rfd;
	for (uint32_t other = 1; other <= 3; other++) {
		if (other == r->ring_id)
			continue;
		q.ring_id = other;
		CHECK_ERR(gc_err(gc_client_call(e, "t", &q, NULL, 0, &rep, &rfd)), ENOENT);
	}
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK(st.clients >= 3); /* the daemon's own, and both of us */

	for (unsigned base = 0; base < PKTS; base += CHUNK) {
		for (unsigned i = base; i < base + CHUNK; i++) {
			unsigned len = 1 + ((i / 8) * 37 + (unsigned)id * 11) % 1400; /* runs of 8: GSO */
			void *b = gc_zone_buf(z, i % N);
			fill(b, len, i + 1000u * (unsigned)id);
			put_pkt(r, gc_zone_offset(z, b), len, i);
		}
		CHECK(gc_ring_submit(r) >= 0);
		CHECK_OK(gc_ring_wait(r, N - 1, 5000));
		for (unsigned i = base; i < base + CHUNK; i++) {
			unsigned len = 1 + ((i / 8) * 37 + (unsigned)id * 11) % 1400; /* runs of 8: GSO */
			fill(want, len, i + 1000u * (unsigned)id);
			RX_EXPECT(&rx[0], want, len);
		}
	}
	RX_NONE(&rx[0]);
	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &rs));
	CHECK_EQ(rs.sent, PKTS);
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK_OK(gc_zone_destroy(z));
	rx_close(rx, 1);
	exit(check_done(id ? "client 1" : "client 0"));
}

static void expect_exit0(pid_t pid, const char *what)
{
	int status;

	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		check_fail(__FILE__, __LINE__, "%s: status 0x%x", what, status);
}

static struct gc_ring_engine_stats daemon_stats(void)
{
	struct gc_ring_engine *e = gc_ring_engine_connect(path);
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();

	CHECK(e != NULL);
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_OK(gc_ring_engine_destroy(e));
	return st;
}

int main(void)
{
	snprintf(path, sizeof(path), "/tmp/gc-ring-test-%d.sock", (int)getpid());
	pid_t d = start_daemon();

	/* two clients, attached together, sending together */
	int ready[2], go[2];
	CHECK_OK(pipe(ready));
	CHECK_OK(pipe(go));
	pid_t c[2];
	for (int i = 0; i < 2; i++) {
		c[i] = fork_child();
		if (c[i] == 0) {
			close(ready[0]);
			close(go[1]);
			client(i, ready[1], go[0]);
		}
	}
	close(ready[1]);
	close(go[0]);
	char b[2];
	CHECK_EQ(read(ready[0], b, 1), 1);
	CHECK_EQ(read(ready[0], b + 1, 1), 1);
	CHECK_EQ(write(go[1], "gg", 2), 2);
	expect_exit0(c[0], "client 0");
	expect_exit0(c[1], "client 1");
	close(ready[0]);
	close(go[1]);

	struct gc_ring_engine_stats st = daemon_stats();
	CHECK_EQ(st.rings, 0);
	CHECK_EQ(st.packets, 2 * PKTS);
	CHECK(st.gso > 0);

	/* a client killed with a ring attached is cleaned up */
	pid_t k = fork_child();
	if (k == 0) {
		struct rx *rx = rx_open(AF_INET, 1);
		struct gc_zone *z = gc_zone_create(1, 4096);
		struct gc_ring *r = gc_ring_create(8, z);
		struct gc_ring_engine *e = gc_ring_engine_connect(path);
		if (!z || !r || !e || gc_ring_attach(r, e, udp_connected(&rx[0])) < 0)
			_exit(2);
		for (;;)
			pause();
	}
	for (int i = 0; i < 2000 && daemon_stats().rings != 1; i++)
		usleep(1000);
	CHECK_EQ(daemon_stats().rings, 1);
	kill(k, SIGKILL);
	waitpid(k, NULL, 0);
	for (int i = 0; i < 2000 && daemon_stats().rings != 0; i++)
		usleep(1000);
	CHECK_EQ(daemon_stats().rings, 0);

	/* Out of descriptors: a daemon that may open 40 files gets 60 idle
	 * clients.  It must not spin on its listening socket, and must serve
	 * again once clients leave. */
	{
		char lpath[108];
		snprintf(lpath, sizeof(lpath), "/tmp/gc-ring-test-%d-lim.sock", (int)getpid());
		int p2[2];
		CHECK_OK(pipe(p2));
		pid_t ld = fork_child();
		if (ld == 0) {
			struct rlimit rl = { 40, 40 };
			sigset_t set;
			int sig;
			sigemptyset(&set);
			sigaddset(&set, SIGTERM);
			sigprocmask(SIG_BLOCK, &set, NULL);
			/* descriptors the test harness left open would count */
			for (int fd = 3; fd < 1024; fd++)
				if (fd != p2[1])
					close(fd);
			setrlimit(RLIMIT_NOFILE, &rl);
			struct gc_ring_engine_opts lp =
				GC_RING_ENGINE_OPTS_INIT(.listen = lpath, .quiet = 1);
			struct gc_ring_engine *le = gc_ring_engine_create(&lp);
			if (!le || write(p2[1], "r", 1) != 1)
				_exit(2);
			close(p2[1]);
			sigwait(&set, &sig);
			gc_ring_engine_destroy(le);
			_exit(0);
		}
		close(p2[1]);
		CHECK_EQ(read(p2[0], b, 1), 1);
		close(p2[0]);
		struct sockaddr_un la = { .sun_family = AF_UNIX };
		strcpy(la.sun_path, lpath);
		int idle[60];
		for (int i = 0; i < 60; i++) {
			idle[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
			CHECK_OK(connect(idle[i], (struct sockaddr *)&la, sizeof(la)));
		}
		usleep(100 * 1000);
		char statpath[64];
		unsigned long long t0 = 0, t1 = 0, x;
		snprintf(statpath, sizeof(statpath), "/proc/%d/stat", (int)ld);
		FILE *f = fopen(statpath, "r");
		CHECK(f &&
		      fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			     &t0, &x) == 2);
		t0 += x;
		fclose(f);
		usleep(300 * 1000);
		f = fopen(statpath, "r");
		CHECK(f &&
		      fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			     &t1, &x) == 2);
		t1 += x;
		fclose(f);
		if ((t1 - t0) * 1000 / (unsigned long long)sysconf(_SC_CLK_TCK) > 100)
			check_fail(__FILE__, __LINE__, "the daemon spun: %llu ticks in 300 ms", t1 - t0);
		for (int i = 0; i < 60; i++)
			close(idle[i]);
		usleep(50 * 1000);
		struct gc_ring_engine *c2 = NULL;
		for (int i = 0; i < 200 && !c2; i++) {
			c2 = gc_ring_engine_connect(lpath);
			struct gc_ring_engine_stats s2 = GC_RING_ENGINE_STATS_INIT();
			if (c2 && gc_ring_engine_stats(c2, &s2) < 0) {
				gc_ring_engine_destroy(c2);
				c2 = NULL;
				usleep(10 * 1000);
			}
		}
		CHECK(c2 != NULL); /* serving again */
		CHECK_OK(gc_ring_engine_destroy(c2));
		kill(ld, SIGTERM);
		expect_exit0(ld, "daemon with few descriptors");
	}

	/* the socket is in use: a second engine may not take it */
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = path);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, EADDRINUSE);

	/* a daemon that stops tells its clients: gc_ring_wait() fails with
	 * EPIPE (GC_RING_DETACHED) instead of waiting for the timeout */
	struct rx *rx = rx_open(AF_INET, 1);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = z ? gc_ring_create(8, z) : NULL;
	struct gc_ring_engine *ce = gc_ring_engine_connect(path);
	CHECK(z && r && ce);
	int csd = udp_connected(&rx[0]);
	CHECK_OK(gc_ring_attach(r, ce, csd));
	close(csd); /* the engine keeps its own reference */
	for (int i = 0; i < 3; i++)
		CHECK(gc_ring_get_pkt(r) != NULL); /* claimed, never published */
	kill(d, SIGTERM);
	expect_exit0(d, "daemon");
	CHECK(access(path, F_OK) != 0); /* removed at stop */
	CHECK_EQ(gc_ring_wait(r, 7, 5000), -1);
	CHECK_EQ(errno, EPIPE);
	struct gc_ring_status rs = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &rs));
	CHECK_EQ(rs.error, GC_RING_DETACHED);
	gc_ring_detach(r); /* the daemon is gone: forgets the ring anyway */
	gc_ring_destroy(r);
	CHECK_OK(gc_zone_destroy(z));
	CHECK_OK(gc_ring_engine_destroy(ce));
	rx_close(rx, 1);

	/* an engine removes only its own socket file, not one that replaced it */
	{
		struct gc_ring_engine_opts pa = GC_RING_ENGINE_OPTS_INIT(.listen = path);
		struct gc_ring_engine *a = gc_ring_engine_create(&pa);
		CHECK(a != NULL);
		CHECK_OK(unlink(path));
		struct gc_ring_engine *bb = gc_ring_engine_create(&pa);
		CHECK(bb != NULL);
		CHECK_OK(gc_ring_engine_destroy(a));
		CHECK(access(path, F_OK) == 0);
		CHECK_OK(gc_ring_engine_destroy(bb));
		CHECK(access(path, F_OK) != 0);
	}

	/* a stale socket file (its engine died) is replaced */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	int stale = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	CHECK_OK(bind(stale, (struct sockaddr *)&sa, sizeof(sa)));
	close(stale);
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	CHECK(e != NULL);
	CHECK_OK(gc_ring_engine_destroy(e));
	return check_done("ring_daemon");
}
