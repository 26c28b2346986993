/* SPDX-License-Identifier: MIT */
/*
 * The io_uring engines when the ring misbehaves (issue: a short submit hung
 * the reap loop; an early return left completions that later wrote past
 * gerrno).  Through the test seam in internal.h the SQ is made smaller than
 * the group, and io_uring_submit() is made to take nothing, once or for
 * good, or to fail.  Whatever the ring does, every member must get the
 * datagram exactly once and gerrno must say so; the next send must work.
 */
#include <liburing.h>
#include "check.h"
#include "../../lib/group/internal.h"

#define N 10

static int fake_calls;
static int fake_zero_once(struct io_uring *ring)
{
	return fake_calls++ ? io_uring_submit(ring) : 0;
}
static int fake_zero_always(struct io_uring *ring)
{
	(void)ring;
	fake_calls++;
	return 0;
}
static int fake_eio(struct io_uring *ring)
{
	(void)ring;
	fake_calls++;
	return -EIO;
}

/* One gc_send to r[0..N) and one gc_sendgroup; each member gets each once. */
static void send_all_once(int sd, struct rx *r, const char *tag, int line)
{
	struct gc_giovec rec[N];
	int gerrno[N];
	char msg[32];

	snprintf(msg, sizeof(msg), "%s-send", tag);
	if (gc_send(sd, msg, strlen(msg), 0) != (ssize_t)strlen(msg))
		check_fail(__FILE__, line, "%s: gc_send: %s", tag, gc_errmsg());
	for (size_t i = 0; i < N; i++) {
		rx_expect_at(__FILE__, line, &r[i], msg, strlen(msg));
		rx_none_at(__FILE__, line, &r[i]);
	}
	snprintf(msg, sizeof(msg), "%s-group", tag);
	for (size_t i = 0; i < N; i++)
		rec[i] = (struct gc_giovec){ .dest = r[i].addr };
	struct iovec shared = { msg, strlen(msg) };
	for (size_t i = 0; i < N; i++)
		gerrno[i] = -1;
	if (gc_sendgroup(sd, &shared, rec, N, 0, gerrno) != N)
		check_fail(__FILE__, line, "%s: gc_sendgroup: %s", tag, gc_errmsg());
	for (size_t i = 0; i < N; i++) {
		if (gerrno[i])
			check_fail(__FILE__, line, "%s: gerrno[%zu] = %d", tag, i, gerrno[i]);
		rx_expect_at(__FILE__, line, &r[i], msg, strlen(msg));
		rx_none_at(__FILE__, line, &r[i]);
	}
}

static void with_engine(enum gc_engine e)
{
	struct rx *r = rx_open(AF_INET, N);
	struct sockaddr_storage *m = rx_members(r, N);
	const char *name = gc_engine_name(e);
	int (*real)(struct io_uring *) = gc_uring_tunables.submit;

	/* an SQ of 4 for a group of 10: three chunks per send */
	gc_uring_tunables.sq_entries = 4;
	int sd = udp_socket(AF_INET);
	CHECK_OK(gc_set_engine(sd, e));
	CHECK_OK(gc_setgroup(sd, m, N));
	send_all_once(sd, r, name, __LINE__);

	/* a submit that takes nothing once, then recovers */
	fake_calls = 0;
	gc_uring_tunables.submit = fake_zero_once;
	send_all_once(sd, r, name, __LINE__);
	CHECK(fake_calls > 1);

	/* a submit that never takes anything: the library gives up on the
	 * ring after a few tries and sends the plain way, never hangs */
	fake_calls = 0;
	gc_uring_tunables.submit = fake_zero_always;
	send_all_once(sd, r, name, __LINE__);
	CHECK(fake_calls >= 3);

	/* a submit that fails outright */
	fake_calls = 0;
	gc_uring_tunables.submit = fake_eio;
	send_all_once(sd, r, name, __LINE__);
	CHECK(fake_calls >= 1);

	/* a healthy ring again: no completion of the sick ones is left over
	 * to be taken for a member of this send */
	gc_uring_tunables.submit = real;
	send_all_once(sd, r, name, __LINE__);
	CHECK_EQ(gc_get_engine(sd), e);

	gc_uring_tunables.sq_entries = 1024;
	close(sd);
	free(m);
	rx_close(r, N);
}

int main(void)
{
	if (gc_engine_available(GC_ENGINE_URING)) {
		skip(gc_errmsg());
		return 77;
	}
	with_engine(GC_ENGINE_URING);
	if (gc_engine_available(GC_ENGINE_URING_ZC) == 0)
		with_engine(GC_ENGINE_URING_ZC);
	else
		skip(gc_errmsg());
	return check_done("test_uring");
}
