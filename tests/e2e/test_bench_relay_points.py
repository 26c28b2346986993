"""bench/relay_points.py (issue 24) does not rot: `groupcast sink --digest`
agrees with the producer's digest and catches a changed byte, and the
driver's --quick point (the relay only, N=2, NetFlow v5 from 8 exporters)
runs with every copy checked.  No assertion about speed: that is the
benchmark's business (bench/README.md)."""
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import relaytool
from netlab import Lab

REPO = Path(__file__).resolve().parents[2]
POINTS = REPO / "bench" / "relay_points.py"


def start_sink(popen, build, port, count, expect, ready, digest, *extra):
    """`groupcast sink --digest` on `count` ports from `port` (popen: how to
    start it), once it is ready."""
    sink = popen([str(build / "tools" / "groupcast"), "sink", "--addr", "127.0.0.1", "--port-base", str(port),
                  "--count", str(count), "--expect", str(expect), "--idle-ms", "3000", "--ready-file", str(ready),
                  "--digest", digest, *extra], stdout=subprocess.PIPE, text=True)
    for _ in range(500):
        if ready.exists() or sink.poll() is not None:
            break
        time.sleep(0.01)
    if not ready.exists():
        sink.kill()
        raise AssertionError("sink did not start")
    return sink


def test_sink_digest_checks_every_byte(build, tmp_path):
    """Two ports get three NetFlow datagrams each; port 2 gets one with a
    byte changed.  Right counts on both, digest_ok only on port 1."""
    port = 39170
    ready = tmp_path / "ready"
    want = relaytool.nf5_digest(3, 2)
    blocks = relaytool.nf5_blocks()
    sink = start_sink(subprocess.Popen, build, port, 2, 6, ready, want)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(3):
            d = relaytool.nf5_datagram(i, 2, blocks)
            assert len(d) == 984
            s.sendto(d, ("127.0.0.1", port))
            if i == 1:
                d = d[:500] + bytes([d[500] ^ 1]) + d[501:]
            s.sendto(d, ("127.0.0.1", port + 1))
        out, _ = sink.communicate(timeout=10)
    finally:
        sink.kill()
    res = json.loads(out.strip().splitlines()[-1])
    assert res["ports_min"] == res["ports_max"] == 3
    assert res["digest_ok"] == 1


def test_sink_digest_rejects_a_bad_value(build):
    p = subprocess.run([str(build / "tools" / "groupcast"), "sink", "--addr", "127.0.0.1", "--port-base",
                        "39180", "--count", "1", "--digest", "12345678901234567"], capture_output=True, text=True)
    assert p.returncode != 0 and "--digest: '12345678901234567' is not a 64-bit hex number" in p.stderr


def test_relay_points_quick(build, tmp_path):
    out = tmp_path / "points"
    p = subprocess.run([sys.executable, str(POINTS), "--quick", "--peers", "", "--build", str(build),
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"relay_points.py --quick failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    raw = json.loads((out / "raw.json").read_text())
    rows = raw["rows"]
    assert len(rows) == 1 and rows[0]["kind"] == "relay" and rows[0]["n"] == 2 and rows[0]["exporters"] == 8
    r = rows[0]
    assert r["ok"] and r["delivered"] == r["due"] == 2 * r["sent"] > 0 and r["ports_exact"] == 2
    assert r["cpu_ns"] > 0
    md = (out / "README.md").read_text()
    assert "relay_points.py --quick" in md and "| 2 | 2,000/s from 8 exporters |" in md


FLOOR = REPO / "bench" / "relay_floor.py"


def test_relay_floor_quick(build, tmp_path):
    """bench/relay_floor.py's yardstick relays every copy byte for byte (the
    relay and bench/floor_relay, N=2, one short round), and floor_relay
    refuses a bad receiver naming it."""
    out = tmp_path / "floor"
    p = subprocess.run([sys.executable, str(FLOOR), "--build", str(build), "--n", "2", "--rate", "2000",
                        "--seconds", "1", "--reps", "1", "--out", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"relay_floor.py failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    rows = json.loads((out / "raw.json").read_text())["rows"]
    assert sorted(r["kind"] for r in rows) == ["floor", "relay"], rows
    for r in rows:
        assert r["ok"] and r["delivered"] == r["due"] == 2 * r["sent"] > 0 and r["ports_exact"] == 2, r
    bad = subprocess.run([str(build / "bench" / "floor_relay"), "-p", "2055", "10.1.1.1:5000"],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "receiver '10.1.1.1:5000': want ADDR/PORT" in bad.stderr, bad.stderr


# ---- bench/nf5_send.c: the same stream as `relaytool.py nf5`, faster ----------------------------

TOOL = REPO / "tests" / "e2e" / "relaytool.py"
EXPORTERS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


def nf5_send(build):
    path = build / "bench" / "nf5_send"
    assert path.exists(), f"{path} is not built"
    return str(path)


@pytest.fixture(scope="module")
def ns():
    """A namespace of its own: its loopback takes the exporters' addresses."""
    with Lab() as lab:
        yield lab, lab.add_ns("nf")


def test_nf5_send_same_bytes_as_python(build, ns, tmp_path):
    """Both producers send the first 700 datagrams of the stream from 3
    exporters to a capture (one port each; the C one at 400,000/s, in runs of
    64 that 3 exporters do not divide): per exporter, the same datagrams byte
    for byte in the same order."""
    lab, name = ns
    blocks = tmp_path / "blocks.bin"
    subprocess.run([sys.executable, str(TOOL), "nf5", "--blocks-out", str(blocks)], check=True,
                   capture_output=True)
    count, port = 700, 39190
    rx = relaytool.start_rx(lab, name, "127.0.0.1", [port, port + 1], "1.0", "30", str(tmp_path / "ready"))
    try:
        py = lab.run(name, [sys.executable, str(TOOL), "nf5", "--to", f"127.0.0.1:{port}", "--src",
                            ",".join(EXPORTERS), "--count", str(count), "--rate", "20000"],
                     capture_output=True, text=True)
        c = lab.run(name, [nf5_send(build), "--blocks", str(blocks), "--to", f"127.0.0.1:{port + 1}", "--src",
                           ",".join(EXPORTERS), "--count", str(count), "--rate", "400000"],
                    capture_output=True, text=True)
        out, _ = rx.communicate(timeout=40)
    finally:
        rx.kill()
    assert json.loads(py.stdout)["sent"] == json.loads(c.stdout)["sent"] == count
    got = json.loads(out)

    def by_exporter(p):
        d = {}
        for src, _, data in got[str(p)]:
            d.setdefault(src.rsplit(":", 1)[0], []).append(data)
        return d

    want, have = by_exporter(port), by_exporter(port + 1)
    assert sorted(want) == EXPORTERS and [len(v) for v in want.values()] == [234, 233, 233]
    blk = relaytool.nf5_blocks()
    assert want["127.0.0.2"][5] == relaytool.nf5_datagram(3 * 5 + 1, 3, blk).hex()
    for e in EXPORTERS:
        assert have.get(e) == want[e], f"exporter {e}: nf5_send's datagrams differ from relaytool.py's"


def test_nf5_send_digest_at_full_speed(build, ns, tmp_path):
    """20,000 datagrams from 8 exporters as fast as it can (runs of 64 and
    sendmmsg) into `groupcast sink --digest` (a 64 MB buffer: nothing is
    dropped if the sink falls behind): the digest of relaytool.nf5_digest."""
    lab, name = ns
    blocks = tmp_path / "blocks.bin"
    relaytool.write_nf5_blocks(str(blocks))
    count, port, ready = 20000, 39195, tmp_path / "sink.ready"
    srcs = [f"127.0.0.{h}" for h in range(1, 9)]
    sink = start_sink(lambda argv, **kw: lab.popen(name, argv, **kw), build, port, 1, count, ready,
                      relaytool.nf5_digest(count, 8), "--rcvbuf", str(64 << 20))
    try:
        c = lab.run(name, [nf5_send(build), "--blocks", str(blocks), "--to", f"127.0.0.1:{port}", "--src",
                           ",".join(srcs), "--count", str(count), "--rate", "1e9"], capture_output=True, text=True)
        out, _ = sink.communicate(timeout=30)
    finally:
        sink.kill()
    assert json.loads(c.stdout)["sent"] == count
    res = json.loads(out.strip().splitlines()[-1])
    assert res["received"] == count and res["digest_ok"] == 1, res


@pytest.mark.parametrize("args, says", [
    (["--count", "0"], "--count: '0'"),
    (["--rate", "fast"], "--rate: 'fast'"),
    (["--to", "127.0.0.1"], "--to: '127.0.0.1'"),
    (["--src", "::1"], "--src: '::1'"),
    (["--blocks", "/etc/hostname"], "--blocks: '/etc/hostname'"),
    (["--speed", "1"], "'--speed' is not an option"),
])
def test_nf5_send_bad_arguments(build, tmp_path, args, says):
    blocks = tmp_path / "blocks.bin"
    relaytool.write_nf5_blocks(str(blocks))
    base = {"--blocks": str(blocks), "--to": "127.0.0.1:9", "--src": "127.0.0.1", "--count": "1", "--rate": "1"}
    if args[0] in base:
        base[args[0]] = args[1]
        args = []
    argv = [nf5_send(build), *[x for kv in base.items() for x in kv], *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and says in p.stderr and not p.stdout, (p.returncode, p.stderr)
