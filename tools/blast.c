/* SPDX-License-Identifier: MIT */
/*
 * groupcast blast: group sends with each engine in turn (A B C A B C ...),
 * measured around the send calls only.  Prints one JSON line per
 * (engine, rep) and a table of medians over the reps.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <groupcast/group.h>

#define MAX_ENGINES 32

struct blast {
	struct sockaddr_storage *mem;
	size_t n, cap;
	bool has4, has6;
	enum gc_engine eng[MAX_ENGINES];
	size_t ne;
	uint64_t size, sends, reps, interval_us, seq_start;
	bool replace, shuffle, sg, json;
	size_t pre, app;
	int cpu;
	int sndbuf;
};

struct result {
	double cpu, wall, busy, other, busy_frac;
	uint64_t datagrams, failed;
};

/* --shuffle: Fisher-Yates on the member array, in place, as an application
 * reordering its group would */
static void shuffle(struct sockaddr_storage *v, size_t n, unsigned *seed)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(seed) % (i + 1);
		struct sockaddr_storage t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static void blast_usage(FILE *f)
{
	fprintf(f,
		"Usage: groupcast blast --members SPEC [--members SPEC...] [options]\n"
		"For each rep, for each engine in order: set the engine, then do C group\n"
		"sends of one payload to all members.  One JSON line per (engine, rep) on\n"
		"stdout, then a table of medians over the reps.\n"
		"  --members SPEC    ADDR:PORT+K = K members at ADDR, ports PORT..PORT+K-1\n"
		"                    (IPv6: [ADDR]:PORT+K; +K optional; comma-separated list ok)\n"
		"  --engines LIST    comma-separated: loop,mmsg,uring,uring_zc,kernel,auto\n"
		"                    (default loop,mmsg,uring,uring_zc; repeats allowed)\n"
		"  --size BYTES      shared payload size (default 100)\n"
		"  --sends C         group sends per engine and rep (default 100)\n"
		"  --reps R          repetitions (default 5)\n"
		"  --interval-us U   sleep U us after each send; not measured (default 0)\n"
		"  --replace         gc_setgroup() before every send (and measure it)\n"
		"  --shuffle         like --replace, with the members shuffled before each\n"
		"                    send (the shuffle is not timed with --interval-us)\n"
		"  --prepend B       use gc_sendgroup() with B private bytes before the payload\n"
		"  --append B        use gc_sendgroup() with B private bytes after the payload\n"
		"  --cpu CPU         pin the sending thread (default 0; 'none' to not pin)\n"
		"  --sndbuf BYTES    socket send buffer (default 4194304, forced as root; 0 keeps)\n"
		"  --seq-start N     first sequence number (default 0)\n"
		"  --json            stdout has only the JSON lines; the table goes to stderr\n"
		"Each member gets exactly reps * engines * sends datagrams.\n"
		"Exit status 1 if any datagram failed.\n");
}

static void add_member_spec(struct blast *b, const char *spec)
{
	char buf[256];
	if (strlen(spec) >= sizeof(buf) || !*spec)
		cli_usage_error("--members: bad member spec '%s' (expected ADDR:PORT+K)", spec);
	strcpy(buf, spec);
	char *addr, *rest;
	cli_split_addr("--members", spec, buf, "ADDR:PORT+K", &addr, &rest);
	uint64_t k = 1;
	char *plus = strchr(rest, '+');
	if (plus) {
		*plus = '\0';
		k = cli_u64("--members (count after '+')", plus + 1, 1, GC_MAX_LIMIT);
	}
	uint64_t port = cli_u64("--members (port)", rest, 1, 65535);
	if (port + k - 1 > 65535)
		cli_usage_error("--members: '%s': ports %llu..%llu go beyond 65535", spec,
				(unsigned long long)port, (unsigned long long)(port + k - 1));
	struct sockaddr_storage ss;
	int fam = cli_ip("--members", addr, (uint16_t)port, &ss);
	if (b->n + k > GC_MAX_LIMIT)
		cli_usage_error("--members: more than %u members in all", GC_MAX_LIMIT);
	if (b->n + k > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->n + k)
			cap *= 2;
		struct sockaddr_storage *m = realloc(b->mem, cap * sizeof(*m));
		if (!m)
			cli_fail("out of memory");
		b->mem = m;
		b->cap = cap;
	}
	for (uint64_t i = 0; i < k; i++) {
		addr_set_port(&ss, (uint16_t)(port + i));
		b->mem[b->n++] = ss;
	}
	if (fam == AF_INET)
		b->has4 = true;
	else
		b->has6 = true;
}

static void parse_engines(struct blast *b, const char *list)
{
	char *dup = strdup(list), *save = NULL;
	if (!dup)
		cli_fail("out of memory");
	b->ne = 0;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		enum gc_engine e = gc_engine_from_name(t);
		if (e == GC_ENGINE_NONE)
			cli_usage_error("--engines: unknown engine '%s' (known: auto, loop, mmsg, uring, uring_zc, kernel)",
					t);
		if (b->ne == MAX_ENGINES)
			cli_usage_error("--engines: more than %d entries", MAX_ENGINES);
		b->eng[b->ne++] = e;
	}
	free(dup);
	if (b->ne == 0)
		cli_usage_error("--engines: empty list");
}

static void blast_parse(struct blast *b, int argc, char **argv)
{
	enum {
		O_MEM = 256,
		O_ENG,
		O_SIZE,
		O_SENDS,
		O_REPS,
		O_IVL,
		O_REPL,
		O_PRE,
		O_APP,
		O_CPU,
		O_SNDBUF,
		O_SEQ,
		O_JSON,
		O_SHUF
	};
	static const struct option lo[] = {
		{ "members", required_argument, NULL, O_MEM },
		{ "engines", required_argument, NULL, O_ENG },
		{ "size", required_argument, NULL, O_SIZE },
		{ "sends", required_argument, NULL, O_SENDS },
		{ "reps", required_argument, NULL, O_REPS },
		{ "interval-us", required_argument, NULL, O_IVL },
		{ "replace", no_argument, NULL, O_REPL },
		{ "shuffle", no_argument, NULL, O_SHUF },
		{ "prepend", required_argument, NULL, O_PRE },
		{ "append", required_argument, NULL, O_APP },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "sndbuf", required_argument, NULL, O_SNDBUF },
		{ "seq-start", required_argument, NULL, O_SEQ },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *engines = "loop,mmsg,uring,uring_zc";
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (ch) {
		case O_MEM: {
			char *dup = strdup(optarg), *save = NULL;
			if (!dup)
				cli_fail("out of memory");
			bool any = false;
			for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				add_member_spec(b, t);
				any = true;
			}
			free(dup);
			if (!any)
				cli_usage_error("--members: empty member spec");
			break;
		}
		case O_ENG: engines = optarg; break;
		case O_SIZE: b->size = cli_u64("--size", optarg, 0, GC_UDP6_MAX); break;
		case O_SENDS: b->sends = cli_u64("--sends", optarg, 1, UINT32_MAX); break;
		case O_REPS: b->reps = cli_u64("--reps", optarg, 1, 1000000); break;
		case O_IVL: b->interval_us = cli_u64("--interval-us", optarg, 0, 60000000); break;
		case O_REPL: b->replace = true; break;
		case O_SHUF: b->replace = b->shuffle = true; break;
		case O_PRE:
			b->pre = cli_u64("--prepend", optarg, 0, GC_UDP6_MAX);
			b->sg = true;
			break;
		case O_APP:
			b->app = cli_u64("--append", optarg, 0, GC_UDP6_MAX);
			b->sg = true;
			break;
		case O_CPU: b->cpu = cli_cpu("--cpu", optarg); break;
		case O_SNDBUF:
			b->sndbuf = (int)cli_u64("--sndbuf", optarg, 0, INT32_MAX / 2);
			break;
		case O_SEQ: b->seq_start = cli_u64("--seq-start", optarg, 0, UINT64_MAX / 2); break;
		case O_JSON: b->json = true; break;
		case 'h': blast_usage(stdout); exit(0);
		default: cli_getopt_error(ch, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (b->n == 0)
		cli_usage_error("--members is required");
	parse_engines(b, engines);
	if (b->replace && b->sg)
		cli_usage_error("--replace/--shuffle do not apply with --prepend/--append (gc_sendgroup() takes no group)");
	uint64_t max = b->has4 ? GC_UDP4_MAX : GC_UDP6_MAX;
	if (b->size + b->pre + b->app > max)
		cli_usage_error("--size/--prepend/--append: %llu bytes is more than a UDP datagram (%llu)",
				(unsigned long long)(b->size + b->pre + b->app),
				(unsigned long long)max);
}

static bool read_proc_stat(int fd, uint64_t *busy, uint64_t *total)
{
	char buf[512];
	ssize_t r = pread(fd, buf, sizeof(buf) - 1, 0);
	if (r <= 0)
		return false;
	buf[r] = '\0';
	unsigned long long v[8] = { 0 };
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) < 7)
		return false;
	/* user nice system idle iowait irq softirq steal */
	*busy = v[0] + v[1] + v[2] + v[5] + v[6];
	*total = *busy + v[3] + v[4] + v[7];
	return true;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median, min, max of v[0..n) (sorts v). */
static double median(double *v, size_t n, double *lo, double *hi)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double timer_overhead(void)
{
	enum { N = 2000 };
	uint64_t sum = 0;
	for (int i = 0; i < N; i++) {
		uint64_t c0 = cli_now(CLOCK_THREAD_CPUTIME_ID);
		uint64_t w0 = cli_now(CLOCK_MONOTONIC);
		uint64_t w1 = cli_now(CLOCK_MONOTONIC);
		uint64_t c1 = cli_now(CLOCK_THREAD_CPUTIME_ID);
		(void)w0;
		(void)w1;
		sum += c1 - c0;
	}
	return (double)sum / N;
}

static void summary(const struct blast *b, struct result *res, FILE *f, double timer_ns, bool per_send)
{
	size_t base = 0;
	for (size_t e = 0; e < b->ne; e++) {
		if (b->eng[e] == GC_ENGINE_LOOP) {
			base = e;
			break;
		}
	}
	const char *bn = gc_engine_name(b->eng[base]);
	fprintf(f, "\n%zu members, %llu bytes, %llu sends x %llu reps, %s, timing %s", b->n,
		(unsigned long long)b->size, (unsigned long long)b->sends, (unsigned long long)b->reps,
		b->sg		     ? "gc_sendgroup"
			: b->shuffle ? "gc_setgroup (another order)+gc_send every send"
			: b->replace ? "gc_setgroup+gc_send every send"
				     : "gc_send (group set once per rep)",
		per_send ? "per send" : "per rep");
	if (per_send)
		fprintf(f, " (timer pair ~%.0f ns CPU, not subtracted)", timer_ns);
	if (b->sg)
		fprintf(f, "; prepend %zu, append %zu", b->pre, b->app);
	fprintf(f, "\nmedian over reps (min..max); ratios are medians / %s\n", bn);
	fprintf(f, "%-9s %28s %10s %10s %10s %8s %8s %8s %10s %7s\n", "engine",
		"cpu ns/send (min..max)", "cpu/member", "wall/send", "busy/send", "cpu x", "wall x",
		"busy x", "datagrams", "failed");
	double *v = calloc(b->reps, sizeof(double));
	double(*med)[3] = calloc(b->ne, sizeof(*med));
	double(*rng)[2] = calloc(b->ne, sizeof(*rng));
	if (!v || !med || !rng)
		cli_fail("out of memory");
	for (size_t e = 0; e < b->ne; e++) {
		double lo, hi;
		for (int m = 0; m < 3; m++) {
			for (size_t r = 0; r < b->reps; r++) {
				const struct result *x = &res[r * b->ne + e];
				v[r] = m == 0 ? x->cpu : m == 1 ? x->wall : x->busy;
			}
			med[e][m] = median(v, b->reps, &lo, &hi);
			if (m == 0) {
				rng[e][0] = lo;
				rng[e][1] = hi;
			}
		}
	}
	for (size_t e = 0; e < b->ne; e++) {
		uint64_t dg = 0, fl = 0;
		for (size_t r = 0; r < b->reps; r++) {
			dg += res[r * b->ne + e].datagrams;
			fl += res[r * b->ne + e].failed;
		}
		char cpu[64];
		snprintf(cpu, sizeof(cpu), "%.0f (%.0f..%.0f)", med[e][0], rng[e][0], rng[e][1]);
		char rat[3][16];
		for (int m = 0; m < 3; m++) {
			if (med[base][m] > 0)
				snprintf(rat[m], sizeof(rat[m]), "%.2f", med[e][m] / med[base][m]);
			else
				snprintf(rat[m], sizeof(rat[m]), "-");
		}
		fprintf(f, "%-9s %28s %10.0f %10.0f %10.0f %8s %8s %8s %10llu %7llu\n",
			gc_engine_name(b->eng[e]), cpu, med[e][0] / (double)b->n, med[e][1], med[e][2],
			rat[0], rat[1], rat[2], (unsigned long long)dg, (unsigned long long)fl);
	}
	fprintf(f, "each member is due %llu datagrams (%llu reps x %zu engines x %llu sends)\n",
		(unsigned long long)(b->reps * b->ne * b->sends), (unsigned long long)b->reps,
		b->ne, (unsigned long long)b->sends);
	free(v);
	free(med);
	free(rng);
}

int cmd_blast(int argc, char **argv)
{
	struct blast b = { .size = 100, .sends = 100, .reps = 5, .cpu = 0, .sndbuf = 4 << 20 };
	blast_parse(&b, argc, argv);

	for (size_t e = 0; e < b.ne; e++)
		if (gc_engine_available(b.eng[e]) != 0)
			cli_fail("--engines: engine '%s' is not available here: %s",
				 gc_engine_name(b.eng[e]), gc_errmsg());
	cli_pin("--cpu", b.cpu);
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

	int fam = b.has6 ? AF_INET6 : AF_INET;
	int sd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sd < 0)
		cli_fail("socket: %s", strerror(errno));
	if (fam == AF_INET6 && b.has4) {
		int off = 0;
		if (setsockopt(sd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) != 0)
			cli_fail("IPV6_V6ONLY off (needed for mixed IPv4/IPv6 members): %s",
				 strerror(errno));
	}
	if (b.sndbuf > 0)
		cli_sockbuf(sd, false, b.sndbuf);
	if (b.n > GC_DEFAULT_LIMIT && gc_set_limit(sd, b.n) != 0)
		cli_fail("gc_set_limit(%zu): %s", b.n, gc_errmsg());

	uint8_t *payload = malloc(b.size + 1);
	uint8_t *pre = malloc(b.n * b.pre + 1), *app = malloc(b.n * b.app + 1);
	struct gc_giovec *rec = b.sg ? calloc(b.n, sizeof(*rec)) : NULL;
	int *gerrno = b.sg ? calloc(b.n, sizeof(int)) : NULL;
	struct result *res = calloc(b.reps * b.ne, sizeof(*res));
	if (!payload || !pre || !app || (b.sg && (!rec || !gerrno)) || !res)
		cli_fail("out of memory");
	for (size_t i = 0; i < b.size; i++)
		payload[i] = cli_pattern(i);
	if (b.size >= CLI_HDR_LEN)
		memcpy(payload, CLI_MAGIC, 4);
	for (size_t i = 0; b.sg && i < b.n; i++) {
		uint16_t port = addr_port(&b.mem[i]);
		uint8_t *p = pre + i * b.pre, *a = app + i * b.app;
		for (size_t j = 0; j < b.pre; j++)
			p[j] = cli_member_byte(port, j, CLI_SALT_PRE);
		for (size_t j = 0; j < b.app; j++)
			a[j] = cli_member_byte(port, j, CLI_SALT_APP);
		rec[i].dest = b.mem[i];
		rec[i].prepend = (struct iovec){ b.pre ? p : NULL, b.pre };
		rec[i].append = (struct iovec){ b.app ? a : NULL, b.app };
	}
	struct iovec shared = { payload, b.size };
	unsigned shuffle_seed = 1;

	int statfd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (statfd < 0)
		cli_warn("/proc/stat: %s (machine busy time will be 0)", strerror(errno));
	double tick_ns = 1e9 / (double)sysconf(_SC_CLK_TCK);
	bool per_send = b.interval_us > 0;
	double timer_ns = timer_overhead();
	struct timespec gap = { (time_t)(b.interval_us / 1000000),
				(long)(b.interval_us % 1000000) * 1000 };
	uint64_t seq = b.seq_start, total_failed = 0;
	bool stats_bad = false;

	for (size_t rep = 0; rep < b.reps; rep++) {
		for (size_t e = 0; e < b.ne; e++) {
			size_t k = rep * b.ne + e;
			const char *ename = gc_engine_name(b.eng[e]);
			if (gc_set_engine(sd, b.eng[e]) != 0)
				cli_fail("gc_set_engine(%s): %s", ename, gc_errmsg());
			enum gc_engine resolved = gc_get_engine(sd);
			if (!b.sg && !b.replace && gc_setgroup(sd, b.mem, b.n) != 0)
				cli_fail("gc_setgroup(%zu members): %s", b.n, gc_errmsg());
			struct gc_stats st0 = GC_STATS_INIT(), st1 = GC_STATS_INIT();
			bool have_stats = gc_stats(sd, &st0) == 0;
			uint64_t busy0 = 0, tot0 = 0, busy1 = 0, tot1 = 0;
			if (statfd >= 0)
				read_proc_stat(statfd, &busy0, &tot0);
			uint64_t thr_rep0 = cli_now(CLOCK_THREAD_CPUTIME_ID);
			uint64_t proc_rep0 = cli_now(CLOCK_PROCESS_CPUTIME_ID);

			uint64_t cpu = 0, wall = 0, dg = 0, failed = 0, c0 = 0, w0 = 0;
			int first_err = 0;
			if (!per_send) {
				c0 = cli_now(CLOCK_THREAD_CPUTIME_ID);
				w0 = cli_now(CLOCK_MONOTONIC);
			}
			for (uint64_t c = 0; c < b.sends; c++) {
				if (b.size >= CLI_HDR_LEN) {
					cli_put_le32(payload + 4, (uint32_t)k);
					cli_put_le64(payload + 8, seq);
				}
				seq++;
				if (b.shuffle)
					shuffle(b.mem, b.n, &shuffle_seed);
				if (per_send) {
					c0 = cli_now(CLOCK_THREAD_CPUTIME_ID);
					w0 = cli_now(CLOCK_MONOTONIC);
				}
				int err = 0;
				ssize_t r;
				if (b.sg) {
					r = gc_sendgroup(sd, &shared, rec, b.n, 0, gerrno);
				} else {
					if (b.replace && gc_setgroup(sd, b.mem, b.n) != 0)
						cli_fail("gc_setgroup(%zu members): %s", b.n,
							 gc_errmsg());
					r = gc_send(sd, payload, b.size, 0);
				}
				err = errno;
				if (per_send) {
					wall += cli_now(CLOCK_MONOTONIC) - w0;
					cpu += cli_now(CLOCK_THREAD_CPUTIME_ID) - c0;
				}
				if (b.sg && r >= 0 && (size_t)r <= b.n) {
					dg += (uint64_t)r;
					if ((size_t)r < b.n) {
						size_t f = 0;
						for (size_t i = 0; i < b.n; i++) {
							if (gerrno[i] && !first_err)
								first_err = gerrno[i];
							f += gerrno[i] != 0;
						}
						if (f != b.n - (size_t)r)
							cli_warn("gc_sendgroup returned %zd of %zu but gerrno has %zu failures",
								 r, b.n, f);
						failed += b.n - (size_t)r;
					}
				} else if (!b.sg && r == (ssize_t)b.size) {
					dg += b.n;
				} else if (r < 0) {
					ssize_t f = b.sg ? -1 : gc_last_errors(sd, NULL, 0);
					if (!first_err)
						first_err = err;
					if (f > 0 && (size_t)f <= b.n) {
						dg += b.n - (size_t)f;
						failed += (uint64_t)f;
					} else {
						failed += b.n; /* the whole call failed */
					}
				} else {
					cli_warn("%s returned %zd (expected %s)",
						 b.sg ? "gc_sendgroup" : "gc_send", r,
						 b.sg ? "0..members" : "the payload size");
					failed += b.n;
				}
				if (per_send) {
					struct timespec left = gap;
					while (clock_nanosleep(CLOCK_MONOTONIC, 0, &left, &left) == EINTR)
						;
				}
			}
			if (!per_send) {
				wall = cli_now(CLOCK_MONOTONIC) - w0;
				cpu = cli_now(CLOCK_THREAD_CPUTIME_ID) - c0;
			}
			uint64_t thr_rep = cli_now(CLOCK_THREAD_CPUTIME_ID) - thr_rep0;
			uint64_t proc_rep = cli_now(CLOCK_PROCESS_CPUTIME_ID) - proc_rep0;
			if (statfd >= 0)
				read_proc_stat(statfd, &busy1, &tot1);
			bool stats_ok = true;
			if (have_stats && gc_stats(sd, &st1) == 0) {
				uint64_t sd_dg = st1.datagrams - st0.datagrams;
				uint64_t sd_f = st1.failed - st0.failed;
				if (sd_dg != dg || sd_f != failed) {
					stats_ok = false;
					stats_bad = true;
					cli_warn("%s rep %zu: gc_stats counts %llu sent, %llu failed; the calls reported %llu, %llu",
						 ename, rep, (unsigned long long)sd_dg,
						 (unsigned long long)sd_f, (unsigned long long)dg,
						 (unsigned long long)failed);
				}
			}
			struct result *x = &res[k];
			double s = (double)b.sends;
			x->cpu = (double)cpu / s;
			x->wall = (double)wall / s;
			x->busy = (double)(busy1 - busy0) * tick_ns / s;
			x->busy_frac = tot1 > tot0 ? (double)(busy1 - busy0) / (double)(tot1 - tot0) : 0;
			x->other = proc_rep > thr_rep ? (double)(proc_rep - thr_rep) / s : 0;
			x->datagrams = dg;
			x->failed = failed;
			total_failed += failed;

			printf("{\"engine\":\"%s\",\"rep\":%zu,\"n\":%zu,\"size\":%llu,\"sends\":%llu,"
			       "\"cpu_ns_per_send\":%.1f,\"wall_ns_per_send\":%.1f,"
			       "\"machine_busy_ns_per_send\":%.1f,\"datagrams\":%llu,\"failed\":%llu,"
			       "\"replace\":%s,\"shuffle\":%s,\"mode\":\"%s\",\"prepend\":%zu,\"append\":%zu,"
			       "\"resolved\":\"%s\",\"index\":%zu,\"timing\":\"%s\",\"timer_cpu_ns\":%.1f,"
			       "\"other_threads_cpu_ns_per_send\":%.1f,\"machine_busy_frac\":%.3f,"
			       "\"interval_us\":%llu,\"cpu\":%d,\"errno\":",
			       ename, rep, b.n, (unsigned long long)b.size, (unsigned long long)b.sends,
			       x->cpu, x->wall, x->busy, (unsigned long long)dg,
			       (unsigned long long)failed, b.replace ? "true" : "false",
			       b.shuffle ? "true" : "false", b.sg ? "sendgroup" : "send", b.pre,
			       b.app, resolved == GC_ENGINE_NONE ? "none" : gc_engine_name(resolved),
			       k, per_send ? "per_send" : "per_rep", per_send ? timer_ns : 0.0,
			       x->other, x->busy_frac, (unsigned long long)b.interval_us, b.cpu);
			cli_json_str(stdout, first_err ? strerrorname_np(first_err) : NULL);
			printf(",\"stats_ok\":%s}\n", stats_ok ? "true" : "false");
			fflush(stdout);
		}
	}
	summary(&b, res, b.json ? stderr : stdout, timer_ns, per_send);
	if (total_failed)
		cli_warn("%llu datagrams failed", (unsigned long long)total_failed);
	gc_release(sd);
	close(sd);
	if (statfd >= 0)
		close(statfd);
	free(payload);
	free(pre);
	free(app);
	free(rec);
	free(gerrno);
	free(res);
	free(b.mem);
	if (fflush(stdout) != 0)
		return CLI_EXIT_FAIL;
	return (total_failed || stats_bad) ? CLI_EXIT_FAIL : 0;
}
