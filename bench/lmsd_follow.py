#!/usr/bin/env python3
"""How soon lmsd forwards LMS for a new (S,G) after the kernel installs it
(issue 19, item 7; target: within 50 ms).

    sudo python3 bench/lmsd_follow.py --build build [--reps 21] [--gap-us 200] [--window-ms 300]

Lab: s - r1 - {h1, h2}.  On r1 a small routing daemon of our own
(tests/e2e/lmspkt.py MROUTER: an mroute socket on the default table, as
smcrouted and pimd hold) has vifs on r1's
three interfaces, and lmsd runs beside it with h1 as the replier of (S, G)
and a LMS-HIER period of a minute (-t 60000: nothing is timed by lmsd).
h2 sends an LMS request for (S, G) every GAP us, each stamped with its
CLOCK_MONOTONIC send time (one clock for every namespace); h1 receives what
r1 turns toward it.

Each repetition: the daemon deletes (S, G) and lmsd's state file shows it
gone; h2 starts a WINDOW ms train of requests; 30 ms into it the daemon
takes t_add (CLOCK_MONOTONIC) and calls MRT_ADD_MFC.  Until LMS-FWD has the
route, r1 drops the requests (drop_no_state).  The figure is the send time
of the first request h1 gets, minus t_add: when r1 began to forward LMS for
(S, G), late by at most one gap (and the request's own trip, tens of us).
Per run: the median over the repetitions, with min and max; a repetition
where h1 got nothing within the window is reported as missed.

--lmsd PATH measures another lmsd binary the same way (e.g. an older one;
give --interval-ms for its -t).  --spread-ms S waits a random 0..S ms
(seeded) before each train, so that a polling lmsd is not met at the same
phase of its period in every repetition.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "lab"))
from gcbench.report import command_line, git_commit, machine_facts, portable, write_json  # noqa: E402
from lmspkt import MROUTER, REQ, option  # noqa: E402
from netlab import Lab  # noqa: E402

G = "239.192.9.9"
PORT = 7900

# h2: per stdin line "REP MS", requests every gap_us for MS ms, payload
# (rep, seq, send_ns); prints the number sent and the median gap.
REQUESTER = r"""
import json, socket, struct, sys, time
a = json.loads(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((a["ifaddr"], 0))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(a["ifaddr"]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 16)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, bytes.fromhex(a["opts"]))
print("ready", flush=True)
for line in sys.stdin:
    rep, ms = map(int, line.split())
    end = time.monotonic_ns() + ms * 1000000
    seq, last, gaps = 0, 0, []
    while True:
        t = time.monotonic_ns()
        if t >= end:
            break
        if last:
            gaps.append(t - last)
        last = t
        s.sendto(struct.pack("!IIQ", rep, seq, t), (a["group"], a["port"]))
        seq += 1
        time.sleep(a["gap_us"] / 1e6)
    gaps.sort()
    print(json.dumps({"sent": seq, "gap_ns": gaps[len(gaps) // 2] if gaps else 0}), flush=True)
"""

# h1: each request received: (rep, seq, send_ns, recv_ns) as a JSON line.
RECEIVER = r"""
import json, socket, struct, sys, time
a = json.loads(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", a["port"]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(a["group"]) + socket.inet_aton(a["ifaddr"]))
print("ready", flush=True)
while True:
    d = s.recv(100)
    t = time.monotonic_ns()
    if len(d) == 16:
        rep, seq, sent = struct.unpack("!IIQ", d)
        print(json.dumps([rep, seq, sent, t]), flush=True)
"""


def state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def wait_state(path, pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = state(path)
        if st and pred(st):
            return st
        time.sleep(0.01)
    raise RuntimeError(f"lmsd state never matched: {state(path)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--lmsd", help="the lmsd binary (default: BUILD/tools/lmsd)")
    ap.add_argument("--interval-ms", type=int, default=60000, help="lmsd -t (default 60000)")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--gap-us", type=int, default=200)
    ap.add_argument("--window-ms", type=int, default=300)
    ap.add_argument("--lead-ms", type=int, default=30, help="requests sent before the route is added")
    ap.add_argument("--spread-ms", type=int, default=0, help="random 0..S ms before each train")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "lms", "follow"))
    args = ap.parse_args()
    lmsd = os.path.abspath(args.lmsd or os.path.join(args.build, "tools", "lmsd"))
    os.makedirs(args.out, exist_ok=True)

    reps = []
    rnd = random.Random(args.seed)
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S, r1 = t.addr("s"), t.ns["r1"]
        ifs = [t.iface("r1", n).ifname for n in ("s", "h1", "h2")]

        def start(ns, prog, a):
            p = lab.popen(ns, [sys.executable, "-c", prog, json.dumps(a)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, bufsize=1)
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{ns}: helper did not start")
            return p

        daemon = start(r1, MROUTER, {"ifs": ifs, "src": S, "group": G})
        rx = start(t.ns["h1"], RECEIVER, {"port": PORT, "group": G, "ifaddr": t.addr("h1")})
        tx = start(t.ns["h2"], REQUESTER, {"ifaddr": t.addr("h2"), "group": G, "port": PORT,
                                           "gap_us": args.gap_us, "opts": option(REQ, S, G).hex()})
        conf = lab.workdir() / "lmsd.conf"
        conf.write_text(f"replier {S} {G} {ifs[1]} {t.addr('h1')}\n")
        st_path = lab.workdir() / "lmsd.json"
        lp = lab.popen(r1, [lmsd, "-c", conf, "-s", st_path, "-t", args.interval_ms],
                       stderr=subprocess.DEVNULL)
        wait_state(st_path, lambda st: len(st.get("interfaces", [])) == 3
                   and all(i["attached"] for i in st["interfaces"]))
        got = []
        import threading
        lock = threading.Lock()

        def read_rx():
            for line in rx.stdout:
                with lock:
                    got.append(json.loads(line))
        threading.Thread(target=read_rx, daemon=True).start()

        for rep in range(args.reps):
            daemon.stdin.write("del\n")
            daemon.stdout.readline()
            wait_state(st_path, lambda st: not st.get("routes"), timeout=max(10, 3 * args.interval_ms / 1000))
            time.sleep(0.05 + rnd.uniform(0, args.spread_ms) / 1000)
            tx.stdin.write(f"{rep} {args.window_ms}\n")
            time.sleep(args.lead_ms / 1000)
            daemon.stdin.write("add\n")
            t_add = int(daemon.stdout.readline())
            daemon.stdout.readline()  # added
            sent = json.loads(tx.stdout.readline())
            time.sleep(0.05)
            with lock:
                mine = [g for g in got if g[0] == rep]
            first = min(mine, key=lambda g: g[2]) if mine else None
            reps.append({"rep": rep, "t_add_ns": t_add, "sent": sent["sent"], "gap_ns": sent["gap_ns"],
                         "received": len(mine),
                         "first_sent_after_add_ns": first[2] - t_add if first else None,
                         "first_received_after_add_ns": first[3] - t_add if first else None})
            print(json.dumps(reps[-1]), flush=True)
        stats = state(st_path).get("stats", {})
        lp.terminate()
        lp.wait(timeout=5)

    ok = [r for r in reps if r["first_sent_after_add_ns"] is not None]
    lat = sorted(r["first_sent_after_add_ns"] / 1e6 for r in ok)
    rcv = sorted(r["first_received_after_add_ns"] / 1e6 for r in ok)
    gap = statistics.median(r["gap_ns"] for r in reps) / 1e3
    summary = {"reps": len(reps), "missed": len(reps) - len(ok),
               "median_ms": statistics.median(lat) if lat else None, "min_ms": lat[0] if lat else None,
               "max_ms": lat[-1] if lat else None,
               "median_first_received_ms": statistics.median(rcv) if rcv else None,
               "median_gap_us": gap, "lmsd": os.path.relpath(lmsd, os.path.join(HERE, "..")),
               "interval_ms": args.interval_ms, "window_ms": args.window_ms, "lead_ms": args.lead_ms,
               "spread_ms": args.spread_ms, "seed": args.seed}
    write_json(os.path.join(args.out, "results.json"),
               {"summary": summary, "reps": reps, "lmsd_stats": stats, "machine": machine_facts(),
                "commit": git_commit()})
    md = ["# lmsd: from the kernel installing (S,G) to LMS forwarding for it", "",
          "`bench/lmsd_follow.py` (see its docstring). Target (issue 19, item 7): within 50 ms.", "",
          "| lmsd | -t ms | reps | missed | median ms | min ms | max ms | median first arrival ms | request gap us |",
          "|---|---|---|---|---|---|---|---|---|",
          f"| `{summary['lmsd']}` | {args.interval_ms} | {len(reps)} | {summary['missed']} | "
          + " | ".join("-" if v is None else f"{v:.2f}" for v in
                       (summary["median_ms"], summary["min_ms"], summary["max_ms"],
                        summary["median_first_received_ms"]))
          + f" | {gap:.0f} |", "",
          "ms: send time of the first request h1 received, minus the time taken just before "
          "MRT_ADD_MFC (late by at most one request gap). A missed repetition: nothing arrived "
          f"within the {args.window_ms} ms window.", "",
          f"Machine: {machine_facts()}. Commit: {git_commit()}."]
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(args.out, "command.txt"), "w") as f:
        f.write("sudo " + command_line() + "\n")
    portable(args.out)
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
