/* SPDX-License-Identifier: MIT */
/*
 * The LMS IP option on its own: gc_lms_opt_build() byte for byte against the
 * thesis's ipmopt_lms layout, gc_lms_opt_parse() over well-formed areas (NOP,
 * EOL, other options around it) and every kind of malformed one, each
 * rejected with EBADMSG and counted.
 */
#include <groupcast/lms.h>
#include "check.h"

static struct in_addr A(const char *s) {
	struct in_addr a;
	CHECK(inet_pton(AF_INET, s, &a) == 1);
	return a;
}

static uint64_t
bad_count(void)
{
	struct gc_lms_stats st = GC_LMS_STATS_INIT();
	CHECK_OK(gc_lms_stats(&st));
	return st.bad_options;
}

/* The request of the unit tests: turned at 10.9.8.1 interface 0x0102. */
static const uint8_t REQ[16] = { 138, 16, 0x01, 0x02, 10, 9, 8, 1, 10, 0, 0, 1, 239, 1, 2, 3 };

static void test_build(void)
{
	struct gc_lms_info in = {
		.tpif = 0x0102, .tpaddr = A("10.9.8.1"), .src = A("10.0.0.1"), .group = A("239.1.2.3")
	};
	uint8_t out[16];

	CHECK_EQ(gc_lms_opt_build(out, GC_LMS_REQUEST, &in), GC_LMS_OPTLEN);
	CHECK(memcmp(out, REQ, 16) == 0);
	CHECK_EQ(gc_lms_opt_build(out, GC_LMS_DMCAST, &in), 16);
	CHECK_EQ(out[0], 139);
	CHECK(memcmp(out + 1, REQ + 1, 15) == 0);

	/* A request as sent: turning point fields zero. */
	struct gc_lms_info req = { .src = A("10.0.0.1"), .group = A("239.1.2.3") };
	CHECK_EQ(gc_lms_opt_build(out, GC_LMS_REQUEST, &req), 16);
	static const uint8_t fresh[16] = { 138, 16, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1, 239, 1, 2, 3 };
	CHECK(memcmp(out, fresh, 16) == 0);

	CHECK_ERR(gc_lms_opt_build(out, 137, &in), EINVAL);
	CHECK(strstr(gc_errmsg(), "code"));
	in.tpif = 65536;
	CHECK_ERR(gc_lms_opt_build(out, GC_LMS_REQUEST, &in), EINVAL);
	CHECK(strstr(gc_errmsg(), "tpif"));
	CHECK_ERR(gc_lms_opt_build(NULL, GC_LMS_REQUEST, &in), EFAULT);
	CHECK_ERR(gc_lms_opt_build(out, GC_LMS_REQUEST, NULL), EFAULT);
}

static void expect_req(const uint8_t *area, size_t len)
{
	struct gc_lms_info info;

	memset(&info, 0xee, sizeof(info));
	CHECK_EQ(gc_lms_opt_parse(area, len, &info), GC_LMS_REQUEST);
	CHECK_EQ(info.code, GC_LMS_REQUEST);
	CHECK_EQ(info.tpif, 0x0102);
	CHECK_EQ(info.tpaddr.s_addr, A("10.9.8.1").s_addr);
	CHECK_EQ(info.src.s_addr, A("10.0.0.1").s_addr);
	CHECK_EQ(info.group.s_addr, A("239.1.2.3").s_addr);
}

static void expect_bad(const uint8_t *area, size_t len, const char *why)
{
	struct gc_lms_info info;
	uint64_t before = bad_count();

	CHECK_ERR(gc_lms_opt_parse(area, len, &info), EBADMSG);
	if (!strstr(gc_errmsg(), why))
		check_fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"", gc_errmsg(), why);
	CHECK_EQ(bad_count(), before + 1);
}

static void test_parse(void)
{
	uint8_t a[40];
	struct gc_lms_info info;

	/* alone, unpadded and padded with EOL */
	expect_req(REQ, 16);
	memset(a, 0, sizeof(a));
	memcpy(a, REQ, 16);
	expect_req(a, 20);
	/* after NOPs and another option (a record-route, type 7, 7 bytes) */
	uint8_t rr[7] = { 7, 7, 4, 0, 0, 0, 0 };
	memcpy(a, "\x01\x01\x01", 3);
	memcpy(a + 3, rr, 7);
	memcpy(a + 10, REQ, 16);
	a[26] = 1;
	a[27] = 0;
	expect_req(a, 28);
	/* no LMS option: 0 and code 0; an LMS option after EOL is padding */
	uint8_t none[8] = { 1, 1, 7, 3, 4, 1, 0, 0 };
	memset(&info, 0xee, sizeof(info));
	CHECK_EQ(gc_lms_opt_parse(none, 8, &info), 0);
	CHECK_EQ(info.code, 0);
	CHECK_EQ(info.tpaddr.s_addr, 0);
	CHECK_EQ(gc_lms_opt_parse(NULL, 0, &info), 0);
	a[0] = 0;
	memcpy(a + 4, REQ, 16);
	CHECK_EQ(gc_lms_opt_parse(a, 20, &info), 0);

	/* malformed, each rejected and counted */
	memcpy(a, REQ, 16);
	a[1] = 12; /* fits, but an LMS option is 16 bytes */
	expect_bad(a, 16, "length 12, expected 16");
	a[1] = 20; /* longer than the area */
	expect_bad(a, 16, "outside the");
	expect_bad(REQ, 15, "outside the"); /* truncated */
	expect_bad(REQ, 1, "no length byte");
	uint8_t one[2] = { 1, 138 }; /* NOP, then a type without its length */
	expect_bad(one, 2, "no length byte");
	uint8_t zero_len[4] = { 7, 0, 1, 1 }; /* length 0 would loop forever */
	expect_bad(zero_len, 4, "length 0");
	uint8_t len1[4] = { 68, 1, 0, 0 };
	expect_bad(len1, 4, "length 1");
	memcpy(a, REQ, 16);
	memcpy(a + 16, REQ, 16);
	a[16] = 139;
	expect_bad(a, 32, "second LMS option");
	/* the bad option after a good one still spoils the area */
	memcpy(a + 16, "\x44\x09\x05", 3);
	expect_bad(a, 20, "outside the");

	/* arguments */
	CHECK_ERR(gc_lms_opt_parse(a, 41, &info), EINVAL);
	CHECK(strstr(gc_errmsg(), "len"));
	CHECK_ERR(gc_lms_opt_parse(a, 16, NULL), EFAULT);
	CHECK_ERR(gc_lms_opt_parse(NULL, 4, &info), EFAULT);
}

/* Every prefix and every single-byte corruption of a busy area either parses
 * to the request or fails with EBADMSG; nothing else, never a crash (ASan). */
static void test_corruptions(void)
{
	uint8_t base[28] = { 1, 7, 7, 4, 0, 0, 0, 0 };
	memcpy(base + 8, REQ, 16);
	base[24] = 1;
	uint8_t a[28];
	struct gc_lms_info info;

	for (size_t len = 0; len <= sizeof(base); len++) {
		uint8_t *p = malloc(len ? len : 1); /* exact size: ASan sees any overread */
		memcpy(p, base, len);
		int rc = gc_lms_opt_parse(p, len, &info);
		CHECK(rc == GC_LMS_REQUEST || rc == 0 || (rc == -1 && errno == EBADMSG));
		free(p);
	}
	for (size_t i = 0; i < sizeof(base); i++)
		for (unsigned v = 0; v < 256; v++) {
			memcpy(a, base, sizeof(a));
			a[i] = (uint8_t)v;
			int rc = gc_lms_opt_parse(a, sizeof(a), &info);
			CHECK(rc == GC_LMS_REQUEST || rc == GC_LMS_DMCAST || rc == 0 ||
			      (rc == -1 && errno == EBADMSG));
		}
}

int main(void)
{
	test_build();
	test_parse();
	test_corruptions();
	return check_done("lms_opt");
}
