#!/usr/bin/env python3
"""Where the kernel engine starts to win for the relay's AUTO (issue 24, tools/relay/batch.c).

Replicate mode, samplicator's command line, 984-byte datagrams (NetFlow v5's
size), N receivers; the relay with --engine kernel (one trigger per input
datagram) against --engine mmsg (the copies of a receive batch in one
sendmmsg()), interleaved, in samplicator.py's lab and with its measurement
(the relay's CPU from schedstat, every receiver port counted).  Two inputs:
"alone", 100/s (each datagram a batch of one, the relay cold at each
wake-up), "batched", one producer as fast as it can go for --batched-count
datagrams (several waiting per recvmmsg()), and "paced", one producer at
--paced-rate (mostly one datagram per wake-up, but warm).  The crossover per input is the smallest N from which the
kernel engine's median CPU per input datagram is below mmsg's.

    python3 bench/relay_crossover.py [--build build] [--out bench/results/relay-points]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
import samplicator  # noqa: E402
from gcbench.run import log  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-points"))
    ap.add_argument("--sizes", default="1,2,4,8,12,16,24")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--alone-count", type=int, default=300)
    ap.add_argument("--batched-count", type=int, default=20000)
    ap.add_argument("--paced-rate", type=int, default=2000,
                    help="a third input: one producer at this rate for 2 s (mostly one datagram per wake-up, warm)")
    ap.add_argument("--modes", default="alone,batched,paced")
    ap.add_argument("--md", default="crossover.md")
    a = ap.parse_args()
    inputs = {"alone": (100, a.alone_count), "batched": (1_000_000, a.batched_count),
              "paced": (a.paced_rate, 2 * a.paced_rate)}
    modes = a.modes.split(",")
    sizes = [int(x) for x in a.sizes.split(",")]
    tool = gcbench.tool(a.build)
    lab, rl = relaylab.make(a.build, receivers=2)
    rows = []
    try:
        for n in sizes:
            for rep in range(a.reps):
                for mode in modes:
                    rate, count = inputs[mode]
                    for eng in ("kernel", "mmsg"):
                        m = {"name": eng, "argv": [tool, "relay", "--engine", eng]}
                        r = samplicator.one_run(rl, m, samplicator.receivers_argv(rl, n), n, rate, count, 984)
                        r.update(mode=mode, engine=eng, rep=rep)
                        rows.append(r)
                        log(f"N={n:3d} {mode:7s} {eng:6s} rep {rep}: {r['cpu_ns_per_input'] / 1e3:7.1f} us/input "
                            f"lost {r['lost']}")
    finally:
        lab.close()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, a.md.replace(".md", ".json")), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["# AUTO's crossover: kernel engine against one sendmmsg() per receive batch", "",
             "`python3 bench/relay_crossover.py " + " ".join(sys.argv[1:]) + "`", "",
             "Relay CPU per input datagram (us, median of %d), replicate mode, 984 B, lost = copies missing." % a.reps,
             "", "| N | " + " | ".join(f"{m} kernel | {m} mmsg" for m in modes) + " | lost |",
             "|---|" + "---|---|" * len(modes) + "---|"]
    cross = {}
    for n in sizes:
        med = {}
        for mode in modes:
            for eng in ("kernel", "mmsg"):
                sel = [r["cpu_ns_per_input"] / 1e3 for r in rows if r["n"] == n and r["mode"] == mode and r["engine"] == eng]
                med[mode, eng] = statistics.median(sel)
            if med[mode, "kernel"] < med[mode, "mmsg"] and mode not in cross:
                cross[mode] = n
        lost = sum(r["lost"] for r in rows if r["n"] == n)
        lines.append(f"| {n} | " + " | ".join(f"{med[m, 'kernel']:.1f} | {med[m, 'mmsg']:.1f}" for m in modes)
                     + f" | {lost} |")
    lines += ["", "First N where the kernel engine is cheaper: "
              + ", ".join(f"{m} {cross.get(m, 'none')}" for m in modes) + ".", ""]
    with open(os.path.join(a.out, a.md), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
