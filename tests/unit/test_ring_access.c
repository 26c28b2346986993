/* SPDX-License-Identifier: MIT */
/*
 * Who may attach to a ring engine daemon, and whom a client trusts.
 *
 * The daemon (an engine thread of this process, run as root) listens with
 * various modes and allow rules; a forked child that dropped to uid/gid 65534
 * (nobody) tries to attach a ring and send one datagram:
 *   - default (socket 0600, same uid or root): connect() itself is refused;
 *   - mode 0666 but no allow rule: connected, then refused with EACCES and a
 *     reason (SO_PEERCRED), and the daemon counts it;
 *   - mode 0666 and allow_uids {65534}: served, the datagram arrives;
 *   - mode 0660, group 65534, allow_gids {65534}: served.
 * And the other way round: a daemon run by uid 65534 is not trusted by a
 * root client (EPERM), unless the client names that uid.
 * A listening socket bound by someone else (GC_RING_ENGINE_LISTEN_FD) is
 * served, closed at the end and its file left alone; bad ones are refused.
 * Needs root (exit 77 otherwise).
 */
#include "ring_util.h"

#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/un.h>
#include <sys/wait.h>

#define NOBODY 65534

static char dir[64], path[108];

static pid_t fork_child(void)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	return pid;
}

static void become_nobody(void)
{
	gid_t g = NOBODY;

	if (setgroups(1, &g) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) < 0) {
		perror("dropping to uid 65534");
		_exit(3);
	}
}

/*
 * In a child running as nobody: connect, attach a ring, send one datagram to
 * rx.  Exit status: 0 sent, 10 + errno class of the failure (see below).
 */
enum { SENT = 0, CONNECT_EACCES = 10, HELLO_EACCES = 11, OTHER = 12 };
static int try_as_nobody(const struct rx *rx)
{
	pid_t pid = fork_child();

	if (pid == 0) {
		become_nobody();
		struct gc_ring_engine *e = gc_ring_engine_connect(path);
		if (!e) {
			int err = errno;
			printf("  nobody: %s\n", gc_errmsg());
			fflush(stdout);
			if (err == EACCES && strstr(gc_errmsg(), "no permission to connect"))
				_exit(CONNECT_EACCES);
			if (err == EACCES && strstr(gc_errmsg(), "uid 65534") &&
			    strstr(gc_errmsg(), "not allowed"))
				_exit(HELLO_EACCES);
			_exit(OTHER);
		}
		struct gc_zone *z = gc_zone_create(1, 4096);
		struct gc_ring *r = z ? gc_ring_create(8, z) : NULL;
		int sd = socket(AF_INET, SOCK_DGRAM, 0);
		if (!r || connect(sd, (const struct sockaddr *)&rx->addr, sizeof(struct sockaddr_in)))
			_exit(OTHER);
		if (gc_ring_attach(r, e, sd) < 0) {
			printf("  nobody: attach: %s\n", gc_errmsg());
			_exit(OTHER);
		}
		memcpy(gc_zone_buf(z, 0), "nobody", 6);
		struct gc_pkt *p = gc_ring_get_pkt(r);
		p->off = 0;
		p->len = 6;
		if (gc_ring_submit(r) < 0 || gc_ring_wait(r, 7, 5000) < 0)
			_exit(OTHER);
		gc_ring_destroy(r);
		gc_ring_engine_destroy(e);
		_exit(SENT);
	}
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static struct gc_ring_engine *daemon_with(struct gc_ring_engine_opts p)
{
	p.listen = path;
	p.quiet = 1;
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	CHECK(e != NULL);
	return e;
}

static uint64_t refused(struct gc_ring_engine *e)
{
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();

	CHECK_OK(gc_ring_engine_stats(e, &st));
	return st.refused;
}

static void modes(void)
{
	struct stat st;
	struct gc_ring_engine *e = daemon_with((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT());

	CHECK_OK(lstat(path, &st));
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_OK(gc_ring_engine_destroy(e));

	e = daemon_with((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_LISTEN_GID,
									     .listen_gid = NOBODY,
									     .listen_mode = 0660));
	CHECK_OK(lstat(path, &st));
	CHECK_EQ(st.st_mode & 07777, 0660);
	CHECK_EQ(st.st_gid, NOBODY);
	CHECK_OK(gc_ring_engine_destroy(e));
	/* nothing left behind: no private directory, no socket */
	CHECK(access(path, F_OK) != 0);

	struct gc_ring_engine_opts bad = GC_RING_ENGINE_OPTS_INIT(.listen = path, .listen_mode = 01777);
	CHECK(gc_ring_engine_create(&bad) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(strstr(gc_errmsg(), "listen_mode") != NULL);
	bad = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.listen = path, .n_allow_uids = 1);
	CHECK(gc_ring_engine_create(&bad) == NULL);
	CHECK_EQ(errno, EFAULT);
}

static void who_may_attach(void)
{
	struct rx *rx = rx_open(AF_INET, 1);
	char buf[16];
	struct sockaddr_storage from;

	/* default: only root and the daemon's uid (root) may even connect */
	struct gc_ring_engine *e = daemon_with((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT());
	CHECK_EQ(try_as_nobody(rx), CONNECT_EACCES);
	CHECK_OK(gc_ring_engine_destroy(e));

	/* anyone may connect; the allow rule refuses, counted */
	e = daemon_with((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.listen_mode = 0666));
	CHECK_EQ(try_as_nobody(rx), HELLO_EACCES);
	CHECK_EQ(refused(e), 1);
	/* root still is served */
	struct gc_ring_engine *c = gc_ring_engine_connect(path);
	CHECK(c != NULL);
	CHECK_OK(gc_ring_engine_destroy(c));
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK(rx_recv(&rx[0], buf, sizeof(buf), RX_QUIET_MS, &from) < 0);

	/* allowed by uid */
	const uid_t u = NOBODY;
	e = daemon_with((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.listen_mode = 0666,
									     .allow_uids = &u,
									     .n_allow_uids = 1));
	CHECK_EQ(try_as_nobody(rx), SENT);
	RX_EXPECT(&rx[0], "nobody", 6);
	CHECK_EQ(refused(e), 0);
	CHECK_OK(gc_ring_engine_destroy(e));

	/* allowed by group, through a group-only socket */
	const gid_t g = NOBODY;
	e = daemon_with((struct gc_ring_engine_opts)
				GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_LISTEN_GID,
							 .listen_gid = NOBODY, .listen_mode = 0660,
							 .allow_gids = &g, .n_allow_gids = 1));
	CHECK_EQ(try_as_nobody(rx), SENT);
	RX_EXPECT(&rx[0], "nobody", 6);
	CHECK_OK(gc_ring_engine_destroy(e));
	rx_close(rx, 1);
}

/* A client trusts an engine run by root or itself, or the uid it names. */
static void whom_the_client_trusts(void)
{
	int ready[2];
	char ch;

	CHECK_OK(pipe(ready));
	pid_t d = fork_child();
	if (d == 0) {
		close(ready[0]);
		become_nobody();
		sigset_t set;
		int sig;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_BLOCK, &set, NULL);
		struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = path, .quiet = 1);
		struct gc_ring_engine *e = gc_ring_engine_create(&p);
		if (!e) {
			fprintf(stderr, "daemon as nobody: %s\n", gc_errmsg());
			_exit(2);
		}
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		sigwait(&set, &sig);
		gc_ring_engine_destroy(e);
		_exit(0);
	}
	close(ready[1]);
	CHECK_EQ(read(ready[0], &ch, 1), 1);
	close(ready[0]);

	CHECK(gc_ring_engine_connect(path) == NULL);
	CHECK_EQ(errno, EPERM);
	CHECK(strstr(gc_errmsg(), "uid 65534") != NULL);
	CHECK(gc_ring_engine_connect_uid(path, 1234) == NULL);
	CHECK_EQ(errno, EPERM);
	struct gc_ring_engine *e = gc_ring_engine_connect_uid(path, NOBODY);
	CHECK(e != NULL); /* the daemon serves root: always allowed */
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_OK(gc_ring_engine_destroy(e));
	kill(d, SIGTERM);
	int status;
	CHECK_EQ(waitpid(d, &status, 0), d);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* and a root engine is not the uid a client named */
	struct gc_ring_engine *own = daemon_with((struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT());
	CHECK(gc_ring_engine_connect_uid(path, NOBODY) == NULL);
	CHECK_EQ(errno, EPERM);
	CHECK_OK(gc_ring_engine_destroy(own));
}

/* A listening socket bound by someone else (systemd's socket activation):
 * served as is, closed by the engine, its file left to its binder. */
static int seqpacket_at(const char *at, bool listening, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", at);
	CHECK_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	if (listening)
		CHECK_OK(listen(fd, 16));
	return fd;
}

static void adopted_socket(void)
{
	int fd = seqpacket_at(path, true, SOCK_SEQPACKET);
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_LISTEN_FD,
								.listen_fd = fd, .quiet = 1);
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	CHECK(e != NULL);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	struct gc_ring_engine *c = gc_ring_engine_connect(path);
	CHECK(c != NULL);
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.clients, 2); /* this process's own client and c */
	CHECK_OK(gc_ring_engine_destroy(c));
	CHECK_OK(gc_ring_engine_destroy(e));
	CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF); /* closed by the engine */
	CHECK_OK(access(path, F_OK));			 /* the binder's file stays */
	CHECK_OK(unlink(path));

	/* refused: with a path too, a negative fd, not SOCK_SEQPACKET, not
	 * listening; the descriptor stays the caller's */
	p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_LISTEN_FD,
								 .listen_fd = 0, .listen = path);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(strstr(gc_errmsg(), "listen") != NULL);
	p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_LISTEN_FD,
								 .listen_fd = -1);
	CHECK(gc_ring_engine_create(&p) == NULL);
	CHECK_EQ(errno, EBADF);
	for (int k = 0; k < 2; k++) {
		fd = seqpacket_at(path, k == 0, k == 0 ? SOCK_STREAM : SOCK_SEQPACKET);
		p = (struct gc_ring_engine_opts)GC_RING_ENGINE_OPTS_INIT(.flags = GC_RING_ENGINE_LISTEN_FD,
									 .listen_fd = fd);
		CHECK(gc_ring_engine_create(&p) == NULL);
		CHECK_EQ(errno, EINVAL);
		CHECK(strstr(gc_errmsg(), k == 0 ? "SOCK_SEQPACKET" : "not listening") != NULL);
		CHECK(fcntl(fd, F_GETFD) >= 0); /* still the caller's */
		close(fd);
		CHECK_OK(unlink(path));
	}
}

int main(void)
{
	if (geteuid() != 0) {
		skip("needs root (setuid to 65534, chown of the socket)");
		return 77;
	}
	/* a directory nobody can enter, and whose socket files it may reach */
	snprintf(dir, sizeof(dir), "/tmp/gc-ring-access-%d", (int)getpid());
	CHECK_OK(mkdir(dir, 0755));
	CHECK_OK(chown(dir, NOBODY, NOBODY)); /* so the nobody daemon can bind there */
	snprintf(path, sizeof(path), "%s/eng.sock", dir);

	modes();
	who_may_attach();
	whom_the_client_trusts();
	adopted_socket();
	CHECK_OK(rmdir(dir));
	return check_done("ring_access");
}
