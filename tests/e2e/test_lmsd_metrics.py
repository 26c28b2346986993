"""lmsd --metrics: LMS-FWD's forwarding and drop counters per interface for
Prometheus.

test_lmsd.py's smallest lab: s above r1, hosts h1 and h2 below; smcroute
routes (S,G) on r1, lmsd runs there with h1 as the replier.  Scrapes run
inside r1 on its loopback.
"""
import json
import re
import subprocess
import sys
import time

from netlab import Lab
from test_lmsd import lmsd_bin  # noqa: F401 (fixture)
from test_lms import G, Receivers, send_request, tag
from test_relay_metrics import SCRAPE, parse, promtool

P = "groupcast_lmsd_"


def scrape(lab, ns, port):
    p = lab.run(ns, [sys.executable, "-c", SCRAPE, f"http://127.0.0.1:{port}/metrics", "GET", "10"],
                capture_output=True, text=True, timeout=30)
    r = json.loads(p.stdout)
    assert r["status"] == 200 and r["ctype"] == "text/plain; version=0.0.4; charset=utf-8", r
    return r["body"]


def test_requests_turned_and_dropped_are_counted_on_their_interface(lmsd_bin):  # noqa: F811
    """5 requests from h2 are turned to the replier h1 and 3 more with TTL 1
    are dropped: forwarded_packets_total{interface=<r1's link to h2>,
    action="request_turned"} moves by 5, dropped_packets_total{..., reason="ttl"}
    by 3, the other interfaces by nothing; promtool passes."""
    with Lab() as lab:
        t = lab.tree({"s": ["r1"], "r1": ["h1", "h2"]})
        S = t.addr("s")
        lab.smcroute(t, S, G)
        up, down1, down2 = (t.iface("r1", n).ifname for n in ("s", "h1", "h2"))
        d = lab.lmsd(t.ns["r1"], lmsd_bin, [(S, G, down1, t.addr("h1"))], args=["--metrics", "9490"])
        d.wait(lambda st: st.get("routes") and not st["routes"][0]["fallback"]
               and len(st["interfaces"]) == 3 and all(i["attached"] for i in st["interfaces"]))
        before = parse(scrape(lab, t.ns["r1"], 9490))
        rx = Receivers(lab, t, ["h1"])
        for _ in range(5):
            data = tag()
            send_request(lab, t, "h2", data)
            assert len(rx.wait(data, ["h1"])["h1"]) == 1
        for _ in range(3):
            send_request(lab, t, "h2", tag(), ttl=1)
        deadline = time.monotonic() + 10
        while True:
            text = scrape(lab, t.ns["r1"], 9490)
            m = parse(text)
            if m[(P + "dropped_packets_total", f'interface="{down2}",reason="ttl"')] >= 3:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
        # the state file is rewritten at least every second: wait for it to have them too
        js = d.wait(lambda st: st["stats"]["drop_ttl"] >= 3 and st["stats"]["req_turned"] >= 5, timeout=5)
        # the link to h2 goes away: its counters leave the metrics (its ifindex
        # may come back as another interface), and stay in the JSON's totals
        lab.ip(t.ns["r1"], "link", "del", down2)
        d.wait(lambda st: len(st["interfaces"]) == 2, timeout=5)
        deadline = time.monotonic() + 5
        while True:
            after = parse(scrape(lab, t.ns["r1"], 9490))
            labels = {re.search(r'interface="([^"]*)"', k[1]).group(1) for k in after
                      if k[0] == P + "dropped_packets_total"}
            if labels == {up, down1}:
                break
            assert time.monotonic() < deadline, f"the gone interface's counters stayed: {labels}"
            time.sleep(0.1)
        gone = d.state()
        d.stop()

    def moved(name, labels):
        return m[(P + name, labels)] - before.get((P + name, labels), 0)

    assert moved("forwarded_packets_total", f'interface="{down2}",action="request_turned"') == 5
    assert moved("dropped_packets_total", f'interface="{down2}",reason="ttl"') == 3
    for i in (up, down1, down2):
        for action in ("request_up", "request_down", "dmcast"):
            assert moved("forwarded_packets_total", f'interface="{i}",action="{action}"') == 0
    for i in (up, down1):
        assert moved("forwarded_packets_total", f'interface="{i}",action="request_turned"') == 0
        assert m[(P + "dropped_packets_total", f'interface="{i}",reason="ttl"')] == 0
    # every drop reason is there for every LMS interface, and the totals agree with the JSON
    drops = {k[1] for k in m if k[0] == P + "dropped_packets_total"}
    assert len(drops) == 3 * 17, sorted(drops)
    assert sum(v for k, v in m.items() if k[0] == P + "forwarded_packets_total"
               and 'action="request_turned"' in k[1]) == js["stats"]["req_turned"]
    assert {m[(P + "interface_attached", f'interface="{i}"')] for i in (up, down1, down2)} == {1}
    assert m[(P + "routes", "")] == 1 and m[(P + "interfaces", "")] == 3
    assert (P + "hier_reports_refused_total", 'reason="rate_limited"') in m
    assert gone["stats"]["req_turned"] == js["stats"]["req_turned"] >= 5
    assert gone["stats"]["drop_ttl"] == js["stats"]["drop_ttl"] >= 3
    promtool(text)


def test_bad_metrics_address_refused(lmsd_bin):  # noqa: F811
    for arg, what in [("0", "bad port '0'"), ("foo:80", "'foo' is not"), ("[::1", "expected [IPv6]:PORT")]:
        p = subprocess.run([lmsd_bin, "--metrics", arg], capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and f"--metrics '{arg}'" in p.stderr and what in p.stderr, (arg, p.stderr)
