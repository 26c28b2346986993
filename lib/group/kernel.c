/* SPDX-License-Identifier: MIT */
/*
 * kernel.c - the "kernel" engine: the data crosses into the kernel once per
 * chunk of GC_KCHUNK members, and a TC egress program on lo (bpf/fanout.bpf.c)
 * clones it out to every member, as the paper's patched UDP output did.
 *
 * Per process: one copy of the program and its maps (kprog.c), attached to
 * lo while a kernel-engine socket exists.
 *
 * Per socket: a trigger socket of the library's own (no UDP checksum, so the
 * program writes the full checksum; connected to loopback), a pipe, and an
 * mmapable map of member slots.  The trigger goes to port 0 of the loopback
 * address, where no socket can listen.  A payload above GC_SPLICE_MIN bytes goes
 * write() -> pipe -> splice() -> trigger, so it sits in page fragments and
 * each clone copies only its headers.
 *
 * Routes are cached per destination address, not per slot: the program
 * caches a member's route in its slot, and when an address moves into a slot
 * (the group was replaced or reordered) the library seeds the slot from its
 * own per-socket table of addresses (struct kroutes), filled from the slots
 * the program resolved.  So replacing a group with the same members in any
 * order costs no route look-ups.
 *
 * Members the kernel cannot send (no neighbour entry yet, needs fragmenting,
 * a local non-loopback address, more than GC_KDATA bytes of prepend or
 * append, an IPv4 member of a dual-stack socket) are sent by the mmsg engine
 * in the same call and counted in gc_stats.user_fallback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "internal.h"
#include "kprog.h"

#define GC_SPLICE_MIN 256 /* smaller payloads are cheaper to copy per clone */
#define GC_PIPE_SIZE (128 * 1024)
#define KR_PROBES 16 /* probes per look-up: bounds the cost of colliding addresses */

/* One destination address and the route the program last resolved for it. */
struct kroute_ent {
	__u8 daddr[16];
	__u32 used;
	struct gc_kroute rt;
};

/* Per socket: open addressing on a seeded hash of the address (the addresses
 * may be chosen by peers: a relay's subscribers), at most half full; when
 * full it is emptied at the start of the next send and fills again. */
struct kroutes {
	struct kroute_ent *e;
	size_t mask, count;
	__u64 seed;
};

#ifndef UDP_NO_CHECK6_TX
#define UDP_NO_CHECK6_TX 101
#endif

struct gc_kern {
	unsigned gen; /* kprog_gen() when made: a forked child does not own it */
	int trig;     /* trigger socket */
	__u64 cookie; /* its SO_COOKIE: how the program finds this socket */
	int pipe[2];
	__u32 sidx; /* index in heads / groups */
	int slots_fd;
	struct gc_kslot *slots; /* mmap of the slot map */
	size_t cap;
	struct gc_giovec *user; /* members handed to the mmsg engine */
	size_t *user_idx;
	int *user_err;
	size_t user_cap;
	int bound_lo;		       /* the user socket is bound to a loopback address */
	int fwd;		       /* kprog_need_forwarding() done for this socket */
	struct kroutes routes;	       /* address -> route */
	size_t *changed;	       /* slots whose address changed in this send... */
	struct kroute_ent **changed_e; /* ...and their entries in routes (or NULL) */
	size_t nchanged;
};

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
	free(k->routes.e);
	free(k->changed);
	free(k->changed_e);
	free(k);
}

static void kernel_release(struct gc_sock *s)
{
	struct gc_kern *k = s->kern;

	if (!k)
		return;
	s->kern = NULL;
	if (k->gen == kprog_gen()) /* else made before a fork: the maps are the parent's */
		kprog_del(k->cookie, k->sidx);
	kern_free(k);
}

static int read_int(const char *path, int dflt)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return dflt;
	buf[n] = 0;
	return atoi(buf);
}

/* Source port, bound address, TOS, TTL, DF and priority of the user socket,
 * for the head and the trigger socket k->trig. */
static int fill_head(struct gc_sock *s, struct gc_kern *k, struct gc_khead *h)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v = 0;

	if (getsockname(s->fd, (struct sockaddr *)&ss, &len))
		return gc_errf(errno, "sd: %d: getsockname failed", s->fd);
	if ((ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
				     : ((struct sockaddr_in6 *)&ss)->sin6_port) == 0) {
		/* not bound yet: bind to an ephemeral port, as the first sendto() would */
		struct sockaddr_storage any = { .ss_family = (sa_family_t)s->family };

		if (bind(s->fd, (struct sockaddr *)&any, gc_addrlen(&any)) ||
		    getsockname(s->fd, (struct sockaddr *)&ss, &(socklen_t){ sizeof(ss) }))
			return gc_errf(errno, "sd: %d: cannot bind to an ephemeral port", s->fd);
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
		v = read_int("/proc/sys/net/ipv4/route/min_pmtu", 552);
		h->check_above = (__u16)(v > 1280 ? v : 1280);
		k->bound_lo = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		h->sport = a->sin6_port;
		h->bound = !IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
		memcpy(h->saddr, &a->sin6_addr, 16);
		len = sizeof(v);
		h->tos = getsockopt(s->fd, IPPROTO_IPV6, IPV6_TCLASS, &v, &len) ? 0 : (__u8)v;
		len = sizeof(v);
		h->ttl = getsockopt(s->fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v, &len) || v < 0
			? 64
			: (__u8)v;
		h->check_above = 1280; /* IPV6_MIN_MTU: no IPv6 path MTU is below it */
		k->bound_lo = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
	}
	/* The copies are clones of the trigger: give it the user socket's DF
	 * choice (its IPv4 header's frag_off is copied) and its priority (the
	 * qdisc of the member's interface classifies by it). */
	len = sizeof(v);
	if (s->family == AF_INET && getsockopt(s->fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, &len) == 0)
		setsockopt(k->trig, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v));
	len = sizeof(v);
	if (getsockopt(s->fd, SOL_SOCKET, SO_PRIORITY, &v, &len) == 0 && v)
		setsockopt(k->trig, SOL_SOCKET, SO_PRIORITY, &v, sizeof(v));
	return 0;
}

/* s->kern made: 0, or -errno with the message. */
static int kern_setup(struct gc_sock *s)
{
	struct sockaddr_storage lo = { .ss_family = (sa_family_t)s->family };
	struct gc_kern *k = calloc(1, sizeof(*k));
	socklen_t len = sizeof(k->cookie);
	int one = 1, r;

	if (!k)
		return gc_errf(ENOMEM, "engine kernel: no memory");
	k->trig = k->pipe[0] = k->pipe[1] = k->slots_fd = -1;
	k->gen = kprog_gen();
	if (getrandom(&k->routes.seed, sizeof(k->routes.seed), GRND_NONBLOCK) != sizeof(k->routes.seed))
		k->routes.seed = (__u64)(uintptr_t)k ^ 0x9e3779b97f4a7c15ull;
	if (s->family == AF_INET) {
		((struct sockaddr_in *)&lo)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		((struct sockaddr_in *)&lo)->sin_port = htons(0);
	} else {
		((struct sockaddr_in6 *)&lo)->sin6_addr = in6addr_loopback;
		((struct sockaddr_in6 *)&lo)->sin6_port = htons(0);
	}
	/* Port 0: no UDP socket can be bound to it, so if our filter is missing
	 * (deleted by hand) the trigger and its payload reach nobody; the ICMP
	 * port unreachable that answers it fails the next trigger, and the
	 * members left PENDING go through the user path. */
	k->trig = socket(s->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (k->trig < 0 ||
	    (s->family == AF_INET
		     ? setsockopt(k->trig, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one))
		     : setsockopt(k->trig, IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof(one))) ||
	    connect(k->trig, (struct sockaddr *)&lo, gc_addrlen(&lo)) ||
	    getsockopt(k->trig, SOL_SOCKET, SO_COOKIE, &k->cookie, &len) ||
	    pipe2(k->pipe, O_CLOEXEC | O_NONBLOCK)) {
		r = gc_errf(errno, "engine kernel: cannot make the trigger socket: %s", strerror(errno));
		goto fail;
	}
	fcntl(k->pipe[1], F_SETPIPE_SZ, GC_PIPE_SIZE);
	if ((r = kprog_add(k->cookie, &k->sidx)))
		goto fail;
	if ((r = fill_head(s, k, kprog_head(k->sidx)))) {
		kprog_del(k->cookie, k->sidx);
		goto fail;
	}
	s->kern = k;
	return 0;
fail:
	kern_free(k);
	return r;
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
		return -errno;
	m = mmap(NULL, cap * sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int r = m == MAP_FAILED ? -errno : kprog_set_slots(k->sidx, fd);
	if (r) {
		if (m != MAP_FAILED)
			munmap(m, cap * sizeof(*m));
		close(fd);
		return r;
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
	void *a, *b, *c, *d, *e;

	if (n <= k->user_cap)
		return 0;
	d = realloc(k->changed, n * sizeof(*k->changed));
	if (d)
		k->changed = d;
	e = realloc(k->changed_e, n * sizeof(*k->changed_e));
	if (e)
		k->changed_e = e;
	if (!d || !e)
		return -ENOMEM;
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
		return -ENOMEM;
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

/* Size the address table for a group of n: at least 2n entries, so every
 * member's address fits while it is at most half full. */
static int routes_reserve(struct kroutes *t, size_t n)
{
	size_t size = 64;
	struct kroute_ent *e;

	while (size < 2 * n)
		size *= 2;
	if (t->e && size <= t->mask + 1)
		return 0;
	if (!(e = calloc(size, sizeof(*e))))
		return -ENOMEM;
	free(t->e); /* the cache starts over: the slots keep their own routes */
	t->e = e;
	t->mask = size - 1;
	t->count = 0;
	return 0;
}

static size_t routes_hash(const struct kroutes *t, const __u8 *a)
{
	__u64 x, y;

	memcpy(&x, a, 8);
	memcpy(&y, a + 8, 8);
	x = (x ^ t->seed) * 0xff51afd7ed558ccdull;
	x ^= (y + t->seed) * 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	return (size_t)(x ^ (x >> 29));
}

/* The entry of address a, made (unresolved) if new; NULL when KR_PROBES
 * probes find neither it nor room (the slot then resolves on its own). */
static struct kroute_ent *routes_get(struct kroutes *t, const __u8 *a)
{
	size_t i = routes_hash(t, a);

	for (int p = 0; p < KR_PROBES; p++, i++) {
		struct kroute_ent *e = &t->e[i & t->mask];

		if (!e->used) {
			if (2 * (t->count + 1) > t->mask + 1)
				return NULL; /* full: emptied at the next send */
			memcpy(e->daddr, a, 16);
			e->used = 1;
			e->rt.ifindex = 0;
			t->count++;
			return e;
		}
		if (!memcmp(e->daddr, a, 16))
			return e;
	}
	return NULL;
}

/* Write member i's slot; returns 1 if the kernel takes it, 0 if user space must. */
static int put_slot(struct gc_sock *s, struct gc_kslot *m, const struct gc_giovec *g,
		    __u32 shared_sum, size_t slen)
{
	struct gc_kern *k = s->kern;
	unsigned char daddr[16] = { 0 };
	__u16 dport;
	__u32 flags = 0;

	if (g->dest.ss_family != s->family || g->prepend.iov_len > GC_KDATA ||
	    g->append.iov_len > GC_KDATA) {
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
	if (k->bound_lo && !(flags & GC_KF_LOCAL)) {
		/* sendto() refuses a loopback source off lo (EINVAL): let it say so */
		m->flags = GC_KF_SKIP;
		m->result = GC_KRES_USER;
		return 0;
	}
	if (memcmp(m->daddr, daddr, 16) || m->flags != flags || !m->rt.ifindex) {
		/* a new destination in this slot, or one not resolved yet: the
		 * route the table has for its address, if any (the program
		 * checks its age), else the program resolves it; either way
		 * the table learns the slot's route after the send */
		struct kroute_ent *e = routes_get(&k->routes, daddr);

		memcpy(m->daddr, daddr, 16);
		if (e && e->rt.ifindex)
			m->rt = e->rt;
		else
			m->rt.ifindex = 0;
		k->changed[k->nchanged] = (size_t)(m - k->slots);
		k->changed_e[k->nchanged++] = e;
		if (!(flags & GC_KF_LOCAL) && !k->fwd) { /* K.lock once per socket, not per member */
			kprog_need_forwarding(s->family);
			k->fwd = 1;
		}
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

/* One trigger datagram carrying the shared payload: 0, or -errno (-EIO: a
 * part of it). */
static int trigger(struct gc_kern *k, const struct iovec *shared)
{
	ssize_t r;
	int err;

	if (shared->iov_len < GC_SPLICE_MIN) {
		r = send(k->trig, shared->iov_base, shared->iov_len, 0);
		return r < 0 ? -errno : 0;
	}
	r = write(k->pipe[1], shared->iov_base, shared->iov_len);
	if (r != (ssize_t)shared->iov_len) {
		err = r < 0 ? errno : EIO;
		if (r > 0) /* never leave a partial payload behind for the next send */
			while (read(k->pipe[0], &(char[4096]){ 0 }, 4096) > 0)
				;
		return -err;
	}
	r = splice(k->pipe[0], NULL, k->trig, NULL, shared->iov_len, 0);
	if (r != (ssize_t)shared->iov_len) {
		err = r < 0 ? errno : EIO;
		while (read(k->pipe[0], &(char[4096]){ 0 }, 4096) > 0)
			;
		return -err;
	}
	return 0;
}

static size_t kernel_send(struct gc_sock *s, const struct gc_batch *b)
{
	struct gc_kern *k = s->kern;
	struct gc_khead *h;
	size_t nuser = 0, sent = 0, nk = 0;
	__u32 shared_sum;

	if (k && k->gen != kprog_gen()) { /* inherited across fork(): start over */
		kernel_release(s);
		k = NULL;
	}
	if (!k && (kprog_available() || kern_setup(s) < 0))
		goto all_user;
	k = s->kern;
	if (b->shared->iov_len + 8 + (s->family == AF_INET ? 20 : 40) > 65535)
		goto all_user; /* the trigger itself would be fragmented on lo */
	if (slots_reserve(k, b->n) || user_reserve(k, b->n) || routes_reserve(&k->routes, b->n))
		goto all_user;
	if (2 * k->routes.count > k->routes.mask) { /* full: start over (slots keep their routes) */
		memset(k->routes.e, 0, (k->routes.mask + 1) * sizeof(*k->routes.e));
		k->routes.count = 0;
	}
	k->nchanged = 0;
	h = kprog_head(k->sidx);
	shared_sum = csum16(b->shared->iov_base, b->shared->iov_len);
	for (size_t i = 0; i < b->n; i++)
		nk += (size_t)put_slot(s, &k->slots[i], &b->rec[i], shared_sum, b->shared->iov_len);
	h->n = (__u32)b->n;
	h->data_csum = shared_sum;
	h->next_chunk = 0;
	for (size_t c = 0; nk && c < (b->n + GC_KCHUNK - 1) / GC_KCHUNK; c++)
		if (trigger(k, b->shared))
			break; /* the members of the chunks not triggered stay PENDING: user space sends them */
	/* The results and routes can be read now, with no wait and no
	 * barrier: the TC program runs synchronously inside each trigger's
	 * send() (lo's egress path, in this thread), so when the last send()
	 * returned the program had finished with every slot. */
	for (size_t j = 0; j < k->nchanged; j++) {
		const struct gc_kslot *m = &k->slots[k->changed[j]];

		struct kroute_ent *e = k->changed_e[j];

		/* learn what the program resolved or re-checked (a seeded route
		 * it did not touch is what the table has) */
		if (e && m->rt.ifindex &&
		    (e->rt.resolved_ns != m->rt.resolved_ns || e->rt.mtu_ns != m->rt.mtu_ns ||
		     !e->rt.ifindex))
			e->rt = m->rt;
	}
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
	if (s->kern && s->kern->gen != kprog_gen())
		kernel_release(s);
	if (!s->kern)
		return kern_setup(s);
	return 0;
}

const struct gc_engine_ops gc_kernel_ops = {
	.available = kprog_available,
	.prepare = kernel_prepare,
	.send = kernel_send,
	.release = kernel_release,
};
