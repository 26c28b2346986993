"""Packet capture for the end-to-end tests, without tcpdump: an AF_PACKET
socket in a namespace records every frame arriving on an interface with its
tp_status (PACKET_AUXDATA), and udp_in_frames() parses the UDP datagrams out of
the frames and checks their IPv4 header and UDP checksums (RFC 1071)."""
import ipaddress
import struct
import subprocess
import sys
from contextlib import contextmanager

from delivery import wait_files

CAPTURE = r"""
import signal, socket, struct, sys, time
ifname, out, ready, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
SOL_PACKET, PACKET_AUXDATA, SO_RCVBUFFORCE, ETH_P_ALL = 263, 8, 33, 3
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
s.bind((ifname, ETH_P_ALL))
s.settimeout(0.05)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
open(ready, "w").close()
frames, deadline = [], time.monotonic() + timeout
def take():
    data, anc, flags, addr = s.recvmsg(65536, 1024)
    if addr[2] == socket.PACKET_OUTGOING:
        return
    status = [struct.unpack_from("=I", d)[0] for lvl, typ, d in anc if (lvl, typ) == (SOL_PACKET, PACKET_AUXDATA)]
    frames.append(struct.pack("!II", status[0] if status else 0, len(data)) + data)
while not stop and time.monotonic() < deadline:
    try:
        take()
    except socket.timeout:
        pass
s.setblocking(False)
while True:
    try:
        take()
    except BlockingIOError:
        break
with open(out, "wb") as f:
    f.write(b"".join(frames))
"""
TP_STATUS_CSUMNOTREADY = 1 << 3


@contextmanager
def capture(lab, tmp_path, ns, ifname):
    """AF_PACKET capture of everything arriving on ifname in ns; yields a
    function that stops it and returns [(tp_status, frame)]."""
    out, ready = tmp_path / f"{ns}-{ifname}.pcap", tmp_path / f"{ns}-{ifname}.cready"
    proc = lab.popen(ns, [sys.executable, "-c", CAPTURE, ifname, out, ready, 120],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop():
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, f"capture in {ns} failed: {err}"
        data, pos, frames = out.read_bytes(), 0, []
        while pos < len(data):
            status, n = struct.unpack_from("!II", data, pos)
            frames.append((status, data[pos + 8:pos + 8 + n]))
            pos += 8 + n
        return frames

    try:
        wait_files([(proc, ready)], f"capture in {ns}")
        yield stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def ones_sum(data):
    """RFC 1071 ones-complement sum of data, folded to 16 bits."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s


def udp_in_frames(frames, ports):
    """Parse the UDP datagrams to `ports` out of Ethernet frames and check
    their checksums.  Returns ([(dst addr, dst port, payload)], [problems])."""
    found, problems = [], []
    for status, f in frames:
        etype = struct.unpack_from("!H", f, 12)[0]
        if etype == 0x0800:
            ip = f[14:]
            ihl, tot = (ip[0] & 15) * 4, struct.unpack_from("!H", ip, 2)[0]
            if ip[9] != 17 or struct.unpack_from("!H", ip, 6)[0] & 0x3fff:
                continue  # not UDP, or a fragment
            udp, src, dst = ip[ihl:tot], ip[12:16], ip[16:20]
            pseudo = src + dst + struct.pack("!BBH", 0, 17, len(udp))
            dst_s = ".".join(map(str, dst))
        elif etype == 0x86DD:
            ip = f[14:]
            if ip[6] != 17:
                continue
            plen = struct.unpack_from("!H", ip, 4)[0]
            udp, src, dst = ip[40:40 + plen], ip[8:24], ip[24:40]
            pseudo = src + dst + struct.pack("!IxxxB", len(udp), 17)
            dst_s = str(ipaddress.IPv6Address(dst))
        else:
            continue
        sport, dport, ulen, check = struct.unpack_from("!HHHH", udp)
        if dport not in ports:
            continue
        where = f"{etype:#06x} to {dst_s}:{dport} len {ulen}"
        if etype == 0x0800 and ones_sum(ip[:ihl]) != 0xffff:
            problems.append(f"{where}: bad IPv4 header checksum {struct.unpack_from('!H', ip, 10)[0]:#06x}")
        if ulen != len(udp):
            problems.append(f"{where}: UDP length {ulen}, datagram {len(udp)} bytes")
        elif status & TP_STATUS_CSUMNOTREADY:
            # CHECKSUM_PARTIAL (only possible on lo, whose tx checksumming is
            # fixed on): the field must hold the folded pseudo-header sum.
            if check % 0xffff != ones_sum(pseudo) % 0xffff:
                problems.append(f"{where}: partial checksum {check:#06x}, "
                                f"pseudo header sums to {ones_sum(pseudo):#06x}")
        elif check == 0:
            problems.append(f"{where}: no UDP checksum (0)")
        elif ones_sum(pseudo + udp) != 0xffff:
            problems.append(f"{where}: bad UDP checksum {check:#06x}")
        found.append((dst_s, dport, udp[8:]))
    return found, problems
