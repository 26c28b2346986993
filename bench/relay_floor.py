#!/usr/bin/env python3
"""Issue 24: how close the relay comes to the least a user-space replicator can spend.

    sudo python3 bench/relay_floor.py --samplicator PATH/samplicate [--build build] [--n 1,2,5,10]
        [--rate 20000] [--reps 5] [--out bench/results/relay-points/floor]

The issue asks the relay for at most 0.4x samplicator's CPU per input datagram
at 20,000/s and N = 2.  bench/floor_relay.c is a yardstick: one blocking
recvmmsg() for whatever is waiting, one sendmmsg() for every copy of the batch,
and nothing else (no epoll, no timers, no statistics, no per-receiver errors).
No user-space relay that receives each datagram and sends each copy through
the socket layer can spend less; if the yardstick itself is above 0.4x
samplicator, so is any such relay, and what is left is the kernel's own
receive and send paths.

Same lab, input and checks as bench/relay_points.py (its one_run(): NetFlow v5
984 B from 8 exporters by default (--exporters), every copy checked byte for byte by `groupcast sink
--digest`, replicator on CPU 0, the rest on CPU 1, CPU per input datagram from
schedstat); the three replicators take turns in every round (who goes first
rotates), a run with loss is tried once more, medians over the lossless runs.
Results: README.md (table, command) and raw.json in --out.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
import relay_points as rp  # noqa: E402
from gcbench import report  # noqa: E402
from gcbench.run import log  # noqa: E402


class Floor:
    kind = "floor"
    name = "floor (recvmmsg + sendmmsg)"

    def __init__(self, path):
        self.path = path

    def argv(self, rl, n, workdir):
        return [self.path, "-p", rp.IN_PORT, "-b", rp.RCVBUF, *rl.receivers_argv(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"),
                    help="build with the relay, `groupcast sink` and bench/floor_relay")
    ap.add_argument("--samplicator", help="path to a samplicate binary you built (without: relay and floor only)")
    ap.add_argument("--samplicator-version", default="", help="what the samplicate binary is, for the results")
    ap.add_argument("--n", default="1,2,5,10", help="receivers")
    ap.add_argument("--rate", type=int, default=rp.HIGH[0], help="input datagrams/s")
    ap.add_argument("--exporters", type=int, default=rp.HIGH[1], help="source addresses of the input")
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-points", "floor"))
    a = ap.parse_args()
    floor = os.path.join(a.build, "bench", "floor_relay")
    for p, what in ((floor, "bench/floor_relay (cmake --build)"), (a.samplicator, "--samplicator")):
        if p is not None and not os.access(p, os.X_OK):
            sys.exit(f"{what}: {p!r} is not an executable")
    sampl = rp.Samplicator(a.samplicator) if a.samplicator else None
    relay, floor = rp.Relay(a.build), Floor(floor)
    methods = [m for m in (sampl, relay, floor) if m]
    ns = [int(n) for n in a.n.split(",") if n]
    rows, t0 = [], time.monotonic()
    os.makedirs(a.out, exist_ok=True)
    lab, rl = relaylab.make(a.build, 2)
    with lab:
        workdir = lab.workdir()
        rl.producer_nf5 = rp.Producer(a.build, workdir)
        for rep in range(a.reps):
            order = methods[rep % len(methods):] + methods[:rep % len(methods)]
            for n in ns:
                for m in order:
                    for attempt in (0, 1):
                        r = rp.safe_run(rl, m, n, a.rate, a.exporters, a.seconds, workdir)
                        r.update(rep=rep, attempt=attempt)
                        rows.append(r)
                        log(f"  floor rep {rep} " + rp.describe(r))
                        if r["ok"]:
                            break
    med = {}
    for n in ns:
        for m in methods:
            ok = [r["cpu_ns_per_input"] for r in rows if r["n"] == n and r["method"] == m.name and r["ok"]]
            med[(n, m.name)] = statistics.median(ok) if ok else None
    cmd = "sudo python3 bench/relay_floor.py" + (
        f" --samplicator PATH/TO/samplicate --samplicator-version '{a.samplicator_version}'" if sampl else "") + (
        f" --n {a.n} --rate {a.rate} --exporters {a.exporters} --seconds {a.seconds} --reps {a.reps}")
    facts = report.machine_facts()
    lines = ["# The relay against the least a user-space replicator spends (issue 24)", "",
             f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {facts.get('cpu', '?')} × "
             f"{facts['cpus']}, kernel {facts['kernel']}; {(time.monotonic() - t0) / 60:.0f} min. "
             f"Relay: `{relay.name}` (`--engine auto`). samplicator: "
             f"{(a.samplicator_version or 'as given') if sampl else 'not run'}. "
             "What is measured and how: the docstring of `bench/relay_floor.py`.", "",
             "Command:", "", "```", cmd, "```", "",
             f"## CPU per input datagram (µs, median of {a.reps} rounds), {a.rate:,}/s from {a.exporters} exporter"
             f"{'s' if a.exporters > 1 else ''}", "",
             "| receivers | samplicator | relay | floor | relay ÷ samplicator | floor ÷ samplicator | "
             "relay ÷ floor |", "|---|---|---|---|---|---|---|"]
    for n in ns:
        s, r, f = (med[(n, m.name)] if m else None for m in (sampl, relay, floor))
        cell = [rp.fmt_us(v) for v in (s, r, f)]
        ratio = [f"{x / y:.2f}×" if x and y else "–" for x, y in ((r, s), (f, s), (r, f))]
        lines.append(f"| {n} | " + " | ".join(cell + ratio) + " |")
    lines += ["", "Runs with loss are left out (raw.json has every run; `lost` in a cell: no lossless run)."]
    report.write_json(os.path.join(a.out, "raw.json"), {
        "command": cmd, "facts": facts, "rows": rows,
        "medians": [{"n": k[0], "method": k[1], "cpu_ns_per_input": v} for k, v in med.items()]})
    with open(os.path.join(a.out, "README.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    report.portable(a.out)
    print("\n".join(lines))
    return 0 if all(v is not None for v in med.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
