/* SPDX-License-Identifier: MIT */
/*
 * tools/log.h - the daemons' log: `groupcast relay`, lmsd and `groupcast
 * engine` write one line per event on stderr, in one shape:
 *
 *   [<N>]level=LEVEL event=NAME key=value key="a value with spaces" ...
 *
 *   LEVEL  err, warning, notice, info or debug (syslog's priorities 3..7).
 *   NAME   a fixed word (join_refused, reloaded, ...): grep for it.
 *   value  bare when it is a plain word; in double quotes when it is empty or
 *          holds a space, '"', '=', '\' or a byte outside printable ASCII,
 *          with '"' and '\' escaped by '\' and other bytes as \n, \t, \xHH:
 *          a line is always one line.
 *   <N>    the sd-daemon(3) prefix (SD_ERR "<3>" .. SD_DEBUG "<7>"), written
 *          only when stderr is the journal: $JOURNAL_STREAM names stderr's
 *          device and inode (systemd.exec(5)), as systemd-journald wants.
 *
 * No timestamp: under systemd the journal stamps each line; elsewhere
 * redirect stderr to something that stamps (or ts(1)).
 *
 * Events that a remote sender drives (bad cookies, floods, malformed
 * packets) go through a struct log_limit: at most LOG_LIMIT_BURST lines of
 * that kind per LOG_LIMIT_WINDOW_S seconds, then, when the window ends, one
 * line "event=NAME suppressed=K window_s=10" for the K it did not write.
 */
#ifndef GC_TOOLS_LOG_H
#define GC_TOOLS_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* The values are syslog's (and sd-daemon.h's SD_ERR .. SD_DEBUG). */
enum log_level { LL_ERR = 3, LL_WARNING = 4, LL_NOTICE = 5, LL_INFO = 6, LL_DEBUG = 7 };

#define LOG_DEFAULT_LEVEL LL_NOTICE
#define LOG_LIMIT_BURST 10u
#define LOG_LIMIT_WINDOW_S 10u
#define LOG_LEVEL_NAMES "err, warning, notice, info or debug"

/* Lines at or above this level are written (LOG_DEFAULT_LEVEL until set). */
extern int log_threshold;
/* Whether log_init() ran: the process is a daemon that logs in this shape. */
extern bool log_active;

/* Start logging: the threshold is LOG_DEFAULT_LEVEL, and the <N> prefixes
 * are on when $JOURNAL_STREAM matches stderr. */
void log_init(void);
/* "err" .. "debug" (also "error", "warn", or 3..7) -> level, or -1. */
int log_level_parse(const char *s);
const char *log_level_name(int level);

static inline bool log_enabled(int level)
{
	return level <= log_threshold;
}

/* One event: fmt is the rest of the line, "key=%s key=%u ..."; every %s value
 * is quoted as above when it needs it (the other conversions never do). */
void log_event(int level, const char *event, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_vevent(int level, const char *event, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* A kind of event a remote sender drives.  Define one per kind, static:
 *   static struct log_limit lim_cookie = LOG_LIMIT_INIT(LL_WARNING, "bad_cookie");
 */
struct log_limit {
	int level;
	const char *event;
	uint64_t start_ns; /* the window's start; 0: no window open */
	unsigned written;  /* lines written in this window */
	uint64_t suppressed;
	struct log_limit *next; /* in the list log_tick() walks */
	bool listed;
};
#define LOG_LIMIT_INIT(lv, ev)               \
	{                                    \
		.level = (lv), .event = (ev) \
	}

/* log_event() for lim's kind, unless its window's LOG_LIMIT_BURST are spent. */
void log_limited(struct log_limit *lim, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The summary line of every window that has ended: call it from the
 * daemon's periodic tick (at least every second or so) and at exit. */
void log_tick(void);
/* At exit: the summary of every open window, ended or not. */
void log_flush(void);

/* For the unit test: the clock the limits read (CLOCK_MONOTONIC ns). */
extern uint64_t (*log_clock)(void);

#endif
