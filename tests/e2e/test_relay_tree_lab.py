"""The relay tree lab (lab/tree.py, issue 23 item 5) at CI's size: the full
shape (an origin, a site of 3 multicast routers, 4 edge relays that --join
the group, a second site reached only by a unicast cascade of 2 relays that
--upstream) with 200 receivers (bench/relay_tree.py runs 10,000).  Every
receiver's copies are checked byte for byte by lab/tree_rx.bpf.c: its own
SSRC, the origin's payload, constant sequence and timestamp offsets, no gap,
no duplicate.  pimd routes the site in one test, smcroute in the other;
the pimd test then kills c1's upstream and measures the failover."""
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from netlab import Lab  # noqa: E402
import tree  # noqa: E402
from kengine import require_kernel  # noqa: E402

RECEIVERS = 200
RATE = 50        # datagrams/s from the origin
COUNT = 150      # 3 s
BAD = ["bad_len", "bad_ssrc", "bad_payload", "bad_hdr", "gap", "dup", "rebase"]


def check_clean(res, relays=tree.RELAYS):
    """Every receiver of `relays` got every datagram, each copy good."""
    for r in relays:
        per = res["per_relay"][r]
        assert per["complete"] == per["receivers"], (r, per)
        c = res["counters"][f"rx:{r}"]
        assert {k: c[k] for k in BAD} == dict.fromkeys(BAD, 0), (r, c)
        assert c["ok"] == per["receivers"] * res["count"], (r, c)
    for r, st in res["relays"].items():
        assert st["errors"] == 0, (r, st)


def forged(tl, relay, port_index, pseq, flip=None, ssrc=None):
    """Send one copy from `relay`'s namespace to one of its receivers: the
    origin's datagram with the subscriber's SSRC unless told otherwise."""
    link = tl.rx[relay]
    pkt = bytearray(tree.origin_packet(pseq, 123456789))
    idx = tl.first[relay] + port_index
    struct.pack_into("!I", pkt, 8, tree.SSRC_BASE + idx if ssrc is None else ssrc)
    if flip is not None:
        pkt[flip] ^= 0x01
    code = ("import socket, sys\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.bind((sys.argv[1], 0))\n"
            "s.sendto(bytes.fromhex(sys.argv[4]), (sys.argv[2], int(sys.argv[3])))\n")
    tl.lab.run(link.a.ns, [sys.executable, "-c", code, link.a.v4, link.b.v4, tree.PORT_BASE + port_index,
                           bytes(pkt).hex()])


def run_tree(build, variant, failover):
    with Lab() as probe:   # the kernel engine, every relay's, available here?
        probe.star(1)
        require_kernel(probe, build)
    with Lab() as lab:
        tl = tree.TreeLab(lab, build, receivers=RECEIVERS, variant=variant)
        try:
            joined = tl.start(warm_timeout=90 if variant == "pimd" else 30)
            assert {r: j["joined"] for r, j in joined.items()} == tl.split
            # site 2 is unicast only: no multicast route in w
            w = lab.run(tl.t.ns["w"], ["cat", "/proc/net/ip_mr_cache"], capture_output=True, text=True).stdout
            assert len(w.splitlines()) <= 1, w
            res = tl.run(COUNT, RATE)
            check_clean(res)
            for r in tree.RELAYS:
                assert res["relays"][r]["engine"] == "kernel", res["relays"][r]
                assert res["relays"][r]["in"] == COUNT, (r, res["relays"][r])
            # c1 takes its input from e1 (its first upstream), as a subscriber of e1
            assert res["relays"]["e1"]["subscribers"] == tl.split["e1"] + 1
            assert res["relays"]["e2"]["subscribers"] == tl.split["e2"]

            # the checker is not blind: one bad copy of each kind is seen
            before = tl.counters()["rx:e3"]
            forged(tl, "e3", 0, 10, flip=12 + 16 + 5)           # a payload byte
            forged(tl, "e3", 1, 10, ssrc=0x0BADBAD)              # another's SSRC
            forged(tl, "e3", 2, 5)                               # an old sequence again
            after = tl.counters()["rx:e3"]
            assert {k: after[k] - before[k] for k in ("bad_payload", "bad_ssrc", "dup", "ok")} == \
                {"bad_payload": 1, "bad_ssrc": 1, "dup": 1, "ok": 0}
            if not failover:
                return
            # kill c1's upstream in the middle of a run: c1 moves to e2
            count = 3 * RATE

            def kill_e1(t):
                time.sleep(1.0)
                t.kill("e1")
            res = tl.run(count, RATE, during=kill_e1)
            check_clean(res, ["e2", "e3", "e4"])
            for r in ("c1", "c2"):
                per = res["per_relay"][r]
                missing = per["receivers"] * count - per["delivered"]
                assert per["min"] >= count - RATE, (r, per)      # at most 1 s of datagrams lost
                assert per["max_gap_ms"] < 1000 + 1000 / RATE, (r, per)
                c = res["counters"][f"rx:{r}"]
                assert c["bad_len"] == c["bad_ssrc"] == c["bad_payload"] == c["bad_hdr"] == c["dup"] == 0, c
                assert c["gap"] == missing, (r, c, missing)
            assert tl.query("e2")["subscriber_count"] == tl.split["e2"] + 1
        finally:
            tl.close()


def test_tree_pimd_failover(build):
    """PIM-SM site; 200 receivers get every datagram; then e1 dies and c1
    (and c2 behind it) carry on from e2 within 1 s."""
    run_tree(build, "pimd", failover=True)


def test_tree_smcroute(build):
    """The same tree with static routes (smcroute) in the site."""
    run_tree(build, "smcroute", failover=False)


def test_origin_packet_is_what_the_checker_expects():
    """The origin's bytes follow the formula tree_rx.bpf.c checks."""
    pkt = tree.origin_packet(7, 99)
    assert len(pkt) == 12 + tree.PAYLOAD
    assert struct.unpack_from("!II", pkt, 12) == (tree.MAGIC, 7)
    assert struct.unpack_from("<Q", pkt, 20)[0] == 99
    seed = 7 * 0x9E3779B97F4A7C15 ^ 99
    assert struct.unpack_from("<Q", pkt, 28)[0] == (seed ^ 0xC2B2AE3D27D4EB4F) & (2**64 - 1)
