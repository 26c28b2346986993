"""LMS endpoint API (include/groupcast/lms.h) between namespaces, no routers.

Lab: namespace "s" (the sender, or the replier) linked by one veth to "r"
(the receiver, or the turning point).  `groupcast lms` drives the library;
an AF_PACKET capture on r's veth shows what was on the wire, byte for byte,
and the checks of each packet (checksums, option, inner packet) are computed
here in Python, independently of the library.
"""
import json
import socket
import struct
import subprocess
import sys

import pytest

from netlab import Lab

WAIT = 15  # seconds any single step may take
GROUP = "239.77.1.2"
PORT = 5400

# Capture IPv4 packets of protocol argv[2] on interface argv[1] in this
# namespace; print "ready", then one hex line per packet (the IP packet, no
# Ethernet header); stop after argv[3] seconds.
CAPTURE = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
s.bind((sys.argv[1], 0x0800))
s.settimeout(0.1)
proto, end = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
print("ready", flush=True)
while time.monotonic() < end:
    try:
        frame, addr = s.recvfrom(70000)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING or len(frame) < 20 or frame[9] != proto:
        continue
    print(frame[:(frame[2] << 8) | frame[3]].hex(), flush=True)
"""

# Send argv[3] plain datagrams "seq N" to argv[1]:argv[2] every 20 ms out interface argv[4].
SENDER = r"""
import socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
             struct.pack("4s4si", bytes(4), bytes(4), socket.if_nametoindex(sys.argv[4])))
for i in range(int(sys.argv[3])):
    s.sendto(b"seq %d" % i, (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.02)
"""


# A plain receiver with IP_RECVOPTS beside the library's: joins argv[1] on
# interface argv[3], port argv[2]; prints "ready", then the hex of the
# options area (the IP_RECVOPTS control message) of one datagram.
RECVOPTS = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[2])))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack(
    "4s4si", socket.inet_aton(sys.argv[1]), bytes(4), socket.if_nametoindex(sys.argv[3])))
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVOPTS, 1)
s.settimeout(5)
print("ready", flush=True)
data, anc, flags, addr = s.recvmsg(70000, 256)
print(" ".join(c.hex() for lvl, typ, c in anc if (lvl, typ) == (socket.IPPROTO_IP, socket.IP_RECVOPTS)))
"""


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def lms_option(code, tpif, tpaddr, src, group):
    """The option as the thesis's ipmopt_lms lays it out (bpf/lms.h)."""
    return struct.pack("!BBH4s4s4s", code, 16, tpif, socket.inet_aton(tpaddr),
                       socket.inet_aton(src), socket.inet_aton(group))


class Net:
    def __init__(self, lab, build):
        self.lab = lab
        self.bin = str(build / "tools" / "groupcast")
        self.s = lab.add_ns("s")
        self.r = lab.add_ns("r")
        link = lab.add_link(self.s, self.r, v6=False)
        self.s_addr, self.r_addr, self.ifname = link.a.v4, link.b.v4, link.a.ifname
        lab.resolve(self.s, [self.r_addr])
        self.source = f"10.{lab.octet}.99.1"  # the original source S: not on this link

    def lms(self, ns, *args, drop_net_raw=False):
        argv = [self.bin, "lms", *map(str, args)]
        if drop_net_raw:
            argv = ["capsh", "--drop=cap_net_raw", "--", "-c", " ".join(argv)]
        return self.lab.run(ns, argv, capture_output=True, text=True, timeout=WAIT, check=False)

    def start(self, ns, argv):
        """Start argv in ns, wait for its first line (ready), return the process."""
        p = self.lab.popen(ns, list(map(str, argv)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        first = p.stdout.readline()
        assert first.strip() in ("ready", '{"ready":true}'), first + p.stderr.read()
        return p

    def capture(self, proto, seconds):
        return self.start(self.r, [sys.executable, "-c", CAPTURE, self.ifname, proto, seconds])

    def recv(self, *args):
        return self.start(self.r, [self.bin, "lms", "recv", "--port", PORT, "--if", self.ifname, *args])


def finish(p):
    out, err = p.communicate(timeout=WAIT)
    assert p.returncode == 0, err
    return out


def records(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def net(build):
    with Lab() as lab:
        yield Net(lab, build)


def test_request_arrives_with_option_intact(net):
    cap = net.capture(17, 3)
    plain = net.start(net.r, [sys.executable, "-c", RECVOPTS, GROUP, PORT, net.ifname])
    rx = net.recv("--join", GROUP, "--count", 1, "--timeout-ms", 3000)
    nak = bytes(range(12))
    p = net.lms(net.s, "request", "--to", f"{GROUP}:{PORT}", "--src", net.source,
                "--if", net.ifname, "--data", nak.hex())
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["stats"]["requests_sent"] == 1

    got = records(finish(rx))
    assert got[0] == {"len": 12, "from": got[0]["from"], "code": 138, "tpif": 0,
                      "tpaddr": "0.0.0.0", "src": net.source, "group": GROUP, "data": nak.hex()}
    assert got[0]["from"].startswith(net.s_addr + ":")
    assert got[-1]["stats"]["requests_received"] == 1
    # the kernel hands the receiver the option exactly as sent
    assert finish(plain).split() == [lms_option(138, 0, "0.0.0.0", net.source, GROUP).hex()]

    pkts = [bytes.fromhex(x) for x in finish(cap).split()]
    ours = [x for x in pkts if x[16:20] == socket.inet_aton(GROUP)]
    assert len(ours) == 1, pkts
    ip = ours[0]
    assert ip[0] == 0x49  # IPv4, 36-byte header: 16 option bytes
    assert csum(ip[:36]) == 0
    assert ip[20:36] == lms_option(138, 0, "0.0.0.0", net.source, GROUP)
    assert ip[12:16] == socket.inet_aton(net.s_addr)
    sport, dport, ulen, _ = struct.unpack("!HHHH", ip[36:44])
    assert (dport, ulen, ip[44:]) == (PORT, 8 + len(nak), nak)


def check_dmcast(pkt, outer_src, tp, tpif, src, group, sport, dport, data, ttl=64):
    """Every field and checksum of a dmcast, from the bytes alone."""
    assert pkt[0] == 0x49 and pkt[9] == 4  # IHL 9 (option), protocol IPIP
    assert struct.unpack("!H", pkt[2:4])[0] == len(pkt) == 64 + len(data)
    assert struct.unpack("!H", pkt[6:8])[0] == 0x4000  # DF
    assert csum(pkt[:36]) == 0
    assert pkt[12:16] == socket.inet_aton(outer_src) and pkt[16:20] == socket.inet_aton(tp)
    assert pkt[20:36] == lms_option(139, tpif, tp, src, group)
    inner = pkt[36:]
    assert inner[0] == 0x45 and inner[9] == 17 and inner[8] == ttl
    assert struct.unpack("!H", inner[6:8])[0] == 0x4000
    assert csum(inner[:20]) == 0
    assert inner[12:16] == socket.inet_aton(src) and inner[16:20] == socket.inet_aton(group)
    udp = inner[20:]
    assert struct.unpack("!HHH", udp[:6]) == (sport, dport, 8 + len(data))
    pseudo = inner[12:20] + struct.pack("!BBH", 0, 17, 8 + len(data))
    assert udp[6:8] != b"\0\0" and csum(pseudo + udp) == 0
    assert udp[8:] == data


def test_dmcast_on_the_wire_byte_exact(net):
    data = b"repair: packets 17..19"
    args = ["dmcast", "--tp", net.r_addr, "--tpif", 3, "--src", net.source, "--group", GROUP,
            "--sport", 5300, "--dport", PORT, "--data", data.hex(), "--print"]
    cap = net.capture(4, 3)
    p = net.lms(net.s, *args, "--from", net.s_addr, "--id", 0x1234, "--ttl", 7)
    assert p.returncode == 0, p.stderr
    out = records(p.stdout)
    built = bytes.fromhex(out[0]["packet"])
    assert out[1]["stats"]["dmcasts_sent"] == 1
    # and once with the outer source and id left to the kernel
    p = net.lms(net.s, *args)
    assert p.returncode == 0, p.stderr
    built0 = bytes.fromhex(records(p.stdout)[0]["packet"])

    pkts = [bytes.fromhex(x) for x in finish(cap).split()]
    assert len(pkts) == 2, pkts
    assert pkts[0] == built  # nothing changed on the way
    check_dmcast(pkts[0], net.s_addr, net.r_addr, 3, net.source, GROUP, 5300, PORT, data, ttl=7)
    assert pkts[0][4:6] == b"\x12\x34"
    # kernel-filled source (and id): valid header, everything after it as built
    check_dmcast(pkts[1], net.s_addr, net.r_addr, 3, net.source, GROUP, 5300, PORT, data)
    assert built0[12:16] == bytes(4) and pkts[1][20:] == built0[20:]


def test_dmcast_bad_arguments_send_nothing(net):
    base = {"--tp": net.r_addr, "--tpif": 3, "--src": net.source, "--group": GROUP,
            "--dport": PORT}
    cases = [("--group", "10.1.2.3", "d->tp.group"), ("--tp", "0.0.0.0", "d->tp.tpaddr"),
             ("--tpif", 0, "d->tp.tpif"), ("--tpif", 70000, "d->tp.tpif"),
             ("--size", 65472, "len")]
    cap = net.capture(4, 2)
    for key, value, arg in cases:
        argv = {**base, key: value}
        p = net.lms(net.s, "dmcast", *[x for kv in argv.items() for x in kv])
        assert p.returncode == 1, (key, p.stdout)
        assert arg in p.stderr and ("EINVAL" in p.stderr or "EMSGSIZE" in p.stderr), p.stderr
    # larger than the link's MTU (1500): the kernel refuses, we say why
    p = net.lms(net.s, "dmcast", *[x for kv in base.items() for x in kv], "--size", 1500)
    assert p.returncode == 1 and "EMSGSIZE" in p.stderr and "MTU" in p.stderr, p.stderr
    assert finish(cap).split() == []


def test_dmcast_no_provisional_names_a_high_interface(net):
    """--tpif 40000 has bit 15 set: a provisional mark unless the routers run
    lmsd --no-provisional, which --no-provisional says; then the option names
    40000 on the wire.  Above 65535 it is refused either way."""
    base = ["dmcast", "--tp", net.r_addr, "--tpif", 40000, "--src", net.source, "--group", GROUP,
            "--sport", 5300, "--dport", PORT, "--from", net.s_addr, "--data", b"high".hex()]
    cap = net.capture(4, 3)
    p = net.lms(net.s, *base)
    assert p.returncode == 1 and "d->tp.tpif" in p.stderr and "GC_LMS_PROVISIONAL" in p.stderr, p.stderr
    for tpif in (65537, 0x80000000 | 7):  # too large; bit 31 is the library's flag
        p = net.lms(net.s, *base[:4], tpif, *base[5:], "--no-provisional")
        assert p.returncode in (1, 2) and "tpif" in p.stderr, p.stderr
    p = net.lms(net.s, *base, "--no-provisional", "--print")
    assert p.returncode == 0, p.stderr
    built = bytes.fromhex(records(p.stdout)[0]["packet"])
    pkts = [bytes.fromhex(x) for x in finish(cap).split()]
    assert pkts == [built]
    check_dmcast(pkts[0], net.s_addr, net.r_addr, 40000, net.source, GROUP, 5300, PORT, b"high")


def test_without_cap_net_raw_eperm_names_the_capability(net):
    rx = net.recv("--join", GROUP, "--timeout-ms", 1000)
    p = net.lms(net.s, "request", "--to", f"{GROUP}:{PORT}", "--src", net.source,
                "--if", net.ifname, drop_net_raw=True)
    assert p.returncode == 1 and "CAP_NET_RAW" in p.stderr and "EPERM" in p.stderr, p.stderr
    p = net.lms(net.s, "dmcast", "--tp", net.r_addr, "--tpif", 3, "--src", net.source,
                "--group", GROUP, "--dport", PORT, drop_net_raw=True)
    assert p.returncode == 1 and "CAP_NET_RAW" in p.stderr and "EPERM" in p.stderr, p.stderr
    got = records(finish(rx))
    assert [r for r in got if "len" in r or "error" in r] == []
    # the same request with the capability does arrive (the receiver was fine)
    rx = net.recv("--join", GROUP, "--count", 1, "--timeout-ms", 3000)
    p = net.lms(net.s, "request", "--to", f"{GROUP}:{PORT}", "--src", net.source,
                "--if", net.ifname)
    assert p.returncode == 0, p.stderr
    assert records(finish(rx))[0]["code"] == 138


@pytest.mark.parametrize("source", ["any", "sender", "other"])
def test_join_then_leave(net, source):
    """Datagrams arrive after the join; after the leave none does, while the
    capture shows the sender still sending to the group on r's link."""
    join = {"any": GROUP, "sender": f"{GROUP}/{net.s_addr}",
            "other": f"{GROUP}/10.{net.lab.octet}.98.1"}[source]
    cap = net.capture(17, 6)  # outlasts the sender (150 x 20 ms) on a busy machine
    rx = net.recv("--join", join, "--leave-after", 3, "--timeout-ms", 1500)
    tx = net.lab.popen(net.s, [sys.executable, "-c", SENDER, GROUP, PORT, 150, net.ifname])
    got = records(finish(rx))
    tx.wait(timeout=WAIT)
    wire = [bytes.fromhex(x) for x in finish(cap).split()]
    wire = [x for x in wire if x[16:20] == socket.inet_aton(GROUP)]
    assert len(wire) >= 100  # the sender sent all along
    data = [r for r in got if "len" in r]
    if source == "other":  # source-specific join of another source: nothing
        assert data == [] and not any("left" in r for r in got)
        assert got[-1]["stats"]["plain_received"] == 0
        return
    assert [r.get("left") for r in got[3:4]] == [GROUP], got
    assert len(data) == 3 and all("left" not in r for r in got[:3]), got
    seqs = [int(bytes.fromhex(r["data"]).split()[1]) for r in data]
    assert seqs == sorted(seqs) and all(r["code"] == 0 for r in data)
    # nothing after the leave, though the wire carried up to seq 149
    assert got[4:] == [got[-1]] and "stats" in got[-1], got
    assert int(wire[-1][28:].split()[1]) > seqs[-1] + 20
