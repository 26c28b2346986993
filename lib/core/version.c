/* SPDX-License-Identifier: MIT */
/* version.c - gc_version(): the library's own version, fixed when it was built. */
#include <groupcast/version.h>
#include "core/core.h"

GC_EXPORT unsigned gc_version(void)
{
	return GC_VERSION;
}
