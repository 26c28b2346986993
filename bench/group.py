#!/usr/bin/env python3
"""The group-unicast experiments of the seed papers, measured on this machine
with every available groupcast engine, in one command:

    python3 bench/group.py [--quick] [--build DIR] [--max-n 10000] [--only G1,G2,F5,G3] [--out DIR]

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
import bisect
import csv
import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402

FRAME_MS = 1000.0 / 30          # 33.33 ms: one frame of a 30 frame/s game loop
ALL_N = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
QUICK_N = [1, 10, 100, 1000]
UDP4_MAX_UNFRAGMENTED = 1500 - 20 - 8   # payload of one unfragmented IPv4 UDP datagram on the lab's veths

# The papers' numbers we put beside ours.
PAPER_TABLE1 = [  # seed 000, Table 1: N, send, other, send', total', factor, N' (ms; 100 B, FreeBSD)
    (40, 2.78, 30.55, 0.75, 31.30, 1.06, 42),
    (120, 8.26, 25.07, 1.90, 26.97, 1.24, 148),
    (240, 16.50, 16.83, 3.64, 20.47, 1.63, 390),
    (360, 24.76, 8.57, 5.36, 13.93, 2.39, 861),
    (480, 33.06, 0.27, 7.10, 7.37, 4.52, 2170),
]
PAPER_RATIO_100 = (480, 33.06 / 7.10, "kernel-groupcast vs user-groupcast, FreeBSD 5.2.1, 100 B "
                   "(seed 000, Table 1 / Figure 3: 33.06 ms / 7.10 ms)")
PAPER_RATIO_1000 = (1000, 1.664, "sendgroup() vs sendmsg() loop, Linux, 1000 B "
                    "(seed 003, Amdahl slide: s = 1.664)")

# --- F5: classification of kernel symbols --------------------------------------------------------
# A sample is charged to the category of the first frame, walking from the
# leaf towards the root, whose symbol matches one of these rules (checked in
# this order for each frame).  Generic leaves (spin locks, memset, ...) thus
# go to the caller that did the work.
F5_CATEGORIES = [
    ("BPF program + helpers", r"^bpf_prog_|^bpf_|^__bpf_|^___bpf_|^tcf_classify|^tc_run|^tcx_|"
                              r"^sch_handle_egress|^sch_handle_ingress|^cls_bpf|^skb_do_redirect"),
    ("copy", r"memcpy|memmove|copy_from_user|copy_to_user|copy_from_iter|copy_to_iter|"
             r"copy_page_from_iter|copy_page_to_iter|copy_user|rep_movs|csum_partial_copy|"
             r"csum_and_copy|skb_copy_bits|ip_generic_getfrag|fault_in_iov"),
    ("skb alloc/clone/free", r"skb_clone|__copy_skb_header|alloc_skb|build_skb|kfree_skb|consume_skb|"
                             r"skb_release|skb_free|__kfree_skb|napi_consume_skb|skb_attempt_defer|"
                             r"pskb_expand_head|kmem_cache|kmalloc|kfree|slab|get_netmem|put_netmem|"
                             r"put_page|page_frag|sock_alloc_send|sock_wmalloc|sock_wfree|skb_set_owner|"
                             r"sock_def_write_space|skb_orphan|memcg|obj_cgroup|objcg|refill_stock|"
                             r"skb_put|skb_push|__skb_.*data|skb_morph|__build_skb|alloc_pages|free_pages|"
                             r"__free_|rmqueue|free_unref"),
    ("routing/neighbour", r"ip_route_output|__ip_route_output|ip_route_|fib_|fib6_|ip_rt_|rt_dst|dst_release|"
                          r"dst_alloc|dst_destroy|dst_hold|dst_dev|neigh_|__neigh|ip_neigh|ipv4_neigh|"
                          r"arp_|xfrm_lookup|l3mdev|ip6_route|ip6_dst|rt6_|ip6_pol_route|ndisc_|"
                          r"security_sk_classify_flow|flowi|ip_mc_output"),
    ("IPI to wake CPU 1 (lab)", r"x2apic_send_IPI|send_IPI|native_send_call_func|generic_exec_single|"
                               r"smp_call_function|__smp_call_single_queue|net_rps_send_ipi|"
                               r"arch_send_call_function|pv_send_ipi|kvm_send_ipi"),
    ("device xmit (incl. RPS)", r"dev_queue_xmit|dev_hard_start_xmit|veth_|netif_rx|enqueue_to_backlog|"
                                r"get_rps_cpu|rps_|net_rx_action|napi_|do_softirq|handle_softirqs|"
                                r"net_rps|passthru_features_check|"
                                r"netif_skb_features|validate_xmit|eth_type_trans|dev_forward_skb|"
                                r"skb_tx_timestamp|qdisc|sch_direct_xmit|netdev_core_pick_tx|netdev_pick_tx|"
                                r"loopback_xmit|skb_network_protocol|netif_receive|process_backlog|"
                                r"is_skb_forwardable|xmit_one|local_bh_enable|__local_bh|dev_xmit|"
                                r"skb_csum_hwoffload|skb_checksum_help|eth_header|raise_softirq"),
    ("UDP/IP output", r"^udp|^__udp|udpv6_|ip_make_skb|__ip_make_skb|__ip_append_data|ip_append_data|"
                      r"ip_setup_cork|ip_send_skb|ip_local_out|__ip_local_out|^ip_output|ip_finish_output|"
                      r"ip_send_check|ip_fast_csum|csum_partial|ip_select_ident|ip_idents|^ip6_|ipv6_|"
                      r"nf_hook|ip_rcv|ip_local_deliver|ip_copy_addrs|ip_cmsg|__ip_select_ident|"
                      r"inet_sk|ip_generic|ip_fragment|ip_do_fragment|ip_frag"),
    ("socket layer", r"__sys_sendto|__sys_sendmsg|___sys_sendmsg|____sys_sendmsg|__sys_sendmmsg|"
                     r"sock_sendmsg|__sock_sendmsg|security_socket|inet_sendmsg|inet6_sendmsg|"
                     r"inet_send_prepare|sockfd_lookup|fdget|__fget|fput|fget|import_single_range|"
                     r"import_iovec|copy_msghdr|sendmsg_copy_msghdr|move_addr_to_kernel|iovec_from_user|"
                     r"sock_write_iter|vfs_write|ksys_write|pipe_|splice|sock_splice|lock_sock|"
                     r"release_sock|apparmor|selinux|security_|__fdget|rw_verify_area|fsnotify"),
    ("syscall entry/exit", r"^entry_SYSCALL|^do_syscall_64|syscall_exit|exit_to_user_mode|^__x64_sys_|"
                           r"^x64_sys_call|syscall_return|^entry_|fpregs_|switch_fpu|arch_exit_to_user|"
                           r"clear_bhb|srso_|retbleed|__pfx_|syscall_enter|rseq|audit|seccomp|"
                           r"irqentry_exit_to_user|syscall_trace"),
]
F5_ORDER = ["user space", "syscall entry/exit", "socket layer", "copy", "UDP/IP output",
            "routing/neighbour", "device xmit (incl. RPS)", "IPI to wake CPU 1 (lab)", "skb alloc/clone/free",
            "BPF program + helpers", "other"]
F5_RULES = [(name, re.compile(rx)) for name, rx in F5_CATEGORIES]
IPI = "IPI to wake CPU 1 (lab)"
PACING = re.compile(r"nanosleep|do_nanosleep|hrtimer_nanosleep")
SEND_MARK = re.compile(r"^udp_sendmsg$|^udpv6_sendmsg$")


# --- small helpers ------------------------------------------------------------------------------

def log(msg):
    print(msg, flush=True)


def fmt_us(ns):
    return "-" if ns is None else f"{ns / 1e3:.1f}" if ns < 1e6 else f"{ns / 1e3:.0f}"


def git_commit():
    try:
        head = subprocess.run(["git", "-C", gcbench.ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", gcbench.ROOT, "status", "--porcelain"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + (" (work tree has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def kdata_limit():
    """GC_KDATA from bpf/fanout.h: per-recipient bytes the kernel engine splices itself."""
    try:
        with open(os.path.join(gcbench.ROOT, "bpf", "fanout.h")) as f:
            m = re.search(r"#define\s+GC_KDATA\s+(\d+)", f.read())
            return int(m.group(1)) if m else None
    except OSError:
        return None


class Runner:
    """Runs verified points with gcbench.blast and keeps every attempt."""

    def __init__(self, args, lab, star, engines):
        self.args, self.lab, self.star, self.engines = args, lab, star, engines
        self.points = []        # every point, every attempt, for raw.json / rows.csv

    def point(self, exp, key, n, size, sends, reps, interval_us, replace=False, pre=0, app=0,
              sendgroup=False, engines=None, wrap=(), retries=None, warmup=True, shuffle=False):
        """One verified blast point.  On loss, retried with twice the pacing
        (the lost attempt is kept in the raw data and noted in the tables)."""
        engines = engines or self.engines
        retries = self.args.retries if retries is None else retries
        attempts = []
        for attempt in range(retries + 1):
            t0 = time.monotonic()
            err = None
            try:
                res = gcbench.blast(self.args.build, self.lab, self.star, n, engines, size=size,
                                    sends=sends, reps=reps, interval_us=interval_us, replace=replace,
                                    prepend=pre, append=app, sendgroup=sendgroup, wrap=wrap,
                                    warmup=warmup, shuffle=shuffle)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                res, err = None, str(e)
            took = time.monotonic() - t0
            a = {"attempt": attempt, "interval_us": interval_us, "seconds": round(took, 2)}
            if res is None:
                a.update(status="ERROR", error=err, rows=[], sinks=[], medians={}, lost=None)
            else:
                failed = sum(r["failed"] for r in res.rows)
                stats_ok = all(r.get("stats_ok", True) for r in res.rows)
                ok = res.ok() and failed == 0 and stats_ok
                a.update(status="ok" if ok else "LOST", rows=res.rows, sinks=res.sinks,
                         medians=res.medians, lost=res.lost, failed=failed, stats_ok=stats_ok,
                         argv=res.argv, due_per_member=res.expected,
                         received=sum(s["received"] for s in res.sinks),
                         due=sum(s["due"] for s in res.sinks),
                         warnings=[line for line in res.stderr.splitlines() if "warn" in line.lower()
                                   or "fail" in line.lower()][:10])
            attempts.append(a)
            if a["status"] == "ok":
                break
            log(f"    {exp} {key}: {a['status']} (lost {a.get('lost')}, failed {a.get('failed')}"
                f"{', ' + err if err else ''}); " + ("retrying with twice the pacing" if attempt < retries
                                                     else "giving up: reported as LOST"))
            interval_us = max(2 * interval_us, 100)
        final = attempts[-1]
        p = {"experiment": exp, "key": key, "n": n, "size": size, "sends": sends, "reps": reps,
             "replace": replace, "shuffle": shuffle, "prepend": pre, "append": app, "sendgroup": sendgroup, "warmup": warmup,
             "engines": list(engines), "status": final["status"], "interval_us": final["interval_us"],
             "retried": len(attempts) > 1, "medians": final["medians"] if final["status"] == "ok" else {},
             "attempts": attempts}
        self.points.append(p)
        return p


UNPACED_MAX_N = 50


def pace_us(n, paced=None):
    """Pacing: sleep after each send so that the receivers (about 4 us of CPU 1
    per datagram here) drain one send before the next: 5 us per member.  Up to
    UNPACED_MAX_N members the sends go back to back (timed per rep, no timer
    per send): a few thousand datagrams fit the receivers' queues, and every
    paced send would also pay for waking the idle CPU 1 (see README)."""
    if paced is None:
        paced = n > UNPACED_MAX_N
    return max(50, 5 * n) if paced else 0


def sends_for(n, target, lo, hi):
    """Group sends per engine and rep: about `target` datagrams per member set."""
    return int(min(hi, max(lo, math.ceil(target / n))))


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


def g1_curve(points, size, replace, engine, metric="cpu_ns"):
    """[(n, median)] of the verified G1 points."""
    cur = []
    for p in points:
        if p["experiment"] == "G1" and p["size"] == size and p["replace"] == replace and p["status"] == "ok" \
                and engine in p["medians"]:
            cur.append((p["n"], p["medians"][engine][metric]))
    return sorted(cur)


# --- G2 -----------------------------------------------------------------------------------------

def interp(curve, n):
    """Send time (ns) at group size n, linear between the measured sizes; above
    the largest, extended with the per-member slope of the last two points.
    Returns (ns, extrapolated?)."""
    xs = [x for x, _ in curve]
    if not curve:
        return None, False
    if n <= xs[0]:
        return curve[0][1] * n / xs[0], False
    if n > xs[-1]:
        (x0, y0), (x1, y1) = curve[-2], curve[-1]
        return y1 + (y1 - y0) / (x1 - x0) * (n - x1), True
    i = bisect.bisect_left(xs, n)
    if xs[i] == n:
        return curve[i][1], False
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0), False


def inverse(curve, budget_ns):
    """Largest real n with interp(curve, n) <= budget (the curve made monotone
    by a running maximum, so noise at small n cannot give two answers)."""
    mono, top = [], 0.0
    for x, y in curve:
        top = max(top, y)
        mono.append((x, top))
    if not mono:
        return None, False
    if budget_ns < mono[0][1]:
        return mono[0][0] * budget_ns / mono[0][1], False
    for (x0, y0), (x1, y1) in zip(mono, mono[1:]):
        if y0 <= budget_ns < y1:
            return x0 + (x1 - x0) * (budget_ns - y0) / (y1 - y0), False
    (x0, y0), (x1, y1) = mono[-2], mono[-1]
    slope = (y1 - y0) / (x1 - x0)
    if slope <= 0:
        return math.inf, True
    return x1 + (budget_ns - y1) / slope, True


def g2_rows(points, engines, size, replace, metric, rows_by):
    """The paper's Table 1 computed from our G1 curves.  rows_by 'n': the
    paper's group sizes; 'send': the N at which our loop send takes the
    paper's send time (same share of the frame as in the paper)."""
    loop = g1_curve(points, size, replace, "loop", metric)
    if len(loop) < 2:
        return []
    rows = []
    for pn, psend, *_ in PAPER_TABLE1:
        if rows_by == "n":
            n = pn
            send, ext = interp(loop, n)
        else:
            n, ext = inverse(loop, psend * 1e6)
            send = psend * 1e6
        send_ms = send / 1e6
        other = FRAME_MS - send_ms
        row = {"paper_N": pn, "N": n, "send_ms": send_ms, "other_ms": other, "extrapolated": ext,
               "engines": {}}
        for e in engines:
            if e == "loop":
                continue
            cur = g1_curve(points, size, replace, e, metric)
            if len(cur) < 2:
                continue
            s2, ext2 = interp(cur, n)
            s2_ms = s2 / 1e6
            total = other + s2_ms
            factor = FRAME_MS / total
            # the paper's N': every per-player cost scales (N' = N x factor)
            n_paper = n * factor
            # fixed other: the largest N' whose engine send fits what the frame leaves
            n_fixed, ext3 = inverse(cur, (FRAME_MS - other) * 1e6) if other < FRAME_MS else (0, False)
            row["engines"][e] = {"send_ms": s2_ms, "total_ms": total, "factor": factor,
                                 "N_paper": n_paper, "N_fixed_other": n_fixed,
                                 "extrapolated": ext or ext2 or ext3}
        rows.append(row)
    return rows


# --- F5 -----------------------------------------------------------------------------------------

def perf_ok():
    return shutil.which("perf") is not None


def parse_perf_script(text):
    """Samples as (time, [(symbol, is_kernel)] leaf first)."""
    samples, cur, t = [], None, None
    head = re.compile(r"^\S.*?\s+(\d+)\s+([\d.]+):")
    for line in text.splitlines():
        if not line.strip():
            if cur is not None:
                samples.append((t, cur))
            cur = None
            continue
        if not line.startswith((" ", "\t")):
            m = head.match(line)
            if cur is not None:
                samples.append((t, cur))
            cur, t = ([], float(m.group(2))) if m else (None, None)
            continue
        if cur is None:
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        dso = rest[rest.rfind("(") + 1:-1] if rest.endswith(")") else ""
        sym = rest[:rest.rfind("(")].strip() if "(" in rest else rest
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        cur.append((sym, dso == "[kernel.kallsyms]" or sym.startswith("bpf_prog_")))
    if cur is not None:
        samples.append((t, cur))
    return samples


def classify(chain):
    if not chain:
        return "other"
    if not chain[0][1]:
        return "user space"
    for sym, kernel in chain:
        if not kernel:
            break
        for name, rx in F5_RULES:
            if rx.search(sym):
                return name
    return "other"


def f5_analyse(samples):
    """Category counts of the samples inside the send window (first to last
    sample under udp_sendmsg), without the pacing sleeps."""
    marks = [t for t, ch in samples if any(SEND_MARK.search(s) for s, k in ch if k)]
    res = {"samples_total": len(samples), "counts": {c: 0 for c in F5_ORDER}, "top": {}}
    if not marks:
        return res
    lo, hi = min(marks), max(marks)
    pacing = outside = 0
    top = {}
    for t, ch in samples:
        if t < lo or t > hi:
            outside += 1
            continue
        if any(PACING.search(s) for s, k in ch if k):
            pacing += 1
            continue
        c = classify(ch)
        res["counts"][c] += 1
        leaf = ch[0][0] if ch else "?"
        top.setdefault(c, {}).setdefault(leaf, 0)
        top[c][leaf] += 1
    res.update(samples_outside_window=outside, samples_pacing=pacing,
               samples_counted=sum(res["counts"].values()), window_s=hi - lo)
    res["top"] = {c: sorted(v.items(), key=lambda kv: -kv[1])[:8] for c, v in top.items()}
    return res


def rusage_wrap(outfile):
    """Fallback without perf: the blast's user and system CPU from getrusage."""
    code = ("import resource,subprocess,sys,json\n"
            "r=subprocess.run(sys.argv[2:])\n"
            "u=resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "open(sys.argv[1],'w').write(json.dumps({'utime':u.ru_utime,'stime':u.ru_stime,"
            "'nvcsw':u.ru_nvcsw,'nivcsw':u.ru_nivcsw}))\n"
            "sys.exit(r.returncode)\n")
    return [sys.executable, "-c", code, outfile]


def run_f5(r, cfg, g1_points):
    out = {"runs": [], "perf": perf_ok(), "notes": []}
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
                    wrap = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(cfg["f5_freq"]), "-g",
                            "-o", data, "--"]
                else:
                    wrap = rusage_wrap(os.path.join(tmp, f"ru-{e}-{size}.json"))
                t0 = time.monotonic()
                p = r.point("F5", f"{size}B {e} N={n}" + (" perf" if used_perf else " rusage"), n, size,
                            sends, 1, pace_us(n), engines=[e], wrap=wrap, warmup=False)
                run["status"] = p["status"]
                run["cpu_ns_under_profiler"] = p["medians"].get(e, {}).get("cpu_ns")
                g1 = dict(g1_curve(g1_points, size, False, e))
                run["cpu_ns_g1"] = g1.get(n)
                base = run["cpu_ns_g1"] or run["cpu_ns_under_profiler"]
                run["cpu_ns_basis"] = "G1 (N=1000, fixed group, no profiler)" if run["cpu_ns_g1"] \
                    else "this run (under the profiler)"
                if used_perf and os.path.exists(data):
                    sc = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,ip,sym,dso"],
                                        capture_output=True, text=True)
                    if sc.returncode != 0 or not sc.stdout.strip():
                        run["perf_error"] = sc.stderr.strip()[-500:] or "perf script printed nothing"
                    else:
                        a = f5_analyse(parse_perf_script(sc.stdout))
                        run.update(a)
                        tot = a.get("samples_counted", 0)
                        if tot:
                            run["percent"] = {c: 100.0 * a["counts"][c] / tot for c in F5_ORDER}
                            if base:
                                run["ns_per_member"] = {c: run["percent"][c] / 100 * base / n for c in F5_ORDER}
                        else:
                            run["perf_error"] = "no samples in the send window"
                elif used_perf:
                    run["perf_error"] = "perf record wrote no data: " + "; ".join(
                        a.get("error") or "" for a in p["attempts"])[:300]
                ru = os.path.join(tmp, f"ru-{e}-{size}.json")
                if os.path.exists(ru):
                    with open(ru) as f:
                        u = json.load(f)
                    run["rusage"] = u
                    tot = u["utime"] + u["stime"]
                    if tot > 0:
                        run["percent"] = {c: 0.0 for c in F5_ORDER}
                        run["percent"]["user space"] = 100 * u["utime"] / tot
                        run["percent"]["other"] = 100 * u["stime"] / tot   # kernel, not split
                        run["fallback"] = "rusage: user vs kernel time only (perf unavailable)"
                        if base:
                            run["ns_per_member"] = {c: run["percent"][c] / 100 * base / n for c in F5_ORDER}
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
                p["fragmented"] = size + 2 * s > UDP4_MAX_UNFRAGMENTED
                m = p["medians"]
                desc = "  ".join(f"{e} {m[e]['cpu_ns'] / 1e3:.1f}" for e in r.engines) \
                    if p["status"] == "ok" else "LOST"
                log(f"  G3 N={n:<5} payload {size:4} B prepend=append={s:3} [{time.monotonic() - t0:4.1f}s]"
                    f"  us/send: {desc}")
                out.append(p)
    return out


# --- output -------------------------------------------------------------------------------------

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


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


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
            paper_n, paper_r, paper_what = PAPER_RATIO_100 if size == 100 else PAPER_RATIO_1000 \
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
    md.append(f"\nThe papers: {PAPER_RATIO_100[1]:.2f}× at N={PAPER_RATIO_100[0]} ({PAPER_RATIO_100[2]}); "
              f"{PAPER_RATIO_1000[1]:.3f}× at N={PAPER_RATIO_1000[0]} ({PAPER_RATIO_1000[2]}).")
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
             f"{FRAME_MS / (o + s2):.2f} / {n * FRAME_MS / (o + s2):.0f}"]
            for n, s, o, s2, t, fct, np_ in PAPER_TABLE1]
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


def plots(outdir, g1, g2, f5, g3, engines, cfg):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["matplotlib is not installed: no plots"]
    made = []
    colors = {e: c for e, c in zip(["loop", "mmsg", "uring", "uring_zc", "kernel"],
                                   ["black", "tab:blue", "tab:green", "tab:purple", "tab:red"])}
    if g1:
        for metric, fname, label in (("cpu_ns", "g1_cpu.png", "sender CPU per group send (µs)"),
                                     ("wall_ns", "g1_wall.png", "wall time per group send (µs)")):
            fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharex=True)
            for i, size in enumerate(cfg["g1_sizes"][:2]):
                for j, replace in enumerate((False, True)):
                    ax = axes[i][j]
                    for e in engines:
                        cur = g1_curve(g1, size, replace, e, metric)
                        if not cur:
                            continue
                        xs, ys = zip(*cur)
                        ax.plot(xs, [y / 1e3 for y in ys], "o-", ms=3, color=colors.get(e), label=e)
                        if metric == "cpu_ns":
                            pts = sorted((p for p in g1 if p["size"] == size and p["replace"] == replace
                                          and p["status"] == "ok"), key=lambda p: p["n"])
                            ax.fill_between([p["n"] for p in pts],
                                            [p["medians"][e]["cpu_min"] / 1e3 for p in pts],
                                            [p["medians"][e]["cpu_max"] / 1e3 for p in pts],
                                            color=colors.get(e), alpha=0.12, lw=0)
                    lost = [p["n"] for p in g1 if p["size"] == size and p["replace"] == replace
                            and p["status"] != "ok"]
                    for n in lost:
                        ax.axvline(n, color="red", ls=":", lw=1)
                        ax.text(n, ax.get_ylim()[1] if ax.has_data() else 1, "LOST", color="red",
                                fontsize=7, rotation=90, va="top")
                    ax.set_xscale("log")
                    ax.set_yscale("log")
                    ax.grid(True, which="both", alpha=0.3)
                    ax.set_title(f"{size} B, {'group replaced every send' if replace else 'fixed group'}",
                                 fontsize=10)
                    if i == 1:
                        ax.set_xlabel("group size N")
                    if j == 0:
                        ax.set_ylabel(label)
                    ax.legend(fontsize=8)
            fig.suptitle("G1: one group send against group size (cf. Karsten et al. 2005, Fig. 3/4); "
                         "median of reps, band = min..max", fontsize=10)
            fig.tight_layout()
            fig.savefig(os.path.join(outdir, fname), dpi=110)
            plt.close(fig)
            made.append(fname)
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
        for i, size in enumerate(cfg["g1_sizes"][:2]):
            ax = axes[i]
            for e in engines:
                if e == "loop":
                    continue
                for replace, ls in ((False, "-"), (True, "--")):
                    loop = dict(g1_curve(g1, size, replace, "loop"))
                    cur = [(n, loop[n] / y) for n, y in g1_curve(g1, size, replace, e) if n in loop]
                    if cur:
                        xs, ys = zip(*cur)
                        ax.plot(xs, ys, ls, marker="o", ms=3, color=colors.get(e),
                                label=f"{e}{' (replaced)' if replace else ''}")
            pn, pr, _ = PAPER_RATIO_100 if size == 100 else PAPER_RATIO_1000
            ax.plot([pn], [pr], "k*", ms=12, label=f"paper {pr:.2f}× at N={pn}")
            ax.axhline(1, color="gray", lw=0.8)
            ax.set_xscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{size} B: speed-up vs loop (loop CPU / engine CPU)", fontsize=10)
            ax.set_xlabel("group size N")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "g1_speedup.png"), dpi=110)
        plt.close(fig)
        made.append("g1_speedup.png")
    if f5 and any(r.get("ns_per_member") for r in f5["runs"]):
        runs = [r for r in f5["runs"] if r.get("ns_per_member")]
        fig, axes = plt.subplots(1, 2, figsize=(11, 5))
        labels = [f"{r['engine']}\n{r['size']} B" for r in runs]
        cmap = plt.get_cmap("tab10")
        for k, (ax, key, ylabel) in enumerate(((axes[0], "ns_per_member", "sender CPU per member (ns)"),
                                                (axes[1], "percent", "share of sender CPU (%)"))):
            bottom = [0.0] * len(runs)
            for ci, c in enumerate(F5_ORDER):
                vals = [r[key][c] for r in runs]
                ax.bar(labels, vals, bottom=bottom, color=cmap(ci), label=c if k == 0 else None)
                bottom = [b + v for b, v in zip(bottom, vals)]
            ax.set_ylabel(ylabel)
        axes[0].legend(fontsize=7, loc="upper right")
        fig.suptitle("F5: where a group send's time goes, N=1000 (perf cpu-clock samples, "
                     "cf. Karsten et al. 2005, Fig. 5)", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "f5_breakdown.png"), dpi=110)
        plt.close(fig)
        made.append("f5_breakdown.png")
    if g3:
        ns = sorted({p["n"] for p in g3})
        pas = sorted({p["prepend"] for p in g3})
        fig, axes = plt.subplots(len(ns), len(pas), figsize=(3.2 * len(pas), 3.3 * len(ns)), squeeze=False,
                                 sharex=True)
        for i, n in enumerate(ns):
            for j, s in enumerate(pas):
                ax = axes[i][j]
                pts = sorted((p for p in g3 if p["n"] == n and p["prepend"] == s), key=lambda p: p["size"])
                for e in engines:
                    xy = [(p["size"], p["medians"][e]["cpu_ns"] / n) for p in pts if e in p["medians"]]
                    if xy:
                        xs, ys = zip(*xy)
                        ax.plot(xs, ys, "o-", ms=3, color=colors.get(e), label=e)
                for p in pts:
                    if p["status"] != "ok":
                        ax.axvline(p["size"], color="red", ls=":", lw=1)
                ax.set_title(f"N={n}, prepend=append={s} B", fontsize=9)
                ax.grid(True, alpha=0.3)
                ax.set_ylim(bottom=0)
                if i == len(ns) - 1:
                    ax.set_xlabel("shared payload (B)")
                if j == 0:
                    ax.set_ylabel("sender CPU per member (ns)")
        axes[0][0].legend(fontsize=7)
        fig.suptitle("G3: gc_sendgroup() cost against payload and per-recipient data", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "g3_sendgroup.png"), dpi=110)
        plt.close(fig)
        made.append("g3_sendgroup.png")
    return made


# --- main ---------------------------------------------------------------------------------------

def config(args):
    ns = [n for n in (QUICK_N if args.quick else ALL_N) if n <= args.max_n]
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

    info = gcbench.engines_available(args.build)
    engines = [e["name"] for e in info["engines"] if e["available"]]
    skipped = {e["name"]: e["reason"] for e in info["engines"] if not e["available"]}
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
        g2 = {"tables": []}
        for metric, mname in (("cpu_ns", "sender CPU"), ("wall_ns", "wall time")):
            for rows_by, what in (("n", "at the paper's group sizes"),
                                  ("send", "at the group sizes where our loop send takes the paper's send time")):
                if metric == "wall_ns" and rows_by == "n":
                    continue
                g2["tables"].append({
                    "name": f"{metric}-{rows_by}", "metric": metric, "size": 100, "replace": False,
                    "rows_by": rows_by,
                    "title": f"Ours, 100 B, fixed group, {mname}, {what} (ms)",
                    "rows": g2_rows(g1, engines, 100, False, metric, rows_by)})
    elapsed = time.monotonic() - started
    all_pts = runner.points
    statuses = {p["key"]: p["status"] for p in all_pts}
    lost = [k for k, s in statuses.items() if s != "ok"]

    # --- write everything ---
    kd = kdata_limit()
    facts = gcbench.machine_facts()
    cmd = " ".join(["python3", os.path.relpath(os.path.abspath(sys.argv[0]), gcbench.ROOT)] + sys.argv[1:])
    raw = {"started": t_start.isoformat(timespec="seconds"), "command": cmd, "argv": sys.argv,
           "cwd": os.getcwd(), "commit": git_commit(), "machine": facts, "engines": engines,
           "skipped_engines": skipped, "auto": info.get("auto"), "config": cfg, "quick": args.quick,
           "max_n": args.max_n, "only": sorted(only), "build": args.build, "seconds": round(elapsed, 1),
           "seconds_per_experiment": {k: round(v, 1) for k, v in timings.items()},
           "all_points_ok": not lost, "lost_points": lost, "points": all_pts, "g2": g2, "f5": f5,
           "gc_kdata": kd, "paper": {"table1": PAPER_TABLE1, "ratio_100": PAPER_RATIO_100,
                                     "ratio_1000": PAPER_RATIO_1000}}
    if prev:
        raw["g1_from"] = prev.get("started")
    with open(os.path.join(args.out, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)
    write_csvs(args.out, runner, g2, f5, g3)
    made = plots(args.out, g1, g2, f5, g3, engines, cfg)

    with open(os.path.join(args.out, "command.txt"), "w") as f:
        f.write(f"command:  {cmd}\n")
        f.write(f"cwd:      {os.getcwd()}\n")
        f.write(f"started:  {raw['started']}\n")
        f.write(f"duration: {elapsed:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in timings.items())})\n")
        f.write(f"commit:   {raw['commit']}\n")
        f.write(f"build:    {args.build}\n")
        f.write(f"machine:  {json.dumps(facts)}\n")
        f.write(f"engines:  {', '.join(engines)}" + (f" (unavailable: {skipped})" if skipped else "") + "\n")
        f.write(f"perf:     {shutil.which('perf') or 'not installed'}\n")
        f.write("lab:      gcbench.make_lab(2): sender ns + 2 receiver ns (veth), RPS of the receiving veths "
                "to CPU 1, net.core.netdev_max_backlog=20000 (restored), blast pinned to CPU 0, sinks to CPU 1\n")
        f.write(f"points:   {len(all_pts)}, {len(lost)} LOST" + (f": {lost}" if lost else "") + "\n")

    md = [f"# Group unicast on this machine: G1, G2, F5, G3\n",
          f"`{cmd}` — {raw['started']}, {elapsed / 60:.1f} min, commit `{raw['commit']}`  ",
          f"Machine: {facts.get('cpu', '?')}, {facts.get('cpus')} CPUs, Linux {facts.get('kernel')}. "
          f"Engines: {', '.join(engines)}" + (f" (unavailable: {skipped})" if skipped else "") + ".  ",
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
                  "falls in a category (rules in bench/group.py). ns/member = share × the G1 median CPU per "
                  "send at N=1000 / 1000 (the profiler itself inflates CPU time). Plot: `f5_breakdown.png`.\n")
        md.append(f5_markdown(f5))
    if g3:
        md.append("\n## G3: sendgroup() with per-recipient data (sendgroup slides)\n")
        md.append("Plot: `g3_sendgroup.png` (CPU per member).")
        md.append(g3_markdown(g3, engines, kd))
    md.append(f"\nFiles: raw.json (every point, attempt and rep), rows.csv (every rep), medians.csv, "
              + ("g2.csv, " if g2 else "") + ("f5.csv, " if f5 else "") + ", ".join(made) + ", command.txt.")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    gcbench.portable(args.out)
    log(f"\ndone in {elapsed:.0f} s ({', '.join(f'{k} {v:.0f} s' for k, v in timings.items())}); "
        f"{len(all_pts) - len(lost)}/{len(all_pts)} points verified" + (f"; LOST: {lost}" if lost else "")
        + f"; results in {args.out}")
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
