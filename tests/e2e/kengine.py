"""What the end-to-end tests of the kernel engine (GC_ENGINE_KERNEL,
test_kernel_*.py) share: the sender, the receivers, the sends and the
checks.  The klab fixture is in conftest.py.

The kernel engine attaches a TC egress program to `lo` in the sender's network
namespace (one filter per process: pref 0x4743 = 18243, handle = pid) and
sends one trigger datagram per chunk of members; the program clones it out to
every member (bpf/fanout.bpf.c).  These tests run everything in lab namespaces
(lab/netlab.py): the sender (gcsend.py, libgroupcast through ctypes) always in
the lab's sender namespace, `groupcast sink` receivers in the two receiver
namespaces and on 127.0.0.1 / ::1 inside the sender namespace (loopback
members, whose clones re-enter lo egress).

Every test gets a fresh lab because the tests change tc filters, offloads and
sysctls of the sender namespace.  Tests are skipped with the library's reason
when gc_engine_available(GC_ENGINE_KERNEL) says the engine is unavailable.

The tests, by subject: test_kernel_delivery.py (what arrives, byte for byte,
checksums, loop safety), test_kernel_lifecycle.py (filters, owner files and
lo forwarding as processes come and go, also under attack),
test_kernel_isolation.py (users of one namespace's lo egress: threads,
processes, pid namespaces, somebody else's filter), test_kernel_policy.py
(capabilities, egress policy AUTO declines or a forced engine bypasses, MTUs).
kbpf.py has the raw bpf() and cgroup helpers.
"""
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import delivery
from delivery import check_delivery
from gcsend import expected

GCSEND = Path(__file__).with_name("gcsend.py")
PORT_BASE = 21000
PORTS = 8                   # sink ports per address (members per address)
TC_PREF = 0x4743            # 18243: the library's filters on lo egress
GC_KDATA = 64               # per-recipient bytes the kernel splices (bpf/fanout.h)
SETTLE_S = 0.5              # after the last send, before the sinks are stopped
USER_ENGINES = {"loop", "mmsg", "uring", "uring_zc"}
ALL_CAPS = "cap_bpf,cap_net_admin,cap_sys_admin,cap_perfmon"
FAMILIES = ["inet", "inet6"]
LOOPBACK = {"inet": "127.0.0.1", "inet6": "::1"}
RUN_DIR = Path("/run/groupcast")  # GC_RUN_DIR of lib/group/kernel.c: lo-NETNS-PID, lo-NETNS.fwd4/6


# ---- lab and sender ---------------------------------------------------------

_kernel_unavailable = []


def require_kernel(lab, build):
    if not _kernel_unavailable:
        out = gcsend(lab, build, {"engine": "kernel", "sends": []})
        _kernel_unavailable.append(None if out["available"] else out["reason"])
    if _kernel_unavailable[0]:
        pytest.skip(f"engine kernel unavailable: {_kernel_unavailable[0]}")


def gcsend_argv(build, drop_caps=None):
    argv = [sys.executable, GCSEND, build / "libgroupcast.so"]
    if drop_caps:  # capsh drops them from the bounding set before exec'ing the shell
        argv = ["capsh", f"--drop={drop_caps}", "--", "-c", "exec " + shlex.join(map(str, argv))]
    return argv


def gcsend(lab, build, job, drop_caps=None):
    """Run gcsend.py in the sender namespace to completion; its JSON output."""
    p = lab.run(lab.topology.sender, gcsend_argv(build, drop_caps), input=json.dumps(job),
                capture_output=True, text=True, check=False, timeout=300)
    if p.returncode != 0:
        pytest.fail(f"gcsend.py failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


class Held:
    """gcsend.py in the background: it sends, writes its pid to a ready file,
    then keeps its sockets (and so its TC filter) until release()."""

    def __init__(self, lab, build, job, tmp_path, name):
        self.ready, self.hold = tmp_path / f"{name}.ready", tmp_path / f"{name}.hold"
        job = dict(job, ready_file=str(self.ready), hold_file=str(self.hold), hold_s=120)
        self.proc = lab.popen(lab.topology.sender, gcsend_argv(build), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.proc.stdin.write(json.dumps(job))
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not flush it again
        self.pid = None

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while not self.ready.exists():
            if self.proc.poll() is not None:
                pytest.fail(f"gcsend.py exited early ({self.proc.returncode}): {self.proc.stderr.read().strip()}")
            assert time.monotonic() < deadline, f"gcsend.py not ready after {timeout} s"
            time.sleep(0.01)
        self.pid = int(self.ready.read_text())
        assert self.pid == self.proc.pid, "ip netns exec did not exec gcsend.py in place"
        return self.pid

    def release(self):
        """Let it exit normally; its JSON output."""
        self.hold.touch()
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, f"gcsend.py failed ({self.proc.returncode}): {err.strip()}"
        return json.loads(out)

    def sigkill(self):
        """SIGKILL while attached (our own child, by its pid)."""
        self.proc.kill()
        self.proc.communicate(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL, self.proc.returncode


# ---- what the sender namespace looks like -----------------------------------

def gc_filters(lab, ns=None):
    """[(pref, handle)] of the gc_fanout filters on lo egress."""
    out = lab.run(ns or lab.topology.sender, ["tc", "filter", "show", "dev", "lo", "egress"],
                  capture_output=True, text=True).stdout
    found = re.findall(r"pref (\d+) bpf chain \d+ handle (0x[0-9a-f]+) gc_fanout", out)
    return [(int(pref), int(handle, 16)) for pref, handle in found]


def foreign_filters(lab):
    """The lines of `tc filter show dev lo egress` that are not ours."""
    return "\n".join(line for line in tc_egress(lab).splitlines() if f"pref {TC_PREF} " not in line)


def tc_egress(lab):
    return lab.run(lab.topology.sender, ["tc", "filter", "show", "dev", "lo", "egress"],
                   capture_output=True, text=True).stdout


def lo_forwarding(lab):
    """(net.ipv4.conf.lo.forwarding, net.ipv6.conf.lo.forwarding) in the sender namespace."""
    out = lab.run(lab.topology.sender, ["cat", "/proc/sys/net/ipv4/conf/lo/forwarding",
                                        "/proc/sys/net/ipv6/conf/lo/forwarding"],
                  capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def csum_errors(lab, ns):
    """Udp InCsumErrors from /proc/net/snmp and Udp6InCsumErrors from /proc/net/snmp6 of ns."""
    snmp = lab.run(ns, ["cat", "/proc/net/snmp"], capture_output=True, text=True).stdout.splitlines()
    udp = [line.split()[1:] for line in snmp if line.startswith("Udp: ")]
    snmp6 = lab.run(ns, ["cat", "/proc/net/snmp6"], capture_output=True, text=True).stdout.split()
    return {"Udp": int(dict(zip(udp[0], udp[1]))["InCsumErrors"]),
            "Udp6": int(snmp6[snmp6.index("Udp6InCsumErrors") + 1])}


# ---- members, sends, expected datagrams -------------------------------------

def addresses(lab, family):
    """{namespace: address} of the members: both receivers and loopback in the sender."""
    kind = "v4" if family == "inet" else "v6"
    addrs = {r.ns: getattr(r, kind) for r in lab.topology.receivers}
    addrs[lab.topology.sender] = LOOPBACK[family]
    return addrs


def members(addrs, ports=PORTS):
    return [(addr, PORT_BASE + i) for addr in addrs.values() for i in range(ports)]


def send(group, payload):
    return {"kind": "send", "members": [list(m) for m in group], "payload_hex": payload.hex()}


def sendgroup(recs, shared):
    """recs: [(addr, port, prepend, append)]."""
    return {"kind": "sendgroup", "shared_hex": shared.hex(),
            "recs": [[a, p, pre.hex(), app.hex()] for a, p, pre, app in recs]}


def n_datagrams(sends):
    return sum(len(s["members"] if s["kind"] == "send" else s["recs"]) for s in sends)


def assert_all_sent(out, sends):
    """Every gc_send returned len with no failed member; every gc_sendgroup sent to all."""
    assert len(out["results"]) == len(sends)
    for i, (s, r) in enumerate(zip(sends, out["results"])):
        if s["kind"] == "send":
            n = len(s["members"])
            assert (r["setgroup"], r.get("ret"), r.get("failed")) == (0, len(s["payload_hex"]) // 2, 0), \
                f"send {i}: {r}"
        else:
            n = len(s["recs"])
            assert r["ret"] == n, f"sendgroup {i}: {r}"
        assert r["gerrno"] == [0] * n, f"send {i}: gerrno {r['gerrno']}"
    assert out["stats"]["datagrams"] == n_datagrams(sends) and out["stats"]["failed"] == 0, out["stats"]
    assert out["stats"]["group_sends"] == len(sends), out["stats"]


# ---- receivers --------------------------------------------------------------

def sinks(lab, build, tmp_path, where, ports=PORTS):
    """delivery.sinks() on PORT_BASE.., stopped SETTLE_S after the last send."""
    return delivery.sinks(lab, build, tmp_path, where, port_base=PORT_BASE, ports=ports, settle_s=SETTLE_S)


def deliver(lab, build, tmp_path, family, sends, drop_caps=None, engine="kernel", ports=PORTS):
    """Run sinks at every member address, send with one gcsend.py, check that
    every member got exactly its bytes; returns gcsend's output."""
    with sinks(lab, build, tmp_path, addresses(lab, family).items(), ports) as collect:
        out = gcsend(lab, build, {"engine": engine, "socket": family, "pace_ms": 5, "stats_each": True,
                                  "sends": sends}, drop_caps=drop_caps)
        got = collect()
    assert out["available"], out
    assert_all_sent(out, sends)
    check_delivery([expected(sends)], got)
    return out


def mixed_sends(rnd, group, n, sizes=(0, 1, 2, 3, 99, 255, 256, 257, 1000, 1201)):
    """n sends, the group replaced before each (other subsets, other orders),
    alternating gc_send and gc_sendgroup with up to GC_KDATA private bytes each
    side (kernel path), odd and even lengths, payloads below and above the
    library's splice threshold (256)."""
    sends = []
    for i in range(n):
        g = rnd.sample(group, rnd.randrange(1, len(group) + 1))
        size = sizes[i % len(sizes)]
        if i % 2 == 0:
            sends.append(send(g, rnd.randbytes(size)))
        else:
            sends.append(sendgroup([(a, p, rnd.randbytes(rnd.choice([0, 1, 7, 63, 64])),
                                     rnd.randbytes(rnd.choice([0, 1, 2, 33, 64])))
                                    for a, p in g], rnd.randbytes(size)))
    return sends


def receiver_members(lab, family, ports=PORTS):
    kind = "v4" if family == "inet" else "v6"
    return [(getattr(r, kind), PORT_BASE + i) for r in lab.topology.receivers for i in range(ports)]


def receiver_addresses(lab, family):
    kind = "v4" if family == "inet" else "v6"
    return {r.ns: getattr(r, kind) for r in lab.topology.receivers}



def held_kernel_user(lab, build, tmp_path, name, family="inet"):
    """A process that attached the kernel engine (one send to a receiver) and holds."""
    r1 = lab.topology.receivers[0]
    job = {"engine": "kernel", "socket": family, "pace_ms": 0,
           "sends": [send([(r1.v4 if family == "inet" else r1.v6, PORT_BASE)], b"attach")]}
    held = Held(lab, build, job, tmp_path, name)
    held.wait_ready()
    return held

