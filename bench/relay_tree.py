#!/usr/bin/env python3
"""The relay tree at 10,000 receivers (issue 23 items 5 and 6).

    sudo python3 bench/relay_tree.py [--build build] [--out bench/results/relay-tree]
         [--receivers 10000] [--rate 20] [--seconds 10] [--reps 3] [--variant pimd]

lab/tree.py's tree: an origin, a site of three routers (pimd, or smcroute),
four edge relays that --join the group, a second site reached by a unicast
cascade of two relays (c1 --upstream e1 then e2; c2 --upstream c1), the
receivers split evenly over the six relays, every relay on the kernel
engine.  Every receiver JOINs with the cookie handshake and its own SSRC;
lab/tree_rx.bpf.c checks each copy byte for byte at the receiver's ingress.

Measured, `--reps` runs of `--seconds` at `--rate` (medians, ranges):
- delivery: every receiver got every datagram, no bad copy (per run);
- latency per tier, p50 and p99, on one clock (bpf_ktime_get_ns at each
  tier's ingress; the origin writes CLOCK_MONOTONIC into the payload):
  site routing (origin -> edge input), each relay tier (its input -> its
  receivers' copies; its input -> the next relay's input);
- CPU per input datagram of each relay (its CLOCK_PROCESS_CPUTIME_ID);
- join rate: each receiver namespace's handshakes, six in parallel, timed
  by the joiner (window of 64 open handshakes);
then one run in which e1 (c1's upstream) is killed 2 s in: the gap c1's and
c2's receivers saw (longest time between two good copies; datagrams missed).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
from gcbench.run import machine_busy  # noqa: E402

sys.path.insert(0, os.path.join(gcbench.ROOT, "lab"))
from netlab import Lab  # noqa: E402
import tree  # noqa: E402

# (label, role, tier, kind) of lab/tree_rx.bpf.c's histograms
SEGMENTS = [
    ("site routing: origin -> edge relay input", "in", 1, "e2e"),
    ("edge relay: input -> its receivers", "rx", 1, "added"),
    ("edge relay e1: input -> c1 input (unicast via w)", "in", 2, "added"),
    ("cascade c1: input -> its receivers", "rx", 2, "added"),
    ("cascade c1: input -> c2 input", "in", 3, "added"),
    ("cascade c2: input -> its receivers", "rx", 3, "added"),
    ("end to end: origin -> edge receivers", "rx", 1, "e2e"),
    ("end to end: origin -> c1 receivers", "rx", 2, "e2e"),
    ("end to end: origin -> c2 receivers", "rx", 3, "e2e"),
]
BAD = ["bad_len", "bad_ssrc", "bad_payload", "bad_hdr", "gap", "dup", "rebase"]


def log(msg):
    print(msg, flush=True)


def hist_delta(h1, h0):
    return {k: [a - b for a, b in zip(v, h0.get(k, [0] * len(v)))] for k, v in h1.items()}


def one_run(tl, count, rate):
    h0 = tl.hist()
    b0 = machine_busy()
    res = tl.run(count, rate)
    b1 = machine_busy()
    h = hist_delta(tl.hist(), h0)
    res["machine_busy_frac"] = (b1[0] - b0[0]) / max(1, b1[1] - b0[1])
    res["latency_us"] = {}
    for label, role, tier, kind in SEGMENTS:
        v = h.get((role, tier, kind), [])
        res["latency_us"][label] = {"n": sum(v), "p50": tree.percentile(v, 0.5), "p99": tree.percentile(v, 0.99)}
    res["clean"] = all(p["complete"] == p["receivers"] for p in res["per_relay"].values()) and \
        all(c[k] == 0 for c in res["counters"].values() for k in BAD) and \
        all(s["errors"] == 0 for s in res["relays"].values())
    return res


def med(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)


def fmt(t, spec=".0f"):
    m, lo, hi = t
    return "n/a" if m is None else f"{m:{spec}} ({lo:{spec}}..{hi:{spec}})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-tree"))
    ap.add_argument("--receivers", type=int, default=10000)
    ap.add_argument("--rate", type=int, default=20, help="origin datagrams/s (1000 B RTP payload)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--variant", choices=["pimd", "smcroute"], default="pimd")
    ap.add_argument("--no-failover", action="store_true")
    ap.add_argument("--shared-cpus", action="store_true",
                    help="do not pin the relays to CPU 0 and steer the receivers' work to CPU 1")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.monotonic()
    count = int(a.rate * a.seconds)
    out = {"command": "python3 bench/relay_tree.py " + " ".join(sys.argv[1:]), "started": started,
           "kernel": platform.release(), "receivers": a.receivers, "rate": a.rate, "seconds": a.seconds,
           "variant": a.variant, "payload": tree.PAYLOAD, "split_cpus": not a.shared_cpus}
    with Lab() as lab:
        lab.set_sysctl("net.core.netdev_max_backlog", 20000)
        tl = tree.TreeLab(lab, a.build, receivers=a.receivers, variant=a.variant, split_cpus=not a.shared_cpus)
        try:
            log(f"building: {a.variant} site, {a.receivers} receivers over {len(tree.RELAYS)} relays")
            joined = tl.start()
            out["split"] = tl.split
            out["warm_up_seconds"] = tl.warm_seconds
            out["join"] = joined
            log(f"joined: {joined}")
            runs = []
            for rep in range(a.reps):
                r = one_run(tl, count, a.rate)
                runs.append(r)
                log(f"rep {rep}: clean={r['clean']} " + ", ".join(
                    f"{k}: {v['min']}/{count}" for k, v in r["per_relay"].items()))
            out["runs"] = runs
            if not a.no_failover:
                fo_count = int(a.rate * 6)

                def kill_e1(t):
                    time.sleep(2.0)
                    t.kill("e1")
                r = tl.run(fo_count, a.rate, during=kill_e1)
                r["c1_upstream_after"] = "e2" if tl.query("e2")["subscriber_count"] == tl.split["e2"] + 1 else "?"
                out["failover"] = r
                log(f"failover: {json.dumps({k: r['per_relay'][k] for k in ('c1', 'c2')})}")
        finally:
            tl.close()
    out["c1_log"] = [line for line in tl.logs.get("c1", "").splitlines() if "upstream" in line]
    out["elapsed_s"] = time.monotonic() - t0
    with open(os.path.join(a.out, "raw.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
    with open(os.path.join(a.out, "command.txt"), "w") as f:
        f.write(f"{out['command']}\n\ndate: {started}\nkernel: {out['kernel']}\nelapsed: {out['elapsed_s']:.0f} s\n")
    write_md(out, a)
    return 0 if all(r["clean"] for r in out["runs"]) else 1


def write_md(out, a):
    runs = out["runs"]
    L = [f"# The relay tree at {out['receivers']} receivers (issue 23)", "",
         f"Run {out['started']}, kernel {out['kernel']}, {out['elapsed_s']:.0f} s. Command: `{out['command']}` "
         f"(also `command.txt`; raw data `raw.json`).", "",
         f"Site 1 routed by {out['variant']}; receivers per relay: "
         + ", ".join(f"{r} {n}" for r, n in out["split"].items())
         + f". Origin: {out['rate']} RTP datagrams/s, {out['payload']} B payload, {a.seconds:g} s per run, "
         f"{len(runs)} runs; every relay on the kernel engine.", "",
         "## Delivery", "",
         "| run | every receiver got every datagram | good copies | bad copies (any kind) | machine busy |",
         "|---|---|---|---|---|"]
    for i, r in enumerate(runs):
        ok = sum(c["ok"] for c in r["counters"].values())
        bad = sum(c[k] for c in r["counters"].values() for k in BAD)
        L.append(f"| {i} | {'yes' if r['clean'] else 'NO'} | {ok} | {bad} | {r['machine_busy_frac'] * 100:.0f} % |")
    L += ["", "## Latency per tier (µs; median over runs of each run's p50 / p99, range)", "",
          "| segment | p50 | p99 | samples per run |", "|---|---|---|---|"]
    for label, *_ in SEGMENTS:
        p50 = med([r["latency_us"][label]["p50"] for r in runs])
        p99 = med([r["latency_us"][label]["p99"] for r in runs])
        n = runs[0]["latency_us"][label]["n"]
        L.append(f"| {label} | {fmt(p50)} | {fmt(p99)} | {n} |")
    L += ["", "## CPU per input datagram, per relay (µs; median over runs, range)", "",
          "| relay | tier | fan-out (subscribers) | CPU µs per input datagram | CPU ns per copy |", "|---|---|---|---|---|"]
    for r in tree.RELAYS:
        cpu = med([x["relays"][r]["cpu_ns_per_in"] / 1e3 if x["relays"][r]["cpu_ns_per_in"] else None
                   for x in runs])
        subs = runs[0]["relays"][r]["subscribers"]
        per_copy = med([x["relays"][r]["cpu_ns"] / max(1, x["relays"][r]["out"]) for x in runs])
        L.append(f"| {r} | {tree.TIER[r]} | {subs} | {fmt(cpu, '.1f')} | {fmt(per_copy)} |")
    L += ["", "## Join rate", "",
          "Six receiver namespaces JOIN at the same time, one per relay (each the two-step cookie handshake, "
          "at most 64 open per namespace). \"joins/s\" is what the joiner saw; \"relay CPU per join\" is the "
          "relay's own CPU over the join phase (no data flowing) divided by the joins, and \"one CPU\" is 1 s "
          "divided by it.", "",
          "| relay | receivers joined | seconds | joins/s | relay CPU per join (µs) | one CPU (joins/s) |",
          "|---|---|---|---|---|---|"]
    for r, j in out["join"].items():
        per = j["relay_cpu_ns"] / max(1, j["joined"])
        L.append(f"| {r} | {j['joined']} | {j['seconds']:.3f} | {j['joined'] / j['seconds']:.0f} | "
                 f"{per / 1e3:.1f} | {1e9 / per if per else 0:.0f} |")
    if "failover" in out:
        fo = out["failover"]
        L += ["", "## Failover: e1 (c1's upstream) killed 2 s into a run", "",
              "| relay | receivers | datagrams due each | fewest got | longest gap between good copies (ms) | gaps counted | rebases |",
              "|---|---|---|---|---|---|---|"]
        for r in ("c1", "c2", "e2"):
            p, c = fo["per_relay"][r], fo["counters"][f"rx:{r}"]
            L.append(f"| {r} | {p['receivers']} | {fo['count']} | {p['min']} | {p['max_gap_ms']:.0f} | {c['gap']} | {c['rebase']} |")
        L.append(f"\nc1's upstream after the kill: {fo['c1_upstream_after']}. c1's log lines about its upstreams:\n")
        L += ["```", *out["c1_log"], "```"]
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    sys.exit(main())
