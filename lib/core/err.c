/* SPDX-License-Identifier: MIT */
/* err.c - this thread's last error message (gc_seterr(), gc_errmsg()). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <groupcast/common.h>
#include "core/core.h"

static _Thread_local char msg[256];

int gc_seterr(int err, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(msg) - 4) {
		const char *name = strerrorname_np(err);

		snprintf(msg + n, sizeof(msg) - (size_t)n, " (%s)", name ? name : "?");
	}
	errno = err;
	return -1;
}

GC_EXPORT const char *gc_errmsg(void)
{
	return msg;
}
