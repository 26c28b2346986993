/* SPDX-License-Identifier: MIT */
/*
 * groupcast/version.h - the version of the headers, and of the library at run
 * time (gc_version()).  This file is the one place the version is written:
 * CMakeLists.txt reads it for the project, the soname and groupcast.pc.
 *
 * ABI policy (docs/man/man7/groupcast.7, "ABI"): the soname is
 * libgroupcast.so.MAJOR.  Within a major version the ABI only grows: every
 * exported function has the symbol version of the release that added it
 * (groupcast.map, one node per release), structs are only appended to, and
 * structs that may grow carry their size (groupcast/common.h).  A change that
 * breaks this bumps MAJOR.
 */
#ifndef GROUPCAST_VERSION_H
#define GROUPCAST_VERSION_H

#define GC_VERSION_MAJOR 0
#define GC_VERSION_MINOR 3
#define GC_VERSION_PATCH 0

/* One number for comparisons: GC_VERSION_NUM(0, 2, 0) == 0x000200. */
#define GC_VERSION_NUM(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define GC_VERSION GC_VERSION_NUM(GC_VERSION_MAJOR, GC_VERSION_MINOR, GC_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library this program runs with, as GC_VERSION_NUM();
 * compare with GC_VERSION, the headers it was built with. */
unsigned gc_version(void);

#ifdef __cplusplus
}
#endif
#endif /* GROUPCAST_VERSION_H */
