/* SPDX-License-Identifier: MIT */
/*
 * group.c - per-socket group state, argument checking and engine dispatch.
 *
 * The paper keeps the group in the socket; we keep it in a table indexed by
 * fd and remember the socket's cookie (SO_COOKIE, unique for the life of the
 * system), so a closed-and-reused fd number is recognised and its stale state
 * freed instead of being inherited.  That costs one getsockopt() per call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "kpolicy.h"

static const struct gc_engine_ops *const ops_of[GC_ENGINE_COUNT] = {
	[GC_ENGINE_LOOP] = &gc_loop_ops,     [GC_ENGINE_MMSG] = &gc_mmsg_ops,
	[GC_ENGINE_URING] = &gc_uring_ops,   [GC_ENGINE_URING_ZC] = &gc_uring_zc_ops,
	[GC_ENGINE_KERNEL] = &gc_kernel_ops,
};

static const char *const names[GC_ENGINE_COUNT] = {
	"auto", "loop", "mmsg", "uring", "uring_zc", "kernel",
};

/*
 * What AUTO picks, best first.  bench/results/ has the runs behind it: the
 * kernel engine costs about a quarter of the loop's sender CPU per member at
 * N = 1000 and no more than it at N = 1; sendmmsg and io_uring save system
 * calls but cost the same per datagram as sendto(), and sendmmsg needs no
 * ring per socket.
 */
static const enum gc_engine auto_order[] = { GC_ENGINE_KERNEL, GC_ENGINE_MMSG, GC_ENGINE_URING,
					     GC_ENGINE_LOOP };

/* sized (groupcast/common.h); 1.0 ends at last_errno */
static const struct gc_sized stats_t = GC_SIZED(gc_stats, GC_STATS_INIT, last_errno, last_errno);

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gc_sock **tab;
static size_t tab_cap;

/* ---- socket identification ------------------------------------------- */

static int get_int_opt(int fd, int level, int opt, int *val)
{
	socklen_t len = sizeof(*val);

	return getsockopt(fd, level, opt, val, &len);
}

static int get_cookie(int fd, uint64_t *cookie)
{
	socklen_t len = sizeof(*cookie);

	if (fd < 0)
		return gc_errf(EBADF, "sd: %d is not a file descriptor", fd);
	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &len) == 0)
		return 0;
	if (errno == EBADF)
		return gc_errf(EBADF, "sd: %d is not an open file descriptor", fd);
	return gc_errf(ENOTSOCK, "sd: %d is not a socket", fd);
}

/* Fill the family of a new state; EPROTOTYPE unless an inet UDP socket. */
static int identify(struct gc_sock *s)
{
	int domain, type, proto;

	if (get_int_opt(s->fd, SOL_SOCKET, SO_DOMAIN, &domain) ||
	    get_int_opt(s->fd, SOL_SOCKET, SO_TYPE, &type) ||
	    get_int_opt(s->fd, SOL_SOCKET, SO_PROTOCOL, &proto))
		return gc_errf(errno, "sd: %d: cannot read its socket type", s->fd);
	if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_DGRAM || proto != IPPROTO_UDP)
		return gc_errf(EPROTOTYPE, "sd: %d is not an AF_INET/AF_INET6 UDP socket", s->fd);
	s->family = domain;
	return 0;
}

static void sock_free(struct gc_sock *s)
{
	if (s->engine > GC_ENGINE_AUTO && ops_of[s->engine] && ops_of[s->engine]->release)
		ops_of[s->engine]->release(s);
	free(s->group);
	free(s->errs);
	free(s->rec_errs);
	free(s->mmsg);
	free(s->iov);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* *out set, or -errno with the message (-ENOTSUP spelled out: the compiler
 * then sees that *out is set whenever 0 comes back). */
static int resolve(enum gc_engine want, enum gc_engine *out)
{
	if (want != GC_ENGINE_AUTO) {
		if (!ops_of[want]) {
			gc_errf(ENOTSUP, "engine %s: not available in this build", names[want]);
			return -ENOTSUP;
		}
		int r = ops_of[want]->available();
		if (r)
			return r;
		*out = want;
		return 0;
	}
	for (size_t i = 0; i < sizeof(auto_order) / sizeof(auto_order[0]); i++) {
		if (ops_of[auto_order[i]]->available() == 0) {
			*out = auto_order[i];
			return 0;
		}
	}
	gc_errf(ENOTSUP, "engine auto: no engine available");
	return -ENOTSUP;
}

/*
 * AUTO on socket s: the first engine of auto_order available here, except
 * that the kernel engine is taken only where kpolicy.c finds no egress policy
 * it would bypass for s; mmsg then.  Checked when s's state is made, by
 * gc_set_engine(AUTO), and again before sends (auto_switch()).
 */
static int auto_engine(struct gc_sock *s, enum gc_engine *out)
{
	int r = resolve(GC_ENGINE_AUTO, out);

	if (r)
		return r;
	if (*out == GC_ENGINE_KERNEL && gc_kpolicy_declines(s))
		*out = GC_ENGINE_MMSG;
	return 0;
}

/* AUTO may change its mind between sends: kpolicy.c keeps an answer for
 * GC_KPOLICY_SOCKET_NS (its namespace part longer), so this costs a clock read until then. */
static void auto_switch(struct gc_sock *s)
{
	enum gc_engine e;

	if (s->engine != GC_ENGINE_KERNEL && !s->auto_declined)
		return; /* the kernel engine is not available: nothing to decide */
	e = gc_kpolicy_declines(s) ? GC_ENGINE_MMSG : GC_ENGINE_KERNEL;
	if (e == s->engine)
		return;
	if (ops_of[s->engine]->release && ops_of[s->engine]->release != ops_of[e]->release)
		ops_of[s->engine]->release(s);
	s->engine = e;
}

/*
 * The table maps fd numbers to states.  tab_lock covers only the table and
 * taking a reference; nobody waits for a socket's lock while holding it, so
 * a long send on one socket (and a second thread queued behind it) never
 * stalls calls on other sockets.  A state lives while it is referenced: by
 * the table (one reference) and by each call inside it.  Whoever drops the
 * last reference frees it, outside every lock.
 */
static void sock_unref(struct gc_sock *s)
{
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
		sock_free(s);
}

/* A new state for sd in *out, made outside tab_lock: choosing the engine may
 * load a BPF program or read the namespace's policy. */
static int sock_new(int sd, uint64_t cookie, struct gc_sock **out)
{
	struct gc_sock *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return gc_errf(ENOMEM, "sd: %d: no memory for its state", sd);
	s->fd = sd;
	s->cookie = cookie;
	s->limit = GC_DEFAULT_LIMIT;
	s->want = GC_ENGINE_AUTO;
	if ((r = identify(s)) || (r = auto_engine(s, &s->engine))) {
		free(s);
		return r;
	}
	pthread_mutex_init(&s->lock, NULL);
	atomic_init(&s->refs, 1); /* the table's */
	*out = s;
	return 0;
}

static int tab_reserve(int sd)
{
	size_t cap = tab_cap ? tab_cap : 64;
	struct gc_sock **t;

	if ((size_t)sd < tab_cap)
		return 0;
	while (cap <= (size_t)sd)
		cap *= 2;
	t = realloc(tab, cap * sizeof(*t));
	if (!t)
		return gc_errf(ENOMEM, "sd: %d: no memory for the socket table", sd);
	memset(t + tab_cap, 0, (cap - tab_cap) * sizeof(*t));
	tab = t;
	tab_cap = cap;
	return 0;
}

/* Find (or create) sd's state and return it referenced and locked: 0, or
 * -errno with the message. */
static int sock_get(int sd, struct gc_sock **out)
{
	struct gc_sock *s, *stale = NULL, *made = NULL;
	uint64_t cookie;
	int r = get_cookie(sd, &cookie);

	if (r)
		return r;
	for (;;) {
		pthread_mutex_lock(&tab_lock);
		s = (size_t)sd < tab_cap ? tab[sd] : NULL;
		if (s && s->cookie != cookie) { /* the fd was closed and reused */
			stale = s;
			tab[sd] = s = NULL;
		}
		if (!s && made) {
			if ((r = tab_reserve(sd))) {
				pthread_mutex_unlock(&tab_lock);
				sock_unref(made);
				made = NULL;
				break;
			}
			tab[sd] = s = made;
			made = NULL;
		}
		if (s)
			atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
		pthread_mutex_unlock(&tab_lock);
		if (stale) {
			sock_unref(stale); /* the table's reference */
			stale = NULL;
		}
		if (s || (r = sock_new(sd, cookie, &made)))
			break;
	}
	if (made) /* another thread put its state in first */
		sock_unref(made);
	if (!s)
		return r;
	pthread_mutex_lock(&s->lock);
	*out = s;
	return 0;
}

static void sock_put(struct gc_sock *s)
{
	pthread_mutex_unlock(&s->lock);
	sock_unref(s);
}

/* ---- argument checks --------------------------------------------------- */

/*
 * IPV6_V6ONLY can change until the socket is bound, so it is read when an
 * IPv4 member asks for it, once per call (*v6only starts at -1).
 */
static bool v6only(const struct gc_sock *s, int *cache)
{
	if (*cache < 0 && get_int_opt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, cache))
		*cache = 1; /* cannot tell: refuse IPv4 rather than fail later */
	return *cache;
}

/* Check one destination against socket s; arg names it in the message. */
static int check_dest(const struct gc_sock *s, const struct sockaddr_storage *ss, const char *arg,
		      size_t i, bool *is_v4, int *v6only_cache)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
		in_addr_t a = ntohl(sin->sin_addr.s_addr);

		if (s->family == AF_INET6 && v6only(s, v6only_cache))
			return gc_errf(EAFNOSUPPORT,
				       "%s[%zu]: AF_INET member on an IPV6_V6ONLY socket", arg, i);
		if (sin->sin_port == 0)
			return gc_errf(EINVAL, "%s[%zu]: port 0", arg, i);
		if (a == INADDR_ANY || a == INADDR_BROADCAST || IN_MULTICAST(a))
			return gc_errf(EINVAL, "%s[%zu]: not a unicast address", arg, i);
		*is_v4 = true;
		return 0;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
		const struct in6_addr *a = &sin6->sin6_addr;

		if (s->family != AF_INET6)
			return gc_errf(EAFNOSUPPORT,
				       "%s[%zu]: AF_INET6 member on an AF_INET socket", arg, i);
		if (sin6->sin6_port == 0)
			return gc_errf(EINVAL, "%s[%zu]: port 0", arg, i);
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			in_addr_t v4 = ntohl(((const uint32_t *)a->s6_addr)[3]);

			if (v6only(s, v6only_cache))
				return gc_errf(EAFNOSUPPORT,
					       "%s[%zu]: v4-mapped member on an IPV6_V6ONLY socket",
					       arg, i);
			if (v4 == INADDR_ANY || v4 == INADDR_BROADCAST || IN_MULTICAST(v4))
				return gc_errf(EINVAL, "%s[%zu]: not a unicast address", arg, i);
			*is_v4 = true;
			return 0;
		}
		if (IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_MULTICAST(a))
			return gc_errf(EINVAL, "%s[%zu]: not a unicast address", arg, i);
		*is_v4 = false;
		return 0;
	}
	return gc_errf(EAFNOSUPPORT, "%s[%zu]: address family %d is not AF_INET or AF_INET6", arg,
		       i, ss->ss_family);
}

static int check_flags(int flags, const char *fn)
{
	if (flags & ~GC_SEND_FLAGS)
		return gc_errf(EINVAL, "%s: flags: 0x%x outside GC_SEND_FLAGS", fn,
			       flags & ~GC_SEND_FLAGS);
	return 0;
}

socklen_t gc_addrlen(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static int grow(void **p, size_t *cap, size_t n, size_t elem)
{
	void *q;

	if (n <= *cap)
		return 0;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* The per-member errno array, at least n long. */
static int errs_reserve(struct gc_sock *s, size_t n)
{
	return grow((void **)&s->errs, &s->errs_cap, n, sizeof(*s->errs));
}

/* The engine scratch: a struct mmsghdr and 3 iovecs per recipient, for n. */
static int scratch_reserve(struct gc_sock *s, size_t n)
{
	void *m;
	struct iovec *iov;

	if (n <= s->scratch_cap)
		return 0;
	m = realloc(s->mmsg, n * sizeof(struct mmsghdr));
	if (!m)
		return -ENOMEM;
	s->mmsg = m;
	iov = realloc(s->iov, 3 * n * sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	s->iov = iov;
	s->scratch_cap = n;
	return 0;
}

int gc_fill_msg(struct msghdr *msg, struct iovec *iov, const struct gc_batch *b, size_t r)
{
	const struct gc_giovec *g = &b->rec[r];
	size_t k = 0;

	if (g->prepend.iov_len)
		iov[k++] = g->prepend;
	if (b->shared->iov_len)
		iov[k++] = *b->shared;
	if (g->append.iov_len)
		iov[k++] = g->append;
	msg->msg_name = (void *)&g->dest;
	msg->msg_namelen = gc_addrlen(&g->dest);
	msg->msg_iov = iov;
	msg->msg_iovlen = k;
	msg->msg_control = NULL;
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	return (int)k; /* 0..3 */
}

size_t gc_for_each_chunk (struct gc_sock *s, const struct gc_batch *b, size_t max, gc_chunk_fn * fn,
			  void *ctx)
{
	size_t chunk = b->n < max ? b->n : max, sent = 0;
	struct mmsghdr *m;

	if (scratch_reserve(s, chunk)) {
		for (size_t k = 0; k < b->n; k++)
			b->gerrno[k] = ENOMEM;
		return 0;
	}
	m = s->mmsg;
	for (size_t i = 0; i < b->n; i += chunk) {
		size_t cnt = b->n - i < chunk ? b->n - i : chunk;

		for (size_t k = 0; k < cnt; k++)
			gc_fill_msg(&m[k].msg_hdr, &s->iov[3 * k], b, i + k);
		sent += fn(s, b, m, i, cnt, ctx);
	}
	return sent;
}

/* ---- the API --------------------------------------------------------- */

GC_EXPORT int gc_setgroup(int sd, const struct sockaddr_storage *members, size_t n)
{
	struct gc_sock *s;
	bool v4 = false;
	int ret, v6only_cache = -1;
	size_t nv4 = 0;

	if (!members && n > 0)
		return gc_seterr(EFAULT, "members: NULL with n = %zu", n);
	if ((ret = sock_get(sd, &s)))
		return (int)gc_err(ret);
	ret = -1;
	if (n > s->limit) {
		gc_seterr(E2BIG, "n: %zu members is above the socket's limit of %zu", n, s->limit);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		int r = check_dest(s, &members[i], "members", i, &v4, &v6only_cache);
		if (r) {
			gc_err(r);
			goto out;
		}
		nv4 += v4;
	}
	if (n > s->group_cap) { /* grow only: replacing a group must stay cheap */
		struct gc_giovec *g = realloc(s->group, n * sizeof(*g));

		if (!g || errs_reserve(s, n)) {
			if (g)
				s->group = g;
			gc_seterr(ENOMEM, "n: no memory for %zu members", n);
			goto out;
		}
		memset(g + s->group_cap, 0, (n - s->group_cap) * sizeof(*g));
		s->group = g;
		s->group_cap = n;
	}
	for (size_t i = 0; i < n; i++)
		memcpy(&s->group[i].dest, &members[i], gc_addrlen(&members[i]));
	s->group_n = n;
	s->group_v4 = nv4;
	s->last_failed = 0;
	ret = 0;
out:
	sock_put(s);
	return ret;
}

GC_EXPORT ssize_t gc_getgroup_size(int sd)
{
	struct gc_sock *s;
	ssize_t n;

	int r = sock_get(sd, &s);
	if (r)
		return gc_err(r);
	n = (ssize_t)s->group_n;
	sock_put(s);
	return n;
}

/* Run batch b on s's engine and account for it; returns recipients sent to. */
static size_t run(struct gc_sock *s, const struct gc_batch *b)
{
	size_t sent, bytes = 0;

	if (s->want == GC_ENGINE_AUTO)
		auto_switch(s);
	sent = ops_of[s->engine]->send(s, b);

	for (size_t i = 0; i < b->n; i++) {
		if (b->gerrno[i]) {
			s->stats.last_errno = b->gerrno[i];
			continue;
		}
		bytes += b->rec[i].prepend.iov_len + b->shared->iov_len + b->rec[i].append.iov_len;
	}
	s->stats.group_sends++;
	s->stats.datagrams += sent;
	s->stats.failed += b->n - sent;
	s->stats.bytes += bytes;
	return sent;
}

GC_EXPORT ssize_t gc_send(int sd, const void *buf, size_t len, int flags)
{
	struct iovec shared = { .iov_base = (void *)buf, .iov_len = len };
	struct gc_batch b;
	struct gc_sock *s;
	ssize_t ret = -1;
	size_t sent;

	int r = check_flags(flags, "gc_send");
	if (r)
		return gc_err(r);
	if (!buf && len > 0)
		return gc_seterr(EFAULT, "buf: NULL with len = %zu", len);
	r = sock_get(sd, &s);
	if (r)
		return gc_err(r);
	if (s->group_n == 0) {
		gc_seterr(EDESTADDRREQ, "sd: %d has no group (gc_setgroup())", sd);
		goto out;
	}
	if (len > (s->group_v4 ? GC_UDP4_MAX : GC_UDP6_MAX)) {
		gc_seterr(EMSGSIZE, "len: %zu is larger than a UDP datagram", len);
		goto out;
	}
	b = (struct gc_batch){ &shared, s->group, s->group_n, flags, s->errs };
	sent = run(s, &b);
	s->last_failed = s->group_n - sent;
	if (sent == s->group_n) {
		ret = (ssize_t)len;
		goto out;
	}
	for (size_t i = 0; i < s->group_n; i++) {
		if (s->errs[i]) {
			gc_seterr(s->errs[i], "gc_send: %zu of %zu members failed, first members[%zu]",
				  s->last_failed, s->group_n, i);
			break;
		}
	}
out:
	sock_put(s);
	return ret;
}

GC_EXPORT ssize_t gc_last_errors(int sd, int *gerrno, size_t n)
{
	struct gc_sock *s;
	ssize_t failed;

	int r = sock_get(sd, &s);
	if (r)
		return gc_err(r);
	if (gerrno) {
		size_t k = n < s->group_n ? n : s->group_n;

		if (s->last_failed)
			memcpy(gerrno, s->errs, k * sizeof(*gerrno));
		else
			memset(gerrno, 0, k * sizeof(*gerrno));
		if (n > k)
			memset(gerrno + k, 0, (n - k) * sizeof(*gerrno));
	}
	failed = (ssize_t)s->last_failed;
	sock_put(s);
	return failed;
}

static int check_iov(const struct iovec *v, const char *arg, size_t i)
{
	if (!v->iov_base && v->iov_len)
		return gc_errf(EFAULT, "%s: rec[%zu]: NULL iov_base with iov_len %zu", arg, i, v->iov_len);
	return 0;
}

/* Recipient i of a gc_sendgroup(): 0, or its errno (positive: what
 * gerrno[i] gets) with the message. */
static int check_rec(const struct gc_sock *s, const struct gc_giovec *g, size_t shared_len,
		     size_t i, int *v6only_cache)
{
	bool v4 = false;
	size_t len = shared_len;
	int r;

	if ((r = check_dest(s, &g->dest, "rec", i, &v4, v6only_cache)) ||
	    (r = check_iov(&g->prepend, "prepend", i)) || (r = check_iov(&g->append, "append", i)))
		return -r;
	if (g->prepend.iov_len > GC_UDP6_MAX || g->append.iov_len > GC_UDP6_MAX ||
	    (len += g->prepend.iov_len + g->append.iov_len) > (v4 ? GC_UDP4_MAX : GC_UDP6_MAX))
		return -gc_errf(EMSGSIZE,
				"rec[%zu]: prepend + shared + append is larger than a UDP datagram", i);
	return 0;
}

/*
 * Send the recipients that passed check_rec() (gerrno[i] == 0) when some did
 * not: the engines take a dense batch, so the good ones are packed into one,
 * sent, and their results put back.  Only paid when a recipient is refused.
 */
static int run_valid(struct gc_sock *s, const struct iovec *shared, const struct gc_giovec *rec,
		     size_t recnum, size_t nbad, int flags, int *gerrno)
{
	size_t n = recnum - nbad, k = 0, sent;
	struct gc_giovec *ok = malloc(n * sizeof(*ok));
	int *okerr = malloc(n * sizeof(*okerr));
	struct gc_batch b;

	if (!ok || !okerr) {
		free(ok);
		free(okerr);
		return gc_errf(ENOMEM, "recnum: no memory to set %zu refused recipients aside", nbad);
	}
	for (size_t i = 0; i < recnum; i++)
		if (!gerrno[i])
			ok[k++] = rec[i];
	b = (struct gc_batch){ shared, ok, n, flags, okerr };
	sent = run(s, &b);
	k = 0;
	for (size_t i = 0; i < recnum; i++)
		if (!gerrno[i])
			gerrno[i] = okerr[k++];
	free(ok);
	free(okerr);
	return (int)sent;
}

GC_EXPORT int gc_sendgroup(int sd, const struct iovec *shared, const struct gc_giovec *rec,
			   size_t recnum, int flags, int *gerrno)
{
	static const struct iovec empty;
	struct gc_batch b;
	struct gc_sock *s;
	int ret = -1, v6only_cache = -1, first_err = 0;
	size_t nbad = 0, first_bad = 0;
	char first_msg[256];

	int r = check_flags(flags, "gc_sendgroup");
	if (r)
		return (int)gc_err(r);
	if (!rec && recnum > 0)
		return gc_seterr(EFAULT, "rec: NULL with recnum = %zu", recnum);
	if (!shared)
		shared = &empty;
	if (!shared->iov_base && shared->iov_len)
		return gc_seterr(EFAULT, "shared: NULL iov_base with iov_len %zu", shared->iov_len);
	r = sock_get(sd, &s);
	if (r)
		return (int)gc_err(r);
	if (recnum > s->limit) {
		gc_seterr(E2BIG, "recnum: %zu is above the socket's limit of %zu", recnum, s->limit);
		goto out;
	}
	if (!gerrno) { /* the engines always report; s->errs stays gc_send()'s */
		if (grow((void **)&s->rec_errs, &s->rec_errs_cap, recnum, sizeof(*s->rec_errs))) {
			gc_seterr(ENOMEM, "recnum: no memory for %zu error slots", recnum);
			goto out;
		}
		gerrno = s->rec_errs;
	}
	/* A recipient the rules refuse is that recipient's failure, not the
	 * call's: it gets its errno in gerrno[i] and the others are sent. */
	for (size_t i = 0; i < recnum; i++) {
		gerrno[i] = check_rec(s, &rec[i], shared->iov_len, i, &v6only_cache);
		if (gerrno[i] && !nbad++) {
			first_err = gerrno[i];
			first_bad = i;
			snprintf(first_msg, sizeof(first_msg), "%s", gc_errmsg());
		}
	}
	if (recnum == 0) {
		ret = 0;
		goto out;
	}
	if (nbad) {
		s->stats.failed += nbad;
		s->stats.last_errno = first_err;
		ret = nbad == recnum ? 0 : run_valid(s, shared, rec, recnum, nbad, flags, gerrno);
		if (ret >= 0)
			gc_seterr(first_err,
				  "%s (rec[%zu] is the first of %zu refused recipients; the others were sent)",
				  first_msg, first_bad, nbad);
		else
			ret = (int)gc_err(ret);
		goto out;
	}
	b = (struct gc_batch){ shared, rec, recnum, flags, gerrno };
	ret = (int)run(s, &b);
out:
	sock_put(s);
	return ret;
}

GC_EXPORT int gc_engine_available(enum gc_engine e)
{
	enum gc_engine got = GC_ENGINE_NONE;

	if ((int)e < 0 || e >= GC_ENGINE_COUNT)
		return gc_seterr(EINVAL, "e: %d is not an engine", (int)e);
	return (int)gc_err(resolve(e, &got));
}

GC_EXPORT int gc_set_engine(int sd, enum gc_engine e)
{
	enum gc_engine got = GC_ENGINE_NONE;
	struct gc_sock *s;
	int ret = -1;

	if ((int)e < 0 || e >= GC_ENGINE_COUNT)
		return gc_seterr(EINVAL, "e: %d is not an engine", (int)e);
	int r = sock_get(sd, &s);
	if (r)
		return (int)gc_err(r);
	s->auto_checked_ns = 0; /* AUTO looks at the policy afresh */
	r = e == GC_ENGINE_AUTO ? auto_engine(s, &got) : resolve(e, &got);
	if (r == 0) {
		const struct gc_engine_ops *new = ops_of[got], *old = ops_of[s->engine];

		/* An engine asked for by name gets its resources now, so that the
		 * first send is not the one to pay for them (or to find they fail). */
		if (e != GC_ENGINE_AUTO && new->prepare &&new->prepare(s)) {
			errno = ENOTSUP; /* gc_errmsg() already says why */
			goto out;
		}
		if (got != s->engine && old->release && old->release != new->release)
			old->release(s);
		s->want = e;
		s->engine = got;
		ret = 0;
	} else if (r != -ENOTSUP) {
		gc_seterr(ENOTSUP, "engine %s: %s", names[e], gc_errmsg());
	} else {
		gc_err(r);
	}
out:
	sock_put(s);
	return ret;
}

GC_EXPORT enum gc_engine gc_get_engine(int sd)
{
	struct gc_sock *s;
	enum gc_engine e;

	int r = sock_get(sd, &s);
	if (r) {
		gc_err(r);
		return GC_ENGINE_NONE;
	}
	e = s->engine;
	sock_put(s);
	return e;
}

GC_EXPORT int gc_auto_reason(int sd, char *buf, size_t len)
{
	struct gc_sock *s;

	if (!buf || !len)
		return gc_seterr(EINVAL, "buf, len: no room for the reason");
	int r = sock_get(sd, &s);
	if (r)
		return (int)gc_err(r);
	if (s->want != GC_ENGINE_AUTO)
		snprintf(buf, len, "AUTO not in use: engine %s set with gc_set_engine()", names[s->want]);
	else if (gc_kernel_ops.available())
		snprintf(buf, len, "kernel: not available: %s", gc_errmsg());
	else {
		auto_switch(s); /* a fresh answer if the last one is old */
		snprintf(buf, len, "%s", s->auto_why);
	}
	sock_put(s);
	return 0;
}

GC_EXPORT const char *gc_engine_name(enum gc_engine e)
{
	return (int)e >= 0 && e < GC_ENGINE_COUNT ? names[e] : NULL;
}

GC_EXPORT enum gc_engine gc_engine_from_name(const char *str)
{
	for (int i = 0; str && i < GC_ENGINE_COUNT; i++)
		if (strcmp(str, names[i]) == 0)
			return (enum gc_engine)i;
	gc_seterr(EINVAL, "name: \"%s\" is not an engine", str ? str : "(null)");
	return GC_ENGINE_NONE;
}

GC_EXPORT int gc_set_limit(int sd, size_t limit)
{
	struct gc_sock *s;
	int ret = -1;

	if (limit < 1 || limit > GC_MAX_LIMIT)
		return gc_seterr(EINVAL, "limit: %zu is outside 1..%u", limit, GC_MAX_LIMIT);
	int r = sock_get(sd, &s);
	if (r)
		return (int)gc_err(r);
	if (limit < s->group_n) {
		gc_seterr(E2BIG, "limit: %zu is below the current group of %zu", limit, s->group_n);
	} else {
		s->limit = limit;
		ret = 0;
	}
	sock_put(s);
	return ret;
}

GC_EXPORT ssize_t gc_get_limit(int sd)
{
	struct gc_sock *s;
	ssize_t l;

	int r = sock_get(sd, &s);
	if (r)
		return gc_err(r);
	l = (ssize_t)s->limit;
	sock_put(s);
	return l;
}

GC_EXPORT int gc_stats(int sd, struct gc_stats *st)
{
	struct gc_sock *s;

	if (!st)
		return gc_seterr(EFAULT, "st: NULL");
	int r = sock_get(sd, &s);
	if (r)
		return (int)gc_err(r);
	struct gc_stats now = s->stats;
	sock_put(s);
	return (int)gc_err(gc_sized_out(&stats_t, "gc_stats", "st", st, &now));
}

GC_EXPORT int gc_release(int sd)
{
	struct gc_sock *s = NULL;

	if (sd < 0)
		return gc_seterr(EBADF, "sd: %d is not a file descriptor", sd);
	pthread_mutex_lock(&tab_lock);
	if ((size_t)sd < tab_cap) {
		s = tab[sd];
		tab[sd] = NULL;
	}
	pthread_mutex_unlock(&tab_lock);
	if (s) /* freed now, or by the last call still inside it */
		sock_unref(s);
	return 0;
}
