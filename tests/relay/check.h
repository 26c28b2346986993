/* SPDX-License-Identifier: MIT */
/*
 * check.h - the relay and tool unit tests' one check: CHECK(cond, fmt, ...)
 * reports a failed condition with a message and goes on; main() exits 1 if
 * `failures` is not 0.
 */
#ifndef GC_RELAY_TEST_CHECK_H
#define GC_RELAY_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			failures++;                                                     \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
		}                                                                       \
	} while (0)

#endif
