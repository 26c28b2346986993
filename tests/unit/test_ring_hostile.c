/* SPDX-License-Identifier: MIT */
/*
 * A buggy or hostile application cannot crash or hang the engine, nor make it
 * read outside its zone: every broken rule stops that ring only (with the
 * reason in gc_ring_status() and EPIPE from gc_ring_notify()), while a good
 * ring on the same engine keeps sending.  Attach requests that lie about
 * their descriptors or sizes are refused with a reason.  A thread scribbling
 * random bytes over a served ring's memory changes nothing for the others.
 */
#include "ring_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>

enum { N = 32 };

static struct rx *rx;
static struct gc_zone *zone;
static struct gc_ring_engine *eng;
static struct gc_ring *good;
static int good_sd;

/* The good ring still works. */
static void good_sends(int line)
{
	static unsigned seq;
	char msg[32];
	int len = snprintf(msg, sizeof(msg), "good %u", seq++);

	memcpy(gc_zone_buf(zone, 0), msg, (size_t)len);
	put_pkt(good, 0, (uint32_t)len, seq);
	if (gc_ring_submit(good) < 0)
		check_fail(__FILE__, line, "good ring: %s", gc_errmsg());
	if (!rx_match(&rx[0], msg, (size_t)len, RX_TIMEOUT_MS))
		check_fail(__FILE__, line, "the good ring's packet did not arrive");
	CHECK_OK(gc_ring_wait(good, N - 1, 2000));
}

static struct gc_ring *bad_ring(void)
{
	struct gc_ring *r = gc_ring_create(N, zone);
	int sd = udp_connected(&rx[1]);

	CHECK(r != NULL);
	CHECK_OK(gc_ring_attach(r, eng, sd));
	close(sd);
	return r;
}

/* Wait for the engine to stop r for `code`; the good ring goes on. */
static void stopped_for(struct gc_ring *r, int code, int line)
{
	struct gc_ring_status st = GC_RING_STATUS_INIT();

	gc_ring_notify(r); /* in case the engine had parked it */
	for (int i = 0; i < 2000; i++) {
		CHECK_OK(gc_ring_status(r, &st));
		if (st.error)
			break;
		usleep(1000);
	}
	if (st.error != code)
		check_fail(__FILE__, line, "ring stopped for %s, want %s",
			   gc_ring_violation_name(st.error), gc_ring_violation_name(code));
	errno = 0;
	if (gc_ring_notify(r) != -1 || errno != EPIPE ||
	    !strstr(gc_errmsg(), gc_ring_violation_name(code)))
		check_fail(__FILE__, line, "notify after the stop: errno %d, \"%s\"", errno,
			   gc_errmsg());
	CHECK_ERR(gc_ring_wait(r, N - 1, 100), EPIPE);
	good_sends(line);
	gc_ring_destroy(r);
}
#define STOPPED_FOR(r, code) stopped_for(r, code, __LINE__)

static void violations(void)
{
	struct gc_ring *r;

	/* user_i out of range */
	r = bad_ring();
	atomic_store(&r->sh->user_i, N + 5);
	atomic_store(&r->sh->umod_i, 3);
	STOPPED_FOR(r, GC_RING_BAD_USER_I);

	/* umod_i out of range */
	r = bad_ring();
	put_pkt(r, 0, 1, 0);
	atomic_store(&r->sh->umod_i, 0xffffff00u);
	STOPPED_FOR(r, GC_RING_BAD_UMOD_I);

	/* user_i moving backwards while packets are queued */
	r = bad_ring();
	for (int i = 0; i < 6; i++)
		put_pkt(r, 0, 1, (uint64_t)i);
	atomic_store(&r->sh->umod_i, 2); /* publish 2 of 6 by hand */
	gc_ring_notify(r);
	for (int i = 0; i < 2000 && atomic_load(&r->sh->dev_i) != 2; i++)
		usleep(1000);
	CHECK_EQ(atomic_load(&r->sh->dev_i), 2);
	atomic_store(&r->sh->user_i, 3);
	atomic_store(&r->sh->umod_i, 3);
	STOPPED_FOR(r, GC_RING_USER_I_BACK);

	/* claiming more than N - 1 (user_i laps dev_i) */
	r = bad_ring();
	for (int i = 0; i < 5; i++)
		put_pkt(r, 0, 1, (uint64_t)i);
	atomic_store(&r->sh->umod_i, 1);
	gc_ring_notify(r);
	for (int i = 0; i < 2000 && atomic_load(&r->sh->dev_i) != 1; i++)
		usleep(1000);
	atomic_store(&r->sh->user_i, 1 + 0); /* 5 -> 1: all the way round */
	atomic_store(&r->sh->umod_i, 1);
	STOPPED_FOR(r, GC_RING_USER_I_BACK);

	/* a record outside the zone, and one whose off + len wraps around */
	r = bad_ring();
	put_pkt(r, zone->size - 10, 100, 0);
	gc_ring_publish(r);
	STOPPED_FOR(r, GC_RING_BAD_OFFSET);
	r = bad_ring();
	put_pkt(r, UINT64_MAX - 5, 10, 0);
	gc_ring_publish(r);
	STOPPED_FOR(r, GC_RING_BAD_OFFSET);
	r = bad_ring();
	put_pkt(r, zone->size + 1, 0, 0); /* even empty, the offset must be inside */
	gc_ring_publish(r);
	STOPPED_FOR(r, GC_RING_BAD_OFFSET);
	/* the last byte of the zone is fine */
	r = bad_ring();
	put_pkt(r, zone->size - 1, 1, 0);
	put_pkt(r, zone->size, 0, 1);
	CHECK(gc_ring_submit(r) >= 0);
	CHECK_OK(gc_ring_wait(r, N - 1, 2000));
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	CHECK_OK(gc_ring_status(r, &st));
	CHECK_EQ(st.error, GC_RING_OK);
	CHECK_EQ(st.sent, 2);
	gc_ring_destroy(r);

	/* a length no datagram can have */
	r = bad_ring();
	put_pkt(r, 0, 70000, 0);
	gc_ring_publish(r);
	STOPPED_FOR(r, GC_RING_BAD_LENGTH);
}

/* ---- attach requests that lie ---- */

static int raw_attach(uint32_t entries, uint64_t zone_size, int ringfd, int zonefd, int sd, int nfds)
{
	struct gc_req q = { .op = GC_OP_ATTACH,
			    .version = GC_PROTO_VERSION,
			    .entries = entries,
			    .ack_entries = entries,
			    .zone_size = zone_size };
	const int fds[3] = { ringfd, zonefd, sd };
	struct gc_rep rep;
	int rfd = -1;
	int ret = gc_client_call(eng, "attach", &q, fds, nfds, &rep, &rfd);

	if (rfd >= 0)
		close(rfd);
	return (int)gc_err(ret);
}

static void refusals(void)
{
	int sd = udp_connected(&rx[1]);
	void *map;
	size_t rsize = gc_shm_size(N, N, (uint64_t)gc_page_size());
	int ringfd = gc_memfd_sealed("t-ring", rsize, &map);
	CHECK(ringfd >= 0);
	munmap(map, rsize);

	/* unsealed memfds: the application could shrink them under the engine */
	int unsealed = memfd_create("t-unsealed", MFD_CLOEXEC);
	CHECK_OK(ftruncate(unsealed, (off_t)rsize));
	CHECK_ERR(raw_attach(N, zone->size, unsealed, zone->fd, sd, 3), EPERM);
	CHECK(strstr(gc_errmsg(), "F_SEAL_SHRINK") != NULL);
	CHECK_ERR(raw_attach(N, 4096, ringfd, unsealed, sd, 3), EPERM);
	close(unsealed);
	/* a file on disk has no seals */
	char path[] = "/tmp/gc-ring-hostile-XXXXXX";
	int file = mkstemp(path);
	CHECK(file >= 0);
	unlink(path);
	CHECK_OK(ftruncate(file, (off_t)rsize));
	CHECK_ERR(raw_attach(N, zone->size, file, zone->fd, sd, 3), EINVAL);
	CHECK(strstr(gc_errmsg(), "memfd") != NULL);
	close(file);
	/* sizes the memfds do not have */
	CHECK_ERR(raw_attach(N * 4, zone->size, ringfd, zone->fd, sd, 3), EINVAL);
	CHECK(strstr(gc_errmsg(), "needs") != NULL);
	CHECK_ERR(raw_attach(N, zone->size + 4096, ringfd, zone->fd, sd, 3), EINVAL);
	CHECK_ERR(raw_attach(N, 0, ringfd, zone->fd, sd, 3), EINVAL);
	CHECK_ERR(raw_attach(N, (uint64_t)1 << 40, ringfd, zone->fd, sd, 3), EINVAL);
	CHECK_ERR(raw_attach(1, zone->size, ringfd, zone->fd, sd, 3), EINVAL);
	CHECK_ERR(raw_attach(GC_RING_MAX_ENTRIES + 1, zone->size, ringfd, zone->fd, sd, 3), EINVAL);
	/* wrong descriptors */
	CHECK_ERR(raw_attach(N, zone->size, ringfd, zone->fd, sd, 2), EINVAL);
	CHECK_ERR(raw_attach(N, zone->size, ringfd, zone->fd, ringfd, 3), ENOTSOCK);
	int tcp = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_ERR(raw_attach(N, zone->size, ringfd, zone->fd, tcp, 3), EPROTOTYPE);
	close(tcp);
	CHECK_ERR(raw_attach(N, zone->size, sd, zone->fd, sd, 3), EINVAL);
	/* a ring whose kern_i is garbage */
	void *m = mmap(NULL, rsize, PROT_READ | PROT_WRITE, MAP_SHARED, ringfd, 0);
	CHECK(m != MAP_FAILED);
	atomic_store(&((struct gc_ring_shm *)m)->kern_i, 5000);
	CHECK_ERR(raw_attach(N, zone->size, ringfd, zone->fd, sd, 3), EINVAL);
	CHECK(strstr(gc_errmsg(), "kern_i") != NULL);
	atomic_store(&((struct gc_ring_shm *)m)->kern_i, 0);
	munmap(m, rsize);

	/* other requests */
	struct gc_req q = { .op = 99, .version = GC_PROTO_VERSION };
	struct gc_rep rep;
	int rfd;
	CHECK_ERR(gc_err(gc_client_call(eng, "t", &q, NULL, 0, &rep, &rfd)), EINVAL);
	q.version = 7;
	CHECK_ERR(gc_err(gc_client_call(eng, "t", &q, NULL, 0, &rep, &rfd)), EPROTONOSUPPORT);
	CHECK(strstr(gc_errmsg(), "version 7") != NULL);
	q = (struct gc_req){ .op = GC_OP_DETACH, .version = GC_PROTO_VERSION, .ring_id = 424242 };
	CHECK_ERR(gc_err(gc_client_call(eng, "t", &q, NULL, 0, &rep, &rfd)), ENOENT);
	q.op = GC_OP_STATS;
	int two[2] = { sd, sd };
	CHECK_ERR(gc_err(gc_client_call(eng, "t", &q, two, 2, &rep, &rfd)), EINVAL);
	/* a message of the wrong size */
	char junk[7] = "garbage";
	CHECK(send(eng->fd, junk, sizeof(junk), 0) == sizeof(junk));
	CHECK(recv(eng->fd, &rep, sizeof(rep), 0) == sizeof(rep));
	CHECK_EQ(rep.err, EPROTO);
	/* and it still works */
	CHECK_OK(raw_attach(N, zone->size, ringfd, zone->fd, sd, 3));
	/* an engine with a ring limit per client */
	struct gc_ring_engine_opts lp = GC_RING_ENGINE_OPTS_INIT(.max_rings = 2, .quiet = 1);
	struct gc_ring_engine *lim = gc_ring_engine_create(&lp);
	struct gc_ring *lr[3];
	CHECK(lim != NULL);
	for (int i = 0; i < 3; i++) {
		lr[i] = gc_ring_create(8, zone);
		CHECK(lr[i] != NULL);
		if (i < 2)
			CHECK_OK(gc_ring_attach(lr[i], lim, sd));
		else
			CHECK_ERR(gc_ring_attach(lr[i], lim, sd), EDQUOT);
	}
	CHECK(strstr(gc_errmsg(), "max_rings") != NULL);
	CHECK_OK(gc_ring_detach(lr[0]));
	CHECK_OK(gc_ring_attach(lr[2], lim, sd)); /* room again */
	for (int i = 0; i < 3; i++)
		gc_ring_destroy(lr[i]);
	CHECK_OK(gc_ring_engine_destroy(lim));
	close(ringfd);
	close(sd);
	good_sends(__LINE__);
}

/* ---- a thread scribbling over a served ring ---- */

static _Atomic int scribbling;
static void *scribble(void *arg)
{
	unsigned char *mem = arg;
	uint64_t x = 88172645463325252ull;
	size_t size = gc_shm_size(N, N, (uint64_t)gc_page_size());

	while (atomic_load(&scribbling)) {
		for (int i = 0; i < 64; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t at = (x >> 20) % (size - 8);
			/* mostly small values, so that some look like indexes */
			uint64_t v = (x & 3) == 0 ? x : (x >> 40) % (2 * N);
			memcpy(mem + at, &v, (x & 4) ? 4 : 8);
		}
	}
	return NULL;
}

static void chaos(void)
{
	unsigned stopped = 0, rounds = in_ci() ? 30 : 100;

	for (unsigned k = 0; k < rounds; k++) {
		struct gc_ring *r = bad_ring();
		pthread_t t;
		for (int i = 0; i < 10; i++)
			put_pkt(r, (uint64_t)i * 100, 100, (uint64_t)i);
		gc_ring_publish(r);
		atomic_store(&scribbling, 1);
		CHECK_EQ(pthread_create(&t, NULL, scribble, r->sh), 0);
		for (int i = 0; i < 20; i++) {
			uint64_t one = 1;
			if (write(r->efd, &one, sizeof(one)) < 0)
				break;
			usleep(200);
		}
		atomic_store(&scribbling, 0);
		pthread_join(t, NULL);
		struct gc_ring_status st = GC_RING_STATUS_INIT();
		CHECK_OK(gc_ring_status(r, &st));
		stopped += st.error != GC_RING_OK;
		good_sends(__LINE__);
		gc_ring_destroy(r);
	}
	printf("chaos: %u of %u scribbled rings stopped\n", stopped, rounds);
	CHECK(stopped > 0);
}

/*
 * Without quiet, a violation is one line on stderr in the tools' log shape
 * (groupcast(1) LOGS): level=warning event=ring_violation ring=ID reason="...".
 */
static void logged_line(void)
{
	struct gc_ring_engine_opts lp = GC_RING_ENGINE_OPTS_INIT();
	struct gc_ring_engine *e = gc_ring_engine_create(&lp);
	struct gc_ring *r = gc_ring_create(N, zone);
	FILE *log = tmpfile();
	int saved = dup(2), sd = udp_connected(&rx[1]);
	CHECK(e && r && log && saved >= 0);
	fflush(stderr);
	CHECK(dup2(fileno(log), 2) == 2);
	CHECK_OK(gc_ring_attach(r, e, sd));
	close(sd);
	atomic_store(&r->sh->user_i, N + 5);
	atomic_store(&r->sh->umod_i, 3);
	gc_ring_notify(r);
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	for (int i = 0; i < 2000 && gc_ring_status(r, &st) == 0 && !st.error; i++)
		usleep(1000);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	CHECK_EQ(st.error, GC_RING_BAD_USER_I);
	char line[512] = "";
	rewind(log);
	CHECK(fgets(line, sizeof(line), log) != NULL);
	unsigned id = 0;
	char reason[256] = "";
	if (!EXPECT(sscanf(line, "level=warning event=ring_violation ring=%u reason=\"%255[^\"]\"\n",
			   &id, reason) == 2))
		fprintf(stderr, "  the line: %s", line);
	EXPECT(strstr(reason, "user_i") != NULL);
	EXPECT(fgets(line, sizeof(line), log) == NULL); /* one line */
	fclose(log);
	gc_ring_destroy(r);
	CHECK_OK(gc_ring_engine_destroy(e));
}

int main(void)
{
	struct gc_ring_engine_opts p = GC_RING_ENGINE_OPTS_INIT(.quiet = 1);

	fd_limit_max();
	rx = rx_open(AF_INET, 2);
	zone = gc_zone_create(4, 4096);
	eng = gc_ring_engine_create(&p);
	good = gc_ring_create(N, zone);
	CHECK(zone && eng && good);
	good_sd = udp_connected(&rx[0]);
	CHECK_OK(gc_ring_attach(good, eng, good_sd));
	good_sends(__LINE__);

	violations();
	logged_line();
	refusals();
	chaos();

	struct gc_ring_engine_stats st = GC_RING_ENGINE_STATS_INIT();
	CHECK_OK(gc_ring_engine_stats(eng, &st));
	CHECK(st.violations >= 9);
	gc_ring_destroy(good);
	CHECK_OK(gc_ring_engine_destroy(eng));
	CHECK_OK(gc_zone_destroy(zone));
	close(good_sd);
	rx_close(rx, 2);
	return check_done("ring_hostile");
}
