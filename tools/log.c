/* SPDX-License-Identifier: MIT */
/*
 * tools/log.c - the daemons' log lines and their rate limits (see log.h).
 *
 * A line is built whole in a buffer and written with one write(2), so lines
 * never interleave with another writer's and a crash loses no half line.
 */
#include "log.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int log_threshold = LOG_DEFAULT_LEVEL;
bool log_active;
static bool journal; /* stderr is the journal: <N> prefixes */
static struct log_limit *limits;

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
uint64_t (*log_clock)(void) = mono_ns;

static const char *const names[] = {
	[LL_ERR] = "err", [LL_WARNING] = "warning", [LL_NOTICE] = "notice", [LL_INFO] = "info", [LL_DEBUG] = "debug"
};

const char *log_level_name(int level)
{
	return level >= LL_ERR && level <= LL_DEBUG ? names[level] : "?";
}

int log_level_parse(const char *s)
{
	for (int l = LL_ERR; l <= LL_DEBUG; l++)
		if (!strcasecmp(s, names[l]) || (s[0] == '0' + l && !s[1]))
			return l;
	if (!strcasecmp(s, "error"))
		return LL_ERR;
	if (!strcasecmp(s, "warn"))
		return LL_WARNING;
	return -1;
}

/* systemd.exec(5): JOURNAL_STREAM is "DEVICE:INODE" (decimal) of the stream
 * the service's stdout/stderr were connected to; when stderr still is that
 * stream, its lines go to the journal and the <N> prefix sets their priority. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	struct stat st;
	char *end;
	if (!e || !*e || fstat(STDERR_FILENO, &st) != 0)
		return false;
	unsigned long long dev = strtoull(e, &end, 10);
	if (end == e || *end != ':')
		return false;
	const char *i = end + 1;
	unsigned long long ino = strtoull(i, &end, 10);
	if (end == i || *end)
		return false;
	return dev == (unsigned long long)st.st_dev && ino == (unsigned long long)st.st_ino;
}

void log_init(void)
{
	journal = stderr_is_journal();
	log_active = true;
}

/* ---- the line ------------------------------------------------------------- */

struct line {
	char b[2048];
	size_t n;
	bool cut;
};

static void put(struct line *l, const char *s, size_t len)
{
	size_t room = sizeof(l->b) - 1 - l->n; /* the newline always fits */
	if (len > room) {
		len = room;
		l->cut = true;
	}
	memcpy(l->b + l->n, s, len);
	l->n += len;
}

static bool plain(const char *s)
{
	if (!*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || *p == '"' || *p == '=' || *p == '\\')
			return false;
	return true;
}

static void put_value(struct line *l, const char *s)
{
	if (plain(s)) {
		put(l, s, strlen(s));
		return;
	}
	put(l, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e[5];
		if (*p == '"' || *p == '\\') {
			e[0] = '\\';
			e[1] = (char)*p;
			put(l, e, 2);
		} else if (*p == '\n') {
			put(l, "\\n", 2);
		} else if (*p == '\t') {
			put(l, "\\t", 2);
		} else if (*p < ' ' || *p >= 0x7f) {
			snprintf(e, sizeof(e), "\\x%02x", *p);
			put(l, e, 4);
		} else {
			put(l, (const char *)p, 1);
		}
	}
	put(l, "\"", 1);
}

/* One conversion of fmt at *pp ('%' ... conversion), its argument from ap. */
static void convert(struct line *l, const char **pp, va_list *ap)
{
	const char *p = *pp + 1;
	char spec[32] = "%", tmp[512];
	size_t k = 1;
	char len[3] = "";
	size_t nl = 0;
#define SPEC(c)                                \
	do {                                   \
		if (k < sizeof(spec) - 12)     \
			spec[k++] = (char)(c); \
	} while (0)
	while (*p && strchr("-+ #0", *p))
		SPEC(*p++);
	for (int part = 0; part < 2; part++) { /* width, then .precision */
		if (part == 1) {
			if (*p != '.')
				break;
			SPEC(*p++);
		}
		if (*p == '*') {
			k += (size_t)snprintf(spec + k, sizeof(spec) - k, "%d", va_arg(*ap, int));
			p++;
		}
		while (*p >= '0' && *p <= '9')
			SPEC(*p++);
	}
	while (*p && strchr("hlzjtL", *p) && nl < 2)
		len[nl++] = *p++;
	char conv = *p ? *p++ : '%';
	*pp = p;
	for (size_t i = 0; i < nl; i++)
		SPEC(len[i]);
	SPEC(conv);
	spec[k] = '\0';
#undef SPEC
	bool ll = nl == 2 && len[0] == 'l', lo = nl == 1 && len[0] == 'l';
	bool z = len[0] == 'z', j = len[0] == 'j', t = len[0] == 't';
	switch (conv) {
	case 'd':
	case 'i':
		if (ll)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, long long));
		else if (lo)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, long));
		else if (z)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, ssize_t));
		else if (j)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, intmax_t));
		else if (t)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, ptrdiff_t));
		else
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, int));
		break;
	case 'u':
	case 'x':
	case 'X':
	case 'o':
		if (ll)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, unsigned long long));
		else if (lo)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, unsigned long));
		else if (z)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, size_t));
		else if (j)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, uintmax_t));
		else if (t)
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, ptrdiff_t));
		else
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, unsigned));
		break;
	case 'c': snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, int)); break;
	case 'e':
	case 'E':
	case 'f':
	case 'F':
	case 'g':
	case 'G':
	case 'a':
	case 'A':
		if (len[0] == 'L')
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, long double));
		else
			snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, double));
		break;
	case 'p': snprintf(tmp, sizeof(tmp), spec, va_arg(*ap, void *)); break;
	case 's': {
		const char *s = va_arg(*ap, const char *);
		if (!s)
			s = "";
		if (strcmp(spec, "%s")) { /* a width or precision */
			snprintf(tmp, sizeof(tmp), spec, s);
			s = tmp;
		}
		put_value(l, s);
		return;
	}
	default: snprintf(tmp, sizeof(tmp), "%%"); break; /* "%%", or what printf does not know */
	}
	put(l, tmp, strlen(tmp));
}

static void emit(int level, const char *event, const char *fmt, va_list ap)
{
	struct line l = { .n = 0 };
	if (journal) {
		char pre[4] = { '<', (char)('0' + level), '>', 0 };
		put(&l, pre, 3);
	}
	put(&l, "level=", 6);
	put(&l, log_level_name(level), strlen(log_level_name(level)));
	put(&l, " event=", 7);
	put_value(&l, event);
	if (fmt && *fmt) {
		va_list aq;
		va_copy(aq, ap);
		put(&l, " ", 1);
		for (const char *p = fmt; *p;) {
			if (*p == '%' && p[1] == '%') {
				put(&l, "%", 1);
				p += 2;
			} else if (*p == '%') {
				convert(&l, &p, &aq);
			} else {
				const char *q = strchr(p, '%');
				size_t n = q ? (size_t)(q - p) : strlen(p);
				put(&l, p, n);
				p += n;
			}
		}
		va_end(aq);
	}
	if (l.cut) { /* keep the line parseable: mark it cut */
		static const char mark[] = " truncated=1";
		if (l.n > sizeof(l.b) - sizeof(mark))
			l.n = sizeof(l.b) - sizeof(mark);
		memcpy(l.b + l.n, mark, sizeof(mark) - 1);
		l.n += sizeof(mark) - 1;
	}
	l.b[l.n++] = '\n';
	fflush(stdout); /* what the daemon printed before comes first */
	for (size_t off = 0; off < l.n;) {
		ssize_t w = write(STDERR_FILENO, l.b + off, l.n - off);
		if (w <= 0)
			break; /* nowhere to say it */
		off += (size_t)w;
	}
}

void log_vevent(int level, const char *event, const char *fmt, va_list ap)
{
	if (log_enabled(level))
		emit(level, event, fmt, ap);
}

void log_event(int level, const char *event, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vevent(level, event, fmt, ap);
	va_end(ap);
}

/* ---- rate limits ----------------------------------------------------------- */

static void summary(struct log_limit *lim)
{
	if (lim->suppressed)
		log_event(lim->level, lim->event, "suppressed=%llu window_s=%u",
			  (unsigned long long)lim->suppressed, LOG_LIMIT_WINDOW_S);
	lim->start_ns = 0;
	lim->written = 0;
	lim->suppressed = 0;
}

static bool ended(const struct log_limit *lim, uint64_t now)
{
	return lim->start_ns && now - lim->start_ns >= (uint64_t)LOG_LIMIT_WINDOW_S * 1000000000u;
}

void log_limited(struct log_limit *lim, const char *fmt, ...)
{
	if (!log_enabled(lim->level))
		return;
	if (!lim->listed) {
		lim->next = limits;
		limits = lim;
		lim->listed = true;
	}
	uint64_t now = log_clock();
	if (ended(lim, now))
		summary(lim);
	if (!lim->start_ns)
		lim->start_ns = now ? now : 1;
	if (lim->written >= LOG_LIMIT_BURST) {
		lim->suppressed++;
		return;
	}
	lim->written++;
	va_list ap;
	va_start(ap, fmt);
	emit(lim->level, lim->event, fmt, ap);
	va_end(ap);
}

void log_tick(void)
{
	uint64_t now = log_clock();
	for (struct log_limit *lim = limits; lim; lim = lim->next)
		if (ended(lim, now))
			summary(lim);
}

void log_flush(void)
{
	for (struct log_limit *lim = limits; lim; lim = lim->next)
		summary(lim);
}
