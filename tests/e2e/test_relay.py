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
    def relay(self, args, wait=True):
        """Start the relay with args; returns (proc, stats socket path)."""
        self.n += 1
        sock = f"/tmp/{self.lab.prefix}-relay{self.n}.sock"
        argv = [self.bin, "relay", "--stats-socket", sock, "--status", "0", "--json", *map(str, args)]
        proc = self.lab.popen(self.relay_ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
        if os.path.exists(ready):
            os.unlink(ready)
        addr = node.v4 if family == 4 else node.v6
        p = self.lab.popen(node.ns, [sys.executable, TOOL, "rx", "--addr", addr, "--ports",
                                     ",".join(map(str, ports)), "--idle", idle, "--timeout", timeout,
                                     "--ready", ready], stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(ready):
            assert p.poll() is None and time.monotonic() < deadline, "receiver did not start"
            time.sleep(0.02)
        os.unlink(ready)
        return p

    @staticmethod
    def collect(p):
        out, _ = p.communicate(timeout=90)
        return {int(k): v for k, v in json.loads(out).items()}

    def tx(self, to, count, rate=1000, size=100, ns=None, extra=()):
        out = self.lab.run(ns or self.p_ns, [sys.executable, TOOL, "tx", "--to", to, "--count", count,
                                             "--rate", rate, "--size", size, *extra],
                           capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)

    def ctl(self, ns, to, msg, from_port=0, wait=1.0):
        out = self.lab.run(ns, [sys.executable, TOOL, "ctl", "--to", to, "--msg", msg, "--from-port", from_port,
                                "--wait", wait], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()


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
    for opt in SAMPLICATOR_OPTS + ["--rtp", "--control", "--engine", "--stats-socket", "--query"]:
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
    a = net.ctl(net.r1.ns, ctl1, "JOIN 6000")
    b = net.ctl(net.r2.ns, ctl2, "join 6000 ssrc=0xcafe0002 rtcp=none")
    assert a.startswith(f"OK JOIN {net.r1.v4} 6000 ssrc=0x") and "expires=2" in a, a
    assert "ssrc=0xcafe0002" in b and "rtcp=0" in b, b
    ssrc1 = int(re.search(r"ssrc=0x([0-9a-f]+)", a).group(1), 16)
    assert net.ctl(net.r1.ns, ctl1, "HELLO there", wait=0.3) == ""
    assert net.ctl(net.r1.ns, ctl1, "JOIN 6000 color=blue").startswith("ERR unexpected 'color=blue'")
    keep = subprocess.Popen(["sh", "-c", f"for i in $(seq 12); do ip netns exec {net.r1.ns} {sys.executable} "
                                         f"{TOOL} ctl --to {ctl1} --msg 'KEEPALIVE 6000' --wait 0.1; sleep 0.5; done"],
                            stdout=subprocess.DEVNULL)
    net.tx(f"{net.relay_p.v4}:5000", 200, rate=200, size=172,
           extra=["--rtp", "--seq", 65400, "--restart-at", 120, "--seq2", 7])
    time.sleep(3.5)   # r2 sent nothing since its JOIN: expired by now; r1 kept alive
    st = net.query(sock)
    keep.wait(timeout=30)
    assert st["subscriber_count"] == 1 and st["expired"] == 1
    assert net.ctl(net.r1.ns, ctl1, "LEAVE 6000") == f"OK LEAVE {net.r1.v4} 6000"
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
    net.ctl(net.r1.ns, f"10.{net.lab.octet}.1.1:5102", "JOIN 6100")
    rep = net.ctl(net.r1.ns, f"10.{net.lab.octet}.1.1:5102", "JOIN 6100")
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
    totals = json.loads(net.ctl(net.r1.ns, f"10.{net.lab.octet}.1.1:5102", "STATS"))
    assert totals["subscriber_count"] == 1 and totals["mode"] == "broadcast" and "subscribers" not in totals
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
    """A flood of 40000 control datagrams (JOINs from 20000 ports, garbage)
    against --max-subscribers 64, while a subscriber is being served: the
    table stays at 64, memory stays flat, and the stream is not disturbed."""
    proc, sock = net.relay(["--rtp", "-p", 5200, "--max-subscribers", 64, "--expire", 0])
    rx = net.rx(net.r1, [6200], idle=2)
    ctl = f"10.{net.lab.octet}.1.1:5202"
    assert net.ctl(net.r1.ns, ctl, "JOIN 6200").startswith("OK JOIN")
    pid = net.query(sock)["pid"]

    def rss_kb():
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    rss0 = rss_kb()
    flood = ("import socket, os\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"to = ('10.{net.lab.octet}.1.1', 5202)\n"
             "for i in range(20000):\n"
             "    s.sendto(b'JOIN %d' % (10000 + i), to)\n"
             "    s.sendto(os.urandom(1 + i % 900), to)\n")
    fl = net.lab.popen(net.r1.ns, [sys.executable, "-c", flood])
    net.tx(f"{net.relay_p.v4}:5200", 400, rate=200, size=1000, extra=["--rtp"])
    fl.wait(timeout=60)
    time.sleep(0.5)
    st = net.query(sock)
    got = net.collect(rx)
    rss1 = rss_kb()
    net.stop(proc)
    assert len(got[6200]) == 400
    assert st["subscriber_count"] <= 64 and st["ctl_refused"] > 1000
    assert st["ctl_unknown"] + st["ctl_bad"] > 0
    assert rss1 - rss0 < 4096, f"RSS grew from {rss0} to {rss1} kB"


def test_join_leave_churn_during_fanout(net):
    """Subscribers join and leave 1600 times while the relay fans out 1500
    datagrams/s: the steady subscriber gets every datagram."""
    proc, sock = net.relay(["--rtp", "-p", 5300, "--expire", 0])
    rx = net.rx(net.r2, [6300], idle=2)
    assert net.ctl(net.r2.ns, f"10.{net.lab.octet}.2.1:5302", "JOIN 6300").startswith("OK")
    churn = ("import socket\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"to = ('10.{net.lab.octet}.1.1', 5302)\n"
             "import time\n"
             "for r in range(40):\n"
             "    for p in range(7000, 7020): s.sendto(b'JOIN %d' % p, to)\n"
             "    time.sleep(0.02)\n"
             "    for p in range(7000, 7020): s.sendto(b'LEAVE %d' % p, to)\n"
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
        rep = net.ctl(node.ns, f"10.{net.lab.octet}.{link}.1:5402", "JOIN 6400")
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
