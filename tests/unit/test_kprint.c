/* SPDX-License-Identifier: MIT */
/*
 * test_kprint - loading the kernel engine's program leaves the host
 * application's libbpf print callback as it was (kprog.c silences libbpf
 * only while it loads).  Without the privileges to load, the engine is
 * refused and the callback must be untouched all the same.
 */
#include <bpf/libbpf.h>
#include "check.h"

static int mine(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}

int main(void)
{
	int sd = socket(AF_INET, SOCK_DGRAM, 0);
	libbpf_print_fn_t now;
	int r;

	CHECK(sd >= 0);
	libbpf_set_print(mine);
	r = gc_set_engine(sd, GC_ENGINE_KERNEL); /* loads the program, if allowed here */
	now = libbpf_set_print(NULL);
	CHECK(now == mine); /* libbpf's print callback is the one we set */
	if (r)
		printf("kernel engine refused here (%s): checked the refusal path only\n", gc_errmsg());
	gc_release(sd);
	close(sd);
	return 0;
}
