"""End-to-end tests of the kernel engine: what the members receive.  gc_send and
gc_sendgroup byte for byte to receivers and loopback members,
per-recipient bytes on the kernel path and above it, checksums at the
receivers, one datagram per send to loopback members, routes cached per
address.
The lab, the sender and the checks: kengine.py."""
import json
import random
import time

import pytest

from delivery import check_delivery
from gcsend import expected
from kengine import (FAMILIES, GC_KDATA, PORT_BASE, PORTS, SETTLE_S, addresses, assert_all_sent, csum_errors,
                     deliver, gc_filters, gcsend, members, mixed_sends, receiver_addresses, receiver_members, send,
                     sendgroup, sinks, tc_egress)
from pcap import TP_STATUS_CSUMNOTREADY, capture, udp_in_frames


# ---- delivery --------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_kernel_delivers_exact_bytes_to_receivers_and_loopback(klab, build, tmp_path, family):
    """gc_send and gc_sendgroup through the kernel engine reach members in two
    receiver namespaces and loopback members in the sender namespace byte for
    byte, in order, with the group replaced before every send; the kernel sent
    all of it (user_fallback stays 0, and the engine really is "kernel")."""
    rnd = random.Random(f"deliver-{family}")
    group = members(addresses(klab, family))
    sends = [send(group, rnd.randbytes(100)), sendgroup([(a, p, b"", b"") for a, p in group], rnd.randbytes(7))]
    sends += mixed_sends(rnd, group, 20)
    sends.append(send(group[::-1], rnd.randbytes(1)))

    out = deliver(klab, build, tmp_path, family, sends)

    assert out["engine"] == "kernel"
    assert out["stats"]["user_fallback"] == 0, out["stats"]
    assert gc_filters(klab) == [], "the filter outlived the process:\n" + tc_egress(klab)


# ---- per-recipient bytes -------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_per_recipient_bytes_kernel_up_to_64_user_above(klab, build, tmp_path, family):
    """gc_sendgroup with prepend/append of exactly 64 bytes (and odd lengths up
    to 64, odd shared lengths: checksum alignment) stays on the kernel path;
    recipients with 65..200 bytes on either side are sent by the user engine:
    user_fallback grows by exactly their number in each send; every recipient
    still gets exactly prepend | shared | append."""
    rnd = random.Random(f"prepend-{family}")
    group = members(addresses(klab, family))
    kernel_lens = [(64, 64), (64, 0), (0, 64), (63, 1), (1, 63), (33, 31), (0, 0), (1, 1), (64, 3), (5, 64)]
    user_lens = [(65, 0), (0, 65), (200, 200), (65, 64), (64, 65), (127, 1), (3, 199), (200, 0)]
    sends, want_fallback = [], []
    # 1) every recipient on the kernel path, 64|64 included
    for shared in (0, 1, 3, 64, 255, 256, 257, 999):
        sends.append(sendgroup([(a, p, rnd.randbytes(kernel_lens[i % len(kernel_lens)][0]),
                                 rnd.randbytes(kernel_lens[i % len(kernel_lens)][1]))
                                for i, (a, p) in enumerate(rnd.sample(group, len(group)))], rnd.randbytes(shared)))
        want_fallback.append(0)
    # 2) some recipients above 64 bytes on a side: those go to the user engine
    for k, shared in enumerate((0, 1, 2, 17, 256, 511, 1001)):
        recs, users = [], 0
        for i, (a, p) in enumerate(rnd.sample(group, len(group))):
            lens = user_lens[(i + k) % len(user_lens)] if (i + k) % 3 == 0 else kernel_lens[i % len(kernel_lens)]
            users += lens[0] > GC_KDATA or lens[1] > GC_KDATA
            recs.append((a, p, rnd.randbytes(lens[0]), rnd.randbytes(lens[1])))
        sends.append(sendgroup(recs, rnd.randbytes(shared)))
        want_fallback.append(users)

    out = deliver(klab, build, tmp_path, family, sends)

    fallback = [r["stats"]["user_fallback"] for r in out["results"]]
    per_send = [b - a for a, b in zip([0] + fallback, fallback)]
    assert per_send == want_fallback, f"user_fallback per send: got {per_send}, want {want_fallback}"


# ---- checksums at the receivers ------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_checksums_correct_at_receivers(klab, build, tmp_path, family):
    """With checksum offload off (receivers: rx and tx, so their stacks verify
    every UDP checksum in software; the sender's veths: tx, so user-engine
    datagrams carry complete checksums too), every datagram captured with
    AF_PACKET in each receiver namespace has a correct IPv4 header checksum
    and a correct, non-zero UDP checksum (IPv4 / IPv6 pseudo header), for
    odd and even shared lengths and per-recipient bytes on both paths; the
    receivers' Udp/Udp6 InCsumErrors do not grow; the captures hold exactly
    the datagrams sent.  The loopback members' datagrams are captured on lo
    of the sender namespace and checked the same way (except those the local
    stack left CHECKSUM_PARTIAL, as lo's tx checksumming cannot be turned
    off: their field must hold the pseudo-header sum)."""
    lab, star = klab, klab.topology
    for link in star.links:
        lab.set_offload(link.b.ns, link.b.ifname, rx=False, tx=False)
        lab.set_offload(link.a.ns, link.a.ifname, tx=False)
    rnd = random.Random(f"csum-{family}")
    addrs = addresses(lab, family)
    group = members(addrs)
    sends = mixed_sends(rnd, group, 24, sizes=(0, 1, 3, 4, 63, 255, 256, 257, 511, 1001, 1199, 1200))
    for shared in (1, 256, 777):  # some recipients above 64 bytes: user engine, same checks
        sends.append(sendgroup([(a, p, rnd.randbytes(rnd.choice([0, 3, 64, 65, 200])),
                                 rnd.randbytes(rnd.choice([0, 1, 64, 99, 200]))) for a, p in group],
                               rnd.randbytes(shared)))
    where = [(r.ns, r.ifname) for r in star.receivers] + [(star.sender, "lo")]
    before = {ns: csum_errors(lab, ns) for ns, _ in where}

    with sinks(lab, build, tmp_path, addrs.items()) as collect:
        with capture(lab, tmp_path, *where[0]) as cap1, capture(lab, tmp_path, *where[1]) as cap2, \
                capture(lab, tmp_path, *where[2]) as cap3:
            out = gcsend(lab, build, {"engine": "kernel", "socket": family, "pace_ms": 5, "sends": sends})
            time.sleep(SETTLE_S)
            frames = {ns: stop() for (ns, _), stop in zip(where, (cap1, cap2, cap3))}
        got = collect()

    assert_all_sent(out, sends)
    assert 0 < out["stats"]["user_fallback"] < out["stats"]["datagrams"], out["stats"]  # both paths checked
    want = expected(sends)
    ports = {PORT_BASE + i for i in range(PORTS)}
    for ns, _ in where:
        found, problems = udp_in_frames(frames[ns], ports)
        assert not problems, f"{ns}: {len(problems)} of {len(found)} datagrams with bad checksums: {problems[:8]}"
        addr = addrs[ns]
        want_here = sorted(d for (a, p), ds in want.items() if a == addr for d in ds)
        assert sorted(d for a, p, d in found) == want_here, \
            f"{ns}: captured {len(found)} datagrams to our ports, sent {len(want_here)}"
        if ns != star.sender:
            assert not any(s & TP_STATUS_CSUMNOTREADY for s, _ in frames[ns]), f"{ns}: offload still on"
    after = {ns: csum_errors(lab, ns) for ns, _ in where}
    assert after == before, f"InCsumErrors grew: before {before}, after {after}"
    check_delivery([want], got)


# ---- loop safety -------------------------------------------------------------

@pytest.mark.parametrize("ports", [PORTS, 100])
@pytest.mark.parametrize("family", FAMILIES)
def test_loopback_member_gets_one_datagram_per_send(klab, build, tmp_path, family, ports):
    """Clones to loopback members leave through lo egress, where the program
    sits: each loopback member (and each other member) receives exactly one
    datagram per send over many sends, never a duplicate.  With 100 ports per
    address (300 members) every send takes two triggers (256 members each),
    and gc_sendgroup with private bytes alternates with gc_send."""
    lab = klab
    rnd = random.Random(f"loop-{family}-{ports}")
    group = members(addresses(lab, family), ports)
    n = 300 if ports == PORTS else 40
    sends = []
    for i in range(n):
        order = rnd.sample(group, len(group))
        shared = i.to_bytes(4, "big") + rnd.randbytes(rnd.choice([0, 1, 60, 300]))
        if ports == PORTS or i % 2 == 0:
            sends.append(send(order, shared))
        else:
            sends.append(sendgroup([(a, p, rnd.randbytes(j % 65), rnd.randbytes((j * 7) % 65))
                                    for j, (a, p) in enumerate(order)], shared))

    out = deliver(lab, build, tmp_path, family, sends, ports=ports)

    assert out["stats"]["user_fallback"] == 0, out["stats"]
    assert out["stats"]["datagrams"] == n * len(group)


@pytest.mark.parametrize("family", FAMILIES)
def test_route_cache_follows_the_address_not_the_slot(klab, build, tmp_path, family):
    """The kernel engine caches routes (and MACs) per member address, not per
    position in the group: after the neighbour entries are flushed, the same
    members in two other orders still all go out through the kernel, from the
    routes learned before, within the cache's 1 s (GC_KRESOLVE_NS).  Had the
    reorder dropped the cached routes, every member would look up its route
    again, find no neighbour entry and go through the user path
    (user_fallback would grow by the group size).  gcsend.py flushes the
    neighbours itself between two sends (run_before), so the routes are a few
    milliseconds old when they are used, not however long it takes this
    process to notice, run ip in the namespace and answer."""
    lab = klab
    rnd = random.Random(f"rcache-{family}")
    group = receiver_members(lab, family)
    flush = [["ip", "neigh", "flush", "all"], ["ip", "-j", "neigh", "show"]]
    sends = [dict(send(group, b"first"), timed=True), send(group[::-1], b"learn"),
             dict(send(rnd.sample(group, len(group)), b"after flush"), run_before=flush, timed=True),
             send(rnd.sample(group, len(group)), b"again")]
    with sinks(lab, build, tmp_path, receiver_addresses(lab, family).items()) as collect:
        out = gcsend(lab, build, {"engine": "kernel", "socket": family, "pace_ms": 1, "stats_each": True,
                                  "sends": sends})
        got = collect()
    assert out["engine"] == "kernel", out
    assert_all_sent(out, sends)
    check_delivery([expected(sends)], got)
    res = out["results"]
    flushed = res[2]["before_out"][1]
    assert not [n for n in json.loads(flushed or "[]") if n.get("dst") in {a for a, _ in group}
                and set(n.get("state", [])) & {"REACHABLE", "STALE", "DELAY", "PERMANENT"}], flushed
    # the routes were looked up in the first send at the earliest
    age = res[2]["t_send"] - res[0]["t_send"]
    if age >= 1.0:
        pytest.skip(f"NOT CHECKED: whether reordered members keep their cached routes. gcsend.py was held up "
                    f"{age:.2f} s between its first send and the send after the flush, so the routes had "
                    f"outlived the kernel engine's 1 s cache (GC_KRESOLVE_NS) and were looked up again either way")
    fallback = [r["stats"]["user_fallback"] for r in res]
    assert fallback[2] == fallback[1] and fallback[3] == fallback[1], \
        f"reordered members went through the user path after the flush: user_fallback per send {fallback}"
