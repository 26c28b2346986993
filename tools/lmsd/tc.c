// SPDX-License-Identifier: MIT
/*
 * tc.c - LMS-FWD's TC filter: ingress, priority GC_LMS_TC_PRIO, handle
 * GC_LMS_TC_HANDLE, direct action.  A filter in that place is ours only when
 * its program is named LMSD_PROG_NAME: an lmsd that was killed (SIGKILL, the
 * OOM killer) leaves its filter behind, forwarding with maps nobody updates
 * any more, and the next lmsd (or lmsd --flush) takes it away or replaces it.
 * Someone else's filter in that place is never touched.
 *
 * Only one lmsd may run in a network namespace (it owns that place on every
 * interface there): lmsd_lock() binds an abstract unix socket, which is
 * per network namespace and goes away with the process however it dies.
 */
#include "lmsd.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lmsfwd.h"

int lmsd_tc_holder(uint32_t ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = (int)ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = GC_LMS_TC_HANDLE, .priority = GC_LMS_TC_PRIO);
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int fd, r;

	/* most interfaces have no clsact qdisc or no filter there: not worth
	 * libbpf's warning about each */
	libbpf_print_fn_t print = libbpf_set_print(NULL);
	r = bpf_tc_query(&h, &o);
	libbpf_set_print(print);
	if (r)
		return 0;
	fd = bpf_prog_get_fd_by_id(o.prog_id);
	if (fd < 0)
		return -1; /* cannot tell: not ours to touch */
	memset(&info, 0, sizeof(info));
	r = bpf_obj_get_info_by_fd(fd, &info, &len);
	close(fd);
	return !r && !strncmp(info.name, LMSD_PROG_NAME, sizeof(info.name)) ? 1 : -1;
}

int lmsd_tc_attach(uint32_t ifindex, int prog_fd)
{
	LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = (int)ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = GC_LMS_TC_HANDLE, .priority = GC_LMS_TC_PRIO,
		    .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE);
	int r = bpf_tc_hook_create(&h);

	if (r && r != -EEXIST)
		return r;
	if (lmsd_tc_holder(ifindex) < 0)
		return -EBUSY;
	return bpf_tc_attach(&h, &o);
}

int lmsd_tc_detach(uint32_t ifindex)
{
	LIBBPF_OPTS(bpf_tc_hook, h, .ifindex = (int)ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = GC_LMS_TC_HANDLE, .priority = GC_LMS_TC_PRIO);

	if (lmsd_tc_holder(ifindex) != 1)
		return 0;
	return bpf_tc_detach(&h, &o) ? 0 : 1; /* gone meanwhile: nothing to do */
}

int lmsd_lock(void)
{
	static const char name[] = "\0groupcast-lmsd";
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memcpy(a.sun_path, name, sizeof(name) - 1);
	if (bind(fd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(name) - 1))) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}
