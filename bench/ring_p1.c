/* SPDX-License-Identifier: MIT */
/*
 * ring_p1 - the measuring side of bench/ring.py (P1: Lai & Kohler, Figures
 * 7 and 8).  Total CPU per packet of the packet ring + engine against UDP
 * send(), one JSON line per run.  bench/ring.py builds it against
 * libgroupcast.a and runs it in the sender namespace of a lab.
 *
 *   ring_p1 --dest IP --port P --rxns NS [--sizes 0,100,...] [--ks 1,2,...]
 *           [--modes asked,always,flush] [--reps R] [--packets N] [--conns C]
 *           [--entries E] [--app-cpu 0] [--engine-cpu 1] [--sock PATH]
 *           [--rxif IF] [--batch B] [--pace PPS] [--gso]
 *
 * Methods, interleaved per payload size (udp, ring k=1, ring k=2, ...):
 *   udp    send() on a connected UDP socket, one call per packet.
 *   ring   claim a record, write the packet's number into its zone buffer,
 *          and every k packets gc_ring_publish(); "asked": gc_ring_notify()
 *          only when the engine asks (kern_notify), "always": after every
 *          publish, as the paper's application called dccp_notify(); "flush":
 *          gc_ring_flush() instead, which sends in the application's thread
 *          when the engine runs in this process, as dccp_notify() sent in the
 *          system call (with a daemon it publishes and notifies).  When
 *          the ring is full the application sleeps in gc_ring_wait() until
 *          half of it is free.  "inline": gc_ring_submit() with an engine
 *          started with GC_RING_ENGINE_SUBMIT_FLUSH (a parked ring is sent
 *          in the application's thread).
 *   gso    (--gso) the application batches k packets itself: one sendmsg()
 *          with UDP_SEGMENT on its own socket, one iovec per buffer.
 * --pace PPS: every sender emits bursts of k packets (udp: the first k)
 * at PPS packets per second, sleeping until each burst is due; "app" is
 * then the thread CPU time of its bursts only (see pace_start()).
 * Both cycle through the same number of page-aligned buffers (E), and both
 * write the packet number into the first 4 bytes, so they touch the same
 * data.  With --conns 1 the engine is a thread of this process (pinned to
 * --engine-cpu); with --conns C > 1, C processes (pinned to --app-cpu) each
 * send packets/C packets, through a daemon engine (pinned to --engine-cpu)
 * for the ring, as the paper's 30 processes did.  --engine-cpu equal to
 * --app-cpu shares one CPU between them, as the paper's kernel shared the
 * application's.  A CPU of -1 pins nothing and starts the engine without
 * GC_RING_ENGINE_PIN_CPU: run under taskset -c 0, the engine thread then
 * inherits the one CPU (bench/ring.py's "taskset" placement).
 *
 * CPU: process CPU time (CLOCK_PROCESS_CPUTIME_ID / the children's own
 * clocks, and the daemon's /proc schedstat) from the start barrier to the
 * last packet handed to the network; "app" is the application threads, and
 * "engine" the engine thread.  The receiver (bench/ring_sink.bpf.c, TC
 * ingress on the receiving veth) drops the datagrams as they arrive; its
 * small work runs on the sending CPU and is billed to whoever sent, the same
 * for both methods.  busy_ns is the whole machine's busy time from /proc/stat.  rx is
 * how many packets the receiving interface (--rxif) got, read from
 * /proc/net/dev in its namespace (--rxns) with setns(); a run with
 * rx < packets lost some.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <groupcast/dccp.h>
#include <groupcast/ring.h>

#define MAXV 16

static struct {
	const char *dest, *rxns, *rxif, *sock;
	int port, conns, app_cpu, engine_cpu, reps;
	unsigned batch;
	unsigned entries;
	uint64_t packets;
	size_t sizes[MAXV], nsizes;
	unsigned ks[MAXV], nks;
	int modes[5], nmodes; /* 0 asked, 1 always, 2 flush, 3 inline, 4 dccp */
	uint64_t pace;	      /* packets per second; 0: as fast as possible */
	int gso;	      /* also run "gso": UDP_SEGMENT in the application */
	int rx_cpu;	      /* the DCCP receiver's CPU */
	uint64_t warmup;      /* DCCP: packets sent before measuring (cwnd grows) */
	int rx_read;	      /* a UDP receiver reads --port (udp_reader_start) */
} o = { .rx_cpu = 1,
	.warmup = 50000,
	.port = 9000,
	.conns = 1,
	.app_cpu = 0,
	.engine_cpu = 1,
	.reps = 5,
	.entries = 1024,
	.packets = 200000 };

struct res {
	uint64_t cpu, app, engine, wall, busy, notifies, rx, sleeps, gso, syscalls, eng_notifies;
	/* dccp: the sender's gc_dccp_stats() at the end, and what changed */
	uint64_t cwnd, pipe, rtt_us, dsent, dacked, dlost, invalid;
};

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "ring_p1: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (%s; %s)\n", strerror(errno), gc_errmsg());
	exit(1);
}

static uint64_t ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Pin the calling thread to cpu; cpu < 0: leave it where it may run (the
 * "taskset" placement: the whole process runs under taskset -c 0). */
static void pin(int cpu)
{
	cpu_set_t s;

	if (cpu < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) < 0)
		die("pin to CPU %s", cpu ? "1" : "0");
}

/* Whole machine busy time (all CPUs), ns. */
static uint64_t machine_busy(void)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[10] = { 0 };

	if (!f)
		return 0;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) != 8)
		v[0] = 0;
	fclose(f);
	unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	return (uint64_t)busy * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* Sum of sum_exec_runtime of every thread of pid, ns. */
static uint64_t task_cpu(pid_t pid)
{
	char path[64];
	uint64_t sum = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[320];
		unsigned long long run;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		FILE *f = fopen(p, "r");
		if (f && fscanf(f, "%llu", &run) == 1)
			sum += run;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return sum;
}

/* Packets the receiving interface got (/proc/net/dev of the receiver's
 * namespace, read by a child that joins it): the sink drops them on arrival. */
static uint64_t rx_count(void)
{
	int p[2];
	uint64_t v = 0;

	if (!o.rxns || !o.rxif)
		return 0;
	if (pipe(p) < 0)
		die("pipe%s", "");
	pid_t pid = fork();
	if (pid == 0) {
		char path[256], line[512];
		uint64_t out = 0;
		snprintf(path, sizeof(path), "/run/netns/%s", o.rxns);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
			_exit(1);
		FILE *f = fopen("/proc/self/net/dev", "r");
		size_t il = strlen(o.rxif);
		while (f && fgets(line, sizeof(line), f)) {
			char *t = line + strspn(line, " ");
			if (!strncmp(t, o.rxif, il) && t[il] == ':') {
				unsigned long long bytes, pkts;
				if (sscanf(t + il + 1, "%llu %llu", &bytes, &pkts) == 2)
					out = pkts;
				break;
			}
		}
		if (write(p[1], &out, sizeof(out)) != sizeof(out))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &v, sizeof(v)) != sizeof(v))
		v = 0;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return v;
}

static int connected(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || inet_pton(AF_INET, o.dest, &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect to %s", o.dest);
	return fd;
}

/* ---- pacing ------------------------------------------------------------- */

/*
 * --pace: the sender sleeps after every burst of k packets until the next
 * burst is due (k / pace seconds apart, absolute deadlines).  Its own
 * sleeping and waking is the same for every method and is left out: "app"
 * is then the thread CPU time spent between the wake-ups (the bursts), and
 * the engine thread's time counts whole, wake-ups included.
 */
struct pacer {
	uint64_t next, step, t0, work;
};

static void pace_start(struct pacer *p, unsigned k)
{
	memset(p, 0, sizeof(*p));
	if (!o.pace)
		return;
	p->step = (uint64_t)(k ? k : 1) * 1000000000ull / o.pace;
	p->next = ns(CLOCK_MONOTONIC) + p->step;
	p->t0 = ns(CLOCK_THREAD_CPUTIME_ID);
}

static void pace_wait(struct pacer *p)
{
	if (!o.pace)
		return;
	p->work += ns(CLOCK_THREAD_CPUTIME_ID) - p->t0;
	struct timespec ts = { (time_t)(p->next / 1000000000ull), (long)(p->next % 1000000000ull) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	p->next += p->step;
	p->t0 = ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The thread CPU time of the bursts (paced), or 0. */
static uint64_t pace_end(struct pacer *p)
{
	if (!o.pace)
		return 0;
	p->work += ns(CLOCK_THREAD_CPUTIME_ID) - p->t0;
	return p->work;
}

/* ---- one sender (a process or this thread) ------------------------------ */

/* send() per packet; paced: bursts of k.  Returns the paced work (pace_end). */
static uint64_t udp_send(int port, size_t size, uint64_t n, unsigned k)
{
	struct pacer pc;
	int fd = connected(port);
	long page = sysconf(_SC_PAGESIZE);
	size_t step = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
	unsigned char *bufs = aligned_alloc((size_t)page, (step ? step : (size_t)page) * o.entries);

	if (!bufs)
		die("out of memory%s", "");
	memset(bufs, 0x5a, (step ? step : (size_t)page) * o.entries);
	pace_start(&pc, k);
	for (uint64_t i = 0; i < n; i++) {
		unsigned char *b = bufs + (i % o.entries) * step;
		if (size >= 4)
			memcpy(b, &i, 4);
		while (send(fd, b, size, 0) < 0) {
			if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
				die("send%s", "");
		}
		if (k && (i + 1) % k == 0 && i + 1 < n)
			pace_wait(&pc);
	}
	close(fd);
	free(bufs);
	return pace_end(&pc);
}

/*
 * "gso": the application batches k packets itself, one sendmsg() with
 * UDP_SEGMENT on its own socket (the buffers are apart, as in a zone: one
 * iovec each).  The last message of a run may be shorter.
 */
static uint64_t gso_send(int port, size_t size, uint64_t n, unsigned k)
{
	struct pacer pc;
	int fd = connected(port);
	long page = sysconf(_SC_PAGESIZE);
	size_t step = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
	unsigned char *bufs = aligned_alloc((size_t)page, (step ? step : (size_t)page) * o.entries);
	struct iovec iov[64];
	union {
		char b[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} cm;

	if (!bufs)
		die("out of memory%s", "");
	if (k > 64)
		k = 64;
	if (!k)
		k = 1;
	memset(bufs, 0x5a, (step ? step : (size_t)page) * o.entries);
	pace_start(&pc, k);
	for (uint64_t i = 0; i < n;) {
		unsigned c = 0;
		for (; c < k && i < n; c++, i++) {
			unsigned char *b = bufs + (i % o.entries) * step;
			if (size >= 4)
				memcpy(b, &i, 4);
			iov[c].iov_base = b;
			iov[c].iov_len = size;
		}
		if (c == 1 || !size) {
			/* nothing to segment: one by one */
			for (unsigned j = 0; j < c; j++)
				while (send(fd, iov[j].iov_base, size, 0) < 0)
					if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
						die("send%s", "");
		} else {
			struct msghdr mh = { .msg_iov = iov,
					     .msg_iovlen = c,
					     .msg_control = cm.b,
					     .msg_controllen = sizeof(cm.b) };
			uint16_t seg = (uint16_t)size;
			struct cmsghdr *cmsg = CMSG_FIRSTHDR(&mh);
			cmsg->cmsg_level = SOL_UDP;
			cmsg->cmsg_type = UDP_SEGMENT;
			cmsg->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(cmsg), &seg, sizeof(seg));
			while (sendmsg(fd, &mh, 0) < 0)
				if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
					die("sendmsg (UDP_SEGMENT)%s", "");
		}
		if (i < n)
			pace_wait(&pc);
	}
	close(fd);
	free(bufs);
	return pace_end(&pc);
}

struct ringctx {
	struct gc_zone *z;
	struct gc_ring *r;
	uint64_t *off;
};

/* Fills every zone buffer of c (size bytes) and notes its offset. */
static void ring_buffers(struct ringctx *c, size_t size)
{
	for (unsigned i = 0; i < o.entries; i++) {
		memset(gc_zone_buf(c->z, i), 0x5a, size);
		c->off[i] = gc_zone_offset(c->z, gc_zone_buf(c->z, i));
	}
}

/* Waits (1 s at most) until the engine has parked r and asks to be notified. */
static void ring_parked(struct gc_ring *r)
{
	struct gc_ring_status st = GC_RING_STATUS_INIT();
	for (int i = 0; i < 5000; i++) {
		gc_ring_status(r, &st);
		if (st.kern_notify)
			break;
		usleep(200);
	}
}

static void ring_setup(struct ringctx *c, struct gc_ring_engine *e, int port, size_t size)
{
	int fd = connected(port);

	c->z = gc_zone_create(o.entries, size ? size : 1);
	c->r = c->z ? gc_ring_create(o.entries, c->z) : NULL;
	c->off = calloc(o.entries, sizeof(*c->off));
	if (!c->r || !c->off)
		die("ring%s", "");
	ring_buffers(c, size);
	if (gc_ring_attach(c->r, e, fd) < 0)
		die("attach%s", "");
	close(fd);
	/* start from a parked ring, as in steady state between bursts */
	ring_parked(c->r);
}

static void ring_teardown(struct ringctx *c)
{
	gc_ring_destroy(c->r);
	gc_zone_destroy(c->z);
	free(c->off);
}

static const char *const mode_names[] = { "asked", "always", "flush", "inline", "asked" };

/* Hand the published packets over: mode 0 (gc_ring_submit()) notifies when
 * asked, 1 every time, 2 flushes, 3 gc_ring_submit() with an engine started
 * with GC_RING_ENGINE_SUBMIT_FLUSH.  Returns 1 if the engine was notified or
 * the ring flushed. */
static int hand_over(struct gc_ring *r, int mode)
{
	if (mode == 0 || mode == 3 || mode == 4) {
		int n = gc_ring_submit(r);
		if (n < 0)
			die("submit%s", "");
		return n;
	}
	if (mode == 2) {
		if (gc_ring_flush(r) < 0)
			die("flush%s", "");
		return 1;
	}
	if (gc_ring_publish(r) || mode == 1) {
		if (gc_ring_notify(r) < 0)
			die("notify%s", "");
		return 1;
	}
	return 0;
}

static uint64_t ring_send(struct ringctx *c, size_t size, uint64_t n, unsigned k, int mode, uint64_t *work)
{
	struct gc_ring *r = c->r;
	unsigned pend = 0;
	uint64_t notifies = 0;
	struct pacer pc;

	pace_start(&pc, k);
	for (uint64_t i = 0; i < n; i++) {
		struct gc_pkt *p;
		while (!(p = gc_ring_get_pkt(r))) {
			if (pend) {
				pend = 0;
				notifies += (uint64_t)hand_over(r, mode);
			}
			uint64_t t0 = ns(CLOCK_MONOTONIC);
			if (gc_ring_wait(r, o.entries / 2, 10000) < 0)
				die("wait%s", "");
			if (ns(CLOCK_MONOTONIC) - t0 > 500000000ull) {
				struct gc_ring_status st = GC_RING_STATUS_INIT();
				gc_ring_status(r, &st);
				fprintf(stderr,
					"ring_p1: slow wait (%llu ms): dev %u kern %u umod %u user %u notify %u sent %llu i %llu\n",
					(unsigned long long)((ns(CLOCK_MONOTONIC) - t0) / 1000000),
					st.dev_i, st.kern_i, st.umod_i, st.user_i, st.kern_notify,
					(unsigned long long)st.sent, (unsigned long long)i);
			}
		}
		unsigned pos = gc_ring_pos(r, p);
		if (size >= 4)
			memcpy(gc_zone_buf(c->z, pos), &i, 4);
		p->off = c->off[pos];
		p->len = (uint32_t)size;
		p->user_seq = i;
		if (++pend == k) {
			pend = 0;
			notifies += (uint64_t)hand_over(r, mode);
			if (i + 1 < n)
				pace_wait(&pc);
		}
	}
	notifies += (uint64_t)hand_over(r, mode);
	/* until the last packet is through the engine */
	uint64_t t0 = ns(CLOCK_MONOTONIC);
	if (gc_ring_wait(r, o.entries - 1, 10000) < 0)
		die("drain%s", "");
	if (ns(CLOCK_MONOTONIC) - t0 > 500000000ull)
		fprintf(stderr, "ring_p1: slow drain\n");
	*work = pace_end(&pc);
	return notifies;
}

/* The clocks at the start of a ring run with the engine in this process. */
struct clocks {
	uint64_t cpu, app, wall, busy;
};

static struct clocks clocks_start(void)
{
	struct clocks t;
	t.cpu = ns(CLOCK_PROCESS_CPUTIME_ID);
	t.app = ns(CLOCK_THREAD_CPUTIME_ID);
	t.wall = ns(CLOCK_MONOTONIC);
	t.busy = machine_busy();
	return t;
}

/* res's times since t0, when ring_send() has returned work (its paced
 * bursts' CPU time): "app" is this thread, "engine" the rest of the process. */
static void clocks_ring_end(const struct clocks *t0, uint64_t work, struct res *res)
{
	/* this thread first: the process clock read after it covers it */
	res->app = ns(CLOCK_THREAD_CPUTIME_ID) - t0->app;
	res->cpu = ns(CLOCK_PROCESS_CPUTIME_ID) - t0->cpu;
	res->wall = ns(CLOCK_MONOTONIC) - t0->wall;
	res->busy = machine_busy() - t0->busy;
	res->engine = res->cpu > res->app ? res->cpu - res->app : 0; /* 0: the engine slept */
	if (o.pace) { /* the application's bursts, and the engine whole */
		res->app = work;
		res->cpu = work + res->engine;
	}
}

/* ---- DCCP framing (--modes dccp) ---------------------------------------- */

/*
 * The same producer over a gc_dccp connection (CCID 2, DCCP-UDP: RFC 6773,
 * port 6511) to a gc_dccp receiver in the receiving namespace.  The
 * receiver is a child process (its CPU is not counted, as the TC sink's
 * work is not the receiver's); the sender's engine thread, which frames,
 * sends and processes the receiver's Acks, is a thread of this process and
 * counts whole.  Every run opens a fresh connection and sends o.warmup
 * packets before measuring, so that slow start is over and the window
 * (reported at the end) is not the limit.
 */
static pid_t dccp_rx = -1;

static struct gc_dccp_opts dccp_opts(void)
{
	size_t mps = 1;
	for (size_t i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > mps)
			mps = o.sizes[i];
	return (struct gc_dccp_opts)GC_DCCP_OPTS_INIT(.ccid = 2, .encap = GC_DCCP_UDP,
						      .mps = (uint32_t)mps, .ring_slots = o.entries);
}

static struct sockaddr_in dccp_addr(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(GC_DCCP_UDP_PORT) };
	if (inet_pton(AF_INET, o.dest, &a.sin_addr) != 1)
		die("--dest %s: not an IPv4 address", o.dest);
	return a;
}

/*
 * A receiving child (dccp_receiver_start(), udp_reader_start()) in the
 * receiving namespace (--rxns, which opt needs), pinned to --rx-cpu, and
 * killed when this process ends.  Returns 0 in the child, which writes a
 * byte to ready[1] once it can receive, and the child's pid here.
 */
static pid_t rx_child_fork(const char *opt, int ready[2])
{
	if (!o.rxns)
		die("%s needs --rxns", opt);
	if (pipe(ready) < 0)
		die("pipe%s", "");
	pid_t pid = fork();
	if (pid < 0)
		die("fork%s", "");
	if (pid == 0) {
		char path[256];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(path, sizeof(path), "/run/netns/%s", o.rxns);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
			die("join the receiver's namespace %s", o.rxns);
		close(fd);
		pin(o.rx_cpu);
	}
	return pid;
}

/* Waits until the child of rx_child_fork() (what) can receive. */
static void rx_child_wait(int ready[2], const char *what)
{
	char ch;
	close(ready[1]);
	if (read(ready[0], &ch, 1) != 1)
		die("%s did not start", what);
	close(ready[0]);
}

/* The receiver: accepts one connection per run and reads it to its end. */
static void dccp_receiver_start(void)
{
	int p[2];
	dccp_rx = rx_child_fork("--modes dccp", p);
	if (dccp_rx == 0) {
		struct gc_dccp_opts op = dccp_opts();
		struct sockaddr_in a = dccp_addr();
		struct gc_dccp_listener *l = gc_dccp_listen((struct sockaddr *)&a, sizeof(a), &op);
		if (!l)
			die("gc_dccp_listen on %s", o.dest);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		static unsigned char buf[65536];
		for (;;) {
			struct gc_dccp *c = gc_dccp_accept(l, -1);
			if (!c)
				continue;
			for (;;) {
				struct gc_dccp_rxinfo ri;
				ssize_t n = gc_dccp_recv(c, buf, sizeof(buf), &ri, 10000);
				if ((n < 0 && errno != EAGAIN) || (n == 0 && ri.eof))
					break;
			}
			gc_dccp_close(c, 2000);
		}
	}
	rx_child_wait(p, "the DCCP receiver");
}

/*
 * --rx-read: a UDP receiver that reads every datagram sent to --port (a
 * child in the receiving namespace on --rx-cpu, recvmmsg() into one buffer,
 * not counted), so that the UDP methods of a pass meet the same receive
 * path as DCCP does (the kernel's IP/UDP receive and a reader on the other
 * CPU) instead of the TC sink's drop.
 */
static void udp_reader_start(void)
{
	int p[2];
	if (rx_child_fork("--rx-read", p) == 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o.port) };
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rcv = 8 << 20;
		if (s < 0 || inet_pton(AF_INET, o.dest, &a.sin_addr) != 1 ||
		    bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("bind the UDP reader to %s", o.dest);
		setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv));
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		enum { N = 64, SZ = 2048 };
		static unsigned char buf[N][SZ];
		struct mmsghdr mm[N];
		struct iovec iov[N];
		for (;;) {
			for (int i = 0; i < N; i++) {
				iov[i] = (struct iovec){ buf[i], SZ };
				mm[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
			}
			if (recvmmsg(s, mm, N, MSG_WAITFORONE, NULL) < 0 && errno != EINTR)
				_exit(1);
		}
	}
	rx_child_wait(p, "the UDP reader");
}

/* Pin every thread of this process but the calling one (the engine) to cpu. */
static void pin_others(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t s;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	pid_t me = (pid_t)gettid();

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	while (d && (e = readdir(d))) {
		pid_t t = (pid_t)atoi(e->d_name);
		if (t > 0 && t != me && sched_setaffinity(t, sizeof(s), &s) < 0)
			die("pin the engine to CPU %s", cpu ? "1" : "0");
	}
	if (d)
		closedir(d);
}

static void run_dccp(size_t size, unsigned k, struct res *res)
{
	memset(res, 0, sizeof(*res));
	pin(o.app_cpu);
	struct gc_dccp_opts op = dccp_opts();
	struct sockaddr_in a = dccp_addr();
	struct gc_dccp *d = gc_dccp_connect((struct sockaddr *)&a, sizeof(a), &op);
	if (!d)
		die("gc_dccp_connect to %s", o.dest);
	pin_others(o.engine_cpu);
	struct ringctx c = { .z = gc_dccp_zone(d), .r = gc_dccp_ring(d) };
	c.off = calloc(o.entries, sizeof(*c.off));
	if (!c.z || !c.r || !c.off)
		die("dccp ring%s", "");
	ring_buffers(&c, size);
	uint64_t work;
	if (o.warmup)
		ring_send(&c, size, o.warmup, k, 4, &work);
	ring_parked(c.r); /* from a parked ring, as ring_setup() */
	struct gc_dccp_stats s0 = GC_DCCP_STATS_INIT(), s1 = GC_DCCP_STATS_INIT();
	gc_dccp_stats(d, &s0);
	struct clocks t0 = clocks_start();
	res->notifies = ring_send(&c, size, o.packets, k, 4, &work);
	clocks_ring_end(&t0, work, res);
	gc_dccp_stats(d, &s1);
	res->cwnd = s1.cwnd;
	res->pipe = s1.pipe;
	res->rtt_us = s1.rtt_us;
	res->dsent = s1.sent - s0.sent;
	res->dacked = s1.acked - s0.acked;
	res->dlost = s1.lost - s0.lost;
	res->invalid = s1.invalid - s0.invalid;
	if (gc_dccp_close(d, 5000) < 0)
		fprintf(stderr, "ring_p1: gc_dccp_close: %s\n", gc_errmsg());
	free(c.off);
}

/* ---- one run ------------------------------------------------------------ */

static void run_single(const char *method, size_t size, unsigned k, int mode, struct res *res)
{
	if (!strcmp(method, "dccp")) {
		run_dccp(size, k, res);
		return;
	}
	memset(res, 0, sizeof(*res));
	pin(o.app_cpu);
	if (strcmp(method, "ring")) {
		uint64_t c0 = ns(CLOCK_PROCESS_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
		uint64_t b0 = machine_busy(), work;
		if (!strcmp(method, "udp"))
			work = udp_send(o.port, size, o.packets, k);
		else
			work = gso_send(o.port, size, o.packets, k);
		res->cpu = o.pace ? work : ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
		res->wall = ns(CLOCK_MONOTONIC) - w0;
		res->busy = machine_busy() - b0;
		res->app = res->cpu;
		return;
	}
	/* --engine-cpu -1: no pin flag; the engine thread inherits this
	 * thread's mask (the "taskset" placement) */
	struct gc_ring_engine_opts p =
		GC_RING_ENGINE_OPTS_INIT(.flags = o.engine_cpu >= 0 ? GC_RING_ENGINE_PIN_CPU : 0u,
					 .cpu = o.engine_cpu >= 0 ? o.engine_cpu : 0, .batch = o.batch);
	if (mode == 3)
		p.flags |= GC_RING_ENGINE_SUBMIT_FLUSH;
	struct gc_ring_engine *e = gc_ring_engine_create(&p);
	struct ringctx c;
	struct gc_ring_engine_stats s0 = GC_RING_ENGINE_STATS_INIT(), s1 = GC_RING_ENGINE_STATS_INIT();
	if (!e)
		die("engine%s", "");
	ring_setup(&c, e, o.port, size);
	gc_ring_engine_stats(e, &s0);
	struct clocks t0 = clocks_start();
	uint64_t work;
	res->notifies = ring_send(&c, size, o.packets, k, mode, &work);
	clocks_ring_end(&t0, work, res);
	gc_ring_engine_stats(e, &s1);
	res->sleeps = s1.sleeps - s0.sleeps;
	res->gso = s1.gso - s0.gso;
	res->syscalls = s1.syscalls - s0.syscalls;
	res->eng_notifies = s1.notifies - s0.notifies;
	ring_teardown(&c);
	gc_ring_engine_destroy(e);
}

/* C processes; the ring through a daemon engine. */
static void run_multi(const char *method, size_t size, unsigned k, int mode, struct res *res)
{
	int ring = !strcmp(method, "ring");
	int ready[2], go[2], out[2];
	pid_t daemon = -1, *kids = calloc((size_t)o.conns, sizeof(pid_t));
	uint64_t per = o.packets / (uint64_t)o.conns;

	memset(res, 0, sizeof(*res));
	if (!kids || pipe(ready) < 0 || pipe(go) < 0 || pipe(out) < 0)
		die("pipe%s", "");
	if (ring) {
		int dr[2];
		if (pipe(dr) < 0)
			die("pipe%s", "");
		daemon = fork();
		if (daemon == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			sigset_t set;
			int sig;
			sigemptyset(&set);
			sigaddset(&set, SIGTERM);
			sigprocmask(SIG_BLOCK, &set, NULL);
			pin(o.engine_cpu);
			struct gc_ring_engine_opts p =
				GC_RING_ENGINE_OPTS_INIT(.flags = o.engine_cpu >= 0 ? GC_RING_ENGINE_PIN_CPU
										    : 0u,
							 .cpu = o.engine_cpu >= 0 ? o.engine_cpu : 0,
							 .listen = o.sock, .batch = o.batch);
			struct gc_ring_engine *e = gc_ring_engine_create(&p);
			if (!e)
				die("daemon%s", "");
			if (write(dr[1], "r", 1) != 1)
				_exit(1);
			sigwait(&set, &sig);
			gc_ring_engine_destroy(e);
			_exit(0);
		}
		char ch;
		close(dr[1]);
		if (read(dr[0], &ch, 1) != 1)
			die("daemon start%s", "");
		close(dr[0]);
	}
	for (int i = 0; i < o.conns; i++) {
		kids[i] = fork();
		if (kids[i] != 0)
			continue;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char ch = 'r';
		struct gc_ring_engine *e = NULL;
		struct ringctx c;
		pin(o.app_cpu);
		if (ring) {
			e = gc_ring_engine_connect(o.sock);
			if (!e)
				die("connect %s", o.sock);
			ring_setup(&c, e, o.port + i, size);
		}
		if (write(ready[1], &ch, 1) != 1 || read(go[0], &ch, 1) != 1)
			_exit(1);
		uint64_t c0 = ns(CLOCK_PROCESS_CPUTIME_ID), nfy = 0, work = 0;
		if (ring)
			nfy = ring_send(&c, size, per, k, mode, &work);
		else if (!strcmp(method, "udp"))
			work = udp_send(o.port + i, size, per, k);
		else
			work = gso_send(o.port + i, size, per, k);
		uint64_t m[2] = { o.pace ? work : ns(CLOCK_PROCESS_CPUTIME_ID) - c0, nfy };
		if (write(out[1], m, sizeof(m)) != sizeof(m))
			_exit(1);
		if (ring) {
			ring_teardown(&c);
			gc_ring_engine_destroy(e);
		}
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	close(out[1]);
	for (int i = 0; i < o.conns; i++) {
		char ch;
		if (read(ready[0], &ch, 1) != 1)
			die("a sender failed to start%s", "");
	}
	/* the daemon's counters, through a control connection of our own */
	struct gc_ring_engine *ctl = ring ? gc_ring_engine_connect(o.sock) : NULL;
	struct gc_ring_engine_stats s0 = GC_RING_ENGINE_STATS_INIT(), s1 = GC_RING_ENGINE_STATS_INIT();
	if (ring && (!ctl || gc_ring_engine_stats(ctl, &s0) < 0))
		die("daemon stats%s", "");
	uint64_t d0 = ring ? task_cpu(daemon) : 0, w0 = ns(CLOCK_MONOTONIC), b0 = machine_busy();
	for (int i = 0; i < o.conns; i++)
		if (write(go[1], "g", 1) != 1)
			die("go%s", "");
	for (int i = 0; i < o.conns; i++) {
		uint64_t m[2];
		if (read(out[0], m, sizeof(m)) != sizeof(m))
			die("a sender failed%s", "");
		res->app += m[0];
		res->notifies += m[1];
	}
	res->wall = ns(CLOCK_MONOTONIC) - w0;
	res->busy = machine_busy() - b0;
	if (ring) {
		res->engine = task_cpu(daemon) - d0;
		if (gc_ring_engine_stats(ctl, &s1) < 0)
			die("daemon stats%s", "");
		res->sleeps = s1.sleeps - s0.sleeps;
		res->gso = s1.gso - s0.gso;
		res->syscalls = s1.syscalls - s0.syscalls;
		res->eng_notifies = s1.notifies - s0.notifies;
		gc_ring_engine_destroy(ctl);
	}
	res->cpu = res->app + res->engine;
	for (int i = 0; i < o.conns; i++)
		waitpid(kids[i], NULL, 0);
	if (ring) {
		kill(daemon, SIGTERM);
		waitpid(daemon, NULL, 0);
	}
	close(ready[0]);
	close(go[1]);
	close(out[0]);
	free(kids);
}

static void list(const char *s, size_t *sz, unsigned *u, size_t *n)
{
	char *d = strdup(s), *save, *t;

	*n = 0;
	for (t = strtok_r(d, ",", &save); t && *n < MAXV; t = strtok_r(NULL, ",", &save)) {
		if (sz)
			sz[*n] = strtoull(t, NULL, 0);
		else
			u[*n] = (unsigned)strtoul(t, NULL, 0);
		(*n)++;
	}
	free(d);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dest", 1, 0, 'd' },	  { "port", 1, 0, 'p' },    { "rxns", 1, 0, 'r' },
		{ "sizes", 1, 0, 's' },	  { "ks", 1, 0, 'k' },	    { "modes", 1, 0, 'm' },
		{ "reps", 1, 0, 'R' },	  { "packets", 1, 0, 'n' }, { "conns", 1, 0, 'c' },
		{ "entries", 1, 0, 'e' }, { "app-cpu", 1, 0, 'a' }, { "engine-cpu", 1, 0, 'g' },
		{ "sock", 1, 0, 'S' },	  { "rxif", 1, 0, 'i' },    { "batch", 1, 0, 'b' },
		{ "pace", 1, 0, 'P' },	  { "gso", 0, 0, 'G' },	    { "rx-cpu", 1, 0, 'X' },
		{ "warmup", 1, 0, 'W' },  { "rx-read", 0, 0, 'Y' }, { 0, 0, 0, 0 }
	};
	size_t nk;
	int c;

	list("0,100,500,1000,1400", o.sizes, NULL, &o.nsizes);
	list("1,2,4,8,16,32", NULL, o.ks, &nk);
	o.nks = (unsigned)nk;
	o.modes[0] = 0;
	o.modes[1] = 1;
	o.nmodes = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd': o.dest = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 'r': o.rxns = optarg; break;
		case 's': list(optarg, o.sizes, NULL, &o.nsizes); break;
		case 'k':
			list(optarg, NULL, o.ks, &nk);
			o.nks = (unsigned)nk;
			break;
		case 'm':
			o.nmodes = 0;
			if (strstr(optarg, "asked"))
				o.modes[o.nmodes++] = 0;
			if (strstr(optarg, "always"))
				o.modes[o.nmodes++] = 1;
			if (strstr(optarg, "flush"))
				o.modes[o.nmodes++] = 2;
			if (strstr(optarg, "inline"))
				o.modes[o.nmodes++] = 3;
			if (strstr(optarg, "dccp"))
				o.modes[o.nmodes++] = 4;
			break;
		case 'R': o.reps = atoi(optarg); break;
		case 'n': o.packets = strtoull(optarg, NULL, 0); break;
		case 'c': o.conns = atoi(optarg); break;
		case 'e': o.entries = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'a': o.app_cpu = atoi(optarg); break;
		case 'g': o.engine_cpu = atoi(optarg); break;
		case 'S': o.sock = optarg; break;
		case 'i': o.rxif = optarg; break;
		case 'b': o.batch = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'P': o.pace = strtoull(optarg, NULL, 0); break;
		case 'G': o.gso = 1; break;
		case 'X': o.rx_cpu = atoi(optarg); break;
		case 'W': o.warmup = strtoull(optarg, NULL, 0); break;
		case 'Y': o.rx_read = 1; break;
		default: return 2;
		}
	}
	if (!o.dest || o.conns < 1 || o.entries < 4 || (o.conns > 1 && !o.sock)) {
		fprintf(stderr, "ring_p1: need --dest (and --sock with --conns > 1)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (o.rx_read)
		udp_reader_start();
	for (int i = 0; i < o.nmodes; i++)
		if (o.modes[i] == 4) {
			if (o.conns != 1) {
				fprintf(stderr, "ring_p1: --modes dccp: one connection only\n");
				return 2;
			}
			dccp_receiver_start(); /* before any thread exists */
			break;
		}
	for (int rep = 0; rep < o.reps; rep++) {
		for (size_t si = 0; si < o.nsizes; si++) {
			/* udp, gso with every k, then the ring with every k and
			 * mode: interleaved.  Paced, udp sends in bursts of the
			 * first k. */
			int ngso = o.gso ? (int)o.nks : 0;
			for (int m = -1 - ngso; m < o.nmodes * (int)o.nks; m++) {
				const char *method = m == -1 - ngso    ? "udp"
					: m < 0			       ? "gso"
					: o.modes[m / (int)o.nks] == 4 ? "dccp"
								       : "ring";
				unsigned k = m == -1 - ngso ? (o.pace ? o.ks[0] : 0)
					: m < 0		    ? o.ks[m + ngso]
							    : o.ks[m % o.nks];
				int mode = m < 0 ? 0 : o.modes[m / (int)o.nks];
				struct res r;
				uint64_t rx0 = rx_count();
				if (o.conns == 1)
					run_single(method, o.sizes[si], k, mode, &r);
				else
					run_multi(method, o.sizes[si], k, mode, &r);
				uint64_t sent = o.conns == 1
					? o.packets
					: o.packets / (uint64_t)o.conns * (uint64_t)o.conns;
				r.rx = rx_count() - rx0;
				printf("{\"method\": \"%s\", \"size\": %zu, \"k\": %u, \"notify\": \"%s\", "
				       "\"conns\": %d, \"rep\": %d, \"packets\": %llu, \"cpu_ns\": %llu, "
				       "\"app_ns\": %llu, \"engine_ns\": %llu, \"wall_ns\": %llu, "
				       "\"busy_ns\": %llu, \"rx\": %llu, \"notifies\": %llu, "
				       "\"engine_notifies\": %llu, \"engine_sleeps\": %llu, \"gso\": %llu, "
				       "\"syscalls\": %llu, \"app_cpu\": %d, \"engine_cpu\": %d, "
				       "\"batch\": %u, \"entries\": %u, \"pace\": %llu, \"cwnd\": %llu, "
				       "\"pipe\": %llu, \"rtt_us\": %llu, \"dccp_sent\": %llu, "
				       "\"dccp_acked\": %llu, \"dccp_lost\": %llu, \"dccp_invalid\": %llu}\n",
				       method, o.sizes[si], k, m < 0 ? "-" : mode_names[mode], o.conns,
				       rep, (unsigned long long)sent, (unsigned long long)r.cpu,
				       (unsigned long long)r.app, (unsigned long long)r.engine,
				       (unsigned long long)r.wall, (unsigned long long)r.busy,
				       (unsigned long long)r.rx, (unsigned long long)r.notifies,
				       (unsigned long long)r.eng_notifies, (unsigned long long)r.sleeps,
				       (unsigned long long)r.gso, (unsigned long long)r.syscalls,
				       o.app_cpu, o.engine_cpu, o.batch ? o.batch : 64, o.entries,
				       (unsigned long long)o.pace, (unsigned long long)r.cwnd,
				       (unsigned long long)r.pipe, (unsigned long long)r.rtt_us,
				       (unsigned long long)r.dsent, (unsigned long long)r.dacked,
				       (unsigned long long)r.dlost, (unsigned long long)r.invalid);
			}
		}
	}
	return 0;
}
