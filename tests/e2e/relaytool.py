#!/usr/bin/env python3
"""Helpers the relay tests and benchmarks run inside lab namespaces.

    relaytool.py rx --addr A --ports 3000,3001 [--idle 1.5] [--timeout 30] [--ready F]
        receive on the ports; print one JSON object: {port: [[src, ttl, hex], ...]}
    relaytool.py tx --to A:P [--src A] [--sport P] --count N --rate R --size S [--rtp ...]
        send numbered datagrams ("D" + 7-digit index, padded), or RTP packets
    relaytool.py nf5 --to A:P --src A[,B...] --count N --rate R [--digest-only]
        NetFlow v5 export datagrams (24-byte header + 20 flow records = 984 B)
        from one exporter per source address, round robin; print {"sent", "seconds"};
        --digest-only: send nothing, print {"digest"}: the sum of the datagrams'
        hashes that `groupcast sink --digest` checks
    relaytool.py nf5 --blocks-out FILE
        send nothing; write the stream's 64 record blocks (64 x 960 bytes, raw)
        to FILE for bench/nf5_send.c, which sends the same stream faster
    relaytool.py sniff --ifname veth1 --port P --duration S
        capture IPv4/UDP to port P with a packet socket (the port may be owned
        by another process, e.g. ffmpeg); print [[ssrc, seq, ts, len], ...]
    relaytool.py ctl --to A:P --msg "JOIN 3000" [--from-port N] [--wait 1] [--pad]
        one control request (--pad: blanks up to 64 bytes); print the reply (or nothing)
    relaytool.py join --to A:P --ports 3000,3001 [--opts "rtcp=none"] [--bind A] [--wait 1]
        the handshake per port (padded JOIN, COOKIE, JOIN cookie=); print
        {port: {"cookie": HEX or null, "reply": the last reply or ""}}
    relaytool.py spoof --src A:P --to A:P (--msg TEXT [--pad] | --hex HEX)
        one UDP datagram with a forged source address and port (raw socket,
        IPv4 or IPv6); the source port may be 0
    relaytool.py lagger --origin A:P --port P --replay N --silent S --duration S
        a stand-in upstream relay that lags: it subscribes to the relay at
        --origin (control port) as a relay, answers the control protocol on
        --port + 2 after --silent seconds, and gives each new subscriber the
        last N RTP datagrams again before the live ones; prints its counts

Only the standard library; every loop is bounded by a count or a deadline.
"""
import argparse
import json
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time


def parse_hostport(s):
    if s.startswith("["):
        host, _, port = s[1:].partition("]:")
        return host, int(port)
    host, _, port = s.rpartition(":")
    return host, int(port)


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def cmd_rx(a):
    ports = [int(p) for p in a.ports.split(",") if p]
    fam = family_of(a.addr)
    socks = {}
    for p in ports:
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        if fam == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_RECVTTL", 12), 1)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, getattr(socket, "IPV6_RECVHOPLIMIT", 51), 1)
        s.bind((a.addr, p))
        s.setblocking(False)
        socks[s.fileno()] = (s, p)
    if a.ready:
        open(a.ready, "w").close()
    got = {p: [] for p in ports}
    poll = select.poll()
    for fd in socks:
        poll.register(fd, select.POLLIN)
    start = time.monotonic()
    last = None
    while True:
        now = time.monotonic()
        if now - start > a.timeout or (last is not None and now - last > a.idle):
            break
        for fd, _ in poll.poll(100):
            s, p = socks[fd]
            for _ in range(256):
                try:
                    data, anc, _, src = s.recvmsg(65536, 64)
                except BlockingIOError:
                    break
                ttl = None
                for lvl, typ, val in anc:
                    if len(val) >= 4:
                        ttl = struct.unpack("i", val[:4])[0]
                got[p].append([f"{src[0]}:{src[1]}", ttl, data.hex()])
                last = time.monotonic()
    json.dump({str(p): v for p, v in got.items()}, sys.stdout)


def rtp_packet(seq, ts, ssrc, payload, marker=False, pt=96):
    return struct.pack("!BBHII", 0x80, (0x80 if marker else 0) | pt, seq & 0xFFFF, ts & 0xFFFFFFFF, ssrc) + payload


def cmd_tx(a):
    host, port = parse_hostport(a.to)
    fam = family_of(host)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    if a.src or a.sport:
        s.bind((a.src or "", a.sport))
    interval = 1.0 / a.rate if a.rate > 0 else 0
    t0 = time.monotonic()
    ssrc, seq, ts = a.ssrc, a.seq, a.ts
    for i in range(a.count):
        if a.rtp:
            if a.restart_at and i == a.restart_at:
                ssrc, seq, ts = a.ssrc2, a.seq2, a.ts + 777777
            body = f"P{i:07d}".encode()
            pkt = rtp_packet(seq, ts, ssrc, body + bytes(max(0, a.size - 12 - len(body))))
            seq += 1
            ts += a.ts_step
        else:
            body = f"D{i:07d}".encode()
            pkt = body + bytes((j * 7 + i) & 0xFF for j in range(max(0, a.size - len(body))))
        s.sendto(pkt, (host, port))
        if interval:
            due = t0 + (i + 1) * interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    print(json.dumps({"sent": a.count, "seconds": time.monotonic() - t0, "src": s.getsockname()[:2]}))


NF5_HDR = struct.Struct("!HHIIIIBBH")              # version, count, uptime, secs, nsecs, sequence, engine, sampling
NF5_REC = struct.Struct("!IIIHHIIIIHHBBBBHHBBH")   # one flow record (48 bytes)
NF5_RECORDS = 20                                    # flows per datagram: 24 + 20 * 48 = 984 bytes
NF5_BLOCKS = 64                                     # distinct record sets, rotated


def nf5_blocks(seed=5):
    """NF5_BLOCKS sets of NF5_RECORDS flow records: flows between
    documentation addresses (198.51.100.0/24, 203.0.113.0/24; never routed),
    TCP/UDP/ICMP, plausible packet and byte counts.  Deterministic."""
    rnd = random.Random(seed)
    blocks = []
    for _ in range(NF5_BLOCKS):
        recs = []
        for _ in range(NF5_RECORDS):
            proto = rnd.choice((6, 6, 6, 17, 17, 1))
            pkts = rnd.randint(1, 5000)
            first = rnd.randint(0, 3_000_000)
            recs.append(NF5_REC.pack(
                0xC6336400 | rnd.randint(1, 254), 0xCB007100 | rnd.randint(1, 254), 0xC6336401,
                rnd.randint(1, 48), rnd.randint(1, 48), pkts, pkts * rnd.randint(40, 1500),
                first, first + rnd.randint(0, 60_000),
                rnd.randint(1024, 65535) if proto != 1 else 0, rnd.choice((53, 80, 443, 123, 22)) if proto != 1 else 0,
                0, rnd.choice((0x10, 0x18, 0x1b)) if proto == 6 else 0, proto, 0,
                rnd.randint(64496, 64511), rnd.randint(64496, 64511), 24, 24, 0))
        blocks.append(b"".join(recs))
    return blocks


def nf5_header(i, exporters):
    """The header of the i-th datagram of the stream and the index of its
    record block: exporter i % exporters, its k-th export (k = i //
    exporters); each exporter keeps its own flow sequence and clock, as a
    router does."""
    e, k = i % exporters, i // exporters
    uptime = 3_600_000 + k * 10
    hdr = NF5_HDR.pack(5, NF5_RECORDS, uptime, 1_764_288_000 + uptime // 1000, (uptime % 1000) * 1_000_000,
                       k * NF5_RECORDS, 0, e, 0)
    return hdr, (k * 7 + e) % NF5_BLOCKS


def nf5_datagram(i, exporters, blocks):
    hdr, block = nf5_header(i, exporters)
    return hdr + blocks[block]


M64 = (1 << 64) - 1
DIGEST_KEYS = 65536 // 8 + 1


def _splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


KEYS = [_splitmix64(j) | 1 for j in range(DIGEST_KEYS)]


def words_hash(d, first_word=0):
    """sum of d's little-endian 64-bit words (the last one padded with zeros)
    times K[first_word + j], mod 2^64: a part of digest_hash()."""
    d = d + bytes(-len(d) % 8)
    return sum(int.from_bytes(d[i:i + 8], "little") * KEYS[first_word + i // 8]
               for i in range(0, len(d), 8)) & M64


def digest_hash(d):
    """What `groupcast sink --digest` adds up per datagram:
    sum(w[j] * K[j]) + len * K[8192] mod 2^64, K[j] = splitmix64(j) | 1."""
    return (words_hash(d) + len(d) * KEYS[-1]) & M64


def nf5_digest(count, exporters):
    """What `groupcast sink --digest` must find on every port that got the
    first `count` datagrams of the stream from `exporters` exporters.  The
    hash is linear: each record block's part is computed once."""
    blocks = nf5_blocks()
    part = [words_hash(b, NF5_HDR.size // 8) for b in blocks]
    size = NF5_HDR.size + len(blocks[0])
    total = 0
    for i in range(count):
        hdr, block = nf5_header(i, exporters)
        total += words_hash(hdr) + part[block] + size * KEYS[-1]
    return f"{total & M64:016x}"


def write_nf5_blocks(path):
    """The record blocks of nf5_blocks(), raw, one after the other: the
    input of bench/nf5_send.c."""
    with open(path, "wb") as f:
        f.write(b"".join(nf5_blocks()))


def cmd_nf5(a):
    if a.blocks_out:
        write_nf5_blocks(a.blocks_out)
        print(json.dumps({"blocks": a.blocks_out, "bytes": NF5_BLOCKS * NF5_RECORDS * NF5_REC.size}))
        return
    if not a.src or a.count is None or a.rate is None:
        sys.exit("nf5: --src, --count and --rate are required (unless --blocks-out)")
    srcs = [x for x in a.src.split(",") if x]
    blocks = nf5_blocks()
    if a.digest_only:
        print(json.dumps({"digest": nf5_digest(a.count, len(srcs))}))
        return
    host, port = parse_hostport(a.to)
    socks = []
    for src in srcs:
        s = socket.socket(family_of(host), socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.bind((src, 0))
        socks.append(s)
    dst, interval, n = (host, port), 1.0 / a.rate, len(socks)
    # Paced to the due time of every datagram, the clock read every `step`
    # datagrams (1 below 1000/s, up to 16 at 16,000/s and more): late sends
    # catch up back to back, as an exporter's backlog would.
    step = max(1, min(16, int(a.rate // 1000)))
    sends = [s.sendto for s in socks]
    t0 = time.monotonic()
    for i in range(a.count):
        sends[i % n](nf5_datagram(i, n, blocks), dst)
        if (i + 1) % step == 0:
            delay = t0 + (i + 1) * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    print(json.dumps({"sent": a.count, "seconds": time.monotonic() - t0}))


def cmd_sniff(a):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
    s.bind((a.ifname, 0))
    s.settimeout(0.2)
    out = []
    if a.ready:
        open(a.ready, "w").close()
    end = time.monotonic() + a.duration
    while time.monotonic() < end:
        try:
            pkt = s.recv(65536)
        except socket.timeout:
            continue
        if len(pkt) < 28 or pkt[9] != 17:
            continue
        ihl = (pkt[0] & 15) * 4
        dport = struct.unpack("!H", pkt[ihl + 2:ihl + 4])[0]
        if dport != a.port:
            continue
        rtp = pkt[ihl + 8:]
        if len(rtp) >= 12:
            _, _, seq, ts, ssrc = struct.unpack("!BBHII", rtp[:12])
            out.append([ssrc, seq, ts, len(rtp)])
    json.dump(out, sys.stdout)


JOIN_MIN = 64   # a JOIN without cookie= shorter than this gets no answer


def pad(msg):
    return msg + " " * max(0, JOIN_MIN - len(msg))


def cmd_ctl(a):
    host, port = parse_hostport(a.to)
    s = socket.socket(family_of(host), socket.SOCK_DGRAM)
    if a.from_port:
        s.bind(("", a.from_port))
    s.settimeout(a.wait)
    s.sendto((pad(a.msg) if a.pad else a.msg).encode(), (host, port))
    try:
        print(s.recv(2000).decode(errors="replace").strip())
    except socket.timeout:
        pass


def handshake(s, to, ports, opts="", wait=1.0):
    """JOIN every port from socket s: padded JOIN, then JOIN with the cookie.
    Returns {port: {"cookie": hex or None, "reply": last reply text}}.
    Bounded: each phase reads until every port answered or `wait` passes."""
    out = {p: {"cookie": None, "reply": ""} for p in ports}

    def collect(want):
        end = time.monotonic() + wait
        while want and time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                text = s.recv(2000).decode(errors="replace").strip()
            except socket.timeout:
                break
            w = text.split()
            if len(w) >= 3 and w[0] == "COOKIE" and int(w[1]) in want:
                out[int(w[1])]["cookie"] = w[2]
                out[int(w[1])]["reply"] = text
                want.discard(int(w[1]))
            elif len(w) >= 4 and w[0] == "OK" and w[1] == "JOIN" and int(w[3]) in want:
                out[int(w[3])]["reply"] = text
                want.discard(int(w[3]))
            elif w and w[0] == "ERR":
                for p in list(want):   # errors name no port: charge the first waiting one
                    out[p]["reply"] = text
                    want.discard(p)
                    break

    for p in ports:
        s.sendto(pad(f"JOIN {p} {opts}".strip()).encode(), to)
    collect(set(ports))
    for p in ports:
        if out[p]["cookie"]:
            s.sendto(f"JOIN {p} {opts} cookie={out[p]['cookie']}".encode(), to)
    collect({p for p in ports if out[p]["cookie"]})
    return out


def cmd_join(a):
    host, port = parse_hostport(a.to)
    s = socket.socket(family_of(host), socket.SOCK_DGRAM)
    s.bind((a.bind or "", a.from_port))
    ports = [int(p) for p in a.ports.split(",") if p]
    json.dump({str(p): v for p, v in handshake(s, (host, port), ports, a.opts, a.wait).items()}, sys.stdout)


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    t = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF


def cmd_spoof(a):
    shost, sport = parse_hostport(a.src)
    dhost, dport = parse_hostport(a.to)
    payload = bytes.fromhex(a.hex) if a.hex else (pad(a.msg) if a.pad else a.msg).encode()
    ulen = 8 + len(payload)
    if family_of(dhost) == socket.AF_INET:
        src, dst = socket.inet_pton(socket.AF_INET, shost), socket.inet_pton(socket.AF_INET, dhost)
        pseudo = src + dst + struct.pack("!BBH", 0, 17, ulen)
        udp = struct.pack("!HHHH", sport, dport, ulen, 0)
        c = checksum(pseudo + udp + payload) or 0xFFFF
        udp = struct.pack("!HHHH", sport, dport, ulen, c)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0, 64, 17, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(ip + udp + payload, (dhost, 0))
    else:
        src, dst = socket.inet_pton(socket.AF_INET6, shost), socket.inet_pton(socket.AF_INET6, dhost)
        pseudo = src + dst + struct.pack("!I3xB", ulen, 17)
        udp = struct.pack("!HHHH", sport, dport, ulen, 0)
        c = checksum(pseudo + udp + payload) or 0xFFFF
        udp = struct.pack("!HHHH", sport, dport, ulen, c)
        ip = struct.pack("!IHBB16s16s", 6 << 28, ulen, 17, 64, src, dst)
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(ip + udp + payload, (dhost, 0))
    print(json.dumps({"sent": len(payload)}))


def cmd_lagger(a):
    host, cport = parse_hostport(a.origin)
    fam = family_of(host)
    data = socket.socket(fam, socket.SOCK_DGRAM)
    data.bind(("", a.port))
    ctl = socket.socket(fam, socket.SOCK_DGRAM)
    ctl.bind(("", a.port + 2))
    up = socket.socket(fam, socket.SOCK_DGRAM)
    up.settimeout(1.0)
    rid = "00000000000001a9"
    res = handshake(up, (host, cport), [a.port], opts=f"rtcp=none relay={rid}")[a.port]
    cookie = res["cookie"]
    recent, subs, counts = [], [], {"in": 0, "out": 0, "replayed": 0, "joins": 0}
    start = time.monotonic()
    last_keep = start
    poll = select.poll()
    poll.register(data.fileno(), select.POLLIN)
    poll.register(ctl.fileno(), select.POLLIN)
    while time.monotonic() - start < a.duration:
        now = time.monotonic()
        if now - last_keep > 0.2:
            up.sendto(f"KEEPALIVE {a.port} cookie={cookie}".encode(), (host, cport))
            last_keep = now
        for fd, _ in poll.poll(50):
            if fd == data.fileno():
                d, _ = data.recvfrom(65536)
                counts["in"] += 1
                recent = (recent + [d])[-a.replay:]
                for s in subs:
                    data.sendto(d, s)
                    counts["out"] += 1
                continue
            msg, src = ctl.recvfrom(2000)
            if now - start < a.silent:
                continue
            w = msg.decode(errors="replace").split()
            if not w:
                continue
            port = int(w[1]) if len(w) > 1 and w[1].isdigit() else src[1]
            who = f"{src[0]} {port}"
            if w[0] == "JOIN" and not any(x.startswith("cookie=") for x in w):
                ctl.sendto(f"COOKIE {port} 00000000000000aa\n".encode(), src)
            elif w[0] == "JOIN":
                ctl.sendto(f"OK JOIN {who} ssrc=0x00000000 rtcp=0 expires=30 path={rid}\n".encode(), src)
                dest = (src[0], port)
                if dest not in subs:
                    counts["joins"] += 1
                    for d in recent:      # what it sent before, again: it lags
                        data.sendto(d, dest)
                        counts["replayed"] += 1
                    subs.append(dest)
            elif w[0] == "KEEPALIVE":
                ctl.sendto(f"OK KEEPALIVE {who} expires=30 path={rid}\n".encode(), src)
            elif w[0] == "LEAVE":
                subs = [x for x in subs if x != (src[0], port)]
                ctl.sendto(f"OK LEAVE {who}\n".encode(), src)
    print(json.dumps(counts))


def start_rx(lab, ns, addr, ports, idle, timeout, ready):
    """For the tests: `rx` in namespace ns (lab.popen), once it is ready."""
    if os.path.exists(ready):
        os.unlink(ready)
    p = lab.popen(ns, [sys.executable, os.path.abspath(__file__), "rx", "--addr", addr, "--ports",
                       ",".join(map(str, ports)), "--idle", idle, "--timeout", timeout, "--ready", ready],
                  stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not os.path.exists(ready):
        assert p.poll() is None and time.monotonic() < deadline, "receiver did not start"
        time.sleep(0.02)
    os.unlink(ready)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rx = sub.add_parser("rx")
    rx.add_argument("--addr", required=True)
    rx.add_argument("--ports", required=True)
    rx.add_argument("--idle", type=float, default=1.5)
    rx.add_argument("--timeout", type=float, default=60)
    rx.add_argument("--ready")
    tx = sub.add_parser("tx")
    tx.add_argument("--to", required=True)
    tx.add_argument("--src", help="source address to bind")
    tx.add_argument("--sport", type=int, default=0, help="source port to bind")
    tx.add_argument("--count", type=int, default=100)
    tx.add_argument("--rate", type=float, default=1000)
    tx.add_argument("--size", type=int, default=100)
    tx.add_argument("--rtp", action="store_true")
    tx.add_argument("--ssrc", type=lambda x: int(x, 0), default=0x11223344)
    tx.add_argument("--seq", type=int, default=65500)
    tx.add_argument("--ts", type=int, default=1000)
    tx.add_argument("--ts-step", type=int, default=3600)
    tx.add_argument("--restart-at", type=int, default=0)
    tx.add_argument("--ssrc2", type=lambda x: int(x, 0), default=0x55667788)
    tx.add_argument("--seq2", type=int, default=100)
    nf = sub.add_parser("nf5")
    nf.add_argument("--to", default="127.0.0.1:2055")
    nf.add_argument("--src", help="comma-separated exporter addresses to bind")
    nf.add_argument("--count", type=int)
    nf.add_argument("--rate", type=float)
    nf.add_argument("--digest-only", action="store_true")
    nf.add_argument("--blocks-out", help="write the 64 record blocks (raw) to this file; send nothing")
    sn = sub.add_parser("sniff")
    sn.add_argument("--ifname", required=True)
    sn.add_argument("--port", type=int, required=True)
    sn.add_argument("--duration", type=float, required=True)
    sn.add_argument("--ready")
    ct = sub.add_parser("ctl")
    ct.add_argument("--to", required=True)
    ct.add_argument("--msg", required=True)
    ct.add_argument("--from-port", type=int, default=0)
    ct.add_argument("--wait", type=float, default=1.0)
    ct.add_argument("--pad", action="store_true")
    jn = sub.add_parser("join")
    jn.add_argument("--to", required=True)
    jn.add_argument("--ports", required=True)
    jn.add_argument("--opts", default="")
    jn.add_argument("--bind")
    jn.add_argument("--from-port", type=int, default=0)
    jn.add_argument("--wait", type=float, default=1.0)
    sp = sub.add_parser("spoof")
    sp.add_argument("--src", required=True)
    sp.add_argument("--to", required=True)
    sp.add_argument("--msg", default="")
    sp.add_argument("--hex", help="payload in hex instead of --msg")
    sp.add_argument("--pad", action="store_true")
    lg = sub.add_parser("lagger")
    lg.add_argument("--origin", required=True)
    lg.add_argument("--port", type=int, required=True)
    lg.add_argument("--replay", type=int, default=20)
    lg.add_argument("--silent", type=float, default=0)
    lg.add_argument("--duration", type=float, required=True)
    a = ap.parse_args()
    {"rx": cmd_rx, "tx": cmd_tx, "sniff": cmd_sniff, "ctl": cmd_ctl, "join": cmd_join, "nf5": cmd_nf5,
     "spoof": cmd_spoof, "lagger": cmd_lagger}[a.cmd](a)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
