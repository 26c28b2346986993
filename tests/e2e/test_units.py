"""The systemd units in systemd/, without booting systemd.

Each unit is parsed; `systemd-analyze verify` checks it (ExecStart pointing
at the build tree) and `systemd-analyze security --offline=true` rates it.
Then its ExecStart line runs as the unit would run it: the words of
ExecStart with %i and $VARIABLES expanded, the unit's capability bounding
and ambient sets and no_new_privs (setpriv), its user (DynamicUser=: an
unused uid of systemd's dynamic range), its RuntimeDirectory= made on a
private /run, NOTIFY_SOCKET pointing at a datagram socket of this test and
WATCHDOG_USEC set, in a network namespace of its own (loopback only).  The
test checks what systemd would see: READY=1 once the daemon serves (the
relay relays, the engine takes a ring), WATCHDOG=1 at least every half
interval, RELOADING=1 then READY=1 on SIGHUP where ExecReload asks for it,
STOPPING=1 on SIGTERM and exit 0; every notification from the main PID
(NotifyAccess=main).  The engine's socket activation: a listening socket
bound here (as systemd does for groupcast-engine.socket) is passed as fd 3
with LISTEN_FDS=1 and LISTEN_PID, and `groupcast ring-send` connects
through it.  Paths substituted: @GC_UNIT_BINDIR@/@GC_UNIT_SBINDIR@ (the
build tree) and /etc/groupcast (the test's directory of the service).
"""
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kengine import require_kernel
from netlab import Lab

REPO = Path(__file__).resolve().parents[2]
UNITS = ["groupcast-relay@.service", "lmsd.service", "groupcast-engine.service",
         "groupcast-engine.socket"]
WAIT = 20          # seconds any single step may take
WD_USEC = 2000000  # the watchdog interval the tests ask for
DYN_UID = 61893    # in systemd's DynamicUser range (61184..65519)


def unit_text(name, build):
    text = (REPO / "systemd" / f"{name}.in").read_text()
    tools = str(build / "tools")
    return text.replace("@GC_UNIT_BINDIR@", tools).replace("@GC_UNIT_SBINDIR@", tools)


def parse(text):
    """{section: {key: [values...]}}: systemd's syntax as the units use it
    (no line continuations); an empty assignment resets the list."""
    units, sec = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            sec = units.setdefault(line.strip("[]"), {})
            continue
        key, _, val = line.partition("=")
        vals = sec.setdefault(key, [])
        if val == "":
            vals.clear()
        else:
            vals.append(val)
    return units


def test_units_verify_and_security(build, tmp_path):
    """Every unit passes `systemd-analyze verify` with no warning, and each
    service's exposure is rated OK or better."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    for name in UNITS:
        (tmp_path / name).write_text(unit_text(name, build))
    shutil.copy(tmp_path / "groupcast-relay@.service", tmp_path / "groupcast-relay@test.service")
    for name in [u for u in UNITS if "@." not in u] + ["groupcast-relay@test.service"]:
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"./{name}"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), \
            f"verify {name}: rc {r.returncode}: {r.stdout}{r.stderr}"
    for name in [u for u in UNITS if u.endswith(".service")]:
        r = subprocess.run(["systemd-analyze", "security", "--offline=true", f"./{name}"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", r.stdout)
        assert m, f"security {name}: {r.stdout}{r.stderr}"
        print(f"{name}: {m.group(1)} {m.group(2)}")
        assert m.group(2) in ("SAFE", "OK"), f"{name}: exposure {m.group(1)} {m.group(2)}"


def test_units_match_the_daemons(build):
    """What the units promise of the daemons: notify, a watchdog, reload by
    SIGHUP exactly where the daemon reloads, socket activation."""
    for name in UNITS[:3]:
        s = parse(unit_text(name, build))["Service"]
        assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["main"], name
        assert s["WatchdogSec"], name
        assert s["NoNewPrivileges"] == ["yes"] and s["ProtectSystem"] == ["strict"], name
        reloads = name != "groupcast-engine.service"  # the engine has no SIGHUP
        # --metrics listens on TCP, IPv4 or IPv6 (the ExecStart runs below do not
        # enforce RestrictAddressFamilies: it is checked here)
        assert {"AF_INET", "AF_INET6"} <= set(s["RestrictAddressFamilies"][0].split()), name
        assert s.get("ExecReload") == (["/bin/kill -HUP $MAINPID"] if reloads else None), name
    sock = parse(unit_text("groupcast-engine.socket", build))["Socket"]
    assert sock["ListenSequentialPacket"] == ["/run/groupcast-engine.sock"]


# ---- running ExecStart as the unit would ---------------------------------------


class Notify:
    """systemd's side of NOTIFY_SOCKET: a datagram socket that records
    (time, sender pid, message)."""

    def __init__(self, d):
        self.path = os.path.join(d, "notify")
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(self.path)
        os.chmod(self.path, 0o777)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.msgs = []

    def next(self, timeout=WAIT):
        """The next message: (t, pid, {var: value})."""
        self.s.settimeout(timeout)
        data, anc, _, _ = self.s.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = None
        for level, kind, val in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = int.from_bytes(val[:4], "little")
        kv = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        m = (time.monotonic(), pid, kv)
        self.msgs.append(m)
        return m

    def expect(self, var, pid, skip=("WATCHDOG",), timeout=WAIT):
        """Wait for var=1 from pid, passing over the kinds in skip."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            assert left > 0, f"no {var}=1 within {timeout} s: {self.msgs}"
            try:
                t, sender, kv = self.next(left)
            except socket.timeout:
                pytest.fail(f"no {var}=1 within {timeout} s: {self.msgs}")
            assert sender == pid, f"{kv} from pid {sender}, not the main pid {pid}"
            if kv.get(var) == "1":
                return t, kv
            assert set(kv) <= set(skip) | {"MONOTONIC_USEC"}, f"{kv} while waiting for {var}=1"

    def watchdog(self, pid, seconds):
        """The WATCHDOG=1 times over seconds."""
        times, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                t, sender, kv = self.next(max(0.05, end - time.monotonic()))
            except socket.timeout:
                break
            assert sender == pid and kv == {"WATCHDOG": "1"}, (sender, kv)
            times.append(t)
        return times

    def close(self):
        self.s.close()


def caps(vals):
    """setpriv's form of a capability list: -all,+net_admin,+bpf"""
    names = " ".join(vals).split()
    return ",".join(["-all"] + ["+" + c.lower().removeprefix("cap_") for c in names])


class Service:
    """One unit's [Service] run as systemd would, in namespace ns."""

    def __init__(self, lab, ns, build, unit, instance="", env=None, files=None, pass_fd=None, wd_usec=WD_USEC):
        """files: {name: text}, config files written to self.dir, which
        stands for /etc/groupcast; "{dir}" in env values is self.dir.
        wd_usec: the WATCHDOG_USEC it runs with."""
        self.s = parse(unit_text(unit, build))["Service"]
        self.wd_usec = wd_usec
        self.dir = tempfile.mkdtemp(prefix=f"{lab.prefix}-")
        os.chmod(self.dir, 0o755)
        for name, text in (files or {}).items():
            self.write(name, text)
        self.notify = Notify(self.dir)
        env = {k: v.replace("{dir}", self.dir) for k, v in (env or {}).items()}
        for e in self.s.get("Environment", []):
            k, _, v = e.partition("=")
            env.setdefault(k, v)
        line = self.s["ExecStart"][0].replace("%i", instance)
        line = line.replace("/etc/groupcast/", self.dir + "/")
        argv = []
        for w in shlex.split(line):  # $VAR: its words; ${VAR}: one word (systemd.service(5))
            if w.startswith("$") and not w.startswith("${"):
                argv += env.get(w[1:], "").split()
            else:
                argv.append(w)
        assert not self.s.get("User") or self.s.get("DynamicUser") == ["yes"], "a fixed User="
        uid = DYN_UID
        with pytest.raises(KeyError):  # unused, as systemd's dynamic users are
            pwd.getpwuid(uid)
        bound = caps(self.s["CapabilityBoundingSet"]) if self.s.get("CapabilityBoundingSet") else "-all"
        amb = caps(self.s["AmbientCapabilities"]) if self.s.get("AmbientCapabilities") else "-all"
        priv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                f"--bounding-set={bound}", f"--inh-caps={amb}", f"--ambient-caps={amb}"]
        if self.s.get("NoNewPrivileges") == ["yes"]:
            priv.append("--no-new-privs")
        # RuntimeDirectory=: on a private /run (ip netns exec's own mount
        # namespace), owned by the service's user, RuntimeDirectoryMode
        mode = self.s.get("RuntimeDirectoryMode", ["0755"])[0]
        rdirs = " ".join(" ".join(self.s.get("RuntimeDirectory", [])).split())
        # and cgroup2 read-only at /sys/fs/cgroup, as systemd leaves it
        # (ProtectControlGroups=), which ip netns exec's fresh /sys lacks:
        # AUTO looks there for cgroup BPF programs the kernel engine would bypass
        setup = ("mount -t tmpfs -o mode=0755 tmpfs /run"
                 " && mount -t cgroup2 -o ro cgroup2 /sys/fs/cgroup")
        for d in rdirs.split():
            d = d.replace("%i", instance)
            setup += f" && mkdir -p /run/{d} && chown {uid}:{uid} /run/{d} && chmod {mode} /run/{d}"
        penv = dict(os.environ, NOTIFY_SOCKET=self.notify.path, WATCHDOG_USEC=str(wd_usec))
        if pass_fd is not None:  # the socket as fd 3 (preexec_fn), for this very process
            setup += " && export LISTEN_PID=$$"
            penv["LISTEN_FDS"] = "1"
        self.argv = argv
        self.p = lab.popen(ns, ["sh", "-c", setup + ' && exec "$@"', "sh", *priv, "--", *argv],
                           env=penv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           preexec_fn=(lambda: os.dup2(pass_fd, 3)) if pass_fd is not None else None,
                           pass_fds=(3,) if pass_fd is not None else ())

    def write(self, name, text):
        """A config file the service's user can read."""
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)

    def ready(self):
        try:
            return self.notify.expect("READY", self.p.pid)[0]
        except BaseException:
            self.p.kill()
            out, err = self.p.communicate(timeout=WAIT)
            print(f"argv {self.argv}\nstdout {out}\nstderr {err}")
            raise

    def check_watchdog(self):
        """WATCHDOG=1 at least every half interval (systemd kills at a whole one)."""
        times = self.notify.watchdog(self.p.pid, 2.5 * self.wd_usec / 1e6)
        assert len(times) >= 3, f"{len(times)} WATCHDOG=1 in {2.5 * self.wd_usec / 1e6} s"
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert max(gaps) < self.wd_usec / 1e6, f"WATCHDOG=1 gaps {gaps}"

    def reload(self):
        self.p.send_signal(signal.SIGHUP)
        t1, kv = self.notify.expect("RELOADING", self.p.pid)
        assert int(kv["MONOTONIC_USEC"]) > 0
        t2, _ = self.notify.expect("READY", self.p.pid)
        assert t2 >= t1

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.notify.expect("STOPPING", self.p.pid)
        out, err = self.p.communicate(timeout=WAIT)
        assert self.p.returncode == 0, f"exit {self.p.returncode}: {err}"
        return out, err

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate(timeout=WAIT)
        self.notify.close()
        shutil.rmtree(self.dir, ignore_errors=True)


RECV = """import socket, sys
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(("127.0.0.1", int(sys.argv[1])))
r.settimeout(5)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"unit-probe", ("127.0.0.1", 2000))
print(r.recv(100).decode())
"""


SCRAPE = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=5).read().decode())"


def scrape(lab, ns, where):
    """--metrics on where (HOST:PORT) under the unit's user and capabilities: the exposition."""
    return lab.run(ns, ["python3", "-c", SCRAPE.replace("127.0.0.1:9464", where)], check=False,
                   capture_output=True, text=True, timeout=WAIT).stdout


def relayed(lab, ns, port):
    """One datagram to the relay's port 2000 (once: no retry) comes back on port."""
    r = lab.run(ns, ["python3", "-c", RECV, str(port)], check=False, capture_output=True,
                text=True, timeout=WAIT)
    return r.returncode == 0 and r.stdout.strip() == "unit-probe"


@pytest.mark.parametrize("engine", ["auto", "kernel"])
def test_relay_unit(build, engine):
    """The relay under its unit.  The unit's capabilities are enough for the
    kernel engine (--engine kernel), and AUTO takes it where root's AUTO
    would: it falls back silently otherwise."""
    with Lab() as lab:
        # a sender namespace (10.x links to one receiver namespace): where
        # require_kernel looks, as root; the relay uses its loopback
        ns = lab.star(1, sender="svc").sender
        try:
            require_kernel(lab, build)
            kernel = True
        except pytest.skip.Exception:
            if engine == "kernel":
                raise
            kernel = False
        svc = Service(lab, ns, build, "groupcast-relay@.service", "edge",
                      env={"RELAY_OPTS": f"--engine {engine} --json --metrics 9464"},
                      files={"edge.conf": "0.0.0.0/0: 127.0.0.1/5001\n"})
        try:
            svc.ready()
            assert relayed(lab, ns, 5001), "READY=1 came before the relay relays"
            # --metrics under the unit's user and capabilities: that datagram, counted
            m = lab.run(ns, ["python3", "-c", SCRAPE], check=False, capture_output=True, text=True,
                        timeout=WAIT).stdout
            assert "groupcast_relay_datagrams_received_total 1\n" in m, m
            assert "groupcast_relay_datagrams_sent_total 1\n" in m, m
            svc.check_watchdog()
            svc.write("edge.conf", "0.0.0.0/0: 127.0.0.1/5002\n")
            svc.reload()
            assert relayed(lab, ns, 5002), "READY=1 after SIGHUP came before the new config"
            out, err = svc.stop()
            resolved = json.loads(out.splitlines()[-1])["engine_resolved"]
            assert resolved == "kernel" or (engine == "auto" and not kernel), (resolved, err)
        finally:
            svc.close()


def test_relay_short_watchdog(build):
    """An idle relay ticks once a second (no -t or -d), but never less often
    than half its watchdog's half interval: WatchdogSec=600ms is kept too."""
    with Lab() as lab:
        ns = lab.add_ns("svc")
        svc = Service(lab, ns, build, "groupcast-relay@.service", "edge", env={"RELAY_OPTS": "--engine mmsg"},
                      files={"edge.conf": "0.0.0.0/0: 127.0.0.1/5001\n"}, wd_usec=600000)
        try:
            svc.ready()
            svc.check_watchdog()
            svc.stop()
        finally:
            svc.close()


def test_lmsd_unit(build):
    with Lab() as lab:
        ns = lab.add_ns("svc")
        svc = Service(lab, ns, build, "lmsd.service",
                      env={"LMSD_OPTS": "--config {dir}/lmsd.conf --metrics [::1]:9465"},
                      files={"lmsd.conf": "# no static replier\n"})
        try:
            svc.ready()
            assert "groupcast_lmsd_routes 0\n" in scrape(lab, ns, "[::1]:9465")
            svc.check_watchdog()
            svc.reload()
            svc.stop()
        finally:
            svc.close()


def test_engine_unit_socket_activation(build):
    with Lab() as lab:
        ns = lab.add_ns("svc")
        d = tempfile.mkdtemp(prefix=f"{lab.prefix}-")
        # what systemd does for groupcast-engine.socket: bind, listen, pass
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        path = os.path.join(d, "engine.sock")
        ls.bind(path)
        os.chmod(path, 0o600)
        ls.listen(128)
        svc = Service(lab, ns, build, "groupcast-engine.service", pass_fd=ls.fileno(),
                      env={"ENGINE_OPTS": "--metrics 9466"})
        ls.close()  # the engine holds it now (systemd keeps its own copy)
        try:
            svc.ready()
            # a ring attached through the passed socket sends: the client
            # (root) is served, and trusts the socket's owner (the binder, root)
            rs = lab.run(ns, [build / "tools" / "groupcast", "ring-send", "--connect", path,
                              "--dest", "127.0.0.1:9", "--count", "100"], check=False,
                         capture_output=True, text=True, timeout=WAIT)
            assert rs.returncode == 0 and '"sent":100' in rs.stdout, rs.stdout + rs.stderr
            assert "groupcast_engine_datagrams_sent_total 100\n" in scrape(lab, ns, "127.0.0.1:9466")
            svc.check_watchdog()
            out, err = svc.stop()
            assert "event=listening path=" in err and "socket=passed_by_systemd" in err, err
            assert '"rings":' in out, out
            assert os.path.exists(path), "the engine removed systemd's socket file"
        finally:
            svc.close()
            shutil.rmtree(d, ignore_errors=True)
