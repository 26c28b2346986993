/* SPDX-License-Identifier: MIT */
/*
 * kernel.c - the "kernel" engine: the data crosses into the kernel once per
 * chunk of GC_KCHUNK members, and a TC egress program on lo (bpf/fanout.bpf.c)
 * clones it out to every member, as the paper's patched UDP output did.
 *
 * Per process: one copy of the program and its maps, attached to lo's clsact
 * egress in the caller's network namespace with handle = pid, so processes
 * never see each other's groups.  It is attached on the first kernel-engine
 * socket and detached when the last one is released or the process exits; a
 * filter left by a killed process is removed by the next attach (owner files
 * in GC_RUN_DIR).
 *
 * Per socket: a trigger socket of the library's own (no UDP checksum, so the
 * program writes the full checksum; connected to loopback), a pipe, and an
 * mmapable map of member slots.  A payload above GC_SPLICE_MIN bytes goes
 * write() -> pipe -> splice() -> trigger, so it sits in page fragments and
 * each clone copies only its headers.
 *
 * Members the kernel cannot send (no neighbour entry yet, needs fragmenting,
 * a local non-loopback address, more than GC_KDATA bytes of prepend or
 * append, an IPv4 member of a dual-stack socket) are sent by the mmsg engine
 * in the same call and counted in gc_stats.user_fallback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <signal.h>
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
#include "fanout.h"
#include "fanout.skel.h"

#define GC_TC_PRIO 0x4743       /* "GC": our filters' priority on lo egress */
#define GC_RUN_DIR "/run/groupcast"
#define GC_SPLICE_MIN 256       /* smaller payloads are cheaper to copy per clone */
#define GC_PIPE_SIZE (128 * 1024)

#ifndef UDP_NO_CHECK6_TX
#define UDP_NO_CHECK6_TX 101
#endif

struct gc_kern {
	unsigned gen;           /* K.gen when made: a forked child does not own it */
	int trig;               /* trigger socket */
	int pipe[2];
	__u32 sidx;             /* index in heads / groups */
	int slots_fd;
	struct gc_kslot *slots; /* mmap of the slot map */
	size_t cap;
	struct gc_giovec *user; /* members handed to the mmsg engine */
	size_t *user_idx;
	int *user_err;
	size_t user_cap;
};

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

static int kernel_available(void)
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

static void need_forwarding(int family)
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

/* ---- per socket ------------------------------------------------------ */

static void kern_free(struct gc_kern *k)
{
	if (k->trig >= 0)
		close(k->trig);
	if (k->pipe[0] >= 0)
		close(k->pipe[0]);
	if (k->pipe[1] >= 0)
		close(k->pipe[1]);
	if (k->slots)
		munmap(k->slots, k->cap * sizeof(*k->slots));
	if (k->slots_fd >= 0)
		close(k->slots_fd);
	free(k->user);
	free(k->user_idx);
	free(k->user_err);
	free(k);
}

static void kernel_release(struct gc_sock *s)
{
	struct gc_kern *k = s->kern;

	if (!k)
		return;
	s->kern = NULL;
	if (k->gen != K.gen) { /* made before a fork: the maps are the parent's */
		kern_free(k);
		return;
	}
	pthread_mutex_lock(&K.lock);
	if (K.skel) {
		__u64 cookie;
		socklen_t len = sizeof(cookie);

		if (getsockopt(k->trig, SOL_SOCKET, SO_COOKIE, &cookie, &len) == 0)
			bpf_map_delete_elem(bpf_map__fd(K.skel->maps.socks), &cookie);
		memset(&K.heads[k->sidx], 0, sizeof(K.heads[k->sidx]));
	}
	K.used[k->sidx] = 0;
	if (--K.users == 0)
		detach_locked();
	pthread_mutex_unlock(&K.lock);
	kern_free(k);
}

/* Source port, bound address, TOS and TTL of the user socket, for the head. */
static int fill_head(struct gc_sock *s, struct gc_khead *h)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v = 0;

	if (getsockname(s->fd, (struct sockaddr *)&ss, &len))
		return gc_seterr(errno, "sd: %d: getsockname failed", s->fd);
	if ((ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
				     : ((struct sockaddr_in6 *)&ss)->sin6_port) == 0) {
		/* not bound yet: bind to an ephemeral port, as the first sendto() would */
		struct sockaddr_storage any = { .ss_family = (sa_family_t)s->family };

		if (bind(s->fd, (struct sockaddr *)&any, gc_addrlen(&any)) ||
		    getsockname(s->fd, (struct sockaddr *)&ss, &(socklen_t){ sizeof(ss) }))
			return gc_seterr(errno, "sd: %d: cannot bind to an ephemeral port", s->fd);
	}
	memset(h, 0, sizeof(*h));
	h->family = s->family == AF_INET ? 4 : 6;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		h->sport = a->sin_port;
		h->bound = a->sin_addr.s_addr != htonl(INADDR_ANY);
		memcpy(h->saddr, &a->sin_addr, 4);
		len = sizeof(v);
		h->tos = getsockopt(s->fd, IPPROTO_IP, IP_TOS, &v, &len) ? 0 : (__u8)v;
		len = sizeof(v);
		h->ttl = getsockopt(s->fd, IPPROTO_IP, IP_TTL, &v, &len) ? 64 : (__u8)v;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		h->sport = a->sin6_port;
		h->bound = !IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
		memcpy(h->saddr, &a->sin6_addr, 16);
		len = sizeof(v);
		h->tos = getsockopt(s->fd, IPPROTO_IPV6, IPV6_TCLASS, &v, &len) ? 0 : (__u8)v;
		len = sizeof(v);
		h->ttl = getsockopt(s->fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v, &len) || v < 0 ? 64 : (__u8)v;
	}
	return 0;
}

static struct gc_kern *kern_setup(struct gc_sock *s)
{
	struct sockaddr_storage lo = { .ss_family = (sa_family_t)s->family };
	struct gc_kern *k = calloc(1, sizeof(*k));
	int one = 1, sidx = -1;
	__u64 cookie;
	socklen_t len = sizeof(cookie);

	if (!k) {
		gc_seterr(ENOMEM, "engine kernel: no memory");
		return NULL;
	}
	k->trig = k->pipe[0] = k->pipe[1] = k->slots_fd = -1;
	k->gen = K.gen;
	pthread_mutex_lock(&K.lock);
	for (int i = 0; i < GC_KSOCKS; i++)
		if (!K.used[i]) {
			sidx = i;
			break;
		}
	if (sidx < 0) {
		gc_seterr(EMFILE, "engine kernel: more than %d sockets in this process", GC_KSOCKS);
		goto fail;
	}
	if (s->family == AF_INET) {
		((struct sockaddr_in *)&lo)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		((struct sockaddr_in *)&lo)->sin_port = htons(9);
	} else {
		((struct sockaddr_in6 *)&lo)->sin6_addr = in6addr_loopback;
		((struct sockaddr_in6 *)&lo)->sin6_port = htons(9);
	}
	k->trig = socket(s->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (k->trig < 0 ||
	    (s->family == AF_INET ? setsockopt(k->trig, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one))
				  : setsockopt(k->trig, IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof(one))) ||
	    connect(k->trig, (struct sockaddr *)&lo, gc_addrlen(&lo)) ||
	    getsockopt(k->trig, SOL_SOCKET, SO_COOKIE, &cookie, &len) ||
	    pipe2(k->pipe, O_CLOEXEC | O_NONBLOCK)) {
		gc_seterr(errno, "engine kernel: cannot make the trigger socket: %s", strerror(errno));
		goto fail;
	}
	fcntl(k->pipe[1], F_SETPIPE_SZ, GC_PIPE_SIZE);
	if (fill_head(s, &K.heads[sidx]))
		goto fail;
	if (attach_locked())
		goto fail;
	if (bpf_map_update_elem(bpf_map__fd(K.skel->maps.socks), &cookie, &(__u32){ (__u32)sidx }, BPF_ANY)) {
		gc_seterr(errno, "engine kernel: cannot register the socket: %s", strerror(errno));
		if (K.users == 0)
			detach_locked();
		goto fail;
	}
	k->sidx = (__u32)sidx;
	K.used[sidx] = 1;
	K.users++;
	pthread_mutex_unlock(&K.lock);
	return k;
fail:
	pthread_mutex_unlock(&K.lock);
	kern_free(k);
	return NULL;
}

/* Grow the slot map to hold n members (a new map replaces the old one). */
static int slots_reserve(struct gc_kern *k, size_t n)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_MMAPABLE | BPF_F_INNER_MAP);
	size_t cap = k->cap ? k->cap : 64;
	struct gc_kslot *m;
	int fd;

	if (n <= k->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gc_slots", 4, sizeof(struct gc_kslot), (__u32)cap, &o);
	if (fd < 0)
		return -1;
	m = mmap(NULL, cap * sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED || bpf_map_update_elem(bpf_map__fd(K.skel->maps.groups), &k->sidx, &fd, BPF_ANY)) {
		if (m != MAP_FAILED)
			munmap(m, cap * sizeof(*m));
		close(fd);
		return -1;
	}
	if (k->slots) {
		memcpy(m, k->slots, k->cap * sizeof(*m)); /* keep the cached routes */
		munmap(k->slots, k->cap * sizeof(*m));
		close(k->slots_fd);
	}
	k->slots = m;
	k->slots_fd = fd;
	k->cap = cap;
	return 0;
}

static int user_reserve(struct gc_kern *k, size_t n)
{
	void *a, *b, *c;

	if (n <= k->user_cap)
		return 0;
	a = realloc(k->user, n * sizeof(*k->user));
	if (a)
		k->user = a;
	b = realloc(k->user_idx, n * sizeof(*k->user_idx));
	if (b)
		k->user_idx = b;
	c = realloc(k->user_err, n * sizeof(*k->user_err));
	if (c)
		k->user_err = c;
	if (!a || !b || !c)
		return -1;
	k->user_cap = n;
	return 0;
}

/* 16-bit ones-complement sum in memory order (RFC 1071), folded. */
static __u32 csum16(const void *p, size_t len)
{
	const unsigned char *b = p;
	__u64 s = 0;
	__u16 w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		__u64 q;

		memcpy(&q, b + i, 8);
		s += (q & 0xffffffffu) + (q >> 32);
	}
	for (; i + 2 <= len; i += 2) {
		memcpy(&w, b + i, 2);
		s += w;
	}
	if (i < len) {
		unsigned char last[2] = { b[i], 0 };

		memcpy(&w, last, 2);
		s += w;
	}
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (__u32)s;
}

/* A sum of bytes that start at an odd offset counts byte-swapped. */
static __u32 at(__u32 sum, size_t offset)
{
	return offset & 1 ? ((sum & 0xff) << 8) | (sum >> 8) : sum;
}

/* Write member i's slot; returns 1 if the kernel takes it, 0 if user space must. */
static int put_slot(struct gc_sock *s, struct gc_kslot *m, const struct gc_giovec *g, __u32 shared_sum,
		    size_t slen)
{
	unsigned char daddr[16] = { 0 };
	__u16 dport;
	__u32 flags = 0;

	if (g->dest.ss_family != s->family || g->prepend.iov_len > GC_KDATA || g->append.iov_len > GC_KDATA) {
		m->flags = GC_KF_SKIP;
		m->result = GC_KRES_USER;
		return 0;
	}
	if (s->family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&g->dest;

		in_addr_t h = ntohl(a->sin_addr.s_addr);

		memcpy(daddr, &a->sin_addr, 4);
		dport = a->sin_port;
		/* 127/8 is local but for the broadcast routes the kernel puts on
		 * lo; those (and every other non-unicast) go to user space, which
		 * returns EACCES as sendto() does */
		if ((h >> 24) == 127 && h != 0x7fffffff && h != 0x7f000000)
			flags = GC_KF_LOCAL;
	} else {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&g->dest;

		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			m->flags = GC_KF_SKIP;
			m->result = GC_KRES_USER;
			return 0;
		}
		memcpy(daddr, &a->sin6_addr, 16);
		dport = a->sin6_port;
		if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
			flags = GC_KF_LOCAL;
	}
	if (memcmp(m->daddr, daddr, 16) || m->flags != flags) {
		memcpy(m->daddr, daddr, 16);
		m->ifindex = 0; /* a new destination: the program resolves it again */
		if (!(flags & GC_KF_LOCAL))
			need_forwarding(s->family);
	}
	m->dport = dport;
	m->flags = flags;
	m->plen = (__u8)g->prepend.iov_len;
	m->alen = (__u8)g->append.iov_len;
	if (m->plen || m->alen) {
		if (m->plen) /* an empty iovec may have a NULL base */
			memcpy(m->data, g->prepend.iov_base, m->plen);
		if (m->alen)
			memcpy(m->data + m->plen, g->append.iov_base, m->alen);
		m->data_csum = csum16(m->data, m->plen) + at(shared_sum, m->plen) +
			       at(csum16(m->data + m->plen, m->alen), m->plen + slen);
	}
	m->result = GC_KRES_PENDING;
	return 1;
}

/* One trigger datagram carrying the shared payload. */
static int trigger(struct gc_kern *k, const struct iovec *shared)
{
	ssize_t r;

	if (shared->iov_len < GC_SPLICE_MIN) {
		r = send(k->trig, shared->iov_base, shared->iov_len, 0);
		return r < 0 ? -1 : 0;
	}
	r = write(k->pipe[1], shared->iov_base, shared->iov_len);
	if (r != (ssize_t)shared->iov_len) {
		if (r > 0) /* never leave a partial payload behind for the next send */
			while (read(k->pipe[0], &(char[4096]){ 0 }, 4096) > 0)
				;
		return -1;
	}
	r = splice(k->pipe[0], NULL, k->trig, NULL, shared->iov_len, 0);
	if (r != (ssize_t)shared->iov_len) {
		while (read(k->pipe[0], &(char[4096]){ 0 }, 4096) > 0)
			;
		return -1;
	}
	return 0;
}

static size_t kernel_send(struct gc_sock *s, const struct gc_batch *b)
{
	struct gc_kern *k = s->kern;
	struct gc_khead *h;
	size_t nuser = 0, sent = 0, nk = 0;
	__u32 shared_sum;

	if (k && k->gen != K.gen) { /* inherited across fork(): start over */
		kernel_release(s);
		k = NULL;
	}
	if (!k && (kernel_available() || !(k = s->kern = kern_setup(s))))
		goto all_user;
	if (b->shared->iov_len + 8 + (s->family == AF_INET ? 20 : 40) > 65535)
		goto all_user; /* the trigger itself would be fragmented on lo */
	if (slots_reserve(k, b->n) || user_reserve(k, b->n))
		goto all_user;
	h = &K.heads[k->sidx];
	shared_sum = csum16(b->shared->iov_base, b->shared->iov_len);
	for (size_t i = 0; i < b->n; i++)
		nk += (size_t)put_slot(s, &k->slots[i], &b->rec[i], shared_sum, b->shared->iov_len);
	h->n = (__u32)b->n;
	h->data_csum = shared_sum;
	h->next_chunk = 0;
	for (size_t c = 0; nk && c < (b->n + GC_KCHUNK - 1) / GC_KCHUNK; c++)
		if (trigger(k, b->shared))
			break; /* the members of the chunks not triggered stay PENDING: user space sends them */
	for (size_t i = 0; i < b->n; i++) {
		__s32 r = k->slots[i].result;

		if (r == GC_KRES_PENDING || r == GC_KRES_USER) {
			k->user[nuser] = b->rec[i];
			k->user_idx[nuser++] = i;
			continue;
		}
		b->gerrno[i] = r < 0 ? -r : 0;
		sent += r == 0;
	}
	if (nuser) {
		struct gc_batch ub = { b->shared, k->user, nuser, b->flags, k->user_err };

		sent += gc_mmsg_ops.send(s, &ub);
		for (size_t j = 0; j < nuser; j++)
			b->gerrno[k->user_idx[j]] = k->user_err[j];
		s->stats.user_fallback += nuser;
	}
	return sent;

all_user:
	/* setup failed (out of sockets or memory): never fail the send for it */
	s->stats.user_fallback += b->n;
	return gc_mmsg_ops.send(s, b);
}

static int kernel_prepare(struct gc_sock *s)
{
	if (s->kern && s->kern->gen != K.gen)
		kernel_release(s);
	if (!s->kern && !(s->kern = kern_setup(s)))
		return -1;
	return 0;
}

const struct gc_engine_ops gc_kernel_ops = {
	.available = kernel_available,
	.prepare = kernel_prepare,
	.send = kernel_send,
	.release = kernel_release,
};
