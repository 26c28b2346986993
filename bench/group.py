#!/usr/bin/env python3
"""The group-unicast experiments of the seed papers, measured on this machine
with every available groupcast engine, in one command:

    python3 bench/group.py [--quick] [--build DIR] [--max-n 10000] [--only G1,G2,F5,G3] [--out DIR]
                           [--n 1000] [--sizes 100] [--engines loop,kernel]

G1  (Karsten et al., NOSSDAV 2005, Figures 3/4): sender CPU time (and wall
    time) of one group send against group size, 100 and 1000 byte payloads,
    group replaced before every send and fixed group, engines interleaved;
    at N=1000 also the group shuffled before every send (same members, another
    order: the kernel engine's route cache must not care).
G2  (same paper, Table 1): players a 30 frame/s game server could serve,
    computed from G1 with the paper's method.
F5  (same paper, Figure 5): where a send's time goes, from `perf record -e
    cpu-clock -g` of the loop engine and the kernel engine at N=1000.
G3  (sendgroup slides): cost against per-recipient prepend/append size and
    payload size, N=100 and N=1000.

Everything runs in a lab of network namespaces (gcbench.make_lab): the sender
is pinned to CPU 0, receive work is steered to CPU 1 with RPS, and sinks in the
receiver namespaces verify every datagram.  A point with any lost, extra,
corrupt or failed datagram is reported as LOST and never averaged in.
Results go to bench/results/group/ (see bench/README.md).
"""
import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
from gcbench import analyse, papers, plot, profile, report  # noqa: E402
from gcbench.profile import F5_ORDER  # noqa: E402
from gcbench.run import UNPACED_MAX_N, Runner, log, pace_us, sends_for  # noqa: E402

ALL_N = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
QUICK_N = [1, 10, 100, 1000]


def g1_sends(n, cfg, paced):
    if paced:
        return sends_for(n, cfg["g1_target"], cfg["g1_min_sends"], cfg["g1_max_sends"])
    return sends_for(n, cfg["unpaced_target"], 20, cfg["unpaced_max_sends"])


# --- G1 -----------------------------------------------------------------------------------------

def run_g1(r, cfg):
    out = []
    for size in cfg["g1_sizes"]:
        for replace in (False, True):
            for n in cfg["g1_n"]:
                sends = g1_sends(n, cfg, n > UNPACED_MAX_N)
                t0 = time.monotonic()
                p = r.point("G1", f"{size}B {'replace' if replace else 'fixed'} N={n}", n, size, sends,
                            cfg["reps"], pace_us(n), replace=replace)
                m = p["medians"]
                if p["status"] == "ok":
                    loop = m.get("loop", {}).get("cpu_ns")
                    desc = "  ".join(f"{e} {m[e]['cpu_ns'] / 1e3:.1f}" + (f" ({loop / m[e]['cpu_ns']:.2f}x)"
                                                                        if loop and e != "loop" else "")
                                     for e in r.engines)
                else:
                    desc = "LOST"
                log(f"  G1 {size:4} B {'replace' if replace else 'fixed  '} N={n:<5} sends {sends:3} "
                    f"x {cfg['reps']} reps  [{time.monotonic() - t0:4.1f}s]  us/send: {desc}")
                out.append(p)
    return out


def run_g1_pacing(r, cfg):
    """The small group sizes once more, 100 B fixed group, paced like the large ones."""
    out = []
    for n in cfg["pacecheck_n"]:
        sends = min(cfg["pacecheck_max_sends"], g1_sends(n, cfg, True))
        t0 = time.monotonic()
        p = r.point("G1-paced", f"100B fixed N={n} paced", n, 100, sends, cfg["reps"], pace_us(n, True))
        m = p["medians"]
        desc = "  ".join(f"{e} {m[e]['cpu_ns'] / 1e3:.1f}" for e in r.engines) if p["status"] == "ok" else "LOST"
        log(f"  G1 paced check 100 B fixed N={n:<3} sends {sends:3} x {cfg['reps']} "
            f"[{time.monotonic() - t0:4.1f}s]  us/send: {desc}")
        out.append(p)
    return out


def run_g1_shuffle(r, cfg):
    """N=1000 once more with the group shuffled before every send (its own
    experiment name, so that the G1 curves and G2 never mix it in)."""
    out = []
    for size in cfg["g1_sizes"]:
        for n in [n for n in cfg["g1_n"] if n == 1000]:
            sends = g1_sends(n, cfg, n > UNPACED_MAX_N)
            t0 = time.monotonic()
            p = r.point("G1-shuffle", f"{size}B shuffle N={n}", n, size, sends, cfg["reps"], pace_us(n),
                        replace=True, shuffle=True)
            m = p["medians"]
            desc = "  ".join(f"{e} {m[e]['cpu_ns'] / 1e3:.1f}" for e in r.engines) if p["status"] == "ok" else "LOST"
            log(f"  G1 {size:4} B shuffle N={n:<5} sends {sends:3} x {cfg['reps']} reps  "
                f"[{time.monotonic() - t0:4.1f}s]  us/send: {desc}")
            out.append(p)
    return out


# --- F5 -----------------------------------------------------------------------------------------

def run_f5(r, cfg, g1_points):
    out = {"runs": [], "perf": profile.perf_ok(), "notes": []}
    engines = [e for e in ("loop", "kernel") if e in r.engines]
    if "kernel" not in engines:
        out["notes"].append("kernel engine not available here: only the loop engine is profiled")
    n = 1000
    tmp = tempfile.mkdtemp(prefix="gc-f5-")
    try:
        for size in cfg["f5_sizes"]:
            for e in engines:
                sends = cfg["f5_sends"][e]
                run = {"engine": e, "size": size, "n": n, "sends": sends}
                data = os.path.join(tmp, f"perf-{e}-{size}.data")
                used_perf = out["perf"]
                if used_perf:
                    wrap = profile.perf_wrap(data, cfg["f5_freq"])
                else:
                    wrap = gcbench.run.rusage_wrap(os.path.join(tmp, f"ru-{e}-{size}.json"))
                t0 = time.monotonic()
                p = r.point("F5", f"{size}B {e} N={n}" + (" perf" if used_perf else " rusage"), n, size,
                            sends, 1, pace_us(n), engines=[e], wrap=wrap, warmup=False)
                run["status"] = p["status"]
                run["cpu_ns_under_profiler"] = p["medians"].get(e, {}).get("cpu_ns")
                g1 = dict(analyse.g1_curve(g1_points, size, False, e))
                run["cpu_ns_g1"] = g1.get(n)
                base = run["cpu_ns_g1"] or run["cpu_ns_under_profiler"]
                run["cpu_ns_basis"] = "G1 (N=1000, fixed group, no profiler)" if run["cpu_ns_g1"] \
                    else "this run (under the profiler)"
                run.update(profile.breakdown(data if used_perf else None,
                                             os.path.join(tmp, f"ru-{e}-{size}.json"), base, n,
                                             [a.get("error") for a in p["attempts"]]))
                if "perf_error" in run:
                    out["notes"].append(f"{e} {size} B: perf failed: {run['perf_error']}")
                pct = run.get("percent")
                log(f"  F5 {size:4} B {e:7} [{time.monotonic() - t0:4.1f}s] {p['status']}: "
                    + (", ".join(f"{c} {pct[c]:.0f}%" for c in F5_ORDER if pct[c] >= 1) if pct
                       else run.get("perf_error", "no profile")))
                out["runs"].append(run)
        if not out["perf"]:
            out["notes"].append("perf is not installed: fell back to getrusage (user vs kernel time "
                                "of the blast process); install linux-perf for the breakdown")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# --- G3 -----------------------------------------------------------------------------------------

def run_g3(r, cfg):
    out = []
    for n in cfg["g3_n"]:
        for size in cfg["g3_sizes"]:
            for s in cfg["g3_pa"]:
                sends = sends_for(n, cfg["g3_target"], cfg["g3_min_sends"], cfg["g3_max_sends"])
                t0 = time.monotonic()
                p = r.point("G3", f"N={n} {size}B +{s}/{s}", n, size, sends, cfg["g3_reps"], pace_us(n),
                            pre=s, app=s, sendgroup=True)
                p["datagram"] = size + 2 * s
                p["fragmented"] = size + 2 * s > report.UDP4_MAX_UNFRAGMENTED
                m = p["medians"]
                desc = "  ".join(f"{e} {m[e]['cpu_ns'] / 1e3:.1f}" for e in r.engines) \
                    if p["status"] == "ok" else "LOST"
                log(f"  G3 N={n:<5} payload {size:4} B prepend=append={s:3} [{time.monotonic() - t0:4.1f}s]"
                    f"  us/send: {desc}")
                out.append(p)
    return out


# --- main ---------------------------------------------------------------------------------------

def int_list(text, name):
    """--n / --sizes: a comma-separated list of positive integers."""
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        v = []
    if not v or min(v) <= 0:
        raise argparse.ArgumentTypeError(f"{name}: {text!r} is not a comma-separated list of positive integers")
    return v


def config(args):
    ns = [n for n in (QUICK_N if args.quick else ALL_N) if n <= args.max_n]
    if args.n:
        ns = [n for n in args.n if n <= args.max_n]
    cfg = base_config(args, ns)
    if args.n:  # the paced re-run of the small sizes only for the sizes asked for
        cfg["pacecheck_n"] = [n for n in cfg["pacecheck_n"] if n in args.n]
    if args.sizes:
        cfg["g1_sizes"] = list(args.sizes)
    return cfg


def base_config(args, ns):
    if args.quick:
        return dict(reps=3, unpaced_target=1000, unpaced_max_sends=200, pacecheck_n=[1], pacecheck_max_sends=50, g1_n=ns, g1_sizes=[100, 1000], g1_target=1000, g1_min_sends=3, g1_max_sends=50,
                    g3_n=[100], g3_sizes=[0, 1000], g3_pa=[0, 64], g3_target=1000, g3_min_sends=3,
                    g3_max_sends=20, g3_reps=3, f5_sizes=[1000], f5_sends={"loop": 30, "kernel": 100},
                    f5_freq=4000)
    return dict(reps=args.reps, unpaced_target=5000, unpaced_max_sends=2000, pacecheck_n=[1, 2, 5, 10, 20, 50],
                pacecheck_max_sends=100, g1_n=ns, g1_sizes=[100, 1000], g1_target=20000, g1_min_sends=4,
                g1_max_sends=400, g3_n=[100, 1000], g3_sizes=[0, 100, 500, 1000, 1400], g3_pa=[0, 16, 64, 256],
                g3_target=5000, g3_min_sends=8, g3_max_sends=100, g3_reps=5, f5_sizes=[100, 1000],
                f5_sends={"loop": 200, "kernel": 800}, f5_freq=4000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few sizes, few reps, every experiment (< 2 min)")
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"), help="CMake build directory")
    ap.add_argument("--max-n", type=int, default=10000, help="largest G1 group size (default 10000)")
    ap.add_argument("--only", default="G1,G2,F5,G3", help="comma-separated subset of G1,G2,F5,G3")
    ap.add_argument("--reps", type=int, default=5, help="G1 repetitions (full run; default 5)")
    ap.add_argument("--n", type=lambda t: int_list(t, "--n"), default=None,
                    help="G1 group sizes only, comma-separated (e.g. 1000): a subset to iterate on")
    ap.add_argument("--sizes", type=lambda t: int_list(t, "--sizes"), default=None,
                    help="G1 payload sizes only, comma-separated (default 100,1000)")
    ap.add_argument("--engines", default=None,
                    help="engines to run, comma-separated (default: every available one; loop is always run)")
    ap.add_argument("--retries", type=int, default=1, help="re-runs of a lost point with twice the pacing")
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "group"),
                    help="output directory (default bench/results/group)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    only = {x.strip().upper() for x in args.only.split(",") if x.strip()}
    bad = only - {"G1", "G2", "F5", "G3"}
    if bad:
        ap.error(f"--only: unknown experiment(s) {', '.join(sorted(bad))}")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, BPF)")
    if not os.path.exists(gcbench.tool(args.build)):
        ap.error(f"{gcbench.tool(args.build)} not found: build first (cmake -S . -B build && cmake --build build)")
    cfg = config(args)
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    t_start = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()[0]

    info = gcbench.engines_available(args.build)
    engines = [e["name"] for e in info["engines"] if e["available"]]
    skipped = {e["name"]: e["reason"] for e in info["engines"] if not e["available"]}
    if args.engines:
        want = [e.strip() for e in args.engines.split(",") if e.strip()]
        unknown = [e for e in want if e not in {x["name"] for x in info["engines"]}]
        if unknown:
            ap.error(f"--engines: unknown engine(s) {', '.join(unknown)}")
        skipped.update({e: "not asked for (--engines)" for e in engines if e not in want and e != "loop"})
        engines = [e for e in engines if e in want or e == "loop"]
    if "loop" not in engines:
        sys.exit("the loop engine is not available: nothing to compare against")
    log(f"groupcast group benchmarks ({'quick' if args.quick else 'full'}): engines {', '.join(engines)}"
        + (f"; skipped {skipped}" if skipped else "") + f"; output {args.out}")

    g1 = g2 = f5 = g3 = None
    g1p, g1s = [], []
    prev = None
    if "G2" in only and "G1" not in only:
        try:
            with open(os.path.join(args.out, "raw.json")) as f:
                prev = json.load(f)
            g1 = [p for p in prev["points"] if p["experiment"] == "G1"]
            log(f"G2 from the G1 points in {args.out}/raw.json ({prev.get('started')})")
        except (OSError, ValueError, KeyError):
            sys.exit("--only G2 without G1 needs an earlier raw.json with G1 in --out")
    timings = {}
    lab, star = gcbench.make_lab(2)
    with lab:
        runner = Runner(args, lab, star, engines)
        if "G1" in only:
            t0 = time.monotonic()
            log(f"G1: N = {cfg['g1_n']}, payload {cfg['g1_sizes']} B, fixed and replaced group, "
                f"{cfg['reps']} reps, engines interleaved")
            g1 = run_g1(runner, cfg)
            g1p = run_g1_pacing(runner, cfg)
            g1s = run_g1_shuffle(runner, cfg)
            timings["G1"] = time.monotonic() - t0
        if "F5" in only:
            t0 = time.monotonic()
            log(f"F5: perf record -e cpu-clock -g, N=1000, payload {cfg['f5_sizes']} B")
            f5 = run_f5(runner, cfg, g1 or [])
            timings["F5"] = time.monotonic() - t0
        if "G3" in only:
            t0 = time.monotonic()
            log(f"G3: N = {cfg['g3_n']}, payload {cfg['g3_sizes']} B, prepend = append = {cfg['g3_pa']} B")
            g3 = run_g3(runner, cfg)
            timings["G3"] = time.monotonic() - t0
    if "G2" in only and g1:
        g2 = analyse.g2_tables(g1, engines)
    elapsed = time.monotonic() - started
    all_pts = runner.points
    statuses = {p["key"]: p["status"] for p in all_pts}
    lost = [k for k, s in statuses.items() if s != "ok"]

    # --- write everything ---
    kd = report.kdata_limit()
    facts = report.machine_facts()
    cmd = report.command_line()
    raw = {"started": t_start.isoformat(timespec="seconds"), "command": cmd, "argv": sys.argv,
           "cwd": os.getcwd(), "commit": report.git_commit(), "machine": facts, "engines": engines,
           "skipped_engines": skipped, "auto": info.get("auto"), "config": cfg, "quick": args.quick,
           "max_n": args.max_n, "only": sorted(only), "build": args.build, "seconds": round(elapsed, 1),
           "load_1min": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
           "seconds_per_experiment": {k: round(v, 1) for k, v in timings.items()},
           "all_points_ok": not lost, "lost_points": lost, "points": all_pts, "g2": g2, "f5": f5,
           "gc_kdata": kd, "paper": {"table1": papers.TABLE1, "ratio_100": papers.RATIO_100,
                                     "ratio_1000": papers.RATIO_1000}}
    if prev:
        raw["g1_from"] = prev.get("started")
    report.write_json(os.path.join(args.out, "raw.json"), raw)
    report.write_csvs(args.out, runner, g2, f5, g3)
    made = plot.group_plots(args.out, g1, g2, f5, g3, engines, cfg)

    report.write_group_command(args.out, raw, elapsed, timings)
    report.write_group_results(args.out, raw, elapsed, g1, g1p, g1s, g3, prev, made)
    report.portable(args.out)
    log(f"\ndone in {elapsed:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in timings.items())}); "
        f"{len(all_pts) - len(lost)}/{len(all_pts)} points verified" + (f"; LOST: {lost}" if lost else "")
        + f"; results in {args.out}")
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
