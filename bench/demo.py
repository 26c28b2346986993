#!/usr/bin/env python3
"""The main job on a built-in default: fan one stream out to 1000 receivers in
a lab of network namespaces with every available engine, verify every
datagram at the receivers, and print what one group send costs per engine.

    python3 bench/demo.py [--build build] [--members 1000] [--size 1000]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--sends", type=int, default=100, help="group sends per engine and rep")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--receivers", type=int, default=2, help="receiver namespaces")
    a = ap.parse_args()

    info = gcbench.engines_available(a.build)
    engines = [e["name"] for e in info["engines"] if e["available"]]
    for e in info["engines"]:
        if not e["available"]:
            print(f"engine {e['name']}: skipped: {e['reason']}")
    print(f"groupcast demo: 1 sender -> {a.members} receivers in {a.receivers} namespaces, "
          f"{a.size} B datagrams, engines {', '.join(engines)} (AUTO picks {info['auto']})")
    lab, star = gcbench.make_lab(a.receivers)
    with lab:
        res = gcbench.blast(a.build, lab, star, a.members, engines, size=a.size, sends=a.sends,
                            reps=a.reps, interval_us=3000)
    loop = res.medians["loop"]["cpu_ns"]
    print(f"\nsender CPU per group send, median of {a.reps} interleaved reps x {a.sends} sends "
          f"(sender on CPU 0, receive work on CPU 1)")
    print(f"{'engine':10} {'per send':>12} {'per member':>11} {'vs loop':>8} {'range':>23}")
    for e in engines:
        m = res.medians[e]
        print(f"{e:10} {m['cpu_ns'] / 1e3:9.0f} us {m['cpu_ns'] / a.members:8.0f} ns "
              f"{loop / m['cpu_ns']:7.2f}x {m['cpu_min'] / 1e3:9.0f}..{m['cpu_max'] / 1e3:.0f} us")
    got = sum(s["received"] for s in res.sinks)
    due = sum(s["due"] for s in res.sinks)
    print(f"\nreceivers: {got} of {due} datagrams, {sum(s['bad'] for s in res.sinks)} bad, "
          f"{sum(s['dups'] for s in res.sinks)} duplicated: {'all verified' if res.ok() else 'LOSS'}")
    return 0 if res.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
