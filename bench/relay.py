#!/usr/bin/env python3
"""G4, the Helix experiment: the groupcast relay in broadcast mode (one RTP
stream in, a rewritten RTP header per subscriber, the payload shared) against
group size, per engine; the highest input rate it sustains; and the Amdahl
check of the sendgroup() slides.

    python3 bench/relay.py [--build build] [--out bench/results/relay] [--quick | --replot]

1. CPU against group size: N in 10..1000 static subscribers, a 1000-byte RTP
   stream at --rate datagrams/s, every engine, engines interleaved, --reps
   repetitions; the relay's CPU utilisation and CPU per input datagram.
2. Highest rate without loss at N = --max-n: the producer steps up its rate;
   the relay keeps up while it reads every datagram with no socket drop.
   Send errors and whether every subscriber got every datagram are recorded
   beside it (the lab's receive work runs on one CPU and saturates first).
3. Amdahl: s = gc_sendgroup() speed-up of the best engine over loop from the
   group-send benchmark (groupcast blast, N = 1000, 1000 B, 12-byte prepend,
   run here); f = the fraction of the loop relay's CPU spent inside
   gc_sendgroup() at N = 1000 (timed by the relay); predicted 1/((1-f)+f/s)
   against the observed ratio of CPU per input datagram.
"""
import argparse
import csv
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
from gcbench import analyse, plot, report  # noqa: E402
from gcbench.run import log  # noqa: E402

PAPER = {"s": 1.664, "f": 0.791, "predicted": 1.461, "observed": 1.45, "n": 1000, "size": 1000}


def med(rows, key):
    m = analyse.median_or_none(r[key] for r in rows)
    return float("nan") if m is None else m


def cpu_vs_group(rl, engines, sizes, rate, seconds, reps, log):
    rows = []
    for n in sizes:
        for rep in range(reps):
            for e in engines:
                r = rl.run(e, n, rate, seconds)
                r["rep"] = rep
                rows.append(r)
                log(f"  N={n:5d} rep {rep} {e:9s} cpu {r['cpu_util'] * 100:5.1f}%  "
                    f"{r['cpu_ns_per_datagram'] / 1e3:8.1f} us/datagram  f={r['send_fraction']:.3f}  "
                    f"lost {r['lost']}")
    return rows


def max_rate(rl, engines, n, ladder, seconds, log):
    """Step the input rate up until the relay no longer keeps up."""
    out = []
    for e in engines:
        best, best_noerr, best_e2e, steps = 0, 0, 0, []
        for rate in ladder:
            for attempt in range(2):   # a shared, noisy machine: a failed step gets one retry
                r = rl.run(e, n, rate, seconds, idle_ms=1500, settle=0.25)
                # steady state: no drop, caught up within 0.25 s, and below one CPU
                r["cpu_needed"] = r["cpu_ns_per_datagram"] * rate / 1e9
                ok = r["in"] == r["sent"] and r["ingest_drops"] == 0 and r["cpu_needed"] < 0.98
                r["attempt"] = attempt
                if ok:
                    break
            r["sustained"] = ok
            r["all_delivered"] = r["lost"] == 0
            steps.append(r)
            log(f"  N={n} {e:9s} {rate:6d}/s: relay read {r['in']}/{r['sent']}, drops {r['ingest_drops']}, "
                f"send errors {r['errors']}, {r['cpu_ns_per_datagram'] / 1e3:6.0f} us/datagram "
                f"= {r['cpu_needed'] * 100:3.0f}% of a CPU, "
                f"subscribers got {r['delivered'] / r['due'] * 100:6.2f}% -> {'keeps up' if ok else 'LOSS'}")
            if not ok:
                break
            best = rate
            if r["errors"] == 0 and all(x["errors"] == 0 for x in steps):
                best_noerr = rate
            if all(x["lost"] == 0 for x in steps):
                best_e2e = rate
        good = [x for x in steps if x["in"] > 0]
        cap = 1e9 / statistics.median([x["cpu_ns_per_datagram"] for x in good]) if good else 0
        out.append({"engine": e, "n": n, "max_rate": best, "max_rate_no_send_error": best_noerr,
                    "max_rate_all_delivered": best_e2e, "client_rate": best * n, "cpu_capacity": cap,
                    "steps": steps})
    return out


def plots(out, rows, engines, mr, am):
    plt = plot.pyplot()
    sizes = sorted({r["n"] for r in rows})
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    for e in engines:
        util = [med([r for r in rows if r["engine"] == e and r["n"] == n], "cpu_util") * 100 for n in sizes]
        per = [med([r for r in rows if r["engine"] == e and r["n"] == n], "cpu_ns_per_datagram") / n
               for n in sizes]
        ax[0].plot(sizes, util, marker="o", label=e)
        ax[1].plot(sizes, per, marker="o", label=e)
    rate = rows[0]["rate"]
    ax[0].set(xscale="log", xlabel="group size (subscribers)", ylabel="relay CPU utilisation (%)",
              title=f"Relay CPU at {rate} datagrams/s in (1000 B RTP)")
    ax[1].set(xscale="log", yscale="log", xlabel="group size (subscribers)",
              ylabel="relay CPU per datagram and subscriber (ns)",
              title="CPU per output datagram")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend()
    plot.save(fig, os.path.join(out, "cpu_vs_group.png"))

    fig, ax = plt.subplots(figsize=(6.5, 4))
    names = [m["engine"] for m in mr]
    ax.bar(names, [m["max_rate"] for m in mr], label="relay keeps up (no input drop)")
    ax.bar(names, [m["max_rate_all_delivered"] for m in mr], width=0.4,
           label="every subscriber got all (lab receivers: 1 CPU)")
    ax.set(ylabel="input datagrams/s", title=f"Highest input rate without loss, N={mr[0]['n']}")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    plot.save(fig, os.path.join(out, "max_rate.png"))

    fig, ax = plt.subplots(figsize=(6.5, 4))
    labels = ["paper (Helix)", f"ours ({am['best']})"]
    x = range(2)
    ax.bar([i - 0.2 for i in x], [PAPER["predicted"], am["predicted"]], width=0.4, label="Amdahl prediction")
    ax.bar([i + 0.2 for i in x], [PAPER["observed"], am["observed"]], width=0.4, label="observed speed-up")
    ax.set_xticks(list(x), labels)
    ax.set(ylabel="relay speed-up over the sendmsg loop", title="Amdahl check, N=1000, 1000 B")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    plot.save(fig, os.path.join(out, "amdahl.png"))


def write_md(out, a, rows, engines, mr, am, facts, elapsed):
    sizes = sorted({r["n"] for r in rows})
    L = [f"# G4: the relay (Helix experiment)\n",
         f"Machine: {facts.get('cpu', '?')}, {facts['cpus']} CPUs, kernel {facts['kernel']}. "
         f"Run took {elapsed / 60:.1f} min. Command and facts: `command.txt`; raw data: `raw.json`, `cpu.csv`, "
         f"`max_rate.csv`, `amdahl.json`.\n",
         f"Relay in broadcast mode (`groupcast relay --rtp`), pinned to CPU 0, its input received on CPU 0 "
         f"(RPS); subscribers' receive work on CPU 1 (RPS), sinks and producer on CPU 1. Input: 1000-byte RTP datagrams at {a.rate}/s for "
         f"{a.seconds} s per run; each subscriber gets its own 12-byte RTP header (prepend) and the shared "
         f"988 bytes. Engines interleaved, {a.reps} reps, medians. CPU = the relay process's "
         f"CLOCK_PROCESS_CPUTIME_ID (cross-checked with /proc/PID/stat).\n",
         "## CPU utilisation against group size\n",
         "| N | " + " | ".join(f"{e} CPU % | {e} µs/datagram" for e in engines) + " | lost |",
         "|---|" + "---|---|" * len(engines) + "---|"]
    for n in sizes:
        cells = []
        lost = 0
        for e in engines:
            rr = [r for r in rows if r["engine"] == e and r["n"] == n]
            cells.append(f"{med(rr, 'cpu_util') * 100:.1f} | {med(rr, 'cpu_ns_per_datagram') / 1e3:.1f}")
            lost += sum(r["lost"] for r in rr)
        L.append(f"| {n} | " + " | ".join(cells) + f" | {lost} |")
    nmax = max(sizes)
    at = lambda e: [r for r in rows if r["engine"] == e and r["n"] == nmax]  # noqa: E731
    loop = med(at("loop"), "cpu_ns_per_datagram")
    L.append(f"\nCPU per input datagram relative to loop at N={nmax} (higher is better):\n")
    L.append("| engine | loop / engine | spread (min..max over reps) |\n|---|---|---|")
    for e in engines:
        rr = [r["cpu_ns_per_datagram"] for r in rows if r["engine"] == e and r["n"] == nmax]
        L.append(f"| {e} | {loop / statistics.median(rr):.2f}× | {min(rr) / 1e3:.0f}..{max(rr) / 1e3:.0f} µs |")
    L.append(f"\n![CPU against group size](cpu_vs_group.png)\n")
    L.append(f"## Highest input rate without loss, N={mr[0]['n']}\n")
    L.append("| engine | relay keeps up to (datagrams/s in) | client rate (datagrams/s out) | one CPU's capacity "
             "(1 s / CPU per datagram) | no send error up to | every subscriber got all up to |")
    L.append("|---|---|---|---|---|---|")
    for m in mr:
        L.append(f"| {m['engine']} | {m['max_rate']} | {m['client_rate']} | {m['cpu_capacity']:.0f} | "
                 f"{m['max_rate_no_send_error']} | {m['max_rate_all_delivered']} |")
    L.append("\nThe producer steps up its rate (3 s per step, one retry of a failed step). The relay keeps up "
             "when it read every datagram within 0.25 s of the producer's end (default 4 MiB receive buffer), "
             "with no socket drop, and needed less than 98 % of a CPU (the CPU of all its threads: io_uring's "
             "workers count too, so `uring_zc` can pass 100 % and fail this test while reading everything). \"One CPU's capacity\" is 1 s divided by "
             "the relay's measured CPU per datagram at this group size: the rate one dedicated CPU would "
             "sustain. The measured limit stays below it because CPU 0 is not dedicated: it also receives the "
             "relay's input, and this machine is shared with other jobs (a relay that is always runnable got "
             "about two thirds of CPU 0 in a check during this work). All subscribers' receive work runs on "
             "one CPU (CPU 1), which saturates at a few hundred thousand datagrams/s: beyond that, packets "
             "waiting in CPU 1's backlog hold the relay's send buffer (veth keeps them charged to the sender), "
             "so sends fail with EAGAIN and are counted (the relay never blocks), or the clones are dropped in "
             "the backlog. The last two columns are limits of this two-CPU lab's receivers, not of the relay.\n")
    L.append("![Highest rate](max_rate.png)\n")
    L.append("## Amdahl's law, N=1000, 1000 B\n")
    L.append("| | paper (Helix, sendgroup()) | ours |\n|---|---|---|")
    L.append(f"| s: group-send speed-up (micro-benchmark) | {PAPER['s']} | {am['s']:.3f} ({am['best']} vs loop, "
             f"gc_sendgroup with a 12-byte prepend) |")
    L.append(f"| f: fraction of relay time sending | {PAPER['f']} | {am['f']:.3f} (loop relay, CPU inside "
             f"gc_sendgroup / relay CPU) |")
    L.append(f"| predicted 1/((1-f)+f/s) | {PAPER['predicted']} | {am['predicted']:.3f} |")
    L.append(f"| observed relay speed-up | {PAPER['observed']} | {am['observed']:.3f} |")
    L.append(f"| s measured inside the relay (CPU in gc_sendgroup per datagram, loop / {am['best']}) | | "
             f"{am['s_in_relay']:.3f} |")
    L.append(f"| predicted with that s | | {am['predicted_in_relay']:.3f} |")
    L.append(f"\nThe relay spends f = {am['f']:.3f} of its CPU inside gc_sendgroup() with the loop engine (the paper's "
             f"Helix: 0.791), so Amdahl's law predicts almost the whole group-send speed-up. "
             + (f"The prediction from the micro-benchmark's s overshoots the observed speed-up: a group send inside "
                f"the relay gains less from the kernel engine than the back-to-back sends of `groupcast blast` do (a "
                f"datagram every {1000 / a.rate:.0f} ms against every 3 ms; colder caches between sends are the "
                f"likely reason, not isolated here). "
                if am['predicted'] > am['observed'] * 1.03 else
                f"The prediction from the micro-benchmark's s ({am['predicted']:.2f}) is within "
                f"{abs(am['predicted'] / am['observed'] - 1) * 100:.0f} % of the observed speed-up. ")
             + f"With the speed-up of the sends measured "
             f"inside the relay the law predicts {am['predicted_in_relay']:.2f} against the observed "
             f"{am['observed']:.2f}. The part of the relay outside "
             f"gc_sendgroup() (receive, header rewrite, counters) costs "
             f"{med(at('loop'), 'cpu_ns_per_datagram') * (1 - am['f']) / 1e3:.0f} µs per datagram with loop, "
             f"{med(at(am['best']), 'cpu_ns_per_datagram') * (1 - am['f_best']) / 1e3:.0f} µs with {am['best']}.\n")
    L.append(f"\nPerformance target: with 1000 receivers at the same input rate, the best engine "
             f"({am['best']}) uses {am['observed']:.2f}× less CPU per input datagram than loop "
             f"(target ≥ 3×: {'met' if am['observed'] >= 3 else 'NOT met'}).\n")
    L.append("![Amdahl](amdahl.png)\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay"))
    ap.add_argument("--engines", help="comma-separated (default: every available engine)")
    ap.add_argument("--sizes", default="10,30,100,300,1000")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-n", type=int, default=1000)
    ap.add_argument("--ladder", default="100,150,200,250,300,400,500,600,800,1000,1300,1600,2000")
    ap.add_argument("--quick", action="store_true", help="a short run to check the driver")
    ap.add_argument("--replot", action="store_true", help="rewrite results.md and the plots from --out/raw.json")
    a = ap.parse_args()
    if a.replot:
        with open(os.path.join(a.out, "raw.json")) as fi:
            raw = json.load(fi)
        ra = argparse.Namespace(**raw["args"])
        rows, mr, am = raw["cpu_vs_group"], raw["max_rate"], raw["amdahl"]
        engines = list(dict.fromkeys(r["engine"] for r in rows))
        elapsed = raw.get("elapsed")
        if elapsed is None:   # older raw.json: command.txt has it
            import re
            with open(os.path.join(a.out, "command.txt")) as fi:
                m = re.search(r"^elapsed: (\d+) s", fi.read(), re.M)
            elapsed = float(m.group(1)) if m else 0
        write_md(a.out, ra, rows, engines, mr, am, raw["facts"], elapsed)
        plots(a.out, rows, engines, mr, am)
        report.portable(a.out)
        return 0
    if a.quick:
        a.sizes, a.reps, a.seconds, a.ladder = "10,1000", 1, 1.5, "300,1000"
    t_start = time.monotonic()
    info = gcbench.engines_available(a.build)
    engines = a.engines.split(",") if a.engines else [e["name"] for e in info["engines"] if e["available"]]
    best = info["auto"]
    if "loop" not in engines or best not in engines:
        sys.exit("need the loop engine and AUTO's pick among --engines")
    os.makedirs(a.out, exist_ok=True)
    sizes = [int(x) for x in a.sizes.split(",")]
    facts = report.machine_facts()
    log(f"G4: relay CPU against group size {sizes} at {a.rate}/s, engines {engines} (AUTO -> {best})")

    lab, rl = relaylab.make(a.build, 2)
    with lab:
        rows = cpu_vs_group(rl, engines, sizes, a.rate, a.seconds, a.reps, log)
        log(f"group-send micro-benchmark: N=1000, 1000 B, 12-byte prepend, loop vs {best}")
        bl = gcbench.blast(a.build, lab, rl.star, 1000, ["loop", best], size=1000, sends=100,
                           reps=3 if a.quick else 7, interval_us=3000, prepend=12)
        log(f"highest rate without loss at N={a.max_n}")
        mr = max_rate(rl, engines, a.max_n, [int(x) for x in a.ladder.split(",")], 3.0, log)

    nmax = max(sizes)
    at = lambda e: [r for r in rows if r["engine"] == e and r["n"] == nmax]  # noqa: E731
    s = bl.medians["loop"]["cpu_ns"] / bl.medians[best]["cpu_ns"]
    f = med(at("loop"), "send_fraction")
    am = {"best": best, "n": nmax, "s": s, "f": f, "predicted": 1 / ((1 - f) + f / s),
          "observed": med(at("loop"), "cpu_ns_per_datagram") / med(at(best), "cpu_ns_per_datagram"),
          "f_best": med(at(best), "send_fraction"),
          "s_in_relay": (med(at("loop"), "cpu_ns_per_datagram") * med(at("loop"), "send_fraction")) /
                        (med(at(best), "cpu_ns_per_datagram") * med(at(best), "send_fraction")),
          "blast": {"medians": bl.medians, "lost": bl.lost, "argv": [str(x) for x in bl.argv]},
          "paper": PAPER}
    am["predicted_in_relay"] = 1 / ((1 - f) + f / am["s_in_relay"])
    log(f"Amdahl: s={s:.3f} f={f:.3f} predicted {am['predicted']:.3f}, observed {am['observed']:.3f} "
        f"(paper: s={PAPER['s']} f={PAPER['f']} predicted {PAPER['predicted']} observed {PAPER['observed']})")

    report.write_json(os.path.join(a.out, "raw.json"),
                      {"cpu_vs_group": rows, "max_rate": mr, "amdahl": am, "facts": facts, "args": vars(a),
                       "elapsed": time.monotonic() - t_start})
    report.write_json(os.path.join(a.out, "amdahl.json"), am)
    keys = ["engine", "n", "rep", "rate", "sent", "in", "out", "errors", "ingest_drops", "cpu_ns", "send_ns",
            "wall_ns", "cpu_util", "cpu_ns_per_datagram", "send_fraction", "proc_stat_cpu_ns",
            "machine_busy_frac", "delivered", "due", "lost"]
    report.write_dicts_csv(os.path.join(a.out, "cpu.csv"), rows, keys)
    with open(os.path.join(a.out, "max_rate.csv"), "w", newline="") as fo:
        w = csv.writer(fo)
        w.writerow(["engine", "n", "rate", "sustained", "relay_read", "sent", "ingest_drops", "send_errors",
                    "cpu_ns_per_datagram", "delivered_frac"])
        for m in mr:
            for st in m["steps"]:
                w.writerow([m["engine"], m["n"], st["rate"], st["sustained"], st["in"], st["sent"],
                            st["ingest_drops"], st["errors"], round(st["cpu_ns_per_datagram"]),
                            round(st["delivered"] / st["due"], 5)])
    elapsed = time.monotonic() - t_start
    with open(os.path.join(a.out, "command.txt"), "w") as fo:
        fo.write("python3 " + " ".join(sys.argv) + "\n\n")
        fo.write(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\nkernel: {facts['kernel']}\n"
                 f"cpu: {facts.get('cpu', '?')} x {facts['cpus']}\npython: {platform.python_version()}\n"
                 f"engines: {engines}, AUTO -> {best}\nelapsed: {elapsed:.0f} s\n"
                 f"relay: groupcast relay --rtp -p 5004 --cpu 0 --engine ENGINE --expire 0 --producer PRODUCER "
                 f"ADDR1/20000+N/2 ADDR2/20000+N/2 (static subscribers)\n"
                 f"producer: tests/e2e/relaytool.py tx --rtp --rate R --size 1000, on CPU 1\n"
                 f"blast: {' '.join(map(str, bl.argv))}\n")
    write_md(a.out, a, rows, engines, mr, am, facts, elapsed)
    plots(a.out, rows, engines, mr, am)
    report.portable(a.out)
    log(f"results in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
