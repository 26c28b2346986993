/* SPDX-License-Identifier: MIT */
/*
 * test_ltp_api: gc_ltp(3)'s argument checks (nothing is opened or sent when
 * an argument is wrong; the message names it) and NULL handling.  The
 * window's logic is test_ltp_window; sending and receiving is
 * tests/e2e/test_ltp.py.
 */
#include "check.h"

#include <groupcast/ltp.h>

static struct gc_ltp_opts good(void)
{
	struct gc_ltp_opts c = GC_LTP_OPTS_INIT(.flags = GC_LTP_RECEIVER, .port = 7712);
	inet_pton(AF_INET, "239.192.12.1", &c.group);
	inet_pton(AF_INET, "10.1.2.3", &c.source);
	return c;
}

static void refused(struct gc_ltp_opts c, const char *field)
{
	errno = 0;
	CHECK(gc_ltp_create(&c) == NULL);
	CHECK_EQ(errno, EINVAL);
	if (!strstr(gc_errmsg(), field))
		check_fail(__FILE__, __LINE__, "message '%s' does not name %s", gc_errmsg(), field);
}

int main(void)
{
	struct gc_ltp_opts c;
	struct gc_ltp_stats st = GC_LTP_STATS_INIT();
	struct gc_ltp_msg m;
	char buf[16];

	errno = 0;
	CHECK(gc_ltp_create(NULL) == NULL && errno == EFAULT);
	c = good(), c.flags = 0, refused(c, "opts->flags");
	c = good(), c.flags = GC_LTP_SENDER | GC_LTP_RECEIVER, refused(c, "opts->flags");
	c = good(), c.flags = 1 << 9 | GC_LTP_RECEIVER, refused(c, "opts->flags");
	c = good(), c.flags = GC_LTP_REPLIER, refused(c, "opts->flags");
	c = good(), c.flags = GC_LTP_UNORDERED, refused(c, "opts->flags");
	c = good(), inet_pton(AF_INET, "10.0.0.1", &c.group), refused(c, "opts->group");
	c = good(), c.port = 0, refused(c, "opts->port");
	c = good(), c.source.s_addr = 0, refused(c, "opts->source");
	c = good(), inet_pton(AF_INET, "224.1.1.1", &c.source), refused(c, "opts->source");
	c = good(), c.window_bytes = 2u << 30, refused(c, "opts->window_bytes");
	c = good(), c.max_ranges = 70000, refused(c, "opts->max_ranges");
	c = good(), c.replier_cost = 5, refused(c, "opts->replier_cost");
	c = good(), c.flags |= GC_LTP_REPLIER, c.replier_cost = 5, refused(c, "opts->replier_cost");

	CHECK_ERR(gc_ltp_send(NULL, buf, 1), EFAULT);
	CHECK_ERR(gc_ltp_recv(NULL, buf, sizeof(buf), &m), EFAULT);
	CHECK_ERR(gc_ltp_process(NULL), EFAULT);
	CHECK_ERR(gc_ltp_timeout(NULL), EFAULT);
	CHECK_ERR(gc_ltp_finish(NULL), EFAULT);
	CHECK_ERR(gc_ltp_stats(NULL, &st), EFAULT);
	CHECK_ERR(gc_ltp_fd(NULL), EFAULT);
	CHECK_EQ(gc_ltp_recovery_samples(NULL, NULL, 0), 0);
	gc_ltp_destroy(NULL);
	printf("ltp_api: ok\n");
	return 0;
}
