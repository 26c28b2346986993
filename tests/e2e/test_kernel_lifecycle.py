"""End-to-end tests of the kernel engine: the engine's traces in the sender's
namespace as processes come and go: the filter and owner file after a
normal exit and after SIGKILL, lo forwarding restored by the last user,
and the same under attack (planted symlinks, our filter deleted).
The lab, the sender and the checks: kengine.py."""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from delivery import check_delivery, wait_files
from gcsend import expected
from kengine import (FAMILIES, LOOPBACK, PORT_BASE, RUN_DIR, TC_PREF, Held, addresses, assert_all_sent,
                     gc_filters, gcsend_argv, held_kernel_user, lo_forwarding, members, mixed_sends,
                     n_datagrams, send, sinks, tc_egress)


# ---- lifecycle -------------------------------------------------------------

def owner_files(pid):
    return [p.name for p in RUN_DIR.glob(f"lo-*-{pid}")]


def test_normal_exit_removes_filter(klab, build, tmp_path):
    """While a process uses the kernel engine its filter (pref 18243, handle =
    pid) is on lo egress; after it exits normally no gc_fanout filter and no
    owner file of it remain."""
    lab = klab
    held = held_kernel_user(lab, build, tmp_path, "p")
    assert gc_filters(lab) == [(TC_PREF, held.pid)], tc_egress(lab)
    assert len(owner_files(held.pid)) == 1
    held.release()
    assert gc_filters(lab) == [], tc_egress(lab)
    assert owner_files(held.pid) == []


def test_sigkill_leaves_filter_next_user_removes_it(klab, build, tmp_path):
    """A process killed with SIGKILL while attached leaves its filter; the next
    process that starts the kernel engine in the namespace removes it (while
    that process runs only its own filter is there), delivers byte-exact,
    and leaves nothing behind when it exits."""
    lab = klab
    killed = held_kernel_user(lab, build, tmp_path, "killed")
    killed.sigkill()
    assert gc_filters(lab) == [(TC_PREF, killed.pid)], "SIGKILL should leave the filter:\n" + tc_egress(lab)
    assert len(owner_files(killed.pid)) == 1

    rnd = random.Random("after-kill")
    group = members(addresses(lab, "inet"))
    sends = mixed_sends(rnd, group, 6)
    with sinks(lab, build, tmp_path, addresses(lab, "inet").items()) as collect:
        nxt = Held(lab, build, {"engine": "kernel", "socket": "inet", "pace_ms": 5, "sends": sends}, tmp_path, "next")
        nxt.wait_ready()
        filters = gc_filters(lab)
        out = nxt.release()
        got = collect()

    assert filters == [(TC_PREF, nxt.pid)], f"stale filter of {killed.pid} not removed:\n{tc_egress(lab)}"
    assert_all_sent(out, sends)
    assert out["stats"]["user_fallback"] == 0, out["stats"]
    check_delivery([expected(sends)], got)
    assert gc_filters(lab) == [], tc_egress(lab)
    assert owner_files(killed.pid) == [] and owner_files(nxt.pid) == []


# ---- lo forwarding -----------------------------------------------------------

def both_families_job(lab, loopback_only=False):
    """Two sockets (threads), IPv4 and IPv6, each sending once: a process that
    needs lo forwarding for both families (or, loopback_only, for neither)."""
    r1 = lab.topology.receivers[0]
    job = {"engine": "kernel", "threads": []}
    for family, addr in (("inet", r1.v4), ("inet6", r1.v6)):
        to = LOOPBACK[family] if loopback_only else addr
        job["threads"].append({"engine": "kernel", "socket": family, "pace_ms": 0, "stats_each": True,
                               "sends": [send([(to, PORT_BASE)], b"fwd")]})
    return job


@pytest.mark.parametrize("scenario", ["one", "loopback-only", "last-in-first-out", "first-in-first-out",
                                      "after-sigkill"])
def test_lo_forwarding_restored_by_last_user(klab, build, tmp_path, scenario):
    """net.ipv4/ipv6.conf.lo.forwarding of the sender namespace (0 in a new
    namespace) is 1 while a process sends to routed members through the kernel
    engine, is left alone when it only has loopback members, and is back to
    its original value once the last engine user of the namespace has exited,
    whatever the order the users come and go (and after a user was killed
    with SIGKILL, once the next user has exited)."""
    lab = klab
    original = lo_forwarding(lab)
    assert original == (0, 0), original
    job = both_families_job(lab, loopback_only=scenario == "loopback-only")
    a = Held(lab, build, job, tmp_path, "a")
    a.wait_ready()
    during = lo_forwarding(lab)
    if scenario == "loopback-only":
        assert during == original, "forwarding changed with only loopback members"
        a.release()
    elif scenario == "one":
        assert during == (1, 1), during
        a.release()
    elif scenario == "after-sigkill":
        assert during == (1, 1), during
        a.sigkill()
        b = Held(lab, build, job, tmp_path, "b")
        b.wait_ready()
        assert lo_forwarding(lab) == (1, 1)
        b.release()
    else:
        b = Held(lab, build, job, tmp_path, "b")
        b.wait_ready()
        assert lo_forwarding(lab) == (1, 1)
        first, last = (a, b) if scenario == "first-in-first-out" else (b, a)
        first.release()
        assert lo_forwarding(lab) == (1, 1), "forwarding turned back while another user still runs"
        last.release()
    assert gc_filters(lab) == [], tc_egress(lab)
    assert lo_forwarding(lab) == original, f"{scenario}: lo forwarding (v4, v6) is {lo_forwarding(lab)}, " \
                                           f"was {original} before any engine user"


# ---- lifecycle under attack -------------------------------------------------

def netns_inode(lab):
    return Path("/run/netns", lab.topology.sender).stat().st_ino


def test_owner_file_symlink_refused(klab, build, tmp_path):
    """Symlinks planted in /run/groupcast under the names the next process
    would use for its owner file and its saved lo-forwarding value are never
    followed: the victim file is untouched, the process takes another handle
    and sends through the kernel engine, and leaves no filter behind."""
    lab = klab
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    pid_file, go = tmp_path / "pid", tmp_path / "go"
    r1 = lab.topology.receivers[0]
    sends = [send([(r1.v4, PORT_BASE)], b"symlink")]
    job = {"engine": "kernel", "socket": "inet", "pace_ms": 0, "pid_file": str(pid_file), "go_file": str(go),
           "sends": sends}
    proc = lab.popen(lab.topology.sender, gcsend_argv(build), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    links = []
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        proc.stdin = None
        wait_files([(proc, pid_file)], "gcsend.py")
        pid = int(pid_file.read_text())
        RUN_DIR.mkdir(mode=0o700, exist_ok=True)
        for name in (f"lo-{netns_inode(lab)}-{pid}", f"lo-{netns_inode(lab)}.fwd4"):
            (RUN_DIR / name).symlink_to(victim)
            links.append(RUN_DIR / name)
        go.touch()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        for link in links:
            link.unlink(missing_ok=True)
    res = json.loads(out)
    assert victim.read_text() == "precious\n"
    assert res["engine"] == "kernel" and res["stats"]["user_fallback"] == 0, res
    assert_all_sent(res, sends)
    assert gc_filters(lab) == [], tc_egress(lab)


LISTEN9 = """
import socket, sys, time, pathlib
socks = []
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, 9))
    s.setblocking(False)
    socks.append(s)
pathlib.Path(sys.argv[1]).touch()
n = 0
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline and not pathlib.Path(sys.argv[3]).exists():
    for s in socks:
        try:
            s.recv(65536)
            n += 1
        except BlockingIOError:
            pass
    time.sleep(0.005)
print(n)
"""


@pytest.mark.parametrize("family", FAMILIES)
def test_missing_filter_delivers_nothing_to_port_9(klab, build, tmp_path, family):
    """Our filter deleted by hand after the engine attached: the trigger
    datagrams (which carry the whole payload) reach no socket (a listener on
    127.0.0.1:9 and [::1]:9 gets nothing), and every member still gets its
    bytes through the user path."""
    lab = klab
    ready, stop, attached, start = (tmp_path / n for n in ("l.ready", "l.stop", "attached", "start"))
    listener = lab.popen(lab.topology.sender, [sys.executable, "-c", LISTEN9, ready, 60, stop],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_files([(listener, ready)], "port-9 listener")
    rnd = random.Random(f"nofilter-{family}")
    sends = mixed_sends(rnd, members(addresses(lab, family)), 6)
    with sinks(lab, build, tmp_path, addresses(lab, family).items()) as collect:
        job = {"engine": "kernel", "socket": family, "pace_ms": 5, "attached_file": str(attached),
               "start_file": str(start), "sends": sends}
        proc = lab.popen(lab.topology.sender, gcsend_argv(build), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        proc.stdin = None
        wait_files([(proc, attached)], "gcsend.py")
        filters = gc_filters(lab)
        assert len(filters) == 1, tc_egress(lab)
        lab.run(lab.topology.sender, ["tc", "filter", "del", "dev", "lo", "egress", "pref", TC_PREF,
                                      "handle", hex(filters[0][1]), "bpf"])
        start.touch()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        got = collect()
    stop.touch()
    heard = listener.communicate(timeout=30)[0]
    out = json.loads(out)
    assert int(heard) == 0, f"{heard.strip()} datagrams reached port 9"
    assert_all_sent(out, sends)
    check_delivery([expected(sends)], got)
    assert out["stats"]["user_fallback"] == n_datagrams(sends), out["stats"]
