"""Self-test of the Linux 6.1 peer harness (linux61.py): no groupcast DCCP yet.

1. Inside the guest, over its loopback: dccp_peer server and client, CCID 2
   and CCID 3, IPv4 and IPv6.  Proves the modules, the negotiation and the
   program.
2. Across the tap link: the guest's client connects to the host namespace,
   where a raw protocol-33 socket (opened before the guest sends, or the host
   answers with ICMP) receives its DCCP-Request, and tcpdump captures it for
   tshark (as nobody).  This is where groupcast's DCCP will sit in the
   interop tests.
3. netem inside the guest: the delay the later tests will need.
"""
import json
import socket
import struct

import pytest

import dccp_packet
from capture import Capture, tshark
from linux61 import netns_socket

COUNT = 200


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("ccid", [2, 3])
def test_guest_loopback(guest, ccid, family):
    addr, bind = ("127.0.0.1", "0.0.0.0") if family == 4 else ("::1", "::")
    port = 5000 + 10 * ccid + family
    # A receive buffer that holds the whole run: DCCP drops what overflows it.
    srv = guest.start(f"dccp_peer server {port} --bind {bind} --ccid {ccid} --service 7 --count {COUNT} "
                       f"--rcvbuf {1 << 22}", timeout=30)
    guest.wait_output(srv, "listening")
    # CCID 3 is paced at 1 ms: Linux 6.1's CCID 3 misbehaves at sub-millisecond send intervals.
    cli = guest.run(f"dccp_peer client {addr} {port} --ccid {ccid} --service 7 --count {COUNT} "
                    f"--size 1000 --interval-us {1000 if ccid == 3 else 0}", timeout=30).json
    s = srv.wait().json
    assert cli["sent"] == COUNT and cli["ended"] == "count"
    assert s["ended"] == "count" and s["received"] == COUNT and s["distinct"] == COUNT, json.dumps([s, cli])
    assert s["lost"] == 0 and s["duplicates"] == 0 and s["bytes"] == COUNT * 1000
    assert s["family"] == family and s["service"] == 7
    for side in (cli, s):
        assert (side["tx_ccid"], side["rx_ccid"]) == (ccid, ccid), side
    if ccid == 3:
        assert s["tfrc_rx"]["x_recv"] > 0  # the receiver measured a rate


def test_guest_refuses_bad_arguments(guest):
    r = guest.run("dccp_peer client 1.2.3 5000", check=False)
    assert r.rc == 2 and "ADDR: 1.2.3 is not an IPv4 or IPv6 address" in r.output
    r = guest.run("dccp_peer server 5000 --ccid 4", check=False)
    assert r.rc == 2 and "--ccid" in r.output


@pytest.mark.parametrize("family", [4, 6])
def test_guest_request_reaches_host(guest, family, tmp_path):
    host, peer = (guest.host_v4, guest.guest_v4) if family == 4 else (guest.host_v6, guest.guest_v6)
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    port, service, ccid = 6000 + family, 0x47430000 + family, 2
    raw = netns_socket(guest.ns, af, socket.SOCK_RAW, dccp_packet.IPPROTO_DCCP)
    try:
        with Capture(guest.lab, guest.ns, guest.tap, tmp_path / "request.pcap") as cap:
            raw.settimeout(20)
            # Nobody answers: the client retransmits its Request (every 3 s) until its connect times out.
            cli = guest.start(f"dccp_peer client {host} {port} --ccid {ccid} --service {service} --count 1 "
                              f"--timeout-ms 1500", timeout=10)
            while True:
                data, (src, *_) = raw.recvfrom(65535)
                if family == 4:  # IPv4 raw sockets hand over the IP header too
                    data = data[(data[0] & 0xF) * 4:]
                if src == peer:
                    break
            r = cli.wait(timeout=30, check=False)
    finally:
        raw.close()
    pkt = dccp_packet.parse(data, peer, host)
    assert pkt.type == dccp_packet.REQUEST, pkt.type_name
    assert pkt.dport == port and 1024 <= pkt.sport <= 65535
    assert pkt.service == service and pkt.x and pkt.checksum_ok and pkt.cscov == 0
    # The client asks for the CCID it was given, for both half-connections.
    assert pkt.changes(dccp_packet.CHANGE_L)[dccp_packet.FEAT_CCID][0][0] == ccid
    assert pkt.changes(dccp_packet.CHANGE_R)[dccp_packet.FEAT_CCID][0][0] == ccid
    assert r.rc == 1 and r.json == {"mode": "client", "ended": "connect-timeout", "sent": 0}, r

    packets = tshark(cap.pcap, ["dccp.type", "dccp.srcport", "dccp.dstport", "dccp.service_code",
                                "dccp.checksum.status", "_ws.expert.message"],
                     prefs=("dccp.check_checksum:TRUE",))
    assert packets, "tshark found no DCCP packet in the capture"
    for p in packets:
        assert p["dccp.type"] == "0", p  # Request, every retransmission too
        assert int(p["dccp.srcport"]) == pkt.sport and int(p["dccp.dstport"]) == port
        assert int(p["dccp.service_code"]) == service
        assert p["dccp.checksum.status"] == "1", p  # Good
        assert p["_ws.expert.message"] == "", p


def test_guest_netem_delay(guest):
    """netem inside the guest (the host kernel has none): 20 ms each way on
    the guest's loopback shows up in CCID 3's RTT estimate."""
    guest.run("tc qdisc add dev lo root netem delay 20ms")
    try:
        assert "delay 20ms" in guest.run("tc qdisc show dev lo").output
        srv = guest.start("dccp_peer server 5100 --ccid 3 --count 50 --rcvbuf 4194304", timeout=30)
        guest.wait_output(srv, "listening")
        cli = guest.run("dccp_peer client 127.0.0.1 5100 --ccid 3 --count 50 --size 500 --interval-us 2000",
                        timeout=30).json
        assert srv.wait().json["received"] == 50
        assert cli["connect_ms"] >= 40  # the handshake crossed the delay twice
        assert 40000 <= cli["tfrc_tx"]["rtt_us"] < 400000, cli
    finally:
        guest.run("tc qdisc del dev lo root")


def _request(sport, dport, service, src, dst, good=True):
    """A DCCP-Request (X=1, seq 1, no options) in an IPv4 header, checksum right or not."""
    dccp = bytearray(struct.pack("!HHBBHBB6sI", sport, dport, 5, 0, 0, dccp_packet.REQUEST << 1 | 1, 0,
                                 (1).to_bytes(6, "big"), service))
    csum = dccp_packet.checksum(bytes(dccp), src, dst, 0) ^ (0 if good else 0x0101)
    struct.pack_into("!H", dccp, 6, csum)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(dccp), 0, 0x4000, 64, dccp_packet.IPPROTO_DCCP, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    return ip + bytes(dccp)


def test_judges_tell_a_bad_checksum(tmp_path):
    """dccp_packet and tshark (the judges of the tests above) both accept a
    right checksum and both refuse a wrong one: their verdicts are not vacuous."""
    src, dst = "10.1.2.3", "10.1.2.4"
    pcap = tmp_path / "two.pcap"
    with open(pcap, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))  # LINKTYPE_RAW: IP packets
        for good in (True, False):
            pkt = _request(40000, 5001, 42, src, dst, good)
            f.write(struct.pack("<IIII", 0, 0, len(pkt), len(pkt)) + pkt)
            assert dccp_packet.parse(pkt[20:], src, dst).checksum_ok is good
    rows = tshark(pcap, ["dccp.service_code", "dccp.checksum.status", "_ws.expert.message"],
                  prefs=("dccp.check_checksum:TRUE",))
    assert [r["dccp.service_code"] for r in rows] == ["42", "42"], rows
    assert rows[0]["dccp.checksum.status"] == "1" and rows[0]["_ws.expert.message"] == ""
    assert rows[1]["dccp.checksum.status"] == "0" and "checksum" in rows[1]["_ws.expert.message"].lower(), rows
