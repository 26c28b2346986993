"""groupcast relay --metrics: the Prometheus exposition over HTTP.

The relay runs in the lab's namespace s (test_relay.py's Net), receivers in
r1 and r2, the producer in p.  Scrapes run inside s with Python's urllib,
on the relay's loopback; nothing leaves the lab's namespaces.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from test_relay import Net

# scrape.py in the relay's namespace: one HTTP request; prints
# {"status", "ctype", "allow", "body", "seconds"}; retries refused or reset
# connections until --deadline (the relay may be at its connection limit).
SCRAPE = r"""
import json, socket, sys, time, urllib.error, urllib.request
url, method, deadline = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
t0 = time.monotonic()
while True:
    try:
        req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=3) as r:
            out = dict(status=r.status, ctype=r.headers.get("Content-Type"), allow=None, body=r.read().decode())
        break
    except urllib.error.HTTPError as e:
        out = dict(status=e.code, ctype=e.headers.get("Content-Type"), allow=e.headers.get("Allow"),
                   body=e.read().decode())
        break
    except (OSError, urllib.error.URLError) as e:
        if time.monotonic() > deadline:
            out = dict(status=0, ctype=None, allow=None, body=repr(e))
            break
        time.sleep(0.1)
out["seconds"] = time.monotonic() - t0
print(json.dumps(out))
"""

# hold.py: N idle TCP connections from each of the given loopback source
# addresses (they send nothing), held until stdin closes.
HOLD = r"""
import socket, sys
port, per, srcs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
held = []
for src in srcs:
    for _ in range(per):
        s = socket.socket()
        s.bind((src, 0))
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            held.append(s)
        except OSError:
            s.close()
print(len(held), flush=True)
sys.stdin.read()
"""

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse(text):
    """{(name, labels): value} of an exposition; labels as the text between braces.
    Every sample's name has a HELP and a TYPE line before it (promtool does not
    check that the TYPE line names the family the samples use)."""
    out, typed, helped = {}, set(), set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            assert line.split()[2] not in typed, f"family written twice: {line!r}"
            typed.add(line.split()[2])
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        assert m.group(1) in typed and m.group(1) in helped, f"no TYPE or HELP before {line!r}"
        out[(m.group(1), (m.group(2) or "")[1:-1])] = float(m.group(3))
    return out


def promtool(text):
    """`promtool check metrics` on text; skipped only without promtool outside CI."""
    tool = shutil.which("promtool")
    if not tool:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing (Debian package prometheus: scripts/install-deps.sh)")
        pytest.skip("promtool not installed (Debian package prometheus)")
    p = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


# The relay's Grafana dashboard: every expression in it must name metrics the
# relay has (checked on a real scrape) and be PromQL that a real Prometheus
# evaluates (checked against the server below).
DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "groupcast-relay.json"
METRIC = re.compile(r"\bgroupcast_relay_[a-z0-9_]+")


def dashboard_exprs():
    """Every PromQL expression of the dashboard: the panels' targets and the
    variables' queries (Grafana's label_values(METRIC, LABEL) as METRIC)."""
    d = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    exprs += [re.sub(r"^label_values\((.*), *\w+\)$", r"\1", v["definition"])
              for v in d["templating"]["list"] if v["type"] == "query"]
    assert len(exprs) >= 10 and all(METRIC.search(e) for e in exprs), exprs
    return exprs


def promql(expr):
    """What Grafana sends for expr: its variables substituted ($instance: All)."""
    return expr.replace("$__rate_interval", "5s").replace("$instance", ".*")


def check_dashboard_names(m):
    """Each metric a dashboard expression names is in the scrape m (parse()),
    and each label it groups by (but instance, Prometheus's) is on its samples."""
    for e in dashboard_exprs():
        for name in METRIC.findall(e):
            samples = [labels for (n, labels) in m if n == name]
            assert samples, f"dashboard: {name} is not in the relay's metrics ({e})"
            keys = {k for labels in samples for k in re.findall(r'(\w+)="', labels)}
            for group in re.findall(r"by \(([^)]*)\)", e):
                for label in (x.strip() for x in group.split(",")):
                    assert label == "instance" or label in keys, f"dashboard: {name} has no label {label} ({e})"


@pytest.fixture(scope="module")
def net(lab, build):
    lab.set_sysctl("net.core.netdev_max_backlog", 20000)
    return Net(lab, build)


def scrape(net, port, path="/metrics", method="GET", deadline=10):
    p = net.lab.run(net.relay_ns, [sys.executable, "-c", SCRAPE, f"http://127.0.0.1:{port}{path}", method,
                                   str(deadline)], capture_output=True, text=True, timeout=deadline + 20)
    return json.loads(p.stdout)


def listeners(net):
    """The TCP sockets listening in the relay's namespace, as 'addr:port'."""
    p = net.lab.run(net.relay_ns, ["ss", "-Htln"], capture_output=True, text=True, timeout=10)
    return [line.split()[3] for line in p.stdout.splitlines() if line.strip()]


def test_counters_equal_what_the_receivers_saw(net):
    """A known stream through the relay to three receivers: the scraped input
    and output counters are what the producer sent and the receivers got, and
    every counter of the JSON has the same value in the metrics."""
    rx1, rx2 = net.rx(net.r1, [5000, 5001]), net.rx(net.r2, [5000])
    proc, sock = net.relay(["-p", 2300, "--metrics", 9464,
                            f"{net.r1.v4}/5000", f"{net.r1.v4}/5001", f"{net.r2.v4}/5000"])
    assert listeners(net) == ["127.0.0.1:9464"]
    count, size = 300, 200
    net.tx(f"{net.relay_p.v4}:2300", count, rate=3000, size=size)
    g1, g2 = net.collect(rx1), net.collect(rx2)
    got = len(g1[5000]) + len(g1[5001]) + len(g2[5000])
    r = scrape(net, 9464)
    js = net.query(sock)
    net.stop(proc)
    assert r["status"] == 200 and r["ctype"] == "text/plain; version=0.0.4; charset=utf-8", r
    m = parse(r["body"])
    P = "groupcast_relay_"
    assert m[(P + "datagrams_received_total", "")] == count
    assert m[(P + "received_bytes_total", "")] == count * size
    assert got == 3 * count
    assert m[(P + "datagrams_sent_total", "")] == got
    assert m[(P + "sent_bytes_total", "")] == got * size
    lib = sum(v for (n, _), v in m.items() if n == P + "socket_datagrams_sent_total")
    assert lib == got
    assert m[(P + "drops_total", 'reason="oversize"')] == 0
    assert m[(P + "metrics_requests_total", 'code="200"')] == 1   # this scrape
    assert m[(P + "receivers", "")] == 3
    info = [k for k in m if k[0] == P + "engine_info"]
    assert len(info) == 1 and f'engine="{js["engine_resolved"]}"' in info[0][1] and m[info[0]] == 1
    # the JSON, read after the scrape, has the same counters (it walks the same table)
    for key in ("in", "in_octets", "out", "out_octets", "errors", "oversize", "group_sends", "skipped"):
        assert key in js
    assert js["in"] == count and js["out"] == got and js["metrics_scrapes"] == 1
    promtool(r["body"])


def test_broadcast_mode_subscribers_and_handshake_failures(net):
    """--rtp: a static and a joined subscriber, a JOIN refused for its
    address; the gauge and the failure reasons match the JSON; promtool passes."""
    ctl = f"10.{net.lab.octet}.1.1:2402"
    proc, sock = net.relay(["--rtp", "-p", 2400, "--metrics", "127.0.0.1:9465", f"{net.r1.v4}/5100"])
    assert net.join(net.r2.ns, f"10.{net.lab.octet}.2.1:2402", [5101])[5101]["reply"].startswith("OK JOIN")
    assert net.ctl(net.r1.ns, ctl, "JOIN 0", pad=True) == "ERR refused: port 0"
    r = scrape(net, 9465)
    js = net.query(sock)
    net.stop(proc)
    assert r["status"] == 200
    m = parse(r["body"])
    P = "groupcast_relay_"
    assert m[(P + "subscribers", "")] == 2 == js["subscriber_count"]
    assert m[(P + "control_failures_total", 'reason="bad_address"')] == 1 == js["ctl_bad_addr"]
    assert m[(P + "control_requests_total", 'type="join"')] == js["ctl_join"] >= 2
    assert m[(P + "handshake_cookies_sent_total", "")] == js["ctl_cookies"] >= 1
    assert m[(P + "info", 'mode="broadcast"')] == 1
    assert {k[1] for k in m if k[0] == P + "socket_last_errno"} == {'socket="rtp/ipv4"', 'socket="rtp/ipv6"',
                                                                     'socket="rtcp/ipv4"', 'socket="rtcp/ipv6"'}
    promtool(r["body"])
    check_dashboard_names(m)  # broadcast mode has every metric the dashboard shows


def test_not_found_and_method_not_allowed(net):
    proc, _ = net.relay(["-p", 2310, "--metrics", ":9466", f"{net.r1.v4}/5200"])
    try:
        assert scrape(net, 9466, "/")["status"] == 404
        assert scrape(net, 9466, "/metrics/x")["status"] == 404
        r = scrape(net, 9466, method="POST")
        assert r["status"] == 405 and r["allow"] == "GET, HEAD"
        m = parse(scrape(net, 9466)["body"])
    finally:
        final, _ = net.stop(proc)
    assert m[("groupcast_relay_metrics_requests_total", 'code="404"')] == 2
    assert m[("groupcast_relay_metrics_requests_total", 'code="405"')] == 1
    assert final["metrics_not_found"] == 2 and final["metrics_bad_method"] == 1


def test_idle_connections_beyond_the_limit_do_not_stop_forwarding_or_scrapes(net):
    """Slowloris: 24 connections that send nothing, from 6 loopback addresses
    (more than the relay's 16 connections, 4 per address).  Forwarding goes
    on meanwhile, and a scrape succeeds within the relay's connection timeout
    (5 s) plus a margin."""
    rx = net.rx(net.r1, [5300])
    proc, _ = net.relay(["-p", 2320, "--metrics", 9467, f"{net.r1.v4}/5300"])
    hold = net.lab.popen(net.relay_ns, [sys.executable, "-c", HOLD, "9467", "4",
                                        *[f"127.0.0.{i}" for i in range(2, 8)]],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        held = int(hold.stdout.readline())
        assert held >= 16, held          # the kernel accepted them: the relay's slots are full
        t0 = time.monotonic()
        net.tx(f"{net.relay_p.v4}:2320", 500, rate=2000)
        r = scrape(net, 9467, deadline=12)
        took = time.monotonic() - t0
    finally:
        hold.stdin.close()
        hold.wait(timeout=10)
    got = net.collect(rx)
    final, _ = net.stop(proc)
    assert len(got[5300]) == 500 and final["in"] == 500
    assert r["status"] == 200, r
    assert took < 5 + 4, took
    assert parse(r["body"])[("groupcast_relay_datagrams_received_total", "")] == 500


def test_metrics_are_off_by_default_and_bad_addresses_are_refused(net):
    proc, _ = net.relay(["-p", 2330, f"{net.r1.v4}/5400"])
    try:
        assert listeners(net) == []
    finally:
        net.stop(proc)
    for arg, what in [("0", "bad port '0'"), ("70000", "bad port '70000'"), ("foo:80", "'foo' is not"),
                      ("[::1", "expected [IPv6]:PORT"), ("1.2.3.4:", "bad port ''")]:
        p = net.lab.run(net.relay_ns, [net.bin, "relay", "--metrics", arg, "10.9.9.9"], check=False,
                        capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and f"--metrics '{arg}'" in p.stderr and what in p.stderr, (arg, p.stderr)


def test_ipv6_loopback(net):
    proc, _ = net.relay(["-p", 2340, "--metrics", "[::1]:9468", f"{net.r1.v4}/5500"])
    try:
        assert listeners(net) == ["[::1]:9468"]
        p = net.lab.run(net.relay_ns, [sys.executable, "-c", SCRAPE.replace("127.0.0.1", "[::1]"),
                                       "http://[::1]:9468/metrics", "GET", "5"], capture_output=True, text=True,
                        timeout=30)
        assert json.loads(p.stdout)["status"] == 200
    finally:
        net.stop(proc)


# query.py in the relay's namespace: GET a Prometheus HTTP API URL, print its JSON.
QUERY = r"""
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    print(r.read().decode())
"""


def test_a_prometheus_server_scrapes_the_relay(net, tmp_path):
    """A real Prometheus (Debian's prometheus) in the relay's namespace scrapes
    it every second while a known stream goes through; PromQL through the
    HTTP API gives the count the receivers saw."""
    server = shutil.which("prometheus")
    if not server:
        if os.environ.get("CI"):
            pytest.fail("prometheus is missing (Debian package prometheus: scripts/install-deps.sh)")
        pytest.skip("prometheus not installed (Debian package prometheus)")
    conf = tmp_path / "prometheus.yml"
    conf.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: relay\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:9469']\n")
    rx1, rx2 = net.rx(net.r1, [5600, 5601]), net.rx(net.r2, [5600])
    relay, _ = net.relay(["-p", 2350, "--metrics", 9469, f"{net.r1.v4}/5600", f"{net.r1.v4}/5601",
                          f"{net.r2.v4}/5600"])
    prom = net.lab.popen(net.relay_ns, [server, f"--config.file={conf}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                        "--web.listen-address=127.0.0.1:9090", "--log.level=warn"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    api = "http://127.0.0.1:9090/api/v1/query?query="

    def query(q):
        p = net.lab.run(net.relay_ns, [sys.executable, "-c", QUERY, api + urllib.parse.quote(q)],
                        check=False, capture_output=True, text=True, timeout=20)
        if p.returncode != 0:
            return None
        res = json.loads(p.stdout)["data"]["result"]
        return float(res[0]["value"][1]) if res else None

    try:
        deadline = time.monotonic() + 60
        while query('up{job="relay"}') != 1:         # Prometheus is up and has scraped the relay
            assert prom.poll() is None, prom.stderr.read()
            assert time.monotonic() < deadline, "Prometheus never scraped the relay"
            time.sleep(0.5)
        count = 400
        net.tx(f"{net.relay_p.v4}:2350", count, rate=2000, size=120)
        g1, g2 = net.collect(rx1), net.collect(rx2)
        got = len(g1[5600]) + len(g1[5601]) + len(g2[5600])
        assert got == 3 * count
        deadline = time.monotonic() + 30
        while True:
            sent = query('groupcast_relay_datagrams_sent_total{job="relay"}')
            received = query('groupcast_relay_datagrams_received_total{job="relay"}')
            lib = query('sum(groupcast_relay_socket_datagrams_sent_total{job="relay"})')
            if sent == got and received == count and lib == got:
                break
            assert time.monotonic() < deadline, (sent, received, lib, got)
            time.sleep(0.5)
        assert query('groupcast_relay_drops_total{job="relay",reason="oversize"}') == 0
        assert query('count(groupcast_relay_engine_info{job="relay"} == 1)') == 1
        assert query('groupcast_relay_metrics_requests_total{job="relay",code="200"}') >= 2
        # the dashboard's expressions: PromQL Prometheus evaluates; those on
        # metrics replicate mode has give a series
        names = {n for n, _ in parse(scrape(net, 9469)["body"])}
        for e in dashboard_exprs():
            p = net.lab.run(net.relay_ns, [sys.executable, "-c", QUERY, api + urllib.parse.quote(promql(e))],
                            check=False, capture_output=True, text=True, timeout=20)
            assert p.returncode == 0, (e, p.stderr)
            res = json.loads(p.stdout)
            assert res["status"] == "success", (e, res)
            if set(METRIC.findall(e)) <= names:
                assert res["data"]["result"], f"dashboard: no series for {promql(e)}"
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        net.stop(relay)
