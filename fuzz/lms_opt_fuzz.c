/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: gc_lms_opt_parse() (lib/lms/lms.c) over arbitrary IPv4
 * option areas, copied to a buffer of the exact size so AddressSanitizer sees
 * any read past the end.  What must hold:
 *   - the result is GC_LMS_REQUEST, GC_LMS_DMCAST or 0, or -1 with EBADMSG
 *     (EINVAL only for areas longer than 40 bytes);
 *   - on success the area holds, at an option boundary, exactly the 16 bytes
 *     that gc_lms_opt_build() makes from what was parsed;
 *   - a parsed dmcast option with usable fields builds a dmcast whose option
 *     parses back to the same fields.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGC_FUZZ=ON
 *   cmake --build build-fuzz --target lms_opt_fuzz
 *   build-fuzz/fuzz/lms_opt_fuzz -max_total_time=300 fuzz/corpus/lms_opt
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <groupcast/lms.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                            \
	do {                                                                                  \
		if (!(c)) {                                                                   \
			fprintf(stderr, "lms_opt_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                              \
		}                                                                             \
	} while (0)

/* Is opt[0..16) at an option boundary of area[0..n)?  An independent walk. */
static int at_boundary(const uint8_t *area, size_t n, const uint8_t *opt)
{
	for (size_t i = 0; i < n && area[i] != 0;) {
		if (area[i] == 1) {
			i++;
			continue;
		}
		if (i + 16 <= n && memcmp(area + i, opt, 16) == 0)
			return 1;
		i += area[i + 1]; /* lengths were validated by the parser */
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *area = malloc(size ? size : 1);
	struct gc_lms_info info;

	REQUIRE(area);
	memcpy(area, data, size);
	errno = 0;
	int rc = gc_lms_opt_parse(size ? area : NULL, size, &info);
	if (size > 40) {
		REQUIRE(rc == -1 && errno == EINVAL);
	} else if (rc < 0) {
		REQUIRE(rc == -1 && errno == EBADMSG);
	} else if (rc == 0) {
		REQUIRE(info.code == 0);
	} else {
		REQUIRE(rc == GC_LMS_REQUEST || rc == GC_LMS_DMCAST);
		REQUIRE(info.code == rc && info.tpif <= 0xffff);
		uint8_t opt[GC_LMS_OPTLEN];
		REQUIRE(gc_lms_opt_build(opt, rc, &info) == GC_LMS_OPTLEN);
		REQUIRE(at_boundary(area, size, opt));

		struct gc_lms_dmcast d = GC_LMS_DMCAST_INIT(.tp = info, .dport = 1);
		uint8_t pkt[GC_LMS_DMCAST_HDRLEN + 4];
		if (gc_lms_dmcast_build(pkt, sizeof(pkt), &d, "abcd", 4) == (ssize_t)sizeof(pkt)) {
			struct gc_lms_info back;
			REQUIRE(gc_lms_opt_parse(pkt + 20, 16, &back) == GC_LMS_DMCAST);
			REQUIRE(back.tpif == info.tpif && back.tpaddr.s_addr == info.tpaddr.s_addr &&
				back.src.s_addr == info.src.s_addr &&
				back.group.s_addr == info.group.s_addr);
		}
	}
	free(area);
	return 0;
}
