/* SPDX-License-Identifier: MIT */
/*
 * groupcast ring-send: a client of the packet ring.  Creates a zone and a
 * ring, attaches it with a connected UDP socket to an engine daemon
 * (--connect PATH, see `groupcast engine`) or to an engine thread of its own
 * (--thread), sends COUNT numbered datagrams through it and prints the
 * ring's status as one JSON line.
 *
 * Payload of datagram with sequence number s, SIZE bytes:
 *   bytes 0..7   s as a big-endian u64 (only its first SIZE bytes if SIZE < 8)
 *   byte  i >= 8 cli_pattern(i)
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <groupcast/ring.h>

#define RS_TIMEOUT_MS 10000	/* longest wait for the engine to make progress */
#define RS_SLICE_MS 500		/* then check that the engine is still there */
#define RS_MAX_SIZE GC_UDP4_MAX /* the engine's socket may be IPv4: the smaller limit */

struct ringsend {
	const char *connect;
	bool thread;
	const char *dest;
	struct sockaddr_storage ss;
	int fam;
	uint64_t count, size, entries, every, seq_start;
};

static void ringsend_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast ring-send (--connect PATH | --thread) --dest ADDR:PORT [options]\n"
		"Send COUNT datagrams through a packet ring: attached to the engine daemon on\n"
		"the Unix socket PATH (`groupcast engine`), or to an engine thread of this\n"
		"process with --thread.  Datagram payload: an 8-byte big-endian sequence\n"
		"number, then pattern bytes.  Prints the ring status as one JSON line:\n"
		"  {\"sent\":..,\"bytes\":..,\"dead\":..,\"send_errors\":..,\"last_errno\":..,\n"
		"   \"error\":\"ok\",\"count\":..,\"elapsed_ms\":..}\n"
		"  --connect PATH     attach to the engine daemon listening on PATH\n"
		"  --thread           start an engine thread in this process instead\n"
		"  --dest ADDR:PORT   receiver, IPv4 or [IPv6]:PORT (required)\n"
		"  --count N          datagrams to send (default 1000)\n"
		"  --size BYTES       payload bytes per datagram, 0..65507 (default 100)\n"
		"  --entries N        ring records, 2..1048576 (N - 1 packets; default 256)\n"
		"  --every K          publish (gc_ring_submit) every K packets (default 1)\n"
		"  --seq-start S      first sequence number (default 0)\n"
		"Exit status 1 if the engine stops serving the ring or makes no progress\n"
		"for 10 s.\n");
}

static void parse_dest(struct ringsend *rs, const char *s)
{
	char buf[128];
	if (strlen(s) >= sizeof(buf))
		cli_usage_error("--dest: '%s' is too long", s);
	strcpy(buf, s);
	char *addr, *port;
	cli_split_addr("--dest", s, buf, "ADDR:PORT", &addr, &port);
	uint16_t p = (uint16_t)cli_u64("--dest (port)", port, 1, 65535);
	rs->fam = cli_ip("--dest", addr, p, &rs->ss);
}

static void ringsend_parse(struct ringsend *rs, int argc, char **argv)
{
	enum { O_CONNECT = 256, O_THREAD, O_DEST, O_COUNT, O_SIZE, O_ENTRIES, O_EVERY, O_SEQ };
	static const struct option lo[] = {
		{ "connect", required_argument, NULL, O_CONNECT },
		{ "thread", no_argument, NULL, O_THREAD },
		{ "dest", required_argument, NULL, O_DEST },
		{ "count", required_argument, NULL, O_COUNT },
		{ "size", required_argument, NULL, O_SIZE },
		{ "entries", required_argument, NULL, O_ENTRIES },
		{ "every", required_argument, NULL, O_EVERY },
		{ "seq-start", required_argument, NULL, O_SEQ },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (ch) {
		case O_CONNECT: rs->connect = optarg; break;
		case O_THREAD: rs->thread = true; break;
		case O_DEST: rs->dest = optarg; break;
		case O_COUNT: rs->count = cli_u64("--count", optarg, 0, UINT64_MAX / 2); break;
		case O_SIZE: rs->size = cli_u64("--size", optarg, 0, RS_MAX_SIZE); break;
		case O_ENTRIES:
			rs->entries = cli_u64("--entries", optarg, 2, GC_RING_MAX_ENTRIES);
			break;
		case O_EVERY: rs->every = cli_u64("--every", optarg, 1, UINT32_MAX); break;
		case O_SEQ:
			rs->seq_start = cli_u64("--seq-start", optarg, 0, UINT64_MAX / 2);
			break;
		case 'h': ringsend_usage(stdout); exit(0);
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (!rs->connect == !rs->thread)
		cli_usage_error("give exactly one of --connect PATH and --thread");
	if (rs->connect && !*rs->connect)
		cli_usage_error("--connect: empty path");
	if (!rs->dest)
		cli_usage_error("--dest ADDR:PORT is required");
	parse_dest(rs, rs->dest);
}

/* Print the ring's status as one JSON line; returns its error (GC_RING_OK...).
 * gone: the engine went away without saying so in the ring. */
static int print_status(const struct ringsend *rs, struct gc_ring *r, uint64_t t0, bool gone)
{
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	if (gc_ring_status(r, &st) != 0)
		cli_fail("gc_ring_status: %s", gc_errmsg());
	if (gone && st.error == GC_RING_OK)
		st.error = GC_RING_DETACHED;
	const char *en = st.last_errno ? strerrorname_np(st.last_errno) : NULL;
	printf("{\"sent\":%llu,\"bytes\":%llu,\"dead\":%llu,\"send_errors\":%llu,\"last_errno\":",
	       (unsigned long long)st.sent, (unsigned long long)st.bytes,
	       (unsigned long long)st.dead, (unsigned long long)st.send_errors);
	cli_json_str(stdout, en);
	printf(",\"error\":");
	cli_json_str(stdout, gc_ring_violation_name(st.error));
	printf(",\"count\":%llu,\"elapsed_ms\":%.1f}\n", (unsigned long long)rs->count,
	       (double)(cli_now(CLOCK_MONOTONIC) - t0) / 1e6);
	fflush(stdout);
	return st.error;
}

/* A ring call failed: say why, print the status, exit 1. */
static void ring_failed(const struct ringsend *rs, struct gc_ring *r, uint64_t t0, const char *what)
{
	if (errno == ETIMEDOUT)
		cli_warn("%s: the engine made no progress for %d ms", what, RS_TIMEOUT_MS);
	else
		cli_warn("%s: %s", what, gc_errmsg());
	print_status(rs, r, t0, false);
	exit(CLI_EXIT_FAIL);
}

/*
 * gc_ring_wait() for nfree slots, at most RS_TIMEOUT_MS.  A daemon that
 * stops marks the ring detached (EPIPE), but a killed one cannot, so between
 * slices ask the engine for its stats: that fails once it is gone.
 */
static void ring_wait(const struct ringsend *rs, struct gc_ring *r, struct gc_ring_engine *e,
		      unsigned nfree, uint64_t t0)
{
	for (int waited = 0; waited < RS_TIMEOUT_MS; waited += RS_SLICE_MS) {
		if (gc_ring_wait(r, nfree, RS_SLICE_MS) == 0)
			return;
		if (errno != ETIMEDOUT)
			ring_failed(rs, r, t0, "gc_ring_wait");
		struct gc_ring_engine_stats es = GC_RING_ENGINE_STATS_INIT();
		if (gc_ring_engine_stats(e, &es) != 0) {
			cli_warn("the engine stopped serving the ring: %s", gc_errmsg());
			print_status(rs, r, t0, true);
			exit(CLI_EXIT_FAIL);
		}
	}
	errno = ETIMEDOUT;
	ring_failed(rs, r, t0, "gc_ring_wait");
}

int cmd_ringsend(int argc, char **argv)
{
	struct ringsend rs = { .count = 1000, .size = 100, .entries = 256, .every = 1 };
	ringsend_parse(&rs, argc, argv);

	int sd = socket(rs.fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sd < 0)
		cli_fail("socket: %s", strerror(errno));
	socklen_t slen = rs.fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (connect(sd, (struct sockaddr *)&rs.ss, slen) != 0)
		cli_fail("--dest: cannot connect to %s: %s", rs.dest, strerror(errno));
	cli_sockbuf(sd, false, 4 << 20);

	unsigned n = (unsigned)rs.entries;
	size_t bsz = rs.size ? rs.size : 1;
	struct gc_zone *z = gc_zone_create(n, bsz);
	if (!z)
		cli_fail("gc_zone_create(%u buffers of %zu bytes): %s", n, bsz, gc_errmsg());
	/* The pattern never changes: write it once, only the header per packet. */
	for (unsigned i = 0; i < n; i++) {
		uint8_t *b = gc_zone_buf(z, i);
		for (size_t j = 8; j < rs.size; j++)
			b[j] = cli_pattern(j);
	}
	struct gc_ring *r = gc_ring_create(n, z);
	if (!r)
		cli_fail("gc_ring_create(%u entries): %s", n, gc_errmsg());

	struct gc_ring_engine *e;
	if (rs.thread) {
		e = gc_ring_engine_create(NULL);
		if (!e)
			cli_fail("cannot start an engine thread: %s", gc_errmsg());
	} else {
		e = gc_ring_engine_connect(rs.connect);
		if (!e)
			cli_fail("--connect: cannot connect to the engine on %s: %s (%s)",
				 rs.connect, strerror(errno), gc_errmsg());
	}
	if (gc_ring_attach(r, e, sd) != 0)
		cli_fail("gc_ring_attach: %s", gc_errmsg());
	close(sd); /* the engine keeps its own reference */

	uint64_t t0 = cli_now(CLOCK_MONOTONIC), queued = 0;
	for (uint64_t i = 0; i < rs.count; i++) {
		struct gc_pkt *p;
		while (!(p = gc_ring_get_pkt(r))) {
			/* full: publish what we claimed, then wait for a free slot */
			if (errno != EAGAIN)
				ring_failed(&rs, r, t0, "gc_ring_get_pkt");
			if (gc_ring_submit(r) < 0)
				ring_failed(&rs, r, t0, "gc_ring_submit");
			queued = 0;
			ring_wait(&rs, r, e, 1, t0);
		}
		uint8_t *b = gc_zone_buf(z, gc_ring_pos(r, p));
		uint64_t seq = rs.seq_start + i;
		for (size_t j = 0; j < 8 && j < rs.size; j++)
			b[j] = (uint8_t)(seq >> (56 - 8 * j));
		p->off = gc_zone_offset(z, b);
		p->len = (uint32_t)rs.size;
		p->user_seq = seq;
		if (++queued == rs.every) {
			if (gc_ring_submit(r) < 0)
				ring_failed(&rs, r, t0, "gc_ring_submit");
			queued = 0;
		}
	}
	if (gc_ring_submit(r) < 0)
		ring_failed(&rs, r, t0, "gc_ring_submit");
	/* Every slot free again: the engine took and sent everything (dev_i == user_i). */
	ring_wait(&rs, r, e, n - 1, t0);
	/* The counters follow dev_i; give them a moment, bounded. */
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	for (int k = 0; k < 1000; k++) {
		if (gc_ring_status(r, &st) != 0 || st.error != GC_RING_OK ||
		    st.sent + st.dead + st.send_errors >= rs.count)
			break;
		usleep(1000);
	}

	int err = print_status(&rs, r, t0, false);
	if (err != GC_RING_OK)
		cli_warn("the engine stopped serving the ring: %s", gc_ring_violation_name(err));
	gc_ring_destroy(r);
	if (gc_ring_engine_destroy(e) != 0)
		cli_warn("gc_ring_engine_destroy: %s", gc_errmsg());
	if (gc_zone_destroy(z) != 0)
		cli_warn("gc_zone_destroy: %s", gc_errmsg());
	return err == GC_RING_OK ? 0 : CLI_EXIT_FAIL;
}
