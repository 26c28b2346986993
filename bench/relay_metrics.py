#!/usr/bin/env python3
"""What `groupcast relay --metrics` costs per datagram (issue 22: "the relay's
metrics cost nothing measurable per datagram").

    sudo python3 bench/relay_metrics.py [--build build] [--out bench/results/relay-metrics]
                                        [--sizes 10,200] [--rate 1000] [--seconds 4] [--reps 5]

The G4 setup (bench/relaylab.py: broadcast mode, one 1000-byte RTP stream in,
N static subscribers, AUTO's engine, every datagram verified at the
receivers).  Three methods, interleaved rep by rep in the same lab: the
relay without --metrics ("plain"); with --metrics but never scraped ("idle":
what metrics cost per datagram); and with --metrics 127.0.0.1:9464 while a
scraper in the relay's namespace GETs /metrics once a second ("scraped":
Prometheus's fastest usual interval, so per-scrape work shows too).  Measured: the relay's CPU per input datagram (its own counter,
the same one G4 reports); the ratio to plain is taken within each rep, then
the median.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
from gcbench import report  # noqa: E402
from gcbench.run import log  # noqa: E402

PORT = 9464
# GET /metrics every second (bounded: 20 minutes); the count of scrapes served
# goes to the file argv[1], so the results can show the relay was scraped.
SCRAPER = ("import sys, time, urllib.request\n"
           "n = ok = 0\n"
           "while n < 1200:\n"
           "    try:\n"
           f"        if b'groupcast_relay_' in urllib.request.urlopen('http://127.0.0.1:{PORT}/metrics', timeout=2).read():\n"
           "            ok += 1\n"
           "            open(sys.argv[1], 'w').write(str(ok))\n"
           "    except OSError:\n"
           "        pass\n"
           "    n += 1\n"
           "    time.sleep(1)\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-metrics"))
    ap.add_argument("--sizes", default="10,200")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    os.makedirs(a.out, exist_ok=True)
    t0 = time.monotonic()
    rows = []
    lab, rl = relaylab.make(a.build, 2)
    with lab:
        count_file = os.path.join(a.out, "scrapes.txt")
        scraper = lab.popen(rl.relay_ns, [sys.executable, "-c", SCRAPER, count_file],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for n in sizes:
                for rep in range(a.reps):
                    pair = {}
                    for method, args in (("plain", ()), ("idle", ("--metrics", f"127.0.0.1:{PORT + 1}")),
                                         ("metrics", ("--metrics", f"127.0.0.1:{PORT}"))):
                        r = rl.run("auto", n, a.rate, a.seconds, relay_args=args)
                        r.update(method=method, rep=rep)
                        rows.append(r)
                        pair[method] = r
                        log(f"  N={n:4d} rep {rep} {method:7s} {r['resolved']:8s} "
                            f"{r['cpu_ns_per_datagram'] / 1e3:7.1f} us/datagram  lost {r['lost']}")
                    for k in ("idle", "metrics"):
                        pair[k]["ratio"] = pair[k]["cpu_ns_per_datagram"] / pair["plain"]["cpu_ns_per_datagram"]
        finally:
            scraper.kill()
            scraper.wait()
    try:
        with open(count_file) as f:
            scrapes = int(f.read())
        os.unlink(count_file)
    except (OSError, ValueError):
        scrapes = 0
    if not scrapes:
        sys.exit("relay_metrics: no scrape of /metrics succeeded: the --metrics runs measured nothing")
    lines = ["# The relay's --metrics: CPU per input datagram with and without it", "",
             f"Run {time.strftime('%Y-%m-%dT%H:%M:%S%z')} on {report.machine_facts().get('cpu', '?')}; "
             f"{time.monotonic() - t0:.0f} s.", "",
             "Command: `python3 bench/relay_metrics.py " + " ".join(sys.argv[1:]) + "`", "",
             f"G4's setup (broadcast mode, 1000-byte RTP at {a.rate}/s for {a.seconds} s, AUTO's engine, "
             f"every datagram verified); with --metrics a scraper GETs /metrics every second "
             f"({scrapes} scrapes served). "
             f"Median over {a.reps} reps; the ratio is taken within each rep.", "",
             "| N | engine | plain us/datagram | idle: us/datagram, ratio (min-max) | "
             "scraped: us/datagram, ratio (min-max) | lost |",
             "|---|---|---|---|---|---|"]

    def cell(rs):
        ratios = [r["ratio"] for r in rs]
        return (f"{statistics.median(r['cpu_ns_per_datagram'] for r in rs) / 1e3:.1f}, "
                f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    for n in sizes:
        by = {k: [r for r in rows if r["n"] == n and r["method"] == k] for k in ("plain", "idle", "metrics")}
        lines.append(f"| {n} | {by['plain'][0]['resolved']} | "
                     f"{statistics.median(r['cpu_ns_per_datagram'] for r in by['plain']) / 1e3:.1f} | "
                     f"{cell(by['idle'])} | {cell(by['metrics'])} | "
                     f"{sum(r['lost'] for rs in by.values() for r in rs)} |")
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "raw.json"), "w") as f:
        json.dump({"args": vars(a), "rows": rows}, f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
