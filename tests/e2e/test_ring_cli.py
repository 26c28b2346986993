"""`groupcast engine` (the packet-ring engine daemon) and `groupcast ring-send`.

Lab: two namespaces joined by one veth.  The engine daemon and every
ring-send client run in namespace "tx"; `groupcast sink` runs in namespace
"rx", dumps every datagram, and the test checks that each sequence number
arrived exactly once with the right bytes.  Nothing runs in the root
namespace; only the daemon's Unix socket lives in /tmp (shared by all
namespaces).
"""
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from queue import Empty, Queue
from collections import Counter

import pytest

from sinkdump import read_dump

from netlab import Lab

WAIT = 20  # seconds any single step may take


class Net:
    def __init__(self, lab, build):
        self.lab = lab
        self.bin = str(build / "tools" / "groupcast")
        self.tx = lab.add_ns("tx")
        self.rx = lab.add_ns("rx")
        link = lab.add_link(self.tx, self.rx)
        self.v4, self.v6 = link.b.v4, link.b.v6
        lab.resolve(self.tx, [self.v4, self.v6])
        self.dir = tempfile.mkdtemp(prefix=f"{lab.prefix}-")  # short: socket paths < 108 bytes
        self.n = 0

    def path(self, name):
        self.n += 1
        return os.path.join(self.dir, f"{name}{self.n}")

    # -- the daemon --------------------------------------------------------------
    def engine(self, sock, *args):
        """Start `groupcast engine --listen sock` in tx; return once it listens."""
        p = self.lab.popen(self.tx, [self.bin, "engine", "--listen", sock, *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.readline(p.stderr)
        assert line == f"level=notice event=listening path={sock} socket=bound\n", line + p.stderr.read()
        assert os.path.exists(sock)
        # stdout lines into a queue: select() cannot see what a text file buffered
        p.lines = Queue()
        p.reader = threading.Thread(target=lambda: [p.lines.put(x) for x in p.stdout], daemon=True)
        p.reader.start()
        return p

    @staticmethod
    def stats_line(p, timeout=WAIT):
        try:
            return json.loads(p.lines.get(timeout=timeout))
        except Empty:
            raise AssertionError("no stats line in time") from None

    @staticmethod
    def readline(f, timeout=WAIT):
        ready, _, _ = select.select([f], [], [], timeout)
        assert ready, "no output in time"
        return f.readline()

    def stop(self, p):
        """SIGTERM; returns (final stats dict, stdout lines, stderr)."""
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=WAIT)
        err = p.stderr.read()
        assert p.returncode == 0, f"engine exited {p.returncode}: {err}"
        p.reader.join(timeout=WAIT)
        lines = []
        while not p.lines.empty():
            lines.append(p.lines.get())
        return json.loads(lines[-1]), lines, err

    # -- clients and receivers -------------------------------------------------
    def ring_send(self, *args, wait=True):
        argv = [self.bin, "ring-send", *map(str, args)]
        if wait:
            return self.lab.run(self.tx, argv, capture_output=True, text=True, check=False, timeout=60)
        return self.lab.popen(self.tx, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def sink(self, addr, port, count, expect):
        dump, ready = self.path("dump"), self.path("ready")
        p = self.lab.popen(self.rx, [self.bin, "sink", "--addr", addr, "--port-base", port, "--count", count,
                                     "--expect", expect, "--idle-ms", 5000, "--timeout-ms", 60000,
                                     "--rcvbuf", 32 << 20, "--dump", dump, "--ready-file", ready],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + WAIT
        while not os.path.exists(ready):
            assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, "sink not ready"
            time.sleep(0.02)
        return p, dump

    def received(self, sink, dump):
        """{port: [payload, ...]} of everything the sink got."""
        out, err = sink.communicate(timeout=90)
        assert sink.returncode == 0, err
        got = {}
        for port, data in read_dump(dump):
            got.setdefault(port, []).append(data)
        return got


def payload(seq, size):
    return (seq.to_bytes(8, "big") + bytes((i * 7 + 0x5A) & 0xFF for i in range(8, size)))[:size]


def check_exact(dgrams, first, count, size):
    """Each of count sequence numbers from first exactly once, bytes exact."""
    assert len(dgrams) == count
    if size >= 8:
        seqs = Counter(int.from_bytes(d[:8], "big") for d in dgrams)
        assert seqs == Counter(range(first, first + count))
    want = {payload(s, size) for s in range(first, first + count)} if size >= 8 else {payload(first, size)}
    bad = [d for d in dgrams if d not in want]
    assert not bad, f"{len(bad)} datagrams with wrong bytes, e.g. {bad[0][:16].hex()}"


def status(res, count):
    assert res.returncode == 0, f"ring-send exited {res.returncode}: {res.stderr}"
    st = json.loads(res.stdout.splitlines()[-1])
    assert st["error"] == "ok"
    assert st["sent"] == count and st["send_errors"] == 0 and st["dead"] == 0
    return st


@pytest.fixture(scope="module")
def net(build):
    with Lab() as lab:
        # bursts over a veth land in the receiving CPU's backlog (default 1000)
        lab.set_sysctl("net.core.netdev_max_backlog", 20000)
        n = Net(lab, build)
        try:
            yield n
        finally:
            shutil.rmtree(n.dir, ignore_errors=True)


def test_two_clients_through_daemon(net):
    """(a) Two concurrent clients (IPv4 and IPv6, different ports): every datagram exactly once."""
    sock = net.path("eng")
    eng = net.engine(sock, "--quiet", "--cpu", 0)
    count = 5000
    s4, d4 = net.sink(net.v4, 31000, 1, count)
    s6, d6 = net.sink(net.v6, 31001, 1, count)
    c1 = net.ring_send("--connect", sock, "--dest", f"{net.v4}:31000", "--count", count, "--size", 1000,
                       wait=False)
    c2 = net.ring_send("--connect", sock, "--dest", f"[{net.v6}]:31001", "--count", count, "--size", 1400,
                       "--entries", 64, "--every", 16, "--seq-start", 1 << 40, wait=False)
    for c in (c1, c2):
        out, err = c.communicate(timeout=60)
        status(subprocess.CompletedProcess(c.args, c.returncode, out, err), count)
    check_exact(net.received(s4, d4)[31000], 0, count, 1000)
    check_exact(net.received(s6, d6)[31001], 1 << 40, count, 1400)
    st, _, _ = net.stop(eng)
    assert st["packets"] == 2 * count and st["rings"] == 0 and st["violations"] == 0


def test_sigterm_stats_and_cleanup(net):
    """(b) SIGUSR1 and --stats-interval print stats; SIGTERM: exit 0, final stats, socket gone."""
    sock = net.path("eng")
    eng = net.engine(sock, "--stats-interval", 1, "--batch", 32, "--idle-us", 50, "--max-rings", 8)
    line = net.stats_line(eng, timeout=3)  # the interval
    assert set(line) == {"clients", "rings", "rounds", "sleeps", "notifies", "packets", "bytes",
                         "syscalls", "gso", "violations", "refused", "limited"}
    assert line["packets"] == 0 and line["rings"] == 0
    sink, dump = net.sink(net.v4, 32000, 1, 3000)
    status(net.ring_send("--connect", sock, "--dest", f"{net.v4}:32000", "--count", 3000, "--size", 200,
                         "--every", 7), 3000)
    check_exact(net.received(sink, dump)[32000], 0, 3000, 200)
    while not eng.lines.empty():  # interval lines from while it was sending
        eng.lines.get()
    eng.send_signal(signal.SIGUSR1)
    line = net.stats_line(eng)
    assert line["packets"] == 3000 and line["bytes"] == 3000 * 200
    st, lines, _ = net.stop(eng)
    assert st["packets"] == 3000 and st["bytes"] == 3000 * 200 and st["rings"] == 0
    assert not os.path.exists(sock)


def test_second_engine_on_same_path(net):
    """(c) A second daemon on a live daemon's path fails (exit 1, EADDRINUSE); the first keeps serving."""
    sock = net.path("eng")
    eng = net.engine(sock)
    res = net.lab.run(net.tx, [net.bin, "engine", "--listen", sock], capture_output=True, text=True,
                      check=False, timeout=WAIT)
    assert res.returncode == 1, res
    assert "EADDRINUSE" in res.stderr and sock in res.stderr, res.stderr
    assert os.path.exists(sock)
    sink, dump = net.sink(net.v4, 33000, 1, 1000)
    status(net.ring_send("--connect", sock, "--dest", f"{net.v4}:33000", "--count", 1000), 1000)
    check_exact(net.received(sink, dump)[33000], 0, 1000, 100)
    st, _, _ = net.stop(eng)
    assert st["packets"] == 1000
    assert not os.path.exists(sock)


@pytest.mark.parametrize("args,name", [
    (["engine"], "--listen"),
    (["engine", "--listen", "/tmp/x", "--batch", "0"], "--batch"),
    (["engine", "--listen", "/tmp/x", "--batch", "1025"], "--batch"),
    (["engine", "--listen", "/tmp/x", "--cpu", "99999"], "--cpu"),
    (["engine", "--listen", "/tmp/x", "--stats-interval", "soon"], "--stats-interval"),
    (["engine", "--listen", "/tmp/" + "x" * 120], "--listen"),
    (["engine", "--listen", "/tmp/x", "--frobnicate"], "--frobnicate"),
    (["engine", "--listen", "/tmp/x", "extra"], "extra"),
    (["engine", "--listen", "/tmp/x", "--mode", "0800"], "--mode"),
    (["engine", "--listen", "/tmp/x", "--mode", "rw"], "--mode"),
    (["engine", "--listen", "/tmp/x", "--mode", "0"], "--mode"),
    (["engine", "--listen", "/tmp/x", "--group", "no-such-group-gc"], "--group"),
    (["engine", "--listen", "/tmp/x", "--allow-uid", "no-such-user-gc"], "--allow-uid"),
    (["engine", "--listen", "/tmp/x", "--allow-gid", "-1"], "--allow-gid"),
    (["engine", "--listen", "/tmp/x", "--max-fds", "1"], "--max-fds"),
    (["engine", "--listen", "/tmp/x", "--max-clients", "0"], "--max-clients"),
    (["ring-send", "--thread"], "--dest"),
    (["ring-send", "--dest", "10.0.0.1:9"], "--connect"),
    (["ring-send", "--thread", "--connect", "/tmp/x", "--dest", "10.0.0.1:9"], "--connect"),
    (["ring-send", "--thread", "--dest", "10.0.0.1"], "--dest"),
    (["ring-send", "--thread", "--dest", "10.0.0.1:0"], "--dest"),
    (["ring-send", "--thread", "--dest", "fd00::1:9"], "--dest"),
    (["ring-send", "--thread", "--dest", "nohost:9"], "--dest"),
    (["ring-send", "--thread", "--dest", "10.0.0.1:9", "--size", "65508"], "--size"),
    (["ring-send", "--thread", "--dest", "10.0.0.1:9", "--entries", "1"], "--entries"),
    (["ring-send", "--thread", "--dest", "10.0.0.1:9", "--every", "0"], "--every"),
    (["ring-send", "--thread", "--dest", "10.0.0.1:9", "--count", "-1"], "--count"),
])
def test_bad_arguments(net, args, name):
    """(d) Bad arguments: exit 2 and a message naming the argument."""
    res = net.lab.run(net.tx, [net.bin, *args], capture_output=True, text=True, check=False, timeout=WAIT)
    assert res.returncode == 2, res
    assert name in res.stderr, res.stderr
    assert res.stdout == ""


def test_connect_to_no_daemon(net):
    """No daemon on the path: a runtime failure (exit 1) naming the path."""
    sock = net.path("none")
    res = net.ring_send("--connect", sock, "--dest", f"{net.v4}:9")
    assert res.returncode == 1 and sock in res.stderr, res


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_thread_mode(net, family):
    """(e) --thread: an engine thread of ring-send's own, no daemon."""
    addr = getattr(net, family)
    port = 34000 if family == "v4" else 34001
    dest = f"{addr}:{port}" if family == "v4" else f"[{addr}]:{port}"
    sink, dump = net.sink(addr, port, 1, 4000)
    status(net.ring_send("--thread", "--dest", dest, "--count", 4000, "--size", 300, "--entries", 16,
                         "--every", 5, "--seq-start", 77), 4000)
    check_exact(net.received(sink, dump)[port], 77, 4000, 300)


@pytest.mark.parametrize("size,count", [(0, 500), (5, 300), (8, 300), (65507, 30)])
def test_sizes_through_daemon(net, size, count):
    """(f) 0-byte datagrams, truncated sequence numbers, and the largest IPv4 datagram."""
    sock = net.path("eng")
    eng = net.engine(sock)
    port = 35000 + size % 1000
    sink, dump = net.sink(net.v4, port, 1, count)
    st = status(net.ring_send("--connect", sock, "--dest", f"{net.v4}:{port}", "--count", count,
                              "--size", size, "--every", 4), count)
    assert st["bytes"] == size * count
    got = net.received(sink, dump)[port]
    check_exact(got, 0, count, size)
    stats, _, _ = net.stop(eng)
    assert stats["packets"] == count and stats["bytes"] == size * count


def test_daemon_stops_under_client(net):
    """The daemon goes away mid-send: ring-send exits 1 saying why, and prints its status."""
    sock = net.path("eng")
    eng = net.engine(sock, "--quiet")
    c = net.ring_send("--connect", sock, "--dest", f"{net.v4}:36000", "--count", 10 ** 9, "--size", 64,
                      "--every", 32, wait=False)
    time.sleep(0.5)
    assert c.poll() is None, c.communicate()
    net.stop(eng)
    out, err = c.communicate(timeout=WAIT)
    assert c.returncode == 1, (out, err)
    assert "stopped serving the ring" in err, err
    assert json.loads(out.splitlines()[-1])["error"] == "detached"


NOBODY = 65534


def as_nobody(argv):
    return ["setpriv", "--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", *argv]


@pytest.fixture
def shared_dir(net):
    """A directory uid 65534 may enter and write (net.dir is 0700), for sockets."""
    d = tempfile.mkdtemp(prefix=f"{net.lab.prefix}-u-")
    os.chmod(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_socket_mode_and_group(net):
    """The socket file is 0600 by default; --mode and --group set it before it appears."""
    sock = net.path("eng")
    eng = net.engine(sock)
    st = os.lstat(sock)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    net.stop(eng)
    eng = net.engine(sock, "--mode", "0660", "--group", "nogroup")
    st = os.lstat(sock)
    assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == NOBODY
    net.stop(eng)
    # no private directory left beside it
    assert not [n for n in os.listdir(net.dir) if n.startswith(".gc-engine-")]


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_uid_65534_attach(net, shared_dir):
    """uid 65534: refused by default (socket mode), refused by the allow rule with --mode 0666,
    served with --mode 0666 --allow-uid 65534; the engine counts the refusals."""
    sock = os.path.join(shared_dir, "eng")
    argv = as_nobody([net.bin, "ring-send", "--connect", sock, "--dest", f"{net.v4}:37000",
                      "--count", 200, "--size", 50])

    eng = net.engine(sock, "--quiet")
    res = net.lab.run(net.tx, argv, capture_output=True, text=True, check=False, timeout=WAIT)
    assert res.returncode == 1 and "EACCES" in res.stderr and "no permission" in res.stderr, res
    net.stop(eng)

    eng = net.engine(sock, "--quiet", "--mode", "0666")
    res = net.lab.run(net.tx, argv, capture_output=True, text=True, check=False, timeout=WAIT)
    assert res.returncode == 1 and "EACCES" in res.stderr, res
    assert "uid 65534" in res.stderr and "not allowed" in res.stderr, res.stderr
    st, _, _ = net.stop(eng)
    assert st["refused"] == 1 and st["packets"] == 0

    eng = net.engine(sock, "--quiet", "--mode", "0666", "--allow-uid", NOBODY)
    sink, dump = net.sink(net.v4, 37000, 1, 200)
    res = net.lab.run(net.tx, argv, capture_output=True, text=True, check=False, timeout=60)
    status(res, 200)
    check_exact(net.received(sink, dump)[37000], 0, 200, 50)
    st, _, _ = net.stop(eng)
    assert st["refused"] == 0 and st["packets"] == 200


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_client_does_not_trust_foreign_engine(net, shared_dir):
    """An engine run by uid 65534: a root client refuses it (EPERM), naming its uid."""
    sock = os.path.join(shared_dir, "eng")
    p = net.lab.popen(net.tx, as_nobody([net.bin, "engine", "--listen", sock]),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = net.readline(p.stderr)
    assert line == f"level=notice event=listening path={sock} socket=bound\n", line
    res = net.ring_send("--connect", sock, "--dest", f"{net.v4}:9", "--count", 1)
    assert res.returncode == 1 and "EPERM" in res.stderr and "uid 65534" in res.stderr, res
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=WAIT)
    assert p.returncode == 0

