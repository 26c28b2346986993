"""groupcast relay trees: --join (multicast input), --upstream (a relay that
subscribes to relays), the loop rule, failover, and what a spoofed JOIN can
and cannot do.

Lab: a router namespace `hub` linked to the producer p, the relays a, b, c,
d, e and the receiver r (10.R.i.0/24 and fd00:R:i::/64 per link, every node
routed through hub); p and a also share a direct link for multicast.  Every
datagram stays inside these namespaces.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import relaytool

HERE = Path(__file__).resolve().parent
TOOL = HERE / "relaytool.py"


class Tree:
    def __init__(self, lab, build):
        self.lab, self.bin = lab, str(build / "tools" / "groupcast")
        self.hub = lab.add_ns("hub")
        lab.set_sysctl("net.ipv4.ip_forward", 1, ns=self.hub)
        lab.set_sysctl("net.ipv6.conf.all.forwarding", 1, ns=self.hub)
        self.node, self.hub_end = {}, {}
        for name in ("p", "a", "b", "c", "d", "e", "r"):
            ns = lab.add_ns(name)
            link = lab.add_link(self.hub, ns)
            self.node[name], self.hub_end[name] = link.b, link.a
            lab.ip(ns, "route", "add", "default", "via", link.a.v4)
            lab.ip(ns, "-6", "route", "add", "default", "via", link.a.v6)
        direct = lab.add_link(self.node["p"].ns, self.node["a"].ns)
        self.mp, self.ma = direct.a, direct.b       # p's and a's ends of the direct link
        lab.ip(self.mp.ns, "route", "add", "224.0.0.0/4", "dev", self.mp.ifname)
        self.n = 0
        self.logs = []
        self.procs = []    # every process a test started: stopped after it, pass or fail

    def ns(self, name):
        return self.node[name].ns

    def v4(self, name):
        return self.node[name].v4

    def v6(self, name):
        return self.node[name].v6

    def relay(self, name, args, wait=True):
        """groupcast relay in namespace name; returns (proc, stats socket, log path)."""
        self.n += 1
        sock = f"/tmp/{self.lab.prefix}-tree{self.n}.sock"
        log = f"/tmp/{self.lab.prefix}-tree{self.n}.log"
        self.logs.append(log)
        argv = [self.bin, "relay", "--stats-socket", sock, "--status", "0", "--json", *map(str, args)]
        with open(log, "w") as f:
            proc = self.lab.popen(self.ns(name), argv, stdout=subprocess.PIPE, stderr=f, text=True)
        self.procs.append(proc)
        if wait:
            deadline = time.monotonic() + 10
            while not (os.path.exists(sock) and self.query(sock, check=False)):
                assert proc.poll() is None, f"relay exited {proc.returncode}: {Path(log).read_text()}"
                assert time.monotonic() < deadline, "relay did not come up"
                time.sleep(0.05)
        return proc, sock, log

    def query(self, sock, check=True):
        p = subprocess.run([self.bin, "relay", "--query", sock], capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            assert not check, p.stderr
            return None
        return json.loads(p.stdout)

    def wait_for(self, sock, pred, timeout=5.0, what="condition"):
        deadline = time.monotonic() + timeout
        while True:
            st = self.query(sock, check=False)
            if st and pred(st):
                return st
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {st}"
            time.sleep(0.02)

    @staticmethod
    def stop(proc):
        """SIGTERM; the final JSON counters."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        return json.loads(out) if out.strip() else None

    def rx(self, name, ports, idle="1", timeout="30", family=4):
        ready = f"/tmp/{self.lab.prefix}-rx{self.n}-{name}.ready"
        self.n += 1
        addr = self.v4(name) if family == 4 else self.v6(name)
        return relaytool.start_rx(self.lab, self.ns(name), addr, ports, idle, timeout, ready)

    @staticmethod
    def collect(p):
        out, _ = p.communicate(timeout=90)
        return {int(k): v for k, v in json.loads(out).items()}

    def tx(self, to, count, rate=200, size=200, ns=None, extra=(), wait=True):
        argv = [sys.executable, TOOL, "tx", "--to", to, "--count", count, "--rate", rate, "--size", size,
                *map(str, extra)]
        if not wait:
            return self.lab.popen(ns or self.ns("p"), argv, stdout=subprocess.PIPE, text=True)
        out = self.lab.run(ns or self.ns("p"), argv, capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)

    def join(self, name, to, port, opts=""):
        out = self.lab.run(self.ns(name), [sys.executable, TOOL, "join", "--to", to, "--ports", port,
                                           "--opts", opts], capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout)[str(port)]

    def ctl(self, name, to, msg, pad=False, wait=1.0):
        out = self.lab.run(self.ns(name), [sys.executable, TOOL, "ctl", "--to", to, "--msg", msg, "--wait", wait,
                                           *(["--pad"] if pad else [])], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()


@pytest.fixture(scope="module")
def tree_lab(build):
    from netlab import Lab
    with Lab() as lab:
        yield Tree(lab, build)


@pytest.fixture
def tree(tree_lab):
    """The lab; whatever the test left running is stopped afterwards (its
    ports are the next test's), and the blackhole routes are removed."""
    yield tree_lab
    for proc in tree_lab.procs:
        if proc.poll() is None:
            proc.kill()
        try:
            proc.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError):
            pass
    tree_lab.procs.clear()
    for name in ("b", "c"):
        tree_lab.lab.run(tree_lab.ns(name), ["ip", "-6", "route", "flush", "type", "blackhole"], check=False,
                         capture_output=True)
    for name in tree_lab.hub_end:
        tree_lab.lab.ip(tree_lab.hub, "link", "set", tree_lab.hub_end[name].ifname, "up")


def payload_index(h):
    """relaytool tx --rtp payload: 'P' + 7-digit index after the 12-byte header."""
    return int(bytes.fromhex(h)[13:20])


def rtp_seq(h):
    return int(h[4:8], 16)


# ---- --join ---------------------------------------------------------------------------

def test_join_multicast_input_both_modes_any_and_source_specific(tree):
    """The relay takes its input from a group: any-source and source-specific,
    IPv4 and IPv6, replicate mode and --rtp; a source-specific join of
    another source gets nothing; --producer filters the multicast sender."""
    t = tree
    ifa = t.ma.ifname
    # replicate mode, IPv4 any-source
    proc, sock, _ = t.relay("a", ["-p", 4000, "--join", f"239.7.7.1@{ifa}", f"{t.v4('r')}/6000"])
    rx = t.rx("r", [6000])
    t.tx("239.7.7.1:4000", 30, ns=t.mp.ns)
    got = t.collect(rx)[6000]
    st = t.stop(proc)
    assert len(got) == 30 and st["in"] == 30 and st["out"] == 30

    # replicate mode, IPv4 source-specific: the right source, then another one
    proc, sock, _ = t.relay("a", ["-p", 4000, "--join", f"232.7.7.2,{t.mp.v4}@{ifa}", f"{t.v4('r')}/6000"])
    rx = t.rx("r", [6000])
    t.tx("232.7.7.2:4000", 20, ns=t.mp.ns)
    assert len(t.collect(rx)[6000]) == 20
    assert t.stop(proc)["in"] == 20
    proc, sock, _ = t.relay("a", ["-p", 4000, "--join", f"232.7.7.2,10.{t.lab.octet}.99.9@{ifa}",
                                  f"{t.v4('r')}/6000"])
    t.tx("232.7.7.2:4000", 20, ns=t.mp.ns)
    time.sleep(0.3)
    assert t.stop(proc)["in"] == 0

    # --rtp, IPv6 source-specific, the subscriber joins through the hub
    proc, sock, _ = t.relay("a", ["--rtp", "-p", 4000, "--producer", f"[{t.mp.v6}]",
                                  "--join", f"ff3e::7:3,{t.mp.v6}@{ifa}"])
    rx = t.rx("r", [6002], family=6)
    j = t.join("r", f"[{t.v6('a')}]:4002", 6002)
    assert j["reply"].startswith("OK JOIN"), j
    t.tx("[ff3e::7:3]:4000", 25, ns=t.mp.ns, extra=["--rtp"])
    got = t.collect(rx)[6002]
    st = t.stop(proc)
    assert len(got) == 25 and st["in"] == 25 and st["out"] == 25
    assert [payload_index(h) for _, _, h in got] == list(range(25))

    # --rtp, IPv4 any-source with a --producer that is not the sender: all refused
    proc, sock, _ = t.relay("a", ["--rtp", "-p", 4000, "--producer", t.v4("e"), "--join", f"239.7.7.4@{ifa}"])
    rx = t.rx("r", [6004], timeout="2.5")     # nothing comes: the idle timer never starts
    assert t.join("r", f"{t.v4('a')}:4002", 6004)["reply"].startswith("OK JOIN")
    t.tx("239.7.7.4:4000", 20, ns=t.mp.ns, extra=["--rtp"])
    got = t.collect(rx)[6004]
    st = t.stop(proc)
    assert got == [] and st["in"] == 20 and st["rtp_rejected"] == 20 and st["out"] == 0


def test_join_bad_arguments(tree):
    t = tree
    for arg, what in (("10.1.2.3", "not a multicast group"), ("239.1.1.1,fd00::1", "family"),
                      ("239.1.1.1@nosuchif0", "no interface"), ("group", "not a numeric")):
        p = t.lab.run(t.ns("a"), [t.bin, "relay", "--join", arg, "10.0.0.1"], check=False,
                      capture_output=True, text=True)
        assert p.returncode == 2 and "--join" in p.stderr and what in p.stderr, p.stderr
    p = t.lab.run(t.ns("a"), [t.bin, "relay", "--upstream", "1.2.3.4:0", "--rtp"], check=False,
                  capture_output=True, text=True)
    assert p.returncode == 2 and "--upstream" in p.stderr, p.stderr
    p = t.lab.run(t.ns("a"), [t.bin, "relay", "--upstream", "1.2.3.4:5", "10.0.0.1"], check=False,
                  capture_output=True, text=True)
    assert p.returncode == 2 and "need --rtp" in p.stderr, p.stderr


# ---- --upstream -------------------------------------------------------------------------

def test_upstream_subscribes_and_resubscribes_after_either_side_restarts(tree):
    """p -> a -> b -> receiver r.  b subscribes to a by itself; a restart of a
    (new cookie key, empty table) and a restart of b are both healed, each
    with one log line per state change."""
    t = tree
    a_args = ["--rtp", "-p", 5000, "--producer", t.v4("p")]
    a, a_sock, _ = t.relay("a", a_args)
    b, b_sock, b_log = t.relay("b", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('a')}:5002"])
    t.wait_for(b_sock, lambda s: s["upstream"] == f"{t.v4('a')}:5002", what="b subscribed to a")
    rx = t.rx("r", [6100], idle="4")
    assert t.join("r", f"{t.v4('b')}:5002", 6100)["reply"].startswith("OK JOIN")
    t.tx(f"{t.v4('a')}:5000", 40, extra=["--rtp"])
    # a restarts: b's keepalives fail, then b subscribes again
    t.stop(a)
    a, a_sock, _ = t.relay("a", a_args)
    t.wait_for(a_sock, lambda s: s["subscriber_count"] == 1, timeout=6, what="b back on a")
    t.tx(f"{t.v4('a')}:5000", 40, extra=["--rtp", "--seq", 100])
    # b restarts: it subscribes again at once (the same address and port)
    t.stop(b)
    b, b_sock, b_log2 = t.relay("b", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('a')}:5002"])
    t.wait_for(b_sock, lambda s: s["upstream"] is not None, what="b subscribed again")
    got = t.collect(rx)[6100]
    fa, fb = t.stop(a), t.stop(b)
    assert len(got) == 80, len(got)
    assert fa["subscriber_count"] == 1 or fa["ctl_leave"] == 1    # b's LEAVE at its exit
    log = Path(b_log).read_text()
    # a restart seen as down (ICMP, silence) or as ERR to a keepalive (the
    # new a does not know b's cookie): either way b subscribes again
    assert re.search(r"event=(upstream_down|upstream_restarted) upstream=", log), log
    assert len(re.findall(r"event=upstream_subscribed upstream=", log)) >= 2, log
    assert "event=upstream_subscribed" in Path(b_log2).read_text()


def _blackhole(t, name, addr, on):
    t.lab.ip(t.ns(name), "-6", "route", "add" if on else "del", "blackhole", f"{addr}/128")


def test_loop_two_relays_refused(tree):
    """a -> b (a subscribes to b over IPv4), then b -> a (over IPv6, held
    back by a blackhole route until a is subscribed): a refuses b's JOIN with
    ERR loop and counts it; b logs it and stays without an upstream."""
    t = tree
    _blackhole(t, "b", t.v6("a"), True)
    b, b_sock, b_log = t.relay("b", ["--rtp", "-p", 5000, "--upstream", f"[{t.v6('a')}]:5002"])
    a, a_sock, _ = t.relay("a", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('b')}:5002"])
    t.wait_for(a_sock, lambda s: s["upstream"] is not None, what="a on b")
    _blackhole(t, "b", t.v6("a"), False)
    st = t.wait_for(a_sock, lambda s: s["ctl_loop"] >= 1, timeout=5, what="a refusing b")
    time.sleep(0.5)
    sb = t.query(b_sock)
    fa, fb = t.stop(a), t.stop(b)
    assert st["upstream"] is not None and sb["upstream"] is None
    assert fa["subscriber_count"] == 0 and fb["subscriber_count"] in (0, 1)
    log = Path(b_log).read_text()
    assert "event=upstream_refused" in log and "ERR loop: relay=" in log and "is upstream of this relay" in log, log


def test_loop_three_relays_refused_at_the_closing_subscription(tree):
    """a -> b -> c, then c -> a: a's path is a.b.c, so c's JOIN is refused."""
    t = tree
    _blackhole(t, "c", t.v6("a"), True)
    c, c_sock, c_log = t.relay("c", ["--rtp", "-p", 5000, "--upstream", f"[{t.v6('a')}]:5002"])
    b, b_sock, _ = t.relay("b", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('c')}:5002"])
    a, a_sock, _ = t.relay("a", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('b')}:5002"])
    sa = t.wait_for(a_sock, lambda s: len(s["path"]) == 3, what="a's path a.b.c")
    sb, sc = t.query(b_sock), t.query(c_sock)
    assert sa["path"] == [sa["relay_id"], sb["relay_id"], sc["relay_id"]]
    _blackhole(t, "c", t.v6("a"), False)
    t.wait_for(a_sock, lambda s: s["ctl_loop"] >= 1, timeout=5, what="a refusing c")
    time.sleep(0.3)
    assert t.query(c_sock)["upstream"] is None
    sa, sb = t.query(a_sock), t.query(b_sock)
    t.stop(a), t.stop(b), t.stop(c)
    assert sa["subscriber_count"] == 0 and sb["subscriber_count"] == 1 and sa["upstream"] is not None
    assert "ERR loop" in Path(c_log).read_text()


def test_subscription_storm_stays_bounded(tree):
    """a, b and c each name the other two as upstreams and start together:
    whatever subscriptions survive form no cycle, each table holds at most
    two relays, and the control traffic stays at a bounded rate."""
    t = tree
    names = ("a", "b", "c")
    procs = {}
    for n in names:
        ups = [f"{t.v4(o)}:5002" for o in names if o != n]
        procs[n] = t.relay(n, ["--rtp", "-p", 5000, "--upstream", ups[0], "--upstream", ups[1]], wait=False)
    time.sleep(2.0)
    first = {n: t.query(procs[n][1]) for n in names}
    time.sleep(2.0)
    last = {n: t.query(procs[n][1]) for n in names}
    for n in names:
        t.stop(procs[n][0])
    rates = {n: (last[n]["ctl_in"] - first[n]["ctl_in"]) / 2.0 for n in names}
    print(f"storm: control requests per second per relay {rates}")
    for n in names:
        assert last[n]["subscriber_count"] <= 2
        assert len(set(last[n]["path"])) == len(last[n]["path"]), last[n]["path"]   # no cycle
        # two relays below at most: keepalives every 125 ms, and handshakes
        # every 200 ms to 2 s with backoff: 16 + 20 a second at the very most
        assert rates[n] < 40, rates
    up_of = {last[n]["relay_id"]: last[n]["path"][1] if len(last[n]["path"]) > 1 else None for n in names}
    for start in up_of:      # following the upstreams never comes back
        seen, cur = set(), start
        while cur is not None:
            assert cur not in seen, "cycle"
            seen.add(cur)
            cur = up_of.get(cur)


def _edge(t, first, second, on, port):
    """Relay d with --upstream first --upstream second --upstream-revert, once
    its stream comes from `on`, and a receiver in r subscribed to it at port."""
    d, d_sock, d_log = t.relay("d", ["--rtp", "-p", 5000, "--upstream", first, "--upstream", second,
                                     "--upstream-revert"])
    t.wait_for(d_sock, lambda s: s["upstream"] == on, what=f"d on {on}")
    rx = t.rx("r", [port], idle="1.5")
    assert t.join("r", f"{t.v4('d')}:5002", port)["reply"].startswith("OK JOIN")
    return d, d_sock, d_log, rx


def _failover(t, cut):
    """o (origin) -> a and b -> d (--upstream a, then b, --upstream-revert) ->
    receiver r; the producer sends RTP at 200/s.  a is killed (cut=False) or
    its link is cut (cut=True) and comes back.  Returns the figures."""
    o, o_sock, _ = t.relay("e", ["--rtp", "-p", 5000, "--producer", t.v4("p")])
    up = ["--rtp", "-p", 5000, "--upstream", f"{t.v4('e')}:5002"]
    a, a_sock, _ = t.relay("a", up)
    b, b_sock, _ = t.relay("b", up)
    for s in (a_sock, b_sock):
        t.wait_for(s, lambda st: st["upstream"] is not None, what="a and b on o")
    ua, ub = f"{t.v4('a')}:5002", f"{t.v4('b')}:5002"
    d, d_sock, d_log, rx = _edge(t, ua, ub, ua, 6200)
    n = 1400
    tx = t.tx(f"{t.v4('e')}:5000", n, rate=200, size=200, extra=["--rtp"], wait=False)
    time.sleep(1.5)
    t0 = time.monotonic()
    if cut:
        t.lab.ip(t.hub, "link", "set", t.hub_end["a"].ifname, "down")
    else:
        a.kill()
        a.wait()
    t.wait_for(d_sock, lambda s: s["upstream"] == ub, timeout=3, what="d on b")
    switch_s = time.monotonic() - t0
    time.sleep(1.0)
    if cut:
        t.lab.ip(t.hub, "link", "set", t.hub_end["a"].ifname, "up")
    else:
        a, a_sock, _ = t.relay("a", up)
    t1 = time.monotonic()
    t.wait_for(d_sock, lambda s: s["upstream"] == ua, timeout=6, what="d back on a")
    revert_s = time.monotonic() - t1
    tx.communicate(timeout=30)
    got = t.collect(rx)[6200]
    fd = t.stop(d)
    for p in (a, b, o):
        t.stop(p)
    idx = [payload_index(h) for _, _, h in got]
    return dict(switch_s=switch_s, revert_s=revert_s, got=len(got), unique=len(set(idx)), sent=n,
                gap=fd["up_gap"], dups=fd["rtp_duplicates"], switches=fd["up_switches"], log=Path(d_log).read_text(),
                in_order=idx == sorted(idx), seqs=[rtp_seq(h) for _, _, h in got])


@pytest.mark.parametrize("cut", [False, True], ids=["killed", "link-cut"])
def test_failover_within_a_second_and_back_without_duplicates(tree, cut):
    f = _failover(tree, cut)
    print(f"failover ({'link cut' if cut else 'killed'}): switched in {f['switch_s'] * 1000:.0f} ms, "
          f"back in {f['revert_s'] * 1000:.0f} ms; {f['gap']} packets lost across switches, "
          f"{f['dups']} duplicates dropped, {f['got']} of {f['sent']} delivered")
    assert f["switch_s"] < 1.0, f["switch_s"]
    assert f["unique"] == f["got"], "a packet delivered twice"
    assert f["in_order"]
    assert f["switches"] == 2
    # what was not delivered is exactly what the relay reported as the gap
    assert f["sent"] - f["got"] == f["gap"], (f["sent"], f["got"], f["gap"])
    assert f["gap"] < 200 * 1.0      # under a second of packets at 200/s
    assert re.search(r"event=upstream_gap packets=\d+ ", f["log"]), f["log"]
    seqs = f["seqs"]   # the receiver's own numbering shows the gap, never a repeat
    steps = [(seqs[i + 1] - seqs[i]) % 65536 for i in range(len(seqs) - 1)]
    assert all(1 <= s < 300 for s in steps)


def test_rtp_never_relayed_twice_when_the_new_upstream_lags(tree):
    """d reverts from b to a stand-in upstream (relaytool lagger in c) that
    first sends d the last 20 datagrams again: d drops them as duplicates
    (SSRC and sequence relayed already), the receiver gets each one once."""
    t = tree
    o, o_sock, _ = t.relay("e", ["--rtp", "-p", 5000, "--producer", t.v4("p")])
    b, b_sock, _ = t.relay("b", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('e')}:5002"])
    lag = t.lab.popen(t.ns("c"), [sys.executable, TOOL, "lagger", "--origin", f"{t.v4('e')}:5002", "--port", 5000,
                                  "--replay", 20, "--silent", 2.0, "--duration", 8],
                      stdout=subprocess.PIPE, text=True)
    t.procs.append(lag)
    t.wait_for(o_sock, lambda s: s["subscriber_count"] == 2, what="b and the lagger on o")
    uc, ub = f"{t.v4('c')}:5002", f"{t.v4('b')}:5002"
    d, d_sock, d_log, rx = _edge(t, uc, ub, ub, 6300)     # on b while c is silent
    n = 800
    t.tx(f"{t.v4('e')}:5000", n, rate=200, size=200, extra=["--rtp"])
    got = t.collect(rx)[6300]
    fd = t.stop(d)
    counts = json.loads(lag.communicate(timeout=30)[0])
    for p in (b, o):
        t.stop(p)
    idx = [payload_index(h) for _, _, h in got]
    print(f"lagging upstream: {fd['rtp_duplicates']} duplicates dropped, gap {fd['up_gap']}, {len(got)} of {n}")
    assert counts["joins"] == 1 and counts["replayed"] == 20
    assert len(set(idx)) == len(idx), "a datagram relayed twice"
    assert fd["up_switches"] == 1 and fd["rtp_duplicates"] >= 15, fd    # b, then back to c
    assert idx == sorted(idx) and n - len(got) == fd["up_gap"]


# ---- security ---------------------------------------------------------------------------

def test_spoofed_relay_join_starts_nothing_and_a_relay_gets_one_copy(tree):
    """A forged JOIN relay=... with a victim's source address gets the victim
    at most the cookie (never longer than the request): no subscriber, no
    stream, no subscription anywhere.  A real relay subscriber gets exactly
    one copy of each datagram, and its per-source limit holds for relays."""
    t = tree
    a, a_sock, _ = t.relay("a", ["--rtp", "-p", 5000, "--producer", t.v4("p"), "--max-per-source", 1])
    victim = t.v4("r")
    rx = t.rx("r", [7000], idle="2")
    msg = "JOIN 7000 relay=00000000deadbeef"
    t.lab.run(t.ns("c"), [sys.executable, TOOL, "spoof", "--src", f"{victim}:7000", "--to", f"{t.v4('a')}:5002",
                          "--msg", msg, "--pad"], capture_output=True, timeout=30)
    t.lab.run(t.ns("c"), [sys.executable, TOOL, "spoof", "--src", f"{victim}:7000", "--to", f"{t.v4('a')}:5002",
                          "--msg", msg + " cookie=0123456789abcdef"], capture_output=True, timeout=30)
    # a relay b below a: one subscription; a second relay identity from the
    # same address is refused by --max-per-source like any subscriber
    b, b_sock, _ = t.relay("b", ["--rtp", "-p", 5000, "--upstream", f"{t.v4('a')}:5002"])
    t.wait_for(b_sock, lambda s: s["upstream"] is not None, what="b on a")
    second = t.join("b", f"{t.v4('a')}:5002", 5100, opts="relay=00000000000000b2")
    assert "too many subscribers from this address" in second["reply"], second
    t.tx(f"{t.v4('a')}:5000", 50, extra=["--rtp"])
    time.sleep(0.3)
    got = t.collect(rx)[7000]
    fb, fa = t.stop(b), t.stop(a)
    assert all(len(bytes.fromhex(h)) <= 64 and bytes.fromhex(h).startswith((b"COOKIE", b"ERR"))
               for _, _, h in got), got
    assert fa["subscriber_count"] == 0 or fa["ctl_leave"] == 1
    assert fa["in"] == 50 and fa["out"] == 50        # one copy: to b only
    assert fb["in"] == 50 and fb["rtp_rejected"] == 0
    assert fa["ctl_per_source"] == 1 and fa["ctl_bad_cookie"] == 1


def test_relay_subscriber_gets_the_producers_own_numbering_across_a_restart(tree):
    """A relay subscriber gets the producer's header as it arrived, also after
    the producer restarts (new SSRC, new sequence): not the relay's continuous
    numbering, which depends on when that relay saw the restart.  Two
    upstreams fed by one origin then number alike, whatever each saw before,
    and the relay below dedupes across a switch on the producer's numbers."""
    t = tree
    a, a_sock, _ = t.relay("a", ["--rtp", "-p", 5000, "--producer", t.v4("p")])
    rx = t.rx("r", [6200, 6202], idle="1")
    plain = t.join("r", f"{t.v4('a')}:5002", 6202)
    relay = t.join("r", f"{t.v4('a')}:5002", 6200, opts="relay=00000000000000c7")
    assert plain["reply"].startswith("OK JOIN") and relay["reply"].startswith("OK JOIN"), (plain, relay)
    t.tx(f"{t.v4('a')}:5000", 20, extra=["--rtp", "--seq", 65500, "--restart-at", 10,
                                          "--ssrc2", "0x55667788", "--seq2", 100])
    got = t.collect(rx)
    t.stop(a)

    def hdr(h):
        b = bytes.fromhex(h)
        return int.from_bytes(b[2:4], "big"), int.from_bytes(b[8:12], "big")
    as_relay = [hdr(h) for _, _, h in got[6200]]
    sent = [((65500 + i) & 0xFFFF, 0x11223344) for i in range(10)] + [(100 + i, 0x55667788) for i in range(10)]
    assert as_relay == sent, as_relay
    # a plain subscriber keeps one SSRC and numbering that carries on
    plain_hdrs = [hdr(h) for _, _, h in got[6202]]
    assert len(plain_hdrs) == 20 and len({s for _, s in plain_hdrs}) == 1, plain_hdrs
    assert all((b[0] - a_[0]) & 0xFFFF == 1 for a_, b in zip(plain_hdrs, plain_hdrs[1:])), plain_hdrs
