/* SPDX-License-Identifier: MIT */
/*
 * lib/core/export.h - GC_EXPORT marks a definition as part of the public ABI.
 *
 * The library is built with -fvisibility=hidden: only functions defined with
 * GC_EXPORT are exported, and each must also be in groupcast.map (ctest
 * "abi" checks that the two agree).
 */
#ifndef GC_CORE_EXPORT_H
#define GC_CORE_EXPORT_H

#define GC_EXPORT __attribute__((visibility("default")))

#endif
