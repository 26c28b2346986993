#!/usr/bin/env python3
"""Issue 21 item 4, Python: a loop of sock.sendto() over the members against
one groupcast.Group.send() (bindings/python), N = 1000 members, 1000-byte
payload, process CPU per group send, methods interleaved in one run.

    sudo python3 bench/bindings_python.py [--build build] [--reps 7] [--sends 200] [--quick]

The lab is group.py's (gcbench.make_lab): the sender runs in namespace s
pinned to CPU 0 (taskset), receive work is steered to CPU 1, and `groupcast
sink` in r1 and r2 (500 ports each, CPU 1) counts every datagram: a run in
which any datagram is missing is reported as LOST and has no figure.

One sender process runs every method in turn, rotating the order each
repetition (A B C, B C A, ...): `sendto` (a Python for loop calling
sock.sendto((host, port)) per member), then Group.send with the engines
`mmsg` and `kernel` (what AUTO takes as root).  A method's figure per
repetition is time.process_time_ns() (user + system CPU of the process,
CLOCK_PROCESS_CPUTIME_ID) over --sends group sends, divided by --sends; the
sends are paced (--interval-us, sleeping does not count) so the receivers
keep up.  Medians over the repetitions; ratios are per repetition, sendto
over the method, same repetition, then their median.  Results in
bench/results/bindings/python-* (results.md, raw.json, command.txt, a plot).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gcbench import plot, report  # noqa: E402
from gcbench.run import PORT_BASE, ROOT, log, make_lab, tool  # noqa: E402

METHODS = ["sendto", "mmsg", "kernel"]

SENDER = r"""
import json, socket, sys, time
import groupcast
n_per, hosts, size, sends, reps, interval, methods = json.loads(sys.argv[1])
members = [(h, PORT_BASE + i) for h in hosts for i in range(n_per)]
payload = bytes(i & 0xFF for i in range(size))
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
group = groupcast.Group(sock)
group.set(members)

def run(method, count):
    sendto = sock.sendto
    if method != "sendto":
        group.engine = groupcast.Engine[method.upper()]
        assert group.engine.libname == method, group.engine
    t0 = time.process_time_ns()
    for k in range(count):
        if method == "sendto":
            for m in members:
                sendto(payload, m)
        else:
            group.send(payload)
        if interval:
            time.sleep(interval)
    return time.process_time_ns() - t0

for m in methods:          # warm-up: the kernel engine attaches its program on its first send
    run(m, 2)
for rep in range(reps):
    order = methods[rep % len(methods):] + methods[:rep % len(methods)]
    for m in order:
        ns = run(m, sends)
        print(json.dumps({"rep": rep, "method": m, "cpu_ns": ns, "sends": sends, "cpu_ns_per_send": ns / sends}),
              flush=True)
st = group.stats()
print(json.dumps({"failed": st.failed, "datagrams": st.datagrams}), flush=True)
""".replace("PORT_BASE", str(PORT_BASE))


def measure(args, lab, star):
    n_per = args.n // len(star.receivers)
    per_run = len(METHODS) * (2 + args.reps * args.sends)    # sends, warm-up included, to each member
    sinks = []
    for r in star.receivers:
        ready = os.path.join(lab.workdir(), f"{r.ns}.ready")
        argv = [tool(args.build), "sink", "--addr", r.v4, "--port-base", PORT_BASE, "--count", n_per,
                "--expect", n_per * per_run, "--idle-ms", 10000, "--ready-file", ready, "--cpu", 1]
        sinks.append((lab.popen(r.ns, [str(a) for a in argv], stdout=subprocess.PIPE, text=True), ready))
    for p, ready in sinks:
        end = time.monotonic() + 20
        while not os.path.exists(ready):
            if p.poll() is not None or time.monotonic() > end:
                raise RuntimeError("sink did not start")
            time.sleep(0.02)
    cfg = [n_per, [r.v4 for r in star.receivers], args.size, args.sends, args.reps, args.interval_us / 1e6,
           METHODS]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings/python/src"),
               GROUPCAST_LIB=os.path.join(os.path.abspath(args.build), "libgroupcast.so.1"))
    argv = ["taskset", "-c", "0", sys.executable, "-c", SENDER, json.dumps(cfg)]
    out = lab.run(star.sender, argv, capture_output=True, text=True, env=env, check=False, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"sender failed: {out.stderr}")
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    rows, tail = lines[:-1], lines[-1]
    counts = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p, _ in sinks]
    due = n_per * per_run * len(sinks)
    received = sum(c["received"] for c in counts)
    return rows, {"due": due, "received": received, "sinks": counts, "sender": tail,
                  "lost": due - received, "argv": argv[:4] + ["SENDER", json.dumps(cfg)]}


def analyse(rows, delivery):
    by = {m: {r["rep"]: r["cpu_ns_per_send"] for r in rows if r["method"] == m} for m in METHODS}
    ok = delivery["lost"] == 0 and delivery["sender"]["failed"] == 0
    out = {"ok": ok, "methods": {}}
    for m in METHODS:
        v = list(by[m].values())
        ratios = [by["sendto"][k] / by[m][k] for k in by[m]]
        out["methods"][m] = {"median_ns": statistics.median(v), "min_ns": min(v), "max_ns": max(v),
                             "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                             "ratio_max": max(ratios)}
    return out


def write(args, outdir, rows, delivery, res, elapsed):
    os.makedirs(outdir, exist_ok=True)
    pre = os.path.join(outdir, "python-")
    report.write_json(pre + "raw.json", {"rows": rows, "delivery": delivery, "analysis": res,
                                         "machine": report.machine_facts(True), "commit": report.git_commit()})
    with open(pre + "command.txt", "w") as f:
        f.write(f"sudo {report.command_line()}\n# {elapsed:.0f} s; commit {report.git_commit()}\n")
    table = [[m, f"{s['median_ns'] / 1e3:.1f}", f"{s['min_ns'] / 1e3:.1f} - {s['max_ns'] / 1e3:.1f}",
              f"{s['ratio_median']:.2f}x", f"{s['ratio_min']:.2f} - {s['ratio_max']:.2f}"]
             for m, s in res["methods"].items()]
    label = {"sendto": "sock.sendto() loop", "mmsg": "Group.send, mmsg", "kernel": "Group.send, kernel"}
    for t in table:
        t[0] = label[t[0]]
    facts = report.machine_facts()
    verdict = ("every datagram arrived" if res["ok"] else
               f"LOST: {delivery['lost']} of {delivery['due']} datagrams missing, "
               f"{delivery['sender']['failed']} failed: these figures are not valid")
    md = [f"# Python: sock.sendto() loop against groupcast.Group.send, N = {args.n}, {args.size} B",
          "", f"`sudo {report.command_line()}` ({elapsed:.0f} s), {facts.get('cpu', '?')}, {facts['cpus']} CPUs, "
          f"Linux {facts['kernel']}; {args.reps} repetitions of {args.sends} group sends per method, "
          f"interleaved; delivery: {verdict} ({delivery['received']} of {delivery['due']}).", "",
          report.md_table(["method", "process CPU per group send, us (median)", "range", "sendto / method",
                           "range"], table), "",
          "Process CPU is user + system time of the sender process (time.process_time_ns), which includes the",
          "softirq work of the veth transmit that runs on its CPU.  Ratios are taken per repetition (the",
          "methods of one repetition ran back to back) and their median is shown.", "",
          "![python-cpu.png](python-cpu.png)"]
    with open(pre + "results.md", "w") as f:
        f.write("\n".join(md) + "\n")
    try:
        plt = plot.pyplot()
    except ImportError:
        log("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, m in enumerate(METHODS):
        v = [r["cpu_ns_per_send"] / 1e3 for r in rows if r["method"] == m]
        ax.bar(i, res["methods"][m]["median_ns"] / 1e3, color=plot.ENGINE_COLORS.get(m, "grey"), alpha=0.6)
        ax.plot([i] * len(v), v, "k.", ms=4)
        ax.annotate(f"{res['methods'][m]['ratio_median']:.1f}x less" if m != "sendto" else "baseline",
                    (i, res["methods"][m]["median_ns"] / 1e3), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(METHODS)), [label[m] for m in METHODS], fontsize=8)
    ax.set_ylabel("process CPU per group send (us)")
    ax.set_title(f"Python, N={args.n}, {args.size} B: median of {args.reps} (dots: each repetition)", fontsize=9)
    plot.save(fig, pre + "cpu.png")
    report.portable(outdir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sends", type=int, default=200)
    ap.add_argument("--interval-us", type=int, default=4000)
    ap.add_argument("--quick", action="store_true", help="3 reps of 10 sends: checks that it runs")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/bindings"))
    args = ap.parse_args()
    if args.quick:
        args.reps, args.sends = 3, 10
    t0 = time.monotonic()
    lab, star = make_lab(2)
    with lab:
        rows, delivery = measure(args, lab, star)
    res = analyse(rows, delivery)
    write(args, args.out, rows, delivery, res, time.monotonic() - t0)
    for m, s in res["methods"].items():
        log(f"{m:8s} {s['median_ns'] / 1e3:9.1f} us per group send   sendto/{m} = {s['ratio_median']:.2f}")
    log(f"delivery: {delivery['received']} of {delivery['due']}; results in {args.out}")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
