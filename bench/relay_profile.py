#!/usr/bin/env python3
"""Where the relay's fixed cost per input datagram goes at a low rate (issue 24 item 2).

samplicator.py's lab; replicate mode; one producer at --rate datagrams/s of
984 bytes (NetFlow v5's size) for --count datagrams; N receivers.  For each N
and each replicator (the relay, and samplicator when --samplicator is given):
`perf record -g` on the replicator (its report, by symbol and by system call,
goes to OUT/perf-NAME-N.txt) and `strace -c` (system calls per input
datagram: OUT/strace-NAME-N.txt).  Every receiver port counted.

    python3 bench/relay_profile.py [--build build] [--samplicator /tmp/.../samplicate] [--out DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
import relaylab  # noqa: E402
import samplicator  # noqa: E402


def run(rl, argv, n, rate, count, out, wrap):
    lab = rl.lab
    sinks = rl.start_sinks(n, count, idle_ms=3000)
    proc = lab.popen(rl.relay_ns, ["taskset", "-c", "0", *argv, "-p", samplicator.IN_PORT,
                                   *samplicator.receivers_argv(rl, n)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samplicator.wait_bound(lab, rl.relay_ns, samplicator.IN_PORT, proc)
    if wrap == "perf":
        tracer = subprocess.Popen(["perf", "record", "-F", "10000", "-g", "-o", out + ".data", "-p", str(proc.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(proc.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    tx = lab.popen(rl.p_ns, ["taskset", "-c", "1", sys.executable, relaylab.TOOL, "tx", "--to",
                             f"{rl.relay_addr}:{samplicator.IN_PORT}", "--count", count, "--rate", rate,
                             "--size", 984], stdout=subprocess.PIPE, text=True)
    tx.communicate(timeout=count / rate * 5 + 60)
    res = rl.finish_sinks(sinks)
    tracer.send_signal(2)
    tracer.wait(timeout=60)
    rl.stop(proc)
    lost = n * count - sum(s["received"] for s in res)
    if wrap == "perf":
        with open(out, "w") as f:
            f.write(f"# lost {lost}\n")
            f.flush()
            subprocess.run(["perf", "report", "-i", out + ".data", "--no-children", "--stdio", "-g", "none",
                            "--sort", "sym", "--percent-limit", "0.5"], stdout=f, stderr=subprocess.DEVNULL)
            subprocess.run(["perf", "report", "-i", out + ".data", "--children", "--stdio", "-g", "none",
                            "--sort", "sym", "--percent-limit", "0.3"], stdout=f, stderr=subprocess.DEVNULL)
        os.unlink(out + ".data")
    return lost


# What each part costs: the inclusive share of the user-space entry points
# (perf report --children), in the order a datagram meets them.
PARTS = [
    ("epoll (wait, wake-up)", ["epoll_wait"]),
    ("receive", ["__recvmmsg", "__libc_recvfrom", "recvfrom", "__libc_recvmsg"]),
    ("library socket check (SO_COOKIE)", ["__getsockopt", "getsockopt"]),
    ("clock reads", ["__clock_gettime", "clock_gettime", "clock_gettime@@GLIBC_2.17", "__vdso_clock_gettime"]),
    ("AUTO policy re-check", ["gc_kpolicy_declines"]),
    ("send", ["__sendmmsg", "__libc_sendto", "sendto", "__libc_send", "__libc_sendmsg", "__splice", "splice",
              "__libc_write"]),
]


def parts(path, count):
    """{part: us per datagram} from a perf report written by run()."""
    text = open(path).read()
    total = int(re.search(r"Event count \(approx\.\): (\d+)", text).group(1))  # cpu-clock: ns
    ch = text[text.index("Children"):] if "Children" in text else ""
    inc = {}
    for m in re.finditer(r"^\s+([\d.]+)%\s+([\d.]+)%\s+\[[.k]\]\s+(\S+)", ch, re.M):
        inc.setdefault(m.group(3), float(m.group(1)))
    per = total / count / 1e3
    out = {"total": per}
    for name, syms in PARTS:
        out[name] = sum(inc.get(s, 0.0) for s in syms) / 100 * per
    out["rest (bookkeeping, interrupts, scheduler outside epoll)"] = per - sum(out[n] for n, _ in PARTS)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--samplicator")
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "relay-points", "profile"))
    ap.add_argument("--sizes", default="1,2,10")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--engine", default="auto")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    who = [("relay", [gcbench.tool(a.build), "relay", "--engine", a.engine])]
    if a.samplicator:
        who.append(("samplicator", [a.samplicator]))
    lab, rl = relaylab.make(a.build, 2)
    table = {}
    with lab:
        for n in [int(x) for x in a.sizes.split(",")]:
            for name, argv in who:
                for wrap in ("perf", "strace"):
                    out = os.path.join(a.out, f"{wrap}-{name}-{n}.txt")
                    lost = run(rl, argv, n, a.rate, a.count, out, wrap)
                    print(f"N={n} {name} {wrap}: lost {lost}", flush=True)
                    if wrap == "perf":
                        table[name, n] = parts(out, a.count)
    cols = list(table)
    lines = ["| part (us per input datagram) | " + " | ".join(f"{w} N={n}" for w, n in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for key in ["total"] + [p for p, _ in PARTS] + ["rest (bookkeeping, interrupts, scheduler outside epoll)"]:
        lines.append(f"| {key} | " + " | ".join(f"{table[c][key]:.1f}" for c in cols) + " |")
    with open(os.path.join(a.out, "parts.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
