/* SPDX-License-Identifier: MIT */
/*
 * test_kprint - the kernel engine leaves the host application's libbpf print
 * callback as it was, and keeps libbpf quiet while it loads its program and
 * attaches it to lo (kprog.c): the application's callback is back in place
 * afterwards and was never called for what the engine did.  Attaching is
 * done twice (one socket, released, then another), so the second attach
 * meets the clsact qdisc on lo that the first one made or found, which
 * libbpf's bpf_tc_hook_create() reports as a kernel error ("Exclusivity flag
 * on, cannot modify", EEXIST) that kprog.c expects and tolerates.
 *
 * Without the privileges to load (CAP_BPF, CAP_NET_ADMIN) the engine is
 * refused before libbpf is ever called: nothing here can be checked, and the
 * test says so and exits 77 (skipped).
 */
#include <bpf/libbpf.h>
#include "check.h"

static int calls;
static char last[256];

static int mine(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	calls++;
	vsnprintf(last, sizeof(last), fmt, ap);
	return 0;
}

/* One kernel-engine send to a loopback receiver, then release: attaches the
 * program to lo and detaches it again. */
static void attach_and_detach(struct rx *r)
{
	int sd = udp_socket(AF_INET);
	struct gc_stats st = GC_STATS_INIT();

	CHECK_OK(gc_set_engine(sd, GC_ENGINE_KERNEL));
	CHECK_OK(gc_setgroup(sd, &r->addr, 1));
	CHECK_EQ(gc_send(sd, "kprint", 6, 0), 6);
	RX_EXPECT(r, "kprint", 6);
	CHECK_OK(gc_stats(sd, &st));
	CHECK_EQ(st.user_fallback, 0); /* the kernel engine sent it: it was attached */
	CHECK_OK(gc_release(sd));      /* the last user: detached */
	close(sd);
}

int main(void)
{
	int sd = udp_socket(AF_INET);
	struct rx *r = rx_open(AF_INET, 1);
	libbpf_print_fn_t now;
	int refused;

	libbpf_set_print(mine);
	refused = gc_set_engine(sd, GC_ENGINE_KERNEL); /* loads the program, if allowed here */
	gc_release(sd);
	close(sd);
	if (refused) {
		now = libbpf_set_print(NULL);
		CHECK(now == mine);
		printf("SKIP: kernel engine refused here (%s): not checked: that loading and "
		       "attaching its program keep the application's libbpf print callback and "
		       "call it for nothing\n",
		       gc_errmsg());
		rx_close(r, 1);
		return 77;
	}
	for (int i = 0; i < 2; i++)
		attach_and_detach(r);
	now = libbpf_set_print(NULL);
	CHECK(now == mine); /* libbpf's print callback is the one we set */
	if (calls)
		check_fail(__FILE__, __LINE__,
			   "libbpf called the application's callback %d times, last: %s", calls, last);
	rx_close(r, 1);
	return 0;
}
