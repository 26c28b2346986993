#!/usr/bin/env python3
"""tree: a relay tree in namespaces (issue 23): multicast inside a site,
unicast cascade to a second site, receivers checked byte for byte.

    o ── r1 ─┬─ r2 ─┬─ e1 ── x1      site 1: r1, r2, r3 route the group
             │      └─ e2 ── x2      (pimd, PIM-SM with r1 the RP, or
             ├─ r3 ─┬─ e3 ── x3      smcroute static routes); e1..e4 are
             │      └─ e4 ── x4      relays that --join it
             └─ w ──┬─ c1 ── x5      site 2: w forwards unicast only; c1
                    └─ c2 ── x6      --upstream e1 then e2, c2 --upstream c1

o (the origin) sends RTP into the group; each relay turns it into unicast
for its receivers (x1..x6: one namespace per relay, one address, one port
per receiver).  Receivers JOIN through the relay's control protocol (cookie
handshake), each with its own SSRC (ssrc= in the JOIN).  No process per
receiver: lab/tree_rx.bpf.c at each receiver namespace's ingress checks
every copy byte for byte (payload against the origin's formula, the
subscriber's SSRC, constant sequence/timestamp offsets, no gap, no
duplicate) and drops it; at each relay's input it stamps the datagram's
arrival, so latency is measured per tier on one clock.

    with Lab() as lab:
        tl = TreeLab(lab, build, receivers=200, variant="pimd")
        tl.start()
        res = tl.run(count=200, rate=50)

Command line (inside namespaces, for TreeLab itself):
    tree.py origin --group G --port P --ifaddr A --rate R --count N [--first K]
    tree.py join --addr A --to A:P --ports FIRST+COUNT --ssrc-base S
Only the standard library and lab/netlab.py; every loop is bounded.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from netlab import Lab, LabError  # noqa: E402

TOPOLOGY = {"o": ["r1"], "r1": ["r2", "r3", "w"], "r2": ["e1", "e2"], "r3": ["e3", "e4"], "w": ["c1", "c2"]}
SITE = ["r1", "r2", "r3"]                 # routers that route multicast
EDGES = ["e1", "e2", "e3", "e4"]          # --join the group
CASCADE = {"c1": ["e1", "e2"], "c2": ["c1"]}   # --upstream, in priority order
RELAYS = EDGES + list(CASCADE)
TIER = {"e1": 1, "e2": 1, "e3": 1, "e4": 1, "c1": 2, "c2": 3}
GROUP = "239.23.0.1"
PORT = 5004                               # RTP; control = PORT + 2
CONTROL = PORT + 2
PORT_BASE = 20000                         # receivers' ports
SSRC_BASE = 0x10000000                    # receiver i's SSRC: SSRC_BASE + i
RUN_DIR = Path("/run/groupcast")          # GC_RUN_DIR of lib/group/kprog.c
PAYLOAD = 1000                            # tree_rx.bpf.c TREE_PAYLOAD
WORDS = (PAYLOAD - 16) // 8
MAGIC = 0x47435431                        # "GCT1"
WARMUP_MAGIC = 0x47435430                 # "GCT0": passes the stamps, never counted
TS_STEP = 3000                            # origin timestamp = pseq * TS_STEP
COUNTERS = ["ok", "bad_len", "bad_ssrc", "bad_payload", "bad_hdr", "gap", "dup", "rebase", "nostamp",
            "other_port", "relay_in"]
NB, TIERS = 2801, 4


def origin_packet(pseq: int, send_ns: int, magic: int = MAGIC) -> bytes:
    """The origin's RTP datagram (tree_rx.bpf.c checks every copy against it)."""
    seed = (pseq * 0x9E3779B97F4A7C15 ^ send_ns) & (2**64 - 1)
    words = [(seed ^ ((k + 1) * 0xC2B2AE3D27D4EB4F)) & (2**64 - 1) for k in range(WORDS)]
    hdr = struct.pack("!BBHII", 0x80, 96, pseq & 0xFFFF, (pseq * TS_STEP) & 0xFFFFFFFF, 0x0DDBA11)
    return hdr + struct.pack("!II", magic, pseq) + struct.pack(f"<Q{WORDS}Q", send_ns, *words)


def bucket_us(b: int) -> float:
    """The lower edge of histogram bucket b (tree_rx.bpf.c lat_bucket()), in us."""
    if b < 1000:
        return float(b)
    if b < 1900:
        return 1000 + (b - 1000) * 10.0
    if b < 2800:
        return 10000 + (b - 1900) * 100.0
    return 100000.0


def percentile(hist: list[int], q: float) -> float | None:
    """q-quantile (0..1) of a bucket histogram, as the bucket's lower edge (us)."""
    total = sum(hist)
    if not total:
        return None
    want, acc = q * total, 0
    for b, n in enumerate(hist):
        acc += n
        if acc >= want:
            return bucket_us(b)
    return bucket_us(len(hist) - 1)


def _bpftool(*args) -> str:
    p = subprocess.run(["bpftool", *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        raise LabError(f"bpftool {' '.join(map(str, args))}: {p.stderr.strip()}")
    return p.stdout


def _le(hexbytes) -> int:
    return int.from_bytes(bytes(int(b, 16) for b in hexbytes), "little")


class TreeLab:
    """The topology above on `lab`, receivers split evenly over the relays."""

    def __init__(self, lab: Lab, build, receivers: int = 200, variant: str = "pimd", engine: str = "kernel",
                 relay_args=(), split_cpus: bool = False):
        if variant not in ("pimd", "smcroute"):
            raise LabError(f"variant {variant!r}: pimd or smcroute")
        self.lab, self.build, self.variant, self.engine = lab, Path(build), variant, engine
        self.bin = self.build / "tools" / "groupcast"
        self.relay_args = list(relay_args)
        # G4's fairness (bench/relaylab.py): relays pinned to CPU 0 with their
        # input, the receivers' work (the checker's too) steered to CPU 1
        self.split_cpus = split_cpus
        self.n = receivers
        k = len(RELAYS)
        self.split = {r: receivers // k + (1 if i < receivers % k else 0) for i, r in enumerate(RELAYS)}
        self.t = None
        self.procs, self.socks, self.logs = {}, {}, {}
        self.bpf_dir = None
        self.joined = {}
        self.pseq = 0   # the origin's next sequence number (warm-up and runs share one stream)

    # -- building -----------------------------------------------------------------

    def build_net(self):
        lab = self.lab
        self.t = t = lab.tree(TOPOLOGY, root="o")
        self.S = t.addr("o")
        self.rx = {}      # relay -> Link relay (a) -- its receivers' namespace (b)
        base = 0
        self.first = {}   # relay -> global index of its first receiver
        for i, r in enumerate(RELAYS):
            ns = lab.add_ns(f"x{i + 1}")
            self.rx[r] = lab.add_link(t.ns[r], ns, v6=False)
            self.first[r] = base
            base += self.split[r]
        for r, link in self.rx.items():
            lab.resolve(link.a.ns, [link.b.v4])
            lab.resolve(link.b.ns, [link.a.v4])
            if self.split_cpus:   # receive work (and the checker) on CPU 1, as G4 does
                lab.set_rps(link.b.ns, link.b.ifname, 0b10)
        if self.split_cpus:       # each relay's input received on CPU 0, where the relay runs
            for r in RELAYS:
                lab.set_rps(t.ns[r], t.uplinks[r].b.ifname, 0b01)
        if self.variant == "pimd":
            lab.pimd(t, "r1", routers=SITE)
        else:
            lab.smcroute(t, self.S, GROUP, members=EDGES, routers=SITE)

    def _mac(self, ns, ifname) -> int:
        info = json.loads(self.lab.ip(ns, "-j", "link", "show", ifname))[0]
        return int.from_bytes(bytes.fromhex(info["address"].replace(":", "")), "little")

    def attach_checker(self):
        """Load tree_rx once (maps pinned on a bpffs of the lab's own), configure
        every ingress point, attach."""
        lab, t = self.lab, self.t
        obj = lab.workdir() / "tree_rx.o"
        flags = (self.build / "bpf" / "clang-bpf-flags").read_text().split()
        subprocess.run(["clang", *flags, "-Werror", "-c", HERE / "tree_rx.bpf.c", "-o", obj], check=True)
        self.bpf_dir = lab.workdir() / "bpf"
        self.bpf_dir.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "bpf", "netlab", self.bpf_dir], check=True)
        _bpftool("prog", "loadall", obj, self.bpf_dir / "prog", "type", "classifier",
                 "pinmaps", self.bpf_dir / "maps")
        m = self.bpf_dir / "maps"
        self.maps = {name: m / name for name in ("tree_cfg", "tree_port", "tree_cnt", "tree_stamp", "tree_hist",
                                                  "tree_run")}
        self.row = {}
        relay_id = {r: i for i, r in enumerate(RELAYS)}

        def cfg(mac, role, tier, relay, up, row, port_base=0, nports=0, sub_base=0):
            val = struct.pack("<10I", role, tier, relay, up, row, port_base, nports, sub_base, SSRC_BASE, 0)
            _bpftool("map", "update", "pinned", self.maps["tree_cfg"], "key", *mac.to_bytes(8, "little"),
                     "value", *val)

        def attach(ns, ifname):
            lab.run(ns, ["tc", "qdisc", "replace", "dev", ifname, "clsact"], capture_output=True)
            lab.run(ns, ["tc", "filter", "replace", "dev", ifname, "ingress", "prio", "1", "handle", "1",
                         "bpf", "da", "pinned", self.bpf_dir / "prog" / "tree_rx"], capture_output=True)

        row = 0
        for r in RELAYS:   # relay inputs: keyed by the upstream neighbour's MAC
            up_link = t.uplinks[r]
            upstream = CASCADE.get(r, [None])[0]
            cfg(self._mac(up_link.a.ns, up_link.a.ifname), 1, TIER[r], relay_id[r],
                relay_id[upstream] + 1 if upstream else 0, row)
            attach(up_link.b.ns, up_link.b.ifname)
            self.row[("in", r)] = row
            row += 1
        for r in RELAYS:   # receivers: keyed by their relay's MAC
            link = self.rx[r]
            cfg(self._mac(link.a.ns, link.a.ifname), 2, TIER[r], relay_id[r], relay_id[r] + 1, row,
                PORT_BASE, self.split[r], self.first[r])
            attach(link.b.ns, link.b.ifname)
            self.row[("rx", r)] = row
            row += 1

    # -- relays -------------------------------------------------------------------

    def relay_argv(self, r):
        t = self.t
        sock = f"/tmp/{self.lab.prefix}-{r}.sock"
        argv = [self.bin, "relay", "--rtp", "-p", PORT, "--engine", self.engine, "--status", 0,
                "--stats-socket", sock, "--expire", 0, "--max-subscribers", 65536,
                "--max-per-source", max(64, self.split[r] + 1), "--control-rate", 1000000, *self.relay_args]
        if self.split_cpus:
            argv += ["--cpu", 0]
        if r in EDGES:
            argv += ["--join", f"{GROUP}@{t.uplinks[r].b.ifname}", "--producer", self.S]
        else:
            for up in CASCADE[r]:
                argv += ["--upstream", f"{self.control_addr(up, r)}:{CONTROL}"]
        return argv, sock

    def control_addr(self, up, down):
        """The address `down` reaches relay `up` at: its uplink address."""
        return self.t.uplinks[up].b.v4

    def start_relay(self, r, timeout=15):
        argv, sock = self.relay_argv(r)
        if os.path.exists(sock):
            os.unlink(sock)
        proc = self.lab.popen(self.t.ns[r], argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        while not (os.path.exists(sock) and self.query_sock(sock)):
            if proc.poll() is not None:
                raise LabError(f"relay {r} exited {proc.returncode}: {proc.stderr.read()}")
            if time.monotonic() > deadline:
                raise LabError(f"relay {r} did not start")
            time.sleep(0.05)
        self.procs[r], self.socks[r] = proc, sock
        return proc

    def query_sock(self, sock):
        p = subprocess.run([self.bin, "relay", "--query", sock], capture_output=True, text=True, timeout=20)
        return json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else None

    def query(self, r):
        return self.query_sock(self.socks[r])

    def kill(self, r):
        """SIGKILL relay r (no goodbye to its subscribers)."""
        p = self.procs.pop(r)
        p.kill()
        self.logs[r] = p.communicate(timeout=10)[1]

    # -- traffic ------------------------------------------------------------------

    def origin(self, count, rate, first=0, magic=MAGIC, background=False):
        argv = [sys.executable, __file__, "origin", "--group", GROUP, "--port", PORT, "--ifaddr", self.S,
                "--rate", rate, "--count", count, "--first", first, "--magic", magic]
        if background:
            return self.lab.popen(self.t.ns["o"], argv, stdout=subprocess.PIPE, text=True)
        p = self.lab.run(self.t.ns["o"], argv, capture_output=True, text=True, timeout=count / rate * 3 + 60)
        return json.loads(p.stdout)

    def warm_up(self, timeout=120, rate=20, chunk=10):
        """Send warm-up datagrams (not counted by the receivers) until every
        edge relay has read some: the group's routes are up (PIM builds them
        from data).  Their origin sequence numbers run on into the runs', so
        the stream never restarts: a restart would make the edges, which
        heard different parts of the warm-up, number it differently."""
        t0 = time.monotonic()
        while True:
            self.origin(chunk, rate, first=self.pseq, magic=WARMUP_MAGIC)
            self.pseq += chunk
            got = {r: self.query(r)["in"] for r in EDGES}
            if all(got.values()):
                break
            if time.monotonic() - t0 > timeout:
                raise LabError(f"the group did not reach every edge in {timeout} s: {got}")
        self.origin(chunk, rate, first=self.pseq, magic=WARMUP_MAGIC)
        self.pseq += chunk
        return time.monotonic() - t0

    def join_all(self, timeout=120):
        """Every receiver namespace JOINs its ports at its relay (in parallel);
        {relay: {"joined", "seconds", "failed", "relay_cpu_ns"}}."""
        jobs, before = {}, self.relay_stats()
        for r in RELAYS:
            link = self.rx[r]
            jobs[r] = self.lab.popen(link.b.ns, [
                sys.executable, __file__, "join", "--addr", link.b.v4, "--to", f"{link.a.v4}:{CONTROL}",
                "--ports", f"{PORT_BASE}+{self.split[r]}", "--ssrc-base", SSRC_BASE + self.first[r],
                "--timeout", timeout], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r, p in jobs.items():
            out, err = p.communicate(timeout=timeout + 30)
            if p.returncode != 0:
                raise LabError(f"join at {r}: {err.strip()}")
            self.joined[r] = json.loads(out)
        after = self.relay_stats()
        for r in RELAYS:   # the relay's own CPU for the handshakes (no data flows meanwhile)
            self.joined[r]["relay_cpu_ns"] = after[r]["cpu_ns"] - before[r]["cpu_ns"]
        return self.joined

    def start(self, warm_timeout=120):
        """Network, checker, relays, group up, receivers joined."""
        self.build_net()
        self.attach_checker()
        for r in EDGES:
            self.start_relay(r)
        self.warm_seconds = self.warm_up(warm_timeout)
        for r in CASCADE:
            self.start_relay(r)
        self.wait_upstreams()
        return self.join_all()

    def wait_upstreams(self, timeout=15):
        """Until each cascade relay is a subscriber of its first upstream."""
        deadline = time.monotonic() + timeout
        for r, ups in CASCADE.items():
            while self.query(ups[0])["subscriber_count"] < 1:
                if time.monotonic() > deadline:
                    raise LabError(f"{r} did not subscribe to {ups[0]}")
                time.sleep(0.05)

    # -- reading ------------------------------------------------------------------

    def _dump(self, name):
        return json.loads(_bpftool("-j", "map", "dump", "pinned", self.maps[name]))

    def counters(self) -> dict:
        raw = {int(_le(e["key"])): _le(e["value"]) for e in self._dump("tree_cnt")}
        return {f"{kind}:{r}": {c: raw.get(row * len(COUNTERS) + i, 0) for i, c in enumerate(COUNTERS)}
                for (kind, r), row in self.row.items()}

    def ports(self) -> dict:
        """{relay: [(count, max_gap_ns, first pseq or None, next)] per receiver}"""
        out = {r: [None] * self.split[r] for r in RELAYS}
        owner = [(r, self.first[r], self.split[r]) for r in RELAYS]
        for e in self._dump("tree_port"):
            i = _le(e["key"])
            raw = bytes(int(b, 16) for b in e["value"])
            cnt, _last, gap, nxt, first = struct.unpack_from("<QQQII", raw)
            for r, f, k in owner:
                if f <= i < f + k:
                    out[r][i - f] = (cnt, gap, first - 1 if first else None, nxt)
        return out

    def hist(self) -> dict:
        """{(role, tier, kind): [count per bucket]}: role rx|in, kind e2e|added"""
        vals = {_le(e["key"]): _le(e["value"]) for e in self._dump("tree_hist")}
        out = {}
        for role in (0, 1):
            for tier in range(TIERS):
                for kind in (0, 1):
                    row = ((role * TIERS + tier) * 2 + kind) * NB
                    h = [vals.get(row + b, 0) for b in range(NB)]
                    if sum(h):
                        out[(("rx", "in")[role], tier, ("e2e", "added")[kind])] = h
        return out

    def relay_stats(self) -> dict:
        return {r: self.query(r) for r in self.procs}

    # -- a run --------------------------------------------------------------------

    def run(self, count, rate, settle=2.0, during=None):
        """The origin sends `count` datagrams (the stream's next ones) at
        `rate`; returns what every receiver got.  during(tl): called once the
        origin started."""
        first = self.pseq
        self.pseq += count
        _bpftool("map", "update", "pinned", self.maps["tree_run"], "key", 0, 0, 0, 0,
                 "value", *first.to_bytes(4, "little"))
        p0, s0 = self.ports(), self.relay_stats()
        c0 = self.counters()
        if during:
            proc = self.origin(count, rate, first=first, background=True)
            during(self)
            out, _ = proc.communicate(timeout=count / rate * 3 + 60)
            tx = json.loads(out)
        else:
            tx = self.origin(count, rate, first=first)
        time.sleep(settle)
        p1, s1, c1 = self.ports(), self.relay_stats(), self.counters()
        per = {}
        for r in RELAYS:
            got = [p1[r][i][0] - p0[r][i][0] for i in range(self.split[r])]
            per[r] = {"receivers": self.split[r], "min": min(got) if got else 0, "max": max(got) if got else 0,
                      "complete": sum(g == count for g in got), "delivered": sum(got),
                      "max_gap_ms": max((p1[r][i][1] for i in range(self.split[r])), default=0) / 1e6}
        relays = {}
        for r in s1:
            a, b = s0.get(r), s1[r]
            if a:
                din = b["in"] - a["in"]
                relays[r] = {"in": din, "out": b["out"] - a["out"], "errors": b["errors"] - a["errors"],
                             "cpu_ns": b["cpu_ns"] - a["cpu_ns"], "engine": b.get("engine_resolved"),
                             "cpu_ns_per_in": (b["cpu_ns"] - a["cpu_ns"]) / din if din else None,
                             "subscribers": b["subscriber_count"]}
        cnt = {k: {c: v[c] - c0[k][c] for c in COUNTERS} for k, v in c1.items()}
        return {"count": count, "rate": rate, "first": first, "origin": tx, "per_relay": per, "relays": relays,
                "counters": cnt}

    def close(self):
        """Stop the relays (their stderr goes to self.logs), unpin the checker."""
        for r in list(self.procs):
            p = self.procs.pop(r)
            if p.poll() is None:
                p.terminate()
            try:
                self.logs[r] = p.communicate(timeout=5)[1]
            except subprocess.TimeoutExpired:
                p.kill()
                self.logs[r] = p.communicate()[1]
        # The kernel engine's owner files of our relays' namespaces (a relay
        # killed in a failover leaves its own; the .fwd ones outlive every
        # relay): nothing else runs a group send in these namespaces.
        if self.t:
            for r in RELAYS:
                ino = Path("/run/netns", self.t.ns[r]).stat().st_ino
                for stale in [*RUN_DIR.glob(f"lo-{ino}-*"), *RUN_DIR.glob(f"lo-{ino}.fwd*")]:
                    stale.unlink(missing_ok=True)
        # tc filters go with the namespaces; the pins with the bpffs
        if self.bpf_dir and os.path.ismount(self.bpf_dir):
            subprocess.run(["umount", self.bpf_dir], check=False)
        for s in self.socks.values():
            if os.path.exists(s):
                os.unlink(s)


# -- inside namespaces ------------------------------------------------------------

def cmd_origin(a):
    """Paced RTP into the group; prints {"sent", "seconds"}."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(a.ifaddr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 16)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    t0 = time.monotonic()
    for i in range(a.count):
        due = t0 + i / a.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        s.sendto(origin_packet(a.first + i, time.monotonic_ns(), a.magic), (a.group, a.port))
    print(json.dumps({"sent": a.count, "seconds": time.monotonic() - t0}))


def cmd_join(a):
    """The cookie handshake for every port, pipelined (at most --window
    handshakes open), each port's JOIN with ssrc=SSRC_BASE+index and
    rtcp=none; a handshake unanswered for 0.5 s starts over (at most 8 times).
    Prints {"joined", "failed", "seconds"}."""
    host, port = a.to.rsplit(":", 1)
    to = (host, int(port))
    first, _, cnt = a.ports.partition("+")
    ports = list(range(int(first), int(first) + int(cnt)))
    ssrc = {p: a.ssrc_base + i for i, p in enumerate(ports)}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
    s.bind((a.addr, 0))
    s.settimeout(0.05)

    def opts(p):
        return f"JOIN {p} rtcp=none ssrc={ssrc[p]:x}"

    todo, open_, done, tries = list(reversed(ports)), {}, set(), {p: 0 for p in ports}
    t0 = time.monotonic()
    deadline = t0 + a.timeout
    while (todo or open_) and time.monotonic() < deadline:
        while todo and len(open_) < a.window:
            p = todo.pop()
            tries[p] += 1
            msg = opts(p)
            s.sendto((msg + " " * max(0, 64 - len(msg))).encode(), to)
            open_[p] = time.monotonic()
        try:
            w = s.recv(2000).decode(errors="replace").split()
        except socket.timeout:
            w = []
        if len(w) >= 3 and w[0] == "COOKIE" and int(w[1]) in open_:
            p = int(w[1])
            s.sendto(f"{opts(p)} cookie={w[2]}".encode(), to)
            open_[p] = time.monotonic()
        elif len(w) >= 4 and w[:2] == ["OK", "JOIN"] and int(w[3]) in open_:
            p = int(w[3])
            del open_[p]
            done.add(p)
        now = time.monotonic()
        for p, t in list(open_.items()):
            if now - t > 0.5:
                del open_[p]
                if tries[p] < 8:
                    todo.append(p)
    print(json.dumps({"joined": len(done), "failed": len(ports) - len(done), "seconds": time.monotonic() - t0}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("origin")
    o.add_argument("--group", required=True)
    o.add_argument("--port", type=int, required=True)
    o.add_argument("--ifaddr", required=True)
    o.add_argument("--rate", type=float, required=True)
    o.add_argument("--count", type=int, required=True)
    o.add_argument("--first", type=int, default=0)
    o.add_argument("--magic", type=int, default=MAGIC)
    j = sub.add_parser("join")
    j.add_argument("--addr", required=True)
    j.add_argument("--to", required=True)
    j.add_argument("--ports", required=True, help="FIRST+COUNT")
    j.add_argument("--ssrc-base", type=int, required=True)
    j.add_argument("--window", type=int, default=64)
    j.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args(argv)
    {"origin": cmd_origin, "join": cmd_join}[a.cmd](a)


if __name__ == "__main__":
    main()
