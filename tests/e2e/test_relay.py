"""groupcast relay end to end: samplicator compatibility, broadcast mode, bad input.

Lab: the relay runs in namespace s; r1 and r2 are receiver/subscriber
namespaces (links 1 and 2); p is the producer (link 3).  Every datagram the
tests send stays inside these namespaces.  Receivers, producers and sniffers
are tests/e2e/relaytool.py.
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import relaytool

HERE = Path(__file__).resolve().parent
TOOL = HERE / "relaytool.py"
REPO = HERE.parents[1]
SAMPLICATOR_OPTS = ["-p", "-s", "-b", "-c", "-S", "-n", "-x", "-u", "-t", "-d", "-f", "-m", "-4", "-6", "-h"]


class Net:
    """The lab's addresses and helpers to run things in it."""

    def __init__(self, lab, build):
        self.lab, self.build = lab, build
        self.bin = str(build / "tools" / "groupcast")
        self.relay_ns = lab.topology.sender
        self.r1, self.r2 = lab.topology.receivers
        self.p_ns = lab.add_ns("p")
        link = lab.add_link(self.relay_ns, self.p_ns)
        self.relay_p = link.a          # relay's end of the producer link
        self.p = link.b                # the producer
        self.n = 0

    # -- processes -------------------------------------------------------------
    def relay(self, args, wait=True, ns=None):
        """Start the relay with args; returns (proc, stats socket path).  In
        broadcast mode the lab's producer is --producer unless args say."""
        self.n += 1
        sock = f"/tmp/{self.lab.prefix}-relay{self.n}.sock"
        args = [str(x) for x in args]
        if "--rtp" in args and "--producer" not in args and "--any-producer" not in args:
            args += ["--producer", self.p.v4]
        argv = [self.bin, "relay", "--stats-socket", sock, "--status", "0", "--json", *args]
        proc = self.lab.popen(ns or self.relay_ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if wait:
            deadline = time.monotonic() + 10
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"relay exited {proc.returncode}: {proc.stderr.read()}")
                if os.path.exists(sock) and self.query(sock, check=False):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError("relay did not come up")
                time.sleep(0.05)
        return proc, sock

    def query(self, sock, check=True):
        p = subprocess.run([self.bin, "relay", "--query", sock], capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            if check:
                raise AssertionError(f"--query failed: {p.stderr}")
            return None
        return json.loads(p.stdout)

    def stop(self, proc):
        """SIGTERM; returns (final JSON counters, stderr)."""
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, f"relay exit {proc.returncode}: {err}"
        return json.loads(out.strip().splitlines()[-1]), err

    def rx(self, node, ports, family=4, idle=1.5, timeout=40):
        ready = f"/tmp/{self.lab.prefix}-rx{self.n}-{node.ns}-{ports[0]}.ready"
        self.n += 1
        return relaytool.start_rx(self.lab, node.ns, node.v4 if family == 4 else node.v6, ports, idle, timeout,
                                  ready)

    @staticmethod
    def collect(p):
        out, _ = p.communicate(timeout=90)
        return {int(k): v for k, v in json.loads(out).items()}

    def tx(self, to, count, rate=1000, size=100, ns=None, extra=()):
        out = self.lab.run(ns or self.p_ns, [sys.executable, TOOL, "tx", "--to", to, "--count", count,
                                             "--rate", rate, "--size", size, *extra],
                           capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)

    def ctl(self, ns, to, msg, from_port=0, wait=1.0, pad=False):
        out = self.lab.run(ns, [sys.executable, TOOL, "ctl", "--to", to, "--msg", msg, "--from-port", from_port,
                                "--wait", wait, *(["--pad"] if pad else [])], capture_output=True, text=True,
                           timeout=30)
        return out.stdout.rstrip("\n")

    def join(self, ns, to, ports, opts="", bind=None, from_port=0, wait=1.0):
        """The handshake for each port; {port: {"cookie": hex, "reply": text}}."""
        out = self.lab.run(ns, [sys.executable, TOOL, "join", "--to", to, "--ports", ",".join(map(str, ports)),
                                "--opts", opts, "--wait", wait, "--from-port", from_port,
                                *(["--bind", bind] if bind else [])], capture_output=True, text=True, timeout=60)
        return {int(k): v for k, v in json.loads(out.stdout).items()}

    def spoof(self, ns, src, to, msg="", pad=False, hexdata=None):
        """One datagram from a forged source (raw socket in ns)."""
        self.lab.run(ns, [sys.executable, TOOL, "spoof", "--src", src, "--to", to, "--msg", msg,
                          *(["--pad"] if pad else []), *(["--hex", hexdata] if hexdata else [])],
                     capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def net(lab, build):
    lab.set_sysctl("net.core.netdev_max_backlog", 20000)
    return Net(lab, build)


def indexes(dgrams):
    """Datagram indexes of relaytool tx's numbered payloads, in arrival order."""
    return [int(bytes.fromhex(h)[1:8]) for _, _, h in dgrams]


# ---- the command line itself ------------------------------------------------------

def test_help_and_man_name_every_samplicator_option(build):
    out = subprocess.run([str(build / "tools" / "groupcast"), "relay", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    man = (REPO / "docs" / "man" / "man1" / "groupcast-relay.1").read_text()
    for opt in SAMPLICATOR_OPTS + ["--rtp", "--control", "--engine", "--stats-socket", "--query", "--producer",
                                   "--log-level", "--check",
                                   "--any-producer", "--allow-local-subscribers", "--max-per-source",
                                   "--control-rate", "--cookie-lifetime", "--user", "--metrics", "--join", "--upstream",
                                   "--upstream-timeout", "--upstream-revert"]:
        assert re.search(rf"(^|\s){re.escape(opt)}\b", out.stdout, re.M), f"--help lacks {opt}"
        assert opt.replace("-", r"\-") in man or opt in man, f"man page lacks {opt}"


@pytest.mark.parametrize("text,where,what", [
    ("10.0.0.0/8: 10.1.1.1/2055\n10.2.0.0/16 10.1.1.1/2055\n", ":2:", "missing ':'"),
    ("# collectors\n\n10.0.0.0/8: 10.1.1.1/2055/0\n", ":3:", "bad interval '0': expected"),
    ("10.0.0.0/40: 10.1.1.1\n", ":1:", "bad mask '40': expected"),
    ("10.0.0.0/8: 10.1.1.1/99999\n", ":1:", "out of range: expected 1..65535"),
])
def test_bad_config_names_file_line_and_nothing_starts(net, tmp_path, text, where, what):
    conf = tmp_path / "relay.conf"
    conf.write_text(text)
    p = net.lab.run(net.relay_ns, [net.bin, "relay", "-p", 2999, "-c", conf, "10.9.9.9/9"], check=False,
                    capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    assert f"{conf}{where}" in p.stderr and what in p.stderr, p.stderr
    # nothing was bound: the port is free
    free = net.lab.run(net.relay_ns, [sys.executable, "-c",
                                      "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(('', 2999))"],
                       check=False, capture_output=True)
    assert free.returncode == 0


def test_bad_arguments(net):
    for args, what in [(["10.1.1.1:2000"], "':' is not a port separator"),
                       (["--engine", "warp", "10.1.1.1"], "unknown engine 'warp'"),
                       (["--rtp", "-S"], "-S does not apply with --rtp"),
                       ([], "no receivers")]:
        p = net.lab.run(net.relay_ns, [net.bin, "relay", *args], check=False, capture_output=True, text=True)
        assert p.returncode == 2 and what in p.stderr, (args, p.stderr)


# ---- samplicator compatibility ---------------------------------------------------

def test_samplicator_command_line(net, tmp_path):
    """A samplicator command line, unchanged: listen address and port, buffer,
    PID file, receivers with port, interval, TTL, a port range, IPv6."""
    pid = tmp_path / "samplicate.pid"
    rx1 = net.rx(net.r1, [3000, 3001, 3002, 3010, 3011, 3012])
    rx6 = net.rx(net.r2, [3100], family=6)
    proc, sock = net.relay(["-p", 2055, "-s", net.relay_p.v4, "-b", 1048576, "-m", pid,
                            f"{net.r1.v4}/3000", f"{net.r1.v4}/3001/2", f"{net.r1.v4}/3002/3,5",
                            f"{net.r1.v4}/3010-3012", f"[{net.r2.v6}]/3100"])
    assert int(pid.read_text()) == net.query(sock)["pid"]
    net.tx(f"{net.relay_p.v4}:2055", 90, rate=2000, size=300)
    got1, got6 = net.collect(rx1), net.collect(rx6)
    final, _ = net.stop(proc)
    assert indexes(got1[3000]) == list(range(90))
    assert indexes(got1[3001]) == list(range(0, 90, 2))       # 1 in 2, starting with the first
    assert indexes(got1[3002]) == list(range(0, 90, 3))
    assert {ttl for _, ttl, _ in got1[3002]} == {5} and {ttl for _, ttl, _ in got1[3000]} == {64}
    for port in (3010, 3011, 3012):
        assert indexes(got1[port]) == list(range(90))
    assert indexes(got6[3100]) == list(range(90))
    sent = bytes.fromhex(got1[3000][7][2])
    assert len(sent) == 300 and all(bytes.fromhex(h) == sent for _, _, h in
                                    [got1[p][7] for p in (3010, 3011, 3012)])
    assert final["in"] == 90 and final["errors"] == 0 and final["skipped"] == 45 + 60
    assert not pid.exists()   # removed at clean shutdown


def test_samplicator_config_file(net, tmp_path):
    """Config lines route by source: two producer addresses, three lines, and
    command-line receivers that get everything."""
    octet = net.lab.octet
    second = f"10.{octet}.3.3"
    net.lab.ip(net.p_ns, "addr", "add", f"{second}/24", "dev", net.p.ifname)
    conf = tmp_path / "samplicator.conf"
    conf.write_text(f"# netflow routing\n"
                    f"{net.p.v4}/255.255.255.255: {net.r1.v4}/4000 {net.r1.v4}/4001/2\n"
                    f"{second}/32: {net.r2.v4}/4000   # the second exporter\n"
                    f"10.{octet}.3.0/24: {net.r2.v4}/4001\n"
                    f"192.0.2.0/24: {net.r2.v4}/4002\n")
    rx1, rx2 = net.rx(net.r1, [4000, 4001, 4009]), net.rx(net.r2, [4000, 4001, 4002])
    proc, sock = net.relay(["-p", 2100, "-c", conf, f"{net.r1.v4}/4009"])
    net.tx(f"{net.relay_p.v4}:2100", 40, rate=2000, extra=["--src", net.p.v4])
    net.tx(f"{net.relay_p.v4}:2100", 30, rate=2000, extra=["--src", second])
    g1, g2 = net.collect(rx1), net.collect(rx2)
    final, _ = net.stop(proc)
    assert indexes(g1[4000]) == list(range(40))
    assert indexes(g1[4001]) == list(range(0, 40, 2))
    assert indexes(g2[4000]) == list(range(30))
    assert sorted(indexes(g2[4001])) == sorted(list(range(40)) + list(range(30)))   # /24 matches both
    assert g2[4002] == []
    assert len(g1[4009]) == 70            # command-line receivers: every datagram
    where = {s["where"]: s["matched"] for s in final["sources"]}
    assert where[f"{conf}:2"] == 40 and where[f"{conf}:3"] == 30 and where[f"{conf}:5"] == 0
    net.lab.ip(net.p_ns, "addr", "del", f"{second}/24", "dev", net.p.ifname)


def test_spoof_keeps_the_original_source(net):
    """-S: receivers see the producer's address and port (raw socket)."""
    rx = net.rx(net.r1, [4100, 4101])
    proc, _ = net.relay(["-p", 2200, "-S", f"{net.r1.v4}/4100", f"{net.r1.v4}/4101/5"])
    net.tx(f"{net.relay_p.v4}:2200", 20, rate=1000, extra=["--src", net.p.v4, "--sport", 40001])
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert {src for src, _, _ in got[4100]} == {f"{net.p.v4}:40001"}
    assert indexes(got[4100]) == list(range(20)) and indexes(got[4101]) == [0, 5, 10, 15]
    assert final["raw_out"] == 24 and final["errors"] == 0


def test_spoof_ipv6(net):
    """-S over IPv6: the raw socket's datagrams carry the producer's address
    and port and a valid UDP checksum (the receiving kernel drops bad ones)."""
    rx = net.rx(net.r1, [4110], family=6)
    proc, _ = net.relay(["-p", 2201, "-6", "-S", f"[{net.r1.v6}]/4110"])
    net.tx(f"{net.relay_p.v6}:2201", 20, rate=1000, size=333, extra=["--src", net.p.v6, "--sport", 40002])
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert {src for src, _, _ in got[4110]} == {f"{net.p.v6}:40002"}
    assert indexes(got[4110]) == list(range(20))
    assert all(len(h) == 2 * 333 for _, _, h in got[4110])
    assert final["raw_out"] == 20 and final["errors"] == 0


def test_oversize_datagrams_are_counted_and_dropped(net):
    rx = net.rx(net.r1, [4200])
    proc, _ = net.relay(["-p", 2300, "-u", 500, f"{net.r1.v4}/4200"])
    net.tx(f"{net.relay_p.v4}:2300", 10, size=500)
    net.tx(f"{net.relay_p.v4}:2300", 10, size=501)
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert len(got[4200]) == 10 and all(len(h) == 1000 for _, _, h in got[4200])
    assert final["oversize"] == 10 and final["in"] == 20


def test_sighup_reload_loses_nothing(net, tmp_path):
    """A stream of 3000 datagrams; the config is rewritten and reloaded 6 times
    during it, once with a bad line.  The receiver in every version of the
    config gets every datagram; the one added later gets a gapless suffix."""
    conf = tmp_path / "reload.conf"
    base = f"0.0.0.0/0: {net.r1.v4}/4300\n"
    conf.write_text(base)
    rx = net.rx(net.r1, [4300, 4301], idle=2)
    proc, sock = net.relay(["-p", 2400, "-c", conf])
    tx = net.lab.popen(net.p_ns, [sys.executable, TOOL, "tx", "--to", f"{net.relay_p.v4}:2400", "--count", 3000,
                                  "--rate", 1500, "--size", 200], stdout=subprocess.PIPE)
    time.sleep(0.4)
    for k in range(6):
        if k == 3:
            conf.write_text(base + "this is not a config line\n")
        else:
            conf.write_text(base + (f"0.0.0.0/0: {net.r1.v4}/4301\n" if k >= 1 else ""))
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.25)
    tx.wait(timeout=60)
    got = net.collect(rx)
    final, err = net.stop(proc)
    assert indexes(got[4300]) == list(range(3000)), "datagrams lost or reordered across reloads"
    later = indexes(got[4301])
    assert later and later == list(range(later[0], 3000))
    assert final["reloads"] == 5 and final["reload_failures"] == 1
    assert f"{conf}:2: missing ':'" in err and "the configuration in force stays" in err


@pytest.mark.parametrize("engine", ["loop", "auto"])
def test_unreachable_receivers_do_not_hurt_the_others(net, engine):
    """samplicator issue #82: two receivers that cannot be reached (one with no
    route, one on the link that never answers ARP) beside 40 good ones, 3000
    datagrams at 3000/s.  The good ones get everything; the bad ones count
    errors or vanish in the neighbour queue, never blocking a send."""
    lost_arp = f"10.{net.lab.octet}.1.99"
    ports = list(range(4400, 4440))
    rx = net.rx(net.r1, ports, idle=2)
    proc, sock = net.relay(["-p", 2500, "--engine", engine, f"{net.lab.unrouted_v4()}/9",
                            f"{lost_arp}/9", f"{net.r1.v4}/4400+40"])
    t = net.tx(f"{net.relay_p.v4}:2500", 3000, rate=3000, size=1000)
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert t["seconds"] < 5
    for p in ports:
        assert len(got[p]) == 3000, f"port {p}: {len(got[p])} of 3000"
    assert final["ingest_drops"] == 0
    rcv = {r["addr"]: r for r in final["sources"][0]["receivers"]}
    assert rcv[f"{net.lab.unrouted_v4()}:9"]["errors"] == 3000
    assert rcv[f"{net.lab.unrouted_v4()}:9"]["last_error"] == "ENETUNREACH"


@pytest.mark.skipif(not shutil.which("strace"), reason="strace not installed (scripts/install-deps.sh installs it)")
def test_auto_keeps_the_kernel_engine_after_the_capability_drop(net, tmp_path):
    """S1's open finding (bench/results/samplicator): under --engine auto the
    relay took the kernel engine at setup, dropped CAP_SYS_ADMIN, and at the
    policy re-check a second later could no longer tell which cgroup BPF
    programs apply (no cgroup2 mount in sight here), so AUTO declined and
    every later send went by sendmmsg while engine_resolved still said
    kernel.  With no egress hook in this namespace, AUTO must stay on the
    kernel engine for good: no sendmmsg/sendmsg/sendto from the relay, no
    datagram left to a user engine, and the namespace's policy looked at
    once a second at most (GC_KPOLICY_NETNS_NS; one xfrm dump per look).
    Nothing is timed."""
    ports = list(range(4600, 4620))
    rx = net.rx(net.r1, ports, idle=2.5, timeout=60)
    proc, sock = net.relay(["-p", 2520, "--engine", "auto", f"{net.r1.v4}/4600+20"])
    pid = net.query(sock)["pid"]
    net.tx(f"{net.relay_p.v4}:2520", 5, rate=100, size=500)  # neighbours resolved before counting
    q0 = net.query(sock)
    trace = tmp_path / "strace.txt"
    st = subprocess.Popen(["strace", "-f", "-qq", "-o", str(trace), "-e", "trace=socket,sendmmsg,sendmsg,sendto",
                           "-p", str(pid)], stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # strace attached
    t0 = time.monotonic()
    net.tx(f"{net.relay_p.v4}:2520", 150, rate=60, size=500)  # 2.5 s: past the re-checks after the drop
    got = net.collect(rx)
    q1 = net.query(sock)
    elapsed = time.monotonic() - t0 + 0.5
    st.send_signal(signal.SIGINT)
    st.communicate(timeout=20)
    final, _ = net.stop(proc)
    for p in ports:
        assert len(got[p]) == 155, f"port {p}: {len(got[p])} of 155"
    assert q1["engine_resolved"] == "kernel" and final["engine_resolved"] == "kernel"
    assert q1["lib_datagrams"] - q0["lib_datagrams"] == 150 * 20
    assert q1["lib_user_fallback"] - q0["lib_user_fallback"] == 0
    lines = trace.read_text().splitlines()
    # the user engines: sendmmsg (mmsg) or a send with an inet destination (loop);
    # the stats socket's replies and the netlink dumps are neither
    user_sends = [ln for ln in lines if re.search(r"\bsendmmsg\(", ln) or
                  (re.search(r"\b(sendmsg|sendto)\(", ln) and "sin_port" in ln)]
    assert not user_sends, user_sends[:3]
    looks = [ln for ln in lines if "NETLINK_XFRM" in ln]
    assert 1 <= len(looks) <= int(elapsed) + 2, (len(looks), elapsed)


# ---- broadcast mode ---------------------------------------------------------------

def rtp_fields(h):
    b = bytes.fromhex(h)
    _, _, seq, ts, ssrc = struct.unpack("!BBHII", b[:12])
    return ssrc, seq, ts, b[12:]


def test_rtp_join_rewrite_leave_expire(net):
    """Two subscribers join; each gets its own SSRC, a continuous sequence
    (across 16-bit wrap and a producer restart) and a fixed timestamp offset,
    with the payload untouched.  LEAVE stops one; a silent one expires.
    Unknown control messages are counted and get no answer."""
    ctl = f"{net.relay_p.v4}:5002"
    proc, sock = net.relay(["--rtp", "-p", 5000, "--expire", 2])
    rx1, rx2 = net.rx(net.r1, [6000], idle=2.5), net.rx(net.r2, [6000], idle=2.5)
    # the subscribers reach the relay through their own links
    ctl1, ctl2 = f"10.{net.lab.octet}.1.1:5002", f"10.{net.lab.octet}.2.1:5002"
    j1 = net.join(net.r1.ns, ctl1, [6000])[6000]
    b = net.join(net.r2.ns, ctl2, [6000], opts="ssrc=0xcafe0002 rtcp=none")[6000]["reply"]
    a = j1["reply"]
    assert a.startswith(f"OK JOIN {net.r1.v4} 6000 ssrc=0x") and "expires=2" in a, a
    assert "ssrc=0xcafe0002" in b and "rtcp=0" in b, b
    ssrc1 = int(re.search(r"ssrc=0x([0-9a-f]+)", a).group(1), 16)
    assert net.ctl(net.r1.ns, ctl1, "HELLO there", wait=0.3) == ""
    # an unverified request: the answer is cut to the request's length
    bad = "JOIN 6000 color=blue"
    assert net.ctl(net.r1.ns, ctl1, bad) == "ERR unexpected 'colo"[:len(bad)]
    keep = subprocess.Popen(["sh", "-c", f"for i in $(seq 12); do ip netns exec {net.r1.ns} {sys.executable} "
                                         f"{TOOL} ctl --to {ctl1} --msg 'KEEPALIVE 6000 cookie={j1['cookie']}' "
                                         f"--wait 0.1; sleep 0.5; done"],
                            stdout=subprocess.DEVNULL)
    net.tx(f"{net.relay_p.v4}:5000", 200, rate=200, size=172,
           extra=["--rtp", "--seq", 65400, "--restart-at", 120, "--seq2", 7])
    time.sleep(3.5)   # r2 sent nothing since its JOIN: expired by now; r1 kept alive
    st = net.query(sock)
    keep.wait(timeout=30)
    assert st["subscriber_count"] == 1 and st["expired"] == 1
    assert net.ctl(net.r1.ns, ctl1, f"LEAVE 6000 cookie={j1['cookie']}") == f"OK LEAVE {net.r1.v4} 6000"
    net.tx(f"{net.relay_p.v4}:5000", 5, rate=100, size=172, extra=["--rtp", "--seq", 500])
    g1, g2 = net.collect(rx1)[6000], net.collect(rx2)[6000]
    final, _ = net.stop(proc)
    for got, ssrc in ((g1, ssrc1), (g2, 0xCAFE0002)):
        assert len(got) == 200
        f = [rtp_fields(h) for _, _, h in got]
        assert {x[0] for x in f} == {ssrc}
        seqs = [x[1] for x in f]
        assert all((seqs[i + 1] - seqs[i]) % 65536 == 1 for i in range(199)), "sequence not continuous"
        assert all(x[3][:8] == f"P{i:07d}".encode() for i, x in enumerate(f))
        off = (f[0][2] - 1000) % 2**32
        assert all((x[2] - (1000 + 3600 * i) - off) % 2**32 == 0 for i, x in enumerate(f[:120]))
    assert final["ctl_unknown"] == 1 and final["ctl_bad"] == 1 and final["producer_changes"] == 2
    assert final["subscriber_count"] == 0 and final["out"] == 400


def test_rtcp_is_rewritten_per_subscriber(net):
    proc, sock = net.relay(["--rtp", "-p", 5100])
    rx = net.rx(net.r1, [6100, 6101], idle=2)
    rep = net.join(net.r1.ns, f"10.{net.lab.octet}.1.1:5102", [6100])[6100]["reply"]
    ssrc = int(re.search(r"ssrc=0x([0-9a-f]+)", rep).group(1), 16)
    net.tx(f"{net.relay_p.v4}:5100", 10, rate=100, size=112, extra=["--rtp", "--ssrc", "0x11223344", "--sport", 7000])
    prod = 0x11223344
    sr = struct.pack("!BBHIIIIII", 0x80, 200, 6, prod, 1, 2, 123456, 10, 1000)
    cname = b"\x01\x05alice"
    chunk = struct.pack("!I", prod) + cname + b"\x00" * (4 - (4 + len(cname)) % 4)
    sdes = struct.pack("!BBH", 0x81, 202, len(chunk) // 4) + chunk
    code = (f"import socket; s=socket.socket(); s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            f"s.bind(('', 7001)); s.sendto(bytes.fromhex('{(sr + sdes).hex()}'), ('{net.relay_p.v4}', 5101)); "
            f"s.sendto(b'\\x80\\xc8\\x00\\x40junk', ('{net.relay_p.v4}', 5101))")
    net.lab.run(net.p_ns, [sys.executable, "-c", code])
    # STATS is served on the Unix socket only, never on the control port
    assert net.ctl(net.r1.ns, f"10.{net.lab.octet}.1.1:5102", "STATS", wait=0.3, pad=True) == ""
    totals = net.query(sock)
    assert totals["subscriber_count"] == 1 and totals["mode"] == "broadcast"
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert len(got[6100]) == 10 and len(got[6101]) == 1
    rtcp = bytes.fromhex(got[6101][0][2])
    assert len(rtcp) == len(sr + sdes)
    _, pt, _, s1, _, _, ts, pkts, octets = struct.unpack("!BBHIIIIII", rtcp[:28])
    first_ts = rtp_fields(got[6100][0][2])[2]
    assert pt == 200 and s1 == ssrc and pkts == 10 and octets == 10 * 100
    assert (ts - 123456) % 2**32 == (first_ts - 1000) % 2**32
    assert struct.unpack("!I", rtcp[32:36])[0] == ssrc and rtcp[36:43] == cname
    assert final["rtcp_out"] == 1 and final["rtcp_invalid"] == 1


def test_control_flood_cannot_grow_memory(net):
    """A flood of 40000 control datagrams (padded JOINs from 20000 ports,
    garbage) while a subscriber is being served: the source's request budget
    drops most of it, no flood JOIN becomes a subscriber (none has a cookie),
    memory stays flat, and the stream is not disturbed."""
    proc, sock = net.relay(["--rtp", "-p", 5200, "--max-subscribers", 64, "--expire", 0])
    rx = net.rx(net.r1, [6200], idle=2)
    ctl = f"10.{net.lab.octet}.1.1:5202"
    assert net.join(net.r1.ns, ctl, [6200])[6200]["reply"].startswith("OK JOIN")
    pid = net.query(sock)["pid"]

    def rss_kb():
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    rss0 = rss_kb()
    flood = ("import socket, os\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"to = ('10.{net.lab.octet}.1.1', 5202)\n"
             "for i in range(20000):\n"
             "    s.sendto(b'JOIN %d' % (10000 + i) + b' ' * 60, to)\n"
             "    s.sendto(os.urandom(1 + i % 900), to)\n")
    t0 = time.monotonic()
    fl = net.lab.popen(net.r1.ns, [sys.executable, "-c", flood])
    net.tx(f"{net.relay_p.v4}:5200", 400, rate=200, size=1000, extra=["--rtp"])
    fl.wait(timeout=60)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)
    st = net.query(sock)
    got = net.collect(rx)
    rss1 = rss_kb()
    net.stop(proc)
    assert len(got[6200]) == 400
    # the source's budget: 200 requests a second (--control-rate), 200 at once
    answered = st["ctl_in"] - st["ctl_rate_limited"]
    assert st["subscriber_count"] == 1 and st["ctl_rate_limited"] > 1000
    assert answered <= 200 * (elapsed + 1) + 10, (answered, elapsed)
    assert rss1 - rss0 < 4096, f"RSS grew from {rss0} to {rss1} kB"


def test_join_leave_churn_during_fanout(net):
    """Subscribers join and leave 1600 times while the relay fans out 1500
    datagrams/s: the steady subscriber gets every datagram."""
    proc, sock = net.relay(["--rtp", "-p", 5300, "--expire", 0, "--control-rate", 100000])
    rx = net.rx(net.r2, [6300], idle=2)
    assert net.join(net.r2.ns, f"10.{net.lab.octet}.2.1:5302", [6300])[6300]["reply"].startswith("OK")
    churn = ("import socket, sys, time\n"
             f"sys.path.insert(0, {str(HERE)!r})\n"
             "import relaytool\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"to = ('10.{net.lab.octet}.1.1', 5302)\n"
             "for r in range(40):\n"
             "    j = relaytool.handshake(s, to, range(7000, 7020), wait=0.5)\n"
             "    for p, v in j.items(): s.sendto(b'LEAVE %d cookie=%s' % (p, v['cookie'].encode()), to)\n"
             "    time.sleep(0.02)\n")
    ch = net.lab.popen(net.r1.ns, [sys.executable, "-c", churn])
    net.tx(f"{net.relay_p.v4}:5300", 3000, rate=1500, size=500, extra=["--rtp"])
    ch.wait(timeout=60)
    got = net.collect(rx)
    final, _ = net.stop(proc)
    seqs = [rtp_fields(h)[1] for _, _, h in got[6300]]
    assert len(seqs) == 3000 and all((seqs[i + 1] - seqs[i]) % 65536 == 1 for i in range(2999))
    assert final["ctl_join"] >= 800 and final["ctl_leave"] >= 800


# ---- real clients: ffmpeg ----------------------------------------------------------

@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="ffmpeg not installed (scripts/install-deps.sh installs it)")
def test_ffmpeg_producer_and_decoding_subscribers(net, tmp_path):
    """ffmpeg sends a 5 s test pattern as RTP to the relay; one ffmpeg per
    subscriber namespace decodes what the relay sends it, from an SDP with the
    SSRC the relay assigned; a packet socket beside each checks the SSRC and
    that its sequence numbers are continuous."""
    proc, sock = net.relay(["--rtp", "-p", 5400, "--engine", "auto"])
    subs = []
    for node, link in ((net.r1, 1), (net.r2, 2)):
        rep = net.join(node.ns, f"10.{net.lab.octet}.{link}.1:5402", [6400])[6400]["reply"]
        assert rep.startswith("OK JOIN"), rep
        ssrc = int(re.search(r"ssrc=0x([0-9a-f]+)", rep).group(1), 16)
        sdp = tmp_path / f"sub-{link}.sdp"
        sdp.write_text(f"v=0\no=- 0 0 IN IP4 {node.v4}\ns=groupcast relay\nc=IN IP4 {node.v4}\nt=0 0\n"
                       f"m=video 6400 RTP/AVP 96\na=rtpmap:96 MP4V-ES/90000\na=fmtp:96 profile-level-id=1\n"
                       f"a=ssrc:{ssrc} cname:relay\n")
        ready = f"/tmp/{net.lab.prefix}-sniff{link}.ready"
        sniff = net.lab.popen(node.ns, [sys.executable, TOOL, "sniff", "--ifname", node.ifname, "--port", 6400,
                                        "--duration", 12, "--ready", ready], stdout=subprocess.PIPE, text=True)
        dec = net.lab.popen(node.ns, ["ffmpeg", "-hide_banner", "-nostdin", "-protocol_whitelist", "file,udp,rtp",
                                      "-i", sdp, "-f", "null", "-"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
        while not os.path.exists(ready):
            time.sleep(0.05)
        subs.append((node, ssrc, sniff, dec))
    time.sleep(1.0)   # let ffmpeg open its port
    src = net.lab.run(net.p_ns, ["ffmpeg", "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i",
                                 "testsrc=size=160x120:rate=25", "-t", 5, "-c:v", "mpeg4", "-f", "rtp",
                                 f"rtp://{net.relay_p.v4}:5400?localrtpport=5500"],
                      capture_output=True, text=True, timeout=60)
    assert src.returncode == 0, src.stderr
    time.sleep(1.5)
    stats = net.query(sock)
    for node, ssrc, sniff, dec in subs:
        dec.send_signal(signal.SIGINT)
        _, err = dec.communicate(timeout=20)
        frames = [int(x) for x in re.findall(r"frame=\s*(\d+)", err)]
        assert frames and 100 <= frames[-1] <= 130, f"{node.ns}: decoded {frames[-1:]} frames\n{err[-1500:]}"
        pk = json.loads(sniff.communicate(timeout=30)[0])
        assert len(pk) >= 100
        assert {p[0] for p in pk} == {ssrc}
        seqs = [p[1] for p in pk]
        assert all((seqs[i + 1] - seqs[i]) % 65536 == 1 for i in range(len(seqs) - 1)), "sequence gaps"
    final, _ = net.stop(proc)
    assert stats["producer"]["packets"] == final["out"] // 2 and final["errors"] == 0


# ---- broadcast mode under hostile input (issue 10) ------------------------------------

def caps_of(pid):
    with open(f"/proc/{pid}/status") as f:
        st = f.read()
    eff = int(re.search(r"CapEff:\s+([0-9a-f]+)", st).group(1), 16)
    uid = int(re.search(r"Uid:\s+(\d+)", st).group(1))
    return eff, uid


def test_handshake_cookie_expiry_bad_cookie_keepalive(net):
    """JOIN -> COOKIE (never longer than the request) -> JOIN cookie= -> OK;
    a short first JOIN, a wrong cookie, an expired cookie and a KEEPALIVE
    without the cookie get nothing that subscribes or refreshes."""
    proc, sock = net.relay(["--rtp", "-p", 5500, "--cookie-lifetime", 1, "--expire", 0])
    ctl = f"10.{net.lab.octet}.1.1:5502"
    assert net.ctl(net.r1.ns, ctl, "JOIN 6500", wait=0.3) == ""           # short: no answer at all
    first = "JOIN 6500".ljust(64)
    rep = net.ctl(net.r1.ns, ctl, first, pad=True)
    m = re.fullmatch(r"COOKIE 6500 ([0-9a-f]{16})", rep)
    assert m and len(rep) + 1 <= len(first), rep     # + 1: the reply's newline
    cookie = m.group(1)
    wrong = f"{int(cookie, 16) ^ 1:016x}"
    req = f"JOIN 6500 cookie={wrong}"
    bad = net.ctl(net.r1.ns, ctl, req)
    assert bad.startswith("ERR bad cookie") and len(bad) <= len(req), bad
    assert net.query(sock)["subscriber_count"] == 0
    ok = net.ctl(net.r1.ns, ctl, f"JOIN 6500 cookie={cookie}")
    assert ok.startswith(f"OK JOIN {net.r1.v4} 6500 ssrc=0x"), ok
    # KEEPALIVE must show the cookie the subscriber joined with
    nocookie = net.ctl(net.r1.ns, ctl, "KEEPALIVE 6500")
    assert not nocookie.startswith("OK") and len(nocookie) <= len("KEEPALIVE 6500")
    assert net.ctl(net.r1.ns, ctl, f"KEEPALIVE 6500 cookie={wrong}").startswith("ERR bad cookie")
    # a cookie is good for one to two lifetimes; the subscriber's own stays good
    other = re.fullmatch(r"COOKIE 6501 ([0-9a-f]{16})", net.ctl(net.r1.ns, ctl, "JOIN 6501", pad=True)).group(1)
    time.sleep(2.3)
    assert net.ctl(net.r1.ns, ctl, f"JOIN 6501 cookie={other}").startswith("ERR bad cookie")
    assert net.ctl(net.r1.ns, ctl, f"KEEPALIVE 6500 cookie={cookie}") == \
        f"OK KEEPALIVE {net.r1.v4} 6500 expires=0"
    final, _ = net.stop(proc)
    assert final["subscriber_count"] == 1 and [s["addr"] for s in final["subscribers"]] == [f"{net.r1.v4}:6500"]
    assert final["ctl_short"] == 1 and final["ctl_cookies"] == 2 and final["ctl_bad_cookie"] >= 4


def test_spoofed_requests_reflect_nothing_to_the_victim(net):
    """An attacker in r1 forges JOIN, JOIN cookie=, KEEPALIVE and STATS with
    the source address of a victim in r2 (raw socket).  The victim gets no
    stream, nothing longer than the attacker's request, and no STATS JSON."""
    proc, sock = net.relay(["--rtp", "-p", 5510, "--expire", 0])
    victim = f"{net.r2.v4}:7100"
    rx = net.rx(net.r2, [7100, 7102], idle=3)
    ctl = f"10.{net.lab.octet}.1.1:5512"     # the attacker's own way in
    msgs = [("JOIN 7100", True), ("JOIN 7100 cookie=0123456789abcdef", False),
            ("KEEPALIVE 7100 cookie=0123456789abcdef", False), ("STATS", False), ("STATS", True)]
    for msg, pad in msgs * 3:
        net.spoof(net.r1.ns, victim, ctl, msg, pad=pad)
    net.spoof(net.r1.ns, victim, ctl, "JOIN 7102 rtcp=none", pad=True)
    net.tx(f"{net.relay_p.v4}:5510", 50, rate=200, size=1000, extra=["--rtp"])
    got = net.collect(rx)
    final, _ = net.stop(proc)
    longest = max(len(m.ljust(64) if p else m) for m, p in msgs)
    assert final["subscriber_count"] == 0 and final["out"] == 0 and final["in"] == 50
    for port in (7100, 7102):
        for _, _, h in got[port]:
            d = bytes.fromhex(h)
            assert len(d) <= longest and not d.startswith(b"{"), d    # at most a COOKIE or an ERR
            assert d.startswith(b"COOKIE") or d.startswith(b"ERR"), d
    assert final["ctl_unknown"] == 6 and final["ctl_bad_cookie"] == 6


def test_bad_subscriber_addresses_are_refused_and_others_keep_receiving(net):
    """JOIN from UDP source port 0 (raw socket), JOIN 0, from 0.0.0.0 and ::
    (where the kernel delivers them at all), and a bad static subscriber:
    none enters the table, and a good subscriber gets the whole stream."""
    ctl4, ctl6 = f"10.{net.lab.octet}.1.1:5522", f"[fd00:{net.lab.octet}:1::1]:5522"
    p = net.lab.run(net.relay_ns, [net.bin, "relay", "--rtp", "-p", 5520, "--producer", net.p.v4,
                                   "0.0.0.0/7000"], check=False, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "not a unicast address" in p.stderr, p.stderr
    proc, sock = net.relay(["--rtp", "-p", 5520, "--expire", 0])
    rx = net.rx(net.r2, [7200], idle=2)
    assert net.join(net.r2.ns, f"10.{net.lab.octet}.2.1:5522", [7200])[7200]["reply"].startswith("OK JOIN")
    net.spoof(net.r1.ns, f"{net.r1.v4}:0", ctl4, "JOIN", pad=True)
    net.spoof(net.r1.ns, f"{net.r1.v4}:0", ctl4, "JOIN 7201", pad=True)
    net.spoof(net.r1.ns, "0.0.0.0:7202", ctl4, "JOIN 7202", pad=True)
    net.spoof(net.r1.ns, f"[::]:7203", ctl6, "JOIN 7203", pad=True)
    assert net.ctl(net.r1.ns, ctl4, "JOIN 0", pad=True) == "ERR refused: port 0"
    net.tx(f"{net.relay_p.v4}:5520", 300, rate=300, size=500, extra=["--rtp"])
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert [s["addr"] for s in final["subscribers"]] == [f"{net.r2.v4}:7200"]
    assert len(got[7200]) == 300 and final["errors"] == 0
    assert final["ctl_bad_addr"] >= 3   # two from port 0, JOIN 0 (0.0.0.0 and :: may never reach it)


def test_self_join_and_local_subscribers_are_refused(net):
    """JOIN naming the relay's own data port from its own addresses (IPv4
    link address, 127.0.0.1, its IPv6 global address, and that address
    forged from outside over IPv6): refused; with --allow-local-subscribers a
    local port other than the relay's own is taken, its own ports never.
    The input stays what the producer sent (no loop)."""
    o = net.lab.octet
    own4, own6 = f"10.{o}.1.1", f"fd00:{o}:1::1"
    proc, sock = net.relay(["--rtp", "-p", 5530, "--expire", 0])
    for addr, to in ((own4, f"{own4}:5532"), ("127.0.0.1", "127.0.0.1:5532"), (own6, f"[{own6}]:5532")):
        rep = net.join(net.relay_ns, to, [5530], bind=addr)[5530]["reply"]
        assert rep.startswith("ERR refused: one of the relay's own") or \
            rep.startswith("ERR refused: a local address"), (addr, rep)
    net.spoof(net.r1.ns, f"[{own6}]:5530", f"[{own6}]:5532", "JOIN 5530", pad=True)
    net.spoof(net.r1.ns, f"{own4}:5530", f"{own4}:5532", "JOIN 5530", pad=True)
    net.tx(f"{net.relay_p.v4}:5530", 100, rate=500, size=200, extra=["--rtp"])
    time.sleep(0.5)
    final, _ = net.stop(proc)
    assert final["subscriber_count"] == 0 and final["in"] == 100 and final["out"] == 0
    assert final["ctl_bad_addr"] >= 3

    proc, sock = net.relay(["--rtp", "-p", 5530, "--expire", 0, "--allow-local-subscribers"])
    own = net.join(net.relay_ns, f"{own4}:5532", [5530, 5531, 5532], bind=own4)
    assert all(own[p]["reply"].startswith("ERR refused: one of the relay's own") for p in (5530, 5531, 5532)), own
    v6 = net.join(net.relay_ns, f"[{own6}]:5532", [5530], bind=own6)[5530]["reply"]
    assert v6.startswith("ERR refused: one of the relay's own"), v6
    assert net.join(net.relay_ns, f"{own4}:5532", [7300], bind=own4)[7300]["reply"].startswith("OK JOIN")
    net.tx(f"{net.relay_p.v4}:5530", 100, rate=500, size=200, extra=["--rtp"])
    time.sleep(0.5)
    final, _ = net.stop(proc)
    assert final["subscriber_count"] == 1 and final["in"] == 100 and final["out"] == 100


def test_relay_loops_are_cut(net):
    """Two relays subscribed to each other (A in s, B in r2), and A feeding a
    reflector that sends A's stream back unchanged: each loop ends after one
    round (rtp_loops), the input stays bounded."""
    o = net.lab.octet
    wide = f"10.{o}.0.0/16"
    a_on_2 = f"10.{o}.2.1"
    b_proc, b_sock = net.relay(["--rtp", "-p", 5700, "--producer", wide, "--expire", 0, f"{a_on_2}/5600"],
                               ns=net.r2.ns)
    refl = ("import socket, time\n"
            "r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(('', 5800)); r.settimeout(3)\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "n = 0\n"
            "while n < 1000:\n"
            "    try: d = r.recv(2000)\n"
            "    except socket.timeout: break\n"
            f"    s.sendto(d, ('10.{o}.1.1', 5600)); n += 1\n"
            "print(n)\n")
    rf = net.lab.popen(net.r1.ns, [sys.executable, "-c", refl], stdout=subprocess.PIPE, text=True)
    a_proc, a_sock = net.relay(["--rtp", "-p", 5600, "--producer", wide, "--expire", 0,
                                f"{net.r2.v4}/5700", f"{net.r1.v4}/5800"])
    time.sleep(0.3)
    net.tx(f"{net.relay_p.v4}:5600", 50, rate=100, size=300, extra=["--rtp"])
    time.sleep(1.5)
    a, b = net.query(a_sock), net.query(b_sock)
    time.sleep(1.0)
    a2 = net.query(a_sock)
    net.stop(a_proc)
    net.stop(b_proc)
    reflected = int(rf.communicate(timeout=30)[0].strip() or 0)
    assert a2["in"] == a["in"], "input still growing: a loop"
    assert b["in"] == 50 and b["rtp_loops"] == 50 and b["out"] == 0   # from its own subscriber A
    assert reflected == 50 and a["in"] == 100 and a["rtp_loops"] == 50  # our SSRC came back
    assert a["out"] == 100


def test_per_source_limits(net):
    """--max-per-source 4: the fifth port from one address is refused; a
    burst of requests over --control-rate is dropped and counted."""
    proc, sock = net.relay(["--rtp", "-p", 5540, "--max-per-source", 4, "--control-rate", 40, "--expire", 0])
    ctl = f"10.{net.lab.octet}.1.1:5542"
    got = net.join(net.r1.ns, ctl, list(range(7400, 7410)))
    ok = [p for p, v in got.items() if v["reply"].startswith("OK JOIN")]
    refused = [v["reply"] for v in got.values() if v["reply"].startswith("ERR too many subscribers")]
    assert len(ok) == 4 and len(refused) == 6, got
    assert net.join(net.r2.ns, f"10.{net.lab.octet}.2.1:5542", [7400])[7400]["reply"].startswith("OK JOIN")
    burst = ("import socket\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"for i in range(300): s.sendto(b'PING', ('10.{net.lab.octet}.1.1', 5542))\n")
    net.lab.run(net.r1.ns, [sys.executable, "-c", burst])
    time.sleep(0.3)
    final, _ = net.stop(proc)
    assert final["subscriber_count"] == 5 and final["ctl_per_source"] == 6
    assert final["ctl_rate_limited"] >= 200, final["ctl_rate_limited"]


def test_port_65535_and_pidfile_attacks(net, tmp_path):
    run = lambda *args: net.lab.run(net.relay_ns, [net.bin, "relay", *map(str, args)], check=False,  # noqa: E731
                                    capture_output=True, text=True, timeout=10)
    p = run("--rtp", "-p", 65535, "--producer", net.p.v4)
    assert p.returncode == 2 and "past 65535" in p.stderr, p.stderr
    p = run("--rtp", "-p", 65534, "--rtcp-port", 5001, "--producer", net.p.v4)
    assert p.returncode == 2 and "control port" in p.stderr, p.stderr
    p = run("--rtp", "-p", 5550)
    assert p.returncode == 2 and "--producer" in p.stderr, p.stderr
    # a symlink planted at the PID file's path is never followed
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    link = tmp_path / "relay.pid"
    link.symlink_to(target)
    p = run("-p", 2600, "-m", link, "--duration", 0.2, f"{net.r1.v4}/9")
    assert p.returncode == 1 and "symbolic link" in p.stderr, p.stderr
    assert target.read_text() == "keep me\n" and link.is_symlink()
    # a live PID is refused; a stale one (no such process) is replaced
    live = tmp_path / "live.pid"
    live.write_text(f"{os.getpid()}\n")
    p = run("-p", 2600, "-m", live, "--duration", 0.2, f"{net.r1.v4}/9")
    assert p.returncode == 1 and "running" in p.stderr and live.read_text() == f"{os.getpid()}\n"
    stale = tmp_path / "stale.pid"
    stale.write_text("4194303\n")
    proc, sock = net.relay(["-p", 2600, "-m", stale, f"{net.r1.v4}/9"])
    assert int(stale.read_text()) == net.query(sock)["pid"]
    net.stop(proc)
    assert not stale.exists()


def test_privileges_are_dropped(net):
    """After setup only CAP_NET_ADMIN and CAP_BPF stay (CAP_NET_RAW with -S);
    --user nobody runs as uid 65534 and the stream still flows."""
    keep = (1 << 12) | (1 << 39)
    proc, sock = net.relay(["--rtp", "-p", 5560, f"{net.r1.v4}/7500"])
    eff, uid = caps_of(net.query(sock)["pid"])
    net.stop(proc)
    assert eff & ~keep == 0 and eff & (1 << 12) and uid == 0, hex(eff)
    proc, sock = net.relay(["-p", 2610, "-S", f"{net.r1.v4}/7501"])
    eff, _ = caps_of(net.query(sock)["pid"])
    net.stop(proc)
    assert eff & ~(keep | 1 << 13) == 0 and eff & (1 << 13), hex(eff)
    rx = net.rx(net.r1, [7502], idle=2)
    proc, sock = net.relay(["--rtp", "-p", 5560, "--user", "nobody", f"{net.r1.v4}/7502"])
    eff, uid = caps_of(net.query(sock)["pid"])
    net.tx(f"{net.relay_p.v4}:5560", 100, rate=500, size=200, extra=["--rtp"])
    got = net.collect(rx)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert uid == 65534 and eff & ~keep == 0, (uid, hex(eff))
    assert len(got[7502]) == 100, err


def test_rtcp_refreshes_only_with_the_subscribers_ssrc(net):
    """Receiver reports keep a subscriber alive only when they are about the
    SSRC it was given: a forged report from its address and RTCP port that
    does not know the SSRC refreshes nothing, and the subscriber expires."""
    proc, sock = net.relay(["--rtp", "-p", 5570, "--expire", 2])
    ctl = f"10.{net.lab.octet}.1.1:5572"
    j = net.join(net.r1.ns, ctl, [7600, 7610])
    ssrc = {p: int(re.search(r"ssrc=0x([0-9a-f]+)", v["reply"]).group(1), 16) for p, v in j.items()}

    def rr(about):
        block = struct.pack("!IIIIII", about, 0, 0, 0, 0, 0)
        return (struct.pack("!BBHI", 0x81, 201, 7, 0x12345678) + block).hex()

    # 7600: reports about its own SSRC from the subscriber itself; 7610:
    # forged reports from its address and RTCP port with a guessed SSRC
    code = ("import socket, time, sys\n"
            f"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('', 7601))\n"
            "for i in range(8):\n"
            f"    s.sendto(bytes.fromhex('{rr(ssrc[7600])}'), ('10.{net.lab.octet}.1.1', 5571)); time.sleep(0.5)\n")
    good = net.lab.popen(net.r1.ns, [sys.executable, "-c", code])
    for i in range(8):
        net.spoof(net.r2.ns, f"{net.r1.v4}:7611", f"10.{net.lab.octet}.2.1:5571", hexdata=rr(ssrc[7610] ^ 0x1000))
        time.sleep(0.5)
    good.wait(timeout=30)
    final, _ = net.stop(proc)
    assert [s["addr"] for s in final["subscribers"]] == [f"{net.r1.v4}:7600"], final["subscribers"]
    assert final["rtcp_from_subscribers"] == 8 and final["rtcp_rejected"] >= 7 and final["expired"] == 1


def test_reload_refuses_host_names_and_local_addresses_follow_the_host(net, tmp_path):
    """SIGHUP never resolves a name (the loop would wait for DNS): a config
    with one fails to reload and the one in force stays.  In broadcast mode an
    address added to the host is refused as a subscriber once re-read (SIGHUP,
    or within 5 s)."""
    conf = tmp_path / "names.conf"
    conf.write_text(f"0.0.0.0/0: {net.r1.v4}/7700\n")
    proc, sock = net.relay(["-p", 2620, "-c", conf])
    conf.write_text(f"0.0.0.0/0: {net.r1.v4}/7700 localhost/7701\n")
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    st = net.query(sock)
    final, err = net.stop(proc)
    assert st["reload_failures"] == 1 and st["receiver_count"] == 1
    assert "resolved at start only" in err, err

    extra = f"10.{net.lab.octet}.1.77"
    proc, sock = net.relay(["--rtp", "-p", 5580, "--expire", 0])
    net.lab.ip(net.relay_ns, "addr", "add", f"{extra}/32", "dev", "lo")
    try:
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        rep = net.join(net.relay_ns, f"{extra}:5582", [7702], bind=extra)[7702]["reply"]
    finally:
        net.lab.ip(net.relay_ns, "addr", "del", f"{extra}/32", "dev", "lo")
    final, err = net.stop(proc)
    assert rep.startswith("ERR refused: a local address"), rep
    assert final["subscriber_count"] == 0 and "level=notice event=local_addresses count=" in err, err
