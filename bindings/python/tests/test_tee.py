"""The tee example end to end: the project's NetFlow producer (relaytool.py
nf5) sends NetFlow v5 export packets from r2 to the tee in s, which
copies each one to 100 receivers, 50 IPv4 ports in r1 and 50 IPv6 ports in r2,
plus one receiver no route reaches.  Every copy must be byte-exact, in order,
none missing or extra; the unreachable one must be reported, not hidden."""
import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import PKG, REPO, child_env

sys.path.insert(0, str(REPO / "tests/e2e"))
from relaytool import nf5_blocks, nf5_datagram  # noqa: E402

RELAYTOOL = REPO / "tests/e2e/relaytool.py"
COUNT, SIZE = 40, 984               # relaytool nf5: 20 flow records a packet


def wait_file(path, proc, timeout=15):
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize("engine", ["auto", "mmsg"])
def test_tee_netflow_to_100_receivers(lab, tmp_path, engine):
    star = lab.topology
    s_in, r1, r2 = star.links[1].a, star.links[0].b, star.links[1].b
    ports4, ports6 = list(range(9100, 9150)), list(range(9200, 9250))
    rx = []
    for node, addr, ports in ((r1, r1.v4, ports4), (r2, r2.v6, ports6)):
        ready = tmp_path / f"{node.ns}.ready"
        rx.append(lab.popen(node.ns, [sys.executable, RELAYTOOL, "rx", "--addr", addr, "--ports",
                                      ",".join(map(str, ports)), "--idle", "1.5", "--timeout", "30",
                                      "--ready", ready], stdout=subprocess.PIPE, text=True))
        wait_file(ready, rx[-1])
    unreachable = f"{lab.unrouted_v4()}/9999"
    receivers = [f"{r1.v4}/{p}" for p in ports4] + [f"[{r2.v6}]/{p}" for p in ports6] + [unreachable]
    tee = lab.popen(star.sender, [sys.executable, PKG / "examples/tee.py", "--listen", f"{s_in.v4}:2055",
                                  "--engine", engine, *receivers],
                    env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = tee.stderr.readline()
        assert "101 receivers" in line, line + tee.stderr.read()
        lab.run(r2.ns, [sys.executable, RELAYTOOL, "nf5", "--to", f"{s_in.v4}:2055", "--src", r2.v4,
                        "--count", COUNT, "--rate", 400], capture_output=True, timeout=30)
        got = {}
        for p in rx:
            out, _ = p.communicate(timeout=40)
            got.update(json.loads(out))
        tee.send_signal(signal.SIGTERM)
        out, err = tee.communicate(timeout=10)
    finally:
        for p in (tee, *rx):
            if p.poll() is None:
                p.kill()
    assert tee.returncode == 0, err
    blocks = nf5_blocks()
    want = [nf5_datagram(i, 1, blocks).hex() for i in range(COUNT)]
    assert len(want[0]) == 2 * SIZE
    assert sorted(map(int, got)) == ports4 + ports6
    for port, copies in got.items():
        assert [h for _, _, h in copies] == want, f"receiver port {port}"
    counters = json.loads(out.splitlines()[-1])
    assert counters["in"] == COUNT and counters["failed"] == {unreachable: COUNT}
    assert counters["engine"] == ("kernel" if engine == "auto" else "mmsg")
    assert counters["stats"]["datagrams"] == COUNT * 100 and counters["stats"]["failed"] == COUNT
    assert err.count("Network is unreachable") == COUNT
