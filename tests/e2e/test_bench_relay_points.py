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

import relaytool

REPO = Path(__file__).resolve().parents[2]
POINTS = REPO / "bench" / "relay_points.py"


def test_sink_digest_checks_every_byte(build, tmp_path):
    """Two ports get three NetFlow datagrams each; port 2 gets one with a
    byte changed.  Right counts on both, digest_ok only on port 1."""
    port = 39170
    ready = tmp_path / "ready"
    want = relaytool.nf5_digest(3, 2)
    blocks = relaytool.nf5_blocks()
    sink = subprocess.Popen([str(build / "tools" / "groupcast"), "sink", "--addr", "127.0.0.1",
                             "--port-base", str(port), "--count", "2", "--expect", "6", "--idle-ms", "3000",
                             "--ready-file", str(ready), "--digest", want], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            if ready.exists() or sink.poll() is not None:
                break
            time.sleep(0.01)
        assert ready.exists(), "sink did not start"
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
