"""The lab builds what it promises and always removes it again."""
import errno
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import netlab
from netlab import Lab

NETLAB = Path(netlab.__file__)
BACKLOG = "net.core.netdev_max_backlog"

RECV = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999))
s.settimeout(5)
print('ready', flush=True)
print(s.recv(100).decode())
"""
SEND = """
import socket, sys
f = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
try:
    socket.socket(f, socket.SOCK_DGRAM).sendto(sys.argv[2].encode(), (sys.argv[1], 9999))
except OSError as e:
    print(e.errno)
"""
# A process that owns a lab, tells its prefix, the pid of a process running
# inside it and whether SIGINT is ignored once the lab is up, then waits to
# be signalled.
CHILD = f"""
import json, signal, sys, time
sys.path.insert(0, {str(NETLAB.parent)!r})
from netlab import Lab
with Lab() as lab:
    star = lab.star(1)
    lab.set_sysctl({BACKLOG!r}, int(open('/proc/sys/net/core/netdev_max_backlog').read()) + 7)
    sleeper = lab.popen(star.receivers[0].ns, ['sleep', '60'])
    print(json.dumps({{"prefix": lab.prefix, "sleeper": sleeper.pid,
                      "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}}), flush=True)
    time.sleep(60)
"""


def start_child(sigint):
    """CHILD with SIGINT set to sigint (SIG_DFL or SIG_IGN) whatever this
    process has: a job started in the background (`make test &`, nohup) runs
    with SIGINT ignored, and its children inherit that."""
    return subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def stop_child(child, sig):
    """Send sig and wait for the child; killed (and the test failed) if it
    is still there after 30 s."""
    child.send_signal(sig)
    try:
        child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"the lab's owner did not react to {signal.Signals(sig).name} in 30 s")


def backlog():
    return netlab._sysctl_path(BACKLOG).read_text().strip()


def namespaces(prefix):
    return [ns for ns in netlab._netns_list() if ns.startswith(prefix + "-")]


def running(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_gone(prefix, original_backlog, pids=()):
    assert namespaces(prefix) == []
    assert backlog() == original_backlog
    assert not netlab._state_path(prefix).exists()
    assert [pid for pid in pids if running(pid)] == []


def test_star_delivers_v4_and_v6_and_has_no_default_route():
    root_interfaces = socket.if_nameindex()
    with Lab() as lab:
        star = lab.star(2)
        assert socket.if_nameindex() == root_interfaces
        assert sorted(namespaces(lab.prefix)) == sorted([star.sender] + [r.ns for r in star.receivers])
        for r in star.receivers:
            for addr in (r.v4, r.v6):
                rx = lab.popen(r.ns, [sys.executable, "-c", RECV, addr], stdout=subprocess.PIPE, text=True)
                assert rx.stdout.readline() == "ready\n"
                lab.run(star.sender, [sys.executable, "-c", SEND, addr, f"hello {addr}"])
                assert rx.communicate(timeout=10)[0] == f"hello {addr}\n"
        for family in ("-4", "-6"):
            routes = lab.ip(star.sender, family, "route", "show", "table", "all")
            assert "default" not in routes
        for addr in (lab.unrouted_v4(), lab.unrouted_v6()):
            out = lab.run(star.sender, [sys.executable, "-c", SEND, addr, "x"], capture_output=True, text=True)
            assert out.stdout.strip() == str(errno.ENETUNREACH)
    assert namespaces(lab.prefix) == []


def test_settings_apply_inside_the_lab_and_are_restored():
    original = backlog()
    with Lab() as lab:
        link = lab.add_link(lab.add_ns("a"), lab.add_ns("b"))
        lab.set_offload(link.a.ns, link.a.ifname, tso=False, tx_udp_segmentation=False)
        features = lab.run(link.a.ns, ["ethtool", "-k", link.a.ifname], capture_output=True, text=True).stdout
        assert "tcp-segmentation-offload: off" in features and "tx-udp-segmentation: off" in features
        lab.set_rps(link.b.ns, link.b.ifname, 0b10)
        rps = lab.run(link.b.ns, ["cat", f"/sys/class/net/{link.b.ifname}/queues/rx-0/rps_cpus"],
                      capture_output=True, text=True).stdout
        assert int(rps.replace(",", ""), 16) == 0b10
        lab.set_sysctl("net.ipv4.ip_forward", 1, ns=link.b.ns)
        forward = lab.run(link.b.ns, ["sysctl", "-n", "net.ipv4.ip_forward"], capture_output=True, text=True)
        assert forward.stdout.strip() == "1"
        lab.set_sysctl(BACKLOG, int(original) + 3)
        lab.set_sysctl(BACKLOG, int(original) + 5)
        assert backlog() == str(int(original) + 5)
    assert_gone(lab.prefix, original)


def test_cleanup_when_the_body_raises():
    original = backlog()
    with pytest.raises(RuntimeError, match="boom"):
        with Lab() as lab:
            star = lab.star(2)
            lab.set_sysctl(BACKLOG, int(original) + 1)
            sleeper = lab.popen(star.receivers[1].ns, ["sleep", "60"])
            raise RuntimeError("boom")
    assert_gone(lab.prefix, original, [sleeper.pid])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cleanup_on_signal(sig):
    original = backlog()
    child = start_child(signal.SIG_DFL)
    info = json.loads(child.stdout.readline())
    assert namespaces(info["prefix"]) and backlog() != original
    assert not info["sigint_ignored"]
    stop_child(child, sig)
    assert child.returncode != 0
    assert_gone(info["prefix"], original, [info["sleeper"]])


def test_inherited_ignored_sigint_stays_ignored():
    """A program started with SIGINT ignored (a background job) keeps
    ignoring it when it makes a lab: the lab does not make it interruptible.
    SIGTERM still removes the lab.  SIGINT is sent first: standard signals
    pending together are taken lowest number first, so a SIGINT the lab
    reacted to would end the child before SIGTERM, with -SIGINT, or leave
    the lab to a KeyboardInterrupt."""
    original = backlog()
    child = start_child(signal.SIG_IGN)
    info = json.loads(child.stdout.readline())
    assert namespaces(info["prefix"]) and backlog() != original
    assert info["sigint_ignored"], "the lab replaced an inherited SIG_IGN for SIGINT"
    child.send_signal(signal.SIGINT)
    stop_child(child, signal.SIGTERM)
    assert child.returncode == -signal.SIGTERM, child.returncode
    assert_gone(info["prefix"], original, [info["sleeper"]])


def test_cleanup_removes_what_a_killed_run_left_and_spares_live_labs():
    original = backlog()
    with Lab() as live:
        live.add_ns("x")
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
        info = json.loads(child.stdout.readline())
        child.kill()
        child.wait()
        assert namespaces(info["prefix"]) and running(info["sleeper"])
        out = subprocess.run([sys.executable, NETLAB, "cleanup"], capture_output=True, text=True, check=True)
        assert f"removed {info['prefix']}" in out.stdout
        assert namespaces(live.prefix) == [f"{live.prefix}-x"]
    assert_gone(info["prefix"], original, [info["sleeper"]])


def test_cli_up_and_down():
    up = subprocess.run([sys.executable, NETLAB, "up", "--receivers", "3"], capture_output=True, text=True, check=True)
    desc = json.loads(up.stdout)
    prefix = desc["prefix"]
    try:
        assert len(desc["links"]) == 3 and len(namespaces(prefix)) == 4
        listed = subprocess.run([sys.executable, NETLAB, "list"], capture_output=True, text=True, check=True)
        assert f"{prefix} detached" in listed.stdout.splitlines()
    finally:
        subprocess.run([sys.executable, NETLAB, "down", prefix], check=True)
    assert namespaces(prefix) == []

