"""Running measurements: the lab, `groupcast blast` runs whose datagrams sinks
verify, points with retries, pacing, CPU accounting, and building the bench's
own BPF programs.

Fairness rules from DESIGN.md: the sender is pinned to CPU 0, the receivers'
work is steered to CPU 1 with RPS, engines are interleaved (A B C A B C), and a
point with any lost datagram is reported as lost, never averaged in.
"""
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

from . import analyse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "lab"))
from netlab import Lab  # noqa: E402

PORT_BASE = 20000


def tool(build):
    return os.path.join(build, "tools", "groupcast")


def engines_available(build):
    out = subprocess.run([tool(build), "engines", "--json"], check=True, capture_output=True, text=True)
    info = json.loads(out.stdout)
    return info


def make_lab(receivers=2):
    """A star lab: sender + receivers, RPS to CPU 1, a backlog for bursts."""
    lab = Lab()
    star = lab.star(receivers)
    for r in star.receivers:
        lab.set_rps(r.ns, r.ifname, 0b10)
    lab.set_sysctl("net.core.netdev_max_backlog", 20000)
    return lab, star


@dataclass
class Result:
    rows: list                      # one dict per (engine, rep) from blast
    sinks: list                     # one dict per receiver namespace
    expected: int                   # datagrams due to each member
    lost: int = 0                   # datagrams missing (or extra) over all members
    medians: dict = field(default_factory=dict)
    argv: list = field(default_factory=list)   # the blast command line (inside the sender namespace)
    stderr: str = ""                # blast's stderr (its table of medians, warnings)
    returncode: int = 0             # blast's exit status (1 if any datagram failed)

    def ok(self):
        return analyse.sinks_ok(self.sinks, self.lost)


def blast(build, lab, star, n, engines, size=100, sends=100, reps=5, interval_us=0,
          replace=False, prepend=0, append=0, family=4, extra=(), sendgroup=False, wrap=(),
          warmup=False, shuffle=False):
    """n members spread over the receivers; returns a verified Result.

    sendgroup=True uses gc_sendgroup() even with prepend = append = 0.
    shuffle=True replaces the group before every send with the members in
    another order (blast --shuffle).
    wrap is a command prefix for blast (e.g. perf record ... --).
    warmup=True runs every engine twice in a row (A A B B ...) and takes the
    medians from the second run only: switching engines costs the first send
    after the switch (the kernel engine attaches its program then), which is
    not a cost of steady sending.  Warm-up rows are kept, with "warmup": true;
    their datagrams are verified like the others."""
    engines = list(engines)
    entries = [x for e in engines for x in ((e, e) if warmup else (e,))]
    k = len(star.receivers)
    per = [n // k + (1 if i < n % k else 0) for i in range(k)]
    due = reps * len(entries) * sends
    sinks, specs = [], []
    for r, cnt in zip(star.receivers, per):
        if cnt == 0:
            continue
        addr = r.v4 if family == 4 else r.v6
        specs.append(f"{addr}:{PORT_BASE}+{cnt}" if family == 4 else f"[{addr}]:{PORT_BASE}+{cnt}")
        ready = f"/tmp/{lab.prefix}-{r.ns}.ready"
        if os.path.exists(ready):
            os.unlink(ready)
        argv = [tool(build), "sink", "--addr", addr, "--port-base", str(PORT_BASE), "--count", str(cnt),
                "--expect", str(cnt * due), "--idle-ms", "5000", "--verify", "--size", str(size),
                "--prepend", str(prepend), "--append", str(append), "--ready-file", ready, "--cpu", "1"]
        sinks.append((lab.popen(r.ns, argv, stdout=subprocess.PIPE, text=True), ready, cnt))
    for p, ready, _ in sinks:
        while not os.path.exists(ready):
            if p.poll() is not None:
                raise RuntimeError("sink exited early")
            time.sleep(0.02)
    argv = [*wrap, tool(build), "blast", "--json", "--cpu", "0", "--engines", ",".join(entries),
            "--size", str(size), "--sends", str(sends), "--reps", str(reps),
            "--interval-us", str(interval_us), *extra]
    for s in specs:
        argv += ["--members", s]
    if shuffle:
        argv.append("--shuffle")
    elif replace:
        argv.append("--replace")
    if prepend or append or sendgroup:
        argv += ["--prepend", str(prepend), "--append", str(append)]
    try:
        out = lab.run(star.sender, argv, check=False, capture_output=True, text=True)
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        if not rows:
            raise RuntimeError(f"blast failed: {out.stderr.strip()}")
    except BaseException:
        for p, ready, _ in sinks:   # free the ports for the next point
            p.kill()
            p.wait()
            if os.path.exists(ready):
                os.unlink(ready)
        raise
    results = []
    for p, ready, cnt in sinks:
        so, _ = p.communicate(timeout=120)
        s = json.loads(so.strip().splitlines()[-1])
        s["due"] = cnt * due
        results.append(s)
        os.unlink(ready)
    lost = analyse.lost(results)
    for r in rows:
        r["warmup"] = bool(warmup and r.get("index", 0) % len(entries) % 2 == 0)
    res = Result(rows, results, due, lost, argv=argv, stderr=out.stderr, returncode=out.returncode)
    res.medians = analyse.engine_medians(rows, engines)
    return res


def log(msg):
    print(msg, flush=True)


class Runner:
    """Runs verified blast points and keeps every attempt (group.py's raw.json
    and rows.csv have them all)."""

    def __init__(self, args, lab, star, engines):
        self.args, self.lab, self.star, self.engines = args, lab, star, engines
        self.points = []        # every point, every attempt, for raw.json / rows.csv

    def point(self, exp, key, n, size, sends, reps, interval_us, replace=False, pre=0, app=0,
              sendgroup=False, engines=None, wrap=(), retries=None, warmup=True, shuffle=False):
        """One verified blast point.  On loss, retried with twice the pacing
        (the lost attempt is kept in the raw data and noted in the tables)."""
        engines = engines or self.engines
        retries = self.args.retries if retries is None else retries
        attempts = []
        for attempt in range(retries + 1):
            t0 = time.monotonic()
            err = None
            try:
                res = blast(self.args.build, self.lab, self.star, n, engines, size=size, sends=sends,
                            reps=reps, interval_us=interval_us, replace=replace, prepend=pre, append=app,
                            sendgroup=sendgroup, wrap=wrap, warmup=warmup, shuffle=shuffle)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                res, err = None, str(e)
            took = time.monotonic() - t0
            a = {"attempt": attempt, "interval_us": interval_us, "seconds": round(took, 2)}
            if res is None:
                a.update(status="ERROR", error=err, rows=[], sinks=[], medians={}, lost=None)
            else:
                ok, failed, stats_ok = analyse.verdict(res.rows, res.sinks, res.lost)
                a.update(status="ok" if ok else "LOST", rows=res.rows, sinks=res.sinks,
                         medians=res.medians, lost=res.lost, failed=failed, stats_ok=stats_ok,
                         argv=res.argv, due_per_member=res.expected,
                         received=sum(s["received"] for s in res.sinks),
                         due=sum(s["due"] for s in res.sinks),
                         warnings=[line for line in res.stderr.splitlines() if "warn" in line.lower()
                                   or "fail" in line.lower()][:10])
            attempts.append(a)
            if a["status"] == "ok":
                break
            log(f"    {exp} {key}: {a['status']} (lost {a.get('lost')}, failed {a.get('failed')}"
                f"{', ' + err if err else ''}); " + ("retrying with twice the pacing" if attempt < retries
                                                     else "giving up: reported as LOST"))
            interval_us = max(2 * interval_us, 100)
        final = attempts[-1]
        p = {"experiment": exp, "key": key, "n": n, "size": size, "sends": sends, "reps": reps,
             "replace": replace, "shuffle": shuffle, "prepend": pre, "append": app, "sendgroup": sendgroup,
             "warmup": warmup,
             "engines": list(engines), "status": final["status"], "interval_us": final["interval_us"],
             "retried": len(attempts) > 1, "medians": final["medians"] if final["status"] == "ok" else {},
             "attempts": attempts}
        self.points.append(p)
        return p


UNPACED_MAX_N = 50


def pace_us(n, paced=None):
    """Pacing: sleep after each send so that the receivers (about 4 us of CPU 1
    per datagram here) drain one send before the next: 5 us per member.  Up to
    UNPACED_MAX_N members the sends go back to back (timed per rep, no timer
    per send): a few thousand datagrams fit the receivers' queues, and every
    paced send would also pay for waking the idle CPU 1 (see README)."""
    if paced is None:
        paced = n > UNPACED_MAX_N
    return max(50, 5 * n) if paced else 0


def sends_for(n, target, lo, hi):
    """Group sends per engine and rep: about `target` datagrams per member set."""
    return int(min(hi, max(lo, math.ceil(target / n))))


# --- CPU accounting -------------------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_busy():
    """(busy, total) jiffies of the whole machine from /proc/stat: work that
    moved to another CPU or a kernel thread is not taken for work saved."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6]
    return busy, busy + v[3] + v[4] + v[7]


def cpu_times_ns(cpu):
    """(busy, softirq) ns of one CPU from /proc/stat (tick resolution):
    busy = user + nice + system + irq + softirq + steal."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:9]]
                return ((v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1e9 / CLK_TCK, v[6] * 1e9 / CLK_TCK)
    raise ValueError(f"no cpu{cpu} in /proc/stat")


def proc_cpu_ns(pid):
    """utime + stime of pid from /proc/PID/stat (tick resolution), in ns."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e9 / CLK_TCK


def task_cpu_ns(pid):
    """Run time of every thread of pid, in ns (schedstat's first field)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between listdir and open
    return total


def children(pid):
    """The pids whose parent is pid (a scan of /proc/*/stat: this kernel has
    no /proc/PID/task/TID/children)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass   # gone meanwhile
    return out


def tree_cpu_ns(pid):
    """task_cpu_ns of pid and of every process below it: a replicator that
    forks workers (nfacctd: core process and plugin) is billed for all."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += task_cpu_ns(p)
        except OSError:
            continue   # gone
        todo += children(p)
    return total


def rusage_wrap(outfile):
    """A command prefix that runs the command and writes its user and system
    CPU (getrusage of the child) to outfile as JSON: the fallback without perf."""
    code = ("import resource,subprocess,sys,json\n"
            "r=subprocess.run(sys.argv[2:])\n"
            "u=resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "open(sys.argv[1],'w').write(json.dumps({'utime':u.ru_utime,'stime':u.ru_stime,"
            "'nvcsw':u.ru_nvcsw,'nivcsw':u.ru_nivcsw}))\n"
            "sys.exit(r.returncode)\n")
    return [sys.executable, "-c", code, outfile]


# --- the bench's own BPF programs -------------------------------------------------------------

def bpf_cflags(build):
    """The library's own clang flags for BPF (target, arch, bpf/ for
    vmlinux.h, the UAPI headers), written by CMake into the build directory."""
    with open(os.path.join(build, "bpf", "clang-bpf-flags")) as f:
        return [x for x in f.read().split("\n") if x]


def compile_bpf(build, src, obj, extra=()):
    """Compile one of bench/*.bpf.c with the library's flags."""
    subprocess.run(["clang", *bpf_cflags(build), *extra, "-c", src, "-o", obj], check=True)
    return obj
