/* SPDX-License-Identifier: MIT */
/*
 * kprog.c - the kernel engine's program, one per process: loading it,
 * attaching it to lo's egress, detaching it, removing filters that killed
 * processes left behind, lo's forwarding setting, and what a forked child
 * does.  kernel.c (the per-socket half) uses it through kprog.h.
 *
 * The program is attached to lo's clsact egress in the caller's network
 * namespace with handle = pid and priority GC_TC_PRIO, so processes never see
 * each other's groups and other filters are never touched.  It is attached
 * with the first kernel-engine socket and detached with the last one, or at
 * exit.  A process killed before it could detach leaves a filter behind; the
 * next attach in that namespace finds it (rtnetlink dump), sees that its
 * owner (GC_RUN_DIR/lo-NETNS-PID, holding the owner's start time) is gone,
 * and removes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "internal.h"
#include "kprog.h"
#include "fanout.skel.h"

#define GC_TC_PRIO 0x4743       /* "GC": our filters' priority on lo egress */
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
	char owner[128];        /* our owner file */
	int fwd_v4, fwd_v6;     /* 1: lo forwarding is on for us */
	unsigned long netns;    /* inode of our network namespace */
	unsigned gen;           /* bumped in a forked child, which starts over */
} K = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- load, attach, detach -------------------------------------------- */

static int silent(enum libbpf_print_level l, const char *f, va_list a)
{
	(void)l, (void)f, (void)a;
	return 0;
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
		snprintf(K.why, sizeof(K.why), "engine kernel: needs CAP_NET_ADMIN to attach to lo (and CAP_BPF)");
		return;
	}
	libbpf_set_print(silent);
	K.skel = fanout__open_and_load();
	if (!K.skel) {
		K.err = errno ? errno : EPERM;
		snprintf(K.why, sizeof(K.why), "engine kernel: loading the BPF program failed: %s%s",
			 strerror(K.err), K.err == EPERM ? " (needs CAP_BPF and CAP_NET_ADMIN)" : "");
		return;
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(K.skel->maps.heads), 0);
	if (m == MAP_FAILED) {
		K.err = errno;
		snprintf(K.why, sizeof(K.why), "engine kernel: mmap of the heads map failed: %s", strerror(K.err));
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
		gc_seterr(ENOTSUP, "%s", K.why);
	pthread_mutex_unlock(&K.lock);
	return err ? -1 : 0;
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

static unsigned long long proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		       &start);
	fclose(f);
	return start;
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
		.n = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETTFILTER,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.t = { .tcm_family = AF_UNSPEC, .tcm_ifindex = 1,
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
			int alen = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*t)), bpf = 0, ours = 0;

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
				goto done;
			if (TC_H_MAJ(t->tcm_info) >> 16 != GC_TC_PRIO || !t->tcm_handle)
				continue;
			for (struct rtattr *a = (void *)((char *)t + NLMSG_ALIGN(sizeof(*t))); RTA_OK(a, alen);
			     a = RTA_NEXT(a, alen)) {
				if (a->rta_type == TCA_KIND)
					bpf = strcmp(RTA_DATA(a), "bpf") == 0;
				if (a->rta_type == TCA_OPTIONS) {
					int olen = (int)RTA_PAYLOAD(a);

					for (struct rtattr *o = RTA_DATA(a); RTA_OK(o, olen); o = RTA_NEXT(o, olen))
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

/*
 * Remove our filters whose owner (handle = pid, with its start time in
 * GC_RUN_DIR/lo-NETNS-PID, written before it attached) is gone: killed
 * before it could detach.  Returns how many other live owners remain.
 */
static int reap_stale(void)
{
	__u32 h[256];
	int n = our_filters(h, 256), alive = 0;

	for (int i = 0; i < n; i++) {
		unsigned long long start = 0;
		char path[128];
		FILE *f;

		if (h[i] == (__u32)getpid())
			continue;
		snprintf(path, sizeof(path), GC_RUN_DIR "/lo-%lu-%u", K.netns, h[i]);
		if ((f = fopen(path, "r"))) {
			if (fscanf(f, "%llu", &start) != 1)
				start = 0;
			fclose(f);
		}
		if (start && proc_start((pid_t)h[i]) == start) {
			alive++;
			continue;
		}
		LIBBPF_OPTS(bpf_tc_opts, o, .handle = h[i], .priority = GC_TC_PRIO);
		bpf_tc_detach(&K.hook, &o);
		unlink(path);
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
	snprintf(path, len, GC_RUN_DIR "/lo-%lu.fwd%d", K.netns, family == AF_INET ? 4 : 6);
}

void kprog_need_forwarding(int family)
{
	int *done = family == AF_INET ? &K.fwd_v4 : &K.fwd_v6;
	char path[128];

	pthread_mutex_lock(&K.lock);
	if (!*done && K.attached) {
		int fd, old;

		fwd_file(path, sizeof(path), family);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		old = sysctl_set(fwd_sysctl(family), 1);
		if (fd >= 0) { /* we are first: remember what it was */
			dprintf(fd, "%d\n", old);
			close(fd);
		}
		*done = 1;
	}
	pthread_mutex_unlock(&K.lock);
}

static void restore_forwarding(void)
{
	for (int family = AF_INET; family; family = family == AF_INET ? AF_INET6 : 0) {
		char path[128];
		FILE *f;
		int old;

		fwd_file(path, sizeof(path), family);
		if (!(f = fopen(path, "r")))
			continue;
		if (fscanf(f, "%d", &old) == 1 && old >= 0)
			sysctl_set(fwd_sysctl(family), old);
		fclose(f);
		unlink(path);
	}
}

static void detach_locked(void)
{
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = (__u32)getpid(), .priority = GC_TC_PRIO);

	if (!K.attached)
		return;
	bpf_tc_detach(&K.hook, &o);
	if (K.owner[0])
		unlink(K.owner);
	if (reap_stale() == 0) /* the last user here puts forwarding back */
		restore_forwarding();
	K.fwd_v4 = K.fwd_v6 = 0;
	K.attached = 0;
}

static void detach_at_exit(void)
{
	pthread_mutex_lock(&K.lock);
	detach_locked();
	pthread_mutex_unlock(&K.lock);
}

static int attach_locked(void)
{
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = (__u32)getpid(), .priority = GC_TC_PRIO,
		    .prog_fd = bpf_program__fd(K.skel->progs.gc_fanout));
	static int atexit_done;
	struct stat st;
	int r;

	if (K.attached)
		return 0;
	memset(&K.hook, 0, sizeof(K.hook));
	K.hook.sz = sizeof(K.hook);
	K.hook.ifindex = 1; /* lo */
	K.hook.attach_point = BPF_TC_EGRESS;
	r = bpf_tc_hook_create(&K.hook);
	if (r && r != -EEXIST)
		return gc_seterr(-r, "engine kernel: cannot add clsact to lo: %s", strerror(-r));
	K.netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
	reap_stale();
	/* the owner file comes first: a filter without one is stale */
	mkdir(GC_RUN_DIR, 0755);
	snprintf(K.owner, sizeof(K.owner), GC_RUN_DIR "/lo-%lu-%d", K.netns, (int)getpid());
	{
		FILE *f = fopen(K.owner, "w");

		if (!f)
			return gc_seterr(errno, "engine kernel: cannot write %s: %s", K.owner, strerror(errno));
		fprintf(f, "%llu\n", proc_start(getpid()));
		fclose(f);
	}
	r = bpf_tc_attach(&K.hook, &o);
	if (r == -EEXIST) { /* a filter left by an earlier process with our pid */
		LIBBPF_OPTS(bpf_tc_opts, old, .handle = (__u32)getpid(), .priority = GC_TC_PRIO);

		bpf_tc_detach(&K.hook, &old);
		o.prog_id = 0;
		r = bpf_tc_attach(&K.hook, &o);
	}
	if (r) {
		unlink(K.owner);
		return gc_seterr(-r, "engine kernel: cannot attach to lo egress: %s", strerror(-r));
	}
	K.attached = 1;
	if (!atexit_done++)
		atexit(detach_at_exit);
	return 0;
}

/* ---- what kernel.c uses ---------------------------------------------- */

int kprog_add(__u64 cookie, __u32 *sidx)
{
	int i, ret = -1;

	pthread_mutex_lock(&K.lock);
	for (i = 0; i < GC_KSOCKS && K.used[i]; i++)
		;
	if (i == GC_KSOCKS) {
		gc_seterr(EMFILE, "engine kernel: more than %d sockets in this process", GC_KSOCKS);
		goto out;
	}
	if (attach_locked())
		goto out;
	if (bpf_map_update_elem(bpf_map__fd(K.skel->maps.socks), &cookie, &(__u32){ (__u32)i }, BPF_ANY)) {
		gc_seterr(errno, "engine kernel: cannot register the socket: %s", strerror(errno));
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
