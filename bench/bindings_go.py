#!/usr/bin/env python3
"""The Go binding's cost (issue 21 item 4): process CPU per group send of
1000 B to N = 1000 members, three methods in the same run, interleaved:

  go-loop    Go, WriteToUDPAddrPort once per member (what a Go SFU does today)
  go-group   Go, groupcast.Group.Send on the kernel engine (one cgo call per group)
  c-group    C, gc_send() on the kernel engine (bench/bindings_send.c)

    python3 bench/bindings_go.py [--build build] [--repeats 9] [--sends 300] [--out DIR]

Each run is a fresh process in the sender namespace of a lab (one veth to a
receiver namespace), pinned to CPU 0 (taskset), receive work steered to CPU 1
(RPS); the receiver drops the datagrams in nftables prerouting (no socket, no
ICMP), so what is timed is the sender.  Sends are paced (--pace-us): unpaced,
the kernel engine's clones overflow the veth's queue.  CPU is
getrusage(RUSAGE_SELF), every thread of the process (the Go runtime's too),
read before and after each send and summed over the sends (not the sleeps),
after one warm-up send.  Medians over the repeats; the ratios are of medians from the
same run.  Results: bench/results/bindings/ (go.csv, go.md, go.png, command.txt).
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "lab"))
from netlab import Lab  # noqa: E402

METHODS = ["go-loop", "go-group", "c-group"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--sends", type=int, default=300)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--pace-us", type=int, default=3000,
                    help="sleep between sends, every method: unpaced, the kernel engine's clones overflow the "
                         "veth's queue (ENOBUFS)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "bindings"))
    a = ap.parse_args()
    go = shutil.which("go") or "/usr/local/go/bin/go"
    cbin = os.path.join(a.build, "bench", "bindings_send")
    tmp = tempfile.mkdtemp(prefix="gcgobench-")
    try:
        prefix = os.path.join(tmp, "prefix")
        subprocess.run(["cmake", "--install", a.build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
        gobin = os.path.join(tmp, "bindings_go")
        env = dict(os.environ, GOTOOLCHAIN="local", PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"),
                   CGO_LDFLAGS="-Wl,-rpath," + os.path.join(prefix, "lib"))
        subprocess.run([go, "build", "-o", gobin, "."], cwd=os.path.join(HERE, "bindings_go"), env=env, check=True)
        rows = run(a, gobin, cbin)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(a, rows, go)


def run(a, gobin, cbin):
    rows = []
    with Lab() as lab:
        star = lab.star(1)
        link = star.links[0]
        lab.set_rps(link.b.ns, link.b.ifname, 0x2)
        lab.run(link.b.ns, ["nft", "add table ip gcbench; add chain ip gcbench pre { type filter hook prerouting "
                            f"priority -300; }}; add rule ip gcbench pre udp dport 20000-{20000 + a.n} drop"])
        dst = f"{link.b.v4}:20000"
        cmds = {
            "go-loop": [gobin, "-method", "loop", "-dst", dst],
            "go-group": [gobin, "-method", "group", "-engine", "kernel", "-dst", dst],
            "c-group": [cbin, "kernel", link.b.v4, 20000],
        }
        for r in range(a.repeats):
            order = METHODS[r % 3:] + METHODS[:r % 3]
            for m in order:
                argv = cmds[m]
                if m.startswith("go"):
                    argv = argv + ["-n", a.n, "-size", a.size, "-sends", a.sends, "-pace", f"{a.pace_us}us"]
                else:
                    argv = argv + [a.n, a.size, a.sends, a.pace_us]
                out = lab.run(star.sender, ["taskset", "-c", "0", *argv], capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    sys.exit(f"{m}: {out.stderr.strip()}")
                res = json.loads(out.stdout)
                rows.append({"repeat": r, "method": m, **res})
                print(f"repeat {r} {m}: {res['cpu_us_per_send']:.1f} us CPU per send", flush=True)
    return rows


def report(a, rows, go):
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "go.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["repeat", "method", "cpu_us_per_send", "wall_us_per_send"])
        w.writeheader()
        w.writerows(rows)
    med = {m: statistics.median(r["cpu_us_per_send"] for r in rows if r["method"] == m) for m in METHODS}
    rng = {m: (min(r["cpu_us_per_send"] for r in rows if r["method"] == m),
               max(r["cpu_us_per_send"] for r in rows if r["method"] == m)) for m in METHODS}
    loop_ratio = med["go-loop"] / med["go-group"]
    c_ratio = med["go-group"] / med["c-group"]
    gov = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
    lines = [f"# Go binding: CPU per group send, N={a.n}, {a.size} B, kernel engine",
             "", f"{a.repeats} repeats x {a.sends} sends per method, {a.pace_us} us apart, interleaved; {gov}", "",
             "| method | median CPU us/send | min | max |", "|---|---|---|---|"]
    lines += [f"| {m} | {med[m]:.1f} | {rng[m][0]:.1f} | {rng[m][1]:.1f} |" for m in METHODS]
    lines += ["", f"go-loop / go-group: {loop_ratio:.2f}x less CPU (target >= 5x)",
              f"go-group / c-group: {c_ratio:.3f} ({(c_ratio - 1) * 100:+.1f} %, target within 10 %)"]
    with open(os.path.join(a.out, "go.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    with open(os.path.join(a.out, "command.txt"), "w") as f:
        f.write("sudo python3 bench/bindings_go.py " + " ".join(sys.argv[1:]) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(METHODS, [med[m] for m in METHODS], color=["#999", "#36c", "#c63"],
           yerr=[[med[m] - rng[m][0] for m in METHODS], [rng[m][1] - med[m] for m in METHODS]], capsize=4)
    ax.set_ylabel("process CPU per group send (us)")
    ax.set_title(f"N={a.n}, {a.size} B: Go loop vs Group.Send vs C gc_send\n"
                 f"loop/group {loop_ratio:.1f}x, Go/C {c_ratio:.3f} (median of {a.repeats}; bars: min-max)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "go.png"), dpi=120)


if __name__ == "__main__":
    main()
