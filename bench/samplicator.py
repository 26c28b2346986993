#!/usr/bin/env python3
"""S1: groupcast relay against samplicator, the program it replaces.

The same samplicator command line runs twice per repetition, once under
samplicator itself and once under `groupcast relay` with each engine, in the
same lab and interleaved (S R1 R2 S R1 R2 ...).  What is measured:

- CPU per input datagram of the replicating process: the sum of its threads'
  run time from /proc/PID/task/*/schedstat (ns), read before the producer
  starts and after the last datagram reached every receiver;
- whole-machine busy time over the same interval (/proc/stat), so that work
  moved to a kernel thread or to the other CPU is not taken for work saved;
- delivery: every receiver port counts what it got (`groupcast sink`); a run
  with any datagram missing is reported as lost, never averaged in.

The replicator runs on CPU 0 (taskset) and receives its input there (RPS);
receivers and the producer run on CPU 1.  Medians over --reps.

samplicator is not packaged by Debian and is not part of this project: build
it from its upstream source yourself and pass --samplicator PATH.  Results
and the command go to bench/results/samplicator/.
"""
import argparse
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
from gcbench import analyse, plot, report  # noqa: E402
from gcbench.run import log, machine_busy, task_cpu_ns  # noqa: E402
from relaylab import wait_bound, wait_idle  # noqa: E402

IN_PORT = 2055


def one_run(rl, method, argv_tail, n, rate, count, size):
    """One measured run; returns a row dict."""
    lab = rl.lab
    sinks = rl.start_sinks(n, count, idle_ms=3000)
    argv = ["taskset", "-c", "0", *method["argv"], "-p", IN_PORT, *argv_tail]
    proc = lab.popen(rl.relay_ns, argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_bound(lab, rl.relay_ns, IN_PORT, proc)
        wait_idle(proc.pid)
        c0, b0, w0 = task_cpu_ns(proc.pid), machine_busy(), time.monotonic()
        tx = lab.popen(rl.p_ns, ["taskset", "-c", "1", sys.executable, relaylab.TOOL, "tx", "--to",
                                 f"{rl.relay_addr}:{IN_PORT}", "--count", count, "--rate", rate,
                                 "--size", size], stdout=subprocess.PIPE, text=True)
        tx.communicate(timeout=count / rate * 5 + 60)
        res = rl.finish_sinks(sinks)  # each exits once it has all it is due, or after 3 s of quiet
        c1, b1, w1 = task_cpu_ns(proc.pid), machine_busy(), time.monotonic()
    finally:
        rl.stop(proc)
    got = sum(s["received"] for s in res)
    return {
        "method": method["name"], "n": n, "rate": rate, "size": size, "sent": count,
        "cpu_ns": c1 - c0, "cpu_ns_per_input": (c1 - c0) / count,
        "cpu_ns_per_copy": (c1 - c0) / (count * n),
        "machine_busy_frac": (b1[0] - b0[0]) / max(1, b1[1] - b0[1]), "wall_s": w1 - w0,
        "delivered": got, "due": n * count, "lost": n * count - got,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--samplicator", required=True, help="path to a samplicate binary you built")
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "samplicator"))
    ap.add_argument("--engines", default="loop,mmsg,auto", help="relay engines to run beside samplicator")
    ap.add_argument("--sizes", default="10,100,1000", help="receivers per run")
    ap.add_argument("--rate", type=int, default=100, help="input datagrams per second")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--size", type=int, default=1000, help="input datagram bytes")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a short run to check the driver")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.reps, a.seconds = "10,100", 1, 1.0
    if not os.access(a.samplicator, os.X_OK):
        sys.exit(f"--samplicator: {a.samplicator} is not an executable")
    t_start = time.monotonic()
    bin_ = gcbench.tool(a.build)
    info = gcbench.engines_available(a.build)
    methods = [{"name": "samplicator", "argv": [os.path.abspath(a.samplicator)]}]
    for e in a.engines.split(","):
        name = f"relay-{info['auto']}(auto)" if e == "auto" else f"relay-{e}"
        methods.append({"name": name, "argv": [bin_, "relay", "--engine", e]})
    sizes = [int(x) for x in a.sizes.split(",")]
    count = max(1, int(a.rate * a.seconds))
    log(f"S1: {[m['name'] for m in methods]}, N={sizes}, {a.rate}/s x {a.seconds} s, {a.size} B, {a.reps} reps")
    rows = []
    lab, rl = relaylab.make(a.build, 2)
    with lab:
        for n in sizes:
            tail = rl.receivers_argv(n)
            for rep in range(a.reps):
                for m in methods:
                    row = one_run(rl, m, tail, n, a.rate, count, a.size)
                    row["rep"] = rep
                    rows.append(row)
                    log(f"  N={n:5d} rep {rep} {m['name']:22s} {row['cpu_ns_per_input'] / 1e3:9.1f} us/input"
                        f"  {row['cpu_ns_per_copy']:7.0f} ns/copy  lost {row['lost']}")

    med = {}
    for n in sizes:
        for m in methods:
            rs = [r for r in rows if r["n"] == n and r["method"] == m["name"]]
            ok = [r for r in rs if r["lost"] == 0]
            mid, lo, hi = analyse.spread(r["cpu_ns_per_input"] for r in ok)
            med[(n, m["name"])] = {"cpu_ns_per_input": mid, "min": lo, "max": hi,
                                   "runs": len(rs), "lost_runs": len(rs) - len(ok)}
    os.makedirs(a.out, exist_ok=True)
    facts = report.machine_facts()
    args = dict(vars(a), samplicator="samplicate")  # where it was built is this machine's business
    report.write_json(os.path.join(a.out, "raw.json"),
                      {"rows": rows, "args": args, "facts": facts,
                       "medians": [{"n": k[0], "method": k[1], **v} for k, v in med.items()]})
    report.write_dicts_csv(os.path.join(a.out, "rows.csv"), rows)
    lines = ["# S1: groupcast relay against samplicator", "",
             f"Input: {a.rate} datagrams/s of {a.size} B for {a.seconds} s, replicated to N receivers "
             f"(two receiver namespaces); the replicator on CPU 0. Median of {a.reps} interleaved reps of the "
             "replicator's own CPU (all threads, schedstat) per input datagram; runs with any loss are left out "
             "and counted.", "",
             "| N | " + " | ".join(m["name"] for m in methods) + " | samplicator / best relay |",
             "|---|" + "---|" * (len(methods) + 1)]
    for n in sizes:
        cells, base = [], med[(n, "samplicator")]["cpu_ns_per_input"]
        relay_best = min((med[(n, m["name"])]["cpu_ns_per_input"] for m in methods[1:]
                          if med[(n, m["name"])]["cpu_ns_per_input"]), default=None)
        for m in methods:
            v = med[(n, m["name"])]
            c = "lost" if v["cpu_ns_per_input"] is None else f"{v['cpu_ns_per_input'] / 1e3:.1f} µs"
            if v["lost_runs"]:
                c += f" ({v['lost_runs']}/{v['runs']} runs lost)"
            cells.append(c)
        ratio = f"{base / relay_best:.2f}×" if base and relay_best else "–"
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {ratio} |")
    lines += ["", f"Machine: {facts.get('cpu', '?')} x {facts['cpus']}, kernel {facts['kernel']}. "
              f"Elapsed {time.monotonic() - t_start:.0f} s.", ""]
    with open(os.path.join(a.out, "results.md"), "w") as fo:
        fo.write("\n".join(lines))
    with open(os.path.join(a.out, "command.txt"), "w") as fo:
        fo.write("python3 " + " ".join(x if x != a.samplicator else "PATH/TO/samplicate" for x in sys.argv) +
                 "\n\n")
        fo.write(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\nkernel: {facts['kernel']}\n"
                 f"python: {platform.python_version()}\nAUTO -> {info['auto']}\n"
                 f"replicators: taskset -c 0 {{samplicate | groupcast relay --engine E}} -p {IN_PORT} "
                 f"ADDR/PORT x N\nproducer: tests/e2e/relaytool.py tx --rate {a.rate} --size {a.size}, on CPU 1\n")
    try:
        plt = plot.pyplot()
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in methods:
            ys = [med[(n, m["name"])]["cpu_ns_per_input"] for n in sizes]
            ax.plot(sizes, [y / 1e3 if y else float("nan") for y in ys], marker="o", label=m["name"])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("receivers")
        ax.set_ylabel("replicator CPU per input datagram (µs)")
        ax.set_title(f"samplicator vs groupcast relay ({a.size} B, median of {a.reps})")
        ax.legend()
        plot.save(fig, os.path.join(a.out, "cpu_vs_receivers.png"))
    except ImportError:
        log("matplotlib missing: no plot")
    report.portable(a.out)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
