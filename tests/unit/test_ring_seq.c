/* SPDX-License-Identifier: MIT */
/*
 * Numbered requests: a reply that does not carry the request's sequence
 * number answers an earlier request the client gave up on, and is never read
 * as the answer to this one.
 *
 * First against a fake engine (the other end of a socketpair, replies queued
 * by hand): a stale reply before the right one is skipped; a stale reply of a
 * successful attach makes the client detach that ring; a reply in another
 * protocol version is EPROTONOSUPPORT; a notice (seq 0) is the engine's
 * refusal; nothing but stale replies is a timeout, not an answer.
 * Then against a real daemon: a request whose reply was never read (a
 * timed-out call) does not derail the next attach.
 */
#include "ring_util.h"

#include <sys/eventfd.h>

static struct gc_ring_engine *fake_handle(int fd)
{
	struct gc_ring_engine *e = calloc(1, sizeof(*e));

	CHECK(e != NULL);
	pthread_mutex_init(&e->lock, NULL);
	e->fd = fd;
	struct timeval tv = { .tv_usec = 200 * 1000 };
	CHECK_OK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	return e;
}

/* Queue a reply on the engine's end, with one descriptor if fd >= 0. */
static void queue_rep(int sock, const struct gc_rep *rep, size_t len, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { (void *)rep, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	CHECK_EQ(sendmsg(sock, &mh, 0), (ssize_t)len);
}

static struct gc_rep rep_of(uint32_t seq, uint32_t op)
{
	struct gc_rep r;

	memset(&r, 0, sizeof(r));
	r.version = GC_PROTO_VERSION;
	r.seq = seq;
	r.op = op;
	return r;
}

/* A STATS reply's counters: packets as given, the others numbered. */
static void wire_packets(struct gc_rep *r, uint64_t packets)
{
	struct gc_ring_engine_stats st = { .rounds = 3, .limited = 12 };

	st.packets = packets;
	gc_stats_to_wire(&st, &r->stats);
}

/*
 * The counters travel as {n, v[n]} in a fixed order: an engine that knows
 * fewer counters (older) or more (newer) than this library still agrees on
 * the ones both know; the others read 0 or are ignored.
 */
static void wire_stats_versions(void)
{
	struct gc_ring_engine_stats st = { .clients = 1, .rings = 2, .packets = 6, .limited = 12 }, got;
	struct gc_wire_stats w;

	gc_stats_to_wire(&st, &w);
	CHECK_EQ(w.n, 12);
	CHECK_EQ(gc_stats_from_wire(&w, &got), 12);
	CHECK(memcmp(&st, &got, sizeof(st)) == 0);
	/* an older engine: the first 6 counters only */
	w.n = 6;
	CHECK_EQ(gc_stats_from_wire(&w, &got), 6);
	CHECK_EQ(got.packets, 6);
	CHECK_EQ(got.limited, 0);
	/* a newer one: counters we do not know yet are ignored */
	w.n = GC_WIRE_STATS_MAX;
	w.v[20] = 777;
	CHECK_EQ(gc_stats_from_wire(&w, &got), 12);
	CHECK_EQ(got.limited, 12);
	/* a hostile count never reads past the struct */
	w.n = UINT32_MAX;
	CHECK_EQ(gc_stats_from_wire(&w, &got), 12);
}

/* The next request the fake engine got. */
static struct gc_req next_req(int sock)
{
	struct gc_req q;

	CHECK_EQ(recv(sock, &q, sizeof(q), MSG_DONTWAIT), (ssize_t)sizeof(q));
	return q;
}

static void fake_engine(void)
{
	int sp[2];

	CHECK_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
	struct gc_ring_engine *e = fake_handle(sp[1]);
	e->seq = 10; /* the next request is 11 */

	/* a late attach reply (ring 77, with its eventfd), then the answer */
	int efd = eventfd(0, EFD_CLOEXEC);
	struct gc_rep late = rep_of(7, GC_OP_ATTACH);
	late.ring_id = 77;
	queue_rep(sp[0], &late, sizeof(late), efd);
	close(efd);
	struct gc_rep ok = rep_of(11, GC_OP_STATS);
	wire_packets(&ok, 1234);
	queue_rep(sp[0], &ok, sizeof(ok), -1);
	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.packets, 1234);
	CHECK_EQ(e->stale, 1);
	struct gc_req q = next_req(sp[0]);
	CHECK_EQ(q.op, GC_OP_STATS);
	CHECK_EQ(q.seq, 11);
	q = next_req(sp[0]); /* the ring the engine attached behind our back */
	CHECK_EQ(q.op, GC_OP_DETACH);
	CHECK_EQ(q.ring_id, 77);
	CHECK_EQ(q.seq, 12);

	/* only a stale reply: the call times out, it does not take it */
	struct gc_rep stale = rep_of(12, GC_OP_DETACH);
	queue_rep(sp[0], &stale, sizeof(stale), -1);
	stale.seq = 5;
	stale.op = GC_OP_STATS;
	wire_packets(&stale, 999);
	queue_rep(sp[0], &stale, sizeof(stale), -1);
	CHECK_ERR(gc_ring_engine_stats(e, &st), ETIMEDOUT);
	CHECK_EQ(e->stale, 3);
	CHECK_EQ(next_req(sp[0]).seq, 13);
	/* its late answer comes now, before the next one's: skipped */
	ok = rep_of(13, GC_OP_STATS);
	wire_packets(&ok, 1);
	queue_rep(sp[0], &ok, sizeof(ok), -1);
	ok = rep_of(14, GC_OP_STATS);
	wire_packets(&ok, 2);
	queue_rep(sp[0], &ok, sizeof(ok), -1);
	CHECK_OK(gc_ring_engine_stats(e, &st));
	CHECK_EQ(st.packets, 2);
	CHECK_EQ(e->stale, 4);
	CHECK_EQ(next_req(sp[0]).seq, 14);

	/* another protocol version */
	ok = rep_of(15, GC_OP_STATS);
	ok.version = GC_PROTO_VERSION + 1;
	queue_rep(sp[0], &ok, sizeof(ok), -1);
	CHECK_ERR(gc_ring_engine_stats(e, &st), EPROTONOSUPPORT);
	CHECK(strstr(gc_errmsg(), "version 4") != NULL);
	next_req(sp[0]);
	/* too short to say anything */
	queue_rep(sp[0], &ok, 8, -1);
	CHECK_ERR(gc_ring_engine_stats(e, &st), EPROTO);
	next_req(sp[0]);
	/* a notice: the engine refuses us */
	struct gc_rep no = rep_of(0, 0);
	no.err = EACCES;
	snprintf(no.msg, sizeof(no.msg), "go away");
	queue_rep(sp[0], &no, sizeof(no), -1);
	CHECK_ERR(gc_ring_engine_stats(e, &st), EACCES);
	CHECK(strstr(gc_errmsg(), "go away") != NULL);

	pthread_mutex_destroy(&e->lock);
	free(e);
	close(sp[0]);
	close(sp[1]);
}

/* A real daemon: a request whose reply nobody read, then an attach. */
static void real_daemon(void)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/gc-ring-seq-%d.sock", (int)getpid());
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.listen = path, .quiet = 1);
	struct gc_ring_engine *eng = gc_ring_engine_create(&p);
	struct gc_ring_engine *c = gc_ring_engine_connect(path);
	struct rx *rx = rx_open(AF_INET, 1);
	struct gc_zone *z = gc_zone_create(1, 4096);
	struct gc_ring *r = z ? gc_ring_create(8, z) : NULL;
	int sd = udp_connected(&rx[0]);

	CHECK(eng && c && r);
	/* as if a STATS call had timed out: sent, its reply never read */
	struct gc_req q = { .op = GC_OP_STATS, .version = GC_PROTO_VERSION, .seq = ++c->seq };
	CHECK_EQ(send(c->fd, &q, sizeof(q), 0), (ssize_t)sizeof(q));
	/* without numbers, the attach would read the STATS reply as its
	 * answer (and find no eventfd) */
	CHECK_OK(gc_ring_attach(r, c, sd));
	CHECK_EQ(c->stale, 1);
	CHECK(r->efd >= 0);
	memcpy(gc_zone_buf(z, 0), "seq", 3);
	put_pkt(r, 0, 3, 0);
	CHECK(gc_ring_submit(r) >= 0);
	RX_EXPECT(&rx[0], "seq", 3);

	/* the daemon says so when a request speaks another version */
	q = (struct gc_req){ .op = GC_OP_STATS, .version = 1 };
	struct gc_rep rep;
	int rfd;
	CHECK_ERR(gc_err(gc_client_call(c, "t", &q, NULL, 0, &rep, &rfd)), EPROTONOSUPPORT);
	CHECK(strstr(gc_errmsg(), "protocol version 1") != NULL);
	/* and a request without a number is malformed */
	q = (struct gc_req){ .op = GC_OP_STATS, .version = GC_PROTO_VERSION };
	CHECK_EQ(send(c->fd, &q, sizeof(q), 0), (ssize_t)sizeof(q));
	CHECK_EQ(recv(c->fd, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	CHECK_EQ(rep.err, EPROTO);
	CHECK_EQ(rep.seq, 0);

	gc_ring_destroy(r);
	close(sd);
	CHECK_OK(gc_zone_destroy(z));
	rx_close(rx, 1);
	CHECK_OK(gc_ring_engine_destroy(c));
	CHECK_OK(gc_ring_engine_destroy(eng));
}

int main(void)
{
	wire_stats_versions();
	fake_engine();
	real_daemon();
	return check_done("ring_seq");
}
