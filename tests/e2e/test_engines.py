"""Every engine delivers exactly the right bytes to real receivers.

The sender namespace runs gcsend.py (libgroupcast through ctypes); each of the
two receiver namespaces runs `groupcast sink` on PORTS ports and dumps what
arrives.  The expected datagrams come from a seed that depends only on the
address family, never on the engine, so engines that pass deliver identical
bytes.
"""
import errno
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from delivery import check_delivery, sinks
from gcsend import expected

GCSEND = Path(__file__).with_name("gcsend.py")
ENGINES = ["loop", "mmsg", "uring", "uring_zc", "kernel"]
PORT_BASE, PORTS = 20000, 500  # per receiver: 1000 members in all
IDLE_MS = 2000                 # a sink stops after this long without a datagram
PACE_MS = 20                   # pause after each group send so that receivers keep up
# family: (socket of the sender, address of the members)
FAMILIES = {"inet": ("inet", "v4"), "inet6": ("inet6", "v6"), "dual": ("inet6", "v4")}


@pytest.fixture(scope="module", autouse=True)
def backlog(lab):
    """A group send lands as one burst of up to 2000 packets (3000 bytes
    payloads fragment) in the sender CPU's backlog; the default holds 1000."""
    lab.set_sysctl("net.core.netdev_max_backlog", 20000)


class Plan:
    """The group sends of one gcsend job, and what each member must receive."""

    def __init__(self, seed):
        self.rnd = random.Random(seed)
        self.sends = []

    def send(self, group, size):
        payload = self.rnd.randbytes(size)
        self.sends.append({"kind": "send", "members": [list(m) for m in group], "payload_hex": payload.hex()})

    def sendgroup(self, group, size):
        """Recipient i gets prepend (0..8 bytes, empty for some) | shared |
        append (starting with i, so it is distinct per recipient)."""
        recs = [[addr, port, self.rnd.randbytes(i % 9).hex(),
                 (i.to_bytes(2, "big") + self.rnd.randbytes(self.rnd.randrange(8))).hex()]
                for i, (addr, port) in enumerate(group)]
        self.sends.append({"kind": "sendgroup", "shared_hex": self.rnd.randbytes(size).hex(), "recs": recs})

    def expected(self, receivers):
        """{(addr, port): [datagram, ...] in send order} for members at receivers."""
        return {key: dgrams for key, dgrams in expected(self.sends).items() if key[0] in receivers}


def members(lab, kind):
    """(addr, port) of all PORTS ports of every receiver; kind is "v4" or "v6"."""
    return [(getattr(r, kind), PORT_BASE + i) for r in lab.topology.receivers for i in range(PORTS)]


def gcsend(lab, build, job):
    p = lab.run(lab.topology.sender, [sys.executable, GCSEND, build / "libgroupcast.so"],
                input=json.dumps(job), capture_output=True, text=True, check=False, timeout=300)
    if p.returncode != 0:
        pytest.fail(f"gcsend.py failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


_unavailable = {}


def require_engine(lab, build, engine):
    if engine not in _unavailable:
        out = gcsend(lab, build, {"engine": engine, "sends": []})
        _unavailable[engine] = None if out["available"] else out["reason"]
    if _unavailable[engine]:
        pytest.skip(f"engine {engine} unavailable: {_unavailable[engine]}")


def run_plan(lab, build, engine, family, plan, tmp_path):
    sock, kind = FAMILIES[family]
    addrs = {r.ns: getattr(r, kind) for r in lab.topology.receivers}
    # The sinks stop by themselves IDLE_MS after their last datagram.
    with sinks(lab, build, tmp_path, addrs.items(), port_base=PORT_BASE, ports=PORTS, idle_ms=IDLE_MS) as collect:
        out = gcsend(lab, build, {"engine": engine, "socket": sock, "pace_ms": PACE_MS, "sends": plan.sends})
        got = collect()
    assert out["engine"] == engine
    return out, plan.expected(set(addrs.values())), got


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_delivers_exact_bytes(lab, build, engine, family, tmp_path):
    require_engine(lab, build, engine)
    everyone = members(lab, FAMILIES[family][1])
    plan = Plan(seed=family)
    rnd = plan.rnd
    # The group is replaced before every send: other members, other orders.
    plan.send(everyone, 100)
    plan.send(everyone[::-2], 1400)
    plan.sendgroup(rnd.sample(everyone, len(everyone)), 200)
    plan.sendgroup(rnd.sample(everyone, 700), 0)
    plan.send(rnd.sample(everyone, 300), 3000)  # fragmented on the 1500 byte veth
    plan.sendgroup(everyone[1::3], 1400)
    plan.send(everyone, 1)

    out, want, got = run_plan(lab, build, engine, family, plan, tmp_path)

    for i, (s, r) in enumerate(zip(plan.sends, out["results"])):
        if s["kind"] == "send":
            n, ok = len(s["members"]), len(s["payload_hex"]) // 2
            assert (r["setgroup"], r.get("ret"), r.get("failed")) == (0, ok, 0), f"send {i}: {r.get('errmsg')}"
        else:
            n, ok = len(s["recs"]), len(s["recs"])
            assert r["ret"] == ok, f"send {i}: {r.get('errmsg')}"
        assert r["gerrno"] == [0] * n, f"send {i}: {Counter(r['gerrno'])}"
    datagrams = sum(map(len, want.values()))
    assert out["stats"]["datagrams"] == datagrams and out["stats"]["failed"] == 0, out["stats"]
    assert out["stats"]["group_sends"] == len(plan.sends), out["stats"]
    if engine == "kernel" and family != "dual":
        # Only the 300 members of the fragmented send may leave the kernel path.
        assert out["stats"]["user_fallback"] <= 300, out["stats"]
    check_delivery([want], got)


@pytest.mark.parametrize("family", ["inet", "inet6"])
@pytest.mark.parametrize("engine", ENGINES)
def test_unroutable_member_fails_alone(lab, build, engine, family, tmp_path):
    """A member no route covers gets ENETUNREACH; everybody else still receives."""
    require_engine(lab, build, engine)
    kind = FAMILIES[family][1]
    bad = lab.unrouted_v4(7) if kind == "v4" else lab.unrouted_v6(7)
    good = members(lab, kind)[::10]
    group = good[:40] + [(bad, PORT_BASE)] + good[40:]
    errors = [0] * 40 + [errno.ENETUNREACH] + [0] * (len(group) - 41)
    plan = Plan(seed="unroutable")
    plan.send(group, 64)
    plan.sendgroup(group, 64)

    out, want, got = run_plan(lab, build, engine, family, plan, tmp_path)

    send, sendgroup = out["results"]
    assert (send["setgroup"], send.get("ret"), send["errno"]) == (0, -1, errno.ENETUNREACH), send
    assert send["failed"] == 1 and send["gerrno"] == errors, send
    assert sendgroup["ret"] == len(group) - 1 and sendgroup["gerrno"] == errors, sendgroup
    assert out["stats"]["failed"] == 2 and out["stats"]["datagrams"] == 2 * len(good), out["stats"]
    assert out["stats"]["last_errno"] == errno.ENETUNREACH, out["stats"]
    check_delivery([want], got)
