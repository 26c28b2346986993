"""The daemons' log lines (tools/log.c): a flood cannot flood the journal, and
the journal's <N> prefixes appear exactly when stderr is the journal.

Lab: the relay runs in namespace s; r1 sends the floods, from forged sources
in r1's own subnet (raw socket), so every datagram stays inside the lab.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BURST, WINDOW_S = 10, 10          # LOG_LIMIT_BURST, LOG_LIMIT_WINDOW_S (tools/log.h)
# level=LEVEL event=NAME, then key=value pairs, values bare or quoted (log.h)
LINE = re.compile(r'^(<[3-7]>)?level=(err|warning|notice|info|debug) event=[a-z_]+'
                  r'( [a-z_]+=("([^"\\]|\\.)*"|[^ "=\\]+))*$')

# count datagrams from forged sources 10.X.1.(10..209), ports 20000.., each
# with payload msg (PORT replaced by the forged port); raw socket, no sleep.
FLOOD = r"""
import socket, struct, sys, time
sys.path.insert(0, sys.argv[1])
from relaytool import checksum
dst, dport, count, net, msg = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
d = socket.inet_aton(dst)
for i in range(count):
    sport = 20000 + i
    src = socket.inet_aton(f"{net}.{10 + i % 200}")
    payload = msg.replace("PORT", str(sport)).encode()
    ulen = 8 + len(payload)
    c = checksum(src + d + struct.pack("!BBH", 0, 17, ulen) + struct.pack("!HHHH", sport, dport, ulen, 0) + payload)
    udp = struct.pack("!HHHH", sport, dport, ulen, c or 0xFFFF)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0, 64, 17, 0, src, d)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    s.sendto(ip + udp + payload, (dst, 0))
    if i % 50 == 49:
        time.sleep(0.002)   # the relay's socket buffer, not its log, is not what is tested
"""


def flood(lab, ns, to, port, count, net, msg):
    lab.run(ns, [sys.executable, "-c", FLOOD, HERE, to, port, count, net, msg], timeout=60)


def query(bin_, sock):
    p = subprocess.run([bin_, "relay", "--query", sock], capture_output=True, text=True, timeout=10)
    return json.loads(p.stdout) if p.returncode == 0 else None


def start_relay(lab, bin_, ns, args, err_path, env=None):
    sock = f"/tmp/{lab.prefix}-logs-{os.getpid()}-{time.monotonic_ns()}.sock"
    ef = open(err_path, "w")
    proc = lab.popen(ns, [bin_, "relay", "--stats-socket", sock, "--status", 0, "--json", *args],
                     stdout=subprocess.PIPE, stderr=ef, text=True, env=env)
    ef.close()
    deadline = time.monotonic() + 10
    while not (os.path.exists(sock) and query(bin_, sock)):
        assert proc.poll() is None, f"relay exited {proc.returncode}: {Path(err_path).read_text()}"
        assert time.monotonic() < deadline, "relay did not come up"
        time.sleep(0.05)
    return proc, sock


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


def events(text, name):
    return [ln for ln in text.splitlines() if f" event={name} " in ln + " "]


def test_floods_are_rate_limited_with_the_right_suppressed_counts(lab, build, tmp_path):
    """1000 JOINs with forged cookies and 600 malformed requests from 200
    forged sources, and 500 forged first JOINs (padded, no cookie), at the
    default level: at most BURST lines per kind, then, when the window ends
    (before the relay stops), one summary line whose suppressed= is what the
    relay counted less the lines it wrote; nothing for the first JOINs (a
    cookie per datagram is debug); every line in the key=value shape."""
    bin_ = str(build / "tools" / "groupcast")
    s_ns, link = lab.topology.sender, lab.topology.links[0]
    relay_ip, net = link.a.v4, link.a.v4.rsplit(".", 1)[0]
    err = tmp_path / "relay.err"
    proc, sock = start_relay(lab, bin_, s_ns, ["--rtp", "-p", 5300, "--any-producer", "--control-rate", 1000000,
                                               "--metrics", "127.0.0.1:9464"], err)
    t0 = time.monotonic()
    flood(lab, link.b.ns, relay_ip, 5302, 1000, net, "JOIN PORT cookie=0123456789abcdef")
    flood(lab, link.b.ns, relay_ip, 5302, 300, net, "HELLO PORT")                # unknown command
    flood(lab, link.b.ns, relay_ip, 5302, 300, net, "JOIN PORT rtcp=banana")     # bad argument
    flood(lab, link.b.ns, relay_ip, 5302, 500, net, "JOIN PORT" + " " * 60)       # first JOINs
    assert time.monotonic() - t0 < WINDOW_S - 2, "the floods must fit in one window"
    # the summaries come with the relay's tick once the window ends, not at exit
    deadline = t0 + WINDOW_S + 8
    while time.monotonic() < deadline and len(re.findall("suppressed=", err.read_text())) < 2:
        time.sleep(0.2)
    before_stop = err.read_text()
    metrics = lab.run(s_ns, [sys.executable, "-c", "import urllib.request, sys; sys.stdout.write("
                             "urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=10).read().decode())"],
                      capture_output=True, text=True, timeout=30).stdout
    st = stop(proc)
    text = err.read_text()

    bad_cookie = st["ctl_bad_cookie"]
    malformed = st["ctl_unknown"] + st["ctl_bad"]
    # what the relay read (a busy machine may drop some in the socket buffer)
    assert bad_cookie > 5 * BURST and malformed > 5 * BURST and st["ctl_cookies"] > 5 * BURST, dict(st)
    for name, n in (("bad_cookie", bad_cookie), ("control_malformed", malformed)):
        lines = events(before_stop, name)
        written = [ln for ln in lines if " src=" in ln]
        summary = [ln for ln in lines if "suppressed=" in ln]
        assert len(written) == BURST, (name, lines)
        assert summary == [f"level=warning event={name} suppressed={n - BURST} window_s={WINDOW_S}"], lines
    assert not events(text, "cookie_sent") and st["ctl_cookies"] > 0
    # the alerting rules (contrib/prometheus) name families this relay serves
    rules = (REPO / "contrib" / "prometheus" / "groupcast-relay.rules.yml").read_text()
    served = set(re.findall(r"^# TYPE (groupcast_relay_\w+)", metrics, re.M))
    for name in set(re.findall(r"groupcast_relay_\w+", rules)):
        assert name in served, (name, sorted(served))
    lines = text.splitlines()
    assert all(LINE.match(ln) for ln in lines), [ln for ln in lines if not LINE.match(ln)]
    assert len(lines) <= 2 * (BURST + 1) + 3, text       # started, stopping: nothing else


def fstat_id(path):
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


def test_journal_prefixes_only_when_stderr_is_the_journal(lab, build, tmp_path):
    """JOURNAL_STREAM naming stderr's device:inode: every line of the relay,
    the engine daemon and lmsd starts with its sd-daemon <N>; naming another
    file, malformed, or unset: no prefix."""
    bin_ = str(build / "tools" / "groupcast")
    s_ns, link = lab.topology.sender, lab.topology.links[0]
    for case in ("match", "other", "junk", "unset"):
        err = tmp_path / f"relay-{case}.err"
        err.write_text("")
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        if case == "match":
            env["JOURNAL_STREAM"] = fstat_id(err)
        elif case == "other":
            env["JOURNAL_STREAM"] = fstat_id(tmp_path)
        elif case == "junk":
            env["JOURNAL_STREAM"] = "journal"
        # a bad config line on SIGHUP: an err line too
        conf = tmp_path / f"{case}.conf"
        conf.write_text(f"{link.b.v4}: {link.b.v4}/9\n")     # no datagram is sent: nothing goes there
        proc, _ = start_relay(lab, bin_, s_ns, ["-p", 5400, "-c", conf], err, env=env)
        conf.write_text(f"{link.b.v4}: nowhere-here.invalid/9\n")
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "event=reload_failed" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        stop(proc)
        lines = err.read_text().splitlines()
        assert any("event=reload_failed" in ln for ln in lines), lines
        assert all(LINE.match(ln) for ln in lines), lines
        want = {"started": 5, "reload_failed": 3, "stopping": 5}
        for ln in lines:
            name = re.search(r"event=(\w+)", ln).group(1)
            if case == "match":
                assert ln.startswith(f"<{want.get(name, '?')}>level="), ln
            else:
                assert ln.startswith("level="), ln

        pre = "<5>" if case == "match" else ""
        path = f"/tmp/{lab.prefix}-logs-engine.sock"
        lines = daemon_lines(lab, s_ns, [bin_, "engine", "--listen", path], tmp_path / f"engine-{case}.err",
                             env, case == "match", "event=listening")
        assert lines == [f"{pre}level=notice event=listening path={path} socket=bound",
                         f"{pre}level=notice event=stopping signal=TERM"], lines
        lines = daemon_lines(lab, s_ns, [build / "tools" / "lmsd", "-t", 60000], tmp_path / f"lmsd-{case}.err",
                             env, case == "match", "event=started")
        assert [ln.split(" event=")[0] + " " + ln.split(" ")[1] for ln in lines] == \
            [f"{pre}level=notice event=started", f"{pre}level=notice event=stopping"], lines
        assert all(LINE.match(ln) for ln in lines), lines


def daemon_lines(lab, ns, argv, err, env, journal, ready):
    """Run a daemon in ns with stderr to the file err (JOURNAL_STREAM naming
    it when journal) until its line `ready`, then SIGTERM; its stderr lines."""
    err.write_text("")
    env = dict(env)
    if journal:
        env["JOURNAL_STREAM"] = fstat_id(err)
    with open(err, "w") as ef:
        proc = lab.popen(ns, argv, stdout=subprocess.DEVNULL, stderr=ef, env=env)
    deadline = time.monotonic() + 10
    while ready not in err.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, err.read_text()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    return err.read_text().splitlines()


def test_migration_page_examples(build, tmp_path):
    """docs/samplicator-migration.md: every `conf` block, written to the file
    its header names, and every `groupcast relay` command of a `sh` block run
    on those files with --check (nothing bound, nothing sent) exits 0; the
    output the page shows after a --check command is what the relay prints."""
    bin_ = str(build / "tools" / "groupcast")
    page = (REPO / "docs" / "samplicator-migration.md").read_text()
    blocks = re.findall(r"^```([a-z]*)(?: (\S+))?\n(.*?)^```\n", page, re.M | re.S)
    confs = {name: body for kind, name, body in blocks if kind == "conf"}
    assert len(confs) >= 2, blocks
    for name, body in confs.items():
        (tmp_path / name).write_text(body)
    ran = 0
    for i, (kind, _, body) in enumerate(blocks):
        for line in body.splitlines():
            if kind != "sh" or not line.startswith("groupcast relay "):
                continue
            argv = line.split()[2:]
            argv = [str(tmp_path / Path(a).name) if a.startswith("/etc/") and Path(a).name in confs else a
                    for a in argv]
            if "--check" not in argv:
                argv.insert(0, "--check")
            p = subprocess.run([bin_, "relay", *argv], capture_output=True, text=True, timeout=30)
            assert p.returncode == 0 and p.stdout.startswith("groupcast relay: configuration ok:"), \
                (line, p.stdout, p.stderr)
            shown = blocks[i + 1] if i + 1 < len(blocks) else None
            if "--check" in line.split() and shown and shown[0] == "":
                assert p.stdout == shown[2], (line, p.stdout, shown[2])
            ran += 1
    assert ran >= 3
    # a broken line is refused, naming the file and line (the page's promise)
    bad = tmp_path / "bad.conf"
    bad.write_text("192.0.2.0/24 198.51.100.5/2055\n")
    p = subprocess.run([bin_, "relay", "--check", "-c", bad], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and f"{bad}:1: missing ':'" in p.stderr, p.stderr


def test_man_page_alerts_are_the_rules_file():
    """groupcast-relay(1)'s PromQL under "What to alert on" is the rules file's
    (which ctest "alerts" runs through promtool test rules)."""
    rules = (REPO / "contrib" / "prometheus" / "groupcast-relay.rules.yml").read_text()
    exprs = [e.strip() for e in re.findall(r"expr: >?\n?\s*(.+)", rules)]
    man = (REPO / "docs" / "man" / "man1" / "groupcast-relay.1").read_text()
    man = man.replace("\\-", "-").replace("\\(dq", '"')
    assert len(exprs) == 10
    for e in exprs:
        assert e in man, e
