/* SPDX-License-Identifier: MIT */
/*
 * Engine selection: names, gc_set_engine()/gc_get_engine(), availability,
 * and that an engine this process cannot use (KERNEL without CAP_BPF and
 * CAP_NET_ADMIN) is refused with ENOTSUP and a reason.
 */
#include <grp.h>
#include <sys/wait.h>

#include "check.h"

static const char *const names[GC_ENGINE_COUNT] = {
	[GC_ENGINE_AUTO] = "auto",	   [GC_ENGINE_LOOP] = "loop",
	[GC_ENGINE_MMSG] = "mmsg",	   [GC_ENGINE_URING] = "uring",
	[GC_ENGINE_URING_ZC] = "uring_zc", [GC_ENGINE_KERNEL] = "kernel",
};

static int concrete(enum gc_engine e)
{
	return e > GC_ENGINE_AUTO && e < GC_ENGINE_COUNT;
}

static void test_names(void)
{
	for (int e = GC_ENGINE_AUTO; e < GC_ENGINE_COUNT; e++) {
		const char *n = gc_engine_name((enum gc_engine)e);
		CHECK(n != NULL);
		CHECK(strcmp(n, names[e]) == 0);
		CHECK_EQ(gc_engine_from_name(n), e);
	}
	CHECK(gc_engine_name(GC_ENGINE_NONE) == NULL);
	CHECK(gc_engine_name(GC_ENGINE_COUNT) == NULL);
	CHECK(gc_engine_name((enum gc_engine)1000) == NULL);
	CHECK(gc_engine_name((enum gc_engine) - 7) == NULL);

	const char *unknown[] = { "", "nope", "loop ", "mmsgx", "uring-zc", "none" };
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		errno = 0;
		CHECK_EQ(gc_engine_from_name(unknown[i]), GC_ENGINE_NONE);
		CHECK_EQ(errno, EINVAL);
	}
	errno = 0;
	CHECK_EQ(gc_engine_from_name(NULL), GC_ENGINE_NONE);
	CHECK_EQ(errno, EINVAL);
}

static void test_available(void)
{
	CHECK_OK(gc_engine_available(GC_ENGINE_AUTO));
	CHECK_OK(gc_engine_available(GC_ENGINE_LOOP));
	CHECK_OK(gc_engine_available(GC_ENGINE_MMSG));
	/* not engines: group.h names only ENOTSUP here, EINVAL is as good */
	const enum gc_engine not_engines[] = { GC_ENGINE_COUNT, GC_ENGINE_NONE, (enum gc_engine)999 };
	for (size_t i = 0; i < 3; i++) {
		errno = 0;
		CHECK_EQ(gc_engine_available(not_engines[i]), -1);
		CHECK(errno == EINVAL || errno == ENOTSUP);
	}
	for (int e = GC_ENGINE_URING; e <= GC_ENGINE_KERNEL; e++) {
		errno = 0;
		int r = gc_engine_available((enum gc_engine)e);
		printf("engine %s: %s\n", names[e], r == 0 ? "available" : gc_errmsg());
		CHECK(r == 0 || (r == -1 && errno == ENOTSUP && gc_errmsg()[0]));
	}
}

static void test_set_get(void)
{
	int sd = udp_socket(AF_INET), s6 = udp_socket(AF_INET6);

	/* a fresh socket sends with a concrete engine */
	CHECK(concrete(gc_get_engine(sd)));
	CHECK(concrete(gc_get_engine(s6)));

	for (int e = GC_ENGINE_LOOP; e < GC_ENGINE_COUNT; e++) {
		if (gc_engine_available((enum gc_engine)e) != 0) {
			CHECK_ERR(gc_set_engine(sd, (enum gc_engine)e), ENOTSUP);
			continue;
		}
		CHECK_OK(gc_set_engine(sd, (enum gc_engine)e));
		CHECK_EQ(gc_get_engine(sd), e);
		CHECK_OK(gc_set_engine(s6, (enum gc_engine)e));
		CHECK_EQ(gc_get_engine(s6), e);
	}

	/* AUTO resolves to a concrete, available engine */
	CHECK_OK(gc_set_engine(sd, GC_ENGINE_AUTO));
	enum gc_engine a = gc_get_engine(sd);
	CHECK(concrete(a));
	CHECK_OK(gc_engine_available(a));
	printf("AUTO picked %s\n", gc_engine_name(a));

	/* an engine that is not available: ENOTSUP with a reason, engine unchanged */
	CHECK_OK(gc_set_engine(sd, GC_ENGINE_LOOP));
	for (int e = GC_ENGINE_URING; e < GC_ENGINE_COUNT; e++) {
		if (gc_engine_available((enum gc_engine)e) == 0)
			continue;
		CHECK_ERR(gc_set_engine(sd, (enum gc_engine)e), ENOTSUP);
		CHECK(gc_errmsg() != NULL && gc_errmsg()[0] != '\0');
		printf("%s refused: %s\n", names[e], gc_errmsg());
		CHECK_EQ(gc_get_engine(sd), GC_ENGINE_LOOP);
	}

	/* not engines */
	CHECK_ERR(gc_set_engine(sd, GC_ENGINE_NONE), EINVAL);
	CHECK_ERR(gc_set_engine(sd, GC_ENGINE_COUNT), EINVAL);
	CHECK_ERR(gc_set_engine(sd, (enum gc_engine)12345), EINVAL);
	CHECK_ERR(gc_set_engine(sd, (enum gc_engine) - 2), EINVAL);
	CHECK(gc_errmsg()[0] != '\0');
	CHECK_EQ(gc_get_engine(sd), GC_ENGINE_LOOP);

	/* the engine is per socket */
	int other = udp_socket(AF_INET);
	CHECK_OK(gc_set_engine(other, GC_ENGINE_MMSG));
	CHECK_EQ(gc_get_engine(sd), GC_ENGINE_LOOP);
	CHECK_EQ(gc_get_engine(other), GC_ENGINE_MMSG);

	/* bad descriptors */
	int pfd[2], tcp, closed = udp_socket(AF_INET);
	close(closed);
	errno = 0;
	CHECK_EQ(gc_get_engine(closed), GC_ENGINE_NONE);
	CHECK_EQ(errno, EBADF);
	CHECK_ERR(gc_set_engine(closed, GC_ENGINE_LOOP), EBADF);
	errno = 0;
	CHECK_EQ(gc_get_engine(-1), GC_ENGINE_NONE);
	CHECK_EQ(errno, EBADF);
	CHECK_OK(pipe(pfd));
	tcp = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(tcp >= 0);
	errno = 0;
	CHECK_EQ(gc_get_engine(pfd[0]), GC_ENGINE_NONE);
	CHECK_EQ(errno, ENOTSOCK);
	errno = 0;
	CHECK_EQ(gc_get_engine(tcp), GC_ENGINE_NONE);
	CHECK_EQ(errno, EPROTOTYPE);
	CHECK_ERR(gc_set_engine(-1, GC_ENGINE_LOOP), EBADF);
	CHECK_ERR(gc_set_engine(pfd[0], GC_ENGINE_LOOP), ENOTSOCK);
	CHECK_ERR(gc_set_engine(tcp, GC_ENGINE_LOOP), EPROTOTYPE);

	close(pfd[0]);
	close(pfd[1]);
	close(tcp);
	close(other);
	close(sd);
	close(s6);
}

/* Switching engines between sends keeps the group and the bytes. */
static void test_switch(void)
{
	enum gc_engine eng[GC_ENGINE_COUNT];
	size_t ne = available_engines(eng);
	struct rx *r = rx_open(AF_INET, 3);
	struct sockaddr_storage *m = rx_members(r, 3);
	int sd = udp_socket(AF_INET);
	char msg[300];

	CHECK_OK(gc_setgroup(sd, m, 3));
	for (unsigned round = 0; round < 3; round++) {
		for (size_t i = 0; i < ne; i++) {
			CHECK_OK(gc_set_engine(sd, eng[i]));
			fill(msg, sizeof(msg), round * 10 + (unsigned)i);
			CHECK_EQ(gc_send(sd, msg, sizeof(msg), 0), sizeof(msg));
			RX_EXPECT_ALL(r, 3, msg, sizeof(msg));
		}
	}
	CHECK_EQ(gc_getgroup_size(sd), 3);
	close(sd);
	free(m);
	rx_close(r, 3);
}

/*
 * The KERNEL engine needs CAP_BPF + CAP_NET_ADMIN.  In a child without them
 * (as root: setuid to nobody; otherwise we have none anyway) it must be
 * refused with ENOTSUP and a reason, and the socket keeps its engine.  Runs
 * first: the library probes the engine once per process.
 */
static void test_kernel_unprivileged(void)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		if (getuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534))) {
			perror("dropping root");
			_exit(1);
		}
		int sd = udp_socket(AF_INET);
		CHECK_OK(gc_set_engine(sd, GC_ENGINE_LOOP));
		CHECK_ERR(gc_engine_available(GC_ENGINE_KERNEL), ENOTSUP);
		CHECK(gc_errmsg()[0] != '\0');
		CHECK_ERR(gc_set_engine(sd, GC_ENGINE_KERNEL), ENOTSUP);
		CHECK(gc_errmsg()[0] != '\0');
		printf("unprivileged: kernel refused: %s\n", gc_errmsg());
		CHECK_EQ(gc_get_engine(sd), GC_ENGINE_LOOP);
		/* AUTO still resolves without it */
		CHECK_OK(gc_set_engine(sd, GC_ENGINE_AUTO));
		CHECK(concrete(gc_get_engine(sd)) && gc_get_engine(sd) != GC_ENGINE_KERNEL);
		close(sd);
		fflush(stdout);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	test_kernel_unprivileged();
	test_names();
	test_available();
	test_set_get();
	test_switch();
	return check_done("test_engine");
}
