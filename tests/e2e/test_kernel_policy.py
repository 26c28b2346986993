"""End-to-end tests of the kernel engine: when the engine is refused, declined by
AUTO, or bypasses egress policy: without capabilities, with netfilter
OUTPUT rules, socket options, a loopback-bound socket, a cgroup BPF program,
route MTUs and path MTU.
The lab, the sender and the checks: kengine.py."""
import errno
import json
import os
import random
import shlex
import struct
import subprocess

import pytest

from delivery import check_delivery
from gcsend import expected
from kbpf import (BPF_CGROUP_INET_EGRESS, BPF_PROG_ATTACH, BPF_PROG_DETACH, bpf, load_cgroup_skb_allow_all,
                  temp_cgroup)
from kengine import (ALL_CAPS, FAMILIES, LOOPBACK, PORT_BASE, PORTS, USER_ENGINES, addresses, assert_all_sent,
                     deliver, gc_filters, gcsend, gcsend_argv, lo_forwarding, members, mixed_sends, n_datagrams,
                     receiver_addresses, receiver_members, send, sinks, tc_egress)


# ---- without privileges ----------------------------------------------------

@pytest.mark.parametrize("drop", [ALL_CAPS, "cap_net_admin"])
@pytest.mark.parametrize("family", FAMILIES)
def test_without_capabilities_falls_back_to_user_engine(klab, build, tmp_path, family, drop):
    """With capabilities dropped (capsh --drop), gc_engine_available(KERNEL) and
    gc_set_engine(KERNEL) (on a fresh socket, and on one that had the mmsg
    engine) fail with ENOTSUP and a one-line reason naming the capabilities
    the engine needs (gc_set_engine(3): "It needs CAP_BPF and CAP_NET_ADMIN;
    without them it is refused with ENOTSUP"); AUTO resolves to a user engine; sends
    still deliver byte-exact; nothing is attached and lo forwarding is
    untouched.  ("cap_net_admin" alone: the program still loads with
    CAP_SYS_ADMIN, but cannot be attached to lo without CAP_NET_ADMIN.)"""
    lab = klab
    rnd = random.Random(f"nocaps-{family}")
    group = members(addresses(lab, family))
    sends = mixed_sends(rnd, group, 8)
    fwd = lo_forwarding(lab)
    addrs = addresses(lab, family)
    with sinks(lab, build, tmp_path, addrs.items()) as collect:
        out = gcsend(lab, build, {"engine": "auto", "socket": family, "pace_ms": 5, "probe": ["kernel", "auto"],
                                  "sends": sends}, drop_caps=drop)
        got = collect()

    probe = out["probe"]
    for call, fn in (("available", "gc_engine_available"), ("set_engine", "gc_set_engine"),
                     ("set_engine_after_mmsg", "gc_set_engine(MMSG), then gc_set_engine")):
        ret, err, msg = probe["kernel"][call]
        assert (ret, err) == (-1, errno.ENOTSUP), (
            f"{fn}(KERNEL) without {drop}: {probe['kernel']}; AUTO -> {probe['auto']['engine_after']}; "
            f"the sends went through engine {out['engine']!r} with stats {out['stats']}")
        assert msg and "\n" not in msg, msg
        for cap in ("CAP_BPF", "CAP_NET_ADMIN") if drop == ALL_CAPS else ("CAP_NET_ADMIN",):
            assert cap in msg, f"reason does not name {cap}: {msg!r}"
    assert probe["auto"]["engine_after"] in USER_ENGINES, probe["auto"]
    assert out["engine"] in USER_ENGINES, out["engine"]
    assert_all_sent(out, sends)
    check_delivery([expected(sends)], got)
    assert gc_filters(lab) == [], tc_egress(lab)
    assert lo_forwarding(lab) == fwd


# ---- egress policy: what AUTO declines, what a forced kernel engine bypasses ----
# groupcast(7), "The kernel engine and egress policy".

SOL_SOCKET, SOL_IP, SO_BINDTODEVICE, SO_MARK, IP_FREEBIND, IP_TRANSPARENT = 1, 0, 25, 36, 15, 19


def nft(lab, ns, script, tmp_path):
    path = tmp_path / "rules.nft"
    path.write_text(script)
    lab.run(ns, ["nft", "-f", path])


def drop_output_rule(lab, tmp_path):
    """An nft OUTPUT chain in the sender namespace that drops UDP to the sink ports."""
    nft(lab, lab.topology.sender, f"""
table inet gctest {{
    chain output {{
        type filter hook output priority 0; policy accept;
        udp dport {PORT_BASE}-{PORT_BASE + PORTS - 1} drop
    }}
}}
""", tmp_path)


@pytest.mark.parametrize("family", FAMILIES)
def test_nft_output_drop_auto_takes_mmsg_gets_eperm(klab, build, tmp_path, family):
    """With an nft OUTPUT drop rule in the sender's namespace, AUTO declines
    the kernel engine (and says so, naming the chain), sends with mmsg, and
    every member fails with EPERM exactly as with a forced mmsg (sendto()'s
    answer); no receiver gets anything."""
    lab = klab
    drop_output_rule(lab, tmp_path)
    rnd = random.Random(f"nft-{family}")
    group = members({**receiver_addresses(lab, family), lab.topology.sender: LOOPBACK[family]})
    sends = [send(group, rnd.randbytes(300)) for _ in range(4)]
    outs = {}
    with sinks(lab, build, tmp_path, addresses(lab, family).items()) as collect:
        for engine in ("auto", "mmsg"):
            outs[engine] = gcsend(lab, build, {"engine": engine, "socket": family, "pace_ms": 5, "sends": sends})
        got = collect()
    auto = outs["auto"]
    assert auto["engine"] == "mmsg", auto["auto_reason"]
    assert "declined by AUTO: nftables chain 'output' (inet gctest) hooks OUTPUT" in auto["auto_reason"]
    for engine, out in outs.items():
        for r in out["results"]:
            assert r["ret"] == -1 and r["errno"] == errno.EPERM, (engine, r)
            assert r["gerrno"] == [errno.EPERM] * len(group), (engine, r["gerrno"])
    assert auto["stats"]["failed"] == n_datagrams(sends)
    assert sum(map(len, got.values())) == 0, {k: len(v) for k, v in got.items()}
    assert gc_filters(lab) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_nft_output_drop_forced_kernel_bypasses_it(klab, build, tmp_path, family):
    """gc_set_engine(3): a forced kernel engine's copies skip netfilter OUTPUT
    and POSTROUTING.  With the same drop rule every member, loopback included,
    gets its datagram and every send reports success."""
    lab = klab
    drop_output_rule(lab, tmp_path)
    rnd = random.Random(f"nft-forced-{family}")
    sends = mixed_sends(rnd, members(addresses(lab, family)), 6)
    out = deliver(lab, build, tmp_path, family, sends, engine="kernel")
    assert out["engine"] == "kernel"
    assert out["stats"]["user_fallback"] == 0, out["stats"]
    assert out["auto_reason"].startswith("AUTO not in use"), out["auto_reason"]


SOCKOPTS = {
    "SO_BINDTODEVICE": ([SOL_SOCKET, SO_BINDTODEVICE, "veth1"], "bound to a device"),
    "SO_MARK": ([SOL_SOCKET, SO_MARK, 7], "SO_MARK 0x7"),
    "IP_FREEBIND": ([SOL_IP, IP_FREEBIND, 1], "IP_FREEBIND"),
    "IP_TRANSPARENT": ([SOL_IP, IP_TRANSPARENT, 1], "IP_TRANSPARENT"),
    "none": (None, "taken by AUTO"),
}


@pytest.mark.parametrize("option", SOCKOPTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_auto_declines_kernel_for_socket_options(klab, build, tmp_path, family, option):
    """A socket with SO_BINDTODEVICE, SO_MARK, IP_FREEBIND or IP_TRANSPARENT
    gets mmsg from AUTO, with that option named as the reason; the same
    socket without options gets the kernel engine.  Delivery is exact either way."""
    lab = klab
    opt, reason = SOCKOPTS[option]
    rnd = random.Random(f"opt-{family}-{option}")
    r1 = lab.topology.receivers[0]  # behind veth1, the device SO_BINDTODEVICE names
    addr = r1.v4 if family == "inet" else r1.v6
    group = [(addr, PORT_BASE + i) for i in range(PORTS)]
    sends = [send(group, rnd.randbytes(200)) for _ in range(3)]
    job = {"engine": "auto", "socket": family, "pace_ms": 5, "sends": sends}
    if opt:
        job["sockopts"] = [opt]
    with sinks(lab, build, tmp_path, [(r1.ns, addr)]) as collect:
        out = gcsend(lab, build, job)
        got = collect()
    assert out["engine"] == ("kernel" if option == "none" else "mmsg"), out["auto_reason"]
    assert reason in out["auto_reason"], out["auto_reason"]
    assert_all_sent(out, sends)
    check_delivery([expected(sends)], got)


@pytest.mark.parametrize("family", FAMILIES)
def test_loopback_bound_socket_kernel_reports_like_sendto(klab, build, tmp_path, family):
    """A socket bound to the loopback address: IPv4 sendto() refuses routed
    members (EINVAL: a loopback source must not leave lo).  The kernel engine,
    forced, hands those members to the user path, so each gets what sendto()
    says (the same errno as with mmsg), in both families."""
    lab = klab
    group = receiver_members(lab, family, ports=2)
    sends = [send(group, b"lo-bound")]
    outs = {}
    for engine in ("mmsg", "kernel"):
        outs[engine] = gcsend(lab, build, {"engine": engine, "socket": family, "pace_ms": 0,
                                           "bind": [LOOPBACK[family], 0], "sends": sends})
    want = outs["mmsg"]["results"][0]["gerrno"]
    if family == "inet":  # IPv6 lets sendto() send from ::1 (the receiver drops it as a martian)
        assert want == [errno.EINVAL] * len(group), want
    assert outs["kernel"]["results"][0]["gerrno"] == want, outs["kernel"]["results"]
    assert outs["kernel"]["stats"]["user_fallback"] == len(group)


# -- cgroup BPF ----------------------------------------------------------------

def gcsend_in_cgroup(lab, build, cg, job, ip_netns_exec=False, drop_sys_admin=False):
    """gcsend.py in the sender namespace, moved into cgroup cg first.  With
    nsenter the cgroup2 mount stays visible; `ip netns exec` mounts a fresh
    /sys over it.  drop_sys_admin: gcsend.py runs without CAP_SYS_ADMIN."""
    inner = gcsend_argv(build)
    if drop_sys_admin:
        inner = ["capsh", "--drop=cap_sys_admin", "--", "-c", shlex.join(map(str, inner))]
    enter = ["ip", "netns", "exec", lab.topology.sender] if ip_netns_exec else \
        ["nsenter", f"--net=/run/netns/{lab.topology.sender}"]
    script = f"echo $$ > {cg}/cgroup.procs && exec {shlex.join(enter + list(map(str, inner)))}"
    p = subprocess.run(["sh", "-c", script], input=json.dumps(job), capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_cgroup_egress_program_declines_kernel(klab, build, tmp_path):
    """A cgroup_skb egress program in effect for the sender's cgroup (attached
    to a temporary cgroup the sender runs in): AUTO declines the kernel engine
    and names it; found through the cgroup2 mount (BPF_PROG_QUERY, effective)
    and, where `ip netns exec` hides that mount, through a detached cgroup2
    mount of its own (needs CAP_SYS_ADMIN); without CAP_SYS_ADMIN as well it
    cannot tell, and declines.  In the same cgroup without the program AUTO
    takes the kernel engine."""
    lab = klab
    rnd = random.Random("cgroup")
    group = receiver_members(lab, "inet")
    sends = [send(group, rnd.randbytes(100)) for _ in range(2)]
    job = {"engine": "auto", "socket": "inet", "pace_ms": 5, "sends": sends}
    with temp_cgroup() as cg:
        before = gcsend_in_cgroup(lab, build, cg, job)
        prog = load_cgroup_skb_allow_all()
        cgfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
        attr = struct.pack("<IIII", cgfd, prog, BPF_CGROUP_INET_EGRESS, 0)
        try:
            bpf(BPF_PROG_ATTACH, attr)
            try:
                with sinks(lab, build, tmp_path, receiver_addresses(lab, "inet").items()) as collect:
                    during = gcsend_in_cgroup(lab, build, cg, job)
                    got = collect()
                hidden = gcsend_in_cgroup(lab, build, cg, job, ip_netns_exec=True)
                blind = gcsend_in_cgroup(lab, build, cg, job, ip_netns_exec=True, drop_sys_admin=True)
            finally:
                bpf(BPF_PROG_DETACH, attr)
        finally:
            os.close(cgfd)
            os.close(prog)
        after = gcsend_in_cgroup(lab, build, cg, job)
    assert before["engine"] == "kernel", before["auto_reason"]
    assert during["engine"] == "mmsg", during["auto_reason"]
    assert "cgroup BPF program at cgroup_skb egress in effect" in during["auto_reason"], during["auto_reason"]
    assert_all_sent(during, sends)
    check_delivery([expected(sends)], got)
    assert hidden["engine"] == "mmsg", hidden["auto_reason"]
    assert "cgroup BPF program at cgroup_skb egress in effect" in hidden["auto_reason"], hidden["auto_reason"]
    assert blind["engine"] == "mmsg", blind["auto_reason"]
    assert "cannot tell which cgroup BPF programs apply" in blind["auto_reason"], blind["auto_reason"]
    assert after["engine"] == "kernel", after["auto_reason"]


# ---- route MTU and path MTU -----------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_pmtu_1280_link_behind_router_not_silently_lost(klab, build, tmp_path, family):
    """sender -- r1 (router) -- far, the r1--far link with MTU 1280.  1400-byte
    datagrams carry DF; the first one learns the path MTU (ICMP from the
    router), like sendto() does.  From then on the kernel engine hands the
    member to the user path, which fragments: it delivers as many as mmsg
    (all but at most the first), every one intact."""
    lab = klab
    s, r1 = lab.topology.sender, lab.topology.receivers[0]
    far_ns = lab.add_ns("far")
    link = lab.add_link(r1.ns, far_ns)
    for ns in (r1.ns, far_ns):
        lab.ip(ns, "link", "set", link.a.ifname, "mtu", 1280)
    lab.set_sysctl("net.ipv4.ip_forward", 1, ns=r1.ns)
    lab.set_sysctl("net.ipv6.conf.all.forwarding", 1, ns=r1.ns)
    six = family == "inet6"
    lab.ip(s, *(["-6"] if six else []), "route", "add", link.v6_net if six else link.v4_net,
           "via", r1.v6 if six else r1.v4)
    lab.ip(far_ns, *(["-6"] if six else []), "route", "add", "default", "via", link.a.v6 if six else link.a.v4)
    dst = link.b.v6 if six else link.b.v4
    lab.resolve(r1.ns, [dst], timeout=10)  # the router's neighbour: IPv6 waits for its link-local address
    n = 40
    rnd = random.Random(f"pmtu-{family}")
    outs, gots = {}, {}
    for engine in ("kernel", "mmsg"):
        lab.ip(s, *(["-6"] if six else []), "route", "flush", "cache")  # forget the learned path MTU
        sends = [send([(dst, PORT_BASE)], rnd.randbytes(1400)) for _ in range(n)]
        with sinks(lab, build, tmp_path, [(far_ns, dst)], ports=1) as collect:
            outs[engine] = gcsend(lab, build, {"engine": engine, "socket": family, "pace_ms": 20, "sends": sends})
            got = collect()[dst, PORT_BASE]
        want = [bytes.fromhex(x["payload_hex"]) for x in sends]
        assert all(d in want for d in got), f"{engine}: a corrupt datagram"
        errors = sum(1 for r in outs[engine]["results"] if r["ret"] == -1)
        gots[engine] = len(got)
        assert len(got) + errors >= n - 1, f"{engine}: {len(got)} of {n} delivered, {errors} errors reported"
    assert gots["kernel"] >= gots["mmsg"] - 1, gots
    assert outs["kernel"]["stats"]["user_fallback"] >= n - 2, outs["kernel"]["stats"]


@pytest.mark.parametrize("family", FAMILIES)
def test_route_mtu_unlocked_declined_locked_honoured(klab, build, tmp_path, family):
    """bpf_fib_lookup() sees a route's MTU only when it is locked.  A route
    with `mtu 1280` (not locked) to a member makes AUTO decline the kernel
    engine (sendto() would fragment at 1280); with `mtu lock 1280` AUTO takes
    it, and 1400-byte datagrams to that member go through the user path,
    fragmented, all delivered intact."""
    lab = klab
    s, r1 = lab.topology.sender, lab.topology.receivers[0]
    six = ["-6"] if family == "inet6" else []
    dst = r1.v6 if six else r1.v4
    host = dst + ("/128" if six else "/32")
    rnd = random.Random(f"routemtu-{family}")
    outs = {}
    for lock in ([], ["lock"]):
        lab.ip(s, *six, "route", "replace", host, "dev", r1.ifname, "mtu", *lock, 1280)
        sends = [send([(dst, PORT_BASE)], rnd.randbytes(1400)) for _ in range(5)]
        with sinks(lab, build, tmp_path, [(r1.ns, dst)], ports=1) as collect:
            outs[bool(lock)] = out = gcsend(lab, build, {"engine": "auto", "socket": family, "pace_ms": 5,
                                                         "sends": sends})
            got = collect()
        assert_all_sent(out, sends)
        check_delivery([expected(sends)], got)
    assert outs[False]["engine"] == "mmsg", outs[False]["auto_reason"]
    assert "has mtu 1280 (not locked" in outs[False]["auto_reason"], outs[False]["auto_reason"]
    assert outs[True]["engine"] == "kernel", outs[True]["auto_reason"]
    assert outs[True]["stats"]["user_fallback"] == 5, outs[True]["stats"]

