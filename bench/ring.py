#!/usr/bin/env python3
"""P1: the packet ring's per-packet cost against UDP send() (Lai & Kohler,
Figures 7 and 8), measured on this machine in one command:

    sudo python3 bench/ring.py [--quick] [--build DIR] [--out DIR] [--reps 5]
                               [--packets 200000] [--conns 1,30] [--placements shared,split,taskset]
                               [--receiver tc|socket] [--gso] [--modes asked,always,flush,inline]
    sudo python3 bench/ring.py --pace 20000 [--reps 7] ...    (paced mode)

Paced mode (--pace PPS): the sender emits bursts of k packets (k = 16 by
default, 1400 B, one connection) at PPS packets per second, sleeping until each
burst is due, as real applications do; the engine then parks between bursts
and every burst pays for handing the ring over.  The sender's own sleeping
and waking is the same for every method and is left out ("app" is the thread
CPU time of the bursts); the engine thread counts whole, its wake-ups
included.  Methods: send() per packet, "gso" (the application batches the k
packets itself in one sendmsg() with UDP_SEGMENT on its own socket), and the
ring with gc_ring_submit() ("asked"), gc_ring_flush() ("flush") and
gc_ring_submit() on an engine started with GC_RING_ENGINE_SUBMIT_FLUSH
("inline": a parked ring is sent from the application's thread).  Ratios to
send() and to "gso" are taken rep by rep within the same interleaved pass.
--gso adds the "gso" baseline to the unpaced runs too.  Results of paced
mode go to bench/results/ring/paced/ unless --out says otherwise.

DCCP framing (--modes asked,dccp; issue 14's "P1 with DCCP framing and CCID 2
in an uncongested state"): the same producer over a gc_dccp connection
(CCID 2, DCCP-UDP) to a gc_dccp receiver in the receiving namespace, against
the UDP ring and send() of the same pass (1400 B, k = 16, one connection by
default).  Each DCCP run opens a fresh connection and sends 50000 packets
first (slow start over; the window at the end is reported).  The receivers
run on the CPU the engine does not use and are not counted: gc_dccp's, and
a UDP reader (port 6512) that the UDP methods of this pass send to instead
of the TC sink, so that every method meets the same IP/UDP receive path on
the sending CPU.  Results go to bench/results/ring/dccp/.

Total CPU per packet (application plus engine) of the ring + engine against
UDP send() on a connected socket, for payloads of 0, 100, 500, 1000 and 1400
bytes, with the application publishing every k = 1, 2, 4, 8, 16, 32 packets
and notifying the engine either only when it asks (kern_notify: "asked", the
ring's design) or after every publish ("always": the paper's application
called dccp_notify() every k packets), or flushing every k packets ("flush":
gc_ring_flush() sends in the application's own thread, as the paper's
dccp_notify() system call sent the packets itself; one connection only,
since a daemon's ring is sent by the daemon).  Then again with 30 connections:
30 sender processes, through one engine daemon for the ring.

Everything runs in a lab of network namespaces (lab/netlab.py): the sender
namespace is linked to one receiver namespace by a veth pair whose sender side
segments UDP GSO itself (tx-udp-segmentation off), so the sender pays for
segmenting.  Placements: "shared", the application and the engine on CPU 0
(the paper's kernel ran on the application's CPU), "split", the application
on CPU 0 and the engine on CPU 1, and "taskset" (paced mode runs it by
default), the whole sender under taskset -c 0 with nothing pinned: the
engine, started without GC_RING_ENGINE_PIN_CPU, inherits the one CPU.  UDP
senders run on CPU 0.  The
receiver (bench/ring_sink.bpf.c) is a TC ingress program on the receiving
veth that drops the datagrams as they arrive, like the paper's emulated
network card; its small work runs on the sending CPU and is billed to whoever
sent, the same for both methods.  --receiver socket keeps the whole IP/UDP
receive path instead (a bound socket with a tiny buffer; its drops are
counted).  The
receiving veth counts every datagram: a run with any missing is reported as
lost and never averaged in.  Methods are interleaved (udp, ring k=1, ...,
per payload size, rep after rep); medians over the reps; ratios are taken rep
by rep from the same interleaved pass, then their median.

Results go to bench/results/ring/ (raw.jsonl, summary.csv, results.md,
fig7.png, fig8_*.png, command.txt).
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gcbench import analyse, plot  # noqa: E402
from gcbench.report import machine_facts, portable, write_dicts_csv  # noqa: E402
from gcbench.run import ROOT, Lab, compile_bpf, log  # noqa: E402

SIZES = [0, 100, 500, 1000, 1400]
KS = [1, 2, 4, 8, 16, 32]
PORT = 9000
DCCP_UDP_PORT = 6512  # the UDP reader of the DCCP pass (ring_sink.bpf.c lets it through)

# The paper's numbers (seed 001, section 4.1), put beside ours.
PAPER = {
    "fig7_udp_over_ring_1400": 1.60,   # "UDP takes 60% more time to send a 1400-byte packet" (notify every packet)
    "fig8_udp_over_ring_k16": 1.71,    # "DCCP-16 outperforms ... UDP by 71% or more"
    "fig8_k4_over_k16": 1.26,          # "DCCP-16 outperforms DCCP-4 by 26%"
}


def sh(argv, **kw):
    return subprocess.run(argv, check=True, **kw)


def build(build_dir, tmp):
    """A Release libgroupcast.a, ring_p1 linked against it, the TC sink."""
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        sh(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"], stdout=subprocess.DEVNULL)
    sh(["cmake", "--build", build_dir, "-j2", "--target", "groupcast_static"], stdout=subprocess.DEVNULL)
    os.makedirs(tmp, exist_ok=True)
    exe = os.path.join(tmp, "ring_p1")
    libs = subprocess.run(["pkg-config", "--libs", "liburing", "libbpf", "libsodium"], check=True, capture_output=True,
                          text=True).stdout.split()
    sh(["cc", "-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include"),
        os.path.join(ROOT, "bench", "ring_p1.c"), os.path.join(build_dir, "libgroupcast.a"), *libs, "-lpthread", "-lm",
        "-o", exe])
    sink = compile_bpf(build_dir, os.path.join(ROOT, "bench", "ring_sink.bpf.c"), os.path.join(tmp, "ring_sink.o"),
                       ["-Werror"])
    return exe, sink


def make_lab(receiver, sink_obj, conns):
    lab = Lab()
    star = lab.star(1)
    r = star.receivers[0]
    snd_if = star.links[0].a.ifname
    lab.set_offload(star.sender, snd_if, tso=False, tx_udp_segmentation=False)
    lab.set_sysctl("net.core.netdev_max_backlog", 20000)
    if receiver == "tc":
        lab.run(r.ns, ["tc", "qdisc", "add", "dev", r.ifname, "clsact"])
        lab.run(r.ns, ["tc", "filter", "add", "dev", r.ifname, "ingress", "bpf", "da", "obj", sink_obj,
                       "sec", "tc"])
    else:
        code = ("import socket,time\nss=[]\n"
                f"for p in range({PORT},{PORT + max(conns) + 1}):\n"
                "    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                "    s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1)\n"
                f"    s.bind(('{r.v4}',p)); ss.append(s)\n"
                "time.sleep(10**6)\n")
        lab.popen(r.ns, ["python3", "-c", code])
        time.sleep(0.5)
    return lab, star, r, snd_if


# (application CPU, engine CPU); -1: not pinned.  "taskset": the whole
# process runs under taskset -c 0 and pins nothing, the engine is started
# without GC_RING_ENGINE_PIN_CPU and inherits the one CPU (issue 19, item 11).
PLACEMENTS = {"shared": (0, 0), "split": (0, 1), "taskset": (-1, -1)}
MODES = ("always", "asked", "flush", "inline")


def run(lab, star, r, exe, conns, placement, args, sock):
    app_cpu, engine_cpu = PLACEMENTS[placement]
    modes = [m for m in args.modes.split(",") if conns == 1 or m in ("asked", "always")]
    argv = [exe, "--dest", r.v4, "--port", str(PORT), "--rxns", r.ns, "--rxif", r.ifname, "--conns", str(conns),
            "--sizes", ",".join(map(str, args.sizes)), "--ks", ",".join(map(str, args.ks)),
            "--modes", ",".join(modes), "--reps", str(args.reps), "--packets", str(args.packets),
            "--entries", str(args.entries), "--app-cpu", str(app_cpu), "--engine-cpu", str(engine_cpu)]
    if placement == "taskset":
        argv = ["taskset", "-c", "0"] + argv
    if args.pace:
        argv += ["--pace", str(args.pace)]
    if args.batch:
        argv += ["--batch", str(args.batch)]
    if args.gso:
        argv += ["--gso"]
    if conns > 1:
        argv += ["--sock", sock]
    if "dccp" in modes:
        # The DCCP pass: gc_dccp's receiver reads and acknowledges every
        # packet on the CPU the engine does not use; the UDP methods of the
        # pass send to a UDP reader on that CPU (port DCCP_UDP_PORT), not to
        # the TC sink, so that both meet the same receive path.
        argv[argv.index("--port") + 1] = str(DCCP_UDP_PORT)
        argv += ["--rx-cpu", str(1 - engine_cpu), "--rx-read"]
    log(f"  ip netns exec {star.sender} {' '.join(argv)}")
    out = lab.run(star.sender, argv, capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not rows:
        raise RuntimeError(f"ring_p1 failed ({out.returncode}): {out.stderr.strip()}")
    if out.stderr.strip():
        log(out.stderr.strip())
    for row in rows:
        row["placement"] = placement
    return rows, argv


def key(row):
    return (row["placement"], row["conns"], row["method"], row["size"], row["k"], row["notify"])


def summarize(rows):
    """Medians per (conns, method, size, k, notify), and per-rep ratios to the
    UDP run of the same pass."""
    groups = {}
    for row in rows:
        row["lost"] = row["rx"] < row["packets"]
        groups.setdefault(key(row), []).append(row)
    udp = {(row["placement"], row["conns"], row["size"], row["rep"]): row for row in rows if row["method"] == "udp"}
    gso = {(row["placement"], row["conns"], row["size"], row["k"], row["rep"]): row for row in rows
           if row["method"] == "gso"}
    ring_asked = {(row["placement"], row["conns"], row["size"], row["k"], row["rep"]): row for row in rows
                  if row["method"] == "ring" and row["notify"] == "asked"}
    out = []

    def per_packet(x):
        return x["cpu_ns"] / x["packets"]

    for k, g in sorted(groups.items()):
        ok = [x for x in g if not x["lost"]]
        cpu, cpu_min, cpu_max = analyse.spread(per_packet(x) for x in ok)
        ratio, ratio_min, ratio_max = analyse.spread(analyse.paired_ratios(
            ok, udp, lambda x: (x["placement"], x["conns"], x["size"], x["rep"]), per_packet))
        ratio_gso, ratio_gso_min, ratio_gso_max = analyse.spread(analyse.paired_ratios(
            [x for x in ok if x["method"] != "gso"], gso,
            lambda x: (x["placement"], x["conns"], x["size"], x["k"], x["rep"]), per_packet))

        ratio_ring, ratio_ring_min, ratio_ring_max = analyse.spread(analyse.paired_ratios(
            [x for x in ok if x["method"] == "dccp"], ring_asked,
            lambda x: (x["placement"], x["conns"], x["size"], x["k"], x["rep"]), per_packet))

        def med(field):
            return analyse.median_or_none(x[field] / x["packets"] for x in ok)

        s = {
            "placement": k[0], "conns": k[1], "method": k[2], "size": k[3], "k": k[4], "notify": k[5],
            "reps": len(g), "lost_reps": len(g) - len(ok),
            "cpu_ns": cpu, "cpu_min": cpu_min, "cpu_max": cpu_max,
            "app_ns": med("app_ns"), "engine_ns": med("engine_ns"), "busy_ns": med("busy_ns"),
            "wall_ns": med("wall_ns"), "notifies_per_pkt": med("notifies"), "gso_share": med("gso"),
            "ratio": ratio, "ratio_min": ratio_min, "ratio_max": ratio_max,
            "ratio_gso": ratio_gso, "ratio_gso_min": ratio_gso_min, "ratio_gso_max": ratio_gso_max,
            "ratio_ring": ratio_ring, "ratio_ring_min": ratio_ring_min, "ratio_ring_max": ratio_ring_max,
            "cwnd_min": min((x.get("cwnd", 0) for x in g), default=0),
            "cwnd_max": max((x.get("cwnd", 0) for x in g), default=0),
            "dccp_lost": sum(x.get("dccp_lost", 0) for x in g),
            "rtt_us": analyse.median_or_none(x["rtt_us"] for x in ok) if k[2] == "dccp" else None,
        }
        out.append(s)
    return out


def find(summary, placement, conns, method, size, k=0, notify="-"):
    for s in summary:
        if (s["placement"], s["conns"], s["method"], s["size"], s["k"], s["notify"]) == \
                (placement, conns, method, size, k, notify):
            return s
    return None


def fmt(v, digits=0):
    return "lost" if v is None else f"{v:.{digits}f}"


def ratio_cell(x, name="ratio", bold=False):
    """A summary row's ratio as "median [min-max]", the median in bold if asked."""
    b = "**" if bold else ""
    return f"{b}{fmt(x[name], 2)}{b} [{fmt(x[name + '_min'], 2)}-{fmt(x[name + '_max'], 2)}]"


def run_line(facts, started, elapsed):
    """The line under a results.md title: when, where, how long, which files."""
    return (f"Run {started} on {facts.get('cpu', '?')}, {facts['cpus']} CPUs, Linux {facts['kernel']}; "
            f"{elapsed:.0f} s.  Command and details: `command.txt`; every run: `raw.jsonl`; medians: "
            "`summary.csv`.\n")


def write_md(outdir, lines, end=""):
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(lines) + end)


def plots(summary, outdir, placements, conns_list, sizes, ks):
    plt = plot.pyplot()
    us = 1e-3

    def ys(rows, field="cpu_ns"):
        return [x[field] * us if x and x[field] is not None else None for x in rows]

    # Figure 7: per-packet cost with a notification after every packet (the
    # paper's DCCP-ALL / UDP-ALL / DCCP-USER), one connection
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    udp = [find(summary, placements[0], 1, "udp", s) for s in sizes]
    ax.plot(sizes, ys(udp), "o-", color="C3", label="UDP send(): total")
    for pl, style in zip(placements, ["-", "--"]):
        ring = [find(summary, pl, 1, "ring", s, 1, "always") for s in sizes]
        ax.plot(sizes, ys(ring), "s" + style, color="C0", label=f"ring + engine ({pl}): total")
        ax.plot(sizes, ys(ring, "app_ns"), "^" + style, color="C2", label=f"ring ({pl}): application only")
        flush = [find(summary, pl, 1, "ring", s, 1, "flush") for s in sizes]
        if any(flush):
            ax.plot(sizes, ys(flush), "D" + style, color="C1", label=f"ring, gc_ring_flush() ({pl}): total")
    ax.set_xlabel("payload (bytes)")
    ax.set_ylabel("CPU per packet (µs)")
    ax.set_title("P1 / Figure 7: notify after every packet, 1 connection")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    plot.save(fig, os.path.join(outdir, "fig7.png"), dpi=120)

    # Figure 8: per-packet cost against payload for every k, both notify modes
    for pl in placements:
        for conns in conns_list:
            modes = [m for m in MODES if any(find(summary, pl, conns, "ring", s, k, m) for s in sizes for k in ks)]
            if not modes:
                continue
            fig, axs = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.6), sharey=True,
                                    squeeze=False)
            for ax, mode in zip(axs[0], modes):
                udp = [find(summary, pl, conns, "udp", s) for s in sizes]
                ax.plot(sizes, ys(udp), "o-", color="k", label="UDP send()")
                for i, k in enumerate(ks):
                    ring = [find(summary, pl, conns, "ring", s, k, mode) for s in sizes]
                    ax.plot(sizes, ys(ring), ".-", color=plt.cm.viridis(i / max(1, len(ks) - 1)),
                            label=f"ring, k={k}")
                ax.set_xlabel("payload (bytes)")
                ax.set_title({"always": "notify after every publish (the paper's)",
                              "asked": "notify only when the engine asks",
                              "flush": "gc_ring_flush(): sent in the application's thread",
                              "inline": "gc_ring_submit(), SUBMIT_FLUSH engine"}[mode])
                ax.grid(alpha=0.3)
                ax.set_ylim(bottom=0)
            axs[0][0].set_ylabel("CPU per packet (µs), application + engine")
            axs[0][-1].legend(fontsize=7)
            fig.suptitle(f"P1 / Figure 8: publish every k packets; {conns} connection{'s' if conns > 1 else ''}, "
                         f"engine {'on the application CPU' if pl == 'shared' else 'on its own CPU'}")
            plot.save(fig, os.path.join(outdir, f"fig8_{conns}conn_{pl}.png"), dpi=120)


def report(summary, outdir, args, facts, started, elapsed):
    L = []
    L.append("# P1: packet ring + engine against UDP send() (Lai & Kohler, Figures 7 and 8)\n")
    L.append(run_line(facts, started, elapsed))
    L.append("Total CPU per packet = application + engine (process CPU time of every process involved), median "
             f"over {args.reps} interleaved reps of {args.packets} packets; receiver: {args.receiver} "
             "(bench/ring_sink.bpf.c drops the datagrams at the receiving veth).  \"ratio\" = ring / UDP, taken "
             "rep by rep against the UDP run of the same pass, then the median (min-max in brackets).  k: the "
             "application publishes every k packets; \"always\": it notifies the engine after every publish, as "
             "the paper's application called dccp_notify() every k packets; \"asked\": only when kern_notify "
             "asks (the ring's design); \"flush\": gc_ring_flush() every k packets, which sends in the "
             "application's thread when the engine is in the process and has parked the ring, as the paper's "
             "dccp_notify() sent in the system call (1 connection only).  Placement \"shared\": application and engine on CPU 0 (the paper's "
             "kernel ran on the application's CPU); \"split\": the engine on CPU 1.  UDP senders on CPU 0.\n")
    L.append("## Headline\n")
    L.append("| | placement | conns | ours: ring / UDP | target | paper |")
    L.append("|---|---|---|---|---|---|")

    def cell(x):
        return ratio_cell(x, bold=True) if x else "-"

    for pl in args.placements:
        for conns in args.conns:
            L.append(f"| 1400 B, notify every 16 (always) | {pl} | {conns} | "
                     f"{cell(find(summary, pl, conns, 'ring', 1400, 16, 'always'))} | | "
                     f"{1 / PAPER['fig8_udp_over_ring_k16']:.2f} (\"DCCP-16 outperforms UDP by 71%\") |")
            L.append(f"| 1400 B, publish every 16 (asked) | {pl} | {conns} | "
                     f"{cell(find(summary, pl, conns, 'ring', 1400, 16, 'asked'))} | <= 0.35 | |")
            if find(summary, pl, conns, 'ring', 1400, 16, 'flush'):
                L.append(f"| 1400 B, flush every 16 (flush) | {pl} | {conns} | "
                         f"{cell(find(summary, pl, conns, 'ring', 1400, 16, 'flush'))} | | |")
            if find(summary, pl, conns, 'ring', 1400, 16, 'inline'):
                L.append(f"| 1400 B, submit every 16 (SUBMIT_FLUSH engine) | {pl} | {conns} | "
                         f"{cell(find(summary, pl, conns, 'ring', 1400, 16, 'inline'))} | <= 0.35 | |")
            g = find(summary, pl, conns, 'gso', 1400, 16)
            if g:
                L.append(f"| 1400 B, UDP_SEGMENT in the application, 16 per sendmsg() | {pl} | {conns} | "
                         f"{cell(g)} | | |")
    for pl in args.placements:
        for conns in args.conns:
            L.append(f"| 1400 B, notify every packet (always) | {pl} | {conns} | "
                     f"{cell(find(summary, pl, conns, 'ring', 1400, 1, 'always'))} | | "
                     f"{1 / PAPER['fig7_udp_over_ring_1400']:.2f} (\"UDP takes 60% more\") |")
            if find(summary, pl, conns, 'ring', 1400, 1, 'flush'):
                L.append(f"| 1400 B, flush every packet (flush) | {pl} | {conns} | "
                         f"{cell(find(summary, pl, conns, 'ring', 1400, 1, 'flush'))} | | "
                         f"{1 / PAPER['fig7_udp_over_ring_1400']:.2f} (\"UDP takes 60% more\") |")
    for s_ in (0, 100):
        for pl in args.placements:
            for conns in args.conns:
                for mode in MODES:
                    x = find(summary, pl, conns, 'ring', s_, 1, mode)
                    if x:
                        verb = {"always": "notify", "asked": "publish", "flush": "flush",
                                "inline": "submit (SUBMIT_FLUSH)"}[mode]
                        L.append(f"| {s_} B, {verb} every packet ({mode}) | {pl} | {conns} | {cell(x)} | <= 1.00 | |")
    for pl in args.placements:
        k4 = find(summary, pl, 1, "ring", 1400, 4, "always")
        k16 = find(summary, pl, 1, "ring", 1400, 16, "always")
        if k4 and k16 and k4["cpu_ns"] and k16["cpu_ns"]:
            L.append(f"| k=4 / k=16, 1400 B (always) | {pl} | 1 | {k4['cpu_ns'] / k16['cpu_ns']:.2f} | | "
                     f"{PAPER['fig8_k4_over_k16']} (\"DCCP-16 outperforms DCCP-4 by 26%\") |")
    L.append("\nThe paper's column: \"UDP takes 60% more time to send a 1400-byte packet\" (Figure 7) is read as "
             "UDP / ring = 1.60, so ring / UDP = 0.62; \"DCCP-16 outperforms ... UDP by 71% or more\" (Figure 8) "
             "the same way, ring / UDP = 0.58 or less.\n")
    L.append("## Against the targets\n")
    for pl in args.placements:
        for conns in args.conns:
            ms = [m for m in MODES if find(summary, pl, conns, "ring", 1400, 16, m)]
            t16 = [find(summary, pl, conns, "ring", 1400, 16, m) for m in ms]
            small = [(s_, m, find(summary, pl, conns, "ring", s_, 1, m)) for s_ in (0, 100) for m in MODES]
            # issue 14: the ring as designed (gc_ring_submit(), "asked") <= 0.35
            asked = find(summary, pl, conns, "ring", 1400, 16, "asked")
            ok16 = asked is not None and asked["ratio"] is not None and asked["ratio"] <= 0.35
            parts = [f"k=16 at 1400 B: {' / '.join(fmt(x and x['ratio'], 2) for x in t16)} ({' / '.join(ms)}); "
                     f"asked {'meets' if ok16 else 'misses'} <= 0.35"]
            for s_, m, x in small:
                if x and x["ratio"] is not None:
                    parts.append(f"{s_} B k=1 {m} {fmt(x['ratio'], 2)} {'<=' if x['ratio'] <= 1.0 else '>'} 1")
            L.append(f"- {pl}, {conns} connection{'s' if conns > 1 else ''}: " + "; ".join(parts) + ".")
    L.append("")
    for pl in args.placements:
        for conns in args.conns:
            L.append(f"\n## {conns} connection{'s' if conns > 1 else ''}, {pl} placement"
                     + (" (one process; the engine is a thread)" if conns == 1
                        else " (a process each; one engine daemon)") + "\n")
            for mode in [m for m in MODES if find(summary, pl, conns, "ring", args.sizes[0], args.ks[0], m)]:
                L.append(f"### CPU per packet (ns), {mode}\n")
                L.append("| payload | UDP send() | " + " | ".join(f"k={k}" for k in args.ks)
                         + " | ratio k=1 | ratio k=16 |")
                L.append("|---|---|" + "---|" * len(args.ks) + "---|---|")
                for s_ in args.sizes:
                    u = find(summary, pl, conns, "udp", s_)
                    cells = [fmt(u["cpu_ns"]) if u else "-"]
                    for k in args.ks:
                        x = find(summary, pl, conns, "ring", s_, k, mode)
                        cells.append(fmt(x["cpu_ns"]) if x else "-")
                    x1 = find(summary, pl, conns, "ring", s_, 1, mode)
                    x16 = find(summary, pl, conns, "ring", s_, 16, mode)
                    cells.append(fmt(x1["ratio"], 2) if x1 else "-")
                    cells.append(fmt(x16["ratio"], 2) if x16 else "-")
                    L.append(f"| {s_} | " + " | ".join(cells) + " |")
                L.append("")
            L.append("### Where the time goes (ns per packet)\n")
            L.append("| payload | k | mode | application | engine | machine busy | notifies / packet | "
                     "packets in GSO runs |")
            L.append("|---|---|---|---|---|---|---|---|")
            for s_ in args.sizes:
                for k, mode in [(k, m) for k in (1, 16) for m in MODES]:
                    x = find(summary, pl, conns, "ring", s_, k, mode)
                    if x and x["cpu_ns"] is not None:
                        L.append(f"| {s_} | {k} | {mode} | {fmt(x['app_ns'])} | {fmt(x['engine_ns'])} | "
                                 f"{fmt(x['busy_ns'])} | {fmt(x['notifies_per_pkt'], 4)} | "
                                 f"{fmt(100 * x['gso_share'])} % |")
            lost = [x for x in summary if x["placement"] == pl and x["conns"] == conns and x["lost_reps"]]
            L.append("\nLost runs (any datagram missing at the receiver): "
                     + (", ".join(f"{x['method']} {x['size']} B k={x['k']} {x['notify']}: {x['lost_reps']}"
                                  for x in lost) if lost else "none") + ".\n")
    L.append("\n## Reading it\n")
    L.append(READING)
    L.append("\n![Figure 7](fig7.png)\n")
    for pl in args.placements:
        for conns in args.conns:
            L.append(f"![Figure 8, {conns} conn, {pl}](fig8_{conns}conn_{pl}.png)\n")
    write_md(outdir, L)


READING = """\
- The saving is UDP GSO: the engine sends each ring's batch in one
  sendmmsg() call whose runs of equal-sized packets are single GSO messages,
  so the stack is walked once per run and the packets are cut at the end.
  sendmmsg() alone costs what send() costs per packet on this machine
  (DESIGN.md), so empty datagrams, which GSO cannot carry, cost about what
  send() costs: the ring's own work (claiming and publishing a record, the
  engine's checks) is small beside the stack's.
- Notifying after every publish ("always", the paper's protocol) is one
  eventfd write per k packets; it costs most at k=1 and fades as k grows, the
  shape of Figure 8.  For empty datagrams that write costs more than batching
  saves, so "always" at k=1 is slower than send() there.  The paper's
  dccp_notify() was itself the system call that sent the packets, so there
  the control transfer replaced send()'s instead of adding one; here the
  notification wakes a separate engine, and the engine then makes its own
  sendmmsg() call for the datagram.  "flush" is that protocol:
  gc_ring_flush() sends from the application's thread, one send() or
  sendmmsg() per flush and no thread hand-off, so at k=1 it costs what
  send() costs plus the ring's own bookkeeping (a lock, the index stores and
  checks), and it gives up the engine's batching across publishes; from k=2
  on, its runs are GSO messages too.  When the
  application only notifies when asked, the engine, kept busy by the
  application, rarely parks the ring, kern_notify stays clear and few
  notifications happen, whatever k is.
- The application is much faster than the engine here, so it fills the ring
  and sleeps in gc_ring_wait() until half of it is free; the engine wakes it
  with one futex call per half ring.  All of that is in the totals.
- "split" costs more in total than "shared": the engine on the other CPU
  pulls every record and the first line of every payload the application just
  wrote across the cores, and its futex wake-ups cross CPUs.  On one CPU they
  stay in its caches; the two threads take turns a few times per ring.
- With 30 connections every connection cycles through its own 1024 page-sized
  buffers, 120 MB of payload for both methods: both pay for cache misses
  (compare the per-packet tables of 1 and 30 connections), and with 31 processes on one CPU the engine finds rings empty
  more often and parks them, so the 30-connection ratios sit above the
  one-connection ones (headline table).  The spread between reps is also
  wider: how 31 processes share one CPU changes from run to run.
- The receiver drops the datagrams at the receiving veth's TC ingress; its
  work runs on the sending CPU and is billed to the sender, the same per
  packet for both methods.  With the full IP/UDP receive path both totals
  grow by the same amount per packet and the ratios move towards 1.
- The paper's machine paid for a data copy that the packet ring avoided; here
  the kernel copies the payload into its buffers in both methods, so the
  ring's gain is the stack traversals GSO saves, not a copy.
"""


PACED_READING = """\
## Reading it

- Shared placement (the engine thread pinned to the application's CPU): gc_ring_submit()
  ("asked") finds the ring parked after every burst (the bursts are 800 us apart) and sends the
  burst itself, from the application's thread, as gc_ring_flush() ("flush") and an engine started
  with GC_RING_ENGINE_SUBMIT_FLUSH ("inline") do: a woken engine could only run after the
  application on that CPU, so waking it would add two context switches and send nothing sooner
  (gc_ring(3): it does so when the engine thread can run only on the caller's CPU and the ring's
  previous submit was 50 us ago or more).  Its "engine" column is about 0 and the three rows cost about
  what the application's own UDP_SEGMENT costs ("gso"): one GSO run of 16 per burst either way.
- Taskset placement (the whole sender under `taskset -c 0`, the engine started without
  GC_RING_ENGINE_PIN_CPU): the engine thread inherits the one-CPU mask, and gc_ring_submit() reads
  the engine thread's mask (at attach, then at most every 100 ms), not the pin flag, so it sends
  the paced bursts itself as in the shared placement: its "engine" column is about 0.  Before
  (issue 19, item 11) it handed every burst to the engine thread here, which is what "notify
  every burst" (--modes always: gc_ring_notify() after every publish) still does: that row is
  the cost of the hand-off on one CPU, measured in the same interleaved pass.
- The target (<= 0.45 x send()) was set on an AMD EPYC host where send() cost 3.6 us per packet
  and the application's own UDP_SEGMENT 0.35-0.42 x send(); the "Run" line above says which host
  this run had.  Where send() is cheaper, GSO saves a smaller share of it: when "gso" itself
  costs more than 0.45 x send(), the ring cannot be expected below it, and the ring's column to
  read is "/ gso" (the same k in one sendmsg() of the same pass, target <= 1.1).
- Split placement (the engine on the other CPU): gc_ring_submit() hands every burst to the engine
  thread, which parked the ring after the previous one: the application's eventfd write wakes it
  (a large part of "app" in that row), and the engine returns from epoll_pwait2(), sends the 16
  packets in one GSO run, finds the ring empty, parks it and sleeps again ("engine").  `perf.md`
  splits that hand-off: a wake-up of the other, idle CPU and its return to idle per burst, more
  than twice what it cost on one CPU before gc_ring_submit() stopped handing over there; it also
  varies most from run to run on this shared virtual machine.  That is the price of a second
  thread that sleeps between bursts, and sending there is what the split placement asks for, so
  gc_ring_submit() keeps it.  Spinning before parking (idle_us) would burn the whole gap between
  bursts; notifying every other burst halves the wake-ups and delays the first burst of each pair
  by one gap (800 us here).  "flush" and "inline" avoid it on any CPU: the calling thread pays for
  the send, and the packets leave before the call returns (gc_ring(3), "Where the cost of handing
  over goes").
"""


def report_paced(summary, outdir, args, facts, started, elapsed):
    L = ["# P1, paced: packet ring + engine against send() and the application's own UDP_SEGMENT\n"]
    L.append(run_line(facts, started, elapsed))
    L.append(f"The sender emits {args.pace} packets/s in bursts of k, {args.packets} packets per run, "
             f"{args.reps} interleaved reps; CPU per packet = the sender's thread CPU time during its bursts "
             "(its sleeping and waking between bursts left out, the same for every method) + the engine "
             "thread's whole CPU time.  Ratios are taken rep by rep against send() and against \"gso\" "
             "(UDP_SEGMENT in the application, same k) of the same pass; median [min-max].  Placement "
             "\"shared\": application and engine on CPU 0 (the engine pinned, GC_RING_ENGINE_PIN_CPU); \"split\": "
             "the engine on CPU 1; \"taskset\": the whole sender run under `taskset -c 0`, nothing pinned, the "
             "engine started without a pin flag (it inherits the one CPU).\n")
    L.append("| placement | size | k | method | CPU/packet (ns) | app | engine | / send() | / gso | target |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    names = {"udp": "send()", "gso": "UDP_SEGMENT in the application"}
    for pl in args.placements:
        for size in args.sizes:
            for k in args.ks:
                rows = [x for x in summary if x["placement"] == pl and x["size"] == size and
                        (x["k"] == k or x["method"] == "udp") and x["conns"] == 1]
                for x in sorted(rows, key=lambda x: ["udp", "gso", "ring"].index(x["method"])):
                    name = names.get(x["method"]) or {"asked": "ring, gc_ring_submit()",
                                                      "always": "ring, notify every burst",
                                                      "flush": "ring, gc_ring_flush()",
                                                      "inline": "ring, gc_ring_submit(), SUBMIT_FLUSH engine"}[x["notify"]]
                    r = ratio_cell(x)
                    g = ratio_cell(x, "ratio_gso") if x["ratio_gso"] is not None else ""
                    tgt = "<= 0.45 and <= 1.1 x gso" if x["method"] == "ring" else ""
                    L.append(f"| {pl} | {size} | {k} | {name} | {fmt(x['cpu_ns'])} | {fmt(x['app_ns'])} | "
                             f"{fmt(x['engine_ns'])} | {r} | {g} | {tgt} |")
    L.append("")
    L.append(PACED_READING)
    write_md(outdir, L, "\n")


def report_dccp(summary, outdir, args, facts, started, elapsed):
    L = ["# P1 with DCCP framing: the packet ring over a gc_dccp CCID 2 connection against the UDP ring\n"]
    L.append(run_line(facts, started, elapsed))
    L.append(f"{args.reps} interleaved reps of {args.packets} packets per method; the producer is the ring's "
             "(1400 B, publish every k = 16, gc_ring_submit()).  CPU per packet = the sender process's CPU time "
             "(application + engine thread) from the start of the burst to the last packet handed over.  "
             "\"DCCP\": gc_dccp_connect(), CCID 2, DCCP-UDP (RFC 6773, port 6511: unprivileged, and the "
             "encapsulation with a GSO path; native DCCP goes through a raw socket packet by packet), to a "
             "gc_dccp receiver in the receiving namespace; each run opens a fresh connection and sends "
             "50000 packets before measuring, so that slow start is over; its engine takes up to 64 packets "
             f"a drain (gc_dccp's own engine; --batch {args.batch or 64} is the UDP ring's).  The sender's engine frames, sends "
             "and reads the receiver's Acks (one per Ack Ratio data packets; the sender raises the ratio "
             "with its window, to 32 at cwnd 1024: lib/dccp/ccid2.c ratio_floor()): all counted.  The "
             "receivers (gc_dccp's, and a UDP reader that the UDP methods of the pass send to instead of the "
             "TC sink) run on the CPU the engine does not use and are not counted; the kernel's IP/UDP "
             "receive runs on the sending CPU, the same for every method.  Ratios rep by rep within the "
             "pass; median [min-max].\n")
    L.append("| placement | method | CPU/packet (ns) | app | engine | / send() | / UDP ring | target | "
             "cwnd at the end (min-max) | RTT (us) | lost |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    names = {"udp": "send()", "ring": "UDP ring, gc_ring_submit()", "dccp": "DCCP ring (CCID 2), gc_ring_submit()"}
    for pl in args.placements:
        for x in sorted([x for x in summary if x["placement"] == pl and x["conns"] == 1],
                        key=lambda x: ["udp", "gso", "ring", "dccp"].index(x["method"])):
            if x["method"] == "ring" and x["notify"] != "asked":
                continue
            dccp = x["method"] == "dccp"
            cw = f"{x['cwnd_min']}-{x['cwnd_max']}" if dccp else ""
            r = ratio_cell(x)
            rr = ratio_cell(x, "ratio_ring", bold=True) if dccp else ""
            L.append(f"| {pl} | {names.get(x['method'], x['method'])} | {fmt(x['cpu_ns'])} "
                     f"[{fmt(x['cpu_min'])}-{fmt(x['cpu_max'])}] | {fmt(x['app_ns'])} | {fmt(x['engine_ns'])} | "
                     f"{r} | {rr} | {'<= 1.3' if dccp else ''} | "
                     f"{cw} | "
                     f"{fmt(x['rtt_us']) if dccp else ''} | "
                     f"{x['dccp_lost'] if dccp else ''} |")
    L.append("")
    ratios = [x["ratio_ring"] for x in summary if x["method"] == "dccp" and x["conns"] == 1]
    met = bool(ratios) and all(r is not None and r <= 1.3 for r in ratios)
    L.append(DCCP_READING.replace("{met}", "met" if met else "not met"))
    write_md(outdir, L, "\n")


DCCP_READING = """\
## Reading it

- Issue 14's target, DCCP framing with CCID 2 within 1.3 times the UDP ring's cost per packet, is
  {met} in this run (the "/ UDP ring" column, every placement).  The window ends at or below
  CCID 2's maximum of 1024 packets (the column "cwnd at the end"; losses, if any, in "lost"): it grows only
  while the sender keeps at least half of it in flight (RFC 2861), and with the Acks of a large
  Ack Ratio the sender no longer waits for the window.  The gc_dccp receiver reads every packet and acks once per Ack Ratio
  data packets; the sender negotiates the ratio with its window (Change L(Ack Ratio), RFC 4341
  §6.1.2: about 32 Acks a window, so 32 at cwnd 1024; lib/dccp/ccid2.c ratio_floor()).  With the
  feature's default of 2 (before 721a026) the sender was ack-clocked: it read an Ack per two
  packets (recvmmsg(), 16 at most per call), slept until they came, and each wake-up sent a short
  UDP_SEGMENT run (`perf.md` splits the engine's time of that code: 1.85 shared, 1.44 split).
- What the DCCP sender does per packet beside the UDP ring's work: build a 16-byte header (no
  checksum of ours in DCCP-UDP; the payload goes from the zone to the kernel as a second iovec,
  never copied in user space), record the packet for the Ack Vectors, and process one Ack per
  Ack Ratio packets.  Before this pass the engine sent every DCCP packet with its own sendmsg()
  and copied each payload twice in user space; the messages of the commits that changed it
  (1eef7e5, 1415ad6) have those measurements.
- Native DCCP (IP protocol 33) cannot batch: raw sockets have no UDP_SEGMENT, and its checksum
  covers the payload, so it would pay a send() per packet.  That is why this pass uses DCCP-UDP.
- The receivers run on the CPU the sender's engine does not use: CPU 1 in "shared" (application
  and engine on CPU 0), CPU 0 beside the application in "split" (engine on CPU 1); their time is
  not counted in either placement.
"""


def write_results(rows, args, facts, started, elapsed):
    """summary.csv, the plots and results.md from the raw rows; returns the summary."""
    summary = summarize(rows)
    write_dicts_csv(os.path.join(args.out, "summary.csv"), summary)
    if args.pace:
        report_paced(summary, args.out, args, facts, started, elapsed)
        return summary
    if "dccp" in args.modes.split(","):
        report_dccp(summary, args.out, args, facts, started, elapsed)
        return summary
    plots(summary, args.out, args.placements, args.conns, args.sizes, args.ks)
    report(summary, args.out, args, facts, started, elapsed)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-ring-bench"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ring"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--packets", type=int, default=200000)
    ap.add_argument("--conns", default="1,30")
    ap.add_argument("--placements", default=None, help="shared,split (paced: shared,split,taskset)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--ks", default=",".join(map(str, KS)))
    ap.add_argument("--entries", type=int, default=1024, help="ring size (records) per connection")
    ap.add_argument("--receiver", choices=["tc", "socket"], default="tc")
    ap.add_argument("--quick", action="store_true", help="2 reps, 50000 packets, sizes 0,100,1400, k 1,16")
    ap.add_argument("--batch", type=int, default=0, help="the engine's batch (0: its default, 64)")
    ap.add_argument("--pace", type=int, default=0, help="paced mode: packets/s (bursts of k)")
    ap.add_argument("--gso", action="store_true", help="also the application's own UDP_SEGMENT (k per sendmsg)")
    ap.add_argument("--modes", default=None, help="ring modes (default asked,always,flush; paced: asked,flush,inline)")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild summary.csv, results.md and the plots from --out/raw.jsonl, measure nothing")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.packets, args.sizes, args.ks = 2, 50000, "0,100,1400", "1,16"
    if args.pace:
        args.gso = True
        if "--conns" not in sys.argv:
            args.conns = "1"
        if "--sizes" not in sys.argv:
            args.sizes = "1400"
        if "--ks" not in sys.argv:
            args.ks = "16"
        if "--packets" not in sys.argv:
            args.packets = 40000
        if "--out" not in sys.argv:
            args.out = os.path.join(ROOT, "bench", "results", "ring", "paced")
    if args.modes and "dccp" in args.modes.split(","):
        for opt, val in (("--conns", "1"), ("--sizes", "1400"), ("--ks", "16"),
                         ("--out", os.path.join(ROOT, "bench", "results", "ring", "dccp"))):
            if opt not in sys.argv:
                setattr(args, opt[2:], val)
    if args.modes is None:
        args.modes = "asked,flush,inline" if args.pace else "asked,always,flush"
    if args.placements is None:
        args.placements = "shared,split,taskset" if args.pace else "shared,split"
    args.conns = [int(c) for c in args.conns.split(",")]
    args.placements = [p for p in args.placements.split(",") if p]
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.ks = [int(k) for k in args.ks.split(",")]
    if any(p not in PLACEMENTS for p in args.placements):
        sys.exit(f"--placements: one of {', '.join(PLACEMENTS)}")
    if "taskset" in args.placements and "dccp" in args.modes.split(","):
        sys.exit("--placements taskset: not with --modes dccp (its receiver runs on the other CPU)")
    if args.report_only:
        rows = [json.loads(line) for line in open(os.path.join(args.out, "raw.jsonl"))]
        args.reps = max(r["rep"] for r in rows) + 1
        args.packets = rows[0]["packets"]
        with open(os.path.join(args.out, "command.txt")) as f:
            text = f.read()
        started = text.split("run ", 1)[1].split("\n", 1)[0]
        elapsed = float(text.split("elapsed: ", 1)[1].split(" ", 1)[0])
        write_results(rows, args, machine_facts(detail=True), started, elapsed)
        portable(args.out)
        log(f"results rebuilt in {args.out}")
        return
    if os.geteuid() != 0:
        sys.exit("bench/ring.py needs root (network namespaces, TC)")

    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    t0 = time.time()
    tmp = os.path.join(args.out, "tmp")
    exe, sink = build(args.build, tmp)
    facts = machine_facts(detail=True)
    rows, argvs = [], []
    lab, star, r, snd_if = make_lab(args.receiver, sink, args.conns)
    try:
        for pl in args.placements:
            for conns in args.conns:
                log(f"P1, {pl} placement, {conns} connection(s): {len(args.sizes)} sizes x "
                    f"(UDP + {(3 if conns == 1 else 2) * len(args.ks)} ring variants) x {args.reps} reps")
                got, argv = run(lab, star, r, exe, conns, pl, args, f"/tmp/{lab.prefix}-engine.sock")
                rows += got
                argvs.append(argv)
        offload = lab.run(star.sender, ["ethtool", "-k", snd_if], capture_output=True, text=True).stdout
    finally:
        lab.close()
    elapsed = time.time() - t0

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "raw.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    summary = write_results(rows, args, facts, started, elapsed)
    with open(os.path.join(args.out, "command.txt"), "w") as f:
        f.write("# P1 (bench/ring.py), run " + started + "\n")
        f.write("# from the repository root:\nsudo python3 " + " ".join(sys.argv) + "\n\n")
        f.write("# the measuring runs, inside the lab's sender namespace (ring_p1 is bench/ring_p1.c,\n"
                "# built by bench/ring.py against " + os.path.join(args.build, "libgroupcast.a") + "):\n")
        for argv in argvs:
            f.write(" ".join(argv) + "\n")
        f.write("\n# machine\n")
        for k, v in facts.items():
            f.write(f"{k}: {v}\n")
        f.write("git: " + subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                                         text=True).stdout.strip() + " (plus the working tree)\n")
        f.write("\n# lab: star(1); sender veth offloads (tso off, tx-udp-segmentation off):\n")
        f.write("\n".join(line for line in offload.splitlines()
                           if "segmentation" in line or "generic" in line or "checksumming" in line) + "\n")
        f.write(f"receiver: {args.receiver}" + (" (bench/ring_sink.bpf.c, TC ingress on the receiving veth)\n"
                                                if args.receiver == "tc" else "\n"))
        f.write(f"elapsed: {elapsed:.0f} s\n")
    shutil.rmtree(tmp, ignore_errors=True)
    portable(args.out)
    if "dccp" in args.modes.split(","):
        for x in summary:
            if x["method"] == "dccp":
                log(f"{x['placement']}: DCCP ring {fmt(x['cpu_ns'])} ns/packet, / UDP ring {fmt(x['ratio_ring'], 2)}, "
                    f"/ send() {fmt(x['ratio'], 2)}, cwnd {x['cwnd_min']}-{x['cwnd_max']}")
        log(f"results in {args.out}")
        return
    if args.pace:
        for x in summary:
            if x["method"] != "udp":
                log(f"{x['placement']}: {x['method']} {x['notify']} k={x['k']}: {fmt(x['cpu_ns'])} ns/packet, "
                    f"/ send() {fmt(x['ratio'], 2)}, / gso {fmt(x['ratio_gso'], 2)}")
        log(f"results in {args.out}")
        return
    for pl in args.placements:
        for conns in args.conns:
            x = find(summary, pl, conns, "ring", 1400, 16, "always")
            y = find(summary, pl, conns, "ring", 1400, 16, "asked")
            z0 = find(summary, pl, conns, "ring", 0, 1, "asked")
            z1 = find(summary, pl, conns, "ring", 100, 1, "asked")
            log(f"{pl}, {conns} conn(s): ring k=16 / UDP at 1400 B = {fmt(x and x['ratio'], 2)} (always), "
                f"{fmt(y and y['ratio'], 2)} (asked); k=1 / UDP at 0 B = {fmt(z0 and z0['ratio'], 2)}, "
                f"at 100 B = {fmt(z1 and z1['ratio'], 2)} (asked)")
    log(f"results in {args.out}")


if __name__ == "__main__":
    main()
