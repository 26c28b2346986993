"""F5's profile: where a send's time goes, from `perf record -e cpu-clock -g`
samples (perf script's text) charged to categories of kernel symbols."""
import json
import os
import re
import shutil
import subprocess

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


def window_counts(samples):
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


def perf_wrap(data, freq):
    """The command prefix that profiles a command into data."""
    return ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-g", "-o", data, "--"]


def breakdown(data, rusage_file, base_ns, n, errors):
    """What one profiled run adds to its F5 entry: the samples' counts per
    category from perf's data file (None: perf was not used), or the user and
    system time from the rusage fallback's file; percent, and ns per member
    when base_ns (CPU per send) is known.  errors: the run's attempts' errors,
    quoted if perf wrote nothing."""
    run = {}
    if data is not None and os.path.exists(data):
        sc = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,ip,sym,dso"],
                            capture_output=True, text=True)
        if sc.returncode != 0 or not sc.stdout.strip():
            run["perf_error"] = sc.stderr.strip()[-500:] or "perf script printed nothing"
        else:
            a = window_counts(parse_perf_script(sc.stdout))
            run.update(a)
            tot = a.get("samples_counted", 0)
            if tot:
                run["percent"] = {c: 100.0 * a["counts"][c] / tot for c in F5_ORDER}
                if base_ns:
                    run["ns_per_member"] = {c: run["percent"][c] / 100 * base_ns / n for c in F5_ORDER}
            else:
                run["perf_error"] = "no samples in the send window"
    elif data is not None:
        run["perf_error"] = "perf record wrote no data: " + "; ".join(e or "" for e in errors)[:300]
    if os.path.exists(rusage_file):
        with open(rusage_file) as f:
            u = json.load(f)
        run["rusage"] = u
        tot = u["utime"] + u["stime"]
        if tot > 0:
            run["percent"] = {c: 0.0 for c in F5_ORDER}
            run["percent"]["user space"] = 100 * u["utime"] / tot
            run["percent"]["other"] = 100 * u["stime"] / tot   # kernel, not split
            run["fallback"] = "rusage: user vs kernel time only (perf unavailable)"
            if base_ns:
                run["ns_per_member"] = {c: run["percent"][c] / 100 * base_ns / n for c in F5_ORDER}
    return run
