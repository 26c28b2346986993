"""Shared driver for the group-send benchmarks: a lab, sinks that verify every
datagram, and `groupcast blast` runs with the engines interleaved.

Fairness rules from DESIGN.md: the sender is pinned to CPU 0, the receivers'
work is steered to CPU 1 with RPS, engines are interleaved (A B C A B C), and a
point with any lost datagram is reported as lost, never averaged in.
"""
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "lab"))
from netlab import Lab  # noqa: E402

PORT_BASE = 20000


def portable(outdir):
    """Rewrite the text results in outdir so that paths inside the checkout are
    relative to its root: results name the repository's layout, never this
    machine's."""
    for name in sorted(os.listdir(outdir)):
        if not name.endswith((".txt", ".md", ".json", ".jsonl", ".csv")):
            continue
        path = os.path.join(outdir, name)
        with open(path) as f:
            text = f.read()
        new = text.replace(ROOT + "/", "").replace(ROOT, ".")
        if new != text:
            with open(path, "w") as f:
                f.write(new)


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
        return self.lost == 0 and all(s["bad"] == 0 and s["dups"] == 0 for s in self.sinks)


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
            import time
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
    lost = sum(abs(s["due"] - s["received"]) for s in results)
    for r in rows:
        r["warmup"] = bool(warmup and r.get("index", 0) % len(entries) % 2 == 0)
    res = Result(rows, results, due, lost, argv=argv, stderr=out.stderr, returncode=out.returncode)
    for e in engines:
        mine = [r for r in rows if r["engine"] == e and not r["warmup"]]
        vals = [r["cpu_ns_per_send"] for r in mine]
        walls = [r["wall_ns_per_send"] for r in mine]
        busy = [r["machine_busy_ns_per_send"] for r in mine]
        res.medians[e] = {
            "cpu_ns": statistics.median(vals), "cpu_min": min(vals), "cpu_max": max(vals),
            "wall_ns": statistics.median(walls), "busy_ns": statistics.median(busy),
            "wall_min": min(walls), "wall_max": max(walls), "reps": len(vals),
            "failed": sum(r["failed"] for r in mine),
        }
    return res


def machine_facts():
    facts = {"kernel": os.uname().release, "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    facts["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return facts
