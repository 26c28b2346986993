"""End-to-end tests of the kernel engine: users of one namespace's lo egress leave
each other alone: two threads, two processes, two pid namespaces, and a
filter somebody else put there.
The lab, the sender and the checks: kengine.py."""
import json
import random
import subprocess

import pytest

from delivery import check_delivery, wait_files
from gcsend import expected
from kengine import (FAMILIES, GC_KDATA, TC_PREF, Held, addresses, assert_all_sent, deliver, foreign_filters,
                     gc_filters, gcsend_argv, held_kernel_user, members, mixed_sends, n_datagrams,
                     receiver_addresses, send, sendgroup, sinks, tc_egress)


# ---- concurrency -------------------------------------------------------------

def tagged_sends(rnd, group, n, tag):
    """n sends whose every datagram starts with tag (so concurrent senders'
    datagrams never collide); gc_send and gc_sendgroup alternate, the group
    is replaced before every send; prepend (tag included) and append stay
    within GC_KDATA, so all of it is for the kernel."""
    sends = []
    for i in range(n):
        g = rnd.sample(group, rnd.randrange(1, len(group) + 1))
        size = rnd.choice([8, 9, 100, 255, 256, 700])
        if i % 2 == 0:
            sends.append(send(g, tag + rnd.randbytes(size)))
        else:
            sends.append(sendgroup([(a, p, tag + rnd.randbytes(rnd.choice([0, 5, GC_KDATA - len(tag)])),
                                     rnd.randbytes(rnd.choice([0, 1, 64]))) for a, p in g], rnd.randbytes(size)))
    return sends


def assert_overlap(a, b):
    assert a["t_start"] < b["t_end"] and b["t_start"] < a["t_end"], \
        f"the senders did not overlap: {a['t_start']:.3f}..{a['t_end']:.3f} and {b['t_start']:.3f}..{b['t_end']:.3f}"


def test_two_threads_two_sockets(klab, build, tmp_path):
    """Two threads of one process send at the same time on two sockets (one
    IPv4, one IPv6) through the kernel engine: both byte-exact, both entirely
    in the kernel; the process has exactly one filter (handle = its pid)."""
    lab = klab
    rnd = random.Random("threads")
    a4, a6 = addresses(lab, "inet"), addresses(lab, "inet6")
    s4, s6 = tagged_sends(rnd, members(a4), 120, b"T4"), tagged_sends(rnd, members(a6), 120, b"T6")
    job = {"engine": "kernel", "threads": [
        {"engine": "kernel", "socket": "inet", "pace_ms": 2, "stats_each": True, "sends": s4},
        {"engine": "kernel", "socket": "inet6", "pace_ms": 2, "stats_each": True, "sends": s6}]}
    with sinks(lab, build, tmp_path, [*a4.items(), *a6.items()]) as collect:
        held = Held(lab, build, job, tmp_path, "threads")
        pid = held.wait_ready()
        filters = gc_filters(lab)
        out = held.release()
        got = collect()

    assert filters == [(TC_PREF, pid)], tc_egress(lab)
    t4, t6 = out["threads"]
    for t, sends in ((t4, s4), (t6, s6)):
        assert t["engine"] == "kernel"
        assert_all_sent(t, sends)
        assert t["stats"]["user_fallback"] == 0, t["stats"]
    assert_overlap(t4, t6)
    check_delivery([expected(s4), expected(s6)], got)
    assert gc_filters(lab) == []


def test_two_processes_two_filters(klab, build, tmp_path):
    """Two processes send at the same time to the same members (receivers and
    loopback, IPv4 and IPv6), each with its own socket and its own TC filter:
    while both run, lo egress has two gc_fanout filters, pref 18243, handles =
    the two pids; both deliver byte-exact (each member gets both streams, each
    in order), entirely in the kernel; no filter is left afterwards."""
    lab = klab
    rnd = random.Random("processes")
    start = tmp_path / "start"
    jobs, outs = [], []
    for name, family in (("A", "inet"), ("B", "inet"), ("C", "inet6"), ("D", "inet6")):
        sends = tagged_sends(rnd, members(addresses(lab, family)), 100, name.encode())
        jobs.append((name, family, sends))
    a4, a6 = addresses(lab, "inet"), addresses(lab, "inet6")
    with sinks(lab, build, tmp_path, [*a4.items(), *a6.items()]) as collect:
        # two processes at a time: first both IPv4, then both IPv6
        for pair in (jobs[:2], jobs[2:]):
            start.unlink(missing_ok=True)
            held = [Held(lab, build, {"engine": "kernel", "socket": family, "pace_ms": 2, "stats_each": True,
                                      "start_file": str(start), "sends": sends}, tmp_path, name)
                    for name, family, sends in pair]
            start.touch()
            pids = sorted(h.wait_ready() for h in held)
            filters = sorted(gc_filters(lab))
            outs += [h.release() for h in held]
            assert filters == [(TC_PREF, pid) for pid in pids], f"pids {pids}:\n{tc_egress(lab)}"
            assert gc_filters(lab) == [], tc_egress(lab)
        got = collect()

    for (name, family, sends), out in zip(jobs, outs):
        assert out["engine"] == "kernel"
        assert_all_sent(out, sends)
        assert out["stats"]["user_fallback"] == 0, (name, out["stats"])
    assert_overlap(outs[0], outs[1])
    assert_overlap(outs[2], outs[3])
    check_delivery([expected(sends) for _, _, sends in jobs], got)


# ---- somebody else's filter ------------------------------------------------------

# Foreign filters on lo egress, each as alternative `tc filter add dev lo
# egress ...` argument lists: the first one tc accepts is used.  `matchall
# action ok` needs cls_matchall and act_gact, which not every kernel has (the
# 6.18 test machine has neither: "TC classifier not found"); a terminal u32
# match with no action returns TC_ACT_OK just like it.
U32_ALL = ["u32", "match", "u32", "0", "0", "classid", "1:1"]
FOREIGN = {
    # accepts every packet before our filter: the kernel engine never sees its
    # trigger, so the library sends every member itself (user_fallback = all)
    "accept-all-before": ([["pref", "1", "matchall", "action", "ok"], ["protocol", "all", "pref", "1", *U32_ALL]],
                          False),
    # accepts every packet that our filter passes on (TC_ACT_UNSPEC)
    "accept-all-after": ([["pref", "50000", "matchall", "action", "ok"],
                          ["protocol", "all", "pref", "50000", *U32_ALL]], True),
    # before ours, matches nothing of ours (IPv4 to port 7 only)
    "no-match-before": ([["protocol", "ip", "pref", "1", "u32", "match", "ip", "dport", "7", "0xffff",
                          "classid", "1:1"]], True),
}


def add_foreign_filter(lab, alternatives):
    """Add the first alternative tc accepts; returns its pref."""
    ns = lab.topology.sender
    lab.run(ns, ["tc", "qdisc", "add", "dev", "lo", "clsact"])
    errors = []
    for spec in alternatives:
        p = lab.run(ns, ["tc", "filter", "add", "dev", "lo", "egress", *spec], check=False,
                    capture_output=True, text=True)
        if p.returncode == 0:
            return spec[spec.index("pref") + 1]
        errors.append(f"{' '.join(spec)}: {p.stderr.strip()}")
    pytest.fail(f"no foreign filter could be added: {errors}")


@pytest.mark.parametrize("foreign", FOREIGN)
def test_foreign_filter_survives(klab, build, tmp_path, foreign):
    """A filter somebody else put on lo egress beforehand survives a normal
    exit, a SIGKILL and the next process's clean-up of the killed one's
    filter; delivery is byte-exact with it in place (through the kernel when
    the foreign filter lets our filter see the trigger, else through the
    library's user-space fallback)."""
    lab = klab
    alternatives, kernel_path = FOREIGN[foreign]
    pref = add_foreign_filter(lab, alternatives)
    original = foreign_filters(lab)
    assert f"pref {pref} " in original, original

    def foreign_there(when):
        now = foreign_filters(lab)
        assert now == original, f"foreign filter changed {when}:\nbefore:\n{original}\nnow:\n{now}"

    rnd = random.Random(f"foreign-{foreign}")
    for family in FAMILIES:
        sends = mixed_sends(rnd, members(addresses(lab, family)), 6)
        out = deliver(lab, build, tmp_path, family, sends)
        want = 0 if kernel_path else n_datagrams(sends)
        assert out["stats"]["user_fallback"] == want, f"{family}: {out['stats']}"
        foreign_there(f"after a normal {family} run")
        assert gc_filters(lab) == [], tc_egress(lab)

    killed = held_kernel_user(lab, build, tmp_path, "killed")
    assert gc_filters(lab) == [(TC_PREF, killed.pid)], tc_egress(lab)
    killed.sigkill()
    foreign_there("after SIGKILL")
    assert gc_filters(lab) == [(TC_PREF, killed.pid)], tc_egress(lab)
    deliver(lab, build, tmp_path, "inet", mixed_sends(rnd, members(addresses(lab, "inet")), 6))
    foreign_there("after the next process removed the stale filter")
    assert gc_filters(lab) == [], tc_egress(lab)



# ---- pid namespaces -----------------------------------------------------------

def test_two_pid_namespaces_do_not_detach_each_other(klab, build, tmp_path):
    """Two processes in their own pid namespaces (both pid 1 there) share the
    sender's network namespace: each gets its own filter (distinct handles),
    and the one that exits first removes only its own: the other still sends
    every member through the kernel afterwards."""
    lab = klab
    rnd = random.Random("pidns")
    group = members(receiver_addresses(lab, "inet"))
    sends_a, sends_b = tagged_sends(rnd, group, 5, b"A"), tagged_sends(rnd, group, 5, b"B")
    f = {n: tmp_path / n for n in ("b.attached", "b.start", "a.ready", "a.hold")}
    pidns = ["unshare", "--pid", "--fork", "--kill-child"]

    def spawn(job):
        p = lab.popen(lab.topology.sender, pidns + list(map(str, gcsend_argv(build))), stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdin.write(json.dumps(job))
        p.stdin.close()
        p.stdin = None
        return p

    with sinks(lab, build, tmp_path, receiver_addresses(lab, "inet").items()) as collect:
        b = spawn({"engine": "kernel", "socket": "inet", "pace_ms": 2, "attached_file": str(f["b.attached"]),
                   "start_file": str(f["b.start"]), "sends": sends_b})
        wait_files([(b, f["b.attached"])], "B")
        a = spawn({"engine": "kernel", "socket": "inet", "pace_ms": 2, "ready_file": str(f["a.ready"]),
                   "hold_file": str(f["a.hold"]), "sends": sends_a})
        wait_files([(a, f["a.ready"])], "A", timeout=60)
        both = gc_filters(lab)
        assert int(f["b.attached"].read_text()) == int(f["a.ready"].read_text()) == 1
        f["a.hold"].touch()
        out_a, err = a.communicate(timeout=60)
        assert a.returncode == 0, err
        left = gc_filters(lab)
        f["b.start"].touch()
        out_b, err = b.communicate(timeout=60)
        assert b.returncode == 0, err
        got = collect()
    out_a, out_b = json.loads(out_a), json.loads(out_b)
    assert len(both) == 2 and len({h for _, h in both}) == 2, both
    assert len(left) == 1 and left[0] in both, (both, left)
    for out, sends in ((out_a, sends_a), (out_b, sends_b)):
        assert_all_sent(out, sends)
        assert out["stats"]["user_fallback"] == 0, out["stats"]
    check_delivery([expected(sends_a), expected(sends_b)], got)
    assert gc_filters(lab) == [], tc_egress(lab)
