/* SPDX-License-Identifier: MIT */
/*
 * kprog.c - the kernel engine's program, one per process: loading it,
 * attaching it to lo's egress, detaching it, removing filters that killed
 * processes left behind, lo's forwarding setting, and what a forked child
 * does.  kernel.c (the per-socket half) uses it through kprog.h.
 *
 * The program is attached to lo's clsact egress in the caller's network
 * namespace with priority GC_TC_PRIO and a handle of its own (the pid when
 * that is free, else a random one above any pid), so processes never see each
 * other's groups and other filters are never touched.  It is attached with
 * the first kernel-engine socket and detached with the last one, or at exit.
 *
 * Ownership lives in GC_RUN_DIR (mode 0700, owned by us; anything else there
 * is refused): lo-NETNS-HANDLE is created with O_EXCL|O_NOFOLLOW before the
 * filter is attached and stays flock()ed by its owner for as long as the
 * filter is there.  A lock nobody holds is an owner that is gone (killed
 * before it could detach): the next attach in that namespace removes its
 * filter and file.  The lock works across pid namespaces, where pids mean
 * nothing; a filter whose owner file is missing or cannot be read belongs to
 * somebody we cannot see, and is left alone.  Attach, detach, that clean-up
 * and lo's forwarding setting (lo-NETNS.fwd4/6) are serialised between
 * processes by an flock() on GC_RUN_DIR/lock.
 *
 * libbpf is kept quiet while we load, attach and detach (quiet()): what
 * fails is reported through gc_errmsg(), and what libbpf reports as a kernel
 * error but we expect must not reach the host application's libbpf print
 * callback (stderr by default): bpf_tc_hook_create() on lo where a clsact
 * qdisc already is (any attach after the first one on this host) gets EEXIST
 * with "Exclusivity flag on, cannot modify".
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "internal.h"
#include "kprog.h"
/* bpftool's generated code mixes int and size_t: not ours to change */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
#include "fanout.skel.h"
#pragma GCC diagnostic pop

#define GC_TC_PRIO 0x4743 /* "GC": our filters' priority on lo egress */
#define GC_RUN_DIR "/run/groupcast"

/* The process-wide program, attached while users > 0. */
static struct {
	pthread_mutex_t lock;
	int tried, err;
	char why[192];
	struct fanout *skel;
	struct gc_khead *heads;
	unsigned char used[GC_KSOCKS];
	int users;
	int attached;
	struct bpf_tc_hook hook;
	__u32 handle;	     /* of our filter, while attached */
	int dirfd;	     /* GC_RUN_DIR, once checked */
	int owner_fd;	     /* our owner file, flock()ed while attached */
	char owner[64];	     /* its name in GC_RUN_DIR */
	int fwd_v4, fwd_v6;  /* 1: lo forwarding is on for us */
	unsigned long netns; /* inode of our network namespace */
	unsigned gen;	     /* bumped in a forked child, which starts over */
} K = { .lock = PTHREAD_MUTEX_INITIALIZER, .dirfd = -1, .owner_fd = -1 };

/* ---- load, attach, detach -------------------------------------------- */

static int silent(enum libbpf_print_level l, const char *f, va_list a)
{
	(void)l, (void)f, (void)a;
	return 0;
}

/* libbpf quiet from here; quiet_end(the returned value) brings back the host
 * application's callback. */
static libbpf_print_fn_t quiet(void)
{
	return libbpf_set_print(silent);
}

static void quiet_end(libbpf_print_fn_t prev)
{
	libbpf_set_print(prev);
}

/*
 * A forked child shares the parent's maps and filter through inherited fds.
 * It must not send through them nor detach them: it forgets them (the fds
 * close on exec or exit) and loads its own program when it first needs one.
 */
static void forget_in_child(void)
{
	if (K.heads)
		munmap(K.heads, GC_KSOCKS * sizeof(struct gc_khead));
	pthread_mutex_init(&K.lock, NULL);
	K.tried = K.err = K.users = K.attached = 0;
	K.skel = NULL;
	K.heads = NULL;
	memset(K.used, 0, sizeof(K.used));
	if (K.owner_fd >= 0) /* the parent's lock stays with the parent's descriptor */
		close(K.owner_fd);
	K.owner_fd = -1;
	K.owner[0] = 0;
	K.fwd_v4 = K.fwd_v6 = 0;
	K.gen++;
}

static int has_cap(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (syscall(SYS_capget, &h, d))
		return 1; /* cannot tell: let the attach say */
	return !!(d[cap / 32].effective & (1u << (cap % 32)));
}

static void load_once(void)
{
	size_t len = GC_KSOCKS * sizeof(struct gc_khead);
	static int atfork_done;
	void *m;

	if (!atfork_done++)
		pthread_atfork(NULL, NULL, forget_in_child);
	K.tried = 1;
	if (!has_cap(CAP_NET_ADMIN)) { /* loading may still work (CAP_SYS_ADMIN), attaching would not */
		K.err = EPERM;
		snprintf(K.why, sizeof(K.why),
			 "engine kernel: needs CAP_NET_ADMIN to attach to lo (and CAP_BPF)");
		return;
	}
	{
		/* quiet while we try (failure is reported through gc_errmsg()),
		 * then the host application's own libbpf logging again */
		libbpf_print_fn_t prev = quiet();

		K.skel = fanout__open_and_load();
		if (!K.skel)
			K.err = errno ? errno : EPERM;
		quiet_end(prev);
	}
	if (!K.skel) {
		snprintf(K.why, sizeof(K.why), "engine kernel: loading the BPF program failed: %s%s",
			 strerror(K.err), K.err == EPERM ? " (needs CAP_BPF and CAP_NET_ADMIN)" : "");
		return;
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(K.skel->maps.heads), 0);
	if (m == MAP_FAILED) {
		K.err = errno;
		snprintf(K.why, sizeof(K.why), "engine kernel: mmap of the heads map failed: %s",
			 strerror(K.err));
		fanout__destroy(K.skel);
		K.skel = NULL;
		return;
	}
	K.heads = m;
}

int kprog_available(void)
{
	int err;

	pthread_mutex_lock(&K.lock);
	if (!K.tried)
		load_once();
	err = K.err;
	if (err)
		gc_errf(ENOTSUP, "%s", K.why);
	pthread_mutex_unlock(&K.lock);
	return err ? -ENOTSUP : 0;
}

/* Read or write an integer sysctl; returns the old value or -1. */
static int sysctl_set(const char *path, int val)
{
	char buf[16];
	int fd = open(path, O_RDWR), old = -1;
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		old = atoi(buf);
	}
	if (old != val) {
		n = snprintf(buf, sizeof(buf), "%d\n", val);
		if (pwrite(fd, buf, (size_t)n, 0) != n)
			old = -1;
	}
	close(fd);
	return old;
}

/* RTA_OK() and RTA_NEXT() in size_t (the uapi macros compute in int). */
static bool rta_ok(const struct rtattr *a, size_t left)
{
	return left >= sizeof(*a) && a->rta_len >= sizeof(*a) && a->rta_len <= left;
}

static struct rtattr *rta_next(struct rtattr *a, size_t *left)
{
	size_t step = ((size_t)a->rta_len + RTA_ALIGNTO - 1) & ~(size_t)(RTA_ALIGNTO - 1);

	*left = step < *left ? *left - step : 0;
	return (struct rtattr *)((char *)a + step);
}

/*
 * Our filters on lo egress: handles of the "bpf" filters at GC_TC_PRIO whose
 * program is gc_fanout, from an rtnetlink dump.  Up to max; returns the count
 * or -1.
 */
static int our_filters(__u32 *out, int max)
{
	struct {
		struct nlmsghdr n;
		struct tcmsg t;
	} req = {
		.n = { .nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETTFILTER,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		       .nlmsg_seq = 1 },
		.t = { .tcm_family = AF_UNSPEC,
		       .tcm_ifindex = 1,
		       .tcm_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS) },
	};
	static char buf[32768];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), n = 0;

	if (fd < 0)
		return -1;
	if (send(fd, &req, sizeof(req), 0) < 0)
		goto done;
	for (;;) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);

		if (len <= 0)
			goto done;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			struct tcmsg *t = NLMSG_DATA(h);
			size_t alen = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*t))
				? h->nlmsg_len - NLMSG_LENGTH(sizeof(*t))
				: 0;
			int bpf = 0, ours = 0;

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
				goto done;
			if (TC_H_MAJ(t->tcm_info) >> 16 != GC_TC_PRIO || !t->tcm_handle)
				continue;
			for (struct rtattr *a = (void *)((char *)t + NLMSG_ALIGN(sizeof(*t)));
			     rta_ok(a, alen); a = rta_next(a, &alen)) {
				if (a->rta_type == TCA_KIND)
					bpf = strcmp(RTA_DATA(a), "bpf") == 0;
				if (a->rta_type == TCA_OPTIONS) {
					size_t olen = RTA_PAYLOAD(a);

					for (struct rtattr *o = RTA_DATA(a); rta_ok(o, olen);
					     o = rta_next(o, &olen))
						if (o->rta_type == TCA_BPF_NAME)
							ours = strncmp(RTA_DATA(o), "gc_fanout", 9) == 0;
				}
			}
			if (bpf && ours && n < max)
				out[n++] = t->tcm_handle;
		}
	}
done:
	close(fd);
	return n;
}

/* ---- GC_RUN_DIR: owner files, the lock, saved sysctls ------------------- */

/* GC_RUN_DIR, made 0700 if missing; refused unless a directory of ours
 * (or root's) that nobody else can write.  Its descriptor, or -errno with
 * the message. */
static int run_dir(void)
{
	struct stat st;
	int fd;

	if (K.dirfd >= 0)
		return K.dirfd;
	if (mkdir(GC_RUN_DIR, 0700) && errno != EEXIST)
		return gc_errf(errno, "engine kernel: cannot make %s: %s", GC_RUN_DIR, strerror(errno));
	fd = open(GC_RUN_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return gc_errf(errno, "engine kernel: cannot open %s: %s", GC_RUN_DIR, strerror(errno));
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0) ||
	    (st.st_mode & 022)) {
		close(fd);
		return gc_errf(EPERM,
			       "engine kernel: %s is not a directory of uid %u or 0 that only its owner "
			       "may write (mode 0700)",
			       GC_RUN_DIR, (unsigned)geteuid());
	}
	if ((st.st_mode & 077) && st.st_uid == geteuid())
		fchmod(fd, 0700); /* made by an older version with 0755: nobody else needs to look */
	return K.dirfd = fd;
}

/* Open name in GC_RUN_DIR without following a link; only a regular file of
 * ours (or root's) is accepted.  Its descriptor, or -errno. */
static int open_ours(const char *name, int flags)
{
	struct stat st;
	int fd = openat(K.dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* The cross-process lock for attach, detach, clean-up and forwarding:
 * a descriptor to close(), or -errno (then we go on without it). */
static int ns_lock(void)
{
	int fd = run_dir();

	if (fd < 0)
		return fd;
	fd = open_ours("lock", O_RDWR | O_CREAT);
	while (fd >= 0 && flock(fd, LOCK_EX) && errno == EINTR)
		;
	return fd;
}

static void ns_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

static void owner_name(char *buf, size_t len, __u32 handle)
{
	snprintf(buf, len, "lo-%lu-%u", K.netns, handle);
}

/* 1 if owner file name is there and nobody holds its lock: its owner is
 * gone.  0 if it is alive, missing, or cannot be read (not ours to judge). */
static int owner_dead(const char *name)
{
	int fd = open_ours(name, O_RDONLY), dead;

	if (fd < 0)
		return 0;
	dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return dead;
}

/*
 * Remove what owners that are gone left in this namespace: their filters and
 * their owner files.  Runs under ns_lock().  Returns how many of our filters
 * other than our own remain (live owners, and owners we cannot see).
 */
static int reap_stale(void)
{
	__u32 h[256];
	int n = our_filters(h, 256), alive = 0;
	char prefix[40], name[64];
	DIR *d;

	for (int i = 0; i < n; i++) {
		if (K.attached && h[i] == K.handle)
			continue;
		owner_name(name, sizeof(name), h[i]);
		if (!owner_dead(name)) {
			alive++;
			continue;
		}
		LIBBPF_OPTS(bpf_tc_opts, o, .handle = h[i], .priority = GC_TC_PRIO);
		bpf_tc_detach(&K.hook, &o);
		unlinkat(K.dirfd, name, 0);
	}
	/* owner files of this namespace without a filter: an owner killed
	 * between writing the file and attaching, or a filter deleted by hand */
	snprintf(prefix, sizeof(prefix), "lo-%lu-", K.netns);
	if ((d = fdopendir(dup(K.dirfd)))) {
		for (struct dirent *e; (e = readdir(d));)
			if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
			    strcmp(e->d_name, K.owner) && owner_dead(e->d_name))
				unlinkat(K.dirfd, e->d_name, 0);
		closedir(d);
	}
	return alive;
}

/*
 * bpf_fib_lookup() refuses to look up from an interface without forwarding,
 * and the program looks up as if from lo, where forwarding changes nothing
 * else.  Turned on when the first routed member needs it.  The value it had
 * is kept in GC_RUN_DIR/lo-NETNS.fwd4 (fwd6) by whoever changed it first, so
 * the last user in the namespace puts it back even after a crash.
 */
static const char *fwd_sysctl(int family)
{
	return family == AF_INET ? "/proc/sys/net/ipv4/conf/lo/forwarding"
				 : "/proc/sys/net/ipv6/conf/lo/forwarding";
}

static void fwd_file(char *path, size_t len, int family)
{
	snprintf(path, len, "lo-%lu.fwd%d", K.netns, family == AF_INET ? 4 : 6);
}

void kprog_need_forwarding(int family)
{
	int *done = family == AF_INET ? &K.fwd_v4 : &K.fwd_v6;
	char name[64];

	pthread_mutex_lock(&K.lock);
	if (!*done && K.attached) {
		int lk = ns_lock(), fd, old;

		fwd_file(name, sizeof(name), family);
		fd = K.dirfd < 0 ? -1 : open_ours(name, O_WRONLY | O_CREAT | O_EXCL);
		old = sysctl_set(fwd_sysctl(family), 1);
		if (fd >= 0) { /* we are first: remember what it was */
			dprintf(fd, "%d\n", old);
			close(fd);
		}
		ns_unlock(lk);
		*done = 1;
	}
	pthread_mutex_unlock(&K.lock);
}

static void restore_forwarding(void)
{
	for (int family = AF_INET; family; family = family == AF_INET ? AF_INET6 : 0) {
		char name[64], buf[16];
		ssize_t n;
		int fd;

		fwd_file(name, sizeof(name), family);
		if ((fd = open_ours(name, O_RDONLY)) < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			if (buf[0] >= '0' && buf[0] <= '9')
				sysctl_set(fwd_sysctl(family), atoi(buf));
		}
		unlinkat(K.dirfd, name, 0);
	}
}

static void detach_locked(void)
{
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = K.handle, .priority = GC_TC_PRIO);
	libbpf_print_fn_t prev;
	int lk;

	if (!K.attached)
		return;
	lk = ns_lock();
	prev = quiet();
	bpf_tc_detach(&K.hook, &o);
	K.attached = 0;
	if (K.owner_fd >= 0) {
		unlinkat(K.dirfd, K.owner, 0);
		close(K.owner_fd);
		K.owner_fd = -1;
	}
	K.owner[0] = 0;
	if (K.dirfd >= 0 && reap_stale() == 0) /* the last user here puts forwarding back */
		restore_forwarding();
	quiet_end(prev);
	ns_unlock(lk);
	K.fwd_v4 = K.fwd_v6 = 0;
}

static void detach_at_exit(void)
{
	pthread_mutex_lock(&K.lock);
	detach_locked();
	pthread_mutex_unlock(&K.lock);
}

/*
 * Our owner file for handle h, created and locked: 0, 1 if h is taken by a
 * live owner (try another), -errno on failure.  A file left by an owner
 * that is gone is removed and made again.
 */
static int take_handle(__u32 h)
{
	for (int tries = 0; tries < 2; tries++) {
		owner_name(K.owner, sizeof(K.owner), h);
		int fd = open_ours(K.owner, O_RDWR | O_CREAT | O_EXCL);
		if (fd >= 0) {
			K.owner_fd = fd;
			if (flock(K.owner_fd, LOCK_EX | LOCK_NB)) { /* cannot be: made just now, under ns_lock */
				close(K.owner_fd);
				K.owner_fd = -1;
				return 1;
			}
			dprintf(K.owner_fd, "%d\n", (int)getpid()); /* for people; the lock is what counts */
			return 0;
		}
		if (fd != -EEXIST)
			return fd;
		if (!owner_dead(K.owner))
			return 1;
		unlinkat(K.dirfd, K.owner, 0);
	}
	return 1;
}

static int attach_locked(void)
{
	LIBBPF_OPTS(bpf_tc_opts, o, .priority = GC_TC_PRIO,
		    .prog_fd = bpf_program__fd(K.skel->progs.gc_fanout));
	static int atexit_done;
	libbpf_print_fn_t prev;
	struct stat st;
	int r = -EEXIST, lk;

	if (K.attached)
		return 0;
	memset(&K.hook, 0, sizeof(K.hook));
	K.hook.sz = sizeof(K.hook);
	K.hook.ifindex = 1; /* lo */
	K.hook.attach_point = BPF_TC_EGRESS;
	K.netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
	if ((r = run_dir()) < 0)
		return r;
	lk = ns_lock();
	prev = quiet();
	if (lk < 0) {
		r = gc_errf(-lk, "engine kernel: cannot lock %s/lock: %s", GC_RUN_DIR, strerror(-lk));
		goto out;
	}
	r = bpf_tc_hook_create(&K.hook); /* EEXIST: the clsact is there already */
	if (r && r != -EEXIST) {
		r = gc_errf(-r, "engine kernel: cannot add clsact to lo: %s", strerror(-r));
		goto out;
	}
	reap_stale();
	/*
	 * The handle: our pid if free, else random values above any pid.  The
	 * owner file comes first; a filter with the handle whose owner we cannot
	 * see (another pid namespace with another GC_RUN_DIR) is never removed:
	 * we take another handle.
	 */
	r = -EEXIST;
	for (int i = 0; i < 8 && r == -EEXIST; i++) {
		__u32 h = (__u32)getpid();
		int t;

		if (i > 0 && getrandom(&h, sizeof(h), 0) == sizeof(h))
			h |= 0x80000000u; /* pids stay below 2^22 */
		if ((t = take_handle(h)) < 0) {
			r = gc_errf(-t, "engine kernel: cannot make %s/%s: %s", GC_RUN_DIR, K.owner,
				    strerror(-t));
			goto out;
		}
		if (t > 0)
			continue;
		o.handle = h;
		o.prog_id = 0;
		r = bpf_tc_attach(&K.hook, &o);
		if (r) {
			unlinkat(K.dirfd, K.owner, 0);
			close(K.owner_fd);
			K.owner_fd = -1;
		}
		K.handle = h;
	}
	if (r) {
		K.owner[0] = 0;
		r = gc_errf(-r, "engine kernel: cannot attach to lo egress: %s", strerror(-r));
		goto out;
	}
	K.attached = 1;
	if (!atexit_done++)
		atexit(detach_at_exit);
out:
	quiet_end(prev);
	ns_unlock(lk);
	return r;
}

/* ---- what kernel.c uses ---------------------------------------------- */

int kprog_add(__u64 cookie, __u32 *sidx)
{
	int i, ret;

	pthread_mutex_lock(&K.lock);
	for (i = 0; i < GC_KSOCKS && K.used[i]; i++)
		;
	if (i == GC_KSOCKS) {
		ret = gc_errf(EMFILE, "engine kernel: more than %d sockets in this process", GC_KSOCKS);
		goto out;
	}
	if ((ret = attach_locked()))
		goto out;
	if (bpf_map_update_elem(bpf_map__fd(K.skel->maps.socks), &cookie, &(__u32){ (__u32)i }, BPF_ANY)) {
		ret = gc_errf(errno, "engine kernel: cannot register the socket: %s", strerror(errno));
		if (K.users == 0)
			detach_locked();
		goto out;
	}
	memset(&K.heads[i], 0, sizeof(K.heads[i]));
	K.used[i] = 1;
	K.users++;
	*sidx = (__u32)i;
	ret = 0;
out:
	pthread_mutex_unlock(&K.lock);
	return ret;
}

void kprog_del(__u64 cookie, __u32 sidx)
{
	pthread_mutex_lock(&K.lock);
	bpf_map_delete_elem(bpf_map__fd(K.skel->maps.socks), &cookie);
	memset(&K.heads[sidx], 0, sizeof(K.heads[sidx]));
	K.used[sidx] = 0;
	if (--K.users == 0)
		detach_locked();
	pthread_mutex_unlock(&K.lock);
}

struct gc_khead *kprog_head(__u32 sidx)
{
	return &K.heads[sidx];
}

int kprog_set_slots(__u32 sidx, int map_fd)
{
	return bpf_map_update_elem(bpf_map__fd(K.skel->maps.groups), &sidx, &map_fd, BPF_ANY);
}

unsigned kprog_gen(void)
{
	return K.gen;
}
