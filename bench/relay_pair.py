#!/usr/bin/env python3
"""G4's figure before and after a change, paired in one run (issue 24).

Two builds of the relay (--before, --after) in bench/relay.py's lab and with
its measurement (relaylab.RelayLab.run: broadcast mode, a 1000-byte RTP
stream at --rate, N static subscribers, every copy counted), interleaved:
for each N and repetition, each engine under both builds, which goes first
alternating.  Medians of CPU per input datagram, and G4's ratio (loop / kernel at
the largest N) per build.

    python3 bench/relay_pair.py --before /tmp/main/build --after build [--out bench/results/relay-points]
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
from gcbench.run import log  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-points"))
    ap.add_argument("--engines", default="loop,kernel,auto")
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    lab, rl_after = relaylab.make(a.after, receivers=2)
    # the same lab, the other build's binary (and stats sockets of its own)
    rl_before = relaylab.RelayLab.__new__(relaylab.RelayLab)
    rl_before.__dict__.update(rl_after.__dict__)
    rl_before.build, rl_before.bin, rl_before.k = a.before, gcbench.tool(a.before), 100000
    rows = []
    engines = a.engines.split(",")
    with lab:
        for n in [int(x) for x in a.sizes.split(",")]:
            for rep in range(a.reps):
                for e in engines:
                    pair = (("before", rl_before), ("after", rl_after))
                    for name, rl in pair[::-1] if rep % 2 else pair:  # neither build always first
                        r = rl.run(e, n, a.rate, a.seconds)
                        r.update(build=name, rep=rep)
                        rows.append(r)
                        log(f"N={n:5d} rep {rep} {e:6s} {name:6s} {r['cpu_ns_per_datagram'] / 1e3:8.1f} us/datagram "
                            f"lost {r['lost']}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "g4_pair.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["# G4 before and after batching, paired", "",
             "`python3 bench/relay_pair.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Broadcast mode, 1000-byte RTP at {a.rate}/s for {a.seconds} s, relay CPU per input datagram "
             f"(us, median of {a.reps}); before = main, after = this branch; lost = copies missing.", "",
             "| N | engine | before | after | after / before | lost |", "|---|---|---|---|---|---|"]
    med = {}
    for n in sorted({r["n"] for r in rows}):
        for e in engines:
            for b in ("before", "after"):
                med[n, e, b] = statistics.median(r["cpu_ns_per_datagram"] / 1e3 for r in rows
                                                 if r["n"] == n and r["engine"] == e and r["build"] == b)
            lost = sum(r["lost"] for r in rows if r["n"] == n and r["engine"] == e)
            lines.append(f"| {n} | {e} | {med[n, e, 'before']:.1f} | {med[n, e, 'after']:.1f} | "
                         f"{med[n, e, 'after'] / med[n, e, 'before']:.2f} | {lost} |")
    top = max(r["n"] for r in rows)
    if "loop" in engines and "kernel" in engines:
        lines += ["", f"G4 (loop / kernel at N = {top}, target >= 3x): before "
                  f"{med[top, 'loop', 'before'] / med[top, 'kernel', 'before']:.2f}x, after "
                  f"{med[top, 'loop', 'after'] / med[top, 'kernel', 'after']:.2f}x", ""]
    with open(os.path.join(a.out, "g4_pair.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
