#!/usr/bin/env python3
"""Render contrib/grafana/groupcast-relay.json's panels from a real run.

Grafana is not needed: this runs `groupcast relay --rtp --metrics` in a lab
of network namespaces (lab/netlab.py, the e2e tests' lab: a producer, two
subscriber namespaces), a real Prometheus server (Debian's prometheus)
scraping it every second, and a scripted minute of traffic: subscribers
join, a source goes over --max-per-source, bad JOINs, datagrams from a
stranger and broken RTP from the producer, a subscriber leaves.  Then it asks
Prometheus for each panel's own expressions (query_range, Grafana's
$__rate_interval as 4 scrape intervals, $instance as All) and draws them
with matplotlib in the dashboard's grid, titled as in the JSON.

    sudo python3 contrib/grafana/render.py [--build build] [--out contrib/grafana/groupcast-relay.png]

Needs root (namespaces), a release build, prometheus and python3-matplotlib.
Everything runs inside the lab's namespaces (10.x addresses, loopback).
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "tests" / "e2e")]

from netlab import Lab  # noqa: E402
from test_relay import Net  # noqa: E402

DASHBOARD = REPO / "contrib" / "grafana" / "groupcast-relay.json"
PORT, METRICS, PROM = 5000, 9470, 9090
RATE = "4s"  # $__rate_interval: 4 scrape intervals

# query.py in the relay's namespace: GET a Prometheus HTTP API URL, print its JSON.
QUERY = r"""
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    print(r.read().decode())
"""


def promql(expr):
    return expr.replace("$__rate_interval", RATE).replace("$instance", ".*")


def api(net, path, **params):
    url = f"http://127.0.0.1:{PROM}/api/v1/{path}?" + urllib.parse.urlencode(params)
    p = net.lab.run(net.relay_ns, [sys.executable, "-c", QUERY, url], capture_output=True, text=True,
                    timeout=30, check=False)
    if p.returncode != 0:
        return None
    out = json.loads(p.stdout)
    if out.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {out}")
    return out["data"]


def legend(fmt, metric):
    out = fmt or "{{__name__}}"
    for k, v in metric.items():
        out = out.replace("{{" + k + "}}", v)
    return out.replace("{{instance}}", "").strip() or "value"


def scenario(net, log):
    """A scripted minute of traffic; returns when it is over."""
    octet = net.lab.octet
    ctl1, ctl2 = f"10.{octet}.1.1:{PORT + 2}", f"10.{octet}.2.1:{PORT + 2}"
    data = f"{net.relay_p.v4}:{PORT}"

    def at(t0, s):
        time.sleep(max(0.0, t0 + s - time.monotonic()))

    t0 = time.monotonic()
    producer = threading.Thread(target=net.tx, args=(data, 32500), kwargs=dict(
        rate=500, size=1000, extra=["--rtp", "--seq", "0"]))
    producer.start()
    at(t0, 5)
    log("r1 joins 4 ports")
    net.join(net.r1.ns, ctl1, [7000, 7001, 7002, 7003])
    at(t0, 10)
    log("r2 joins 3 ports")
    j2 = net.join(net.r2.ns, ctl2, [7000, 7001, 7002])
    at(t0, 20)
    log("r1 asks for 6 more ports: over --max-per-source 4")
    net.join(net.r1.ns, ctl1, list(range(7004, 7010)))
    at(t0, 28)
    log("bad JOINs: a bad address, bad cookies")
    for i in range(20):
        net.ctl(net.r1.ns, ctl1, "JOIN 0", pad=True, wait=0.05)
        if i % 2:
            net.ctl(net.r2.ns, ctl2, f"JOIN {7100 + i} cookie={i:016x}", wait=0.05)
    at(t0, 36)
    log("a stranger sends to the data port")
    net.tx(f"10.{octet}.1.1:{PORT}", 2000, rate=250, ns=net.r1.ns)
    at(t0, 46)
    log("the producer sends datagrams that are not RTP")
    net.tx(data, 1000, rate=150, size=100)
    at(t0, 55)
    log("r2 leaves")
    for port, j in j2.items():
        net.ctl(net.r2.ns, ctl2, f"LEAVE {port} cookie={j['cookie']}", wait=0.2)
    producer.join()
    at(t0, 70)


def draw(dash, series, table, out, span):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = dash["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(18, rows * 0.6))
    gs = fig.add_gridspec(rows, 24, hspace=0, wspace=1.5, top=0.95, bottom=0.02)
    fig.suptitle(f"{dash['title']} - rendered from the dashboard's queries on a real run "
                 f"(Prometheus, {span:.0f} s; not a Grafana screenshot)", fontsize=13)
    for p in panels:
        g = p["gridPos"]
        # a grid unit above for the title, two below for the axis labels
        ax = fig.add_subplot(gs[g["y"] + 1:g["y"] + g["h"] - 2, g["x"]:g["x"] + g["w"]])
        ax.set_title(p["title"], fontsize=11, loc="left")
        if p["type"] == "table":
            ax.axis("off")
            rows_, cols = table[p["id"]]
            if rows_:
                t = ax.table(cellText=rows_, colLabels=cols, loc="upper left", cellLoc="left")
                t.auto_set_font_size(False)
                t.set_fontsize(9)
                t.auto_set_column_width(list(range(len(cols))))
            continue
        unit = p["fieldConfig"]["defaults"].get("unit", "")
        for name, xs, ys in series[p["id"]]:
            ax.plot(xs, ys, label=name, linewidth=1.2)
        ax.set_xlim(0, span)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if series[p["id"]]:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.savefig(out, dpi=72, bbox_inches="tight")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--out", default=str(REPO / "contrib" / "grafana" / "groupcast-relay.png"))
    a = ap.parse_args()
    server = shutil.which("prometheus")
    if not server:
        sys.exit("render.py: prometheus is not installed (Debian package prometheus)")
    dash = json.loads(DASHBOARD.read_text())
    tmp = Path(tempfile.mkdtemp(prefix="gc-render-"))

    def log(msg):
        print(f"render.py: {msg}", file=sys.stderr, flush=True)

    try:
        with Lab() as lab:
            lab.star(2)
            lab.set_sysctl("net.core.netdev_max_backlog", 20000)
            net = Net(lab, Path(a.build))
            relay, _ = net.relay(["--rtp", "-p", PORT, "--max-per-source", 4, "--expire", 0,
                                  "--metrics", METRICS])
            conf = tmp / "prometheus.yml"
            conf.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                            "scrape_configs:\n  - job_name: relay\n    static_configs:\n"
                            f"      - targets: ['127.0.0.1:{METRICS}']\n")
            prom = lab.popen(net.relay_ns, [server, f"--config.file={conf}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                                            f"--web.listen-address=127.0.0.1:{PROM}", "--log.level=warn"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 60
                while not (api(net, "query", query="up") or {}).get("result"):
                    if time.monotonic() > deadline:
                        sys.exit("render.py: Prometheus never scraped the relay")
                    time.sleep(0.5)
                start = time.time()
                scenario(net, log)
                end = time.time()
                series, table = {}, {}
                for p in dash["panels"]:
                    if p["type"] == "table":
                        t = p["targets"][0]
                        res = api(net, "query", query=promql(t["expr"]), time=end)["result"]
                        cols = sorted({k for r in res for k in r["metric"]} - {"instance", "job"})
                        table[p["id"]] = ([[r["metric"].get(c, "") for c in cols] for r in res], cols)
                        continue
                    series[p["id"]] = []
                    for t in p["targets"]:
                        res = api(net, "query_range", query=promql(t["expr"]), start=start, end=end, step=1)
                        for r in res["result"]:
                            xs = [float(v[0]) - start for v in r["values"]]
                            ys = [float(v[1]) for v in r["values"]]
                            series[p["id"]].append((legend(t.get("legendFormat"), r["metric"]), xs, ys))
            finally:
                prom.terminate()
                prom.wait(timeout=30)
                net.stop(relay)
        draw(dash, series, table, a.out, end - start)
        log(f"wrote {a.out}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
