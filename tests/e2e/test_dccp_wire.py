"""tshark judges lib/dccp's wire format.

tools/dccp_pcap builds one DCCP conversation with the library's builders
(Listen, Request/Response/Ack with feature negotiation and an Init Cookie,
DataAcks with Ack Vector, Data Dropped, timing and CCID 3 options, 24-bit
sequence numbers with partial checksum coverage, Sync/SyncAck,
CloseReq/Close/Reset) four times: native DCCP (IP protocol 33) and DCCP-UDP
(RFC 6773, UDP port 6511), over IPv4 and IPv6.  Debian's tshark dissects
DCCP only as IP protocol 33; a Lua script hands UDP port 6511 to that same
dissector.  Wireshark runs Lua only for a non-root user, so tshark runs as
nobody (65534) on a copy of the capture it can read.

The DCCP-UDP checksum: RFC 6773 §3.3 says the UDP checksum (ordinary UDP
pseudo-header, protocol 17) does the DCCP checksum's job, the DCCP Checksum
field SHOULD be sent as zero and MUST be ignored on receipt.  The library
follows the RFC.  tshark's DCCP dissector, called on the UDP payload, applies
RFC 4340 §9.1 instead (pseudo-header with protocol 33), so it reports every
DCCP-UDP packet as a bad DCCP checksum and names, as the checksum it wanted,
exactly the checksum of the native twin packet.  The test asserts that
disagreement explicitly, and checks DCCP-UDP with the UDP checksum verified
and the DCCP one not.
"""
import json
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

NOBODY = 65534
LUA = """-- RFC 6773: DCCP-UDP on its default port goes to the native DCCP dissector
local dccp = DissectorTable.get("ip.proto"):get_dissector(33)
DissectorTable.get("udp.port"):add(6511, dccp)
"""
# one conversation: Listen Request Response Ack DataAck DataAck Ack Data Ack
# Sync SyncAck CloseReq Close Reset
TYPES = [10, 0, 1, 3, 4, 4, 3, 2, 3, 8, 9, 5, 6, 7]
NN_FEATURES = {3, 5}  # Sequence Window, Ack Ratio: one big-endian value
BAD = {"dccp.bad_checksum", "dccp.option.len.bad", "dccp.advertised_header_length.bad",
       "dccp.packet_type.reserved", "_ws.malformed"}


def crc32c(data: bytes) -> int:
    """CRC-32c (Castagnoli), bit by bit: independent of the library's table."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.fixture(scope="module")
def capture(build):
    if not shutil.which("tshark"):
        pytest.fail("tshark is not installed: run scripts/install-deps.sh")
    tool = build / "tools" / "dccp_pcap"
    if not tool.exists():
        pytest.fail(f"missing {tool}: build the tools")
    # under /tmp itself: pytest's own temporary directories are private to root
    with tempfile.TemporaryDirectory(prefix="dccpwire-", dir="/tmp") as tmp:
        d = Path(tmp)
        os.chmod(d, 0o755)
        pcap, manifest, lua = d / "dccp.pcap", d / "manifest.json", d / "dccp_udp.lua"
        subprocess.run([str(tool), str(pcap), str(manifest)], check=True, timeout=60)
        lua.write_text(LUA)
        for f in (pcap, manifest, lua):
            os.chmod(f, 0o644)
        home = d / "home"  # tshark's profile directory, nobody's own
        home.mkdir()
        os.chown(home, NOBODY, NOBODY)
        yield home, pcap, lua, json.loads(manifest.read_text())


def tshark(capture, *prefs):
    """tshark as nobody with the Lua script, as PDML: a list of packets, each
    a list of (name, show, showname, value) in tree order."""
    home, pcap, lua, _ = capture
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
           "env", f"HOME={home}", "tshark", "-n", "-r", str(pcap), "-X", f"lua_script:{lua}",
           "-o", "dccp.relative_sequence_numbers:FALSE", "-o", "udp.check_checksum:TRUE"]
    for p in prefs:
        cmd += ["-o", p]
    out = subprocess.run(cmd + ["-T", "pdml"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Lua" not in out.stderr and "lua" not in out.stderr, out.stderr
    packets = []
    for pkt in ET.fromstring(out.stdout).iter("packet"):
        packets.append([(f.get("name"), f.get("show"), f.get("showname"), f.get("value"))
                        for f in pkt.iter("field")])
    return packets


def first(fields, name):
    vals = [f[1] for f in fields if f[0] == name]
    return vals[0] if vals else None


def raw(fields, name):
    """A bytes field's value as plain hex."""
    vals = [f[3] for f in fields if f[0] == name]
    return vals[0] if vals else None


def check_frame(fields, m):
    """The frame decodes as DCCP with what the manifest says was built."""
    assert first(fields, "dccp.type") == str(m["type"])
    assert first(fields, "dccp.x") == str(m["x"])
    # tshark names a 48-bit number dccp.seq_raw, a 24-bit one dccp.seq
    assert (first(fields, "dccp.seq_raw") or first(fields, "dccp.seq")) == str(m["seq"])
    assert first(fields, "dccp.cscov") == str(m["cscov"])
    if m["ack"] is None:
        assert first(fields, "dccp.ack_raw") is None
    else:
        assert first(fields, "dccp.ack_raw") == str(m["ack"])
    assert [int(f[1]) for f in fields if f[0] == "dccp.option_type"] == m["options"]
    # Change/Confirm: feature numbers in order, and the values tshark shows
    assert [int(f[1]) for f in fields if f[0] == "dccp.feature_number"] == \
        [feat for _, feat, _ in m["features"]]
    shown = [f[1] for f in fields if f[0] == "" and f[1] and f[1].endswith(")") and "(" in f[1]
             and f[1].split("(")[0] in ("Reserved", "Unknown feature number")]
    want = []
    for _, feat, val in m["features"]:
        if feat in NN_FEATURES and val:
            want.append("( %d)" % int.from_bytes(bytes(val), "big"))
        else:
            want.append("(" + ",".join(" %d" % v for v in val) + ")")
    assert [s[s.index("("):] for s in shown] == want


def test_native_dccp(capture):
    """IP protocol 33, IPv4 and IPv6: every frame decodes as what was built,
    checksums right, no expert info, nothing malformed."""
    manifest = capture[3]
    packets = tshark(capture, "dccp.check_checksum:TRUE")
    assert len(packets) == len(manifest) == 4 * len(TYPES)
    native = [(p, m) for p, m in zip(packets, manifest) if not m["udp"]]
    assert len(native) == 2 * len(TYPES)
    assert [m["type"] for _, m in native] == TYPES * 2
    # Request 6, Response 7, Ack 2, DataAck 1 Change/Confirm options
    assert sum(len(m["features"]) for _, m in native) == 2 * 16
    for fields, m in native:
        names = {f[0] for f in fields}
        assert first(fields, "ip.proto" if m["family"] == 4 else "ipv6.nxt") == "33"
        check_frame(fields, m)
        assert first(fields, "dccp.checksum.status") == "1", m  # Good
        assert not names & BAD, (m, names & BAD)
        assert "_ws.expert" not in names, m


def test_dccp_udp(capture):
    """RFC 6773 over UDP port 6511: the UDP checksum is verified and good, the
    DCCP Checksum field is 0, and with tshark's (RFC 4340) DCCP checksum check
    off there is no expert info at all."""
    manifest = capture[3]
    packets = tshark(capture, "dccp.check_checksum:FALSE")
    udp = [(p, m) for p, m in zip(packets, manifest) if m["udp"]]
    assert [m["type"] for _, m in udp] == TYPES * 2
    for fields, m in udp:
        names = {f[0] for f in fields}
        assert "udp.srcport" in names and "6511" in (first(fields, "udp.srcport"),
                                                     first(fields, "udp.dstport"))
        check_frame(fields, m)
        assert first(fields, "udp.checksum.status") == "1", m  # Good
        assert first(fields, "dccp.checksum") == "0x0000", m
        assert not names & BAD, (m, names & BAD)
        assert "_ws.expert" not in names, m


def test_dccp_udp_checksum_rule(capture):
    """Where tshark and RFC 6773 differ: tshark checks the DCCP checksum of a
    DCCP-UDP packet as if it were native, over the RFC 4340 pseudo-header.
    The checksum it asks for is the native twin's, which shows the rule it
    applies; the library follows RFC 6773 and sends 0."""
    manifest = capture[3]
    packets = tshark(capture, "dccp.check_checksum:TRUE")
    n = len(TYPES) * 2  # native frames come first, in the same order
    for i in range(n, 2 * n):
        fields, m = packets[i], manifest[i]
        assert m["udp"]
        names = {f[0] for f in fields}
        assert names & BAD == {"dccp.bad_checksum"}, m
        wanted = [f[2] for f in fields if f[0] == "dccp.bad_checksum"][0]
        twin = first(packets[i - n], "dccp.checksum")
        assert wanted == f"Bad checksum [should be {twin}]", (wanted, twin)


def test_option_values(capture):
    """A few option values, read back by tshark."""
    manifest = capture[3]
    packets = tshark(capture, "dccp.check_checksum:TRUE")
    base = 0  # IPv4 native conversation
    req, resp, dataack, ack = (packets[base + i] for i in (1, 2, 5, 6))
    assert first(req, "dccp.timestamp") == "1000"
    assert first(req, "dccp.service_code") == str(0x47435354)
    assert raw(resp, "dccp.init_cookie") == b"opaque-cookie-01".hex()
    assert first(resp, "dccp.timestamp_echo") == "1000"
    assert first(resp, "dccp.elapsed_time") == "25"
    assert first(dataack, "dccp.ccid3_loss_event_rate") == "57"
    assert first(dataack, "dccp.ccid3_receive_rate") == "125000"
    assert int(first(dataack, "dccp.checksum_data"), 16) == crc32c(b"client datagram 1")
    assert first(dataack, "dccp.slow_receiver") is not None
    assert raw(ack, "dccp.ack_vector.nonce_0") == "02"  # 3 packets received
    assert raw(ack, "dccp.data_dropped") == "a0"  # drop code 2, one packet
    assert first(ack, "dccp.elapsed_time") == "60000"  # 4-byte form
    reset = packets[base + 13]
    assert first(reset, "dccp.reset_code") == "1"
    assert manifest[base + 7]["cscov"] == 2 and first(packets[base + 7], "dccp.checksum.status") == "1"
