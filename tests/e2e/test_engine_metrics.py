"""groupcast engine --metrics: the engine daemon's stats for Prometheus.

test_ring_cli.py's lab: the daemon and its clients in namespace tx, the sink
in rx; scrapes run inside tx on its loopback.
"""
import json
import socket
import sys
import time

from test_relay_metrics import SCRAPE, parse, promtool
from test_ring_cli import check_exact, net, status  # noqa: F401 (net: test_ring_cli's lab, a fixture)

P = "groupcast_engine_"


def scrape(net, port):
    p = net.lab.run(net.tx, [sys.executable, "-c", SCRAPE, f"http://127.0.0.1:{port}/metrics", "GET", "10"],
                    capture_output=True, text=True, timeout=30)
    r = json.loads(p.stdout)
    assert r["status"] == 200 and r["ctype"] == "text/plain; version=0.0.4; charset=utf-8", r
    return r["body"]


def test_counters_move_by_what_a_client_sent_and_limits_are_counted(net):  # noqa: F811
    """A client sends 2000 datagrams of 300 bytes through the daemon: the
    datagram and byte counters move by exactly that; a client over
    --max-clients and a ring over --max-map are counted; promtool passes."""
    sock = net.path("eng")
    eng = net.engine(sock, "--metrics", "9480", "--max-clients", "1", "--max-map", str(2 << 20))
    try:
        before = parse(scrape(net, 9480))
        assert before[(P + "clients", "")] == 1 and before[(P + "rings", "")] == 0
        assert before[(P + "datagrams_sent_total", "")] == 0
        assert before[(P + "max_clients", "")] == 1
        count, size = 2000, 300
        sink, dump = net.sink(net.v4, 33000, 1, count)
        status(net.ring_send("--connect", sock, "--dest", f"{net.v4}:33000", "--count", count, "--size", size), count)
        check_exact(net.received(sink, dump)[33000], 0, count, size)
        # a ring bigger than --max-map (65536 records: 258 MiB): refused by the per-client limit
        big = net.ring_send("--connect", sock, "--dest", f"{net.v4}:33001", "--count", 1, "--size", 100,
                            "--entries", 65536)
        assert big.returncode != 0 and "max_map_bytes" in big.stderr, big.stderr
        # one client held connected: the next is over --max-clients
        held = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        held.connect(sock)
        deadline = time.monotonic() + 10
        while parse(scrape(net, 9480))[(P + "clients", "")] != 2:
            assert time.monotonic() < deadline, "the held client never counted"
            time.sleep(0.1)
        over = net.ring_send("--connect", sock, "--dest", f"{net.v4}:33002", "--count", 1, "--size", 100)
        assert over.returncode != 0 and "max_clients" in over.stderr, over.stderr
        text = scrape(net, 9480)
        held.close()
    finally:
        st, _, _ = net.stop(eng)
    m = parse(text)
    assert m[(P + "datagrams_sent_total", "")] == count == st["packets"]
    assert m[(P + "sent_bytes_total", "")] == count * size
    assert m[(P + "connections_refused_total", "")] == 1 == st["refused"]
    assert m[(P + "client_limit_hits_total", "")] == 1 == st["limited"]
    assert m[(P + "up", "")] == 1
    assert m[(P + "metrics_requests_total", 'code="200"')] >= 3
    promtool(text)


def test_metrics_off_by_default_and_bad_addresses_refused(net):  # noqa: F811
    sock = net.path("eng")
    eng = net.engine(sock)
    try:
        p = net.lab.run(net.tx, ["ss", "-Htln"], capture_output=True, text=True, timeout=10)
        assert p.stdout.strip() == ""
    finally:
        net.stop(eng)
    for arg, what in [("0", "bad port '0'"), ("foo:80", "'foo' is not")]:
        p = net.lab.run(net.tx, [net.bin, "engine", "--listen", sock, "--metrics", arg], check=False,
                        capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and f"--metrics '{arg}'" in p.stderr and what in p.stderr, (arg, p.stderr)
