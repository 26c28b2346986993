"""dccp_packet: read a DCCP packet (RFC 4340 §5) as the interop tests see it on a raw socket.

A test-side reader, independent of groupcast's own wire code, so that the two
can be checked against each other and against Linux.

    pkt = parse(dccp_bytes, src_ip, dst_ip)   # ip addresses for the checksum
    pkt.type == REQUEST, pkt.sport, pkt.dport, pkt.service, pkt.seq, pkt.checksum_ok
    pkt.options -> [(type, value bytes)], pkt.changes(CHANGE_L) -> {feature: [values]}
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from ipaddress import ip_address

REQUEST, RESPONSE, DATA, ACK, DATAACK, CLOSEREQ, CLOSE, RESET, SYNC, SYNCACK = range(10)
TYPE_NAMES = ["Request", "Response", "Data", "Ack", "DataAck", "CloseReq", "Close", "Reset", "Sync", "SyncAck"]
CHANGE_L, CONFIRM_L, CHANGE_R, CONFIRM_R = 32, 33, 34, 35
FEAT_CCID = 1
IPPROTO_DCCP = 33


class Malformed(ValueError):
    pass


@dataclass
class Packet:
    sport: int
    dport: int
    data_offset: int     # header length in bytes
    ccval: int
    cscov: int
    type: int
    x: bool
    seq: int
    ack: int | None
    service: int | None  # Request and Response
    options: list = field(default_factory=list)
    checksum_ok: bool = False
    payload: bytes = b""

    @property
    def type_name(self):
        return TYPE_NAMES[self.type] if self.type < len(TYPE_NAMES) else f"reserved({self.type})"

    def changes(self, kind: int) -> dict:
        """{feature number: [values]} of the options of type `kind`
        (Change L/R or Confirm L/R), in the order they appear."""
        out = {}
        for t, value in self.options:
            if t == kind and value:
                out.setdefault(value[0], []).append(list(value[1:]))
        return out


def checksum(pkt: bytes, src: str, dst: str, cscov: int) -> int:
    """Internet checksum over the pseudo-header and the covered bytes (§9):
    0 when the packet's own checksum field is right."""
    s, d = ip_address(src), ip_address(dst)
    if s.version == 4:
        pseudo = s.packed + d.packed + struct.pack("!BBH", 0, IPPROTO_DCCP, len(pkt))
    else:
        pseudo = s.packed + d.packed + struct.pack("!I3xB", len(pkt), IPPROTO_DCCP)
    header_len = pkt[4] * 4
    covered = len(pkt) if cscov == 0 else min(len(pkt), header_len + (cscov - 1) * 4)
    data = pseudo + pkt[:covered]
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def parse(pkt: bytes, src: str, dst: str) -> Packet:
    """Parse one DCCP packet (no IP header); raise Malformed naming the field."""
    if len(pkt) < 12:
        raise Malformed(f"packet of {len(pkt)} bytes is shorter than the generic header")
    sport, dport, doff, cc, _csum, b = struct.unpack_from("!HHBBHB", pkt)
    ptype, x = (b >> 1) & 0xF, b & 1
    hlen = doff * 4
    if hlen > len(pkt):
        raise Malformed(f"data offset {doff} words is past the packet's {len(pkt)} bytes")
    if x:
        if len(pkt) < 16:
            raise Malformed("X=1 but no room for a 48-bit sequence number")
        seq, pos = int.from_bytes(pkt[10:16], "big"), 16
    else:
        seq, pos = int.from_bytes(pkt[9:12], "big"), 12
    ack = service = None
    if ptype == REQUEST:
        service, pos = struct.unpack_from("!I", pkt, pos)[0], pos + 4
    elif ptype != DATA:
        n = 8 if x else 4  # acknowledgement subheader (§5.3)
        ack, pos = int.from_bytes(pkt[pos + (2 if x else 1):pos + n], "big"), pos + n
        if ptype == RESPONSE:
            service, pos = struct.unpack_from("!I", pkt, pos)[0], pos + 4
        elif ptype == RESET:
            pos += 4  # reset code and data 1..3
    if pos > hlen:
        raise Malformed(f"{TYPE_NAMES[ptype] if ptype < 10 else ptype} header needs {pos} bytes, "
                        f"data offset says {hlen}")
    options = []
    while pos < hlen:
        t = pkt[pos]
        if t < 32:  # single-byte options
            options.append((t, b""))
            pos += 1
            continue
        if pos + 1 >= hlen or pkt[pos + 1] < 2 or pos + pkt[pos + 1] > hlen:
            raise Malformed(f"option {t} at byte {pos}: bad length")
        options.append((t, pkt[pos + 2:pos + pkt[pos + 1]]))
        pos += pkt[pos + 1]
    return Packet(sport, dport, hlen, cc >> 4, cc & 0xF, ptype, bool(x), seq, ack, service, options,
                  checksum(pkt, src, dst, cc & 0xF) == 0, pkt[hlen:])
