#!/usr/bin/env python3
"""P2 and P3 of the packet-ring paper (seed 001, Figures 9/10 and Table 1):
UDP, TCP and our DCCP (gc_dccp(3)) on a 50 kB/s bottleneck.

    sudo python3 bench/dccp.py --build build [--quick] [--only P2,P3] [--out DIR]

Lab: s (sender) - r (router) - d (receiver).  r's egress toward d is
`tbf rate 400kbit burst 5000 latency 300ms` (a 13-packet queue); the bucket
is on the router so that TCP is dropped there, not throttled inside the
sender's host.  Traffic: bench/dccp_traffic.c (C); this file only drives.

P2: one long-lived TCP flow (dccp_traffic tcp, one packet per ms: always
backlogged) shares the link; the measured flow sends one packet every 30 ms
over UDP, TCP or DCCP (CCID 2, packets queued longer than three intervals
marked dead on the ring).  Per packet: the application's send time and the
receiving application's time (both CLOCK_REALTIME, one host), so the
end-to-end delay, and the times the packet leaves the sender's veth and
reaches the receiver's, from bench/leave_stamp.bpf.c at the TC egress and
ingress of those veths: the in-sender, network and in-receiver delays.

P3: no competing flow; a video-like stream (every 10th packet an I-frame,
equal sizes) at 10, 20 and 25 ms intervals.  DCCP's late data choice: with 3
or more packets queued on the ring, B/P packets are marked dead first,
I-frames only if that is not enough.  Reported: I-frame share among received
frames, the tbf's drop rate (tc -s), with CCID 2 and CCID 3.  The same policy
over QUIC DATAGRAM frames (bench/quic_peer.c, ngtcp2 with its default CUBIC):
the sender's own queue in front of ngtcp2_conn_writev_datagram, which refuses
a datagram while congestion-limited or pacing.  Skipped, with a message, if
quic_peer was not built (no libngtcp2).  `--stacks` adds quic-reno (ngtcp2's
Reno instead of CUBIC: a control for the comparison with CCID 2).
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "lab"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, HERE)
from netlab import Lab  # noqa: E402
from gcbench.run import compile_bpf  # noqa: E402

TBF = ["tbf", "rate", "400kbit", "burst", "5000", "latency", "300ms"]
PAPER_P3 = {  # interval_ms: (I-share UDP, TCP, DCCP; drop rate UDP, TCP, DCCP) in %
    10: (10.1, 10.0, 23.8, 62, 1.2, 0.7),
    20: (10.1, 10.0, 12.8, 37, 0.5, 0.5),
    25: (10.1, 10.0, 10.1, 11, 0.6, 0.6),
}
PORT, BULK_PORT = 7000, 7001
UDP_SIZE, DCCP_SIZE = 1460, 1400  # DCCP: its header and options must fit a 1500 B MTU
QUIC_SIZE = 1400  # as DCCP: QUIC's short header, AEAD tag and DATAGRAM frame header must fit too
P3_STACKS = ("udp", "tcp", "dccp-ccid2", "dccp-ccid3", "quic", "quic-reno")
P3_DEFAULT = P3_STACKS[:5]


def make_lab(lab):
    s, r, d = lab.add_ns("s"), lab.add_ns("r"), lab.add_ns("d")
    l1, l2 = lab.add_link(s, r, v6=False), lab.add_link(r, d, v6=False)
    lab.set_sysctl("net.ipv4.ip_forward", 1, ns=r)
    lab.ip(s, "route", "add", "default", "via", l1.b.v4)
    lab.ip(d, "route", "add", "default", "via", l2.a.v4)
    # real 1500 B packets in front of the bucket (no GSO trains)
    for ns, link in ((s, l1.a), (r, l1.b), (r, l2.a), (d, l2.b)):
        lab.set_offload(ns, link.ifname, tso=False, gso=False, gro=False)
    return s, r, d, l2


def tbf_reset(lab, r, ifname):
    """A fresh bucket per run: its counters start at zero."""
    lab.run(r, ["tc", "qdisc", "del", "dev", ifname, "root"], check=False, capture_output=True)
    lab.run(r, ["tc", "qdisc", "add", "dev", ifname, "root", *TBF], capture_output=True)


def tbf_counts(lab, r, ifname):
    out = lab.run(r, ["tc", "-s", "-j", "qdisc", "show", "dev", ifname], capture_output=True,
                  text=True).stdout
    q = [x for x in json.loads(out) if x.get("kind") == "tbf"][0]
    return {"sent_pkts": q.get("packets", 0), "dropped": q.get("drops", 0)}


def parse(lines, tag):
    rows = []
    for ln in lines:
        f = ln.strip().split(",")
        if len(f) == 5 and f[0] == tag:
            rows.append([int(x) for x in f[1:]])
    return rows


def traffic(args, lab, s, d, dst, proto, interval, count, policy, sender_if, recv_if, ccid=2, grace=3.0,
            bulk=False, cc=None):
    """One run of the measured flow; returns per-packet rows and counters."""
    tool = os.path.join(args.build, "bench", "dccp_traffic")
    size = {"dccp": DCCP_SIZE, "quic": QUIC_SIZE}.get(proto, UDP_SIZE)
    extra = ["--ccid", str(ccid)] if proto == "dccp" else []
    if proto == "quic":  # bench/quic_peer: its own tool, no PROTO argument
        rx_argv = [quic_tool(args), "recv", PORT, "--count", count]
    else:
        rx_argv = [tool, "recv", proto, PORT, "--count", count, "--size", size, *extra]
    bulk_procs = []
    if bulk:
        br = lab.popen(d, [tool, "recv", "tcp", BULK_PORT, "--count", 10**7, "--timeout-s", 3600],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        br.stderr.readline()
        bs = lab.popen(s, [tool, "send", "tcp", dst, BULK_PORT, "--interval-ms", 1, "--count", 10**7],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bulk_procs = [bs, br]
        time.sleep(args.warmup)  # let TCP fill the queue
    # the third and fourth points: the packet leaving the sender's veth
    # (TC egress) and reaching the receiver's (TC ingress); QUIC's payload is
    # encrypted, so no times for it (P3, its only run, does not use them)
    stamped = proto != "quic"
    leave = Stamps(lab, s, sender_if, "egress", stamp_obj(args, lab)) if stamped else None
    reach = Stamps(lab, d, recv_if, "ingress", stamp_obj(args, lab)) if stamped else None
    # per-packet lines go to a file: a pipe nobody reads until the end fills
    # up, blocks the receiver and closes TCP's window
    rx_log = os.path.join(args.out, f".rx-{proto}.csv")
    rx_file = open(rx_log, "w")
    rx = lab.popen(d, [*rx_argv, "--timeout-s", int(count * interval / 1000 + 120)],
                   stdout=rx_file, stderr=subprocess.PIPE, text=True)
    ready = rx.stderr.readline()
    if "listening" not in ready:
        raise RuntimeError(f"{proto} receiver did not start: {ready}{rx.stderr.read()}")
    pol = ["--policy", policy] if proto in ("dccp", "quic") else []
    if proto == "quic":
        argv = [quic_tool(args), "send", dst, PORT, "--interval-ms", interval, "--count", count,
                "--size", size, *pol, *(["--cc", cc] if cc else [])]
    else:
        argv = [tool, "send", proto, dst, PORT, "--interval-ms", interval, "--count", count,
                "--size", size, *extra, *pol]
    # A blocked TCP sender may take far longer than the schedule: stop it at
    # twice the schedule (plus slack) and count what it had handed over.
    limit = 2 * count * interval / 1000 + 20
    txp = lab.popen(s, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tx_out, tx_err = txp.communicate(timeout=limit)
        if txp.returncode != 0:
            raise RuntimeError(f"{proto} sender failed: {tx_err}")
        cut = False
    except subprocess.TimeoutExpired:
        txp.terminate()
        tx_out, tx_err = txp.communicate()
        cut = True
    tx = subprocess.CompletedProcess(argv, txp.returncode, tx_out, tx_err)
    try:
        rx.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        rx.terminate()
    rx.communicate()
    rx_file.close()
    with open(rx_log) as f:
        out = f.read()
    os.unlink(rx_log)
    for p in bulk_procs:
        p.terminate()
        p.wait()
    left, arrived = (leave.read(), reach.read()) if stamped else ({}, {})
    sent = parse(tx.stdout.splitlines(), "S")
    got = parse(out.splitlines(), "R")
    # accounting: every received packet was sent once and was not marked dead
    queued = {x[0] for x in sent if x[3] == 0}
    dead = {x[0] for x in sent if x[3] == 1}
    seqs = [g[0] for g in got]
    tx_check = {"count": count, "unknown_rx": sum(1 for q in seqs if q not in queued),
                "dup_rx": len(seqs) - len(set(seqs)), "dead_rx": len(set(seqs) & dead)}
    tx_stats = {}
    for ln in tx.stderr.splitlines():
        if ln.startswith("{"):
            tx_stats = json.loads(ln)
    tx_check["sender_cut_at_s"] = round(limit) if cut else None
    tx_stats["check"] = tx_check
    # in-sender delay: application send -> leaving the sender's veth
    tx_stats["in_sender_ms"] = [(left[x[0]] - x[2]) / 1e6 for x in sent if x[3] == 0 and x[0] in left]
    # network: leaving the sender -> reaching the receiver's interface;
    # in-receiver: that -> the receiving application
    tx_stats["network_ms"] = [(arrived[q] - left[q]) / 1e6 for q in arrived if q in left]
    tx_stats["in_receiver_ms"] = [(g[3] - arrived[g[0]]) / 1e6 for g in got if g[0] in arrived]
    return sent, got, tx_stats


def quic_tool(args):
    return os.path.join(args.build, "bench", "quic_peer")


def stamp_obj(args, lab):
    """bench/leave_stamp.bpf.c for the measured flow's port, compiled once per lab."""
    obj = os.path.join(lab.workdir(), "leave_stamp.o")
    if not os.path.exists(obj):
        compile_bpf(args.build, os.path.join(HERE, "leave_stamp.bpf.c"), obj,
                    ["-Werror", f"-DSTAMP_PORT={PORT}", f"-DSTAMP_TCP_SIZE={UDP_SIZE}"])
    return obj


def mono_to_real_ns():
    """CLOCK_REALTIME - CLOCK_MONOTONIC (bpf_ktime_get_ns), from the tightest
    of a few reading pairs."""
    best = None
    for _ in range(20):
        m0 = time.monotonic_ns()
        rt = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, rt - (m0 + m1) // 2)
    return best[1]


class Stamps:
    """bench/leave_stamp.bpf.c at one TC hook (a fresh load, so fresh maps);
    read() detaches it and returns packet number -> time (ns, CLOCK_REALTIME)
    the packet crossed the hook (TCP: records, see the program)."""

    def __init__(self, lab, ns, ifname, direction, obj):
        self.lab, self.ns, self.ifname, self.direction = lab, ns, ifname, direction
        run = lambda *a: lab.run(ns, list(a), capture_output=True, text=True)
        run("tc", "qdisc", "replace", "dev", ifname, "clsact")
        run("tc", "filter", "replace", "dev", ifname, direction, "prio", "1", "handle", "1",
            "bpf", "da", "obj", obj, "sec", "tc")
        shown = json.loads(run("tc", "-j", "filter", "show", "dev", ifname, direction, "prio", "1").stdout)
        prog = next(f["options"]["prog"]["id"] for f in shown if "options" in f)
        info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog)],
                                         check=True, capture_output=True, text=True).stdout)
        self.map_id = None
        for mid in info["map_ids"]:
            m = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "id", str(mid)],
                                          check=True, capture_output=True, text=True).stdout)
            if m["name"] == "stamps":
                self.map_id = mid
        if self.map_id is None:
            raise RuntimeError("leave_stamp.bpf.c: no stamps map")

    def read(self):
        offset = mono_to_real_ns()
        dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", str(self.map_id)],
                                         check=True, capture_output=True, text=True).stdout)
        self.lab.run(self.ns, ["tc", "qdisc", "del", "dev", self.ifname, "clsact"], check=False,
                     capture_output=True)

        def num(v):  # BTF-formatted, or raw bytes
            return v if isinstance(v, int) else int.from_bytes(bytes(int(b, 16) for b in v), "little")

        out = {}
        for e in dump:
            e = e.get("formatted", e)
            out[num(e["key"])] = num(e["value"]) + offset
        return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def run_p2(args, lab, s, r, d, link, out):
    count = int(args.p2_seconds * 1000 / 30)
    rows, cdfs, ins_cdfs = [], {}, {}
    for proto in ("udp", "tcp", "dccp"):
        tbf_reset(lab, r, link.a.ifname)
        grace = 1.5 if proto != "tcp" else args.tcp_grace
        sent, got, st = traffic(args, lab, s, d, link.b.v4, proto, 30, count, "stale", "veth1", "veth2",
                                grace=grace, bulk=True)
        q = tbf_counts(lab, r, link.a.ifname)
        handed = [x for x in sent if x[3] == 0]
        dead = {x[0] for x in sent if x[3] == 1}
        delays = [(g[3] - g[2]) / 1e6 for g in got]  # ms
        cdfs[proto] = delays
        ins = st.pop("in_sender_ms")
        net, inr = st.pop("network_ms"), st.pop("in_receiver_ms")
        ins_cdfs[proto] = ins
        rows.append({"proto": proto, "sent": len(handed), "dead": len(dead), "received": len(got),
                     "lost": len(handed) - len(dead) - len(got),
                     "loss_pct": round(100 * (len(handed) - len(got)) / max(1, len(handed)), 1),
                     "median_ms": round(statistics.median(delays), 1) if delays else None,
                     "p90_ms": round(pct(delays, 0.9), 1) if delays else None,
                     "min_ms": round(min(delays), 1) if delays else None,
                     "tbf_sent": q["sent_pkts"], "tbf_dropped": q["dropped"],
                     "left_sender": len(ins),
                     "in_sender_median_ms": round(statistics.median(ins), 2) if ins else None,
                     "in_sender_p90_ms": round(pct(ins, 0.9), 2) if ins else None,
                     "network_median_ms": round(statistics.median(net), 2) if net else None,
                     "in_receiver_median_ms": round(statistics.median(inr), 3) if inr else None,
                     "tx_stats": st})
        print(f"P2 {proto}: {rows[-1]}", flush=True)
    if cdfs.get("udp") and cdfs.get("dccp"):
        fastest_udp = min(cdfs["udp"])
        rows_d = cdfs["dccp"]
        for row in rows:
            if row["proto"] == "dccp":
                row["faster_than_any_udp_pct"] = round(
                    100 * sum(1 for x in rows_d if x < fastest_udp) / len(rows_d), 1)
    with open(os.path.join(out, "p2_delays.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["proto", "delay_ms"])
        for proto, ds in cdfs.items():
            w.writerows([proto, round(x, 3)] for x in ds)
    with open(os.path.join(out, "p2_in_sender.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["proto", "in_sender_ms"])
        for proto, ds in ins_cdfs.items():
            w.writerows([proto, round(x, 3)] for x in ds)
    plot_cdf(ins_cdfs, os.path.join(out, "p2_in_sender_cdf.png"),
             "P2: in-sender delay (application send -> leaving the sender's veth)")
    plot_cdf(cdfs, os.path.join(out, "p2_e2e_cdf.png"),
             "P2: end-to-end delay, 1 packet / 30 ms beside a bulk TCP flow, 50 kB/s")
    return rows


def plot_cdf(cdfs, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for proto, ds in cdfs.items():
        if ds:
            xs = sorted(ds)
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=proto)
    ax.set_xscale("log")
    ax.set_xlabel("delay (ms)")
    ax.set_ylabel("fraction of packets")
    ax.set_title(title, fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_p3(args, lab, s, r, d, link):
    rows = []
    names = [x for x in P3_STACKS if x in args.stacks]
    if any(x.startswith("quic") for x in names) and not os.access(quic_tool(args), os.X_OK):
        print(f"P3 quic: skipped, {quic_tool(args)} was not built (needs libngtcp2-dev and "
              f"libngtcp2-crypto-gnutls-dev)", flush=True)
        names = [x for x in names if not x.startswith("quic")]
    for interval in args.intervals:
        count = int(args.p3_seconds * 1000 / interval)
        for name in names:
            proto = name.split("-")[0]
            ccid = int(name[-1]) if proto == "dccp" else 2
            cc = name.split("-")[1] if proto == "quic" and "-" in name else None
            tbf_reset(lab, r, link.a.ifname)
            grace = 1.5 if proto != "tcp" else args.tcp_grace
            sent, got, st = traffic(args, lab, s, d, link.b.v4, proto, interval, count, "video", "veth1", "veth2",
                                    ccid=ccid, grace=grace, cc=cc)
            q = tbf_counts(lab, r, link.a.ifname)
            for k in ("in_sender_ms", "network_ms", "in_receiver_ms"):
                st.pop(k)
            i_rx = sum(1 for g in got if g[1] == 1)
            if proto == "quic" and st.get("sent", 0) + st.get("dead", 0) + st.get("unsent", 0) \
                    != sum(1 for x in sent if x[3] == 0):
                raise RuntimeError(f"quic_peer's counts disagree with its log: {st}")
            rows.append({"interval_ms": interval, "stack": name,
                         "sent": sum(1 for x in sent if x[3] == 0),
                         "dead": sum(1 for x in sent if x[3] == 1), "received": len(got),
                         "i_received": i_rx,
                         "i_dead": sum(1 for x in sent if x[3] == 1 and x[1] == 1),
                         "i_share_pct": round(100 * i_rx / len(got), 1) if got else None,
                         "tbf_sent": q["sent_pkts"], "tbf_dropped": q["dropped"],
                         "drop_pct": round(100 * q["dropped"] / max(1, q["sent_pkts"] + q["dropped"]), 1),
                         "tx_stats": st})
            print(f"P3 {interval} ms {name}: {rows[-1]}", flush=True)
    return rows


def write_results(args, out, p2, p3, elapsed):
    with open(os.path.join(out, "command.txt"), "w") as f:
        f.write("python3 bench/dccp.py " + " ".join(sys.argv[1:]) + "\n")
        f.write(f"elapsed {elapsed:.0f} s\n")
    with open(os.path.join(out, "raw.json"), "w") as f:
        json.dump({"p2": p2, "p3": p3, "quick": args.quick}, f, indent=1)
    for name, rows in (("p2.csv", p2), ("p3.csv", p3)):
        if rows:
            with open(os.path.join(out, name), "w", newline="") as f:
                w = csv.DictWriter(f, [k for k in rows[0] if k != "tx_stats"], extrasaction="ignore")
                w.writeheader()
                w.writerows(rows)
    md = ["# P2/P3 (seed 001): UDP, TCP and our DCCP on a 50 kB/s tbf link", "",
          f"Run: `python3 bench/dccp.py {' '.join(sys.argv[1:])}`, {elapsed:.0f} s"
          + (" (--quick: short runs, numbers are not the experiment's)" if args.quick else ""), ""]
    if p2:
        md += ["## P2 (Figures 9/10): end-to-end delay beside one bulk TCP flow", "",
               "Paper: TCP about twice DCCP's delay, DCCP close to UDP, ~40 % of DCCP packets "
               "faster than any UDP packet. Baseline noted in the issue: UDP median 377 ms with "
               "18.5 % loss, TCP median 15.9 s.", "",
               "| proto | sent | dead | received | loss % | e2e median ms | e2e p90 ms | e2e min ms "
               "| in-sender median ms | in-sender p90 ms | network median ms | in-receiver median ms "
               "| tbf drops |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for x in p2:
            md.append(f"| {x['proto']} | {x['sent']} | {x['dead']} | {x['received']} | {x['loss_pct']} | "
                      f"{x['median_ms']} | {x['p90_ms']} | {x['min_ms']} | {x['in_sender_median_ms']} | "
                      f"{x['in_sender_p90_ms']} | {x['network_median_ms']} | "
                      f"{x['in_receiver_median_ms']} | {x['tbf_dropped']} |")
        dc = [x for x in p2 if "faster_than_any_udp_pct" in x]
        if dc:
            md += ["", f"DCCP packets faster than the fastest UDP packet: "
                       f"{dc[0]['faster_than_any_udp_pct']} % (paper: about 40 %)."]
        md += ["", "CDFs: `p2_e2e_cdf.png` (application to application), `p2_in_sender_cdf.png` "
                   "(application send to the packet leaving the sender's veth: "
                   "bench/leave_stamp.bpf.c at its TC egress, bpf_ktime_get_ns(); TCP by the "
                   "first segment carrying each record's first byte). Network = leaving the "
                   "sender's veth to reaching the receiver's (the same program at its TC "
                   "ingress); in-receiver = that to the receiving application's recv().", ""]
    if p3:
        md += ["## P3 (Table 1): I-frame share among received frames, tbf drop rate", "",
               "| interval | stack | sent | dead | received | I-frame % | paper I % | drop % | paper drop % |",
               "|---|---|---|---|---|---|---|---|---|"]
        col = {"udp": 0, "tcp": 1, "dccp-ccid2": 2}
        for x in p3:
            pap = PAPER_P3.get(x["interval_ms"])
            c = col.get(x["stack"])
            pi = f"{pap[c]}" if pap and c is not None else "-"
            pd = f"{pap[c + 3]}" if pap and c is not None else "-"
            md.append(f"| {x['interval_ms']} ms | {x['stack']} | {x['sent']} | {x['dead']} | "
                      f"{x['received']} | {x['i_share_pct']} | {pi} | {x['drop_pct']} | {pd} |")
        for iv in sorted({x["interval_ms"] for x in p3}):
            u = [x for x in p3 if x["interval_ms"] == iv and x["stack"] == "udp"]
            for stack, label in (("dccp-ccid2", "DCCP"), ("quic", "QUIC")):
                dd = [x for x in p3 if x["interval_ms"] == iv and x["stack"] == stack]
                if u and dd and u[0]["i_share_pct"] and dd[0]["i_share_pct"]:
                    md.append(f"\n{iv} ms: {label}/UDP I-frame share ratio "
                              f"{dd[0]['i_share_pct'] / u[0]['i_share_pct']:.2f} (target >= 2, paper "
                              f"DCCP 2.4).")
        qs = [x for x in p3 if x["stack"].startswith("quic")]
        if qs:
            md += ["", f"QUIC (bench/quic_peer.c, ngtcp2 {qs[0]['tx_stats'].get('ngtcp2', '?')}, "
                       "quic: its default congestion control, CUBIC; quic-reno: Reno; both paced; "
                       f"{QUIC_SIZE}-byte "
                       "DATAGRAM frames): where the queue's head waited. ngtcp2 refuses a datagram "
                       "(writev_datagram returns 0) when bytes in flight reach the congestion window "
                       "(cwnd) or, with window left, when pacing holds the next packet; the policy "
                       "drops while the head waits.", "",
                   "| interval | stack | accepted | at once | after cwnd wait | after pacing wait "
                   "| dropped, head waiting for cwnd | for pacing | acked | declared lost "
                   "| cwnd cuts | final cwnd B | smoothed RTT ms |",
                   "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for x in qs:
                t = x["tx_stats"]
                md.append(f"| {x['interval_ms']} ms | {x['stack']} | {t['sent']} | {t['went_at_once']} | "
                          f"{t['went_after_cwnd']} | {t['went_after_pacing']} | "
                          f"{t['dead_behind_cwnd']} | {t['dead_behind_pacing']} | {t['acked']} | "
                          f"{t['lost']} | {t.get('congestion_events', '-')} | {t['cwnd']} | "
                          f"{t['rtt_us'] / 1000:.0f} |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="P2,P3")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "dccp"))
    ap.add_argument("--stacks", default=",".join(P3_DEFAULT),
                    help="P3's stacks, comma-separated (default: %(default)s)")
    args = ap.parse_args(argv)
    args.stacks = [x.strip().lower() for x in args.stacks.split(",") if x.strip()]
    bad = [x for x in args.stacks if x not in P3_STACKS]
    if bad or not args.stacks:
        ap.error(f"--stacks: {','.join(bad) or 'empty'}: not one of {','.join(P3_STACKS)}")
    args.build = os.path.abspath(args.build)
    if args.quick:
        args.warmup, args.p2_seconds, args.p3_seconds, args.intervals, args.tcp_grace = 1.0, 3, 2, [10], 5.0
    else:
        args.warmup, args.p2_seconds, args.p3_seconds, args.intervals, args.tcp_grace = 8.0, 60, 15, [10, 20, 25], 30.0
    only = {x.strip().upper() for x in args.only.split(",")}
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    p2, p3 = [], []
    with Lab() as lab:
        s, r, d, link = make_lab(lab)
        if "P2" in only:
            p2 = run_p2(args, lab, s, r, d, link, args.out)
        if "P3" in only:
            p3 = run_p3(args, lab, s, r, d, link)
    write_results(args, args.out, p2, p3, time.monotonic() - t0)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
