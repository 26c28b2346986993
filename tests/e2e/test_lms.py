"""LMS-FWD and lmsd in a tree of namespaces (seed 004, ch. 6.4-6.5):

        s (source S)
        |
        r1 ---- replier link -> r2
       /  \\
     r2    r3          r2's replier: h1     r3's replier: h3
    /  \\   /  \\
   h1  h2 h3  h4

The kernel routes (S,G) (smcroute, static); lmsd runs on r1, r2, r3.  The
thesis's three verification scenarios, the bad options and the forgeries are
checked at the receiving hosts, byte for byte, and in lmsd's counters.  lmsd
runs with provisional turning points (its default, not the thesis's: a
request sent up unturned is marked by the first router); the thesis's own
forwarding (--no-provisional) is checked in a lab of its own below.
"""
import json
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import lmspkt
from lmspkt import DMCAST, END, NOP, PROVISIONAL, RA, REQ, option
from netlab import Lab, Link, Node, Tree

G = "239.192.7.7"
PORT = 7700
TREE = {"s": ["r1"], "r1": ["r2", "r3"], "r2": ["h1", "h2"], "r3": ["h3", "h4"]}
QUIET = 0.4  # how long "nobody else got it" is watched, after the expected arrival


class Receivers:
    """One RECEIVER per node, its JSON lines collected by a thread."""

    def __init__(self, lab, tree, nodes):
        self.got = {n: [] for n in nodes}
        self.lock = threading.Lock()
        self.procs = {}
        for n in nodes:
            p = self.procs[n] = lab.popen(tree.ns[n], [sys.executable, "-c", lmspkt.RECEIVER,
                                       json.dumps({"port": PORT, "group": G, "ifaddr": tree.addr(n)})],
                          stdout=subprocess.PIPE, text=True)
            assert json.loads(p.stdout.readline()) == {"ready": True}
            threading.Thread(target=self._read, args=(n, p), daemon=True).start()

    def leave(self, nodes):
        """Stop the receivers of nodes: their sockets close, the hosts leave G (IGMP)."""
        for n in nodes:
            self.procs[n].terminate()
            self.procs[n].wait(timeout=5)

    def _read(self, node, proc):
        for line in proc.stdout:
            with self.lock:
                self.got[node].append(json.loads(line))

    def matching(self, tag):
        """{node: [records whose data carries tag]}"""
        with self.lock:
            return {n: [r for r in recs if tag.hex() in r["data"]] for n, recs in self.got.items()}

    def counts(self):
        with self.lock:
            return {n: len(recs) for n, recs in self.got.items()}

    def wait(self, tag, where, count=1, timeout=5.0):
        """Wait until every node in where has count records with tag, then QUIET
        more; return matching(tag)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.matching(tag)
            if all(len(m[n]) >= count for n in where):
                break
            time.sleep(0.02)
        time.sleep(QUIET)
        return self.matching(tag)


@pytest.fixture(scope="module")
def net(build):
    lmsd_bin = build / "tools" / "lmsd"
    if not lmsd_bin.exists():
        pytest.fail(f"missing {lmsd_bin}")
    with Lab() as lab:
        t = lab.tree(TREE)
        S = t.addr("s")
        lab.smcroute(t, S, G)
        lmsd = start_lmsd(lab, t, lmsd_bin)
        rx = Receivers(lab, t, ["s", *t.hosts])
        yield lab, t, lmsd, rx


REPLIERS = {"r1": ("r2", "h1"), "r2": ("h1", "h1"), "r3": ("h3", "h3")}  # router: (replier link toward, replier)


def start_lmsd(lab, t, lmsd_bin, timeout=10):
    """lmsd on every router with REPLIERS; waits until each has (S,G) with its
    replier and two downstream interfaces, and is attached everywhere."""
    S = t.addr("s")
    lmsd = {r: lab.lmsd(t.ns[r], lmsd_bin, [(S, G, t.iface(r, via).ifname, t.addr(host))])
            for r, (via, host) in REPLIERS.items()}
    for d in lmsd.values():
        d.wait(lambda st: st.get("routes") and not st["routes"][0]["fallback"]
               and len(st["routes"][0]["downstream"]) == 2
               and all(i["attached"] for i in st["interfaces"]), timeout=timeout)
    return lmsd


def ifindex(lab, t, router, toward):
    dev = t.iface(router, toward).ifname
    return json.loads(lab.ip(t.ns[router], "-j", "link", "show", "dev", dev))[0]["ifindex"]


def stats(lmsd, router):
    """Counters as of now: waits for lmsd's next refresh (every 100 ms) first."""
    time.sleep(0.25)
    return lmsd[router].state()["stats"]


def wait_stat(lmsd, router, key, at_least):
    return lmsd[router].wait(lambda st: st["stats"][key] >= at_least)["stats"]


def tag():
    return b"LMS-" + secrets.token_bytes(8)


def send_request(lab, t, node, data, ttl=16, opt=None, group=G):
    S = t.addr("s")
    opt = opt if opt is not None else option(REQ, S, G)
    lab.run(t.ns[node], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
        {"ifaddr": t.addr(node), "group": group, "port": PORT, "ttl": ttl, "opts": opt.hex(),
         "data": [data.hex()]})])


def send_raw(lab, t, node, packets):
    lab.run(t.ns[node], [sys.executable, "-c", lmspkt.RAWIP,
                         json.dumps({"packets": [p.hex() for p in packets]})])


def send_frames(lab, t, node, frames):
    link = t.uplinks[node].b
    lab.run(t.ns[node], [sys.executable, "-c", lmspkt.FRAMES,
                         json.dumps({"ifname": link.ifname, "frames": [f.hex() for f in frames]})])


def mac(lab, t, router, toward):
    dev = t.iface(router, toward).ifname
    return bytes.fromhex(json.loads(lab.ip(t.ns[router], "-j", "link", "show", "dev", dev))[0]
                         ["address"].replace(":", ""))


def host_mac(lab, t, node):
    dev = t.uplinks[node].b.ifname
    return bytes.fromhex(json.loads(lab.ip(t.ns[node], "-j", "link", "show", "dev", dev))[0]
                         ["address"].replace(":", ""))


def data_multicast(lab, t, rx, n=3):
    """S sends n plain multicast datagrams; every host must get each, unchanged."""
    payloads = [tag() + bytes([i]) * 100 for i in range(n)]
    lab.run(t.ns["s"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
        {"ifaddr": t.addr("s"), "group": G, "port": PORT, "data": [p.hex() for p in payloads]})])
    for p in payloads:
        got = rx.wait(p, t.hosts, timeout=5)
        for h in t.hosts:
            assert [r["data"] for r in got[h]] == [p.hex()], f"{h} did not get plain multicast"
            assert got[h][0]["opts"] == ""


# ---- the thesis's scenarios ----------------------------------------------------

def test_plain_multicast_reaches_every_host(net):
    lab, t, lmsd, rx = net
    data_multicast(lab, t, rx)


def test_scenario1_request_turned_to_replier(net):
    """h2 multicasts a request: r2 is the turning point; it writes the
    interface the request came in on and its own address there, and sends it
    down the replier link only.  h1 gets it byte for byte."""
    lab, t, lmsd, rx = net
    before = stats(lmsd, "r2")["req_turned"]
    data = tag() + bytes(range(256)) * 2
    send_request(lab, t, "h2", data)
    got = rx.wait(data, ["h1"])
    want = option(REQ, t.addr("s"), G, ifindex(lab, t, "r2", "h2"), t.iface("r2", "h2").v4)
    assert [(r["data"], r["opts"]) for r in got["h1"]] == [(data.hex(), want.hex())]
    assert got["h1"][0]["src"] == t.addr("h2")
    for n in ("s", "h3", "h4"):  # one copy, one interface: no flood
        assert got[n] == [], n
    assert wait_stat(lmsd, "r2", "req_turned", before + 1)["req_turned"] == before + 1


def test_scenario1_two_levels_turned_at_r1(net):
    """h3 is r3's replier: its request goes up to r1, which turns it (h3's
    link is not r1's replier link) and sends it toward r2; r2 got it from its
    parent, so it goes down r2's replier link unchanged, to h1.  r3 sent it up
    marked provisionally; r1's real turning point replaced that mark."""
    lab, t, lmsd, rx = net
    down_before = stats(lmsd, "r2")["req_down"]
    prov_before = stats(lmsd, "r3")["req_provisional"]
    data = tag() + b"two levels"
    send_request(lab, t, "h3", data)
    got = rx.wait(data, ["h1"])
    want = option(REQ, t.addr("s"), G, ifindex(lab, t, "r1", "r3"), t.iface("r1", "r3").v4)
    assert [(r["data"], r["opts"]) for r in got["h1"]] == [(data.hex(), want.hex())]
    for n in ("s", "h2", "h4"):
        assert got[n] == [], n
    assert wait_stat(lmsd, "r2", "req_down", down_before + 1)["req_down"] == down_before + 1
    assert stats(lmsd, "r3")["req_provisional"] == prov_before + 1


def test_scenario2_request_from_replier_goes_to_source(net):
    """h1 is the replier: its request goes up, r2 and r1 both got it on
    their replier links.  r2, the first router to send it up, marks it
    provisionally (its interface toward h1 with bit 15, its address there);
    r1 got it over a link with a router below and keeps r2's mark.  S
    receives it so marked."""
    lab, t, lmsd, rx = net
    before = {r: stats(lmsd, r) for r in ("r1", "r2")}
    data = tag() + b"to the source"
    send_request(lab, t, "h1", data)
    got = rx.wait(data, ["s"])
    want = option(REQ, t.addr("s"), G, ifindex(lab, t, "r2", "h1") | PROVISIONAL, t.iface("r2", "h1").v4)
    assert [(r["data"], r["opts"]) for r in got["s"]] == [(data.hex(), want.hex())]
    for n in ("h2", "h3", "h4"):
        assert got[n] == [], n
    after = {r: wait_stat(lmsd, r, "req_up", before[r]["req_up"] + 1) for r in ("r1", "r2")}
    assert {r: after[r]["req_up"] - before[r]["req_up"] for r in after} == {"r1": 1, "r2": 1}
    assert {r: after[r]["req_provisional"] - before[r]["req_provisional"] for r in after} == {"r1": 0, "r2": 1}


def test_scenario3_dmcast_reaches_only_the_named_subtree(net):
    """h1 (r1's replier) sends a dmcast to r1 naming r1's interface toward
    r3: r1 decapsulates and multicasts the inner packet there only; r3
    forwards it as ordinary (S,G) traffic to h3 and h4.  h2 gets nothing."""
    lab, t, lmsd, rx = net
    S = t.addr("s")
    data = tag() + b"repair" * 50
    pkt = lmspkt.dmcast(t.addr("h1"), t.iface("r1", "r3").v4, ifindex(lab, t, "r1", "r3"), S, G, S, PORT, data)
    before = stats(lmsd, "r1")["dmcast"]
    send_raw(lab, t, "h1", [pkt])
    got = rx.wait(data, ["h3", "h4"])
    for h in ("h3", "h4"):
        assert [(r["data"], r["opts"], r["src"]) for r in got[h]] == [(data.hex(), "", S)], h
    for n in ("s", "h1", "h2"):
        assert got[n] == [], n
    assert wait_stat(lmsd, "r1", "dmcast", before + 1)["dmcast"] == before + 1


def test_scenario3_dmcast_to_one_host(net):
    """The thesis's own case: after h2's request was turned at r2, h1 sends a
    dmcast to r2 naming h2's interface; only h2 gets the repair."""
    lab, t, lmsd, rx = net
    S = t.addr("s")
    data = tag() + b"just h2"
    pkt = lmspkt.dmcast(t.addr("h1"), t.iface("r2", "h2").v4, ifindex(lab, t, "r2", "h2"), S, G, S, PORT, data)
    send_raw(lab, t, "h1", [pkt])
    got = rx.wait(data, ["h2"])
    assert [(r["data"], r["src"]) for r in got["h2"]] == [(data.hex(), S)]
    for n in ("s", "h1", "h3", "h4"):
        assert got[n] == [], n


def test_dmcast_from_source_to_a_provisional_point(net):
    """S answers scenario 2's provisionally marked request with a dmcast to
    r2 naming its interface toward h1 (bit 15 cleared): it comes through r2's
    upstream interface from S, so r2 decapsulates it, and only h1 gets it."""
    lab, t, lmsd, rx = net
    S = t.addr("s")
    data = tag() + b"to h1 only"
    before = stats(lmsd, "r2")["dmcast"]
    send_raw(lab, t, "s", [lmspkt.dmcast(S, t.iface("r2", "h1").v4, ifindex(lab, t, "r2", "h1"),
                                         S, G, S, PORT, data)])
    got = rx.wait(data, ["h1"])
    assert [(r["data"], r["opts"], r["src"]) for r in got["h1"]] == [(data.hex(), "", S)]
    for n in ("s", "h2", "h3", "h4"):
        assert got[n] == [], n
    assert wait_stat(lmsd, "r2", "dmcast", before + 1)["dmcast"] == before + 1


def test_dmcast_from_source_via_parent_is_accepted(net):
    """S is the fallback replier: its dmcast through r1's upstream interface is accepted."""
    lab, t, lmsd, rx = net
    S = t.addr("s")
    data = tag() + b"from S"
    pkt = lmspkt.dmcast(S, t.iface("r1", "r2").v4, ifindex(lab, t, "r1", "r2"), S, G, S, PORT, data)
    send_raw(lab, t, "s", [pkt])
    got = rx.wait(data, ["h1", "h2"])
    assert all(len(got[h]) == 1 for h in ("h1", "h2"))
    assert got["h3"] == [] and got["h4"] == []


# ---- the option anywhere among the IP options (a router walks them) -----------

# (options before the LMS option, after it): IP_OPTIONS pads the area with END
LAYOUTS = {"NOP first": (NOP, END * 3), "Router Alert first": (RA, b""),
           "last, after 24 NOPs (IHL 15)": (NOP * 24, b"")}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_option_found_anywhere(net, layout):
    """h2's request with other options before the LMS option is turned at r2
    (the mark written at the option's place) and reaches h1 with every other
    byte as sent; h1's own request is marked provisionally by r2 and reaches
    S through r1.  A dmcast whose option 139 follows other options is
    decapsulated at r1."""
    lab, t, lmsd, rx = net
    S = t.addr("s")
    pre, post = LAYOUTS[layout]
    data = tag() + b"after other options"
    send_request(lab, t, "h2", data, opt=pre + option(REQ, S, G) + post)
    got = rx.wait(data, ["h1"])
    want = pre + option(REQ, S, G, ifindex(lab, t, "r2", "h2"), t.iface("r2", "h2").v4) + post
    assert [(r["data"], r["opts"]) for r in got["h1"]] == [(data.hex(), want.hex())]
    assert all(got[n] == [] for n in ("s", "h3", "h4"))

    data = tag() + b"up to S"
    send_request(lab, t, "h1", data, opt=pre + option(REQ, S, G) + post)
    got = rx.wait(data, ["s"])
    want = pre + option(REQ, S, G, ifindex(lab, t, "r2", "h1") | PROVISIONAL, t.iface("r2", "h1").v4) + post
    assert [(r["data"], r["opts"]) for r in got["s"]] == [(data.hex(), want.hex())]

    data = tag() + b"dmcast after other options"
    tpaddr, tpif = t.iface("r1", "r3").v4, ifindex(lab, t, "r1", "r3")
    opts = pre + option(DMCAST, S, G, tpif, tpaddr) + post
    opts += END * (-len(opts) % 4)
    send_raw(lab, t, "h1", [lmspkt.dmcast(t.addr("h1"), tpaddr, tpif, S, G, S, PORT, data, opt=opts)])
    got = rx.wait(data, ["h3", "h4"])
    assert all([(r["data"], r["src"]) for r in got[h]] == [(data.hex(), S)] for h in ("h3", "h4"))
    assert all(got[n] == [] for n in ("s", "h1", "h2"))


# ---- bad options, forgeries: dropped, counted, plain multicast undisturbed -----

BAD = ["wrong option length", "truncated inside the option", "total length beyond the frame",
       "dmcast naming an unknown interface", "dmcast naming the upstream interface",
       "dmcast from a host that is not the replier", "dmcast spoofing the replier's address from elsewhere",
       "dmcast with an inner packet to another group", "dmcast fragment", "request for an (S,G) with no route",
       "request already marked from below", "request with TTL 1", "option length 20 in a 16-byte option area",
       "unmarked request from upstream", "provisional mark forged by the replier host",
       "provisional mark forged on a non-replier link", "provisional mark from upstream",
       "dmcast naming a provisional interface",
       "malformed option (length 1) after a good one", "option running past the header after a good one",
       "LMS option of length 12 after a NOP", "LMS option with no length byte after NOPs", "two LMS options",
       "LMS option running past the header after a NOP", "header cut short after a NOP and the option",
       "request fragment", "request's last fragment",
       "dmcast with an inner packet from the replier", "dmcast with an inner packet that is not UDP",
       "dmcast with a wrong inner header checksum", "dmcast with an inner fragment",
       "dmcast with two LMS options"]


def bad_cases(lab, t):
    """{name: (sender node, how, what, counter at router, router)}.  how is
    'frame' (AF_PACKET, exact bytes), 'raw' (IP_HDRINCL) or 'req' (IP_OPTIONS)."""
    S, h1, h2, h3 = (t.addr(n) for n in ("s", "h1", "h2", "h3"))
    r1_v3, r1_v1 = t.iface("r1", "r3").v4, t.iface("r1", "s").v4
    if_r3, if_up = ifindex(lab, t, "r1", "r3"), ifindex(lab, t, "r1", "s")
    eth_r2 = mac(lab, t, "r2", "h2") + host_mac(lab, t, "h2") + b"\x08\x00"
    eth_mc = lmspkt.mcast_mac(G) + host_mac(lab, t, "h2") + b"\x08\x00"
    payload = lmspkt.udp(h2, G, 4000, PORT, b"bad")

    def dm(data, **kw):
        a = dict(outer_src=h1, tpaddr=r1_v3, tpif=if_r3, src=S, group=G, inner_src=S, dport=PORT, data=data)
        a.update(kw)
        return lmspkt.dmcast(**a)

    short_opt = option(REQ, S, G)[:12] + b"\x01\x01\x01\x00"  # option says 16, area holds 12 + NOPs
    short_opt = bytes([REQ, 12]) + short_opt[2:]
    truncated = lmspkt.ipv4(h2, G, 17, payload, options=option(REQ, S, G))
    frag = bytearray(dm(b"x" * 64))
    frag[6:8] = (0x2000).to_bytes(2, "big")  # more fragments (the kernel refills the checksum)
    cases = [
        ("wrong option length", "h2", "frame", eth_mc + lmspkt.ipv4(h2, G, 17, payload, options=short_opt),
         "drop_bad_len", "r2"),
        ("truncated inside the option", "h2", "frame", eth_mc + truncated[:30], "drop_truncated", "r2"),
        ("total length beyond the frame", "h2", "frame", eth_mc + truncated[:-4], "drop_truncated", "r2"),
        ("dmcast naming an unknown interface", "h1", "raw", dm(b"x", tpif=999), "drop_bad_if", "r1"),
        ("dmcast naming the upstream interface", "h1", "raw",
         dm(b"x", tpaddr=r1_v1, tpif=if_up), "drop_not_downstream", "r1"),
        ("dmcast from a host that is not the replier", "h3", "raw", dm(b"x", outer_src=h3),
         "drop_forged", "r1"),
        ("dmcast spoofing the replier's address from elsewhere", "h3", "raw", dm(b"x", outer_src=h1),
         "drop_forged", "r1"),
        ("dmcast with an inner packet to another group", "h1", "raw",
         lmspkt.ipv4(h1, r1_v3, 4, lmspkt.ipv4(S, "239.192.9.9", 17, payload),
                     options=option(DMCAST, S, G, if_r3, r1_v3)), "drop_bad_inner", "r1"),
        ("dmcast fragment", "h1", "raw", bytes(frag), "drop_fragment", "r1"),
        ("request for an (S,G) with no route", "h2", "req", option(REQ, h3, G), "drop_no_state", "r2"),
        ("request already marked from below", "h2", "req",
         option(REQ, S, G, 7, t.iface("r2", "h2").v4), "drop_premarked", "r2"),
        ("request with TTL 1", "h2", "ttl1", option(REQ, S, G), "drop_ttl", "r2"),
        ("option length 20 in a 16-byte option area", "h2", "frame",
         eth_r2 + lmspkt.ipv4(h2, G, 17, payload, options=bytes([REQ, 20]) + bytes(14)),
         "drop_bad_len", "r2"),
        ("unmarked request from upstream", "s", "req", option(REQ, S, G), "drop_upstream", "r1"),
        # h1's and h2's links have no router on them: a provisional mark from there is a host's
        ("provisional mark forged by the replier host", "h1", "req",
         option(REQ, S, G, ifindex(lab, t, "r3", "h4") | PROVISIONAL, t.iface("r3", "h4").v4),
         "drop_forged_mark", "r2"),
        ("provisional mark forged on a non-replier link", "h2", "req",
         option(REQ, S, G, ifindex(lab, t, "r2", "h2") | PROVISIONAL, t.iface("r2", "h2").v4),
         "drop_forged_mark", "r2"),
        ("provisional mark from upstream", "s", "req",
         option(REQ, S, G, ifindex(lab, t, "r1", "r3") | PROVISIONAL, r1_v3), "drop_upstream", "r1"),
        ("dmcast naming a provisional interface", "s", "raw",
         dm(b"x", outer_src=S, tpif=if_r3 | PROVISIONAL), "drop_bad_if", "r1"),
    ]
    lms = option(REQ, S, G)
    inner = lmspkt.ipv4(S, G, 17, lmspkt.udp(S, G, 4000, PORT, b"x"), ttl=16)
    bad_csum = bytearray(inner)
    bad_csum[10] ^= 0x55
    req = lmspkt.ipv4(h2, G, 17, payload, options=NOP + lms + END * 3)

    def fr(options, frag=0):
        return eth_mc + lmspkt.ipv4(h2, G, 17, payload, options=options, frag=frag)

    cases += [
        ("malformed option (length 1) after a good one", "h2", "frame", fr(lms + b"\x07\x01\x00\x00"),
         "drop_bad_len", "r2"),
        ("option running past the header after a good one", "h2", "frame", fr(lms + b"\x94\x08\x00\x00"),
         "drop_bad_len", "r2"),
        ("LMS option of length 12 after a NOP", "h2", "frame", fr(NOP + bytes([REQ, 12]) + lms[2:12] + NOP * 3),
         "drop_bad_len", "r2"),
        ("LMS option with no length byte after NOPs", "h2", "frame", fr(NOP * 15 + bytes([REQ])),
         "drop_bad_len", "r2"),
        ("two LMS options", "h2", "frame", fr(lms + NOP * 4 + lms), "drop_two_lms", "r2"),
        ("LMS option running past the header after a NOP", "h2", "frame", fr(NOP + lms[:15]),
         "drop_bad_len", "r2"),
        ("header cut short after a NOP and the option", "h2", "frame", eth_mc + req[:30], "drop_truncated", "r2"),
        ("request fragment", "h2", "frame", fr(lms, frag=0x2000), "drop_fragment", "r2"),
        ("request's last fragment", "h2", "frame", fr(lms, frag=0x0010), "drop_fragment", "r2"),
        ("dmcast with an inner packet from the replier", "h1", "raw", dm(b"x", inner_src=h1),
         "drop_inner_src", "r1"),
        ("dmcast with an inner packet that is not UDP", "h1", "raw",
         dm(b"", inner=lmspkt.ipv4(S, G, 6, b"\0" * 20, ttl=16)), "drop_inner_proto", "r1"),
        ("dmcast with a wrong inner header checksum", "h1", "raw", dm(b"", inner=bytes(bad_csum)),
         "drop_inner_csum", "r1"),
        ("dmcast with an inner fragment", "h1", "raw",
         dm(b"", inner=lmspkt.ipv4(S, G, 17, lmspkt.udp(S, G, 4000, PORT, b"x"), ttl=16, frag=0x2000)),
         "drop_fragment", "r1"),
        ("dmcast with two LMS options", "h1", "raw",
         dm(b"x", opt=option(DMCAST, S, G, if_r3, r1_v3) + option(REQ, S, G)), "drop_two_lms", "r2"),
    ]
    assert [c[0] for c in cases] == BAD
    return {c[0]: c[1:] for c in cases}


@pytest.mark.parametrize("name", BAD)
def test_bad_packets_dropped_counted_multicast_flows(net, name):
    lab, t, lmsd, rx = net
    node, how, what, counter, router = bad_cases(lab, t)[name]
    before = stats(lmsd, router)
    heard = rx.counts()
    data = tag()
    if how == "frame":
        send_frames(lab, t, node, [what] * 3)
    elif how == "raw":
        send_raw(lab, t, node, [what] * 3)
    else:
        for _ in range(3):
            send_request(lab, t, node, data, opt=what, ttl=1 if how == "ttl1" else 16)
    after = wait_stat(lmsd, router, counter, before[counter] + 3)
    assert after[counter] == before[counter] + 3, name
    # Nothing else moved: exactly this reason, no forwarding.
    for k in after:
        if k != counter:
            assert after[k] == before[k], (name, k)
    time.sleep(QUIET)
    assert rx.counts() == heard, name  # nobody received anything
    data_multicast(lab, t, rx, n=1)  # plain multicast still flows, unchanged


def test_fault_before_the_lms_option_is_the_kernels(net):
    """An option with length 1 before the LMS option: the walk cannot see
    past it, so the packet is not LMS to the router program and no counter
    moves; r2's kernel drops it (a parameter problem in the options), so
    nothing reaches anyone."""
    lab, t, lmsd, rx = net
    S, h2 = t.addr("s"), t.addr("h2")
    before, heard = stats(lmsd, "r2"), rx.counts()
    eth_mc = lmspkt.mcast_mac(G) + host_mac(lab, t, "h2") + b"\x08\x00"
    pkt = lmspkt.ipv4(h2, G, 17, lmspkt.udp(h2, G, 4000, PORT, tag()),
                      options=b"\x07\x01" + option(REQ, S, G) + NOP * 2)
    send_frames(lab, t, "h2", [eth_mc + pkt] * 3)
    time.sleep(QUIET)
    assert stats(lmsd, "r2") == before
    assert rx.counts() == heard


def test_request_cannot_be_turned_into_a_flood(net):
    """20 requests from h4 (non-replier below r3): exactly 20 reach h3, one
    each; no copy reaches any other host or S, and routers above see none."""
    lab, t, lmsd, rx = net
    before, r3_before = stats(lmsd, "r1"), stats(lmsd, "r3")["req_turned"]
    datas = [tag() for _ in range(20)]
    S = t.addr("s")
    lab.run(t.ns["h4"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
        {"ifaddr": t.addr("h4"), "group": G, "port": PORT, "opts": option(REQ, S, G).hex(),
         "data": [d.hex() for d in datas]})])
    rx.wait(datas[-1], ["h3"])
    for d in datas:
        got = rx.matching(d)
        assert len(got["h3"]) == 1
        assert all(got[n] == [] for n in ("s", "h1", "h2", "h4"))
    after = stats(lmsd, "r1")
    assert {k: after[k] - before[k] for k in after} == {k: 0 for k in after}
    assert stats(lmsd, "r3")["req_turned"] == r3_before + 20


# ---- a link shared by a host and a router below ------------------------------

@pytest.fixture(scope="module")
def shared(build):
    """The smallest tree with a link shared by a host and a router below:

        s -- r1 --[switch: r1, r2, hx]-- r2 -- h1

    hx is a host on r2's uplink (a bridge in its own namespace, snooping off,
    so every station hears every multicast).  No replier anywhere: r2 marks
    h1's requests provisionally and r1 sends them up to S.  lmsd on r1 and r2."""
    with Lab() as lab:
        ns = {n: lab.add_ns(n) for n in ("s", "r1", "r2", "h1", "hx", "sw")}
        up = lab.add_link(ns["s"], ns["r1"], v6=False)
        legs = {n: lab.add_link(ns["sw"], ns[n], v4=False, v6=False) for n in ("r1", "r2", "hx")}
        lab.ip(ns["sw"], "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        for leg in legs.values():
            lab.ip(ns["sw"], "link", "set", leg.a.ifname, "master", "br0")
        lab.ip(ns["sw"], "link", "set", "br0", "up")
        net = legs["r1"].v4_net  # the first leg's subnet: the shared link's
        on = {n: Node(ns[n], legs[n].b.ifname, net.replace(".0/24", f".{k}"), None)
              for k, n in enumerate(("r1", "r2", "hx"), 1)}
        for n, node in on.items():
            lab.ip(ns[n], "addr", "add", f"{node.v4}/24", "dev", node.ifname)
        low = lab.add_link(ns["r2"], ns["h1"], v6=False)
        routes = {"s": [(net, up.b.v4), (low.v4_net, up.b.v4)], "r1": [(low.v4_net, on["r2"].v4)],
                  "r2": [(up.v4_net, on["r1"].v4)], "h1": [(up.v4_net, low.a.v4), (net, low.a.v4)],
                  "hx": [(up.v4_net, on["r1"].v4), (low.v4_net, on["r2"].v4)]}
        for n, rs in routes.items():
            for key in ("net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter"):
                lab.set_sysctl(key, 0, ns=ns[n])
            for dst, via in rs:
                lab.ip(ns[n], "route", "add", dst, "via", via)
        for r in ("r1", "r2"):
            lab.set_sysctl("net.ipv4.ip_forward", 1, ns=ns[r])
        t = Tree("s", {"s": None, "r1": "s", "r2": "r1", "h1": "r2"},
                 {n: ns[n] for n in ("s", "r1", "r2", "h1")},
                 {"r1": up, "r2": Link(legs["r2"].index, on["r1"], on["r2"], net, ""), "h1": low},
                 ("r1", "r2"), ("h1",))
        lab.resolve(ns["s"], [up.b.v4])
        lab.resolve(ns["r1"], [up.a.v4, on["r2"].v4, on["hx"].v4])
        lab.resolve(ns["r2"], [on["r1"].v4, low.b.v4])
        lab.resolve(ns["hx"], [on["r1"].v4, on["r2"].v4])
        lab.resolve(ns["h1"], [low.a.v4])
        S = t.addr("s")
        lab.smcroute(t, S, G)
        lmsd = {r: lab.lmsd(ns[r], build / "tools" / "lmsd") for r in ("r1", "r2")}
        for d in lmsd.values():
            d.wait(lambda st: st.get("routes") and all(i["attached"] for i in st["interfaces"])
                   and any(i["below"] for i in st["interfaces"]))
        rx = Receivers(lab, t, ["s", "h1"])
        yield lab, t, on, lmsd, rx


def test_shared_link_state_lists_what_lies_below(shared):
    """r1's link to the switch has a router on it (r2, the gateway to h1's
    link): marks from there may name an address on h1's link, nothing else."""
    lab, t, on, lmsd, rx = shared
    st = lmsd["r1"].state()
    assert {i["name"]: (i["routers"], i["below"]) for i in st["interfaces"]} == {
        t.iface("r1", "s").ifname: (False, []), on["r1"].ifname: (True, [t.uplinks["h1"].v4_net])}


def test_shared_link_router_mark_passes(shared):
    """h1's request: r2 marks it provisionally (its address on h1's link);
    r1 gets it over the shared link, where that address lies through r2, and
    S receives it with r2's mark, byte for byte."""
    lab, t, on, lmsd, rx = shared
    before = stats(lmsd, "r1")
    data = tag() + b"via r2"
    send_request(lab, t, "h1", data)
    got = rx.wait(data, ["s"])
    want = option(REQ, t.addr("s"), G, ifindex(lab, t, "r2", "h1") | PROVISIONAL, t.iface("r2", "h1").v4)
    assert [(r["data"], r["opts"]) for r in got["s"]] == [(data.hex(), want.hex())]
    after = wait_stat(lmsd, "r1", "req_up", before["req_up"] + 1)
    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {"req_up": 1}


def hx_request(lab, on, data, opt):
    lab.run(on["hx"].ns, [sys.executable, "-c", lmspkt.SENDER, json.dumps(
        {"ifaddr": on["hx"].v4, "group": G, "port": PORT, "ttl": 16, "opts": opt.hex(),
         "data": [data.hex()]})])


def test_shared_link_host_unmarked_request_marked_by_r1(shared):
    """hx's own (unmarked) request is r1's to mark: S gets r1's provisional
    mark (its interface on the switch, its address there)."""
    lab, t, on, lmsd, rx = shared
    data = tag() + b"hx asks"
    hx_request(lab, on, data, option(REQ, t.addr("s"), G))
    got = rx.wait(data, ["s"])
    r1_if = json.loads(lab.ip(on["r1"].ns, "-j", "link", "show", "dev", on["r1"].ifname))[0]["ifindex"]
    want = option(REQ, t.addr("s"), G, r1_if | PROVISIONAL, on["r1"].v4)
    assert [(r["data"], r["opts"]) for r in got["s"]] == [(data.hex(), want.hex())]
    assert got["h1"] == []


FORGED = ["third party: the source", "third party: unrouted", "the forger itself", "r1 on the shared link"]


@pytest.mark.parametrize("name", FORGED)
def test_shared_link_host_forged_mark_dropped(shared, name):
    """hx, on a link that has a router below (r2), forges a provisional mark
    naming an address that does not lie through r2: r1 drops it
    (drop_mark_not_below) and nothing else moves.  S never gets the
    request, so it sends nothing to the named address; h1 gets nothing."""
    lab, t, on, lmsd, rx = shared
    tpaddr = {"third party: the source": t.addr("s"), "third party: unrouted": lab.unrouted_v4(),
              "the forger itself": on["hx"].v4, "r1 on the shared link": on["r1"].v4}[name]
    before = stats(lmsd, "r1")
    heard = rx.counts()
    for _ in range(3):
        hx_request(lab, on, tag(), option(REQ, t.addr("s"), G, 5 | PROVISIONAL, tpaddr))
    after = wait_stat(lmsd, "r1", "drop_mark_not_below", before["drop_mark_not_below"] + 3)
    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {"drop_mark_not_below": 3}
    time.sleep(QUIET)
    assert rx.counts() == heard


def test_shared_link_host_mark_naming_below_passes(shared):
    """The limit that remains (docs/lms-provisional.md): r1 cannot tell a
    router below r2's link from a host there, so hx's mark naming h1 passes,
    and S would direct a repair at h1, inside the subtree of hx's own link."""
    lab, t, on, lmsd, rx = shared
    data = tag() + b"names h1"
    opt = option(REQ, t.addr("s"), G, 5 | PROVISIONAL, t.addr("h1"))
    hx_request(lab, on, data, opt)
    got = rx.wait(data, ["s"])
    assert [(r["data"], r["opts"]) for r in got["s"]] == [(data.hex(), opt.hex())]


# ---- lmsd ------------------------------------------------------------------------

def test_lmsd_state_names_the_tree(net):
    lab, t, lmsd, rx = net
    st = lmsd["r1"].state()
    (route,) = st["routes"]
    assert route["source"] == t.addr("s") and route["group"] == G
    assert route["parent"] == t.iface("r1", "s").ifname
    assert route["replier"] == t.iface("r1", "r2").ifname and route["replier_addr"] == t.addr("h1")
    assert sorted(route["downstream"]) == sorted([t.iface("r1", "r2").ifname, t.iface("r1", "r3").ifname])
    assert {i["name"]: i["addr"] for i in st["interfaces"]} == {
        t.iface("r1", n).ifname: t.iface("r1", n).v4 for n in ("s", "r2", "r3")}
    # links with routers (a gateway of a unicast route on them): r1's children, r2's parent
    assert st["provisional"] is True
    assert {i["name"]: i["routers"] for i in st["interfaces"]} == {
        t.iface("r1", "s").ifname: False, t.iface("r1", "r2").ifname: True, t.iface("r1", "r3").ifname: True}
    # what a provisional mark from each may name: the links through the routers there
    assert {i["name"]: sorted(i["below"]) for i in st["interfaces"]} == {
        t.iface("r1", "s").ifname: [],
        t.iface("r1", "r2").ifname: sorted(t.uplinks[h].v4_net for h in ("h1", "h2")),
        t.iface("r1", "r3").ifname: sorted(t.uplinks[h].v4_net for h in ("h3", "h4"))}
    assert {i["name"]: i["routers"] for i in lmsd["r2"].state()["interfaces"]} == {
        t.iface("r2", "r1").ifname: True, t.iface("r2", "h1").ifname: False, t.iface("r2", "h2").ifname: False}


def test_lmsd_bad_config_and_arguments(build, tmp_path):
    lmsd = str(build / "tools" / "lmsd")
    conf = tmp_path / "bad.conf"
    conf.write_text("# ok\nreplier 10.1.1.1 239.1.1.1 veth1 10.1.2.2\nreplier 10.1.1.1 10.9.9.9 veth1 10.1.2.2\n")
    p = subprocess.run([lmsd, "--check", "-c", conf], capture_output=True, text=True)
    assert p.returncode == 2 and f"{conf}:3: GROUP is not an IPv4 multicast address" in p.stderr
    conf.write_text("replier 10.1.1.1 239.1.1.1 veth1 10.1.2.2 7\n")
    p = subprocess.run([lmsd, "--check", "-c", conf], capture_output=True, text=True)
    assert p.returncode == 0 and "1 replier" in p.stdout
    # COST is checked before it narrows to 32 bits: 2^32 + 7 is not 7
    for cost in ("4294967303", "65536", "-1"):
        conf.write_text(f"replier 10.1.1.1 239.1.1.1 veth1 10.1.2.2 {cost}\n")
        p = subprocess.run([lmsd, "--check", "-c", conf], capture_output=True, text=True)
        assert p.returncode == 2 and "COST is not an integer in 0..65535" in p.stderr, cost
    p = subprocess.run([lmsd, "-t", "0"], capture_output=True, text=True)
    assert p.returncode == 2 and "--interval 0" in p.stderr
    p = subprocess.run([lmsd, "-c", tmp_path / "missing"], capture_output=True, text=True)
    assert p.returncode == 2 and "missing" in p.stderr


@pytest.mark.parametrize("thesis", [False, True], ids=["provisional", "thesis"])
def test_lmsd_sigterm_detaches_and_fallback(build, thesis):
    """Without a replier, the source is the fallback: a request goes up,
    marked provisionally by r1 (its interface toward h2), or unmarked with
    --no-provisional (the thesis's forwarding, where a provisional mark from
    below is refused like any other mark).  SIGTERM: exit 0, our filters gone,
    the clsact qdisc and other filters left alone."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        lab.smcroute(t, S, G)
        loss = lab.add_loss(t.ns["r1"], t.iface("r1", "h1").ifname, 0.0, build / "bpf" / "loss.bpf.o")
        d = lab.lmsd(t.ns["r1"], build / "tools" / "lmsd", args=["--no-provisional"] if thesis else [])
        st = d.wait(lambda st: st.get("routes") and all(i["attached"] for i in st["interfaces"]))
        assert st["routes"][0]["fallback"] and st["routes"][0]["note"] == "no replier configured"
        assert st["provisional"] is (not thesis)
        rx = Receivers(lab, t, ["s", "h1", "h2"])
        data = tag()
        send_request(lab, t, "h2", data)
        got = rx.wait(data, ["s"])
        want = option(REQ, S, G) if thesis else option(
            REQ, S, G, ifindex(lab, t, "r1", "h2") | PROVISIONAL, t.iface("r1", "h2").v4)
        assert [r["opts"] for r in got["s"]] == [want.hex()]
        assert got["h1"] == []
        # a provisional mark from a host: forged (thesis: a mark from below, premarked)
        send_request(lab, t, "h2", tag(), opt=option(REQ, S, G, PROVISIONAL | 5, t.iface("r1", "h1").v4))
        st = d.wait(lambda st: st["stats"]["drop_premarked"] + st["stats"]["drop_forged_mark"] >= 1)
        assert (st["stats"]["drop_premarked"], st["stats"]["drop_forged_mark"]) == ((1, 0) if thesis else (0, 1))
        assert st["stats"]["req_provisional"] == (0 if thesis else 1)
        dev = t.iface("r1", "h1").ifname
        assert d.stop() == 0
        shown = lab.run(t.ns["r1"], ["tc", "filter", "show", "dev", dev, "ingress"],
                        capture_output=True, text=True).stdout
        assert "gc_lms_fwd" not in shown and "gc_loss" in shown
        assert d.state()["stats"]["req_up"] == 1


HIGH_IFINDEX = 40000  # above 0x7fff: bit 15 of tpif set


@pytest.mark.parametrize("thesis", [True, False], ids=["thesis", "provisional"])
def test_turning_point_with_a_high_ifindex(build, thesis):
    """r1's interface toward h2 has ifindex 40000 (hosts with interface churn
    get there).  In the thesis's forwarding (--no-provisional) tpif is the
    whole 16-bit ifindex: h2's request is turned there and reaches the
    replier h1 marked 40000, and h1's dmcast naming 40000 reaches h2 only.
    With provisional marking on, bit 15 is the provisional flag, so r1
    cannot be a turning point there: the request is dropped (drop_bad_if)."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]}, ifindex={"h2": HIGH_IFINDEX})
        S = t.addr("s")
        lab.smcroute(t, S, G)
        d = lab.lmsd(t.ns["r1"], build / "tools" / "lmsd", [(S, G, t.iface("r1", "h1").ifname, t.addr("h1"))],
                     args=["--no-provisional"] if thesis else [])
        d.wait(lambda st: st.get("routes") and not st["routes"][0]["fallback"]
               and len(st["routes"][0]["downstream"]) == 2 and all(i["attached"] for i in st["interfaces"]))
        assert ifindex(lab, t, "r1", "h2") == HIGH_IFINDEX
        rx = Receivers(lab, t, ["s", "h1", "h2"])
        data = tag()
        send_request(lab, t, "h2", data)
        if not thesis:
            st = d.wait(lambda st: st["stats"]["drop_bad_if"] >= 1)
            assert st["stats"]["drop_bad_if"] == 1 and st["stats"]["req_turned"] == 0
            time.sleep(QUIET)
            assert all(m == [] for m in rx.matching(data).values())
            return
        got = rx.wait(data, ["h1"])
        tpaddr = t.iface("r1", "h2").v4
        assert [r["opts"] for r in got["h1"]] == [option(REQ, S, G, HIGH_IFINDEX, tpaddr).hex()]
        assert got["s"] == [] and got["h2"] == []
        data = tag() + b"repair"
        send_raw(lab, t, "h1", [lmspkt.dmcast(t.addr("h1"), tpaddr, HIGH_IFINDEX, S, G, S, PORT, data)])
        got = rx.wait(data, ["h2"])
        assert [(r["data"], r["src"]) for r in got["h2"]] == [(data.hex(), S)]
        assert got["s"] == [] and got["h1"] == []
        st = d.wait(lambda st: st["stats"]["dmcast"] >= 1)["stats"]
        assert (st["req_turned"], st["dmcast"], st["drop_bad_if"]) == (1, 1, 0)


def test_loss_program_drops_the_chosen_fraction(build):
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        lab.smcroute(t, S, G)
        obj = build / "bpf" / "loss.bpf.o"
        all_lost = lab.add_loss(t.ns["h1"], t.uplinks["h1"].b.ifname, 1.0, obj)
        half = lab.add_loss(t.ns["h2"], t.uplinks["h2"].b.ifname, 0.5, obj)
        rx = Receivers(lab, t, ["h1", "h2"])
        payloads = [tag() for _ in range(200)]
        lab.run(t.ns["s"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
            {"ifaddr": S, "group": G, "port": PORT, "data": [p.hex() for p in payloads]})])
        time.sleep(1)
        got = rx.counts()
        assert got["h1"] == 0 and all_lost.counts()[1] >= 200
        seen, dropped = half.counts()
        assert 50 <= got["h2"] <= 150 and seen >= 200 and dropped >= 200 - got["h2"]


def test_pimd_routes_lms_forwards(build):
    """The same tree routed by pimd (PIM-SM, r1 the rendezvous point) instead
    of static routes: once hosts have joined and S sends, lmsd picks the
    (S,G) routes up from the kernel, and scenarios 1 and 3 hold."""
    with Lab() as lab:
        t = lab.tree(TREE)
        S = t.addr("s")
        lab.pimd(t, "r1")
        rx = Receivers(lab, t, ["s", *t.hosts])
        keep = threading.Event()

        def source():  # PIM builds (S,G) state from data: keep some flowing
            while not keep.wait(0.5):
                lab.run(t.ns["s"], [sys.executable, "-c", lmspkt.SENDER, json.dumps(
                    {"ifaddr": S, "group": G, "port": PORT, "data": [b"keepalive".hex()]})], check=False)
        th = threading.Thread(target=source, daemon=True)
        th.start()
        try:
            lmsd = start_lmsd(lab, t, build / "tools" / "lmsd", timeout=90)
            data = tag() + b"request under pimd"
            send_request(lab, t, "h2", data)
            got = rx.wait(data, ["h1"])
            want = option(REQ, S, G, ifindex(lab, t, "r2", "h2"), t.iface("r2", "h2").v4)
            assert [(r["data"], r["opts"]) for r in got["h1"]] == [(data.hex(), want.hex())]
            assert all(got[n] == [] for n in ("s", "h3", "h4"))
            data = tag() + b"dmcast under pimd"
            send_raw(lab, t, "h1", [lmspkt.dmcast(t.addr("h1"), t.iface("r1", "r3").v4,
                                                  ifindex(lab, t, "r1", "r3"), S, G, S, PORT, data)])
            got = rx.wait(data, ["h3", "h4"])
            assert all(len(got[h]) == 1 and got[h][0]["src"] == S for h in ("h3", "h4"))
            assert all(got[n] == [] for n in ("s", "h1", "h2"))
            # pimd's register vif is a vif, not an interface LMS runs on
            names = [i["name"] for i in lmsd["r1"].state()["interfaces"]]
            assert "pimreg" not in names and len(names) == 3
        finally:
            keep.set()
            th.join()


def test_l1_bench_quick(build, tmp_path):
    """bench/lms.py --quick: every point measured, every request turned and
    every dmcast decapsulated by LMS-FWD, none dropped.  No assertion on speed
    (the benchmark's business, bench/results/lms/)."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "lms.py"
    p = subprocess.run([sys.executable, str(bench), "--quick", "--build", str(build), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    assert all(r["lost_reps"] == 0 and r["median_ns"] > 0 for r in res["rows"]), res["rows"]
    per = res["reps"] * res["packets"]
    assert res["lms_counts"] == {"req_turned": 3 * per, "dmcast": 4 * per} and res["drops"] == {}
    assert (tmp_path / "l1_cost.png").stat().st_size > 0
