/* SPDX-License-Identifier: MIT */
/*
 * config.c - samplicator's receiver and config-file syntax, parsed strictly.
 *
 *   receiver:     ADDR[/PORT[/INTERVAL][,TTL]]
 *                 ADDR is IPv4, [IPv6] or a host name; PORT is a number, a
 *                 service name, FIRST-LAST or FIRST+COUNT (one receiver per
 *                 port); INTERVAL N sends 1 in N datagrams (default 1); TTL
 *                 1..255 (default 64).  An empty INTERVAL ("/2000/,10") keeps 1.
 *   config line:  SRC[/MASK]: receiver ...     # comment
 *                 SRC is IPv4 (MASK dotted or a prefix length) or [IPv6]
 *                 (prefix length).  Datagrams from a matching source go to
 *                 the line's receivers.
 *
 * Matching follows samplicator: a source whose address is 0.0.0.0, or whose
 * IPv6 mask is all zero, matches every datagram; otherwise the families must
 * agree and (from & mask) == (addr & mask).  Unlike samplicator we mask the
 * configured address too, so "10.1.2.3/8" matches 10.0.0.0/8 instead of
 * nothing, and IPv6 prefixes compare all 16 bytes.
 *
 * Nothing here opens a socket: the fuzz target and the unit test run it as is.
 */
#include "relay.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && len)
		vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* Printable copy of s[0..n) for messages, shortened with "..." (cap >= 8). */
static const char *show(const char *s, size_t n, char *buf, size_t cap)
{
	size_t k = 0, i = 0;
	for (; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		size_t need = (ch >= 0x20 && ch < 0x7f) ? 1 : 4;
		if (k + need + 4 > cap) /* room for "..." and the NUL */
			break;
		if (need == 1)
			buf[k++] = (char)ch;
		else
			k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", ch);
	}
	if (i < n) {
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	buf[k] = '\0';
	return buf;
}

/* Unsigned decimal s[0..n) in [min, max]; no sign, no spaces. */
static bool parse_uint(const char *s, size_t n, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

/*
 * Host s[0..n) (no brackets) into ss with port 0.  Literals first; names only
 * when !o->numeric.  The family must fit -4 / -6.
 */
static int parse_host(const char *s, size_t n, const struct rc_opts *o, struct sockaddr_storage *ss,
		      const char *what, char *err, size_t errlen)
{
	char buf[256], sh[80];
	if (n == 0)
		return fail(err, errlen,
			    "%s: empty address: expected an IPv4 address, [IPv6] or a host name", what);
	if (n >= sizeof(buf))
		return fail(err, errlen, "%s: address '%s' is too long", what,
			    show(s, n, sh, sizeof(sh)));
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (memchr(buf, '\0', n))
		return fail(err, errlen, "%s: address contains a NUL byte", what);
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, buf, &sin->sin_addr) == 1) {
		ss->ss_family = AF_INET;
	} else if (inet_pton(AF_INET6, buf, &sin6->sin6_addr) == 1) {
		ss->ss_family = AF_INET6;
	} else {
		if (o->numeric)
			return fail(err, errlen,
				    "%s: '%s' is not an IPv4 or IPv6 address: expected a.b.c.d or [IPv6]",
				    what, show(s, n, sh, sizeof(sh)));
		struct addrinfo hints = { .ai_family = o->family, .ai_socktype = SOCK_DGRAM };
		struct addrinfo *res = NULL;
		int rc = getaddrinfo(buf, NULL, &hints, &res);
		if (rc != 0 || !res)
			return fail(err, errlen,
				    "%s: cannot resolve '%s' (%s): expected an IPv4 address, [IPv6] or a host name",
				    what, show(s, n, sh, sizeof(sh)),
				    rc ? gai_strerror(rc) : "no address");
		if (res->ai_addrlen > sizeof(*ss) ||
		    (res->ai_family != AF_INET && res->ai_family != AF_INET6)) {
			freeaddrinfo(res);
			return fail(err, errlen, "%s: '%s' has no IPv4 or IPv6 address", what,
				    show(s, n, sh, sizeof(sh)));
		}
		memcpy(ss, res->ai_addr, res->ai_addrlen);
		freeaddrinfo(res);
	}
	if (o->family == AF_INET && ss->ss_family != AF_INET)
		return fail(err, errlen, "%s: '%s' is IPv6 but -4 is in force", what,
			    show(s, n, sh, sizeof(sh)));
	if (o->family == AF_INET6 && ss->ss_family != AF_INET6)
		return fail(err, errlen, "%s: '%s' is IPv4 but -6 is in force", what,
			    show(s, n, sh, sizeof(sh)));
	return 0;
}

/* Port part s[0..n): number, FIRST-LAST, FIRST+COUNT or a service name. */
static int parse_ports(const char *s, size_t n, const struct rc_opts *o, unsigned long *first,
		       unsigned long *count, const char *what, char *err, size_t errlen)
{
	char sh[80];
	const char *dash = memchr(s, '-', n), *plus = memchr(s, '+', n);
	unsigned long a, b;
	if (n == 0)
		return fail(err, errlen,
			    "%s: empty port: expected 1..65535, FIRST-LAST or FIRST+COUNT", what);
	size_t digits = 0;
	while (digits < n && s[digits] >= '0' && s[digits] <= '9')
		digits++;
	if (digits == n) {
		if (!parse_uint(s, n, 0, ULONG_MAX, &a) || a < 1 || a > 65535)
			return fail(err, errlen, "%s: port %s is out of range: expected 1..65535",
				    what, show(s, n, sh, sizeof(sh)));
		*first = a;
		*count = 1;
		return 0;
	}
	if (dash && !plus) {
		size_t k = (size_t)(dash - s);
		if (!parse_uint(s, k, 1, 65535, &a) ||
		    !parse_uint(dash + 1, n - k - 1, 1, 65535, &b) || b < a)
			return fail(err, errlen,
				    "%s: bad port range '%s': expected FIRST-LAST with 1 <= FIRST <= LAST <= 65535",
				    what, show(s, n, sh, sizeof(sh)));
		*first = a;
		*count = b - a + 1;
		return 0;
	}
	if (plus && !dash) {
		size_t k = (size_t)(plus - s);
		if (!parse_uint(s, k, 1, 65535, &a) ||
		    !parse_uint(plus + 1, n - k - 1, 1, 65535, &b) || a + b - 1 > 65535)
			return fail(err, errlen,
				    "%s: bad port range '%s': expected FIRST+COUNT with ports up to 65535",
				    what, show(s, n, sh, sizeof(sh)));
		*first = a;
		*count = b;
		return 0;
	}
	bool name = !dash && !plus;
	for (size_t i = 0; i < n && name; i++)
		name = isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.';
	if (name && !o->numeric && n < 64) {
		char buf[64];
		memcpy(buf, s, n);
		buf[n] = '\0';
		struct servent *se = getservbyname(buf, "udp");
		if (se) {
			*first = ntohs((uint16_t)se->s_port);
			*count = 1;
			if (*first == 0)
				return fail(err, errlen, "%s: service '%s' has port 0", what, buf);
			return 0;
		}
		return fail(err, errlen,
			    "%s: unknown UDP service '%s': expected a port number 1..65535", what, buf);
	}
	return fail(err, errlen, "%s: bad port '%s': expected 1..65535, FIRST-LAST or FIRST+COUNT",
		    what, show(s, n, sh, sizeof(sh)));
}

struct source *rc_add_source(struct rc_conf *c, const char *file, unsigned line)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 8;
		struct source *p = realloc(c->src, cap * sizeof(*p));
		if (!p)
			return NULL;
		c->src = p;
		c->cap = cap;
	}
	struct source *s = &c->src[c->n++];
	memset(s, 0, sizeof(*s));
	s->file = file;
	s->line = line;
	return s;
}

int rc_parse_receiver(struct rc_conf *c, struct source *s, const char *arg, const struct rc_opts *o,
		      char *err, size_t errlen)
{
	char what[128], sh[80];
	size_t n = strlen(arg);
	snprintf(what, sizeof(what), "receiver '%s'", show(arg, n, sh, sizeof(sh)));
	const char *p = arg, *end = arg + n;
	while (p < end && isspace((unsigned char)*p))
		p++;
	while (end > p && isspace((unsigned char)end[-1]))
		end--;
	const char *host, *host_end;
	if (p < end && *p == '[') {
		host = p + 1;
		host_end = memchr(host, ']', (size_t)(end - host));
		if (!host_end)
			return fail(err, errlen, "%s: missing ']': expected [IPv6]/PORT", what);
		p = host_end + 1;
		if (p < end && *p != '/')
			return fail(err, errlen,
				    "%s: unexpected '%c' after ']': expected '/' and a port", what, *p);
	} else {
		host = p;
		while (p < end && *p != '/')
			p++;
		host_end = p;
		if (memchr(host, ':', (size_t)(host_end - host)) &&
		    memchr(host, '.', (size_t)(host_end - host)) &&
		    !memchr(host, ']', (size_t)(host_end - host))) {
			/* "10.0.0.1:2000" is a common slip: samplicator's separator is '/' */
			struct sockaddr_storage tmp;
			struct rc_opts num = *o;
			num.numeric = true;
			if (parse_host(host, (size_t)(host_end - host), &num, &tmp, what, NULL, 0) != 0)
				return fail(err, errlen,
					    "%s: ':' is not a port separator: expected ADDR/PORT (or [IPv6]/PORT)",
					    what);
		}
	}
	struct sockaddr_storage addr;
	if (parse_host(host, (size_t)(host_end - host), o, &addr, what, err, errlen))
		return -1;

	unsigned long first = 2000, count = 1, freq = 1, ttl = RELAY_DEFAULT_TTL;
	if (p < end) { /* *p == '/' */
		const char *ps = ++p;
		while (p < end && *p != '/')
			p++;
		if (p == end) {
			/* samplicator reads ",TTL" only after an interval slash */
			if (memchr(ps, ',', (size_t)(end - ps)))
				return fail(err, errlen,
					    "%s: a TTL needs the interval field first: expected ADDR/PORT/INTERVAL,TTL or ADDR/PORT/,TTL",
					    what);
		}
		if (parse_ports(ps, (size_t)(p - ps), o, &first, &count, what, err, errlen))
			return -1;
		if (p < end) { /* interval and ttl */
			const char *fs = ++p;
			while (p < end && *p != ',')
				p++;
			if (p > fs && !parse_uint(fs, (size_t)(p - fs), 1, INT_MAX, &freq))
				return fail(err, errlen,
					    "%s: bad interval '%s': expected an integer 1..%d (1 in N datagrams)",
					    what, show(fs, (size_t)(p - fs), sh, sizeof(sh)), INT_MAX);
			if (p < end) {
				const char *ts = ++p;
				if (!parse_uint(ts, (size_t)(end - ts), 1, 255, &ttl))
					return fail(err, errlen,
						    "%s: bad TTL '%s': expected an integer 1..255", what,
						    show(ts, (size_t)(end - ts), sh, sizeof(sh)));
			}
		}
	}
	size_t max = o->max_receivers ? o->max_receivers : RELAY_MAX_RECEIVERS;
	if (c->receivers + count > max)
		return fail(err, errlen, "%s: more than %zu receivers in all", what, max);
	if (s->n + count > s->cap) {
		size_t cap = s->cap ? s->cap : 4;
		while (cap < s->n + count)
			cap *= 2;
		struct receiver *r = realloc(s->rcv, cap * sizeof(*r));
		if (!r)
			return fail(err, errlen, "%s: out of memory", what);
		s->rcv = r;
		s->cap = cap;
	}
	for (unsigned long k = 0; k < count; k++) {
		struct receiver *r = &s->rcv[s->n++];
		memset(r, 0, sizeof(*r));
		r->addr = addr;
		addr_set_port(&r->addr, (uint16_t)(first + k));
		r->freq = (uint32_t)freq;
		r->ttl = (uint8_t)ttl;
		r->flags = o->flags;
		r->sock = -1;
	}
	c->receivers += count;
	return 0;
}

static void prefix_mask(struct sockaddr_storage *m, int family, unsigned long plen)
{
	memset(m, 0, sizeof(*m));
	m->ss_family = (sa_family_t)family;
	uint8_t *b = family == AF_INET ? (uint8_t *)&((struct sockaddr_in *)m)->sin_addr
				       : ((struct sockaddr_in6 *)m)->sin6_addr.s6_addr;
	for (unsigned long i = 0; i < plen; i++)
		b[i / 8] |= (uint8_t)(0x80u >> (i % 8));
}

static uint8_t *addr_bytes(struct sockaddr_storage *ss, size_t *n)
{
	if (ss->ss_family == AF_INET) {
		*n = 4;
		return (uint8_t *)&((struct sockaddr_in *)ss)->sin_addr;
	}
	*n = 16;
	return ((struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
}

/* SRC[/MASK] in s[0..n). */
static int parse_source(struct source *src, const char *s, size_t n, const struct rc_opts *o,
			char *err, size_t errlen)
{
	char sh[80];
	const char *what = "source";
	const char *end = s + n;
	while (s < end && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	const char *host = s, *host_end, *p;
	if (s < end && *s == '[') {
		host = s + 1;
		host_end = memchr(host, ']', (size_t)(end - host));
		if (!host_end)
			return fail(err, errlen, "source: missing ']': expected [IPv6][/PREFIX]");
		p = host_end + 1;
		if (p < end && *p != '/')
			return fail(err, errlen,
				    "source: unexpected '%c' after ']': expected '/' and a prefix length",
				    *p);
	} else {
		host_end = memchr(s, '/', (size_t)(end - s));
		if (!host_end)
			host_end = end;
		p = host_end;
	}
	if (parse_host(host, (size_t)(host_end - host), o, &src->addr, what, err, errlen))
		return -1;
	int fam = src->addr.ss_family;
	if (p < end) { /* '/' mask */
		const char *ms = p + 1;
		size_t ml = (size_t)(end - ms);
		unsigned long plen;
		if (fam == AF_INET && memchr(ms, '.', ml)) {
			char buf[32];
			struct in_addr m;
			if (ml >= sizeof(buf))
				return fail(err, errlen,
					    "source: bad mask '%s': expected a dotted mask or a prefix length 0..32",
					    show(ms, ml, sh, sizeof(sh)));
			memcpy(buf, ms, ml);
			buf[ml] = '\0';
			if (inet_pton(AF_INET, buf, &m) != 1)
				return fail(err, errlen,
					    "source: bad mask '%s': expected a dotted mask or a prefix length 0..32",
					    show(ms, ml, sh, sizeof(sh)));
			memset(&src->mask, 0, sizeof(src->mask));
			src->mask.ss_family = AF_INET;
			((struct sockaddr_in *)&src->mask)->sin_addr = m;
		} else if (parse_uint(ms, ml, 0, fam == AF_INET ? 32 : 128, &plen)) {
			prefix_mask(&src->mask, fam, plen);
		} else {
			return fail(err, errlen, "source: bad mask '%s': expected %s",
				    show(ms, ml, sh, sizeof(sh)),
				    fam == AF_INET ? "a dotted mask or a prefix length 0..32"
						   : "a prefix length 0..128");
		}
	} else {
		prefix_mask(&src->mask, fam, fam == AF_INET ? 32 : 128);
	}
	size_t k;
	uint8_t *a = addr_bytes(&src->addr, &k), *m = addr_bytes(&src->mask, &k);
	bool zero = true;
	for (size_t i = 0; i < k; i++)
		zero &= a[i] == 0;
	if (fam == AF_INET && zero) {
		src->any = true; /* samplicator: 0.0.0.0 matches everything */
	} else {
		bool mzero = true;
		for (size_t i = 0; i < k; i++)
			mzero &= m[i] == 0;
		if (fam == AF_INET6 && mzero)
			src->any = true; /* samplicator: an all-zero IPv6 mask matches everything */
		for (size_t i = 0; i < k; i++)
			a[i] &= m[i];
	}
	return 0;
}

int rc_parse_line(struct rc_conf *c, const char *line, size_t len, const char *file,
		  unsigned lineno, const struct rc_opts *o, char *err, size_t errlen)
{
	const char *hash = memchr(line, '#', len);
	if (hash)
		len = (size_t)(hash - line);
	while (len && isspace((unsigned char)line[len - 1]))
		len--;
	size_t i = 0;
	while (i < len && isspace((unsigned char)line[i]))
		i++;
	if (i == len)
		return 0;
	if (memchr(line, '\0', len))
		return fail(err, errlen, "NUL byte in the line: expected text");
	/* The colon after the source: after ']' for IPv6, else the first one. */
	const char *start = line + i, *end = line + len, *colon;
	if (*start == '[') {
		const char *rb = memchr(start, ']', (size_t)(end - start));
		colon = rb ? memchr(rb, ':', (size_t)(end - rb)) : NULL;
	} else {
		colon = memchr(start, ':', (size_t)(end - start));
	}
	if (!colon)
		return fail(err, errlen,
			    "missing ':' after the source: expected SRC[/MASK]: RECEIVER ...");
	struct source *s = rc_add_source(c, file, lineno);
	if (!s)
		return fail(err, errlen, "out of memory");
	if (parse_source(s, start, (size_t)(colon - start), o, err, errlen))
		return -1;
	const char *p = colon + 1;
	char tok[512], sh[80];
	while (p < end) {
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p >= end)
			break;
		const char *t = p;
		while (p < end && !isspace((unsigned char)*p))
			p++;
		size_t tl = (size_t)(p - t);
		if (tl >= sizeof(tok))
			return fail(err, errlen,
				    "receiver '%s': too long: expected ADDR[/PORT[/INTERVAL][,TTL]]",
				    show(t, tl, sh, sizeof(sh)));
		memcpy(tok, t, tl);
		tok[tl] = '\0';
		if (rc_parse_receiver(c, s, tok, o, err, errlen))
			return -1;
	}
	return 0;
}

int rc_parse_buffer(struct rc_conf *c, const char *file, const char *buf, size_t len,
		    const struct rc_opts *o, char *err, size_t errlen)
{
	char msg[384];
	unsigned lineno = 0;
	size_t i = 0;
	while (i < len) {
		const char *nl = memchr(buf + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (buf + i)) : len - i;
		lineno++;
		if (l > RELAY_MAX_LINE)
			return fail(err, errlen, "%s:%u: line longer than %u bytes", file, lineno,
				    RELAY_MAX_LINE);
		size_t ll = l;
		if (ll && buf[i + ll - 1] == '\r')
			ll--;
		if (rc_parse_line(c, buf + i, ll, file, lineno, o, msg, sizeof(msg)))
			return fail(err, errlen, "%s:%u: %s", file, lineno, msg);
		i += l + (nl ? 1 : 0);
	}
	return 0;
}

int rc_parse_file(struct rc_conf *c, const char *path, const struct rc_opts *o, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	if (!buf) {
		fclose(f);
		return fail(err, errlen, "%s: out of memory", path);
	}
	for (;;) {
		if (len == cap) {
			if (cap >= (64u << 20)) {
				free(buf);
				fclose(f);
				return fail(err, errlen, "%s: larger than 64 MiB", path);
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				fclose(f);
				return fail(err, errlen, "%s: out of memory", path);
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return fail(err, errlen, "%s: read error", path);
	}
	int rc = rc_parse_buffer(c, path, buf, len, o, err, errlen);
	free(buf);
	return rc;
}

void rc_free(struct rc_conf *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->src[i].rcv);
		free(c->src[i].pre);
	}
	free(c->src);
	memset(c, 0, sizeof(*c));
}

bool rc_match(const struct source *s, const struct sockaddr_storage *from)
{
	if (s->any)
		return true;
	if (from->ss_family != s->addr.ss_family)
		return false;
	size_t k;
	const uint8_t *f = addr_bytes((struct sockaddr_storage *)from, &k);
	const uint8_t *a = addr_bytes((struct sockaddr_storage *)&s->addr, &k);
	const uint8_t *m = addr_bytes((struct sockaddr_storage *)&s->mask, &k);
	for (size_t i = 0; i < k; i++)
		if ((f[i] & m[i]) != a[i])
			return false;
	return true;
}
