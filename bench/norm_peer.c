// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * norm_peer.c - L2 (bench/ltp.py): one NORM sender or receiver (Debian's
 * libnorm 1.5.9), moving the same bytes as `groupcast ltp` on the same tree.
 *
 *   norm_peer send --group G --port P --if IF --file F --rate BYTES_PER_S --node ID
 *                  [--grtt S] [--backoff K] [--group-size N] [--block K] [--parity N]
 *                  [--linger-ms MS]
 *   norm_peer recv --group G --port P --if IF --out F --bytes N --node ID [--timeout-ms MS]
 *
 * The file goes as one NORM_OBJECT_DATA in segments of 1400 bytes (LTP's
 * payload).  Receivers NACK by unicast to the sender: the lab's routers
 * forward only (S,G), so a NACK multicast to the group would never reach S.
 * Every peer sends from port P + 1 (NORM's transmit socket).
 * No parity by default: repairs are retransmissions, as in LTP and PGM, so
 * the three are compared as ARQ protocols on one loss pattern (NORM's FEC
 * repair is a separate question, --parity N).
 *
 * Neither side keeps statistics worth reporting: bench/ltp.py counts every
 * data and repair segment at the receivers' links (bench/l2_rx.bpf.c).  The
 * receiver prints {"ready":true} once joined, and at the end one JSON line
 * with its byte count and times; the sender prints one JSON line at the end.
 */

#include <errno.h>
#include <getopt.h>
/* Debian's normApi.h (1.5.9) has two C++-only declarations (reference and
 * default arguments) in its extern "C" block; renaming them away lets C
 * include the rest.  Neither function is used here. */
#define NormGetRxBindAddress(a, b, c, d) norm_peer_unused_rx_bind_address(void)
#define NormStreamGetVacancy(a, b) norm_peer_unused_stream_get_vacancy(void)
#include <normApi.h>
#undef NormGetRxBindAddress
#undef NormStreamGetVacancy
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define SEGMENT 1400

struct args {
	const char *group, *ifname, *file, *out;
	long port, node, block, parity, group_size, linger_ms, timeout_ms;
	double rate, grtt, backoff;
	long long bytes;
};

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("norm_peer: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long num(const char *name, const char *s, long lo, long hi)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		fail("--%s %s: not a number in %ld..%ld", name, s, lo, hi);
	return v;
}

static double real(const char *name, const char *s, double lo, double hi)
{
	char *end;

	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		fail("--%s %s: not a number in %g..%g", name, s, lo, hi);
	return v;
}

static char *slurp(const char *path, long long *len)
{
	FILE *f = fopen(path, "rb");

	if (!f)
		fail("--file %s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (*len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		fail("--file %s: %s", path, strerror(errno));
	if (*len == 0 || *len > UINT32_MAX)
		fail("--file %s: %lld bytes, want 1..%u", path, *len, UINT32_MAX);
	char *buf = malloc((size_t)*len); /* > 0, checked */
	if (!buf || fread(buf, 1, (size_t)*len, f) != (size_t)*len)
		fail("--file %s: cannot read", path);
	fclose(f);
	return buf;
}

static NormSessionHandle session(NormInstanceHandle inst, const struct args *a)
{
	NormSessionHandle s = NormCreateSession(inst, a->group, (UINT16)a->port, (NormNodeId)a->node);

	if (s == NORM_SESSION_INVALID)
		fail("--group %s --port %ld: cannot create a NORM session", a->group, a->port);
	if (!NormSetMulticastInterface(s, a->ifname))
		fail("--if %s: NORM refuses it", a->ifname);
	/* A fixed transmit port (the session port + 1; NORM's default is an
	 * ephemeral one): bench/l2_count.bpf.c and l2_rx.bpf.c tell NORM by
	 * its ports, and unicast NACKs go from and to the transmit sockets. */
	if (!NormSetTxPort(s, (UINT16)(a->port + 1), false, NULL))
		fail("--port %ld: cannot bind the transmit port %ld", a->port, a->port + 1);
	NormSetTTL(s, 16);
	NormSetLoopback(s, false);
	return s;
}

/* Waits up to `secs` for the next event; false when none came. */
static bool next_event(NormInstanceHandle inst, NormEvent *e, double secs)
{
	int fd = NormGetDescriptor(inst);
	fd_set r;
	struct timeval tv = { .tv_sec = (time_t)secs, .tv_usec = (long)((secs - (time_t)secs) * 1e6) };

	FD_ZERO(&r);
	FD_SET(fd, &r);
	if (select(fd + 1, &r, NULL, NULL, &tv) <= 0)
		return false;
	return NormGetNextEvent(inst, e, false);
}

static int do_send(const struct args *a)
{
	long long len;
	char *buf = slurp(a->file, &len);
	NormInstanceHandle inst = NormCreateInstance(false);
	NormSessionHandle s = session(inst, a);

	/* NORM's rate counts whole packets: IP + UDP + NORM_DATA (24 bytes) headers. */
	NormSetTxRate(s, a->rate * 8 * (SEGMENT + 20 + 8 + 24) / SEGMENT);
	NormSetGrttEstimate(s, a->grtt);
	NormSetBackoffFactor(s, a->backoff);
	NormSetGroupSize(s, (unsigned)a->group_size);
	NormSetAutoParity(s, 0);
	/* Buffer space for the block state of the whole object, so that every
	 * segment stays repairable until the end. */
	if (!NormStartSender(s, (NormSessionId)(getpid() & 0xffff), (UINT32)(len + len / 4 + (1 << 20)),
			     SEGMENT, (UINT16)a->block, (UINT16)a->parity, 0))
		fail("cannot start the NORM sender (--block %ld --parity %ld)", a->block, a->parity);
	double t0 = now_s();
	if (NormDataEnqueue(s, buf, (UINT32)len, NULL, 0) == NORM_OBJECT_INVALID)
		fail("--file %s: NORM will not enqueue %lld bytes", a->file, len);
	/* Sent and flushed, then stay to answer NACKs for --linger-ms. */
	double deadline = t0 + (double)len / a->rate * 4 + 60, flushed = 0;
	NormEvent e;
	while (now_s() < deadline) {
		if (flushed && now_s() > flushed + (double)a->linger_ms / 1000.0)
			break;
		if (!next_event(inst, &e, 0.05))
			continue;
		if (e.type == NORM_TX_FLUSH_COMPLETED && !flushed)
			flushed = now_s();
	}
	printf("{\"ok\":%s,\"bytes\":%lld,\"seconds\":%.6f}\n", flushed ? "true" : "false", len,
	       (flushed ? flushed : now_s()) - t0);
	fflush(stdout);
	NormStopSender(s);
	NormDestroySession(s);
	NormDestroyInstance(inst);
	free(buf);
	return flushed ? 0 : 1;
}

static int do_recv(const struct args *a)
{
	NormInstanceHandle inst = NormCreateInstance(false);
	NormSessionHandle s = session(inst, a);

	NormSetDefaultUnicastNack(s, true);
	NormSetDefaultSyncPolicy(s, NORM_SYNC_ALL);
	if (!NormStartReceiver(s, 16u << 20))
		fail("cannot start the NORM receiver");
	printf("{\"ready\":true}\n");
	fflush(stdout);
	double t0 = now_s(), first = 0, done = 0;
	long long got = -1;
	NormEvent e;
	while (!done && now_s() < t0 + (double)a->timeout_ms / 1000.0) {
		if (!next_event(inst, &e, 0.05))
			continue;
		if (e.type == NORM_RX_OBJECT_NEW && !first)
			first = now_s();
		if (e.type == NORM_RX_OBJECT_ABORTED)
			break;
		if (e.type != NORM_RX_OBJECT_COMPLETED)
			continue;
		done = now_s();
		got = (long long)NormObjectGetSize(e.object);
		FILE *f = fopen(a->out, "wb");
		if (!f || fwrite(NormDataAccessData(e.object), 1, (size_t)got, f) != (size_t)got ||
		    fclose(f))
			fail("--out %s: %s", a->out, strerror(errno));
	}
	bool ok = done && got == a->bytes;
	printf("{\"ok\":%s,\"bytes\":%lld,\"seconds\":%.6f}\n", ok ? "true" : "false", got,
	       done && first ? done - first : 0.0);
	fflush(stdout);
	NormStopReceiver(s);
	NormDestroySession(s);
	NormDestroyInstance(inst);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct args a = { .port = -1,
			  .node = -1,
			  .block = 64,
			  .parity = 0,
			  .group_size = 4,
			  .linger_ms = 3000,
			  .timeout_ms = 120000,
			  .rate = 1e6,
			  .grtt = 0.001,
			  .backoff = 0,
			  .bytes = -1 };
	static const struct option opts[] = { { "group", required_argument, 0, 'g' },
					      { "port", required_argument, 0, 'p' },
					      { "if", required_argument, 0, 'i' },
					      { "file", required_argument, 0, 'f' },
					      { "out", required_argument, 0, 'o' },
					      { "bytes", required_argument, 0, 'n' },
					      { "rate", required_argument, 0, 'r' },
					      { "node", required_argument, 0, 'N' },
					      { "grtt", required_argument, 0, 'G' },
					      { "backoff", required_argument, 0, 'k' },
					      { "group-size", required_argument, 0, 'z' },
					      { "block", required_argument, 0, 'b' },
					      { "parity", required_argument, 0, 'P' },
					      { "linger-ms", required_argument, 0, 'l' },
					      { "timeout-ms", required_argument, 0, 't' },
					      { 0, 0, 0, 0 } };
	const char *usage = "usage: norm_peer send|recv --group G --port P --if IF --node ID "
			    "(send: --file F [--rate B/s] | recv: --out F --bytes N) (see the source)";

	if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv")))
		fail("%s", usage);
	bool send = !strcmp(argv[1], "send");
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'g': a.group = optarg; break;
		case 'p': a.port = num("port", optarg, 1, 65534); break;
		case 'i': a.ifname = optarg; break;
		case 'f': a.file = optarg; break;
		case 'o': a.out = optarg; break;
		case 'n': a.bytes = num("bytes", optarg, 1, UINT32_MAX); break;
		case 'r': a.rate = real("rate", optarg, 1000, 1e9); break;
		case 'N': a.node = num("node", optarg, 1, 0xfffffffe); break;
		case 'G': a.grtt = real("grtt", optarg, 1e-6, 10); break;
		case 'k': a.backoff = real("backoff", optarg, 0, 16); break;
		case 'z': a.group_size = num("group-size", optarg, 1, 1000000); break;
		case 'b': a.block = num("block", optarg, 1, 255); break;
		case 'P': a.parity = num("parity", optarg, 0, 254); break;
		case 'l': a.linger_ms = num("linger-ms", optarg, 0, 600000); break;
		case 't': a.timeout_ms = num("timeout-ms", optarg, 1, 3600000); break;
		default: fail("%s", usage);
		}
	}
	if (optind != argc)
		fail("%s: unexpected argument", argv[optind]);
	if (!a.group || a.port < 0 || !a.ifname || a.node < 0)
		fail("--group, --port, --if and --node are required");
	if (a.block + a.parity > 255)
		fail("--block %ld --parity %ld: more than 255 segments per block", a.block, a.parity);
	if (send && !a.file)
		fail("send: --file is required");
	if (!send && (!a.out || a.bytes < 0))
		fail("recv: --out and --bytes are required");
	return send ? do_send(&a) : do_recv(&a);
}
