#!/usr/bin/env python3
"""netlab: throwaway network labs made of Linux network namespaces.

    with Lab() as lab:
        star = lab.star(2)                 # sender "s" + receivers "r1", "r2"
        lab.set_sysctl("net.core.netdev_max_backlog", 10000)
        lab.run(star.sender, ["ip", "addr"])

Every lab has a random prefix ("gc" + 6 hex digits); its namespaces are called
PREFIX-NAME.  Closing the lab (leaving the with block, an exception, SIGTERM,
SIGINT, interpreter exit) kills the processes it started, deletes its
namespaces (which deletes their veths) and restores the global sysctls it
changed.  Only the lab's own namespaces are configured: the root namespace's
interfaces and routes are never touched, and no namespace gets a default
route, so nothing leaves the machine.

Addresses: link i of a lab is 10.R.i.0/24 and fd00:R:i::/64, end a is .1/::1,
end b is .2/::2, where R is a random octet in 64..127 chosen per lab.
10.R.250.0/24 and fd00:R:250::/64 are never assigned nor routed.

CLI (state of running labs is kept in /run/netlab/PREFIX.json):
    netlab.py up --receivers 2     build a star lab and leave it running
    netlab.py list                 labs on this machine and who owns them
    netlab.py down PREFIX          remove one lab
    netlab.py cleanup              remove every lab whose owner is gone
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from ipaddress import ip_address
from pathlib import Path

STATE_DIR = Path("/run/netlab")
PREFIX_RE = re.compile(r"^gc[0-9a-f]{6}$")
UNROUTED = 250  # third octet / third group that no lab ever routes


class LabError(RuntimeError):
    pass


@dataclass(frozen=True)
class Node:
    """One end of a link: interface `ifname` in namespace `ns`."""
    ns: str
    ifname: str
    v4: str | None
    v6: str | None


@dataclass(frozen=True)
class Link:
    index: int
    a: Node
    b: Node
    v4_net: str
    v6_net: str


@dataclass(frozen=True)
class Tree:
    """A multicast tree: a source host at the root, routers inside, hosts at
    the leaves, one veth link per edge (the parent is end a of the link).
    Names are the caller's ("s", "r1", "h1"); namespaces are PREFIX-name."""
    root: str
    parent: dict        # name -> parent name (root: None)
    ns: dict            # name -> namespace
    uplinks: dict       # name -> Link to its parent
    routers: tuple      # names of inner nodes
    hosts: tuple        # names of leaves (the root, a host too, is not among them)

    def children(self, name: str) -> list[str]:
        return [c for c, p in self.parent.items() if p == name]

    def addr(self, name: str) -> str:
        """A host's IPv4 address (on its only link); a router's on its uplink."""
        link = self.uplinks.get(name)
        return link.b.v4 if link else self.uplinks[self.children(name)[0]].a.v4

    def iface(self, router: str, toward: str) -> Node:
        """router's end of the link to its neighbour `toward` (parent or child)."""
        if self.parent.get(router) == toward:
            return self.uplinks[router].b
        if self.parent.get(toward) == router:
            return self.uplinks[toward].a
        raise LabError(f"{router} and {toward} are not neighbours")

    def below(self, name: str) -> list[str]:
        """Every node in the subtree under name, name excluded."""
        out = []
        for c in self.children(name):
            out += [c, *self.below(c)]
        return out


@dataclass(frozen=True)
class Star:
    """A sender namespace with one veth link to each receiver namespace."""
    sender: str
    links: tuple[Link, ...]

    @property
    def receivers(self) -> list[Node]:
        return [link.b for link in self.links]


def _hex_be(addr: str) -> str:
    """An IPv4 address as /proc/net/ip_mr_cache prints it (the __be32 as a number)."""
    return f"{int.from_bytes(ip_address(addr).packed, sys.byteorder):08X}"


def router_binary(name: str) -> str:
    """smcrouted / pimd: from PATH, or where scripts/install-deps.sh unpacks
    them (/opt/groupcast/routers: the two Debian packages conflict, and
    unpacking never starts a daemon in the root namespace)."""
    for path in (shutil.which(name), f"/opt/groupcast/routers/usr/sbin/{name}"):
        if path and os.access(path, os.X_OK):
            return path
    raise LabError(f"{name} not found (scripts/install-deps.sh unpacks it into /opt/groupcast/routers)")


class Lmsd:
    """A running lmsd (Lab.lmsd): its process and its JSON state file."""

    def __init__(self, proc, state_path):
        self.proc, self.state_path = proc, Path(state_path)

    def state(self) -> dict:
        try:
            return json.loads(self.state_path.read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def wait(self, pred, timeout: float = 10.0) -> dict:
        """Poll the state until pred(state) is true; return that state."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.state()
            if st and pred(st):
                return st
            if self.proc.poll() is not None:
                raise LabError(f"lmsd exited {self.proc.returncode}: {self.proc.stderr.read()}")
            if time.monotonic() > deadline:
                raise LabError(f"lmsd state never matched: {st}")
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM, wait; returns the exit status."""
        self.proc.terminate()
        return self.proc.wait(timeout=timeout)


class Loss:
    """Counters of a loss filter (Lab.add_loss)."""

    def __init__(self, stats_map_id):
        self.map_id = stats_map_id

    def counts(self) -> tuple[int, int]:
        """(packets seen, packets dropped), summed over CPUs."""
        out = []
        for k in ("0", "1"):
            v = json.loads(_sh(["bpftool", "-j", "map", "lookup", "id", str(self.map_id),
                                "key", k, "0", "0", "0"]))
            out.append(sum(int.from_bytes(bytes(int(b, 16) for b in c["value"]), "little")
                           for c in v["values"]))
        return tuple(out)


def _sh(argv):
    """Run a host command; raise LabError with its stderr if it fails."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise LabError(f"{' '.join(map(str, argv))}: {p.stderr.strip()}")
    return p.stdout


def _netns_list():
    return [line.split()[0] for line in _sh(["ip", "netns", "list"]).splitlines() if line.strip()]


def _sysctl_path(key):
    return Path("/proc/sys") / key.replace(".", "/")


def _state_path(prefix):
    return STATE_DIR / f"{prefix}.json"


def _read_state(prefix):
    try:
        return json.loads(_state_path(prefix).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _pid_alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def down(prefix, sysctls=None):
    """Remove lab `prefix`: kill what runs in its namespaces, delete them,
    restore the sysctls it changed (from `sysctls`, else its state file)."""
    if not PREFIX_RE.match(prefix):
        raise LabError(f"not a lab prefix: {prefix!r}")
    if sysctls is None:
        sysctls = _read_state(prefix).get("sysctl", {})
    errors = []
    for ns in _netns_list():
        if not ns.startswith(prefix + "-"):
            continue
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        for pid in pids.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        p = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
        if p.returncode != 0:
            errors.append(f"ip netns del {ns}: {p.stderr.strip()}")
    for key, value in reversed(list(sysctls.items())):
        try:
            _sysctl_path(key).write_text(value)
        except OSError as e:
            errors.append(f"restore {key}={value}: {e}")
    _state_path(prefix).unlink(missing_ok=True)
    shutil.rmtree(STATE_DIR / prefix, ignore_errors=True)  # Lab.workdir()
    if errors:
        raise LabError("; ".join(errors))


def labs():
    """{prefix: owner pid (0 = detached, None = unknown)} of labs on this machine."""
    found = {ns.split("-", 1)[0] for ns in _netns_list() if "-" in ns}
    if STATE_DIR.is_dir():
        found |= {p.stem for p in STATE_DIR.glob("*.json")}
    return {p: _read_state(p).get("pid") for p in sorted(found) if PREFIX_RE.match(p)}


def cleanup():
    """Remove every lab whose owning process is gone; return their prefixes."""
    gone = [prefix for prefix, pid in labs().items() if not _pid_alive(pid)]
    for prefix in gone:
        down(prefix)
    return gone


# Labs of this process that are still up; closed on SIGTERM/SIGINT and at exit.
_live: set[Lab] = set()
_previous_handlers: dict = {}


def _close_live():
    for lab in list(_live):
        try:
            lab.close()
        except Exception as e:  # keep closing the others
            print(f"netlab: closing {lab.prefix}: {e}", file=sys.stderr)


def _on_signal(signum, frame):
    """Close our labs, then let the signal do what it did before."""
    try:
        _close_live()
    finally:
        previous = _previous_handlers[signum]
        if callable(previous):
            previous(signum, frame)  # SIGINT: raises KeyboardInterrupt
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)


def _install_handlers():
    if _previous_handlers or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)
        if previous not in (signal.SIG_IGN, None):
            _previous_handlers[signum] = previous
            signal.signal(signum, _on_signal)


atexit.register(_close_live)


class Lab:
    """A set of namespaces, links and settings that disappears on close()."""

    def __init__(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        taken = labs()
        self.prefix = "gc" + secrets.token_hex(3)
        while self.prefix in taken:
            self.prefix = "gc" + secrets.token_hex(3)
        self.octet = 64 + secrets.randbelow(64)
        self.namespaces: list[str] = []
        self.links: list[Link] = []
        self.topology: Star | None = None  # set by star()
        self._procs: list[subprocess.Popen] = []
        self._sysctls: dict[str, str] = {}  # global key -> original value
        self._closed = False
        _install_handlers()
        _live.add(self)
        self._save_state(os.getpid())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- namespaces and links -------------------------------------------------

    def add_ns(self, name: str) -> str:
        """Create namespace PREFIX-name with loopback up; return its full name."""
        ns = f"{self.prefix}-{name}"
        _sh(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        self.ip(ns, "link", "set", "lo", "up")
        return ns

    def add_link(self, ns_a: str, ns_b: str, v4: bool = True, v6: bool = True,
                 ifindex_a: int | None = None) -> Link:
        """Connect two namespaces with a veth pair (veth<i> on both sides),
        addressed 10.R.i.1|2/24 and fd00:R:i::1|2/64 (nodad), and bring it up.
        ifindex_a: the interface index of ns_a's end (default: the next free)."""
        index = len(self.links) + 1
        if index >= UNROUTED:
            raise LabError(f"a lab has at most {UNROUTED - 1} links")
        ifname = f"veth{index}"
        v4_net, v6_net = f"10.{self.octet}.{index}.0/24", f"fd00:{self.octet}:{index}::/64"
        index_a = ["index", ifindex_a] if ifindex_a else []
        self.ip(ns_a, "link", "add", ifname, *index_a, "type", "veth", "peer", "name", ifname, "netns", ns_b)
        ends = []
        for ns, host in ((ns_a, 1), (ns_b, 2)):
            a4 = f"10.{self.octet}.{index}.{host}" if v4 else None
            a6 = f"fd00:{self.octet}:{index}::{host}" if v6 else None
            if a4:
                self.ip(ns, "addr", "add", f"{a4}/24", "dev", ifname)
            if a6:
                self.ip(ns, "-6", "addr", "add", f"{a6}/64", "dev", ifname, "nodad")
            self.ip(ns, "link", "set", ifname, "up")
            ends.append(Node(ns, ifname, a4, a6))
        link = Link(index, ends[0], ends[1], v4_net, v6_net)
        self.links.append(link)
        return link

    def star(self, receivers: int, sender: str = "s") -> Star:
        """Sender namespace `sender` linked to receivers r1..rK; neighbours
        of the sender are resolved before this returns."""
        s = self.add_ns(sender)
        links = tuple(self.add_link(s, self.add_ns(f"r{i}")) for i in range(1, receivers + 1))
        self.resolve(s, [a for link in links for a in (link.b.v4, link.b.v6) if a])
        self.topology = Star(s, links)
        return self.topology

    def tree(self, children: dict, root: str = "s", ifindex: dict | None = None) -> Tree:
        """Build a tree from {parent: [children]} (root = the source host):
        nodes with children are routers (IPv4 forwarding on), leaves are
        hosts.  Every node gets a route to every link of the tree (no
        default route), rp_filter is off, neighbours are resolved.  The
        multicast routes are the caller's: smcroute() or pimd() below.
        ifindex {child: N}: the parent's interface toward child gets index N.

            lab.tree({"s": ["r1"], "r1": ["r2", "r3"], "r2": ["h1", "h2"], "r3": ["h3", "h4"]})
        """
        parent = {root: None}
        order = [root]
        for name in order:  # breadth first: parents before children
            for c in children.get(name, []):
                if c in parent:
                    raise LabError(f"tree: {c} appears twice")
                parent[c] = name
                order.append(c)
        ns = {name: self.add_ns(name) for name in order}
        uplinks = {c: self.add_link(ns[parent[c]], ns[c], v6=False, ifindex_a=(ifindex or {}).get(c))
                   for c in order[1:]}
        routers = tuple(n for n in order[1:] if children.get(n))
        hosts = tuple(n for n in order[1:] if not children.get(n))
        t = Tree(root, parent, ns, uplinks, routers, hosts)
        for name in order:
            for key in ("net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter"):
                self.set_sysctl(key, 0, ns=ns[name])
            if name in routers:
                self.set_sysctl("net.ipv4.ip_forward", 1, ns=ns[name])
            for c, link in uplinks.items():  # a route to each link not attached here
                if name in (c, parent[c]):
                    continue
                # down through the child whose subtree holds the link, else up
                via = next((k for k in t.children(name) if c in t.below(k)), parent[name])
                self.ip(ns[name], "route", "add", link.v4_net, "via", t.iface(via, name).v4)
        for name in order:
            nb = [t.iface(n, name).v4 for n in (parent[name], *t.children(name)) if n]
            self.resolve(ns[name], nb)
        return t

    def workdir(self) -> Path:
        """A directory of this lab's files (configs, sockets, pid files), removed on close."""
        d = STATE_DIR / self.prefix
        d.mkdir(mode=0o700, exist_ok=True)
        return d

    @staticmethod
    def _site(t: Tree, routers):
        """The routers that route multicast (default: all of t's) and, per
        router, the neighbours its multicast interfaces face: hosts, and
        routers of the site (a router outside it routes unicast only)."""
        site = tuple(t.routers if routers is None else routers)
        if set(site) - set(t.routers):
            raise LabError(f"not routers of the tree: {sorted(set(site) - set(t.routers))}")
        return site, {r: [n for n in (t.parent[r], *t.children(r)) if n in site or n not in t.routers]
                      for r in site}

    def smcroute(self, t: Tree, source: str, group: str, members: list[str] | None = None,
                 more: list | None = None, routers: list[str] | None = None):
        """Static (source, group) routes on every router of t with smcrouted,
        one daemon per router namespace with its own config, socket and pid
        file.  Outgoing interfaces: the child links whose subtree holds a
        member (members None: every host).  `more`: further (source, group,
        members) routes.  routers: only these route multicast (default all;
        the others forward unicast only).  Waits until the kernel has every
        route."""
        routes = [(source, group, list(t.hosts) if members is None else members), *(more or [])]
        binary = router_binary("smcrouted")
        site, faces = self._site(t, routers)
        for r in site:
            conf = self.workdir() / f"smcroute-{r}.conf"
            lines = [f"phyint {t.iface(r, n).ifname} enable" for n in faces[r]]
            for src, grp, mem in routes:
                oifs = [t.iface(r, c).ifname for c in t.children(r)
                        if c in faces[r] and (c in mem or set(mem) & set(t.below(c)))]
                if oifs:
                    lines.append(f"mroute from {t.iface(r, t.parent[r]).ifname} source {src} "
                                 f"group {grp} to {' '.join(oifs)}")
            conf.write_text("\n".join(lines) + "\n")
            self.popen(t.ns[r], [binary, "-n", "-N", "-f", conf, "-l", "notice",
                                 "-u", self.workdir() / f"smcroute-{r}.sock",
                                 "-P", self.workdir() / f"smcroute-{r}.pid"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for r in site:
            for src, grp, mem in routes:
                if any(c in faces[r] and (c in mem or set(mem) & set(t.below(c))) for c in t.children(r)):
                    self.wait_mroute(t.ns[r], src, grp)

    def pimd(self, t: Tree, rp: str, routers: list[str] | None = None):
        """PIM-SM on every router of t (pimd), with router `rp` as the static
        rendezvous point for all groups.  routers: only these run pimd
        (default all), with multicast enabled only toward each other and
        hosts; the others forward unicast only.  pimd 2.3 has fixed paths
        (/run/pimd.pid): each daemon gets a private /run, a tmpfs mounted in
        the mount namespace that `ip netns exec` already gives it (mounts
        there do not reach the host).  Routes appear in the kernel once hosts
        have joined and the source sends: wait with wait_mroute()."""
        binary = router_binary("pimd")
        rp_addr = t.iface(rp, t.children(rp)[0]).v4
        script = ('mount -t tmpfs netlab /run && printf "%s" "$1" > /run/pimd.conf && '
                  'exec "$2" -f -N -c /run/pimd.conf -s notice')
        site, faces = self._site(t, routers)
        for r in site:
            conf = "".join(f"phyint {t.iface(r, n).ifname} {'enable' if n in faces[r] else 'disable'}\n"
                           for n in (t.parent[r], *t.children(r)))
            conf += f"rp-address {rp_addr} 224.0.0.0/4\n"
            self.popen(t.ns[r], ["sh", "-ec", script, "pimd", conf, binary],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Ready when its vifs are in the kernel: IGMP reports sent from now on
        # are heard (earlier ones would wait for the next query, ~30 s).
        for r in site:
            want = 1 + len(faces[r])  # enabled interfaces, pimreg
            deadline = time.monotonic() + 10
            while True:
                p = self.run(t.ns[r], ["cat", "/proc/net/ip_mr_vif"], capture_output=True, text=True, check=False)
                if len(p.stdout.splitlines()) - 1 >= want:
                    break
                if time.monotonic() > deadline:
                    raise LabError(f"{t.ns[r]}: pimd did not set up its vifs: {p.stdout!r}")
                time.sleep(0.05)

    def wait_mroute(self, ns: str, source: str, group: str, timeout: float = 10.0, oifs: int = 1):
        """Wait until ns's kernel multicast forwarding cache has (source, group)
        with at least `oifs` outgoing interfaces."""
        want = f"{_hex_be(group)} {_hex_be(source)}"
        deadline = time.monotonic() + timeout
        while True:
            p = self.run(ns, ["cat", "/proc/net/ip_mr_cache"], capture_output=True, text=True, check=False)
            if any(line.startswith(want) and line.count(":") >= oifs for line in p.stdout.splitlines()):
                return
            if time.monotonic() > deadline:
                raise LabError(f"{ns}: no multicast route ({source}, {group}): {p.stdout!r}")
            time.sleep(0.05)

    def lmsd(self, ns: str, binary, repliers=(), interval_ms: int = 100, name: str | None = None,
             args=()):
        """Start lmsd in router namespace ns with static repliers
        [(source, group, ifname, address)], state in the lab's workdir;
        args: more options (e.g. --no-provisional)."""
        name = name or ns.split("-", 1)[1]
        conf = self.workdir() / f"lmsd-{name}.conf"
        conf.write_text("".join(f"replier {s} {g} {i} {a}\n" for s, g, i, a in repliers))
        state = self.workdir() / f"lmsd-{name}.json"
        proc = self.popen(ns, [binary, "-c", conf, "-s", state, "-t", interval_ms, *args],
                          stderr=subprocess.PIPE, text=True)
        return Lmsd(proc, state)

    def add_loss(self, ns: str, ifname: str, fraction: float, obj, direction: str = "ingress",
                 match: tuple[int, int, int] | None = None):
        """Drop `fraction` (0..1) of the IP packets crossing ifname in ns
        (bpf/loss.bpf.c, compiled to obj), at tc priority 1 so that other
        filters (LMS-FWD) see only what survives.  match (offset, mask,
        value): only the packets whose byte at offset into the IP packet,
        masked, is value (the counters count those alone).  Returns a Loss."""
        if not 0 <= fraction <= 1:
            raise LabError(f"add_loss: fraction {fraction} not in 0..1")
        if match is not None and not (0 <= match[0] < 0xFFFF and 0 <= match[1] <= 0xFF and 0 <= match[2] <= 0xFF):
            raise LabError(f"add_loss: match {match}: want (offset 0..65534, mask 0..255, value 0..255)")
        self.run(ns, ["tc", "qdisc", "replace", "dev", ifname, "clsact"], capture_output=True)
        self.run(ns, ["tc", "filter", "replace", "dev", ifname, direction, "prio", "1", "handle", "1",
                      "bpf", "da", "obj", obj, "sec", "tc"], capture_output=True)
        shown = json.loads(self.run(ns, ["tc", "-j", "filter", "show", "dev", ifname, direction, "prio", "1"],
                                    capture_output=True, text=True).stdout)
        prog = next(f["options"]["prog"]["id"] for f in shown if "options" in f)
        maps = {}
        for mid in json.loads(_sh(["bpftool", "-j", "prog", "show", "id", str(prog)]))["map_ids"]:
            maps[json.loads(_sh(["bpftool", "-j", "map", "show", "id", str(mid)]))["name"]] = mid
        threshold = min(int(fraction * 2**32), 2**32 - 1)
        cfg = [threshold] + ([match[0] + 1, match[1], match[2]] if match else [])
        for k, v in reversed(list(enumerate(cfg))):  # the match before the threshold that makes it drop
            _sh(["bpftool", "map", "update", "id", str(maps["loss_cfg"]), "key", *[str(b) for b in k.to_bytes(4, "little")],
                 "value", *[str(b) for b in v.to_bytes(4, "little")]])
        return Loss(maps["loss_stats"])

    def unrouted_v4(self, host: int = 1) -> str:
        """An address no route in the lab covers (sending to it: ENETUNREACH)."""
        return f"10.{self.octet}.{UNROUTED}.{host}"

    def unrouted_v6(self, host: int = 1) -> str:
        return f"fd00:{self.octet}:{UNROUTED}::{host:x}"

    def resolve(self, ns: str, addrs: list[str], timeout: float = 5.0):
        """Make ns resolve the link-layer address of each neighbour in addrs
        (ARP / neighbour discovery, triggered by one UDP datagram to port 9),
        so that later bursts are not queued behind resolution."""
        poke = ("import socket, sys\n"
                "for a in sys.argv[1:]:\n"
                "    f = socket.AF_INET6 if ':' in a else socket.AF_INET\n"
                "    socket.socket(f, socket.SOCK_DGRAM).sendto(b'', (a, 9))\n")
        self.run(ns, [sys.executable, "-c", poke, *addrs], capture_output=True)
        deadline = time.monotonic() + timeout
        while True:
            neigh = json.loads(self.ip(ns, "-j", "neigh", "show") or "[]")
            # DELAY and PROBE have a link-layer address too (a STALE entry
            # that was just used): the packet goes out at once.
            resolved = {"REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT"}
            done = {ip_address(n["dst"]) for n in neigh if resolved & set(n.get("state", []))}
            missing = [a for a in addrs if ip_address(a) not in done]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise LabError(f"{ns}: neighbours not resolved: {missing}")
            time.sleep(0.02)

    # -- settings ---------------------------------------------------------------

    def set_offload(self, ns: str, ifname: str, **features):
        """ethtool -K in ns; features like tx=False, tso=False,
        tx_udp_segmentation=False (underscores become dashes)."""
        args = []
        for name, on in features.items():
            args += [name.replace("_", "-"), "on" if on in (True, "on") else "off"]
        self.run(ns, ["ethtool", "-K", ifname, *args], capture_output=True)

    def set_rps(self, ns: str, ifname: str, cpumask: int):
        """Steer receive work of every rx queue of ifname to the CPUs in cpumask."""
        script = f'for q in /sys/class/net/{ifname}/queues/rx-*/rps_cpus; do echo {cpumask:x} > "$q"; done'
        self.run(ns, ["sh", "-ec", script])

    def set_sysctl(self, key: str, value, ns: str | None = None):
        """Set a sysctl.  Global (ns=None): restored on close.  Per namespace:
        set with `sysctl -w` inside ns; it goes away with the namespace."""
        if ns is not None:
            self.run(ns, ["sysctl", "-qw", f"{key}={value}"], capture_output=True)
            return
        path = _sysctl_path(key)
        if key not in self._sysctls:
            self._sysctls[key] = path.read_text().strip()
            self._save_state(os.getpid())
        path.write_text(str(value))

    # -- commands inside namespaces ---------------------------------------------

    def ip(self, ns: str, *args) -> str:
        """`ip -n ns ARGS`; returns stdout, raises LabError on failure."""
        return _sh(["ip", "-n", ns, *map(str, args)])

    def run(self, ns: str, argv, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        """subprocess.run(argv) inside ns (check=True by default)."""
        return subprocess.run(["ip", "netns", "exec", ns, *map(str, argv)], check=check, **kwargs)

    def popen(self, ns: str, argv, **kwargs) -> subprocess.Popen:
        """subprocess.Popen(argv) inside ns; killed on close if still running."""
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *map(str, argv)], **kwargs)
        self._procs.append(proc)
        return proc

    # -- lifetime -----------------------------------------------------------------

    def close(self):
        """Kill our processes, delete our namespaces, restore global sysctls.
        Idempotent; also called on SIGTERM/SIGINT and at interpreter exit."""
        if self._closed:
            return
        # Marked closed only at the end: a signal arriving meanwhile runs a
        # complete close() from the handler instead of cutting this one short.
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        down(self.prefix, self._sysctls)
        self._closed = True
        _live.discard(self)

    def detach(self):
        """Leave the lab up after this process exits (netlab.py down removes it)."""
        _live.discard(self)
        self._closed = True
        self._save_state(0)

    def describe(self) -> dict:
        return {"prefix": self.prefix, "octet": self.octet, "namespaces": self.namespaces,
                "links": [asdict(link) for link in self.links]}

    def _save_state(self, pid):
        _state_path(self.prefix).write_text(json.dumps({"pid": pid, "sysctl": self._sysctls}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build a star lab and leave it running")
    up.add_argument("--receivers", type=int, default=2)
    sub.add_parser("list", help="labs on this machine")
    dn = sub.add_parser("down", help="remove one lab")
    dn.add_argument("prefix")
    sub.add_parser("cleanup", help="remove labs whose owner process is gone")
    args = ap.parse_args(argv)

    if args.cmd == "up":
        with Lab() as lab:
            lab.star(args.receivers)
            lab.detach()
            print(json.dumps(lab.describe(), indent=2))
    elif args.cmd == "list":
        for prefix, pid in labs().items():
            owner = "detached" if pid == 0 else f"pid {pid}" if _pid_alive(pid) else "owner gone"
            print(prefix, owner)
    elif args.cmd == "down":
        down(args.prefix)
    elif args.cmd == "cleanup":
        for prefix in cleanup():
            print("removed", prefix)


if __name__ == "__main__":
    main()
