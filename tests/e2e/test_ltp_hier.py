"""LMS-HIER: repliers elected from the reports of volunteering receivers,
propagated router to router, replaced when they die or leave; forged reports
refused.  The tree of test_ltp.py, with no static replier anywhere:

        s
        |
        r1
       /  \\
     r2    r3
    /  \\   /  \\
   h1  h2 h3  h4      volunteers: h1 cost 10, h2 cost 20, h3 cost 10, h4 cost 30
"""
import json
import socket
import struct
import subprocess
import sys
import time

import pytest

import lmspkt
from netlab import Lab
from test_ltp import G, PORT, TREE, HOSTS, Transfer, set_loss, groupcast, summary

HIER_PORT = 7399
COST = {"h1": 10, "h2": 20, "h3": 10, "h4": 30}
INTERVAL_MS = 100  # lmsd refresh; routers' reports hold 3 intervals, hosts' 3 report intervals


@pytest.fixture(scope="module")
def net(build):
    with Lab() as lab:
        t = lab.tree(TREE)
        S = t.addr("s")
        lab.smcroute(t, S, G)
        lmsd = {r: lab.lmsd(t.ns[r], build / "tools" / "lmsd", [], interval_ms=INTERVAL_MS)
                for r in ("r1", "r2", "r3")}
        for d in lmsd.values():
            d.wait(lambda st: st.get("routes") and all(i["attached"] for i in st["interfaces"]))
        yield lab, t, build, lmsd


def route(lmsd, r):
    st = lmsd[r].state()
    return (st.get("routes") or [{}])[0], st.get("hier", {})


def wait_replier(lmsd, r, addrs, timeout=5.0):
    """Wait until r's route names one of addrs as replier; return the time it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        rt, _ = route(lmsd, r)
        if rt.get("replier_addr") in addrs and rt.get("note") == "elected (LMS-HIER)":
            return time.monotonic() - t0
        time.sleep(0.01)
    raise AssertionError(f"{r}: replier never became {addrs}: {route(lmsd, r)}")


def volunteers(lab, t, build, who, session):
    """Receivers that only report (no data comes): returns {host: Popen}."""
    procs = {}
    for h in who:
        p = lab.popen(t.ns[h], [groupcast(build), "ltp", "recv", "--group", G, "--port", PORT,
                                "--source", t.addr("s"), "--if", t.uplinks[h].b.ifname,
                                "--session", session, "--replier", "--replier-cost", COST[h],
                                "--timeout-ms", 30000],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert json.loads(p.stdout.readline()) == {"ready": True}
        procs[h] = p
    return procs


def stop(procs):
    for p in procs.values():
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=10)


def test_election_and_propagation(net):
    """Each router elects the cheapest volunteer below it; r1 hears r2's and
    r3's choices (cost + 1) and picks one of them."""
    lab, t, build, lmsd = net
    A = {h: t.addr(h) for h in HOSTS}
    v = volunteers(lab, t, build, HOSTS, 5001)
    try:
        wait_replier(lmsd, "r2", [A["h1"]])
        wait_replier(lmsd, "r3", [A["h3"]])
        wait_replier(lmsd, "r1", [A["h1"], A["h3"]])
        rt, hier = route(lmsd, "r1")
        toward = "r2" if rt["replier_addr"] == A["h1"] else "r3"
        assert rt["replier"] == t.iface("r1", toward).ifname and rt["cost"] == 11
        assert route(lmsd, "r2")[0]["replier"] == t.iface("r2", "h1").ifname
        assert route(lmsd, "r2")[0]["cost"] == 10
        assert hier["accepted"] > 0 and route(lmsd, "r2")[1]["sent_up"] > 0
    finally:
        stop(v)
    # every replier withdrew (LEAVE on close): back to the source as fallback
    for r in ("r1", "r2", "r3"):
        lmsd[r].wait(lambda st: st["routes"][0]["fallback"], timeout=3)


def test_transfer_with_elected_repliers_and_failover(net):
    """A lossy transfer with elected repliers; h1 is killed in the middle (no
    LEAVE: it just stops reporting), and r2 must elect h2 within the hold
    time plus a refresh; h3 then leaves cleanly (SIGTERM sends LEAVE) and r3
    must elect h4 at once.  Everyone left gets the whole file."""
    lab, t, build, lmsd = net
    A = {h: t.addr(h) for h in HOSTS}
    set_loss(lab, t, build, {"h2": 0.05, "h4": 0.05})
    x = Transfer(lab, t, build, 1_000_000, session=5002, repliers=HOSTS, linger_ms=3000,
                 host_args={h: ["--replier-cost", COST[h]] for h in HOSTS})
    wait_replier(lmsd, "r2", [A["h1"]])
    wait_replier(lmsd, "r3", [A["h3"]])
    time.sleep(0.2)
    x.rx["h1"].kill()
    dead = wait_replier(lmsd, "r2", [A["h2"]], timeout=3)
    x.rx["h3"].terminate()
    left = wait_replier(lmsd, "r3", [A["h4"]], timeout=3)
    res = x.finish()
    print(json.dumps(summary(res)), {"failover_dead_s": round(dead, 3), "failover_leave_s": round(left, 3)})
    x.check_complete(res, ["h2", "h4"])
    # dead replier: host reports hold 3 x 100 ms, plus one 100 ms refresh
    assert dead < 0.3 + 0.1 + 0.15, dead
    # a replier that leaves is replaced on its LEAVE, within a refresh
    assert left < 0.1 + 0.15, left
    hier = route(lmsd, "r2")[1]
    assert hier["expired"] >= 1
    assert route(lmsd, "r3")[1]["leaves"] >= 1


def send_report(lab, t, node, replier, cost=0, dst="224.0.0.2", ttl=1, flags=0, count=1, spoof=None):
    """A report from node (its own socket, or a raw packet with source spoof)."""
    msg = b"LH" + struct.pack("!BB4s4s4sII", 1, flags, socket.inet_aton(t.addr("s")),
                              socket.inet_aton(G), socket.inet_aton(replier), cost, 1000)
    if spoof:
        pkt = lmspkt.ipv4(spoof, dst, 17, lmspkt.udp(spoof, dst, HIER_PORT, HIER_PORT, msg), ttl=ttl)
        code = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_RAW)\n"
                "s.setsockopt(socket.IPPROTO_IP,socket.IP_MULTICAST_IF,socket.inet_aton(sys.argv[1]))\n"
                "p=bytes.fromhex(sys.argv[2])\n"
                "for i in range(int(sys.argv[3])): s.sendto(p,(sys.argv[4],0))\n")
        args = [t.addr(node), pkt.hex(), count, dst]
    else:
        code = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                "s.setsockopt(socket.IPPROTO_IP,socket.IP_MULTICAST_IF,socket.inet_aton(sys.argv[1]))\n"
                "s.setsockopt(socket.IPPROTO_IP,socket.IP_MULTICAST_TTL,int(sys.argv[5]))\n"
                "s.setsockopt(socket.IPPROTO_IP,socket.IP_TTL,int(sys.argv[5]))\n"
                "p=bytes.fromhex(sys.argv[2])\n"
                "for i in range(int(sys.argv[3])): s.sendto(p,(sys.argv[4],%d))\n" % HIER_PORT)
        args = [t.addr(node), msg.hex(), count, dst, ttl]
    lab.run(t.ns[node], [sys.executable, "-c", code, *args])


def test_forged_reports_refused(net):
    """h4 tries to become the replier of r2's subtree (it is under r3): by
    naming h1 (route check), by spoofing h1's address (not on its link), by
    unicasting a report to r2 across routers (TTL), and by flooding (rate
    limit).  r2 keeps h1; each refusal is counted by reason."""
    lab, t, build, lmsd = net
    A = {h: t.addr(h) for h in HOSTS}
    v = volunteers(lab, t, build, ["h1", "h3"], 5003)
    try:
        wait_replier(lmsd, "r2", [A["h1"]])
        wait_replier(lmsd, "r3", [A["h3"]])
        before = {r: route(lmsd, r)[1] for r in ("r2", "r3")}
        send_report(lab, t, "h4", A["h1"], cost=0)                      # names another subtree's host
        send_report(lab, t, "h4", A["h1"], cost=0, spoof=A["h1"])       # spoofs h1's address
        r2_addr = t.iface("r2", "h1").v4
        send_report(lab, t, "h4", A["h4"], cost=0, dst=r2_addr, ttl=64)  # across routers
        t0 = time.monotonic()
        send_report(lab, t, "h4", A["h4"], cost=1000, count=2000)        # a flood (legit, expensive)
        flood_s = time.monotonic() - t0
        time.sleep(0.5)
        after = {r: route(lmsd, r)[1] for r in ("r2", "r3")}
        print(before, after)
        assert after["r3"]["rpf"] > before["r3"]["rpf"]
        assert after["r3"]["offlink"] > before["r3"]["offlink"]
        assert after["r2"]["ttl"] > before["r2"]["ttl"]
        assert after["r3"]["limited"] > before["r3"]["limited"]
        # 200 reports/s per interface (burst 40): the flood, and h3's own 10/s
        # over the whole check, are all that can get through
        assert after["r3"]["accepted"] - before["r3"]["accepted"] <= 40 + 200 * flood_s + 10 * (flood_s + 2) + 5
        assert route(lmsd, "r2")[0]["replier_addr"] == A["h1"]
        assert route(lmsd, "r3")[0]["replier_addr"] == A["h3"]
        assert route(lmsd, "r1")[0]["replier_addr"] in (A["h1"], A["h3"])
    finally:
        stop(v)
