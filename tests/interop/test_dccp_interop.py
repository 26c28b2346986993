"""groupcast's DCCP against Linux 6.1's, with tshark as the judge (issue 14).

Every run crosses the tap link between the lab namespace (groupcast's
`groupcast dccp` CLI, native DCCP over a raw protocol-33 socket) and the
Linux 6.1 guest (tests/interop/dccp_peer.c on the kernel's DCCP sockets):

- our client -> Linux server and Linux client -> our server,
- CCID 2 and CCID 3,
- 0 % and 5 % loss, dropped at random in both directions on the tap by
  bpf/loss.bpf.c (the host has no netem),
- a burst of lost data, and Sync after a burst of lost Acks (both directions),

each captured whole with tcpdump on the tap and judged twice: tshark (as
nobody, checksums verified) must decode every packet with no expert info,
and dccp_packet.py reads the same capture for the handshake's feature
negotiation (Change/Confirm of the CCID both ways, and Send NDP Count: our
end asks the other for NDP Count with Change R(7, 1), RFC 4340 §7.7.2), the
packet types, the Syncs, the Ack Vectors (CCID 2) and CCID 3's receiver
options (192-194).

A Linux <-> Linux control in the guest (netem loss on its loopback) shows
that the peer program and the accounting give what the assertions expect
before groupcast's side is blamed.

DCCP-UDP (RFC 6773) has no Linux peer; tests/e2e covers it own-vs-own.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import dccp_packet as dp
from capture import DCCP_UDP_PORT, UDP_LUA, Capture, tshark

REPO = Path(__file__).resolve().parents[2]
COUNT = 300
SIZE = 500
LOSS = 0.05
# Option types (RFC 4340 §5.8, RFC 4342 §8.5-8.6)
OPT_CHANGE_L, OPT_CONFIRM_L, OPT_CHANGE_R, OPT_CONFIRM_R = 32, 33, 34, 35
OPT_NDP_COUNT, OPT_ACK_VECTOR0, OPT_ACK_VECTOR1 = 37, 38, 39
OPT_TIMESTAMP, OPT_TS_ECHO = 41, 42
FEAT_SEND_NDP_COUNT = 7
OPT_LOSS_EVENT_RATE, OPT_LOSS_INTERVALS, OPT_RECEIVE_RATE = 192, 193, 194
BAD_EXPERT = ("dccp.bad_checksum", "dccp.option.len.bad", "dccp.advertised_header_length.bad")


def build_dir() -> Path:
    return Path(os.environ.get("GC_BUILD_DIR", REPO / "build"))


@pytest.fixture(scope="module")
def gc_tool():
    tool, loss = build_dir() / "tools" / "groupcast", build_dir() / "bpf" / "loss.bpf.o"
    for p in (tool, loss):
        if not p.exists():
            pytest.fail(f"{p} missing: build first (cmake --build build), or set GC_BUILD_DIR")
    return tool, loss


# -- the capture, read by our own parser ----------------------------------------

def _dccp_bytes(proto: int, payload: bytes) -> bytes | None:
    """The DCCP packet in an IP payload: protocol 33, or UDP to or from 6511 (RFC 6773)."""
    if proto == dp.IPPROTO_DCCP:
        return payload
    if proto == 17 and DCCP_UDP_PORT in struct.unpack_from("!HH", payload):
        return payload[8:]
    return None


def read_pcap(pcap: Path) -> list[tuple[str, str, bytes]]:
    """(src, dst, DCCP bytes) of every native or DCCP-UDP packet of an
    Ethernet pcap (tcpdump on the tap or a veth)."""
    return [(src, dst, pkt) for _, src, dst, pkt in read_pcap_timed(pcap)]


def read_pcap_timed(pcap: Path) -> list[tuple[float, str, str, bytes]]:
    """read_pcap() with each packet's capture time (s) first."""
    data = pcap.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), f"{pcap}: not a little-endian pcap"
    assert struct.unpack_from("<I", data, 20)[0] == 1, "expected LINKTYPE_ETHERNET"
    off, out = 24, []
    while off + 16 <= len(data):
        sec, usec, incl = struct.unpack_from("<III", data, off)
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        etype = struct.unpack_from("!H", frame, 12)[0]
        ip = frame[14:]
        if etype == 0x0800:
            ihl, total = (ip[0] & 0xF) * 4, struct.unpack_from("!H", ip, 2)[0]
            pkt = _dccp_bytes(ip[9], ip[ihl:total])
            src, dst = socket.inet_ntop(socket.AF_INET, ip[12:16]), socket.inet_ntop(socket.AF_INET, ip[16:20])
        elif etype == 0x86DD:
            plen = struct.unpack_from("!H", ip, 4)[0]
            pkt = _dccp_bytes(ip[6], ip[40:40 + plen])
            src, dst = socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(socket.AF_INET6, ip[24:40])
        else:
            continue
        if pkt is not None:
            out.append((sec + usec / (1e9 if magic == 0xA1B23C4D else 1e6), src, dst, pkt))
    return out


def data_times(pcap: Path, sender: str) -> list[float]:
    """Capture times of the Data and DataAck packets from address sender."""
    return [t for t, src, _, raw in read_pcap_timed(pcap)
            if src == sender and dp.parse(raw, src, _).type in (dp.DATA, dp.DATAACK)]


def judge(pcap: Path, client: str, ccid: int, ours: tuple, udp: bool = False, lossy: bool = False) -> dict:
    """Judge a captured connection (ours: the sides that are groupcast,
    "client" and/or "server"); returns what it saw for more specific
    assertions: {"types": {name: count}, "syncs": n, "resets": [codes],
    "ccid_confirmed": {...}, "client_opts": set, "server_opts": set}."""
    # 1. tshark: every DCCP packet decodes, checksum good, no expert info at all.
    # DCCP-UDP: the UDP checksum is the only one (RFC 6773 §3.3; tshark would
    # check the zero DCCP field against the native pseudo-header, see test_dccp_wire.py).
    prefs = ("udp.check_checksum:TRUE", "dccp.check_checksum:FALSE") if udp else ("dccp.check_checksum:TRUE",)
    lua = UDP_LUA if udp else None
    status = "udp.checksum.status" if udp else "dccp.checksum.status"
    rows = tshark(pcap, ["frame.number", "dccp.type", status, "dccp.option_type",
                         "dccp.reset_code", "_ws.expert", "_ws.expert.message", "_ws.malformed"],
                  display_filter="dccp or _ws.malformed", prefs=prefs, lua=lua)
    assert rows, f"{pcap}: tshark found no DCCP packet"
    for r in rows:
        assert r[status] == "1", r  # Good
        assert r["_ws.expert"] == "" and r["_ws.expert.message"] == "" and r["_ws.malformed"] == "", r
    bad = tshark(pcap, ["frame.number"], display_filter=" or ".join(BAD_EXPERT), prefs=prefs, lua=lua)
    assert bad == [], bad

    # 2. our parser: the same packets, their options and the negotiation.
    pkts = []
    for src, dst, raw in read_pcap(pcap):
        p = dp.parse(raw, src, dst)
        assert p.checksum_ok or udp, (src, dst, p)
        pkts.append((src == client, p))
    assert len(pkts) == len(rows), "tshark and dccp_packet saw different packet counts"
    assert [p.type for _, p in pkts] == [int(r["dccp.type"]) for r in rows]
    seen = {"types": {}, "client_opts": set(), "server_opts": set(), "syncs": 0, "resets": [],
            "confirm": {}, "change": {}}
    for from_client, p in pkts:
        seen["types"][p.type_name] = seen["types"].get(p.type_name, 0) + 1
        seen["client_opts" if from_client else "server_opts"].update(t for t, _ in p.options)
        side = "client" if from_client else "server"
        for kind in (OPT_CHANGE_L, OPT_CHANGE_R, OPT_CONFIRM_L, OPT_CONFIRM_R):
            for feat, vals in p.changes(kind).items():
                bucket = "confirm" if kind in (OPT_CONFIRM_L, OPT_CONFIRM_R) else "change"
                seen[bucket].setdefault((side, kind, feat), []).extend(vals)
        if p.type == dp.SYNC:
            seen["syncs"] += 1
    # Reset codes from tshark (dccp_packet keeps no Reset fields).
    seen["resets"] = [int(r["dccp.reset_code"]) for r in rows if r["dccp.type"] == "7"]

    # 3. The connection: handshake, data, close.
    t = seen["types"]
    assert pkts[0][0] and pkts[0][1].type == dp.REQUEST, "the capture starts with the client's Request"
    assert t.get("Response", 0) >= 1 and t.get("Ack", 0) >= 1, t
    assert t.get("Data", 0) + t.get("DataAck", 0) >= 1, t
    assert t.get("Close", 0) + t.get("CloseReq", 0) >= 1 or 1 in seen["resets"], t
    # The Reset that answers Close leaves through the tap's egress filter before
    # tcpdump sees it: under loss it can vanish from the capture (about 1 run
    # in 20), and the closer then repeats its Close; the answering side has
    # gone by then, so the closer, unanswered, may end with Reset code 2
    # (Aborted).  Otherwise the Reset must be code 1, Closed.
    assert 1 in seen["resets"] or (lossy and set(seen["resets"]) <= {2} and t.get("Close", 0) >= 2), \
        f"no Reset code 1 (Closed): {seen['resets']} {t}"
    # The client asked for the CCID on both half-connections, the server confirmed it (RFC 4340 §10).
    for kind in (OPT_CHANGE_L, OPT_CHANGE_R):
        asked = seen["change"].get(("client", kind, dp.FEAT_CCID))
        assert asked and asked[0][0] == ccid, (kind, seen["change"])
    confirmed = {k: v for k, v in seen["confirm"].items() if k[0] == "server" and k[2] == dp.FEAT_CCID}
    assert confirmed, f"the server confirmed no CCID: {seen['confirm']}"
    for vals in confirmed.values():
        assert all(v[0] == ccid for v in vals), confirmed
    # Send NDP Count (RFC 4340 §7.7.2): each of our ends asks the other with
    # Change R(Send NDP Count, 1) during the handshake (the client on its
    # Request, our stateless listener on its Response), the other confirms 1
    # (Confirm L) and from then on puts NDP Count on a packet after its
    # non-data ones (Linux 6.1: dccp_hdlr_ndp), which our loss count needs.
    for side in ours:
        other = "server" if side == "client" else "client"
        asked = seen["change"].get((side, OPT_CHANGE_R, FEAT_SEND_NDP_COUNT))
        assert asked and all(v == [1] for v in asked), (side, seen["change"])
        # Linux 6.1's CCID 3 server overrides our Change with its own (CCID 3
        # needs NDP Count, RFC 4342 §6.1: dccp_feat_propagate_ccid pushes
        # Change L(7, 1) over the Confirm it owed us); we confirm that one.
        conf = seen["confirm"].get((other, OPT_CONFIRM_L, FEAT_SEND_NDP_COUNT))
        theirs = seen["change"].get((other, OPT_CHANGE_L, FEAT_SEND_NDP_COUNT))
        ours_conf = seen["confirm"].get((side, OPT_CONFIRM_R, FEAT_SEND_NDP_COUNT))
        assert (conf and all(v[0] == 1 for v in conf)) or \
            (theirs and theirs[0][0] == 1 and ours_conf and all(v[0] == 1 for v in ours_conf)), \
            (other, seen["change"], seen["confirm"])
        assert OPT_NDP_COUNT in seen[f"{other}_opts"], sorted(seen[f"{other}_opts"])
    # tshark shows the same: the packets naming feature 7 (our Change R, the
    # peer's Confirm L) and the peer's NDP Counts
    def rows_of(flt):
        return tshark(pcap, ["ip.src", "ipv6.src", "dccp.option_type", "dccp.ndp_count"],
                      display_filter=flt, prefs=prefs, lua=lua)
    feat7, ndp = rows_of(f"dccp.feature_number == {FEAT_SEND_NDP_COUNT}"), rows_of("dccp.ndp_count")
    for side in ours:
        def from_us(r):
            return ((r["ip.src"] or r["ipv6.src"]) == client) == (side == "client")
        assert any(str(OPT_CHANGE_R) in r["dccp.option_type"].split(",") for r in feat7 if from_us(r)), \
            f"tshark: no Change R(Send NDP Count) from our {side}: {feat7}"
        assert any({str(OPT_CONFIRM_L), str(OPT_CHANGE_L)} & set(r["dccp.option_type"].split(","))
                   for r in feat7 if not from_us(r)), \
            f"tshark: our {side}'s peer neither confirmed nor offered Send NDP Count: {feat7}"
        assert any(not from_us(r) for r in ndp), f"tshark: our {side}'s peer sent no NDP Count"
    # CCID-specific options: Ack Vectors from the CCID 2 receiver (the server);
    # Loss Event Rate and Receive Rate from the CCID 3 receiver (Loss Intervals only after a loss).
    if ccid == 2:
        assert seen["server_opts"] & {OPT_ACK_VECTOR0, OPT_ACK_VECTOR1}, sorted(seen["server_opts"])
    else:
        assert {OPT_LOSS_EVENT_RATE, OPT_RECEIVE_RATE} <= seen["server_opts"], sorted(seen["server_opts"])
    return seen


# -- the runs ---------------------------------------------------------------------

class LossOnTap:
    """bpf/loss.bpf.c on the tap, both directions; removed on exit."""

    def __init__(self, guest, obj: Path, fraction: float):
        self.guest, self.obj, self.fraction, self.losses = guest, obj, fraction, []

    def __enter__(self):
        if self.fraction:
            for direction in ("ingress", "egress"):
                self.losses.append(self.guest.lab.add_loss(self.guest.ns, self.guest.tap, self.fraction,
                                                           str(self.obj), direction))
        return self

    def counts(self) -> tuple[int, int]:
        seen = dropped = 0
        for loss in self.losses:
            s, d = loss.counts()
            seen, dropped = seen + s, dropped + d
        return seen, dropped

    def __exit__(self, *exc):
        if self.losses:
            self.guest.lab.run(self.guest.ns, ["tc", "qdisc", "del", "dev", self.guest.tap, "clsact"],
                               check=False, capture_output=True)


def gc_json(proc: subprocess.Popen, timeout: float) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"groupcast dccp printed no JSON (rc {proc.returncode}): {out!r} {err!r}"
    return proc.returncode, json.loads(lines[-1]), err


def addrs(guest, family):
    """(our address, Linux's address, how the CLI writes Linux's / ours with a port)."""
    if family == 4:
        return guest.host_v4, guest.guest_v4, f"{guest.guest_v4}:", f"{guest.host_v4}:"
    return guest.host_v6, guest.guest_v6, f"[{guest.guest_v6}]:", f"[{guest.host_v6}]:"


def run_gc_to_linux(guest, gc_tool, ccid, loss, tmp_path, port, family=4, count=COUNT, size=SIZE, rate=1000):
    """rate: our sender's packets per second (None: as fast as the CCID allows)."""
    tool, obj = gc_tool
    bind = "0.0.0.0" if family == 4 else "::"
    srv = guest.start(f"dccp_peer server {port} --bind {bind} --ccid {ccid} --count {count} --rcvbuf {1 << 22} "
                      f"--payload gc --timeout-ms 40000", timeout=60)
    guest.wait_output(srv, "listening")
    with Capture(guest.lab, guest.ns, guest.tap, tmp_path / "run.pcap") as cap, \
            LossOnTap(guest, obj, loss) as lt:
        # 1 ms pacing: Linux 6.1's CCID 3 receiver misbehaves at sub-millisecond intervals (test_linux61.py).
        pace = ["--rate", rate] if rate else []
        proc = guest.lab.popen(guest.ns, [tool, "dccp", "send", f"{addrs(guest, family)[2]}{port}", "--ccid", ccid,
                                          "--count", count, "--size", size, *pace, "--timeout", 30],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rc, ours, err = gc_json(proc, 60)
        linux = srv.wait(timeout=60, check=False)
        counts = lt.counts()
    return rc, ours, err, linux, cap.pcap, counts


def run_linux_to_gc(guest, gc_tool, ccid, loss, tmp_path, port, family=4, count=COUNT, size=SIZE, interval_us=1000):
    """interval_us: between the Linux client's packets (0: as fast as its socket takes them)."""
    tool, obj = gc_tool
    ours_addr, _, _, listen_at = addrs(guest, family)
    # A raw socket of one family: our listener takes its address, not a wildcard of the other family.
    proc = guest.lab.popen(guest.ns, [tool, "dccp", "listen", f"{listen_at}{port}", "--ccid", ccid,
                                      "--count", count, "--timeout", 40],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "listening"
    with Capture(guest.lab, guest.ns, guest.tap, tmp_path / "run.pcap") as cap, \
            LossOnTap(guest, obj, loss) as lt:
        cli = guest.run(f"dccp_peer client {ours_addr} {port} --ccid {ccid} --count {count} --size {size} "
                        f"--interval-us {interval_us} --payload gc --timeout-ms 40000", timeout=60, check=False)
        rc, ours, err = gc_json(proc, 60)
        counts = lt.counts()
    return rc, ours, err, cli, cap.pcap, counts


def check_loss_counts(loss, counts):
    seen, dropped = counts
    if not loss:
        assert dropped == 0
        return
    # The filter really dropped about LOSS of what crossed the tap (binomial, generous bounds).
    assert seen >= 2 * COUNT // 3 and 0.01 * seen <= dropped <= 0.12 * seen, counts


def set_loss(guest, fraction: float, direction: str = "egress"):
    """Change the drop fraction of the loss filter on the tap's egress (towards
    the guest) or ingress (from it) (Lab.add_loss put it there)."""
    shown = json.loads(guest.lab.run(guest.ns, ["tc", "-j", "filter", "show", "dev", guest.tap, direction, "prio", "1"],
                                     capture_output=True, text=True).stdout)
    prog = next(f["options"]["prog"]["id"] for f in shown if "options" in f)
    for mid in json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog)], check=True,
                                         capture_output=True, text=True).stdout)["map_ids"]:
        info = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "id", str(mid)], check=True,
                                         capture_output=True, text=True).stdout)
        if info["name"] == "loss_cfg":
            threshold = min(int(fraction * 2**32), 2**32 - 1)
            subprocess.run(["bpftool", "map", "update", "id", str(mid), "key", "0", "0", "0", "0", "value",
                            *[str(b) for b in threshold.to_bytes(4, "little")]], check=True, capture_output=True)
            return
    raise AssertionError("no loss_cfg map on the tap's loss filter")


# IPv6 at 0 % loss only: the loss runs are the same code paths, and each run costs ~5 s of TCG.
CASES = [pytest.param(ccid, loss, fam, id=f"ccid{ccid}-loss{int(loss * 100)}-ipv{fam}")
         for ccid in (2, 3) for loss, fam in ((0, 4), (LOSS, 4), (0, 6))]


@pytest.mark.parametrize("ccid,loss,family", CASES)
def test_gc_client_to_linux_server(guest, gc_tool, ccid, loss, family, tmp_path):
    port = 5200 + 10 * ccid + int(loss * 100) + family
    rc, ours, err, linux, pcap, counts = run_gc_to_linux(guest, gc_tool, ccid, loss, tmp_path, port, family)
    s = linux.json
    detail = json.dumps({"ours": ours, "linux": s, "stderr": err[-2000:], "loss": counts})
    assert rc == 0 and s is not None and linux.rc == 0, detail
    assert s["accepted"] and s["family"] == family and (s["tx_ccid"], s["rx_ccid"]) == (ccid, ccid), detail
    assert s["corrupt"] == 0 and s["duplicates"] == 0 and s["short"] == 0, detail
    assert ours["sent"] == COUNT and ours["queued"] == COUNT, detail
    # What Linux received and what it saw missing add up to what we sent
    # (the tail after the last delivered packet is invisible to it).
    assert s["received"] + s["lost"] <= COUNT and s["distinct"] == s["received"], detail
    if not loss:
        assert s["received"] == COUNT and s["lost"] == 0, detail
    else:
        assert COUNT * 0.75 <= s["received"] < COUNT and s["lost"] >= 1, detail
    check_loss_counts(loss, counts)
    seen = judge(pcap, addrs(guest, family)[0], ccid, ("client",), lossy=bool(loss))
    print(f"ccid {ccid} loss {loss}: linux {s}, ours {ours}, capture {seen['types']} syncs {seen['syncs']}")


@pytest.mark.parametrize("ccid,loss,family", CASES)
def test_linux_client_to_gc_server(guest, gc_tool, ccid, loss, family, tmp_path):
    port = 5300 + 10 * ccid + int(loss * 100) + family
    rc, ours, err, cli, pcap, counts = run_linux_to_gc(guest, gc_tool, ccid, loss, tmp_path, port, family)
    c = cli.json
    detail = json.dumps({"ours": ours, "linux": c, "linux_output": cli.output[-2000:], "stderr": err[-2000:],
                         "loss": counts})
    assert rc == 0 and c is not None and cli.rc == 0, detail
    assert c["sent"] == COUNT and c["family"] == family and (c["tx_ccid"], c["rx_ccid"]) == (ccid, ccid), detail
    assert ours["accepted"] and ours["corrupt"] == 0, detail
    # Our listener learns losses from sequence numbers and the NDP Counts
    # Linux sends because we asked for them (Change R(Send NDP Count, 1) on
    # our Response): Linux's pure Acks are not taken for lost data.
    assert ours["received"] + ours["lost"] <= COUNT, detail
    if not loss:
        assert ours["received"] == COUNT and ours["lost"] == 0, detail
    else:
        assert COUNT * 0.75 <= ours["received"] < COUNT and ours["lost"] >= 1, detail
    check_loss_counts(loss, counts)
    seen = judge(pcap, addrs(guest, family)[1], ccid, ("server",), lossy=bool(loss))
    print(f"ccid {ccid} loss {loss}: ours {ours}, linux {c}, capture {seen['types']} syncs {seen['syncs']}")
    linux_addr = addrs(guest, family)[1]
    check_timestamp_echo(pcap, linux_addr, ccid, loss)
    if ccid == 2:
        check_vectors_pruned(pcap, linux_addr)


def _packets(pcap: Path, peer: str) -> list[tuple[bool, dp.Packet]]:
    """(from peer, packet) for every DCCP packet of the capture, in order."""
    return [(src == peer, dp.parse(raw, src, dst)) for src, dst, raw in read_pcap(pcap)]


def check_timestamp_echo(pcap: Path, linux: str, ccid: int, loss: float):
    """RFC 4340 §13.3 (issue 19): Linux's Request carries a Timestamp; our
    Response echoes it, which gives Linux's CCID 3 sender its first RTT
    (dccps_syn_rtt) instead of the 1 s fallback of one packet a second: its
    second data packet leaves within a few RTTs of its first (it was
    1.007-1.031 s without the echo)."""
    pkts = _packets(pcap, linux)
    # Each Response echoes the Request it answers: the latest before it (with
    # loss, Linux's first Request may be lost and its retransmission answered).
    ts, nresp = None, 0
    for frm, p in pkts:
        if frm and p.type == dp.REQUEST:
            ts = [v for t, v in p.options if t == OPT_TIMESTAMP]
            assert ts, f"Linux's Request carries no Timestamp: {p.options}"
        elif not frm and p.type == dp.RESPONSE:
            assert ts, "our Response came before any Request in the capture"
            echoes = [v for t, v in p.options if t == OPT_TS_ECHO]
            assert len(echoes) == 1 and echoes[0][:4] == ts[-1], (p.options, ts)
            nresp += 1
    assert nresp, "no Response of ours in the capture"
    if ccid != 3 or loss:
        return
    times = [float(r["frame.time_relative"]) for r in
             tshark(pcap, ["frame.time_relative"],
                    display_filter=f"{'ipv6' if ':' in linux else 'ip'}.src == {linux} and (dccp.type == 2 or dccp.type == 4)",
                    prefs=("dccp.check_checksum:TRUE",))]
    assert len(times) >= 2, times
    # "a few RTTs": the RTT here is a few ms (TCG guest); 1 s is the fallback
    assert times[1] - times[0] < 0.2, f"Linux's second data packet left {times[1] - times[0]:.3f} s after its first"
    print(f"Linux's CCID 3 sender: second data packet {1000 * (times[1] - times[0]):.1f} ms after the first")


def check_vectors_pruned(pcap: Path, linux: str):
    """Acks of Acks (RFC 4340 §11.4, issue 19): Linux's DataAcks acknowledge
    our Acks, so each Ack Vector of ours describes only the packets since the
    last Ack Linux got, never the whole transfer (COUNT packets) as it did
    when conn.c could not tell which of its Acks Linux had acknowledged."""
    spans = []
    for frm, p in _packets(pcap, linux):
        if frm or p.type not in (dp.ACK, dp.DATAACK):
            continue
        span = sum((b & 0x3F) + 1 for t, v in p.options if t in (OPT_ACK_VECTOR0, OPT_ACK_VECTOR1) for b in v)
        if span:
            spans.append(span)
    assert len(spans) >= 10, spans
    assert max(spans) <= 64, f"an Ack Vector of ours described {max(spans)} packets: {spans[-20:]}"
    print(f"our Ack Vectors: {len(spans)}, spans up to {max(spans)} packets")


HEAVY_LOSS, HEAVY_COUNT = 0.10, 1000


@pytest.mark.parametrize("family", [4, 6])
def test_gc_ccid2_sender_under_heavy_loss(guest, gc_tool, family, tmp_path):
    """Issue 19: our CCID 2 sender, as fast as it may, to Linux's receiver
    (an Ack every Ack Ratio data packets, no delayed-ack timer) with 10 %
    loss each way.  It used to stall on RTOs backed off to seconds, one
    packet per backoff (10-17 s of gaps over 100 ms in 2000 packets), and
    to write off as lost packets that had arrived.  Bounded, not timed: the
    transfer finishes with less than 5 s of gaps over 100 ms in all (the old
    code: 6.4-7.8 s in 1000 packets) and none of 3.5 s (room for the RTO of
    1 s and its doubling before the first RTT sample, RFC 4341 §5 / RFC 6298,
    when the first packets or their Acks are lost: seen once, 1.0 + 2.0 s;
    and for the guest's own pauses under TCG, which stall Linux's sender
    too), and our sender counts no more lost than the receiver missed (1 % of
    slack for Linux's Ack Vectors)."""
    port = 5480 + family
    # One retry, said aloud: before the first RTT sample the RTO is 1 s and
    # doubles (RFC 6298), so when the lone probe or its Ack is lost three
    # times running (about 0.7 % of runs at 10 % loss each way, more when a
    # whole UDP_SEGMENT batch is one dropped skb on the tap) the gaps are
    # 1 + 2 + 4 s: 2 of 76 runs here.  The old code fails every attempt
    # (6.4-7.8 s of gaps each time).
    for attempt in (1, 2):
        try:
            _heavy_loss_once(guest, gc_tool, family, tmp_path / f"a{attempt}", port + 10 * (attempt - 1))
            return
        except AssertionError as e:
            if attempt == 2:
                raise
            print(f"IPv{family}: attempt 1 failed, retrying once: {str(e)[:300]}")


def _heavy_loss_once(guest, gc_tool, family, tmp_path, port):
    tmp_path.mkdir()
    rc, ours, err, linux, pcap, counts = run_gc_to_linux(guest, gc_tool, 2, HEAVY_LOSS, tmp_path, port, family,
                                                         count=HEAVY_COUNT, size=1000, rate=None)
    s = linux.json
    detail = json.dumps({"ours": ours, "linux": s, "stderr": err[-2000:], "loss": counts})
    assert s and s["corrupt"] == 0 and s["duplicates"] == 0, detail
    seen, dropped = counts
    assert 0.05 * seen <= dropped <= 0.15 * seen, counts
    t = data_times(pcap, addrs(guest, family)[0])
    gaps = [b - a for a, b in zip(t, t[1:]) if b - a > 0.1]
    assert max(gaps, default=0) < 3.5 and sum(gaps) < 5.0, (sorted(gaps)[-5:], len(gaps), sum(gaps), detail)
    assert rc == 0 and ours["sent"] == HEAVY_COUNT and s["received"] >= HEAVY_COUNT * 0.7, detail
    missed = HEAVY_COUNT - s["received"]
    assert ours["acked"] <= s["received"] and ours["lost"] <= missed + HEAVY_COUNT // 100, detail
    print(f"IPv{family}: {len(t)} data packets captured in {t[-1] - t[0]:.2f} s, {len(gaps)} gaps over 100 ms "
          f"({sum(gaps):.2f} s); ours {ours}, linux received {s['received']}")


@pytest.mark.parametrize("ccid", [2, 3])
def test_control_linux_to_linux_with_loss(guest, ccid):
    """Control: the guest's own DCCP on its loopback with 5 % netem loss.
    The accounting the tests above assert holds between two Linux ends."""
    guest.run(f"tc qdisc add dev lo root netem loss {int(LOSS * 100)}%")
    try:
        port = 5400 + ccid
        srv = guest.start(f"dccp_peer server {port} --ccid {ccid} --count {COUNT} --rcvbuf {1 << 22} "
                          f"--payload gc --timeout-ms 40000", timeout=60)
        guest.wait_output(srv, "listening")
        cli = guest.run(f"dccp_peer client 127.0.0.1 {port} --ccid {ccid} --count {COUNT} --size {SIZE} "
                        f"--interval-us 1000 --payload gc --timeout-ms 40000", timeout=60).json
        s = srv.wait(timeout=60, check=False).json
    finally:
        guest.run("tc qdisc del dev lo root")
    detail = json.dumps([s, cli])
    assert cli["sent"] == COUNT and s["corrupt"] == 0 and s["duplicates"] == 0, detail
    assert s["received"] + s["lost"] <= COUNT and COUNT * 0.75 <= s["received"] < COUNT, detail
    assert s["lost"] >= 1, detail


# Linux <-> Linux (guest loopback, netem loss 100 % for 0.5 s) recovers: all 1500 sent, 9 lost.
# Linux's Ack Vector after the gap reaches 2 packets below our ISS (e.g. ack
# ...145: 01 cb ff ff ff 3f x7 = 2 + 204 + 448 packets); CCID 2 once dropped
# such an ack whole and stalled on RTO expiries.  It now takes the part above
# ISS (lib/dccp/options.h, dccp_vec_iter.clipped).
@pytest.mark.parametrize("ccid", [2, 3])
def test_burst_loss(guest, gc_tool, ccid, tmp_path):
    """Every packet from our sender to the Linux server dropped for 0.5 s.
    Our client asks for Sequence Window 5120, so Linux's validity window
    (GSR + 3W/4) covers the ~500-packet gap and no Sync is due (RFC 4340
    §7.5); any Sync in the capture must get a SyncAck.  CCID 2 must recover
    and finish; CCID 3 must follow the loss event rate Linux's receiver
    reports (Linux 6.1 reports p = 1 after such a gap, which leaves CCID 3 at
    its minimum rate: the run is cut short by --timeout)."""
    tool, obj = gc_tool
    count, port = 1500, 5500 + ccid
    srv = guest.start(f"dccp_peer server {port} --ccid {ccid} --count {count} --rcvbuf {1 << 22} "
                      f"--payload gc --timeout-ms 40000", timeout=60)
    guest.wait_output(srv, "listening")
    with Capture(guest.lab, guest.ns, guest.tap, tmp_path / "run.pcap") as cap:
        # The filter is in place (dropping nothing) before the run; the burst only flips its threshold.
        guest.lab.add_loss(guest.ns, guest.tap, 0.0, str(obj), "egress")
        try:
            proc = guest.lab.popen(guest.ns, [tool, "dccp", "send", f"{guest.guest_v4}:{port}", "--ccid", ccid,
                                              "--count", count, "--size", SIZE, "--rate", 1000, "--timeout", 12],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            set_loss(guest, 1.0)  # everything towards the guest, for 0.5 s
            time.sleep(0.5)
            set_loss(guest, 0.0)
            rc, ours, err = gc_json(proc, 60)
            linux = srv.wait(timeout=60, check=False)
        finally:
            guest.lab.run(guest.ns, ["tc", "qdisc", "del", "dev", guest.tap, "clsact"], capture_output=True)
    s = linux.json
    detail = json.dumps({"ours": ours, "linux": s, "stderr": err[-2000:]})
    print(f"ccid {ccid} burst: {detail}")
    assert linux.rc == 0 and s["corrupt"] == 0 and s["duplicates"] == 0, detail
    # the burst: CCID 3 keeps sending at its rate into it (hundreds lost);
    # CCID 2 loses what its window had in flight and waits, as Linux's own
    # CCID 2 does (Linux <-> Linux: 9 lost)
    assert s["received"] + s["lost"] <= count and s["lost"] >= (100 if ccid == 3 else 1), detail
    rows = [r for r in tshark(cap.pcap, ["ip.src", "dccp.type"]) if r["dccp.type"] in ("8", "9")]
    syncs = [r for r in rows if r["dccp.type"] == "8"]
    sync_acks = [r for r in rows if r["dccp.type"] == "9"]
    assert len(sync_acks) >= (1 if syncs else 0) and ours["syncs"] >= 0, (rows, detail)
    if ccid == 3:
        # Our sender runs on the p that Linux's receiver reports (p scaled by 1e6 in Linux's tfrc_rx_info).
        assert abs(ours["p"] - s["tfrc_rx"]["p"] / 1e6) < 0.01, detail
        return
    judge(cap.pcap, guest.host_v4, ccid, ("client",))
    assert rc == 0 and s["max_seq"] == count - 1 and s["received"] >= count - 600, detail


def test_ccid3_initial_feedback_lost(guest, gc_tool, tmp_path):
    """Our CCID 3 client with Linux's first Acks lost: every DCCP-Ack from the
    guest (its CCID 3 feedback; the Response, type 1, passes) dropped for the
    first 2.5 s.  Linux's receiver sends periodic feedback only when CCVal
    moved more than 3 windows (RFC 4342 §10.3), so our window counter must
    run before any feedback, on the handshake's RTT (§8.1); it once stood
    still until the first feedback, and the run never left PARTOPEN, X
    halving on the nofeedback timer (CI, ccid3-loss5: 9 of 300 sent)."""
    tool, obj = gc_tool
    count, port = 300, 5520
    srv = guest.start(f"dccp_peer server {port} --ccid 3 --count {count} --rcvbuf {1 << 22} "
                      f"--payload gc --timeout-ms 40000", timeout=60)
    guest.wait_output(srv, "listening")
    try:
        # DCCP's type byte (Res:3 Type:4 X:1) in IPv4 without options: 20 + 8; Ack is type 3
        acks = guest.lab.add_loss(guest.ns, guest.tap, 1.0, str(obj), "ingress", match=(28, 0x1E, 3 << 1))
        proc = guest.lab.popen(guest.ns, [tool, "dccp", "send", f"{guest.guest_v4}:{port}", "--ccid", 3,
                                          "--count", count, "--size", SIZE, "--rate", 1000, "--timeout", 15],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        set_loss(guest, 0.0, "ingress")
        dropped = acks.counts()[1]
        rc, ours, err = gc_json(proc, 60)
        linux = srv.wait(timeout=60, check=False)
    finally:
        guest.lab.run(guest.ns, ["tc", "qdisc", "del", "dev", guest.tap, "clsact"], check=False, capture_output=True)
    s = linux.json
    detail = json.dumps({"dropped": dropped, "ours": ours, "linux": s, "stderr": err[-2000:]})
    print(f"initial feedback lost: {detail}")
    assert dropped >= 1, detail  # Linux's initial feedback really was lost
    assert rc == 0 and linux.rc == 0 and s is not None, detail
    assert ours["sent"] == count and s["received"] == count and s["corrupt"] == 0, detail

def sync_pairs(pcap: Path, client: str) -> dict:
    """The Syncs and SyncAcks of a capture: {"client"|"server": [(time, seq, ack)]}
    for each, from tshark."""
    rows = tshark(pcap, ["frame.time_relative", "ip.src", "dccp.type", "dccp.seq", "dccp.ack"],
                  display_filter="dccp.type == 8 or dccp.type == 9")
    out = {(side, t): [] for side in ("client", "server") for t in ("8", "9")}
    for r in rows:
        side = "client" if r["ip.src"] == client else "server"
        out[(side, r["dccp.type"])].append((float(r["frame.time_relative"]), int(r["dccp.seq"]), int(r["dccp.ack"])))
    return out


def check_sync_rate(times: list, who: str):
    """RFC 4340 §7.5.4: Syncs in reply to invalid packets are rate limited;
    ours and Linux 6.1's (HZ/8 apart) send at most 8 in any second.  The
    capture's clock adds scheduling jitter: 50 ms of slack."""
    times = sorted(times)
    for i in range(len(times) - 8):
        assert times[i + 8] - times[i] >= 0.95, f"{who}: 9 Syncs within {times[i + 8] - times[i]:.3f} s: {times}"


# Sync after loss (RFC 4340 §7.5).  A burst of lost data does not do it with
# CCID 2: the sender's Sequence Window stays at 5 x cwnd or more (RFC 4341
# §6.1.1, Linux and ours) and it has at most cwnd packets in flight.  A
# burst of lost Acks does: the sender goes on sending what its window allows
# (hundreds of packets) while the receiver's Acks for them, numbered in the
# receiver's own sequence space, are lost.  The receiver's window W for its
# own numbers stays small since it sends no data: the guest's
# net.dccp.default.seq_window = 32 for Linux, our listener's --seq-window 32
# (grown to CCID 2's floor of 100).  After the burst, either the receiver's
# next Ack is beyond the sender's window for the receiver's numbers
# (GSR + 3W/4, §7.5.1), or the sender's packets acknowledge a number of the
# receiver's below its Acknowledgement window [GSS + 1 - W, GSS]: either way
# a sequence-invalid packet, dropped (data counted lost), answered with a
# Sync (rate limited, §7.5.4); the SyncAck re-aligns the other end and data
# flows on.  Each run: a 0.5 s burst of 100 % loss of the receiver's packets
# once 50 (gc_to_linux) or 300 (linux_to_gc) of them have crossed the tap.
#
# gc_to_linux with --ack-ratio 2 (gc_dccp_opts.ack_ratio): our sender keeps
# the feature's default, an Ack per two packets (1 while its window is 1 or
# 2: ceil(cwnd / 2), as after the burst's timeout);
# Linux then sends about 15000 Acks, the burst comes after 4000 of them and
# loses far more than its window of 32: a Sync is required.
#
# Ack Ratio (RFC 4341 §6.1.2, Change L(5) from the data sender, Confirm R
# from the receiver, which obeys it): our sender raises it with its window
# (cwnd / 8 here: Linux's window of 32 for its numbers allows 8 Acks a
# window, ccid2.c ratio_floor()), so Linux acks about 300 times in the run;
# Linux 6.1's sender raises it up to 64: about 900 Acks of ours.  Hence 50
# and 300, not 4000: the burst must come early enough.  A burst then may lose fewer of the
# receiver's Acks than the windows tolerate: the connection stays
# synchronised and no Sync is needed.  So a run without Sync must show why:
# a ratio above 2 confirmed, the burst mid-run, data after it; a run with
# Syncs is checked as before.  Either way each Ack Ratio the receiver
# confirmed is one the sender asked for.
@pytest.mark.parametrize("way,ratio", [("gc_to_linux", "2"), ("gc_to_linux", "auto"), ("linux_to_gc", "auto")],
                         ids=["gc_to_linux-ratio2", "gc_to_linux", "linux_to_gc"])
def test_sync_after_ack_loss(guest, gc_tool, way, ratio, tmp_path):
    tool, obj = gc_tool
    count, ccid = 30000, 2
    if way == "gc_to_linux":
        # our client sends; Linux's Acks (guest -> us: the tap's ingress) are lost
        direction, port = "ingress", 5601
        guest.run("echo 32 > /proc/sys/net/dccp/default/seq_window")
        try:
            srv = guest.start(f"dccp_peer server {port} --ccid {ccid} --count {count} --rcvbuf {1 << 22} "
                              f"--payload gc --timeout-ms 40000", timeout=60)
            guest.wait_output(srv, "listening")
        finally:
            guest.run("echo 100 > /proc/sys/net/dccp/default/seq_window")
    else:
        # Linux's client sends; our listener's Acks (us -> guest: the tap's egress) are lost
        direction, port = "egress", 5602
        proc = guest.lab.popen(guest.ns, [tool, "dccp", "listen", f"{guest.host_v4}:{port}", "--ccid", ccid,
                                          "--count", count, "--timeout", 40, "--seq-window", 32],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "listening"
    with Capture(guest.lab, guest.ns, guest.tap, tmp_path / "run.pcap", buffer_kib=1 << 16) as cap:
        acks = guest.lab.add_loss(guest.ns, guest.tap, 0.0, str(obj), direction)
        try:
            if way == "gc_to_linux":
                fixed = ["--ack-ratio", ratio] if ratio != "auto" else []
                proc = guest.lab.popen(guest.ns, [tool, "dccp", "send", f"{guest.guest_v4}:{port}", "--ccid", ccid,
                                                  "--count", count, "--size", SIZE, "--timeout", 20, *fixed],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            else:
                cli = guest.start(f"dccp_peer client {guest.host_v4} {port} --ccid {ccid} --count {count} "
                                  f"--size {SIZE} --payload gc --timeout-ms 40000", timeout=60)
            # the burst once the sender's window is open (see above for how
            # many of the receiver's packets must have crossed the filter)
            deadline = time.monotonic() + 20
            start = 4000 if ratio == "2" else 50 if way == "gc_to_linux" else 300
            while acks.counts()[0] < start and time.monotonic() < deadline:
                time.sleep(0.01)
            burst_on = time.time()
            set_loss(guest, 1.0, direction)
            time.sleep(0.5)
            set_loss(guest, 0.0, direction)
            burst_off = time.time()
            burst_dropped = acks.counts()[1]
            rc, ours, err = gc_json(proc, 60)
            linux = (srv if way == "gc_to_linux" else cli).wait(timeout=60, check=False)
        finally:
            guest.lab.run(guest.ns, ["tc", "qdisc", "del", "dev", guest.tap, "clsact"], capture_output=True)
    s = linux.json
    detail = json.dumps({"ours": ours, "linux": s, "stderr": err[-2000:], "linux_output": linux.output[-1000:]})
    print(f"{way}: {detail}")
    assert rc == 0 and linux.rc == 0 and s is not None, detail
    # the counts add up: what was not delivered was dropped as invalid and
    # counted lost; most of the run was delivered
    rx = s if way == "gc_to_linux" else ours
    if way == "gc_to_linux":
        assert ours["sent"] == count and s["corrupt"] == 0 and s["duplicates"] == 0, detail
    else:
        assert s["sent"] == count and ours["corrupt"] == 0, detail
    assert rx["received"] + rx["lost"] == count and rx["received"] >= count // 2, detail
    # Syncs: each answered by a SyncAck of the other side acknowledging it (§7.5.4)
    client_ip = guest.host_v4 if way == "gc_to_linux" else guest.guest_v4
    sp = sync_pairs(cap.pcap, client_ip)
    syncs = sp[("client", "8")] + sp[("server", "8")]
    data = tshark(cap.pcap, ["frame.time_relative", "frame.time_epoch"],
                  display_filter="dccp.type == 2 or dccp.type == 4")
    # Ack Ratio: the sender's (the client's) Change L(5) values, the receiver's Confirm R(5) values
    asked, confirmed = [], []
    for src, dst, b in read_pcap(cap.pcap):
        ch = dp.parse(b, src, dst).changes(OPT_CHANGE_L if src == client_ip else OPT_CONFIRM_R)
        (asked if src == client_ip else confirmed).extend(int.from_bytes(bytes(v), "big") for v in ch.get(5, []))
    assert set(confirmed) <= set(asked), (asked, confirmed)
    if ratio == "2":  # the default kept (1 only while the window is 1 or 2), and the Sync is certain
        assert set(asked) <= {1, 2} and syncs, (asked, sp, detail)
    if not syncs:
        assert confirmed and max(confirmed) > 2, f"no Sync and no Ack Ratio above 2 confirmed: {sp} {confirmed}"
        # the burst (by the clock: tcpdump sees the receiver's packets on
        # the tap's ingress before the filter drops them) dropped the
        # receiver's packets mid-run, and a quarter of the data came after it
        t = [float(r["frame.time_epoch"]) for r in data]
        before = sum(1 for x in t if x < burst_on)
        after = sum(1 for x in t if x > burst_off)
        assert burst_dropped > 0 and before > 0 and after >= count // 4, \
            (burst_dropped, before, after, detail)
        judge(cap.pcap, client_ip, ccid, ("client" if way == "gc_to_linux" else "server",))
        return
    for side, other in (("client", "server"), ("server", "client")):
        answered = {a for _, _, a in sp[(other, "9")]}
        # a Sync sent into the burst is lost (tcpdump sees the receiver's
        # packets before the loss filter drops them): then a later Sync of
        # the same side, repeated at its rate limit, must be answered
        mine = sp[(side, "8")]
        for i, (t, seq, _) in enumerate(mine):
            assert seq in answered or any(s2 in answered for _, s2, _ in mine[i + 1:]), \
                f"a Sync of the {side} at {t} s never answered, nor a later one: {sp}"
        check_sync_rate([t for t, _, _ in sp[(side, "8")]], side)
    # gc_to_linux: our end sends them (Linux's next Ack is beyond our window
    # for its numbers), or Linux (an Ack of ours sent during the burst, as
    # the Change of Ack Ratio to 1 after the timeout, acknowledges a number
    # of Linux's below its window).  linux_to_gc: ours (Linux's Acknowledgement Numbers
    # behind our window) or Linux's (our next Ack beyond its window for our
    # numbers), whichever sees its invalid packet first; both seen.
    ours_side = "client" if way == "gc_to_linux" else "server"
    if way == "gc_to_linux":  # nothing of ours is dropped: the capture has every Sync we sent
        assert ours["syncs"] == len(sp[("client", "8")]), (sp, detail)
    # data flowed after the resynchronisation: a quarter of the run or more came after it
    last_sync = max(t for t, _, _ in syncs)
    after = sum(1 for r in data if float(r["frame.time_relative"]) > last_sync)
    assert after >= count // 4, (after, last_sync, detail)
    judge(cap.pcap, client_ip, ccid, (ours_side,))


@pytest.mark.parametrize("ccid", [2, 3])
def test_udp_encapsulation_own_vs_own(gc_tool, ccid, tmp_path):
    """DCCP-UDP (RFC 6773) on its default port 6511: Linux has no DCCP-UDP, so
    our two ends across a veth, 5 % loss, judged like the Linux runs (tshark
    with the port-6511 registration, the UDP checksum verified)."""
    from netlab import Lab
    tool, obj = gc_tool
    with Lab() as lab:
        a, b = lab.add_ns("a"), lab.add_ns("b")
        link = lab.add_link(a, b)
        for n in (link.a, link.b):  # checksums as they are on the wire, not left to an offload
            lab.set_offload(n.ns, n.ifname, tx=False)
        lst = lab.popen(b, [tool, "dccp", "listen", f"{link.b.v4}:{DCCP_UDP_PORT}", "--udp", "--ccid", ccid, "--count", COUNT,
                            "--timeout", 30], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert lst.stdout.readline().strip() == "listening"
        with Capture(lab, b, link.b.ifname, tmp_path / "run.pcap", f"udp port {DCCP_UDP_PORT}") as cap:
            for direction in ("ingress", "egress"):
                lab.add_loss(b, link.b.ifname, LOSS, str(obj), direction)
            snd = lab.popen(a, [tool, "dccp", "send", f"{link.b.v4}:{DCCP_UDP_PORT}", "--udp", "--ccid", ccid, "--count", COUNT,
                                "--size", SIZE, "--rate", 1000, "--timeout", 20],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            rc_s, sent, err_s = gc_json(snd, 60)
            rc_r, got, err_r = gc_json(lst, 60)
    detail = json.dumps({"sender": sent, "listener": got, "stderr": [err_s[-1000:], err_r[-1000:]]})
    assert rc_s == 0 and rc_r == 0 and got["accepted"] and got["corrupt"] == 0, detail
    assert sent["sent"] == COUNT and got["received"] + got["lost"] <= COUNT, detail
    assert COUNT * 0.75 <= got["received"] < COUNT and got["lost"] >= 1, detail
    seen = judge(cap.pcap, link.a.v4, ccid, ("client", "server"), udp=True, lossy=True)
    print(f"DCCP-UDP ccid {ccid}: {detail} {seen['types']}")
