"""A lab for the relay: producer -> relay -> subscribers, and one measured run.

    lab, rl = relaylab.make(build, receivers=2)   # namespaces s (relay), r1..rk, p (producer)
    run = rl.run("kernel", n=1000, rate=200, seconds=3)

For other replicators in the relay's place (samplicator.py, relay_points.py):
rl.receivers_argv(n) lists the receivers as ADDR/PORT, wait_bound() and
wait_idle() wait until a replicator is listening and done starting,
rl.exporters(k) gives the producer k source addresses, udp_counters(lab, ns)
reads a namespace's UDP counters (receive-buffer drops...).

Fairness (DESIGN.md): the relay is pinned to CPU 0, and its input is received
there (RPS); the subscribers' receive work is steered to CPU 1 by RPS, and the
sinks and the producer run there too.  The relay's CPU is its own CLOCK_PROCESS_CPUTIME_ID (exported in its
stats), cross-checked with utime+stime from /proc/PID/stat; the time inside
gc_sendgroup() is measured by the relay itself (send_ns, with --time-sends).  Every subscriber
port is counted by `groupcast sink`: a run with any datagram missing says so.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcbench  # noqa: E402
from gcbench.run import machine_busy, proc_cpu_ns, task_cpu_ns, tree_cpu_ns  # noqa: E402,F401

TOOL = os.path.join(gcbench.ROOT, "tests", "e2e", "relaytool.py")
PORT_BASE = 20000
RTP_PORT = 5004


def make(build, receivers=2):
    """Lab (caller closes it) and a RelayLab on it."""
    lab, star = gcbench.make_lab(receivers)
    p = lab.add_ns("p")
    link = lab.add_link(star.sender, p)
    # The relay's input is received on CPU 0, with the relay: CPU 1's flood of
    # subscriber traffic must not delay it (and receiving is the relay's job).
    lab.set_rps(star.sender, link.a.ifname, 0b01)
    return lab, RelayLab(build, lab, star, link)


def wait_bound(lab, ns, port, proc, timeout=15):
    """Wait until something in ns listens on UDP `port` (proc must stay alive)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"replicator exited early: {proc.stderr.read() if proc.stderr else ''}")
        out = lab.run(ns, ["ss", "-Hnlu", f"sport = :{port}"], capture_output=True, text=True).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing bound port {port} in {timeout} s")


def wait_idle(pid, quiet_ns=1_000_000, step=0.2, timeout=10):
    """Wait until pid and its children have used less than quiet_ns of CPU
    over `step` seconds: a replicator binds its port before it has finished
    starting (the relay may still be loading its BPF program, nfacctd forking
    its plugin), and that start must not be billed to the datagrams."""
    deadline = time.monotonic() + timeout
    last = tree_cpu_ns(pid)
    while time.monotonic() < deadline:
        time.sleep(step)
        now = tree_cpu_ns(pid)
        if now - last < quiet_ns:
            return
        last = now
    raise RuntimeError(f"pid {pid} did not go idle in {timeout} s")


def udp_counters(lab, ns):
    """The Udp: counters of namespace ns (/proc/net/snmp is per namespace):
    RcvbufErrors (dropped for want of receive buffer), SndbufErrors, InErrors..."""
    out = lab.run(ns, ["cat", "/proc/net/snmp"], capture_output=True, text=True).stdout
    rows = [ln.split()[1:] for ln in out.splitlines() if ln.startswith("Udp:")]
    return dict(zip(rows[0], (int(x) for x in rows[1])))


class RelayLab:
    def __init__(self, build, lab, star, link):
        self.build, self.lab, self.star = build, lab, star
        self.bin = gcbench.tool(build)
        self.relay_ns, self.p_ns = star.sender, link.b.ns
        self.relay_addr, self.p_addr = link.a.v4, link.b.v4
        self._p_ifname = link.b.ifname
        self.k = 0

    def split(self, n):
        k = len(self.star.receivers)
        return [n // k + (1 if i < n % k else 0) for i in range(k)]

    def receivers_argv(self, n):
        """samplicator's receiver syntax, one ADDR/PORT per receiver (it has no ranges)."""
        out = []
        for r, cnt in zip(self.star.receivers, self.split(n)):
            out += [f"{r.v4}/{PORT_BASE + i}" for i in range(cnt)]
        return out

    def exporters(self, k):
        """k source addresses in the producer's namespace: its own and k-1
        more on the same link (10.R.L.3...), added once and kept."""
        base = self.p_addr.rsplit(".", 1)[0]
        have = getattr(self, "_exporters", [self.p_addr])
        for host in range(len(have) + 2, k + 2):
            addr = f"{base}.{host}"
            self.lab.ip(self.p_ns, "addr", "add", f"{addr}/24", "dev", self._p_ifname)
            have.append(addr)
        self._exporters = have
        return have[:k]

    def start_relay(self, engine, args=(), subscribers=0):
        """Relay in broadcast mode; `subscribers` static ones over the receiver
        namespaces (ports PORT_BASE...).  Returns (proc, stats socket)."""
        self.k += 1
        sock = f"/tmp/{self.lab.prefix}-relay{self.k}.sock"
        argv = [self.bin, "relay", "--rtp", "-p", RTP_PORT, "--cpu", 0, "--engine", engine, "--status", 0,
                "--stats-socket", sock, "--expire", 0, "--producer", self.p_addr, "--time-sends", *args]
        for r, cnt in zip(self.star.receivers, self.split(subscribers)):
            if cnt:
                argv.append(f"{r.v4}/{PORT_BASE}+{cnt}")
        proc = self.lab.popen(self.relay_ns, argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 15
        while not (os.path.exists(sock) and self.query(sock)):
            if proc.poll() is not None:
                raise RuntimeError(f"relay exited: {proc.stderr.read()}")
            if time.monotonic() > deadline:
                raise RuntimeError("relay did not start")
            time.sleep(0.05)
        return proc, sock

    def query(self, sock):
        p = subprocess.run([self.bin, "relay", "--query", sock], capture_output=True, text=True, timeout=20)
        return json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else None

    def stop(self, proc, timeout=10):
        """SIGTERM, and SIGKILL after `timeout` seconds."""
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def start_sinks(self, n, expect_each, idle_ms=4000, rcvbuf=262144, extra=(), prefix=()):
        """Sinks on every subscriber port.  A small receive buffer per port
        keeps 1000 backed-up sinks from exhausting the kernel's global UDP
        memory (net.ipv4.udp_mem), which would drop datagrams at the relay's
        own socket too and blame the relay for the receivers' overload.
        `extra`: more `groupcast sink` options (e.g. --digest HEX); `prefix`:
        a command to run it under (e.g. nice -n -15)."""
        sinks = []
        for r, cnt in zip(self.star.receivers, self.split(n)):
            if not cnt:
                continue
            ready = f"/tmp/{self.lab.prefix}-{r.ns}-sink.ready"
            if os.path.exists(ready):
                os.unlink(ready)
            argv = [*prefix, self.bin, "sink", "--addr", r.v4, "--port-base", PORT_BASE, "--count", cnt,
                    "--expect", cnt * expect_each, "--idle-ms", idle_ms, "--ready-file", ready, "--cpu", 1,
                    "--rcvbuf", rcvbuf, *extra]
            sinks.append((self.lab.popen(r.ns, argv, stdout=subprocess.PIPE, text=True), ready, cnt))
        for p, ready, _ in sinks:
            while not os.path.exists(ready):
                if p.poll() is not None:
                    raise RuntimeError("sink exited early")
                time.sleep(0.02)
            os.unlink(ready)
        return sinks

    @staticmethod
    def finish_sinks(sinks, kill=False):
        out = []
        for p, _, cnt in sinks:
            if kill:
                p.terminate()
            so, _ = p.communicate(timeout=120)
            s = json.loads(so.strip().splitlines()[-1])
            s["ports"] = cnt
            out.append(s)
        return out

    def producer(self, rate, count, size=1000):
        """Paced RTP producer on CPU 1 (returns the Popen)."""
        return self.lab.popen(self.p_ns, ["taskset", "-c", "1", sys.executable, TOOL, "tx", "--rtp", "--to",
                                          f"{self.relay_addr}:{RTP_PORT}", "--count", count, "--rate", rate,
                                          "--size", size], stdout=subprocess.PIPE, text=True)

    def run(self, engine, n, rate, seconds, size=1000, relay_args=(), verify=True, settle=2.0, idle_ms=4000):
        """One measured run: relay with n static subscribers, the producer at
        `rate` for `seconds`; returns a dict of what was measured.  After the
        producer ends, wait (up to `settle` s) until the relay has read every
        datagram, or its count stops moving."""
        count = max(1, int(rate * seconds))
        sinks = self.start_sinks(n, count, idle_ms=idle_ms) if verify else []
        proc, sock = self.start_relay(engine, relay_args, subscribers=n)
        try:
            s0 = self.query(sock)
            pid = s0["pid"]
            c0, b0, w0 = proc_cpu_ns(pid), machine_busy(), time.monotonic()
            tx = self.producer(rate, count, size)
            txo, _ = tx.communicate(timeout=seconds * 5 + 60)
            end, last = time.monotonic() + settle, -1
            while True:
                time.sleep(0.1)
                s1 = self.query(sock)
                if s1["in"] - s0["in"] >= count or s1["in"] == last or time.monotonic() > end:
                    break
                last = s1["in"]
            c1, b1, w1 = proc_cpu_ns(pid), machine_busy(), time.monotonic()
        finally:
            self.stop(proc)
        res = self.finish_sinks(sinks, kill=False) if verify else []
        tx_info = json.loads(txo)
        d = {k: s1[k] - s0[k] for k in ("in", "out", "errors", "ingest_drops", "cpu_ns", "send_ns",
                                         "group_sends", "rtp_invalid")}
        wall = (w1 - w0) * 1e9
        row = {
            "engine": engine, "resolved": s1["engine_resolved"], "n": n, "rate": rate, "size": size,
            "sent": count, "producer_seconds": tx_info["seconds"], "wall_ns": wall,
            **d,
            "cpu_util": d["cpu_ns"] / wall,
            "cpu_ns_per_datagram": d["cpu_ns"] / max(1, d["in"]),
            "send_fraction": d["send_ns"] / d["cpu_ns"] if d["cpu_ns"] else 0.0,
            "proc_stat_cpu_ns": c1 - c0,
            "machine_busy_frac": (b1[0] - b0[0]) / max(1, b1[1] - b0[1]),
            "timer_ns": s1["timer_ns"],
        }
        if verify:
            got = sum(s["received"] for s in res)
            row["delivered"] = got
            row["due"] = n * count
            row["ports_min"] = min(s["ports_min"] for s in res)
            row["lost"] = n * count - got
        return row
