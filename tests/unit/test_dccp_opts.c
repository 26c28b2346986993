/* SPDX-License-Identifier: MIT */
/*
 * struct gc_dccp_opts: every bad field is EINVAL with a message naming it,
 * and nothing is left open; good values (Ack Ratio for CCID 2 included) are
 * taken.  Listens on 127.0.0.1 over DCCP-UDP (unprivileged).
 */
#include "check.h"

#include <groupcast/dccp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in at;

/* gc_dccp_listen() with o must fail with EINVAL and name field. */
static void bad(const char *what, struct gc_dccp_opts o, const char *field)
{
	errno = 0;
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&at, sizeof(at), &o);
	if (l) {
		gc_dccp_listener_destroy(l);
		check_fail(__FILE__, __LINE__, "%s: accepted", what);
	}
	if (errno != EINVAL || !strstr(gc_errmsg(), field))
		check_fail(__FILE__, __LINE__, "%s: errno %d, \"%s\" (want EINVAL naming %s)", what,
			   errno, gc_errmsg(), field);
}

static struct gc_dccp_opts udp(void)
{
	struct gc_dccp_opts o = GC_DCCP_OPTS_INIT(.encap = GC_DCCP_UDP);
	return o;
}

int main(void)
{
	at.sin_family = AF_INET;
	at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* a free port: port 0 would mean DCCP-UDP's 6511, which other tests
	 * running beside this one may hold */
	int probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t sl = sizeof(at);
	CHECK_OK(bind(probe, (struct sockaddr *)&at, sizeof(at)));
	CHECK_OK(getsockname(probe, (struct sockaddr *)&at, &sl));
	close(probe);

	struct gc_dccp_opts o = udp();
	o.sz = 3;
	bad("sz", o, "opts->sz");
	o = udp(), o.ccid = 7;
	bad("ccid", o, "opts->ccid");
	o = udp(), o.encap = 9;
	bad("encap", o, "opts->encap");
	o = udp(), o.mps = 70000;
	bad("mps", o, "opts->mps");
	o = udp(), o.ring_slots = 3;
	bad("ring_slots", o, "opts->ring_slots");
	o = udp(), o.ring_slots = 64, o.zone_bufs = 32;
	bad("zone_bufs", o, "opts->zone_bufs");
	o = udp(), o.seq_window = 16;
	bad("seq_window", o, "opts->seq_window");
	o = udp(), o.ccid = 3, o.ack_ratio = 4;
	bad("ack_ratio with CCID 3", o, "opts->ack_ratio");
	o = udp(), o.ack_ratio = 70000;
	bad("ack_ratio above 16 bits", o, "opts->ack_ratio");

	/* the good ones */
	o = udp(), o.ack_ratio = 4, o.ring_slots = 64;
	struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&at, sizeof(at), &o);
	CHECK(l != NULL);
	gc_dccp_listener_destroy(l);
	o = udp(), o.ccid = 3, o.ring_slots = 64;
	l = gc_dccp_listen((struct sockaddr *)&at, sizeof(at), &o);
	CHECK(l != NULL);
	gc_dccp_listener_destroy(l);
	return check_done("dccp_opts");
}
