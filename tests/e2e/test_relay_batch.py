"""groupcast relay: the copies of one receive batch sent together (issue 24).

The relay reads what is waiting with one recvmmsg() and sends the copies of
all those datagrams in as few group sends as the engine allows (tools/relay/
batch.c).  What receivers see must not change: every copy byte for byte, each
receiver's datagrams in the order they came, a lone datagram sent at once
(no timer), and a receiver that fails in the middle of a batch counted as it
was while the others get every copy.  Nothing here is timed; the lab is
test_relay.py's (relay in s, receivers r1 and r2, producers in p).
"""
import subprocess
import sys
import textwrap

import pytest

from test_relay import Net, TOOL  # noqa: F401  (the lab's helpers)


@pytest.fixture(scope="module")
def net(lab, build):
    lab.set_sysctl("net.core.netdev_max_backlog", 20000)
    return Net(lab, build)


def expected(i, size):
    """relaytool tx's datagram i of size bytes."""
    body = f"D{i:07d}".encode()
    return body + bytes((j * 7 + i) & 0xFF for j in range(max(0, size - len(body))))


def burst(net, to, producers, count):
    """producers senders at once (own source ports, as fast as they go), each
    count datagrams of its own size; returns {size: source port}."""
    procs = []
    for k in range(producers):
        procs.append(net.lab.popen(net.p_ns, [sys.executable, TOOL, "tx", "--to", to, "--count", count,
                                              "--rate", 0, "--size", 200 + 97 * k, "--sport", 40000 + k],
                                   stdout=subprocess.PIPE, text=True))
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    return {200 + 97 * k: 40000 + k for k in range(producers)}


def check_copies(got, sizes, count):
    """Every producer's datagrams at this receiver: all there, byte-exact, in order."""
    by_size = {s: [] for s in sizes}
    for _, _, h in got:
        data = bytes.fromhex(h)
        assert len(data) in by_size, f"a datagram of {len(data)} bytes no producer sent"
        by_size[len(data)].append(data)
    for size, seq in by_size.items():
        assert len(seq) == count, f"{size}-byte producer: {len(seq)} of {count}"
        for i, data in enumerate(seq):
            assert data == expected(i, size), f"{size}-byte producer: copy {i} is not datagram {i}"


@pytest.mark.parametrize("engine", ["auto", "mmsg", "kernel"])
def test_batch_keeps_order_and_bytes_per_receiver(net, engine):
    """Four producers at once, 600 datagrams each, 3 receivers on the command
    line (under AUTO below the kernel engine's crossover: batched)."""
    ports = [4800, 4801]
    rx1 = net.rx(net.r1, ports, idle=2.0)
    rx2 = net.rx(net.r2, [4810], idle=2.0)
    proc, sock = net.relay(["-p", 2600, "--engine", engine, f"{net.r1.v4}/4800-4801", f"{net.r2.v4}/4810"])
    count, producers = 600, 4
    sizes = burst(net, f"{net.relay_p.v4}:2600", producers, count)
    got1, got2 = net.collect(rx1), net.collect(rx2)
    final, _ = net.stop(proc)
    assert final["in"] == count * producers and final["ingest_drops"] == 0
    for p in ports:
        check_copies(got1[p], sizes, count)
    check_copies(got2[4810], sizes, count)
    assert final["out"] == 3 * count * producers and final["errors"] == 0
    assert final["lib_datagrams"] == final["out"]
    if engine != "kernel":
        # the burst came in batches: fewer group sends than datagrams
        assert final["group_sends"] < final["in"], final["group_sends"]
    else:
        assert final["group_sends"] == final["in"]  # the kernel engine: one trigger per datagram


def test_broadcast_batch_keeps_order_and_bytes(net):
    """--rtp: a burst of 800 RTP datagrams to 3 subscribers; each gets them all,
    its sequence numbers consecutive, the payload byte for byte."""
    rx = net.rx(net.r1, [4900, 4901, 4902], idle=2.0)
    proc, sock = net.relay(["--rtp", "-p", 2700, f"{net.r1.v4}/4900-4902"])
    net.tx(f"{net.relay_p.v4}:2700", 800, rate=0, size=500, extra=["--rtp"])
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert final["in"] == 800 and final["ingest_drops"] == 0
    ssrcs = set()
    for p in (4900, 4901, 4902):
        assert len(got[p]) == 800, f"port {p}: {len(got[p])} of 800"
        pk = [bytes.fromhex(h) for _, _, h in got[p]]
        seqs = [int.from_bytes(d[2:4], "big") for d in pk]
        assert all((b - a) & 0xFFFF == 1 for a, b in zip(seqs, seqs[1:])), f"port {p}: out of order"
        ssrc = {d[8:12] for d in pk}
        assert len(ssrc) == 1
        ssrcs |= ssrc
        for i, d in enumerate(pk):
            body = f"P{i:07d}".encode()
            assert d[12:] == body + bytes(500 - 12 - len(body)), f"port {p}: payload {i}"
            assert d[0] == 0x80 and d[1] == 96
    assert len(ssrcs) == 3
    assert final["out"] == 2400 and final["group_sends"] < 800


# One datagram, then wait for its copy before the next: with a timer (or a
# batch that waits to fill) the first copy would never come.  No sleep.
LOCKSTEP = textwrap.dedent("""
    import socket, sys
    relay, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", port))
    rx.settimeout(5.0)   # a failure bound only: far above any wait a timer could add unnoticed
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(n):
        msg = b"lone %06d " % i + bytes(range(200))
        tx.sendto(msg, (relay, 2800))
        try:
            data = rx.recv(65536)
        except socket.timeout:
            sys.exit(f"datagram {i}: no copy within 5 s")
        assert data == msg, (i, data[:20])
    print("ok")
""")


@pytest.mark.parametrize("engine", ["auto", "mmsg"])
def test_lone_datagram_goes_out_at_once(net, engine):
    proc, sock = net.relay(["-p", 2800, "--engine", engine, "127.0.0.1/4950"])
    out = net.lab.run(net.relay_ns, [sys.executable, "-c", LOCKSTEP, "127.0.0.1", 4950, 50],
                      capture_output=True, text=True, timeout=60, check=False)
    q = net.query(sock)
    final, _ = net.stop(proc)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert final["in"] == 50 and final["out"] == 50
    # --query says how the copies go, and under AUTO with the kernel engine why
    if engine == "auto" and q["engine_resolved"] == "kernel":
        assert "4 copies or more (16 when it came alone at under 2000/s) takes the kernel engine" in q["batching"], q["batching"]
    else:
        assert q["batching"].startswith(f"the copies of a receive batch go in one group send on the "
                                        f"{q['engine_resolved']} engine"), q["batching"]


@pytest.mark.parametrize("engine", ["auto", "mmsg"])
def test_receiver_failing_mid_batch_is_counted_and_the_others_get_all(net, engine):
    """An unroutable receiver between two good ones: every copy to it fails
    (ENETUNREACH), counted per datagram as with one send per datagram; the
    others get every datagram of a burst, in order."""
    bad = f"{net.lab.unrouted_v4()}/9"
    rx = net.rx(net.r1, [4960, 4961], idle=2.0)
    proc, sock = net.relay(["-p", 2900, "--engine", engine, f"{net.r1.v4}/4960", bad, f"{net.r1.v4}/4961"])
    count = 700
    sizes = burst(net, f"{net.relay_p.v4}:2900", 2, count)
    got = net.collect(rx)
    final, _ = net.stop(proc)
    n = 2 * count
    assert final["in"] == n and final["ingest_drops"] == 0
    for p in (4960, 4961):
        check_copies(got[p], sizes, count)
    rcv = {r["addr"]: r for r in final["sources"][0]["receivers"]}
    badr = rcv[f"{net.lab.unrouted_v4()}:9"]
    assert badr["errors"] == n and badr["packets"] == 0 and badr["last_error"] == "ENETUNREACH"
    for p in (4960, 4961):
        assert rcv[f"{net.r1.v4}:{p}"]["packets"] == n and rcv[f"{net.r1.v4}:{p}"]["errors"] == 0
    assert final["errors"] == n and final["out"] == 2 * n
    assert final["group_sends"] < final["in"]  # it was batched
