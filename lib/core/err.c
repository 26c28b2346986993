/* SPDX-License-Identifier: MIT */
/* err.c - this thread's last error message (gc_errf(), gc_seterr(),
 * gc_errmsg()); the convention is in core.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <groupcast/common.h>
#include "core/core.h"

static _Thread_local char msg[256];

static void record(int err, const char *fmt, va_list ap)
{
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);

	if (n >= 0 && (size_t)n < sizeof(msg) - 4) {
		const char *name = strerrorname_np(err);

		snprintf(msg + n, sizeof(msg) - (size_t)n, " (%s)", name ? name : "?");
	}
}

int gc_errf(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record(err, fmt, ap);
	va_end(ap);
	return -err;
}

int gc_seterr(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record(err, fmt, ap);
	va_end(ap);
	errno = err;
	return -1;
}

GC_EXPORT const char *gc_errmsg(void)
{
	return msg;
}
