/* SPDX-License-Identifier: MIT */
/*
 * privs.c - what the relay holds on the host once it runs: its PID file, and
 * no privilege it no longer needs.
 *
 * PID file: created with O_CREAT|O_EXCL|O_NOFOLLOW, so a symlink or a file
 * planted at the path (in a world-writable directory, say) is never followed
 * or truncated.  A file already there is stale when it is a regular file
 * owned by us whose PID is not a running process: it is removed and the
 * create tried once more.  Anything else (a live PID, a symlink, someone
 * else's file, no PID in it) is an error naming the path.
 *
 * Privileges: after the sockets are bound, the stats socket listens and the
 * engine is attached, the relay keeps only what sending still needs:
 * CAP_NET_ADMIN and CAP_BPF (the kernel engine re-attaches its filter when
 * another process replaced it; forced socket buffers), and CAP_NET_RAW when
 * -S may open raw sockets.  The rest leaves the permitted, effective,
 * inheritable and bounding sets, and no_new_privs is set.  With --user, the
 * relay then becomes that user (and its group), keeping those capabilities.
 */
#include "relay.h"
#include "../cli.h"
#include "../log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The PID in a file that is ours and regular; 0 when it has none, -1 with a
 * reason when it is not a file we may treat as a PID file. */
static long pidfile_owner(const char *path, const char **why)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		*why = errno == ELOOP ? "is a symbolic link" : strerror(errno);
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		*why = "exists and is not a regular file of this user";
		return -1;
	}
	char buf[32] = "";
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		*why = strerror(errno);
		return -1;
	}
	buf[n] = '\0';
	char *end;
	long pid = strtol(buf, &end, 10);
	if (end == buf || (*end && *end != '\n') || pid <= 0) {
		*why = "exists and holds no PID";
		return -1;
	}
	return pid;
}

void relay_write_pidfile(const char *path)
{
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			char buf[32];
			int len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
			if (write(fd, buf, (size_t)len) != len || close(fd) != 0)
				cli_fail("-m: cannot write PID file '%s': %s", path, strerror(errno));
			return;
		}
		if (errno != EEXIST)
			cli_fail("-m: cannot create PID file '%s': %s", path, strerror(errno));
		const char *why = NULL;
		long pid = pidfile_owner(path, &why);
		if (pid < 0)
			cli_fail("-m: PID file '%s' %s: refusing to touch it", path, why);
		if (kill((pid_t)pid, 0) == 0 || errno == EPERM)
			cli_fail("-m: PID file '%s' names process %ld, which is running", path, pid);
		/* stale: the process is gone.  unlink() removes the name only,
		 * never what a symlink swapped in meanwhile points to; the
		 * O_EXCL create after it fails if anything is back. */
		if (unlink(path) != 0 && errno != ENOENT)
			cli_fail("-m: cannot remove the stale PID file '%s': %s", path, strerror(errno));
		log_event(LL_NOTICE, "pidfile_replaced", "path=%s stale_pid=%ld reason=%s", path,
			  pid, "process is gone");
	}
	cli_fail("-m: PID file '%s' keeps coming back: refusing to touch it", path);
}

void relay_drop_privileges(const char *user, bool raw)
{
	const cap_value_t want[] = { CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW };
	size_t nwant = raw ? 3 : 2;
	struct passwd *pw = NULL;
	if (user) {
		errno = 0;
		pw = getpwnam(user);
		if (!pw)
			cli_usage_error("--user: no user '%s'%s%s", user, errno ? ": " : "",
					errno ? strerror(errno) : "");
	}
	cap_t now = cap_get_proc();
	if (!now)
		cli_fail("cannot read the capabilities: %s", strerror(errno));
	/* keep the wanted ones we have */
	cap_value_t keep[3];
	int nkeep = 0;
	for (size_t i = 0; i < nwant; i++) {
		cap_flag_value_t v = CAP_CLEAR;
		if (CAP_IS_SUPPORTED(want[i]) &&
		    cap_get_flag(now, want[i], CAP_PERMITTED, &v) == 0 && v == CAP_SET)
			keep[nkeep++] = want[i];
	}
	cap_flag_value_t setpcap = CAP_CLEAR;
	cap_get_flag(now, CAP_SETPCAP, CAP_EFFECTIVE, &setpcap);
	cap_free(now);
	if (setpcap == CAP_SET) { /* the bounding set: nothing can come back through exec */
		for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
			bool kept = false;
			for (int i = 0; i < nkeep; i++)
				kept |= keep[i] == c;
			if (!kept && CAP_IS_SUPPORTED(c) && cap_drop_bound(c) != 0 && errno != EINVAL)
				cli_fail("cannot drop capability %d from the bounding set: %s",
					 (int)c, strerror(errno));
		}
	}
	if (pw) {
		if (prctl(PR_SET_KEEPCAPS, 1L, 0L, 0L, 0L) != 0 || setgroups(0, NULL) != 0 ||
		    setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
			cli_fail("--user %s: cannot become uid %ld gid %ld: %s", user,
				 (long)pw->pw_uid, (long)pw->pw_gid, strerror(errno));
		(void)prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L);
	}
	cap_t c = cap_init();
	if (!c ||
	    (nkeep &&
	     (cap_set_flag(c, CAP_PERMITTED, nkeep, keep, CAP_SET) != 0 ||
	      cap_set_flag(c, CAP_EFFECTIVE, nkeep, keep, CAP_SET) != 0)) ||
	    cap_set_proc(c) != 0)
		cli_fail("cannot drop capabilities: %s", strerror(errno));
	cap_free(c);
	(void)prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L);
}
