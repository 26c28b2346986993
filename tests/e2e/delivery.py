"""Receivers for the end-to-end tests, and the check of what they got.

sinks() runs `groupcast sink` on a range of ports at each (namespace, address)
and hands back what arrived as {(addr, port): [datagram, ...] in arrival
order}; check_delivery() compares that with what the senders meant to send
({(addr, port): [datagram, ...] in send order}, as gcsend.expected() gives).
"""
import json
import re
import subprocess
import time
from collections import Counter, defaultdict
from contextlib import contextmanager

from sinkdump import read_dump


def wait_files(procs_files, what, timeout=10):
    """Wait until every (process, path) pair's process has made its path (a
    ready file); fails if the process exits first or after timeout seconds."""
    deadline = time.monotonic() + timeout
    for proc, path in procs_files:
        while not path.exists():
            assert proc.poll() is None, f"{what} exited: {proc.communicate()[1]}"
            assert time.monotonic() < deadline, f"{what} not ready after {timeout} s"
            time.sleep(0.01)


@contextmanager
def sinks(lab, build, tmp_path, where, *, port_base, ports, idle_ms=0, settle_s=0.5):
    """`groupcast sink` on ports port_base..port_base+ports-1 at each
    (namespace, address) of where.  Yields collect(), which stops the sinks and
    returns {(addr, port): [datagram, ...] in arrival order}.

    How they stop: with idle_ms > 0 each sink ends by itself after idle_ms
    without a datagram and collect() waits for that (for tests that cannot
    tell when the last datagram is due); with idle_ms == 0 collect() waits
    settle_s after the last send, then stops them with SIGTERM (they drain
    what is queued, duplicates included)."""
    procs = []
    for ns, addr in where:
        tag = ns + "-" + re.sub(r"\W", "_", addr)
        dump, ready = tmp_path / f"{tag}.dump", tmp_path / f"{tag}.ready"
        dump.unlink(missing_ok=True)
        ready.unlink(missing_ok=True)
        argv = [build / "tools" / "groupcast", "sink", "--addr", addr, "--port-base", port_base,
                "--count", ports, "--idle-ms", idle_ms, "--timeout-ms", 120000, "--dump", dump,
                "--ready-file", ready]
        procs.append((ns, addr, lab.popen(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                      dump, ready))

    def collect():
        if idle_ms == 0:
            time.sleep(settle_s)
        got = defaultdict(list)
        for ns, addr, proc, dump, _ in procs:
            if idle_ms == 0:
                proc.terminate()
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, f"sink {addr} in {ns} failed ({proc.returncode}): {err.strip()}"
            summary = json.loads(out.splitlines()[-1])
            records = read_dump(dump)
            assert summary["received"] == len(records) and summary["truncated"] == 0, summary
            for port, data in records:
                got[addr, port].append(data)
        return got

    try:
        wait_files([(proc, ready) for _, _, proc, _, ready in procs], "sink")
        yield collect
    finally:
        for _, _, proc, _, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def check_delivery(wants, got):
    """Every member got exactly the datagrams of every sender, each sender's in
    its send order, and nothing else: no loss, no duplicate, no stray datagram.
    wants has one {member: [datagram, ...]} per concurrent sender (the order
    between senders is free); with one sender this is got == want per member.
    Loud on failure: how many were lost, unexpected, out of order, and the
    first members concerned."""
    total = sum(len(d) for w in wants for d in w.values())
    lost = extra = 0
    reordered, examples = [], []
    for key in sorted(set(got).union(*wants)):
        g = got.get(key, [])
        claimed = 0
        for i, want in enumerate(wants):
            w = want.get(key, [])
            mine = set(w)
            seen = [d for d in g if d in mine]
            claimed += len(seen)
            missing, dup = Counter(w) - Counter(seen), Counter(seen) - Counter(w)
            lost += sum(missing.values())
            extra += sum(dup.values())
            if missing or dup:
                examples.append(f"{key} sender {i}: {sum(missing.values())} missing, {sum(dup.values())} "
                                f"duplicated (lengths want {[len(d) for d in w][:8]}, "
                                f"got {[len(d) for d in seen][:8]})")
            elif seen != w:
                reordered.append(f"{key} sender {i}")
        if claimed != len(g):
            stray = [d for d in g if not any(d in set(w.get(key, [])) for w in wants)]
            extra += len(stray)
            examples.append(f"{key}: {len(stray)} datagrams nobody sent (lengths {[len(d) for d in stray][:8]})")
    assert lost == 0 and extra == 0 and not reordered and not examples, (
        f"LOST {lost} of {total} datagrams, {extra} unexpected, {len(reordered)} members out of order "
        f"{reordered[:5]}; first members with wrong datagrams: {examples[:6]}")
