/* SPDX-License-Identifier: MIT */
/*
 * test_log.c - tools/log.c: one line per event in the key=value shape,
 * values quoted when they must be, the level threshold, the journal's <N>
 * prefixes only when $JOURNAL_STREAM names stderr, and the rate limits
 * (at most LOG_LIMIT_BURST lines a window, then one summary line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "log.h"

static FILE *cap; /* stderr goes here while a test captures */
static int saved_err = -1;
static char out[65536]; /* what was captured */

static void capture(void)
{
	fflush(stderr);
	cap = tmpfile();
	saved_err = dup(STDERR_FILENO);
	dup2(fileno(cap), STDERR_FILENO);
}

static const char *captured(void)
{
	dup2(saved_err, STDERR_FILENO);
	close(saved_err);
	rewind(cap);
	size_t n = fread(out, 1, sizeof(out) - 1, cap);
	out[n] = '\0';
	fclose(cap);
	return out;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static uint64_t fake_now = 1000;
static uint64_t fake_clock(void)
{
	return fake_now;
}

static void test_shape(void)
{
	log_threshold = LL_NOTICE;
	capture();
	log_event(LL_WARNING, "join_refused", "src=%s reason=%s port=%u", "10.0.0.5:4000", "cookie",
		  4000u);
	log_event(LL_NOTICE, "reload_failed", "error=%s n=%zu ms=%.1f", "a.conf:3: bad \"x\" \\ y",
		  (size_t)7, 2.25);
	log_event(LL_ERR, "x", "empty=%s tab=%s nl=%s", "", "a\tb", "a\nb");
	log_event(LL_NOTICE, "started", NULL);
	log_event(LL_NOTICE, "pct", "p=%d%% w=%5.1f s=%.3s h=%08x ll=%lld", 50, 1.5, "abcdef",
		  0xbeefu, -5LL);
	log_event(LL_INFO, "hidden", "n=%d", 1);
	log_event(LL_DEBUG, "hidden", "n=%d", 2);
	const char *s = captured();
	CHECK(!strcmp(s,
		      "level=warning event=join_refused src=10.0.0.5:4000 reason=cookie port=4000\n"
		      "level=notice event=reload_failed error=\"a.conf:3: bad \\\"x\\\" \\\\ y\" n=7 "
		      "ms=2.2\n"
		      "level=err event=x empty=\"\" tab=\"a\\tb\" nl=\"a\\nb\"\n"
		      "level=notice event=started\n"
		      "level=notice event=pct p=50% w=  1.5 s=abc h=0000beef ll=-5\n"),
	      "got:\n%s", s);

	log_threshold = LL_DEBUG;
	capture();
	log_event(LL_DEBUG, "received", "bytes=%d", 3);
	s = captured();
	CHECK(!strcmp(s, "level=debug event=received bytes=3\n"), "got %s", s);

	/* a value longer than the line: cut, marked, still one line */
	static char big[4000];
	memset(big, 'a', sizeof(big) - 1);
	capture();
	log_event(LL_ERR, "big", "v=%s", big);
	s = captured();
	CHECK(count(s, "\n") == 1 && strstr(s, " truncated=1\n") && strlen(s) <= 2048,
	      "got %zu bytes", strlen(s));
}

static void test_levels(void)
{
	CHECK(log_level_parse("err") == LL_ERR && log_level_parse("error") == LL_ERR, "err");
	CHECK(log_level_parse("WARNING") == LL_WARNING && log_level_parse("warn") == LL_WARNING, "w");
	CHECK(log_level_parse("notice") == LL_NOTICE && log_level_parse("info") == LL_INFO, "n/i");
	CHECK(log_level_parse("debug") == LL_DEBUG && log_level_parse("7") == LL_DEBUG, "debug");
	CHECK(log_level_parse("loud") == -1 && log_level_parse("") == -1 && log_level_parse("8") == -1,
	      "bad names");
}

/* <N> only when JOURNAL_STREAM is stderr's device:inode. */
static void test_journal(void)
{
	log_threshold = LL_NOTICE;
	capture();
	struct stat st;
	fstat(STDERR_FILENO, &st);
	char v[64];
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
	log_init();
	log_event(LL_ERR, "a", NULL);
	log_event(LL_WARNING, "b", NULL);
	log_event(LL_NOTICE, "c", NULL);
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + 1);
	setenv("JOURNAL_STREAM", v, 1); /* another stream: stderr was redirected */
	log_init();
	log_event(LL_NOTICE, "d", NULL);
	setenv("JOURNAL_STREAM", "junk", 1);
	log_init();
	log_event(LL_NOTICE, "e", NULL);
	unsetenv("JOURNAL_STREAM");
	log_init();
	log_event(LL_NOTICE, "f", NULL);
	const char *s = captured();
	CHECK(!strcmp(s,
		      "<3>level=err event=a\n<4>level=warning event=b\n<5>level=notice event=c\n"
		      "level=notice event=d\nlevel=notice event=e\nlevel=notice event=f\n"),
	      "got:\n%s", s);
}

static void test_limits(void)
{
	static struct log_limit a = LOG_LIMIT_INIT(LL_WARNING, "bad_cookie");
	static struct log_limit b = LOG_LIMIT_INIT(LL_WARNING, "malformed");
	static struct log_limit quiet = LOG_LIMIT_INIT(LL_INFO, "joined");
	log_clock = fake_clock;
	log_threshold = LL_NOTICE;
	capture();
	for (int i = 0; i < 1000; i++)
		log_limited(&a, "src=10.0.0.%d:1", i % 250);
	for (int i = 0; i < 3; i++)
		log_limited(&b, "n=%d", i);
	for (int i = 0; i < 50; i++)
		log_limited(&quiet, "n=%d", i); /* below the threshold: not even counted */
	fake_now += 9999999999u;
	log_tick(); /* not yet ended */
	const char *s = captured();
	CHECK(count(s, "event=bad_cookie src=") == LOG_LIMIT_BURST && count(s, "suppressed") == 0 &&
		      count(s, "event=malformed n=") == 3 && !strstr(s, "joined"),
	      "got:\n%s", s);
	capture();
	fake_now += 1;
	log_tick();
	log_tick(); /* once */
	s = captured();
	CHECK(!strcmp(s, "level=warning event=bad_cookie suppressed=990 window_s=10\n"), "got:\n%s", s);
	/* a new window: BURST again; the event that opens it writes a line */
	capture();
	for (int i = 0; i < 12; i++)
		log_limited(&a, "i=%d", i);
	fake_now += 20000000000u;
	log_limited(&a, "i=%d", 99); /* ends the window: its summary, then this line */
	log_flush();
	s = captured();
	CHECK(count(s, "event=bad_cookie i=") == LOG_LIMIT_BURST + 1 &&
		      strstr(s,
			     "event=bad_cookie suppressed=2 window_s=10\nlevel=warning "
			     "event=bad_cookie i=99\n") &&
		      count(s, "suppressed") == 1,
	      "got:\n%s", s);
}

int main(void)
{
	test_shape();
	test_levels();
	test_journal();
	test_limits();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
