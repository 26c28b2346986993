"""DCCP connect/listen/accept/send/recv through the binding: the asyncio echo
example (examples/dccp_echo.py) serves in r1, a client in s drives it with
selectors on the connection's fileno()."""
import json
import selectors
import subprocess
import sys
import threading
import time

import pytest

from conftest import PKG, child_env, netns

from groupcast import dccp


@pytest.mark.parametrize("encap", [dccp.Encap.UDP, dccp.Encap.NATIVE], ids=["udp", "native"])
def test_round_trip_with_selectors_and_asyncio(lab, encap):
    star = lab.topology
    r1 = star.links[0].b
    port = 6511 if encap == dccp.Encap.UDP else 5001
    argv = [sys.executable, PKG / "examples/dccp_echo.py", "--listen", f"{r1.v4}:{port}"]
    if encap == dccp.Encap.UDP:
        argv.append("--udp")
    srv = lab.popen(r1.ns, argv, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "listening", srv.stderr.read()
        sent = [bytes((i + j) & 0xFF for j in range(1 + i * 29 % 1400)) for i in range(60)]
        with netns(star.sender):
            conn = dccp.connect((r1.v4, port), encap=encap, timeout=10)
        with conn, selectors.DefaultSelector() as sel:
            assert conn.stats().state in (dccp.State.OPEN, dccp.State.PARTOPEN)
            sel.register(conn, selectors.EVENT_READ)
            got = []
            for p in sent:
                conn.send(p)
            deadline = time.monotonic() + 15
            while len(got) < len(sent) and time.monotonic() < deadline:
                for _key, _ in sel.select(timeout=0.5):
                    got.append(conn.recv(timeout=0))
            assert got == sent      # no loss in the lab: every packet, boundaries and order kept
            with pytest.raises(BlockingIOError):
                conn.recv(timeout=0.05)
            with pytest.raises(ValueError):
                conn.send(b"x" * 1401)
            acked = conn.acked()      # send()'s numbers, as the peer's Acks named them
            assert acked and acked == sorted(acked) and set(acked) <= set(range(1, len(sent) + 1))
            st = conn.stats()
            assert st.sent >= len(sent) and st.received == len(sent) and st.rx_lost == 0
        out, err = srv.communicate(timeout=20)
        assert srv.returncode == 0, err
        assert json.loads(out.splitlines()[-1]) == {"peer_packets": len(sent), "echoed": len(sent)}
    finally:
        if srv.poll() is None:
            srv.kill()


def test_connect_refused_and_accept_timeout(lab):
    star = lab.topology
    r1 = star.links[0].b
    with netns(r1.ns):
        lst = dccp.listen((r1.v4, 6600), encap=dccp.Encap.UDP, service=7)
    with lst:
        with pytest.raises(TimeoutError):
            lst.accept(timeout=0.1)
        # the listener answers while accept() runs: the wrong Service Code gets Reset 8
        waiting = threading.Thread(target=lambda: pytest.raises(TimeoutError, lst.accept, 3.0))
        waiting.start()
        try:
            with netns(star.sender), pytest.raises(ConnectionRefusedError):
                dccp.connect((r1.v4, 6600), encap=dccp.Encap.UDP, service=8, timeout=5)
        finally:
            waiting.join()
    with netns(star.sender), pytest.raises(OSError) as ei:
        dccp.connect((r1.v4, 6600), encap=dccp.Encap.UDP, ccid=5)
    assert "ccid" in str(ei.value)
