"""lmsd following the kernel's multicast routing as it changes (issue 19,
items 7 and 8): routes added and removed under smcroute, an smcroute (*,G),
a named table, every address of an interface, a pimd tree whose branches
come and go as receivers join and leave, and a killed lmsd's filters.

lmsd runs with a long LMS-HIER period (-t 60000) in these labs: what it
follows, it follows from the kernel's notifications, not from a timer.
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

import lmspkt
from lmspkt import REQ, option
from netlab import Lab, Lmsd, router_binary
from test_lms import PORT, Receivers, ifindex, send_raw, send_request, tag

G = "239.192.7.7"  # the group the receivers join (test_lms.Receivers)
G0 = "239.192.7.1"  # a route that is there from the start (so the vifs are)
SLOW = 60000  # lmsd -t: LMS-HIER's period, far longer than any wait below
FOLLOW = 3.0  # how long a change may take to be followed here (the target is 50 ms: bench/lmsd_follow.py)


@pytest.fixture(scope="module")
def lmsd_bin(build):
    path = build / "tools" / "lmsd"
    if not path.exists():
        pytest.fail(f"missing {path}")
    return path


def smcroutectl(lab, t, router, *args):
    sock = lab.workdir() / f"smcroute-{router}.sock"
    lab.run(t.ns[router], [router_binary("smcroutectl"), "-u", sock, *args])


def routes(st, group=G):
    return [r for r in st.get("routes", []) if r["group"] == group]


def stat(d, key):
    return d.state()["stats"][key]


def smcrouted(lab, t, router, phyints, route, *args, name="smcroute"):
    """smcrouted on router with its own config (phyints, one route line), socket and pid file."""
    conf = lab.workdir() / f"{name}-{router}.conf"
    conf.write_text("".join(f"phyint {i} enable\n" for i in phyints) + route + "\n")
    lab.popen(t.ns[router], [router_binary("smcrouted"), "-n", "-N", "-f", conf, "-l", "notice", *args,
                             "-u", lab.workdir() / f"{name}-{router}.sock",
                             "-P", lab.workdir() / f"{name}-{router}.pid"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_route_added_and_removed_is_followed_at_once(lmsd_bin):
    """An (S,G) smcroute adds while lmsd runs is an LMS tree at once (before,
    a request for it is dropped as drop_no_state); removed, it is gone at
    once.  The old lmsd read /proc once per interval (here a minute)."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        lab.smcroute(t, S, G0)
        up, down1, down2 = (t.iface("r1", n).ifname for n in ("s", "h1", "h2"))
        d = lab.lmsd(t.ns["r1"], lmsd_bin, [(S, G, down1, t.addr("h1"))], interval_ms=SLOW)
        d.wait(lambda st: routes(st, G0) and all(i["attached"] for i in st["interfaces"]))
        rx = Receivers(lab, t, ["s", "h1", "h2"])
        send_request(lab, t, "h2", tag())
        d.wait(lambda st: st["stats"]["drop_no_state"] >= 1)

        smcroutectl(lab, t, "r1", "add", up, S, G, down1, down2)
        st = d.wait(lambda st: routes(st), timeout=FOLLOW)
        (r,) = routes(st)
        assert (r["replier"], r["replier_addr"], sorted(r["downstream"])) == (down1, t.addr("h1"), [down1, down2])
        data = tag()
        send_request(lab, t, "h2", data)
        got = rx.wait(data, ["h1"])
        want = option(REQ, S, G, ifindex(lab, t, "r1", "h2"), t.iface("r1", "h2").v4)
        assert [(x["data"], x["opts"]) for x in got["h1"]] == [(data.hex(), want.hex())]
        assert got["s"] == [] and got["h2"] == []

        smcroutectl(lab, t, "r1", "remove", up, S, G)
        d.wait(lambda st: not routes(st) and routes(st, G0), timeout=FOLLOW)
        before = stat(d, "drop_no_state")
        data = tag()
        send_request(lab, t, "h2", data)
        d.wait(lambda st: st["stats"]["drop_no_state"] > before)
        assert rx.wait(data, [])["h1"] == []
        assert d.state()["kernel"]["overruns"] == 0


def test_star_g_route_becomes_an_lms_tree_when_the_source_sends(lmsd_bin):
    """smcroute's (*,G): smcrouted installs (S,G) when S first sends, and lmsd
    follows that (S,G) as any other (lmsd(8) says so): the configured replier
    for (S,G) answers requests from then on.  Before S sends there is no
    (S,G), and a request is dropped (drop_no_state)."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        up, down1, down2 = (t.iface("r1", n).ifname for n in ("s", "h1", "h2"))
        smcrouted(lab, t, "r1", [up, down1, down2], f"mroute from {up} group {G} to {down1} {down2}")
        d = lab.lmsd(t.ns["r1"], lmsd_bin, [(S, G, down1, t.addr("h1"))], interval_ms=SLOW)
        d.wait(lambda st: len(st["interfaces"]) == 3 and all(i["attached"] for i in st["interfaces"]))
        rx = Receivers(lab, t, ["s", "h1", "h2"])
        send_request(lab, t, "h2", tag())
        st = d.wait(lambda st: st["stats"]["drop_no_state"] >= 1)
        assert routes(st) == []
        lab.run(t.ns["s"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
            {"ifaddr": S, "group": G, "port": PORT, "data": [b"first".hex()]})])
        st = d.wait(lambda st: routes(st), timeout=FOLLOW)
        (r,) = routes(st)
        assert (r["source"], r["replier_addr"], r["fallback"]) == (S, t.addr("h1"), False)
        data = tag()
        send_request(lab, t, "h2", data)
        assert len(rx.wait(data, ["h1"])["h1"]) == 1


def mrouter(lab, t, args):
    """lmspkt.MROUTER on r1 (a routing daemon on an mroute socket), ready."""
    p = lab.popen(t.ns["r1"], [sys.executable, "-c", lmspkt.MROUTER, json.dumps(args)],
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_named_table_is_followed(lmsd_bin):
    """smcrouted -t 100 (multicast table 100, MRT_TABLE; pimd -t 100 is the
    same): lmsd follows it with --table 100, and only then."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        ifs = [t.iface("r1", n).ifname for n in ("s", "h1", "h2")]
        smcrouted(lab, t, "r1", ifs, f"mroute from {ifs[0]} source {S} group {G} to {ifs[1]} {ifs[2]}", "-t", "100")
        deadline = time.monotonic() + 10
        while f"({S}," not in lab.run(t.ns["r1"], ["ip", "mroute", "show", "table", "100"],
                                      capture_output=True, text=True, check=False).stdout:
            assert time.monotonic() < deadline, "smcrouted -t 100 installed no route"
            time.sleep(0.05)
        once = lab.run(t.ns["r1"], [lmsd_bin, "--once"], capture_output=True, text=True)
        st = json.loads(once.stdout)
        assert st["routes"] == [] and st["interfaces"] == []
        d = lab.lmsd(t.ns["r1"], lmsd_bin, [(S, G, ifs[1], t.addr("h1"))], interval_ms=SLOW,
                     args=["--table", "100"])
        st = d.wait(lambda st: routes(st) and all(i["attached"] for i in st["interfaces"]))
        (r,) = routes(st)
        assert (r["table"], r["parent"], r["replier"], sorted(r["downstream"])) == (100, ifs[0], ifs[1], sorted(ifs[1:]))
        rx = Receivers(lab, t, ["s", "h1", "h2"])
        data = tag()
        send_request(lab, t, "h2", data)
        assert len(rx.wait(data, ["h1"])["h1"]) == 1
        assert st["kernel"]["tables"] == [100] and json.loads(once.stdout)["kernel"]["tables"] == [253]
        for bad in ("x", "-1", "1000000000"):
            q = subprocess.run([lmsd_bin, "--table", bad], capture_output=True, text=True)
            assert q.returncode == 2 and f"--table {bad}" in q.stderr


def hier_report(src, group, replier, cost=1, hold_ms=60000):
    """struct gc_lms_hier (bpf/lms.h): a report volunteering replier for (src, group)."""
    a = socket.inet_aton
    return b"LH" + struct.pack("!BB4s4s4sII", 1, 0, a(src), a(group), a(replier), cost, hold_ms)


def test_every_address_of_an_interface(lmsd_bin):
    """A second subnet on r1's link to h1, added while lmsd runs: lmsd lists
    the address at once, and a replier report from a host on that subnet is
    on-link (LMS-HIER), where the old lmsd saw only the first address and
    refused it as offlink.  A gateway route added through that host makes
    the link one with routers at once."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        lab.smcroute(t, S, G)
        dev = t.iface("r1", "h1").ifname
        d = lab.lmsd(t.ns["r1"], lmsd_bin, interval_ms=SLOW)
        d.wait(lambda st: routes(st) and all(i["attached"] for i in st["interfaces"]))
        lab.ip(t.ns["r1"], "addr", "add", "10.254.7.1/24", "dev", dev)
        lab.ip(t.ns["h1"], "addr", "add", "10.254.7.2/24", "dev", t.uplinks["h1"].b.ifname)
        st = d.wait(lambda st: any("10.254.7.1/24" in i.get("addrs", []) for i in st["interfaces"]),
                    timeout=FOLLOW)
        (i,) = [i for i in st["interfaces"] if i["name"] == dev]
        assert i["addr"] == t.iface("r1", "h1").v4  # the primary stays the turning point's address
        assert sorted(i["addrs"]) == sorted([f"{t.iface('r1', 'h1').v4}/{t.uplinks['h1'].v4_net.split('/')[1]}",
                                             "10.254.7.1/24"])
        lab.run(t.ns["h1"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
            {"ifaddr": "10.254.7.2", "group": "224.0.0.2", "port": 7399, "ttl": 1,
             "data": [hier_report(S, G, "10.254.7.2").hex()]})])
        st = d.wait(lambda st: st["hier"]["accepted"] + st["hier"]["offlink"] >= 1)
        assert (st["hier"]["accepted"], st["hier"]["offlink"]) == (1, 0)
        st = d.wait(lambda st: routes(st)[0]["note"] == "elected (LMS-HIER)")
        assert routes(st)[0]["replier_addr"] == "10.254.7.2"
        # a router appears behind h1's link (a main-table route through it): followed too
        lab.ip(t.ns["r1"], "route", "add", "10.254.8.0/24", "via", "10.254.7.2")
        st = d.wait(lambda st: any(i["name"] == dev and i["below"] == ["10.254.8.0/24"] for i in st["interfaces"]),
                    timeout=FOLLOW)
        assert [i["routers"] for i in st["interfaces"] if i["name"] == dev] == [True]


def test_pimd_tree_followed_as_receivers_join_and_leave(lmsd_bin):
    """PIM-SM (pimd, r1 the static RP): s - r1 - {r2 - {h1, h2}, r3 - {h3, h4}}.
    While only h1 has joined, r3 has no (S,G) and r1 none toward r3; when h3
    and h4 join, r3's branch grows and a request from h4 reaches its replier
    h3 (turned at r3); when they leave, pimd prunes the branch and LMS stops
    following it: r1 no longer decapsulates a dmcast naming its link to r3."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["r2", "r3"], "r2": ["h1", "h2"], "r3": ["h3", "h4"]})
        S = t.addr("s")
        lab.pimd(t, "r1")
        repliers = {"r1": ("r2", "h1"), "r2": ("h1", "h1"), "r3": ("h3", "h3")}
        lmsd = {r: lab.lmsd(t.ns[r], lmsd_bin, [(S, G, t.iface(r, via).ifname, t.addr(h))], interval_ms=SLOW)
                for r, (via, h) in repliers.items()}
        rx = Receivers(lab, t, ["s", "h1"])
        keep = threading.Event()

        def source():  # PIM builds (S,G) state from data: keep some flowing
            while not keep.wait(0.3):
                lab.run(t.ns["s"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
                    {"ifaddr": S, "group": G, "port": PORT + 1, "data": [b"keepalive".hex()]})], check=False)
        th = threading.Thread(target=source, daemon=True)
        th.start()
        to_r3 = t.iface("r1", "r3").ifname
        try:
            st = lmsd["r1"].wait(lambda st: routes(st), timeout=90)
            assert to_r3 not in routes(st)[0]["downstream"]
            assert routes(lmsd["r3"].state()) == []

            for h in ("h3", "h4"):  # an IGMPv2 Leave, which pimd 2.3 acts on at once
                lab.set_sysctl("net.ipv4.conf.all.force_igmp_version", 2, ns=t.ns[h])
            joined = Receivers(lab, t, ["h3", "h4"])
            st = lmsd["r3"].wait(lambda st: routes(st) and len(routes(st)[0]["downstream"]) == 2, timeout=90)
            assert routes(st)[0]["replier_addr"] == t.addr("h3")
            lmsd["r1"].wait(lambda st: to_r3 in routes(st)[0]["downstream"], timeout=90)
            data = tag()
            send_request(lab, t, "h4", data)
            got = joined.wait(data, ["h3"])
            want = option(REQ, S, G, ifindex(lab, t, "r3", "h4"), t.iface("r3", "h4").v4)
            assert [(x["data"], x["opts"]) for x in got["h3"]] == [(data.hex(), want.hex())]
            assert rx.matching(data)["s"] == [] and rx.matching(data)["h1"] == []

            joined.leave(["h3", "h4"])
            lmsd["r1"].wait(lambda st: routes(st) and to_r3 not in routes(st)[0]["downstream"], timeout=90)
            before = lmsd["r1"].state()["stats"]["drop_not_downstream"]
            data = tag()
            send_raw(lab, t, "h1", [lmspkt.dmcast(t.addr("h1"), t.iface("r1", "r3").v4,
                                                  ifindex(lab, t, "r1", "r3"), S, G, S, PORT, data)])
            lmsd["r1"].wait(lambda st: st["stats"]["drop_not_downstream"] > before)
            assert lmsd["r1"].state()["stats"]["dmcast"] == 0
        finally:
            keep.set()
            th.join()


def filters(lab, ns, dev):
    return lab.run(ns, ["tc", "filter", "show", "dev", dev, "ingress"], capture_output=True, text=True).stdout


def test_killed_lmsd_is_replaced_and_flushed(build, lmsd_bin):
    """kill -9 leaves LMS-FWD attached, forwarding with frozen maps.  The tree
    changes meanwhile (h3's link is no longer a vif, the replier moves from h1
    to h2); the next lmsd removes the stale filter from h3's link, replaces
    the others, and follows the new tree: a request from h3 is no longer
    turned anywhere, one from h1 goes to h2.  lmsd --flush removes what a
    killed lmsd left, and only that: a loss filter (prio 1) and someone
    else's program in lmsd's own place (prio 0x4c4d handle 1) stay."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2", "h3"]})
        S = t.addr("s")
        r1 = t.ns["r1"]
        dev = {n: t.iface("r1", n).ifname for n in ("s", "h1", "h2", "h3")}
        lab.smcroute(t, S, G)
        d = lab.lmsd(r1, lmsd_bin, [(S, G, dev["h1"], t.addr("h1"))], interval_ms=SLOW)
        d.wait(lambda st: routes(st) and len(st["interfaces"]) == 4 and all(i["attached"] for i in st["interfaces"]))
        rx = Receivers(lab, t, ["s", "h1", "h2", "h3"])
        d.proc.kill()
        d.proc.wait()
        assert "gc_lms_fwd" in filters(lab, r1, dev["h3"])
        # a second lmsd while one runs is refused; after kill -9 it may start
        # the tree changes: smcroute again, without h3's link
        lab.run(r1, [router_binary("smcroutectl"), "-u", lab.workdir() / "smcroute-r1.sock", "kill"], check=False)
        time.sleep(0.5)
        smcrouted(lab, t, "r1", [dev["s"], dev["h1"], dev["h2"]],
                  f"mroute from {dev['s']} source {S} group {G} to {dev['h1']} {dev['h2']}", name="smcroute-b")
        lab.wait_mroute(r1, S, G, oifs=2)
        # the frozen program still turns h3's requests toward h1
        data = tag()
        send_request(lab, t, "h3", data)
        assert len(rx.wait(data, ["h1"])["h1"]) == 1

        d = lab.lmsd(r1, lmsd_bin, [(S, G, dev["h2"], t.addr("h2"))], interval_ms=SLOW, name="r1-again")
        st = d.wait(lambda st: routes(st) and routes(st)[0]["replier"] == dev["h2"]
                    and len(st["interfaces"]) == 3 and all(i["attached"] for i in st["interfaces"]))
        assert "gc_lms_fwd" not in filters(lab, r1, dev["h3"])
        assert st["kernel"]["stale_filters"] == 4
        second = lab.run(r1, [lmsd_bin], capture_output=True, text=True, check=False)
        assert second.returncode == 1 and "another lmsd" in second.stderr
        data = tag()
        send_request(lab, t, "h3", data)
        assert all(v == [] for v in rx.wait(data, []).values())
        data = tag()
        send_request(lab, t, "h1", data)
        got = rx.wait(data, ["h2"])
        want = option(REQ, S, G, ifindex(lab, t, "r1", "h1"), t.iface("r1", "h1").v4)
        assert [x["opts"] for x in got["h2"]] == [want.hex()]

        # --flush: refused while lmsd runs; after kill -9, removes ours only
        flush = lab.run(r1, [lmsd_bin, "--flush"], capture_output=True, text=True, check=False)
        assert flush.returncode == 1 and "another lmsd" in flush.stderr
        d.proc.kill()
        d.proc.wait()
        lab.add_loss(r1, dev["h1"], 0.0, build / "bpf" / "loss.bpf.o")
        # someone else's program put in lmsd's place on h2's link (replacing the stale one)
        lab.run(r1, ["tc", "filter", "replace", "dev", dev["h2"], "ingress", "prio", str(0x4C4D), "handle", "1",
                     "bpf", "da", "obj", build / "bpf" / "loss.bpf.o", "sec", "tc"])
        flush = lab.run(r1, [lmsd_bin, "--flush"], capture_output=True, text=True, check=False)
        assert flush.returncode == 0 and "removed 2 " in flush.stdout, flush.stdout + flush.stderr
        assert all("gc_lms_fwd" not in filters(lab, r1, dev[n]) for n in dev)
        assert "gc_loss" in filters(lab, r1, dev["h1"]) and "gc_loss" in filters(lab, r1, dev["h2"])
        # nor does a new lmsd replace it: it stays off that interface and says so
        d = lab.lmsd(r1, lmsd_bin, interval_ms=SLOW, name="r1-third")
        st = d.wait(lambda st: routes(st) and len(st["interfaces"]) == 3)
        assert {i["name"]: i["attached"] for i in st["interfaces"]} == {dev["s"]: True, dev["h1"]: True, dev["h2"]: False}
        assert "gc_loss" in filters(lab, r1, dev["h2"]) and "gc_lms_fwd" not in filters(lab, r1, dev["h2"])
        assert d.stop() == 0
        assert "not lmsd's" in d.proc.stderr.read()
        assert "gc_loss" in filters(lab, r1, dev["h2"])


def test_lost_notifications_are_recovered(lmsd_bin):
    """Notifications the kernel drops (ENOBUFS) are recovered by reading
    everything again.  lmsd is stopped (SIGSTOP) with a tiny notification
    buffer (GC_LMSD_NL_RCVBUF): 600 new routes fill it, and the notification
    of an address added after them is lost.  Resumed, lmsd has every route
    and the address."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        ifs = [t.iface("r1", n).ifname for n in ("s", "h1", "h2")]
        p = mrouter(lab, t, {"ifs": ifs, "src": S, "group": G})
        state = lab.workdir() / "lmsd-r1.json"
        proc = lab.popen(t.ns["r1"], [lmsd_bin, "-s", state, "-t", SLOW], stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "GC_LMSD_NL_RCVBUF": "2048"})
        d = Lmsd(proc, state)
        d.wait(lambda st: len(st["interfaces"]) == 3 and all(i["attached"] for i in st["interfaces"]))
        time.sleep(1.5)  # the new links' late events (carrier) are over: nothing else would make lmsd read all
        proc.send_signal(signal.SIGSTOP)
        try:
            p.stdin.write("add 600\n")
            p.stdin.flush()
            p.stdout.readline()
            assert p.stdout.readline().strip() == "added"
            lab.ip(t.ns["r1"], "addr", "add", "10.254.9.1/24", "dev", ifs[1])
        finally:
            proc.send_signal(signal.SIGCONT)
        st = d.wait(lambda st: st["kernel"]["routes"] == 600
                    and any("10.254.9.1/24" in i["addrs"] for i in st["interfaces"]), timeout=FOLLOW)
        assert st["kernel"]["overruns"] >= 1 and len(routes(st)) == 600


def test_kernel_star_g_entry_is_counted_not_followed(lmsd_bin):
    """A (*,G) entry in the kernel itself (source 0.0.0.0: Linux forwards any
    source's packets by it) names no source to steer a request toward: lmsd
    counts it (star_g) and keeps no LMS state for it; a request is dropped
    (drop_no_state), as lmsd(8) says."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        ifs = [t.iface("r1", n).ifname for n in ("s", "h1", "h2")]
        p = mrouter(lab, t, {"ifs": ifs, "src": "0.0.0.0", "group": G})
        p.stdin.write("add\n")
        p.stdin.flush()
        p.stdout.readline()
        assert p.stdout.readline().strip() == "added"
        d = lab.lmsd(t.ns["r1"], lmsd_bin, interval_ms=SLOW)
        st = d.wait(lambda st: st["kernel"]["star_g"] == 1 and all(i["attached"] for i in st["interfaces"]))
        assert st["routes"] == [] and st["kernel"]["routes"] == 0
        send_request(lab, t, "h2", tag())
        d.wait(lambda st: st["stats"]["drop_no_state"] == 1)
