#!/usr/bin/env python3
"""The main job on a built-in default: a live-broadcast relay in a lab.

A producer sends a 2.4 Mbit/s RTP stream (300 datagrams/s of 1000 bytes) to
`groupcast relay --rtp`; 200 subscribers in 4 namespaces join it through the
control protocol and each gets its own RTP header.  The relay runs about 20
seconds, alternating the best engine (what AUTO picks) and the loop engine
(sendto() per subscriber, what relays do today), with live progress; then a
side-by-side of the two and a check that every subscriber got every datagram.
The lab is removed at the end, also on Ctrl-C.

    python3 bench/relay_demo.py [--build build] [--subscribers 200] [--rate 300]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402

CONTROL = relaylab.RTP_PORT + 2

# Each namespace's subscribers join through the control protocol's handshake
# (padded JOIN, COOKIE, JOIN cookie=: tests/e2e/relaytool.py); prints how many got OK.
JOINER = """
import socket, sys
sys.path.insert(0, sys.argv[6])
import relaytool
addr, relay, port, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, 0))
got = relaytool.handshake(s, (relay, port), range(first, first + count), wait=2)
print(sum(v["reply"].startswith("OK JOIN") for v in got.values()))
"""


def phase(rl, engine, label, subs, rate, seconds, log):
    # one address per namespace joins subs/namespaces ports: raise the
    # per-source limits (defaults: 64 subscribers, 200 requests/s) to fit
    per_ns = max(rl.split(subs))
    proc, sock = rl.start_relay(engine, ["--expire", 30, "--max-per-source", max(64, per_ns),
                                         "--control-rate", max(200, 4 * per_ns)])
    try:
        joined = 0
        for i, (r, cnt) in enumerate(zip(rl.star.receivers, rl.split(subs))):
            relay_addr = f"10.{rl.lab.octet}.{i + 1}.1"   # the relay's end of this subscriber's link
            out = rl.lab.run(r.ns, [sys.executable, "-c", JOINER, r.v4, relay_addr, CONTROL,
                                    relaylab.PORT_BASE, cnt, os.path.dirname(relaylab.TOOL)],
                             capture_output=True, text=True, timeout=30)
            joined += int(out.stdout.strip() or 0)
        s0 = rl.query(sock)
        count = int(rate * seconds)
        tx = rl.producer(rate, count)
        prev, t0 = s0, time.monotonic()
        tprev = t0
        while tx.poll() is None:
            time.sleep(1.0)
            if tx.poll() is not None:
                break
            s, now = rl.query(sock), time.monotonic()
            wall = now - tprev
            cpu = (s["cpu_ns"] - prev["cpu_ns"]) / 1e9
            din = s["in"] - prev["in"]
            log(f"  {label:22s} t={now - t0:4.1f}s  in {din / wall:5.0f}/s  out {(s['out'] - prev['out']) / wall:7.0f}/s"
                f"  subscribers {s['subscriber_count']:4d}  relay CPU {cpu / wall * 100:5.1f}%  "
                f"{(cpu * 1e6 / din) if din else 0:6.0f} us/datagram")
            prev, tprev = s, now
        tx.wait()
        time.sleep(0.3)
        s1 = rl.query(sock)
    finally:
        rl.stop(proc)
    return {"engine": engine, "joined": joined, "sent": count, "in": s1["in"] - s0["in"],
            "out": s1["out"] - s0["out"], "errors": s1["errors"] - s0["errors"],
            "cpu_ns": s1["cpu_ns"] - s0["cpu_ns"], "send_ns": s1["send_ns"] - s0["send_ns"],
            "seconds": seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--subscribers", type=int, default=200)
    ap.add_argument("--rate", type=int, default=300, help="input datagrams per second")
    ap.add_argument("--seconds", type=float, default=5, help="per phase; 4 phases")
    ap.add_argument("--namespaces", type=int, default=4, help="subscriber namespaces")
    a = ap.parse_args()

    info = gcbench.engines_available(a.build)
    best = info["auto"]
    other = "loop" if best != "loop" else "mmsg"
    log = lambda s: print(s, flush=True)  # noqa: E731
    log(f"groupcast relay demo: 1 producer -> relay -> {a.subscribers} subscribers in {a.namespaces} namespaces")
    log(f"RTP {a.rate} datagrams/s x 1000 B ({a.rate * 8 / 1000:.0f} Mbit/s); each subscriber gets its own "
        f"SSRC, sequence and timestamp; engines: {best} (AUTO's pick) vs {other} (sendto() per subscriber)")
    log("relay pinned to CPU 0, subscribers' receive work on CPU 1\n")
    lab, rl = relaylab.make(a.build, a.namespaces)
    with lab:
        order = [best, other, best, other]
        sinks = rl.start_sinks(a.subscribers, int(a.rate * a.seconds) * len(order), idle_ms=0)
        runs = []
        try:
            for e in order:
                label = f"{e} ({'best' if e == best else 'baseline'})"
                runs.append(phase(rl, e, label, a.subscribers, a.rate, a.seconds, log))
            time.sleep(0.5)
        finally:
            res = rl.finish_sinks(sinks, kill=True)

    tot = {}
    for e in (best, other):
        rr = [r for r in runs if r["engine"] == e]
        tot[e] = {k: sum(r[k] for r in rr) for k in ("in", "out", "errors", "cpu_ns", "send_ns", "seconds")}
    w = 26
    log("")
    log(f"{'':28s}{best + ' (best)':>{w}s}{other + ' (baseline)':>{w}s}")
    rows = [
        ("relay CPU", lambda t: f"{t['cpu_ns'] / 1e9 / t['seconds'] * 100:.1f} %"),
        ("CPU per datagram in", lambda t: f"{t['cpu_ns'] / max(1, t['in']) / 1e3:.0f} us"),
        ("CPU per subscriber copy", lambda t: f"{t['cpu_ns'] / max(1, t['out']):.0f} ns"),
        ("time inside gc_sendgroup", lambda t: f"{t['send_ns'] / max(1, t['cpu_ns']) * 100:.0f} %"),
        ("datagrams in / out", lambda t: f"{t['in']} / {t['out']}"),
        ("send errors", lambda t: f"{t['errors']}"),
    ]
    for name, fn in rows:
        log(f"{name:28s}{fn(tot[best]):>{w}s}{fn(tot[other]):>{w}s}")
    ratio = (tot[other]["cpu_ns"] / max(1, tot[other]["in"])) / (tot[best]["cpu_ns"] / max(1, tot[best]["in"]))
    log(f"\n=> {best} uses {ratio:.1f}x less CPU than {other} for the same stream to the same subscribers")
    due = sum(r["sent"] for r in runs)
    got = sum(s["received"] for s in res)
    ports_ok = all(s["ports_min"] == due for s in res)
    joined = min(r["joined"] for r in runs)
    log(f"subscribers: {joined} joined each phase; {got} of {due * a.subscribers} datagrams arrived; "
        f"{'every subscriber got every datagram' if ports_ok else 'SOME DATAGRAMS MISSING'}")
    log("lab removed; try the relay yourself: groupcast relay --help, man groupcast-relay")
    return 0 if ports_ok and joined == a.subscribers else 1


if __name__ == "__main__":
    sys.exit(main())
