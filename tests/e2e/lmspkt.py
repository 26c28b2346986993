"""LMS packets for the end-to-end tests and bench/lms.py, built in Python so
that the router side is tested on its own (the endpoint library, lib/lms/,
will replace the senders): requests through IP_OPTIONS, dmcasts through a raw
IP socket, hand-made frames through AF_PACKET, and a receiver that reports
each datagram with its IP options (IP_RECVOPTS) as a JSON line.

Each of RECEIVER, SENDER, RAWIP, FRAMES is a small Python program run inside a lab namespace:
    lab.run(ns, [sys.executable, "-c", REQUEST, json.dumps(args)])
"""
import socket
import struct

REQ, DMCAST, OPT_LEN = 138, 139, 16


PROVISIONAL = 0x8000  # bpf/lms.h GC_LMS_TPIF_PROVISIONAL: tpif bit 15 of a provisional mark


def option(code, src, group, tpif=0xFFFF, tpaddr="0.0.0.0", length=OPT_LEN):
    """struct gc_lms_opt (bpf/lms.h): code, len, tpif, tpaddr, src, group.
    A request leaves its sender with tpif -1 and tpaddr 0 (thesis Fig. 6.8)."""
    return struct.pack("!BBH4s4s4s", code, length, tpif, socket.inet_aton(tpaddr),
                       socket.inet_aton(src), socket.inet_aton(group))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src, dst, proto, payload, ttl=64, options=b"", ident=0x4c4d, tot_len=None, frag=0):
    """An IPv4 header (checksum filled) + payload; frag: the flags and
    fragment offset field (0x2000: more fragments)."""
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, tot_len or 4 * ihl + len(payload), ident, frag,
                      ttl, proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + options
    return hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:] + payload


def udp(src, dst, sport, dport, data):
    """A UDP header with a correct checksum + data."""
    length = 8 + len(data)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, length)
    hdr = struct.pack("!HHHH", sport, dport, length, 0)
    c = csum(pseudo + hdr + data) or 0xFFFF
    return struct.pack("!HHHH", sport, dport, length, c) + data


def dmcast(outer_src, tpaddr, tpif, src, group, inner_src, dport, data, ttl=16, opt=None, inner=None):
    """The IPIP dmcast a replier sends to a turning point: outer header with
    option 139 to tpaddr (or the options area opt), inner UDP datagram
    inner_src -> group:dport (or the packet inner)."""
    if inner is None:
        inner = ipv4(inner_src, group, 17, udp(inner_src, group, 4000, dport, data), ttl=ttl)
    opt = opt if opt is not None else option(DMCAST, src, group, tpif, tpaddr)
    return ipv4(outer_src, tpaddr, 4, inner, options=opt)


NOP, END, RA = b"\x01", b"\x00", b"\x94\x04\x00\x00"  # RFC 791 no-operation, end; RFC 2113 Router Alert


def mcast_mac(group):
    g = socket.inet_aton(group)
    return bytes([0x01, 0x00, 0x5E, g[1] & 0x7F, g[2], g[3]])


# -- programs run inside namespaces: argv[1] is a JSON object of arguments --

RECEIVER = r"""
import json, socket, struct, sys
a = json.loads(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", a["port"]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             socket.inet_aton(a["group"]) + socket.inet_aton(a["ifaddr"]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVOPTS, 1)
print(json.dumps({"ready": True}), flush=True)
while True:
    data, anc, flags, addr = s.recvmsg(65535, 1024)
    opts = b"".join(d for lvl, t, d in anc if lvl == socket.IPPROTO_IP and t == socket.IP_RECVOPTS)
    print(json.dumps({"src": addr[0], "data": data.hex(), "opts": opts.hex()}), flush=True)
"""

# Multicast UDP datagrams to group:port from ifaddr, with IP options (hex) if
# given; the list `repeat` times, `gap_us` apart.
SENDER = r"""
import json, socket, sys, time
a = json.loads(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((a["ifaddr"], 0))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(a["ifaddr"]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, a.get("ttl", 16))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
if a.get("opts"):
    s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, bytes.fromhex(a["opts"]))
for _ in range(a.get("repeat", 1)):
    for d in a["data"]:
        s.sendto(bytes.fromhex(d), (a["group"], a["port"]))
        if a.get("gap_us"):
            time.sleep(a["gap_us"] / 1e6)
"""

# Whole IPv4 packets (hex) through a raw socket (IP_HDRINCL) to their destination
# (the kernel fills in the outer checksum and total length); `repeat`, `gap_us` as above.
RAWIP = r"""
import json, socket, sys, time
a = json.loads(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for _ in range(a.get("repeat", 1)):
    for p in a["packets"]:
        p = bytes.fromhex(p)
        s.sendto(p, (socket.inet_ntoa(p[16:20]), 0))
        if a.get("gap_us"):
            time.sleep(a["gap_us"] / 1e6)
"""

# Ethernet frames (hex) out of an interface, exactly as given (AF_PACKET).
FRAMES = r"""
import json, socket, sys
a = json.loads(sys.argv[1])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((a["ifname"], 0))
for f in a["frames"]:
    s.send(bytes.fromhex(f))
"""

# A routing daemon of our own, as smcrouted or pimd hold one: an mroute socket
# (on multicast table `table` if given: MRT_TABLE, as smcrouted/pimd -t do),
# vifs on the interfaces `ifs` (the first is upstream), then per stdin line:
#   add [N]  print CLOCK_MONOTONIC ns, then MRT_ADD_MFC (src, group) from
#            ifs[0] to the others (N > 1: N routes, the last two bytes of
#            src counting up from 1000); print "added"
#   del      MRT_DEL_MFC (src, group); print "deleted"
# Prints "ready" once the vifs are there.
MROUTER = r"""
import json, socket, struct, sys, time
a = json.loads(sys.argv[1])
MRT_INIT, MRT_ADD_VIF, MRT_ADD_MFC, MRT_DEL_MFC, MRT_TABLE, VIFF_USE_IFINDEX = 200, 202, 204, 205, 209, 8
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_IGMP)
if a.get("table"):
    s.setsockopt(socket.IPPROTO_IP, MRT_TABLE, struct.pack("I", a["table"]))
s.setsockopt(socket.IPPROTO_IP, MRT_INIT, struct.pack("i", 1))
for vif, name in enumerate(a["ifs"]):
    s.setsockopt(socket.IPPROTO_IP, MRT_ADD_VIF,
                 struct.pack("HBBIii", vif, VIFF_USE_IFINDEX, 1, 0, socket.if_nametoindex(name), 0))
ttls = bytes([0] + [1] * (len(a["ifs"]) - 1) + [0] * (32 - len(a["ifs"])))
def mfc(src):  # struct mfcctl
    return src + socket.inet_aton(a["group"]) + struct.pack("H", 0) + ttls + bytes(18)
print("ready", flush=True)
for line in sys.stdin:
    w = line.split()
    if w[0] == "add":
        n = int(w[1]) if len(w) > 1 else 1
        srcs = [socket.inet_aton(a["src"])] if n == 1 else [
            socket.inet_aton(a["src"])[:2] + struct.pack("!H", 1000 + i) for i in range(n)]
        print(time.monotonic_ns(), flush=True)
        for src in srcs:
            s.setsockopt(socket.IPPROTO_IP, MRT_ADD_MFC, mfc(src))
        print("added", flush=True)
    else:
        try:
            s.setsockopt(socket.IPPROTO_IP, MRT_DEL_MFC, mfc(socket.inet_aton(a["src"])))
        except OSError:
            pass
        print("deleted", flush=True)
"""
