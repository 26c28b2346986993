/* SPDX-License-Identifier: MIT */
/*
 * sdnotify.c - sd_notify(3) and sd_listen_fds(3), the two protocols as
 * documented there and in systemd's "Interface Portability and Stability"
 * list: a notification is one AF_UNIX datagram of newline-separated
 * VARIABLE=value lines sent to the path in $NOTIFY_SOCKET (a leading '@' is
 * the abstract namespace); passed sockets start at fd 3 (SD_LISTEN_FDS_START),
 * $LISTEN_FDS of them, for the process $LISTEN_PID.  Written out here rather
 * than linking libsystemd: the relay, lmsd and the engine daemon run on hosts
 * and in containers without systemd, and these ~80 lines are all they use.
 */
#include "sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int sd_notify_state(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (!path || !*path)
		return 0;
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
			   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	int err = n < 0 ? errno : 0;
	close(fd);
	return n < 0 ? -err : 1;
}

int sd_notify_reloading(void)
{
	struct timespec ts;
	char msg[64];
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
	return sd_notify_state(msg);
}

/* A decimal number in 1..max, else 0. */
static unsigned long long env_num(const char *name, unsigned long long max)
{
	const char *s = getenv(name);
	char *end;
	if (!s || *s < '0' || *s > '9')
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	return errno || *end || v > max ? 0 : v;
}

uint64_t sd_watchdog_usec(void)
{
	const char *pid = getenv("WATCHDOG_PID");
	if (pid && env_num("WATCHDOG_PID", 1ull << 31) != (unsigned long long)getpid())
		return 0;
	return env_num("WATCHDOG_USEC", UINT64_MAX);
}

int sd_listen_fds_take(void)
{
	if (!getenv("LISTEN_FDS") && !getenv("LISTEN_PID"))
		return 0;
	unsigned long long pid = env_num("LISTEN_PID", 1ull << 31);
	unsigned long long n = env_num("LISTEN_FDS", 1024);
	int rc = 0;
	if (!pid || !n) {
		errno = EINVAL;
		rc = -1;
	} else if (pid == (unsigned long long)getpid()) {
		for (int fd = 3; fd < 3 + (int)n; fd++) {
			if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
				rc = -1;
				break;
			}
		}
		if (rc == 0)
			rc = (int)n;
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return rc;
}
