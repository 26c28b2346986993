/* SPDX-License-Identifier: MIT */
/*
 * listen.c - an engine's listening socket (daemon mode): bound with the mode
 * and group asked for, and who of those who connect is served.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "ring/srv.h"

/* path is free for us: nothing there, or a stale socket file (removed);
 * else -EADDRINUSE (or lstat()'s -errno), with the message. */
static int claim_path(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : gc_errf(errno, "gc_ring_engine_create: listen: %s", path);
	/* a live engine answers; a stale socket file does not */
	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int live = probe >= 0 && connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	if (probe >= 0)
		close(probe);
	if (live || !S_ISSOCK(st.st_mode))
		return gc_errf(EADDRINUSE, "gc_ring_engine_create: listen: %s is in use", path);
	unlink(path);
	return 0;
}

/*
 * Bind and listen at tmp (in the private directory), give the file its mode
 * and group, then link it to path: the socket is never reachable with wider
 * permissions than asked.  (umask would do, but it is process-wide: the
 * application's other threads create files too.)
 */
static int listen_at(struct gc_srv *s, const char *tmp, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX }, fin = { .sun_family = AF_UNIX };

	if (strlen(tmp) >= sizeof(sa.sun_path))
		return gc_errf(ENAMETOOLONG,
			       "gc_ring_engine_create: listen: %s with the private "
			       "directory beside it (%s) is longer than %zu bytes",
			       path, tmp, sizeof(sa.sun_path) - 1);
	strcpy(sa.sun_path, tmp);
	strcpy(fin.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return gc_errf(errno, "gc_ring_engine_create: socket failed");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int err = errno;
		close(fd);
		return gc_errf(err, "gc_ring_engine_create: listen on %s failed", path);
	}
	if ((s->p.flags & GC_RING_ENGINE_LISTEN_GID) &&
	    fchownat(AT_FDCWD, tmp, (uid_t)-1, s->p.listen_gid, AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return gc_errf(err, "gc_ring_engine_create: listen: cannot give %s group %u", path,
			       (unsigned)s->p.listen_gid);
	}
	/* NOFOLLOW: whoever owns the directory around ours could swap names */
	if (fchmodat(AT_FDCWD, tmp, s->p.listen_mode, AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return gc_errf(err, "gc_ring_engine_create: listen: cannot set mode 0%o on %s",
			       s->p.listen_mode, path);
	}
	int r = link(tmp, path), err = r < 0 ? errno : 0;
	if (r < 0 && err == EEXIST) {
		int c = claim_path(path, &fin);
		if (c == 0) {
			r = link(tmp, path);
			err = r < 0 ? errno : 0;
		} else {
			err = -c;
		}
	}
	if (r < 0) {
		close(fd);
		if (err == EEXIST)
			return gc_errf(EADDRINUSE, "gc_ring_engine_create: listen: %s is in use", path);
		return gc_errf(err, "gc_ring_engine_create: listen: cannot link the socket to %s", path);
	}
	return fd;
}

int gc_srv_listen(struct gc_srv *s, const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path) + 32], tmp[sizeof(dir) + 8];
	const char *slash = strrchr(path, '/');

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return gc_errf(ENAMETOOLONG, "gc_ring_engine_create: listen path is longer than %zu bytes",
			       sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	if (!*path || (slash && !slash[1]))
		return gc_errf(EINVAL, "gc_ring_engine_create: listen path '%s' names no file", path);
	/* the private directory: beside path (the same filesystem, for link()) */
	int dl = slash ? (int)(slash - path) + 1 : 0;
	snprintf(dir, sizeof(dir), "%.*s.gc-engine-XXXXXX", dl, path);
	if (!mkdtemp(dir)) /* mode 0700 */
		return gc_errf(errno,
			       "gc_ring_engine_create: listen: cannot create a private "
			       "directory beside %s",
			       path);
	snprintf(tmp, sizeof(tmp), "%s/s", dir);
	s->uid = geteuid();
	int fd = listen_at(s, tmp, path);
	unlink(tmp);
	rmdir(dir);
	if (fd < 0)
		return fd;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listen_tag };
	s->listen_path = strdup(path);
	if (!s->listen_path || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		unlink(path);
		return gc_errf(ENOMEM, "gc_ring_engine_create: listen: out of memory");
	}
	s->lfd = fd;
	/* remember which file is ours: srv_free() removes only that one */
	struct stat mine;
	if (fstatat(AT_FDCWD, path, &mine, AT_SYMLINK_NOFOLLOW) == 0) {
		s->listen_dev = mine.st_dev;
		s->listen_ino = mine.st_ino;
	}
	return 0;
}

/* Serve the listening socket fd that someone else bound (systemd's socket
 * activation): it must be a listening AF_UNIX SOCK_SEQPACKET socket.  It is
 * made non-blocking and close-on-exec; its file is never removed by us. */
int gc_srv_adopt(struct gc_srv *s, int fd)
{
	int type = 0, domain = 0, acc = 0;
	socklen_t l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0)
		return gc_errf(errno, "gc_ring_engine_create: listen_fd %d", fd);
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) < 0 || domain != AF_UNIX ||
	    type != SOCK_SEQPACKET)
		return gc_errf(EINVAL,
			       "gc_ring_engine_create: listen_fd %d is not an AF_UNIX SOCK_SEQPACKET "
			       "socket (ListenSequentialPacket= in a .socket unit)",
			       fd);
	l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 || !acc)
		return gc_errf(EINVAL, "gc_ring_engine_create: listen_fd %d is not listening", fd);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return gc_errf(errno, "gc_ring_engine_create: listen_fd %d: fcntl failed", fd);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listen_tag };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		return gc_errf(errno, "gc_ring_engine_create: listen_fd %d: epoll_ctl failed", fd);
	s->uid = geteuid();
	s->lfd = fd;
	return 0;
}

/* Root, our own uid, and the allowed uids and groups (primary or
 * supplementary: SO_PEERGROUPS) are served. */
bool gc_srv_peer_allowed(const struct gc_srv *s, int fd, char *why, size_t len)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0) {
		snprintf(why, len, "no credentials of the client (%s)", strerror(errno));
		return false;
	}
	if (uc.uid == 0 || uc.uid == s->uid)
		return true;
	for (size_t i = 0; i < s->p.n_allow_uids; i++)
		if (s->allow_uids[i] == uc.uid)
			return true;
	if (s->p.n_allow_gids) {
		gid_t groups[256];
		socklen_t gl = sizeof(groups);
		int ng = 0;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0)
			ng = (int)(gl / sizeof(gid_t));
		/* more than 256 groups (ERANGE): the primary group still counts */
		for (size_t i = 0; i < s->p.n_allow_gids; i++) {
			if (s->allow_gids[i] == uc.gid)
				return true;
			for (int g = 0; g < ng; g++)
				if (s->allow_gids[i] == groups[g])
					return true;
		}
	}
	snprintf(why, len,
		 "uid %u (gid %u) is not allowed: the engine serves root, its own uid "
		 "%u, and the uids and groups it was told to allow",
		 (unsigned)uc.uid, (unsigned)uc.gid, (unsigned)s->uid);
	return false;
}

void gc_srv_refuse(struct gc_srv *s, int fd, int err, const char *why)
{
	struct gc_rep rep = { .version = GC_PROTO_VERSION, .err = err };

	snprintf(rep.msg, sizeof(rep.msg), "%s", why);
	gc_proto_send(fd, &rep, sizeof(rep), NULL, 0, MSG_DONTWAIT);
	close(fd);
	s->st.refused++;
}

void gc_srv_unlisten(struct gc_srv *s)
{
	if (s->lfd < 0)
		return;
	close(s->lfd);
	s->lfd = -1;
	/* not if another engine's socket replaced ours at that path */
	struct stat st;
	if (s->listen_path && lstat(s->listen_path, &st) == 0 && st.st_ino == s->listen_ino &&
	    st.st_dev == s->listen_dev)
		unlink(s->listen_path);
}
