#!/usr/bin/env python3
"""Our CCID 2 sender against Linux 6.1's under random loss (issue 19, item 2).

    sudo python3 bench/dccp_loss.py --build build --label after [--reps 5] [--loss 0.10]
                                    [--count 2000] [--size 1000] [--out DIR]

One Linux 6.1 guest (tests/interop/linux61.py) linked to a lab namespace by a
tap, as in tests/interop/test_dccp_interop.py; bpf/loss.bpf.c on the tap drops
--loss of the packets each way (the harness's LossOnTap: the host kernel has no
netem).  Per repetition and family (IPv4, IPv6), interleaved:

- linux: dccp_peer client in the guest (Linux's CCID 2 sender, as fast as its
  socket takes datagrams) -> `groupcast dccp listen` in the namespace;
- ours:  `groupcast dccp send` (our CCID 2 sender, as fast as the CCID allows)
  -> dccp_peer server in the guest.

Both send --count datagrams of --size bytes with the payload both programs
check (`--payload gc`).  tcpdump on the tap times the sender's Data and
DataAck packets; goodput = the payload bytes the receiving application got x 8
/ (last data packet - first data packet), in Mb/s.  Also per run: send gaps
over 100 ms (count, sum, longest) in the sender's data as captured, and the
sender's own counters.  Ratio: median(ours) / median(linux) per family, the
two medians from the same invocation.

Each invocation writes raw_<label>.json in --out, and results.md is rebuilt
from every raw_*.json there (e.g. `before` on main's code, `after`).
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "lab"), str(ROOT / "tests" / "interop")]
from netlab import Lab  # noqa: E402
from linux61 import Linux61Guest, fetch  # noqa: E402
from test_dccp_interop import addrs, data_times, run_gc_to_linux, run_linux_to_gc  # noqa: E402

GAP_S = 0.1


def gaps(times: list[float]) -> dict:
    d = [b - a for a, b in zip(times, times[1:]) if b - a > GAP_S]
    return {"gaps_over_100ms": len(d), "gap_sum_s": round(sum(d), 3), "gap_max_s": round(max(d, default=0), 3)}


def timed(pcap: Path, sender: str, got_bytes: int) -> dict:
    t = data_times(pcap, sender)
    span = t[-1] - t[0] if len(t) > 1 else 0.0
    return {"data_captured": len(t), "span_s": round(span, 3),
            "goodput_mbps": round(got_bytes * 8 / span / 1e6, 3) if span > 0 else 0.0, **gaps(t)}


def run_linux(guest, gc_tool, a, family, port, work):
    """Linux's sender (dccp_peer client in the guest) -> our listener."""
    rc, rx, err, cli, pcap, counts = run_linux_to_gc(guest, gc_tool, 2, a.loss, work, port, family, count=a.count,
                                                     size=a.size, interval_us=0)
    assert cli.json and cli.json.get("sent") == a.count, cli
    assert rx["corrupt"] == 0, rx
    return {"sender": "linux", "rx": rx, "tx": cli.json, "tap": counts,
            **timed(pcap, addrs(guest, family)[1], rx["bytes"])}


def run_ours(guest, gc_tool, a, family, port, work):
    """Our sender (groupcast dccp send, as fast as the CCID allows) -> dccp_peer server in the guest."""
    rc, tx, err, srv, pcap, counts = run_gc_to_linux(guest, gc_tool, 2, a.loss, work, port, family, count=a.count,
                                                     size=a.size, rate=None)
    rx = srv.json
    assert rx and rx["corrupt"] == 0, (rx, err[-2000:])
    return {"sender": "ours", "rx": rx, "tx": tx, "tap": counts,
            **timed(pcap, addrs(guest, family)[0], rx["bytes"])}


def summary(runs: list[dict]) -> dict:
    out = {}
    for fam in (4, 6):
        med = {}
        for who in ("linux", "ours"):
            g = [r["goodput_mbps"] for r in runs if r["family"] == fam and r["sender"] == who]
            med[who] = statistics.median(g) if g else None
        ratio = med["ours"] / med["linux"] if med["ours"] is not None and med["linux"] else None
        out[fam] = {"linux": med["linux"], "ours": med["ours"], "ratio": ratio}
    return out


def fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def write_results(out: Path):
    raws = {p.stem[4:]: json.loads(p.read_text()) for p in sorted(out.glob("raw_*.json"))}
    order = sorted(raws, key=lambda k: (k != "before", k))
    lines = ["# CCID 2 sender under 10 % loss each way: groupcast against Linux 6.1", "",
             "Driver: `bench/dccp_loss.py` (see its docstring for the method).  Goodput = payload bytes "
             "the receiving application got x 8 / (last - first data packet of the sender on the tap), Mb/s. "
             "Ratio = median(ours) / median(Linux), both from the same invocation.  Loss: bpf/loss.bpf.c on the "
             "tap, both directions (the interop harness's LossOnTap: the host kernel has no netem); 'tap seen / "
             "dropped' are its counters.  'sender lost' is our sender's own count (`groupcast dccp send` prints "
             "it before its Close, so packets still unsettled then are in neither acked nor lost); Linux's "
             "sender has no such count.  'received': distinct packets the receiving application got.", ""]
    lines += ["## Medians", "", "| code | family | Linux -> groupcast (Linux's sender) | groupcast -> Linux (ours) "
              "| ratio ours / Linux |", "|---|---|---|---|---|"]
    for label in order:
        s = summary(raws[label]["runs"])
        for fam in (4, 6):
            f = s[fam]
            lines.append(f"| {label} | IPv{fam} | {fmt(f['linux'])} | {fmt(f['ours'])} | {fmt(f['ratio'])} |")
    for label in order:
        raw = raws[label]
        lines += ["", f"## {label}", "", f"Commit {raw['commit']}, {raw['date']}; loss {raw['loss']} each way, "
                  f"{raw['count']} x {raw['size']} B, {raw['reps']} repetitions." +
                  (f" {raw['note']}" if raw.get("note") else ""), "", "```sh", raw["command"], "```",
                  "", "| rep | family | sender | Mb/s | received | span s | gaps > 100 ms | gap sum s | longest s "
                  "| sender lost (its count) | tap seen / dropped |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in raw["runs"]:
            lost = r["tx"].get("lost", "-") if r["sender"] == "ours" else "-"
            lines.append(f"| {r['rep']} | IPv{r['family']} | {r['sender']} | {r['goodput_mbps']:.2f} | "
                         f"{r['rx']['received']} | {r['span_s']:.2f} | {r['gaps_over_100ms']} | {r['gap_sum_s']:.2f} | "
                         f"{r['gap_max_s']:.2f} | {lost} | {r['tap'][0]} / {r['tap'][1]} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--label", help="name of this code version in the results (before, after...)")
    ap.add_argument("--note", default="", help="a sentence about this code version, kept in the results")
    ap.add_argument("--report", action="store_true", help="only rebuild results.md from the raw_*.json in --out")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--loss", type=float, default=0.10)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--families", default="4,6")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "dccp" / "loss-vs-linux"))
    a = ap.parse_args()
    if a.report:
        write_results(Path(a.out))
        return
    if not a.label:
        ap.error("--label is required (or --report)")
    if not 0 <= a.loss < 1 or a.reps < 1 or a.count < 1 or not 8 <= a.size <= 1400:
        ap.error("--loss in [0, 1), --reps and --count >= 1, --size in 8..1400")
    if not a.label.isidentifier():
        ap.error(f"--label {a.label!r}: letters, digits and _ only")
    build = Path(a.build).resolve()
    tool, obj = build / "tools" / "groupcast", build / "bpf" / "loss.bpf.o"
    for p in (tool, obj):
        if not p.exists():
            sys.exit(f"dccp_loss: {p} missing: build first, or give --build")
    fams = [int(f) for f in a.families.split(",")]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    cmd = "sudo python3 bench/dccp_loss.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    runs = []
    with tempfile.TemporaryDirectory(prefix="gc-dccp-loss-") as tmp, Lab() as lab:
        ns = lab.add_ns("host")
        with Linux61Guest(lab, ns, fetch()) as g:
            port = 7100
            for rep in range(a.reps):
                for fam in fams:
                    for fn in (run_linux, run_ours):
                        port += 1
                        work = Path(tmp) / str(port)
                        work.mkdir()
                        r = fn(g, (tool, obj), a, fam, port, work)
                        r.update(rep=rep, family=fam)
                        runs.append(r)
                        print(f"rep {rep} IPv{fam} {r['sender']:5}: {r['goodput_mbps']:.2f} Mb/s, "
                              f"{r['rx']['received']} received, {r['gaps_over_100ms']} gaps > 100 ms "
                              f"({r['gap_sum_s']:.2f} s, longest {r['gap_max_s']:.2f} s)", flush=True)
    raw = {"label": a.label, "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": cmd, "note": a.note, "loss": a.loss, "count": a.count, "size": a.size, "reps": a.reps, "runs": runs}
    (out / f"raw_{a.label}.json").write_text(json.dumps(raw, indent=1) + "\n")
    write_results(out)
    for fam, s in summary(runs).items():
        print(f"IPv{fam}: linux {fmt(s['linux'])} Mb/s, ours {fmt(s['ours'])} Mb/s, ratio {fmt(s['ratio'])}")


if __name__ == "__main__":
    main()
