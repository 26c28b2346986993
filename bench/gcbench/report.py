"""Writing results: results.md tables, CSV, JSON and command.txt, with the
machine's facts and paths made portable (relative to the checkout).  The first
part is shared by every driver; the second writes group.py's tables."""
import csv
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys

from . import papers
from .profile import F5_ORDER, IPI
from .run import ROOT, UNPACED_MAX_N

UDP4_MAX_UNFRAGMENTED = 1500 - 20 - 8   # payload of one unfragmented IPv4 UDP datagram on the lab's veths


def portable(outdir):
    """Rewrite the text results in outdir so that paths inside the checkout are
    relative to its root: results name the repository's layout, never this
    machine's."""
    for name in sorted(os.listdir(outdir)):
        if not name.endswith((".txt", ".md", ".json", ".jsonl", ".csv")):
            continue
        path = os.path.join(outdir, name)
        with open(path) as f:
            text = f.read()
        new = text.replace(ROOT + "/", "").replace(ROOT, ".")
        if new != text:
            with open(path, "w") as f:
                f.write(new)


def machine_facts(detail=False):
    """Kernel, CPU count and model; with detail also Python, memory and the C compiler."""
    facts = {"kernel": os.uname().release, "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    facts["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if detail:
        facts["python"] = platform.python_version()
        try:
            with open("/proc/meminfo") as f:
                facts["mem"] = f.readline().split(":", 1)[1].strip()
        except OSError:
            pass
        facts["cc"] = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return facts


def git_commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + (" (work tree has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def command_line(argv=None):
    """The driver's command line with the script relative to the checkout."""
    argv = sys.argv if argv is None else argv
    return " ".join(["python3", os.path.relpath(os.path.abspath(argv[0]), ROOT)] + argv[1:])


def kdata_limit():
    """GC_KDATA from bpf/fanout.h: per-recipient bytes the kernel engine splices itself."""
    import re
    try:
        with open(os.path.join(ROOT, "bpf", "fanout.h")) as f:
            m = re.search(r"#define\s+GC_KDATA\s+(\d+)", f.read())
            return int(m.group(1)) if m else None
    except OSError:
        return None


def write_json(path, obj, indent=1):
    with open(path, "w") as f:
        json.dump(obj, f, indent=indent)


def write_dicts_csv(path, rows, keys=None):
    """rows (dicts) as CSV; keys default to the first row's, other keys ignored."""
    keys = list(rows[0].keys()) if keys is None else keys
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def fmt_us(ns):
    return "-" if ns is None else f"{ns / 1e3:.1f}" if ns < 1e6 else f"{ns / 1e3:.0f}"


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# --- group.py: its CSVs and results.md tables ------------------------------------------------------

def write_csvs(outdir, runner, g2, f5, g3):
    with open(os.path.join(outdir, "rows.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["experiment", "point", "point_status", "attempt", "attempt_status", "n", "size",
                    "replace", "prepend", "append", "sendgroup", "sends", "interval_us", "engine", "rep",
                    "cpu_ns_per_send", "wall_ns_per_send", "machine_busy_ns_per_send", "datagrams",
                    "failed", "timing", "timer_cpu_ns", "stats_ok", "warmup"])
        for p in runner.points:
            for a in p["attempts"]:
                for row in a["rows"]:
                    w.writerow([p["experiment"], p["key"], p["status"], a["attempt"], a["status"], p["n"],
                                p["size"], p["replace"], p["prepend"], p["append"], p["sendgroup"],
                                p["sends"], a["interval_us"], row["engine"], row["rep"],
                                row["cpu_ns_per_send"], row["wall_ns_per_send"],
                                row["machine_busy_ns_per_send"], row["datagrams"], row["failed"],
                                row["timing"], row["timer_cpu_ns"], row.get("stats_ok"), row.get("warmup")])
    with open(os.path.join(outdir, "medians.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["experiment", "point", "status", "n", "size", "replace", "prepend", "append", "engine",
                    "reps", "cpu_ns_median", "cpu_ns_min", "cpu_ns_max", "wall_ns_median", "wall_ns_min",
                    "wall_ns_max", "machine_busy_ns_median", "cpu_ns_per_member", "speedup_vs_loop"])
        for p in runner.points:
            if p["experiment"] == "F5":
                continue
            loop = p["medians"].get("loop", {}).get("cpu_ns")
            for e in p["engines"]:
                m = p["medians"].get(e)
                if not m:
                    w.writerow([p["experiment"], p["key"], p["status"], p["n"], p["size"], p["replace"],
                                p["prepend"], p["append"], e] + [""] * 10)
                    continue
                w.writerow([p["experiment"], p["key"], p["status"], p["n"], p["size"], p["replace"],
                            p["prepend"], p["append"], e, m["reps"], m["cpu_ns"], m["cpu_min"], m["cpu_max"],
                            m["wall_ns"], m["wall_min"], m["wall_max"], m["busy_ns"],
                            round(m["cpu_ns"] / p["n"], 1), round(loop / m["cpu_ns"], 3) if loop else ""])
    if g2:
        with open(os.path.join(outdir, "g2.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["table", "metric", "size", "replace", "rows_by", "paper_N", "N", "send_ms", "other_ms",
                        "engine", "send2_ms", "total2_ms", "factor", "N2_paper_method", "N2_fixed_other",
                        "extrapolated"])
            for t in g2["tables"]:
                for row in t["rows"]:
                    for e, v in row["engines"].items():
                        w.writerow([t["name"], t["metric"], t["size"], t["replace"], t["rows_by"],
                                    row["paper_N"], round(row["N"], 1), round(row["send_ms"], 4),
                                    round(row["other_ms"], 4), e, round(v["send_ms"], 4),
                                    round(v["total_ms"], 4), round(v["factor"], 4), round(v["N_paper"], 1),
                                    round(v["N_fixed_other"], 1), v["extrapolated"]])
    if f5:
        with open(os.path.join(outdir, "f5.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["engine", "size", "n", "category", "samples", "percent", "ns_per_member", "basis"])
            for run in f5["runs"]:
                for c in F5_ORDER:
                    w.writerow([run["engine"], run["size"], run["n"], c, run.get("counts", {}).get(c, ""),
                                round(run["percent"][c], 2) if run.get("percent") else "",
                                round(run["ns_per_member"][c], 1) if run.get("ns_per_member") else "",
                                run.get("cpu_ns_basis", "")])
    if g3:
        pass  # in medians.csv (experiment G3)


def g1_markdown(points, engines, sizes):
    md = []
    for size in sizes:
        for replace in (False, True):
            pts = sorted((p for p in points if p["size"] == size and p["replace"] == replace), key=lambda p: p["n"])
            if not pts:
                continue
            mode = "group replaced before every send (gc_setgroup + gc_send)" if replace \
                else "fixed group (gc_setgroup once per rep, gc_send)"
            md.append(f"\n#### {size} B payload, {mode}\n")
            md.append("Sender CPU per group send, µs: median over reps (min..max). Wall time per send in the "
                      "second table. LOST: some datagram did not arrive intact; not averaged in.\n")
            rows = []
            for p in pts:
                cells = [str(p["n"])]
                for e in engines:
                    m = p["medians"].get(e)
                    cells.append(f"{fmt_us(m['cpu_ns'])} ({fmt_us(m['cpu_min'])}..{fmt_us(m['cpu_max'])})"
                                 if m else "LOST")
                cells.append(f"{p['sends']}x{p['reps']}, {p['interval_us']} µs" + (" (retried)" if p["retried"] else ""))
                rows.append(cells)
            md.append(md_table(["N"] + engines + ["sends x reps, pacing"], rows))
            paper_n, paper_r, paper_what = papers.RATIO_100 if size == 100 else papers.RATIO_1000 \
                if size == 1000 else (None, None, None)
            md.append("\nSpeed-up against loop (loop CPU / engine CPU, medians of the same run; >1 = faster "
                      "than loop), wall-time speed-up in brackets, and the papers' figure beside the closest N:\n")
            rows = []
            nearest = min((p["n"] for p in pts), key=lambda n: abs(math.log(n / paper_n))) if paper_n else None
            for p in pts:
                m = p["medians"]
                cells = [str(p["n"])]
                for e in engines:
                    if e == "loop":
                        continue
                    if not m.get(e) or not m.get("loop"):
                        cells.append("LOST")
                        continue
                    cells.append(f"{m['loop']['cpu_ns'] / m[e]['cpu_ns']:.2f}× "
                                 f"({m['loop']['wall_ns'] / m[e]['wall_ns']:.2f}×)")
                cells.append(f"{paper_r:.2f}× at N={paper_n}" if p["n"] == nearest else "")
                rows.append(cells)
            md.append(md_table(["N"] + [e for e in engines if e != "loop"] + ["paper"], rows))
            if paper_n:
                md.append(f"\nPaper: {paper_what}.")
            rows = []
            for p in pts:
                cells = [str(p["n"])]
                for e in engines:
                    m = p["medians"].get(e)
                    cells.append(f"{fmt_us(m['wall_ns'])}" if m else "LOST")
                for e in engines:
                    m = p["medians"].get(e)
                    cells.append(f"{m['cpu_ns'] / p['n']:.0f}" if m else "LOST")
                rows.append(cells)
            md.append("\nWall time per send (µs, median) and sender CPU per member (ns):\n")
            md.append(md_table(["N"] + [f"{e} wall" for e in engines] + [f"{e} ns/member" for e in engines], rows))
    return "\n".join(md)


def headline_markdown(g1, g2, engines):
    """The numbers most people want: speed-up against loop at N=1000, and G2's last row."""
    md = ["\n## Summary\n"]
    n = 1000 if any(p["n"] == 1000 for p in g1) else max(p["n"] for p in g1)
    cols = [(size, rep) for size in (100, 1000) for rep in (False, True)]
    rows = []
    for e in engines:
        if e == "loop":
            continue
        cells = [e]
        for size, rep in cols:
            p = next((p for p in g1 if p["n"] == n and p["size"] == size and p["replace"] == rep), None)
            m = p["medians"] if p else {}
            cells.append(f"{m['loop']['cpu_ns'] / m[e]['cpu_ns']:.2f}×" if e in m and "loop" in m else "LOST")
        rows.append(cells)
    cells = ["loop (µs per send)"]
    for size, rep in cols:
        p = next((p for p in g1 if p["n"] == n and p["size"] == size and p["replace"] == rep), None)
        cells.append(fmt_us(p["medians"]["loop"]["cpu_ns"]) if p and "loop" in p["medians"] else "LOST")
    rows.append(cells)
    md.append(f"Sender CPU speed-up against loop at N={n} (loop / engine, medians of interleaved reps):\n")
    md.append(md_table(["engine", "100 B fixed", "100 B replaced", "1000 B fixed", "1000 B replaced"], rows))
    md.append(f"\nThe papers: {papers.RATIO_100[1]:.2f}× at N={papers.RATIO_100[0]} ({papers.RATIO_100[2]}); "
              f"{papers.RATIO_1000[1]:.3f}× at N={papers.RATIO_1000[0]} ({papers.RATIO_1000[2]}).")
    if g2:
        t = next((t for t in g2["tables"] if t["name"] == "cpu_ns-send"), None)
        if t and t["rows"]:
            last = t["rows"][-1]
            parts = [f"{e} {v['factor']:.2f}× (N' {v['N_paper']:.0f} paper method, {v['N_fixed_other']:.0f} "
                     f"fixed other)" for e, v in last["engines"].items()]
            md.append(f"\nG2, the paper's last row (send takes 33.06 of the 33.33 ms frame): our loop reaches "
                      f"that at N={last['N']:.0f}; improvement " + "; ".join(parts) + ". Paper: 4.52× (N' 2170).")
    return "\n".join(md)


def pacing_markdown(g1, g1p, engines):
    md = [f"\n#### Pacing check: 100 B, fixed group, the small groups paced too\n",
          f"Up to N={UNPACED_MAX_N} the G1 sends above go back to back; here the same sizes are paced "
          f"(sleep after every send, timed per send) like the larger groups. The difference is mostly a "
          f"per-send constant: after each sleep the receiving CPU 1 is idle and the first datagram of a send "
          f"wakes it with an inter-processor interrupt, which costs the sender several µs in this VM "
          f"(F5, 'IPI to wake CPU 1'). Sender CPU per send, µs (median), back to back / paced:\n"]
    rows = []
    for p in sorted(g1p, key=lambda p: p["n"]):
        q = next((x for x in g1 if x["size"] == 100 and not x["replace"] and x["n"] == p["n"]), None)
        cells = [p["n"]]
        for e in engines:
            a = q["medians"].get(e, {}).get("cpu_ns") if q else None
            b = p["medians"].get(e, {}).get("cpu_ns")
            cells.append(f"{fmt_us(a) if a else 'LOST'} / {fmt_us(b) if b else 'LOST'}")
        rows.append(cells)
    md.append(md_table(["N"] + engines, rows))
    return "\n".join(md)


def shuffle_markdown(g1, g1s, engines):
    md = ["\n#### Group shuffled before every send, N=1000\n",
          "The same members in another order before every send (`blast --shuffle`: the member array "
          "shuffled in place, not timed, then gc_setgroup and gc_send, timed). Sender CPU per send, µs "
          "(median), and its ratio to the fixed group above (separate blast runs):\n"]
    rows = []
    for p in g1s:
        q = next((x for x in g1 if x["size"] == p["size"] and not x["replace"] and x["n"] == p["n"]), None)
        cells = [f"{p['size']} B"]
        for e in engines:
            a = q["medians"].get(e, {}).get("cpu_ns") if q else None
            b = p["medians"].get(e, {}).get("cpu_ns")
            cells.append(f"{fmt_us(b)} ({b / a:.2f}× fixed)" if a and b else fmt_us(b) if b else "LOST")
        rows.append(cells)
    md.append(md_table(["payload"] + engines, rows))
    return "\n".join(md)


def g2_markdown(g2, engines):
    md = ["Paper's Table 1 (seed 000; 100 B, FreeBSD 5.2.1 on a 400 MHz Pentium II; ms). Its N' is "
          "N × factor (checked: the last column recomputes it from the paper's own numbers):\n"]
    rows = [[n, f"{s:.2f}", f"{o:.2f}", f"{s2:.2f}", f"{t:.2f}", f"{fct:.2f}", np_,
             f"{papers.FRAME_MS / (o + s2):.2f} / {n * papers.FRAME_MS / (o + s2):.0f}"]
            for n, s, o, s2, t, fct, np_ in papers.TABLE1]
    md.append(md_table(["N", "send", "other", "send'", "total'", "factor", "N'", "recomputed factor / N'"], rows))
    for t in g2["tables"]:
        md.append(f"\n#### {t['title']}\n")
        if not t["rows"]:
            md.append("Not enough verified G1 points.")
            continue
        eng = [e for e in engines if e != "loop" and e in t["rows"][0]["engines"]]
        rows = []
        for row in t["rows"]:
            cells = [row["paper_N"], f"{row['N']:.0f}", f"{row['send_ms']:.2f}", f"{row['other_ms']:.2f}"]
            for e in eng:
                v = row["engines"][e]
                star = "*" if v["extrapolated"] else ""
                cells.append(f"{v['send_ms']:.2f} / {v['total_ms']:.2f} / **{v['factor']:.2f}** / "
                             f"{v['N_paper']:.0f} / {v['N_fixed_other']:.0f}{star}")
            rows.append(cells)
        md.append(md_table(["paper N", "our N", "send (loop)", "other"] +
                           [f"{e}: send' / total' / factor / N' (paper) / N' (fixed other)" for e in eng], rows))
    md.append("\n`*`: uses a send time beyond the largest measured group size (extended with the last "
              "measured per-member slope).")
    return "\n".join(md)


def f5_markdown(f5):
    md = []
    for note in f5["notes"]:
        md.append(f"- Note: {note}")
    sizes = sorted({r["size"] for r in f5["runs"]})
    for size in sizes:
        runs = [r for r in f5["runs"] if r["size"] == size]
        md.append(f"\n#### N=1000, {size} B payload\n")
        header = ["category"]
        for r in runs:
            header += [f"{r['engine']} %", f"{r['engine']} ns/member"]
        rows = []
        for c in F5_ORDER:
            cells = [c]
            for r in runs:
                pc, ns = r.get("percent"), r.get("ns_per_member")
                cells += [f"{pc[c]:.1f}" if pc else "-", f"{ns[c]:.0f}" if ns else "-"]
            rows.append(cells)
        cells = ["**total**"]
        for r in runs:
            ns = r.get("ns_per_member")
            cells += ["100", f"**{sum(ns.values()):.0f}**" if ns else "-"]
        rows.append(cells)
        cells = ["total without the IPI"]
        for r in runs:
            ns, pc = r.get("ns_per_member"), r.get("percent")
            cells += [f"{100 - pc[IPI]:.1f}" if pc else "-", f"{sum(ns.values()) - ns[IPI]:.0f}" if ns else "-"]
        rows.append(cells)
        md.append(md_table(header, rows))
        by = {r["engine"]: r for r in runs if r.get("ns_per_member")}
        if "loop" in by and "kernel" in by:
            lt, kt = sum(by["loop"]["ns_per_member"].values()), sum(by["kernel"]["ns_per_member"].values())
            li, ki = lt - by["loop"]["ns_per_member"][IPI], kt - by["kernel"]["ns_per_member"][IPI]
            md.append(f"\nSpeed-up kernel vs loop from these numbers: {lt / kt:.2f}× as measured, "
                      f"{li / ki:.2f}× without the IPIs to CPU 1 (a cost of this lab: see bench/README.md).")
        for r in runs:
            md.append(f"\n- {r['engine']}: {r.get('samples_counted', 0)} samples counted of "
                      f"{r.get('samples_total', 0)} ({r.get('samples_pacing', 0)} in the pacing sleep and "
                      f"{r.get('samples_outside_window', 0)} outside the send window left out); status "
                      f"{r['status']}; ns/member scaled to {r.get('cpu_ns_basis', '-')}: "
                      f"{fmt_us(r.get('cpu_ns_g1') or r.get('cpu_ns_under_profiler'))} µs per send "
                      f"(under perf: {fmt_us(r.get('cpu_ns_under_profiler'))} µs)"
                      + (f"; FALLBACK: {r['fallback']}" if r.get("fallback") else ""))
            if r.get("top"):
                tops = "; ".join(f"{c}: " + ", ".join(f"{s} {k}" for s, k in r["top"][c][:4])
                                 for c in F5_ORDER if c in r["top"])
                md.append(f"  - leaf symbols (samples): {tops}")
    return "\n".join(md)


def g3_markdown(points, engines, kdata):
    md = []
    for n in sorted({p["n"] for p in points}):
        pts = [p for p in points if p["n"] == n]
        md.append(f"\n#### N={n}\n")
        md.append("Sender CPU per gc_sendgroup() call, µs (median over reps); each member gets prepend | "
                  "payload | append, with prepend = append = s bytes. Last column: loop / kernel.\n")
        rows = []
        for p in sorted(pts, key=lambda p: (p["size"], p["prepend"])):
            flags = []
            if p.get("fragmented"):
                flags.append("frag")
            if kdata is not None and (p["prepend"] > kdata or p.get("fragmented")) and "kernel" in engines:
                flags.append("kernel→mmsg")
            cells = [p["size"], p["prepend"], p["size"] + 2 * p["prepend"], " ".join(flags)]
            m = p["medians"]
            for e in engines:
                cells.append(fmt_us(m[e]["cpu_ns"]) if e in m else "LOST")
            if "kernel" in m and "loop" in m:
                cells.append(f"{m['loop']['cpu_ns'] / m['kernel']['cpu_ns']:.2f}×")
            else:
                cells.append("-")
            rows.append(cells)
        md.append(md_table(["payload B", "s", "datagram B", "notes"] + engines + ["speed-up kernel"], rows))
    md.append(f"\n`frag`: the datagram is more than {UDP4_MAX_UNFRAGMENTED} bytes and goes out as IP "
              f"fragments. `kernel→mmsg`: the kernel engine hands these members to the mmsg engine (more "
              f"than GC_KDATA = {kdata} bytes of prepend or append, or fragmentation; lib/group/kernel.c), "
              f"so its column measures that fallback.")
    return "\n".join(md)


def write_group_command(outdir, raw, elapsed, timings):
    """group.py's command.txt: the command, commit, machine, lab and durations."""
    cmd, facts, engines, skipped = raw["command"], raw["machine"], raw["engines"], raw["skipped_engines"]
    lost, all_pts = raw["lost_points"], raw["points"]
    with open(os.path.join(outdir, "command.txt"), "w") as f:
        f.write(f"command:  {cmd}\n")
        f.write(f"cwd:      {os.getcwd()}\n")
        f.write(f"started:  {raw['started']}\n")
        f.write(f"duration: {elapsed:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in timings.items())})\n")
        f.write(f"commit:   {raw['commit']}\n")
        f.write(f"build:    {raw['build']}\n")
        f.write(f"machine:  {json.dumps(facts)}\n")
        if raw.get("load_1min"):
            f.write(f"load:     1-minute load average {raw['load_1min']['start']} at the start, "
                    f"{raw['load_1min']['end']} at the end (the benchmark's own sender and sinks included)\n")
        f.write(f"engines:  {', '.join(engines)}" + (f" (unavailable: {skipped})" if skipped else "") + "\n")
        f.write(f"perf:     {shutil.which('perf') or 'not installed'}\n")
        f.write("lab:      gcbench.make_lab(2): sender ns + 2 receiver ns (veth), RPS of the receiving veths "
                "to CPU 1, net.core.netdev_max_backlog=20000 (restored), blast pinned to CPU 0, sinks to CPU 1\n")
        f.write(f"points:   {len(all_pts)}, {len(lost)} LOST" + (f": {lost}" if lost else "") + "\n")


def write_group_results(outdir, raw, elapsed, g1, g1p, g1s, g3, prev, made):
    """group.py's results.md: the summary, then G1, G2, F5 and G3 as far as they ran."""
    cmd, facts, engines, skipped = raw["command"], raw["machine"], raw["engines"], raw["skipped_engines"]
    lost, all_pts, g2, f5, kd, cfg = raw["lost_points"], raw["points"], raw["g2"], raw["f5"], raw["gc_kdata"], raw["config"]
    md = [f"# Group unicast on this machine: G1, G2, F5, G3\n",
          f"`{cmd}` — {raw['started']}, {elapsed / 60:.1f} min, commit `{raw['commit']}`  ",
          f"Machine: {facts.get('cpu', '?')}, {facts.get('cpus')} CPUs, Linux {facts.get('kernel')}. "
          f"Engines: {', '.join(engines)}" + (f" (unavailable: {skipped})" if skipped else "") + ".  ",
          *([f"1-minute load average {raw['load_1min']['start']} at the start, {raw['load_1min']['end']} at the "
             "end (the benchmark's own sender and sinks included; other work on the 2 CPUs shows here and "
             "makes every ratio noisier).  "] if raw.get("load_1min") else []),
          "Sender CPU = CLOCK_THREAD_CPUTIME_ID of the sending thread on CPU 0, around each send (pacing "
          "sleeps not counted); receive work on CPU 1 (RPS); engines interleaved within every point. "
          "How to read this: bench/README.md.\n",
          f"**Verification: {len(all_pts) - len(lost)} of {len(all_pts)} points had every datagram "
          f"delivered intact.**" + (f" LOST: {', '.join(lost)}." if lost else "")]
    if g1 and not prev:
        md.append(headline_markdown(g1, g2, engines))
    retried = [p["key"] for p in all_pts if p["retried"]]
    if retried:
        md.append(f"\nRetried with twice the pacing after a loss (the lost attempt is in raw.json): "
                  f"{', '.join(retried)}.")
    if g1:
        md.append("\n## G1: one group send against group size (paper Fig. 3/4)\n")
        md.append("Plots: `g1_cpu.png`, `g1_wall.png`, `g1_speedup.png`.")
        if prev:
            md.append(f"(G1 not re-run: from {prev.get('started')}.)")
        else:
            md.append(g1_markdown(g1, engines, cfg["g1_sizes"]))
            if g1p:
                md.append(pacing_markdown(g1, g1p, engines))
            if g1s:
                md.append(shuffle_markdown(g1, g1s, engines))
    if g2:
        md.append("\n## G2: players a 30 frame/s server could serve (paper Table 1)\n")
        md.append("Method (the paper's): send = loop's time for one group send to N players; other = 33.33 ms "
                  "- send; send' = the engine's time for N; total' = other + send'; factor = 33.33 / total'. "
                  "N' (paper) = N × factor, which reproduces the paper's own N' column (all work scales with "
                  "the players). N' (fixed other) = the largest group whose engine send fits into send, i.e. "
                  "other stays fixed and only the send part grows. Send times between measured group sizes "
                  "are interpolated linearly in N on the G1 medians (fixed group, 100 B), and beyond the "
                  "largest measured N extended with the last per-member slope.\n")
        md.append(g2_markdown(g2, engines))
    if f5:
        md.append("\n## F5: where a send's time goes (paper Fig. 5)\n")
        md.append("`perf record -e cpu-clock -g` of one blast per engine (N=1000, fixed group); samples of "
                  "the blast process between its first and last sample under udp_sendmsg, without the "
                  "pacing sleeps. Each sample is charged to the first frame, from the leaf up, whose symbol "
                  "falls in a category (rules in bench/gcbench/profile.py). ns/member = share × the G1 median CPU per "
                  "send at N=1000 / 1000 (the profiler itself inflates CPU time). Plot: `f5_breakdown.png`.\n")
        md.append(f5_markdown(f5))
    if g3:
        md.append("\n## G3: sendgroup() with per-recipient data (sendgroup slides)\n")
        md.append("Plot: `g3_sendgroup.png` (CPU per member).")
        md.append(g3_markdown(g3, engines, kd))
    md.append(f"\nFiles: raw.json (every point, attempt and rep), rows.csv (every rep), medians.csv, "
              + ("g2.csv, " if g2 else "") + ("f5.csv, " if f5 else "") + ", ".join(made) + ", command.txt.")
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
