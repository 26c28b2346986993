#!/usr/bin/env python3
"""Issue 24: the relay against samplicator and pmacct's nfacctd tee at every operating point.

    sudo python3 bench/relay_points.py --samplicator PATH/samplicate [--nfacctd /usr/sbin/nfacctd]
        [--build build] [--relay DIR[=BRANCH] ...] [--reps 3] [--out bench/results/relay-points]
    sudo python3 bench/relay_points.py --quick --peers ''     # one relay point, every copy checked: CI

Input: NetFlow v5 export datagrams (24-byte header + 20 flow records = 984 B,
the stream of `tests/e2e/relaytool.py nf5`), at 100/s from one exporter and
at 20,000/s from 8 exporters (8 source addresses in the producer's namespace,
round robin, each with its own flow sequence).  The producer is bench/nf5_send
(C, from the --build directory: the same datagrams, from the record blocks
`relaytool.py nf5 --blocks-out` writes, paced to each datagram's due time and
sent with sendmmsg per exporter, several hundred thousand a second on one
CPU); where it is not built, relaytool.py nf5 itself, with a note in the log
(Python: about 100,000 datagrams/s at most here, so a search above that is
producer-limited).  Replicators: `groupcast relay --engine auto` (one
method per --relay build), samplicator, and nfacctd with one tee plugin, each
given the same receivers (bench/relaylab.py: two receiver namespaces, ports
20000...), the same input port and a 4 MB input buffer, in proxy mode (copies
come from the replicator's address).  pmacct is configured as its QUICKSTART's
replicator section says (plugins: tee[a], tee_receivers), one tee_receivers
pool per 15 receivers (nfacctd ignores map lines over 288 characters; the run
stops if its log warns of anything); without the section's
optional plugin_buffer_size, which holds datagrams back until a buffer fills
(a low-rate tail would never leave).

Every copy is checked: each receiver port's sink counts what it got and adds
up the hashes of the datagrams (`groupcast sink --digest`, the sum the
producer's stream must give); a run is lossless only if every port got
exactly the datagrams sent, byte for byte.
Runs with loss are never averaged in.  Where copies went missing is recorded:
UDP receive-buffer drops in the replicator's namespace (its input) and in the
receivers' namespaces.

1. CPU per input datagram: the replicator's CPU (every thread of its process
   and of any process it forked, schedstat, ns) from just before the producer
   starts until the last copy arrived, over the datagrams sent.  N = 1, 2, 5,
   10, 100, 1000 at 100/s; N = 1, 2, 5, 10 at 20,000/s (N x 20,000 copies a
   second are what the receivers' CPU can take).  Every round runs every
   point with every replicator in turn (who goes first rotates from round to
   round); a run with loss is tried once more; the median over the lossless
   runs.  Beside it CPU 0's softirq time (/proc/stat): kernel work outside
   the replicator's process time (receiving its input, deferred sends).
2. The highest input rate each replicator holds without loss at N = 2 and 10
   (8 exporters): a run of --probe-seconds at rate R holds if every copy
   arrived (a run with loss is tried once more: other jobs on this machine);
   R starts at --search-start and doubles until a rate does not hold or the
   producer cannot send faster (it reaches less than 95% of R: the search
   stops there and says "producer-limited"); then --bisections bisections
   (geometric mean) between the highest rate that held and the lowest that
   did not.  A rate counts as what the producer reached (never more than
   asked): held is the highest rate reached in a lossless run, lost at the
   rate reached in the lossy run.  The replicators take their steps in turn.
   Each run records where copies went missing and how busy CPU 1 (producer,
   sinks, the receivers' softirq work) and the sinks were while the producer
   sent: whether the replicator or the lab ran out.

Pinning as in bench/relaylab.py: the replicator on CPU 0 with its input
received there (RPS); the producer, the sinks and the receivers' softirq work
on CPU 1.  All of them at nice -15 (the machine is shared with other jobs).
Results go to --out: README.md (tables, plot, command), raw.json, rows.csv,
cpu_vs_receivers.png.
"""
import argparse
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
import relaytool  # noqa: E402
from gcbench import plot, report  # noqa: E402
from gcbench.run import children, cpu_times_ns, log, machine_busy, tree_cpu_ns  # noqa: E402
from relaylab import udp_counters, wait_bound, wait_idle  # noqa: E402

IN_PORT = 2055
RCVBUF = 4 << 20          # every replicator's input buffer (net.core.rmem_max here)
TEE_POOL = 15             # receivers per tee_receivers line: nfacctd reads at most 288 characters a line
LOW, HIGH = (100, 1), (20000, 8)   # (input datagrams/s, exporters)
# Every process of the lab (replicator, producer, sinks) runs at nice -15: the
# machine is shared, and other jobs (at nice 0..10) must not starve a
# replicator into dropping input.  The same for every replicator; nice changes
# no process's CPU cost, only who waits.
NICE = ("nice", "-n", "-15")
TARGETS = {  # issue 24 item 4: the relay's CPU per input datagram / the better peer's
    "low": ("≤ 1.0×", 1.0), "high": ("≤ 0.4×", 0.4), "1000": ("≤ 0.2× (5× less)", 0.2)}


def target_for(n, rate):
    if n >= 1000:
        return TARGETS["1000"]
    if rate >= HIGH[0] and n in (2, 10):
        return TARGETS["high"]
    if rate <= LOW[0] and n <= 10:
        return TARGETS["low"]
    return None


# ---- the replicators -----------------------------------------------------------------------

def build_label(build):
    """'relay@<commit>' of the source tree a CMake build directory was made from."""
    src = None
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for ln in f:
                if ln.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                    src = ln.split("=", 1)[1].strip()
    except OSError:
        pass
    rev = subprocess.run(["git", "-C", src or build, "rev-parse", "--short=10", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    if not rev and src and os.path.exists(os.path.join(src, "SOURCE_COMMIT")):
        with open(os.path.join(src, "SOURCE_COMMIT")) as f:   # an exported tree (git archive)
            rev = f.read().strip()[:10]
    dirty = subprocess.run(["git", "-C", src or build, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() if rev and src else ""
    return f"relay@{rev or 'unknown'}{'+dirty' if dirty else ''}"


class Relay:
    kind = "relay"

    def __init__(self, spec):
        """spec: a build directory, or DIR=BRANCH to name the branch too."""
        build, _, branch = spec.partition("=")
        self.bin, self.build = gcbench.tool(build), build
        self.name = build_label(build).replace("relay@", f"relay {branch}@" if branch else "relay@")

    def argv(self, rl, n, workdir):
        self.sock = os.path.join(workdir, "relay.sock")
        return [self.bin, "relay", "--engine", "auto", "--stats-socket", self.sock, "-p", IN_PORT, "-b", RCVBUF,
                *rl.receivers_argv(n)]

    def engine(self, rl):
        """The relay's --query after the run: the engine AUTO resolved to and,
        where the relay says, how it batched and which way the copies went."""
        q = rl.query(self.sock) or {}
        return {k: q[k] for k in ("engine_resolved", "batching", "lib_datagrams", "lib_user_fallback") if k in q}


class Samplicator:
    kind = name = "samplicator"

    def __init__(self, path):
        self.path = os.path.abspath(path)

    def argv(self, rl, n, workdir):
        return [self.path, "-p", IN_PORT, "-b", RCVBUF, *rl.receivers_argv(n)]


class Nfacctd:
    kind = name = "pmacct-tee"

    def __init__(self, path):
        self.path = path

    def argv(self, rl, n, workdir):
        recv = [a.replace("/", ":") for a in rl.receivers_argv(n)]
        lst = os.path.join(workdir, f"tee_receivers-{n}.lst")
        with open(lst, "w") as f:
            for pool, i in enumerate(range(0, len(recv), TEE_POOL), 1):
                f.write(f"id={pool}\tip={','.join(recv[i:i + TEE_POOL])}\n")
        conf = os.path.join(workdir, f"nfacctd-{n}.conf")
        with open(conf, "w") as f:
            f.write("! bench/relay_points.py: a NetFlow replicator (pmacct QUICKSTART, section XV)\n"
                    "daemonize: false\n"
                    f"nfacctd_ip: {rl.relay_addr}\n"
                    f"nfacctd_port: {IN_PORT}\n"
                    f"nfacctd_pipe_size: {RCVBUF}\n"
                    f"logfile: {os.path.join(workdir, 'nfacctd.log')}\n"
                    "plugins: tee[a]\n"
                    f"tee_receivers[a]: {lst}\n"
                    f"tee_max_receiver_pools[a]: {max(128, -(-n // TEE_POOL))}\n")
        self.log = os.path.join(workdir, "nfacctd.log")
        if os.path.exists(self.log):
            os.unlink(self.log)
        return [self.path, "-f", conf]

    def warnings(self):
        with open(self.log) as f:
            return [ln.strip() for ln in f if " WARN " in ln or " ERROR " in ln]

    def check(self):
        """nfacctd skips what it cannot read with a warning and runs on: never measure that."""
        bad = self.warnings()
        if bad:
            raise RuntimeError("nfacctd warned:\n" + "\n".join(bad[:5]))


# ---- one run ---------------------------------------------------------------------------------

_digests = {}


def digest(count, exporters):
    """The sum of the hashes of the `count` datagrams the producer will send."""
    if (count, exporters) not in _digests:
        _digests[(count, exporters)] = relaytool.nf5_digest(count, exporters)
    return _digests[(count, exporters)]


def stop_tree(rl, proc):
    """Stop a replicator and whatever it forked (only processes this run
    started): SIGTERM, and SIGKILL after 2 s (nfacctd takes 10 s or more to
    end on SIGTERM; what it does then is not measured)."""
    kids = children(proc.pid)
    rl.stop(proc, timeout=2)
    for k in kids:
        try:
            os.kill(k, 9)
        except ProcessLookupError:
            pass


class Producer:
    """The NetFlow v5 producer: bench/nf5_send (C) from the --build directory,
    fed the record blocks relaytool.py writes, or relaytool.py nf5 itself
    where nf5_send is not built (it tops out near 100,000 datagrams/s here).
    Both send the same datagrams (tests/e2e/test_bench_relay_points.py)."""

    def __init__(self, build, workdir):
        self.path = os.path.join(os.path.abspath(build), "bench", "nf5_send")
        if os.access(self.path, os.X_OK):
            self.blocks = os.path.join(workdir, "nf5-blocks.bin")
            relaytool.write_nf5_blocks(self.blocks)
            self.name = "bench/nf5_send"
        else:
            log(f"producer: {self.path} is not built; falling back to relaytool.py nf5 (Python, about "
                "100,000 datagrams/s at most: higher rates will be producer-limited)")
            self.path, self.name = None, "relaytool.py nf5"

    def argv(self, to, srcs, count, rate):
        args = ["--to", to, "--src", ",".join(srcs), "--count", count, "--rate", rate]
        if self.path:
            return [self.path, "--blocks", self.blocks, *args]
        return [sys.executable, relaylab.TOOL, "nf5", *args]


def one_run(rl, method, n, rate, exporters, seconds, workdir):
    lab = rl.lab
    count = max(1, int(rate * seconds))
    srcs = rl.exporters(exporters)
    sinks = rl.start_sinks(n, count, idle_ms=3000, rcvbuf=262144 if n > 100 else RCVBUF,
                           extra=("--digest", digest(count, exporters)), prefix=NICE)
    argv = [*NICE, "taskset", "-c", "0", *method.argv(rl, n, workdir)]
    proc = lab.popen(rl.relay_ns, argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    spaces = [rl.relay_ns] + [r.ns for r in rl.star.receivers]
    udp0 = {ns: udp_counters(lab, ns) for ns in spaces}
    res = []
    try:
        wait_bound(lab, rl.relay_ns, IN_PORT, proc)
        wait_idle(proc.pid)
        if hasattr(method, "check"):
            method.check()
        s0 = sum(tree_cpu_ns(p.pid) for p, _, _ in sinks)
        c0, b0, k0, w0 = tree_cpu_ns(proc.pid), machine_busy(), cpu_times_ns(0), time.monotonic()
        j0 = cpu_times_ns(1)
        tx = lab.popen(rl.p_ns, [*NICE, "taskset", "-c", "1",
                                 *rl.producer_nf5.argv(f"{rl.relay_addr}:{IN_PORT}", srcs, count, rate)],
                       stdout=subprocess.PIPE, text=True)
        txo, _ = tx.communicate(timeout=count / rate * 5 + 60)
        # CPU 1 (producer, sinks, the receivers' softirq) while the producer sent
        j1, s1, wt = cpu_times_ns(1), sum(tree_cpu_ns(p.pid) for p, _, _ in sinks), time.monotonic()
        res = rl.finish_sinks(sinks)   # each exits once it has all it is due, or after 3 s of quiet
        c1, b1, k1, w1 = tree_cpu_ns(proc.pid), machine_busy(), cpu_times_ns(0), time.monotonic()
        query = method.engine(rl) if hasattr(method, "engine") else {}
    finally:
        if not res:
            rl.finish_sinks(sinks, kill=True)
        stop_tree(rl, proc)
    udp = {ns: {k: v - udp0[ns][k] for k, v in udp_counters(lab, ns).items()} for ns in spaces}
    warnings = method.warnings() if hasattr(method, "warnings") else None
    tx_info = json.loads(txo)
    got = sum(s["received"] for s in res)
    exact = sum(s.get("digest_ok", 0) for s in res)
    return {
        "method": method.name, "kind": method.kind, "engine": query.get("engine_resolved"), "query": query, "n": n, "rate": rate, "exporters": exporters,
        "sent": count, "producer_seconds": tx_info["seconds"],
        "producer_rate": count / tx_info["seconds"] if tx_info["seconds"] else None,
        "cpu_ns": c1 - c0, "cpu_ns_per_input": (c1 - c0) / count,
        "machine_busy_frac": (b1[0] - b0[0]) / max(1, b1[1] - b0[1]), "wall_s": w1 - w0,
        "producer": rl.producer_nf5.name,
        "cpu1_busy_frac_sending": (j1[0] - j0[0]) / max(1e-9, (wt - w0) * 1e9),
        "sinks_cpu_frac_sending": (s1 - s0) / max(1e-9, (wt - w0) * 1e9),
        "cpu0_busy_ns": k1[0] - k0[0], "cpu0_softirq_ns": k1[1] - k0[1],
        "cpu0_softirq_ns_per_input": (k1[1] - k0[1]) / count,
        "delivered": got, "due": n * count, "lost": n * count - got, "ports_exact": exact,
        "ok": got == n * count and exact == n and all(s["ports_min"] == s["ports_max"] == count for s in res),
        "drops_input": udp[rl.relay_ns]["RcvbufErrors"], "sndbuf_errors": udp[rl.relay_ns]["SndbufErrors"],
        "drops_receivers": sum(udp[ns]["RcvbufErrors"] for ns in spaces[1:]), "replicator_warnings": warnings,
    }


def safe_run(rl, method, n, rate, exporters, seconds, workdir):
    """one_run, or a failed row that says why (a replicator that would not
    start or died): one broken point must not cost the whole run."""
    try:
        return one_run(rl, method, n, rate, exporters, seconds, workdir)
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        count = max(1, int(rate * seconds))
        return {"method": method.name, "kind": method.kind, "engine": None, "query": {}, "n": n, "rate": rate,
                "exporters": exporters, "sent": count, "producer_seconds": None, "producer_rate": None,
                "cpu_ns": 0, "cpu_ns_per_input": 0.0, "machine_busy_frac": None, "wall_s": None,
                "delivered": 0, "due": n * count, "lost": n * count, "ports_exact": 0, "ok": False,
                "drops_input": 0, "sndbuf_errors": 0, "drops_receivers": 0, "replicator_warnings": None,
                "error": f"{type(e).__name__}: {e}"[:500]}


def describe(row):
    s = (f"{row['method']:24s} N={row['n']:4d} {row['rate']:6.0f}/s {row['cpu_ns_per_input'] / 1e3:8.1f} us/input "
         f"{'ok' if row['ok'] else 'LOST'}")
    if row.get("error"):
        s += f" ERROR {row['error'][:200]}"
    elif not row["ok"]:
        s += (f" (delivered {row['delivered']}/{row['due']}, exact ports {row['ports_exact']}/{row['n']}, "
              f"drops: input {row['drops_input']}, receivers {row['drops_receivers']}, "
              f"sndbuf {row['sndbuf_errors']}; {(row['replicator_warnings'] or [''])[-1][:120]})")
    return s


# ---- 1: CPU per input datagram ---------------------------------------------------------------

def cpu_table(rl, methods, points, reps, workdir, rows):
    for rep in range(reps):
        order = methods[rep % len(methods):] + methods[:rep % len(methods)]   # who goes first rotates
        for n, (rate, exp, secs) in points:
            for m in order:
                for attempt in (0, 1):   # a run with loss is tried once more (other jobs here)
                    r = safe_run(rl, m, n, rate, exp, secs, workdir)
                    r.update(rep=rep, part="cpu", attempt=attempt)
                    rows.append(r)
                    log(f"  cpu rep {rep} " + describe(r))
                    if r["ok"]:
                        break


def cpu_medians(rows, methods, points):
    med = {}
    for n, (rate, _, _) in points:
        for m in methods:
            rs = [r for r in rows if r["part"] == "cpu" and r["n"] == n and r["rate"] == rate
                  and r["method"] == m.name]
            ok = [r["cpu_ns_per_input"] for r in rs if r["ok"]]
            lossy = [r["cpu_ns_per_input"] for r in rs if not r["ok"]]
            soft = [r["cpu0_softirq_ns_per_input"] for r in rs if r["ok"]]
            med[(n, rate, m.name)] = {
                "median": statistics.median(ok) if ok else None, "min": min(ok, default=None),
                "max": max(ok, default=None), "runs": len(rs), "lost_runs": len(lossy),
                "lossy_median": statistics.median(lossy) if lossy else None,
                "softirq_median": statistics.median(soft) if soft else None}
    return med


# ---- 2: the highest lossless rate ------------------------------------------------------------

def search(rl, methods, n, exporters, start, cap, seconds, bisections, workdir, rows):
    """Per method: double from `start` until a rate does not hold (or `cap`,
    or the producer falls short), then bisect; methods step in turn."""
    st = {m.name: {"ok": None, "bad": None, "next": start, "left": bisections, "note": "", "done": False,
                   "limited": False, "limit": None} for m in methods}

    def probe(m, rate):
        for attempt in (0, 1):
            r = safe_run(rl, m, n, rate, exporters, seconds, workdir)
            r.update(part="search", attempt=attempt)
            rows.append(r)
            log(f"  search " + describe(r))
            if r["ok"]:
                return True, r
        return False, r

    while not all(s["done"] for s in st.values()):
        for m in methods:
            s = st[m.name]
            if s["done"]:
                continue
            rate = s["next"]
            held, r = probe(m, rate)
            # What the replicator was given: the producer's achieved rate, never
            # more than asked.  A rate the producer did not reach is not held.
            sent = int(min(rate, r["producer_rate"])) if r["producer_rate"] else rate
            short = r["producer_rate"] is not None and r["producer_rate"] < 0.95 * rate
            if held and short:   # the producer, not the replicator, set the pace
                s["ok"], s["done"], s["limited"] = max(s["ok"] or 0, sent), True, True
                s["note"] = f"producer-limited (sent {r['producer_rate']:.0f}/s of {rate}/s)"
                continue
            if held:
                s["ok"] = max(s["ok"] or 0, sent)
            else:
                # the loss happened at the rate the producer reached: bisect below that
                s["bad"] = sent
                s["limit"] = {k: r.get(k) for k in ("drops_input", "drops_receivers", "sndbuf_errors", "lost",
                                                    "cpu1_busy_frac_sending", "sinks_cpu_frac_sending")}
                if r.get("error"):
                    s["note"] = r["error"][:200]
                elif not r["drops_input"] and r["drops_receivers"]:
                    s["note"] = "loss at the receivers' sockets (the lab's limit)"
                elif r["drops_input"]:
                    s["note"] = "loss at the replicator's input"
                elif r["delivered"] > r["due"]:
                    s["note"] = "more copies than sent"
                else:
                    s["note"] = "copies lost inside the replicator (no socket dropped any)" + (
                        ": " + r["replicator_warnings"][-1].split("): ", 1)[-1] if r["replicator_warnings"] else "")
            if s["bad"] is None:
                if rate * 2 > cap:
                    s["done"], s["note"] = True, f"held up to the cap ({cap}/s)"
                else:
                    s["next"] = rate * 2
            elif s["ok"] is None and rate <= start / 8:
                s["done"], s["note"] = True, "lost even at the lowest rate tried"
            elif s["ok"] is None:
                s["next"] = rate // 2
            elif s["left"] == 0:
                s["done"] = True
            else:
                s["left"] -= 1
                s["next"] = int(math.sqrt(s["ok"] * s["bad"]))
    return {k: {"held": v["ok"], "lost_at": v["bad"], "note": v["note"],
                "producer_limited": v["limited"], "loss": v["limit"]} for k, v in st.items()}


# ---- output ----------------------------------------------------------------------------------

def fmt_us(v):
    return "lost" if v is None else f"{v / 1e3:.1f}"


def write_results(a, out, methods, points, med, lossless, rows, facts, elapsed):
    relays = [m for m in methods if m.kind == "relay"]
    peers = [m for m in methods if m.kind != "relay"]
    lines = ["# Issue 24: the relay against samplicator and pmacct tee at every operating point", "",
             f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {facts.get('cpu', '?')} "
             f"× {facts['cpus']}, kernel {facts['kernel']}; {elapsed / 60:.0f} min. "
             "Relay builds measured: " + ", ".join(f"`{m.name}`" for m in relays) +
             " (`--engine auto`; each relay cell names the engine its `--query` gives as resolved after the "
             "run, or `per datagram` where the query says AUTO chooses per datagram (its `batching`, with the "
             "library's counters of the copies, is in raw.json)); "
             "`relay [branch]@C` is a Release build of commit C (`BUILD-OF-C` in the command: that commit's "
             "tree, `cmake -DCMAKE_BUILD_TYPE=Release`), in the same run and rounds as the peers; "
             "`+dirty`: with uncommitted changes.", "",
             "Command:", "", "```", command_line(a, methods), "```", "",
             "Peers: " + "; ".join(peer_versions(a, peers)) + ".", "",
             "What is measured and how: the docstring of `bench/relay_points.py`. "
             "Machine: 2 vCPUs shared with other jobs, so single runs are noisy; every figure is a median "
             "over interleaved rounds and every ratio compares runs of the same rounds.", "",
             "## CPU per input datagram (µs, median of "
             f"{a.reps} rounds; range in brackets)", "",
             "NetFlow v5, 984 B; every copy checked byte for byte. A run with loss is left out and tried "
             "once more; `[k/m runs lost]` counts them, and `lost` means no run was lossless (then the "
             "median CPU of the lossy runs per datagram sent is given, for what it is worth: a replicator "
             "that drops input spends nothing on what it dropped).", ""]
    head = "| receivers | input | " + " | ".join(m.name for m in peers + relays)
    head += "".join(f" | {m.name} ÷ better peer" for m in relays) + " | target |"
    lines += [head, "|" + "---|" * (2 + len(peers) + 2 * len(relays) + 1)]
    for n, (rate, exp, _) in points:
        cells = []
        for m in peers + relays:
            v = med[(n, rate, m.name)]
            c = fmt_us(v["median"])
            if v["median"] is not None:
                c += f" ({v['min'] / 1e3:.1f}–{v['max'] / 1e3:.1f})"
            if v["lost_runs"]:
                c += f" [{v['lost_runs']}/{v['runs']} runs lost"
                c += f": {v['lossy_median'] / 1e3:.1f} per datagram sent]" if v["median"] is None else "]"
            if m.kind == "relay":
                engines = sorted({("per datagram" if "batching" in r["query"] else r["engine"] or "?")
                                  for r in rows if r["part"] == "cpu" and r["n"] == n
                                  and r["rate"] == rate and r["method"] == m.name})
                c += " `" + "/".join(engines) + "`"
            cells.append(c)
        best = min((med[(n, rate, p.name)]["median"] for p in peers
                    if med[(n, rate, p.name)]["median"] is not None), default=None)
        tgt = target_for(n, rate)
        for m in relays:
            v = med[(n, rate, m.name)]["median"]
            if best and v:
                ratio = v / best
                met = "" if not tgt else (" ✓" if ratio <= tgt[1] else " ✗")
                cells.append(f"**{ratio:.2f}×**{met}")
            else:
                cells.append("–")
        inp = f"{rate:,}/s" + (f" from {exp} exporters" if exp > 1 else "")
        lines.append(f"| {n} | {inp} | " + " | ".join(cells) + f" | {tgt[0] if tgt else '–'} |")
    lines += ["", "Targets (issue 24 item 4): relay ≤ 0.4× the better peer at 20,000/s and N = 2, 10; "
              "≤ 1.0× at 100/s and N = 1–10; ≥ 5× less (≤ 0.2×) at N = 1000. ✓/✗: the median ratio "
              "against the target.", "", "![CPU per input datagram](cpu_vs_receivers.png)" if points else "", ""]
    high = [(n, rate) for n, (rate, _, _) in points if rate >= HIGH[0]]
    if high:
        lines += ["What the table leaves out: kernel work a replicator causes outside its own process time "
                  "(softirq: receiving its input, which is the same for all, and whatever its sends defer). "
                  "CPU 0's softirq time per input datagram over the same runs (µs, median; /proc/stat, "
                  "10 ms ticks, so only the 20,000/s points are resolved; other jobs on CPU 0 add to it):", "",
                  "| receivers | " + " | ".join(m.name for m in peers + relays) + " |",
                  "|" + "---|" * (1 + len(peers) + len(relays))]
        for n, rate in high:
            lines.append(f"| {n} | " + " | ".join(fmt_us(med[(n, rate, m.name)]["softirq_median"])
                                                   for m in peers + relays) + " |")
        lines.append("")
    if lossless:
        lines += ["## Highest input rate held without loss (datagrams/s, 8 exporters)", "",
                  f"Method: runs of {a.probe_seconds} s; from {a.search_start:,}/s doubling until a rate "
                  f"loses a copy (a run with loss is tried once more), up to {a.search_cap:,}/s, then "
                  f"{a.bisections} bisections (geometric mean) between the highest rate that held and the lowest "
                  "that did not; so the true limit lies between *held* and *lost at*. Both are the rates the "
                  "producer reached (never more than asked): a rate it did not reach is not held. "
                  "`≥`: the producer could not send faster (producer-limited), so the replicator's limit was not "
                  "found; a ratio with `≥` (or `≤`, where the peer was producer-limited) is a bound, and `?` "
                  "means the bound does not settle the target. Producer: "
                  + ", ".join(sorted({r.get("producer", "relaytool.py nf5") for r in rows if r["part"] == "search"}))
                  + ". Where a search ended in loss, the notes say where the copies were lost, with CPU 1's "
                  "busy share (producer, sinks and the receivers' softirq work) and the sinks' share of it "
                  "while the producer sent.", "",
                  "| receivers | " + " | ".join(f"{m.name} held (lost at)" for m in peers + relays) +
                  "".join(f" | {m.name} ÷ better peer" for m in relays) + " | notes |",
                  "|" + "---|" * (1 + len(peers) + 2 * len(relays) + 1)]
        for n, res in lossless.items():
            cells, notes = [], []
            for m in peers + relays:
                v = res[m.name]
                cells.append(("≥ " if v.get("producer_limited") else "") + f"{v['held'] or 0:,}" +
                             (f" ({v['lost_at']:,})" if v["lost_at"] else ""))
                note = v["note"]
                loss = v.get("loss") or {}
                if note and not v.get("producer_limited") and loss.get("cpu1_busy_frac_sending") is not None:
                    note += (f" (at {v['lost_at']:,}/s: CPU 1 {loss['cpu1_busy_frac_sending']:.0%} busy, "
                             f"sinks {loss['sinks_cpu_frac_sending']:.0%})")
                if note:
                    notes.append(f"{m.name}: {note}")
            top = max((p for p in peers), key=lambda p: res[p.name]["held"] or 0, default=None)
            best = res[top.name]["held"] or 0 if top else 0
            for m in relays:
                h = res[m.name]["held"] or 0
                cells.append(ratio_cell(h, best, res[m.name].get("producer_limited"),
                                        top is not None and res[top.name].get("producer_limited")))
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {'; '.join(notes)} |")
        lines += ["", "Target: the relay's highest lossless rate ≥ 2× the better peer's.", ""]
    lines += ["Files: `raw.json` (every run: CPU, copies delivered and checked, drops at the replicator's "
              "input and at the receivers, the producer's actual rate), `rows.csv`.", ""]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))
    return lines


def ratio_cell(relay, peer, relay_limited, peer_limited, target=2.0):
    """The relay's lossless rate over the better peer's, against the target;
    a producer-limited side makes the ratio a bound, and a bound that does not
    decide the target gets `?`, never ✓ or ✗."""
    if not peer:
        return "–"
    r = relay / peer
    if relay_limited and peer_limited:
        return f"**{r:.2f}×** ?"
    if relay_limited:
        return f"**≥ {r:.2f}×** " + ("✓" if r >= target else "?")
    if peer_limited:
        return f"**≤ {r:.2f}×** " + ("✗" if r < target else "?")
    return f"**{r:.2f}×** " + ("✓" if r >= target else "✗")


def peer_versions(a, peers):
    out = []
    for m in peers:
        if m.kind == "samplicator":
            out.append(f"samplicator {a.samplicator_version or '(version not given)'}")
        else:
            v = subprocess.run([m.path, "-V"], capture_output=True, text=True).stdout.strip().splitlines()
            deb = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "pmacct"], capture_output=True,
                                 text=True).stdout.strip()
            out.append(f"pmacct: {v[0] if v else m.path}" + (f" (Debian package {deb})" if deb else ""))
    return out or ["none"]


def command_line(a, methods=()):
    """The command as run, with this machine's paths outside the checkout
    named for what they are (a samplicate binary, a build of commit X)."""
    names = {a.samplicator: "PATH/TO/samplicate"}
    for m in methods:
        if m.kind == "relay" and not os.path.abspath(m.build).startswith(gcbench.ROOT + "/"):
            commit = m.name.split("@", 1)[1]
            names.update({x: x.replace(m.build, f"BUILD-OF-{commit}") for x in sys.argv[1:]
                          if x.partition("=")[0] == m.build})
    return "sudo python3 bench/relay_points.py " + shlex.join(names.get(x, x) for x in sys.argv[1:])


def draw(out, methods, points, med, reps):
    if not points:
        return
    try:
        plt = plot.pyplot()
    except ImportError:
        log("matplotlib missing: no plot")
        return
    rates = sorted({rate for _, (rate, _, _) in points})
    fig, axes = plt.subplots(1, len(rates), figsize=(5.5 * len(rates), 4.2), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        ns = [n for n, (r, _, _) in points if r == rate]
        for m in methods:
            ys = [med[(n, rate, m.name)]["median"] for n in ns]
            ax.plot(ns, [y / 1e3 if y else float("nan") for y in ys], marker="o", label=m.name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("receivers (N)")
        ax.set_ylabel("replicator CPU per input datagram (µs)")
        exp = [e for _, (r, e, _) in points if r == rate][0]
        ax.set_title(f"{rate:,}/s from {exp} exporter{'s' if exp > 1 else ''} (median of {reps})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    plot.save(fig, os.path.join(out, "cpu_vs_receivers.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"),
                    help="build whose `groupcast sink` checks the copies (and whose relay runs, without --relay)")
    ap.add_argument("--relay", action="append", default=[],
                    help="a build directory whose relay to measure, DIR or DIR=BRANCH (repeatable: each is "
                         "one column, named relay [BRANCH]@COMMIT)")
    ap.add_argument("--samplicator", help="path to a samplicate binary you built")
    ap.add_argument("--samplicator-version", default="",
                    help="what the samplicate binary is (e.g. upstream commit), for the results")
    ap.add_argument("--nfacctd", default="/usr/sbin/nfacctd", help="pmacct's nfacctd (Debian package pmacct)")
    ap.add_argument("--peers", default="samplicator,pmacct", help="peers to run (comma-separated; none: '')")
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-points"))
    ap.add_argument("--n-low", default="1,2,5,10,100,1000", help="receivers at 100/s from one exporter")
    ap.add_argument("--n-high", default="1,2,5,10", help="receivers at 20,000/s from 8 exporters")
    ap.add_argument("--seconds-low", type=float, default=4)
    ap.add_argument("--seconds-high", type=float, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--search-n", default="2,10", help="receivers for the lossless-rate search ('' skips it)")
    ap.add_argument("--search-start", type=int, default=10000)
    ap.add_argument("--search-cap", type=int, default=160000)
    ap.add_argument("--bisections", type=int, default=3)
    ap.add_argument("--probe-seconds", type=float, default=2)
    ap.add_argument("--quick", action="store_true",
                    help="one point (N=2, 2,000/s from 8 exporters, 1 s), one round, no search: checks the driver")
    a = ap.parse_args()
    if a.quick:
        a.n_low, a.n_high, a.reps, a.search_n, a.seconds_high = "", "2", 1, "", 1
    peers = [p for p in a.peers.split(",") if p]
    methods = []
    for p in peers:
        if p == "samplicator":
            if not a.samplicator or not os.access(a.samplicator, os.X_OK):
                sys.exit(f"--samplicator: {a.samplicator!r} is not an executable (build it from its upstream source)")
            methods.append(Samplicator(a.samplicator))
        elif p == "pmacct":
            if not os.access(a.nfacctd, os.X_OK):
                sys.exit(f"--nfacctd: {a.nfacctd!r} is not an executable (Debian: apt-get install pmacct)")
            methods.append(Nfacctd(a.nfacctd))
        else:
            sys.exit(f"--peers: unknown peer {p!r} (samplicator, pmacct)")
    for b in a.relay or [a.build]:
        methods.append(Relay(b))
    if len({m.name for m in methods}) != len(methods):
        sys.exit("--relay: two builds of the same commit; nothing to tell apart")
    high_rate = 2000 if a.quick else HIGH[0]
    points = [(int(n), (LOW[0], LOW[1], a.seconds_low)) for n in a.n_low.split(",") if n]
    points += [(int(n), (high_rate, HIGH[1], a.seconds_high)) for n in a.n_high.split(",") if n]
    search_n = [int(n) for n in a.search_n.split(",") if n]
    gcbench.tool(a.build)   # the sinks' binary must exist
    log(f"relay_points: {[m.name for m in methods]}, points {points}, {a.reps} rounds, search at N={search_n}")
    t0 = time.monotonic()
    rows, lossless = [], {}
    os.makedirs(a.out, exist_ok=True)
    lab, rl = relaylab.make(a.build, 2)
    with lab:
        workdir = lab.workdir()
        rl.producer_nf5 = Producer(a.build, workdir)
        cpu_table(rl, methods, points, a.reps, workdir, rows)
        for n in search_n:
            lossless[n] = search(rl, methods, n, HIGH[1], a.search_start, a.search_cap, a.probe_seconds,
                                 a.bisections, workdir, rows)
    med = cpu_medians(rows, methods, points)
    facts = report.machine_facts()
    elapsed = time.monotonic() - t0
    report.write_json(os.path.join(a.out, "raw.json"), {
        "args": dict(vars(a), samplicator="samplicate" if a.samplicator else None,
                     relay=[m.name for m in methods if m.kind == "relay"]),
        "command": command_line(a, methods), "facts": facts, "python": platform.python_version(),
        "rows": rows, "medians": [{"n": k[0], "rate": k[1], "method": k[2], **v} for k, v in med.items()],
        "lossless": {str(n): v for n, v in lossless.items()}, "elapsed_s": elapsed})
    keys = list(dict.fromkeys(k for r in rows for k in r))
    report.write_dicts_csv(os.path.join(a.out, "rows.csv"), rows, keys)
    lines = write_results(a, a.out, methods, points, med, lossless, rows, facts, elapsed)
    draw(a.out, methods, points, med, a.reps)
    report.portable(a.out)
    print("\n".join(lines))
    return 0 if all(v["median"] is not None for v in med.values()) else 1   # 1: a point never ran lossless


if __name__ == "__main__":
    sys.exit(main())
