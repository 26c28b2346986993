#!/usr/bin/env python3
"""L2, LTP/LMS half: reliable multicast on the issue's target tree, measured
with LTP's own counters.  NORM and PGM on the same tree (and per-link TC
counters, which those two need because they keep no statistics) are not
here yet: see bench/results/ltp/results.md.

    sudo python3 bench/ltp.py --build build [--mb 10] [--rate 1000000] [--loss 0.01,0.05] [--quick]

Tree (3 levels, 4 receivers), smcroute routes (S,G), lmsd on every router
with static repliers: h1 for r2 and, through r2, for r1; h3 for r3.

        s
        |
        r1
       /  \\
     r2    r3
    /  \\   /  \\
   h1  h2 h3  h4

Independent loss (bpf/loss.bpf.c) at the ingress of every receiver's link,
so data, repairs and requests to a replier are all lost alike.  S sends
--mb MB of random data at --rate bytes/s; every receiver's copy is compared
byte for byte.  Per loss rate it reports, per receiver and pooled:
  recovery latency   gap detected -> repair arrived (mean, p50, p90, p99; CDF plot)
  exposure           repairs received that were not needed, per own loss
  duplicates         datagrams received twice
  implosion          requests the source saw per loss event of the top replier
                     (the only losses the source must answer) and in all
  repair bytes       repairs the source sent, per data byte
  goodput            delivered bytes / (end - first datagram)
  per link           repair bytes (multicast repairs and dmcasts) and requests
                     crossing each link, each direction, from TC egress
                     counters (bench/l2_count.bpf.c) on both ends of every veth
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gcbench  # noqa: E402
from gcbench import plot, report  # noqa: E402
from gcbench.analyse import percentile as pct  # noqa: E402
from gcbench.run import compile_bpf  # noqa: E402
from netlab import Lab  # noqa: E402

G, PORT = "239.192.12.9", 7790
TREE = {"s": ["r1"], "r1": ["r2", "r3"], "r2": ["h1", "h2"], "r3": ["h3", "h4"]}
REPLIERS = {"r1": ("r2", "h1"), "r2": ("h1", "h1"), "r3": ("h3", "h3")}
HOSTS = ["h1", "h2", "h3", "h4"]
WIRE = 1400 + 20 + 28  # LTP payload + header + UDP/IPv4
KINDS = ["data", "repair", "dmcast", "request", "heartbeat", "other"]  # as in l2_count.bpf.c


class LinkCounters:
    """bench/l2_count.bpf.c at the egress of both ends of every link of t:
    per link and direction, packets and bytes by kind."""

    def __init__(self, lab, t, build):
        self.lab, self.t = lab, t
        self.obj = compile_bpf(build, os.path.join(HERE, "l2_count.bpf.c"),
                               os.path.join(lab.workdir(), "l2_count.o"), ["-Werror"])

    def attach(self):
        """(Re)attach everywhere: fresh maps, counters at zero."""
        self.maps = {}
        for c, link in self.t.uplinks.items():
            name = f"{self.t.parent[c]}-{c}"
            for end, direction in ((link.a, "down"), (link.b, "up")):
                run = lambda *a: self.lab.run(end.ns, list(a), capture_output=True, text=True)
                run("tc", "qdisc", "replace", "dev", end.ifname, "clsact")
                run("tc", "filter", "replace", "dev", end.ifname, "egress", "prio", "1", "handle", "1",
                    "bpf", "da", "obj", self.obj, "sec", "tc")
                shown = json.loads(run("tc", "-j", "filter", "show", "dev", end.ifname, "egress",
                                       "prio", "1").stdout)
                prog = next(f["options"]["prog"]["id"] for f in shown if "options" in f)
                info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog)],
                                                 check=True, capture_output=True, text=True).stdout)
                self.maps[(name, direction)] = info["map_ids"][0]

    def read(self):
        """{link: {direction: {kind: [packets, bytes]}}}"""
        out = {}
        for (name, direction), mid in self.maps.items():
            dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", str(mid)],
                                             check=True, capture_output=True, text=True).stdout)
            per = {}
            for e in dump:
                k = int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little")
                tot = [0, 0]
                for cpu in e["values"]:
                    raw = bytes(int(b, 16) for b in cpu["value"])
                    tot[0] += int.from_bytes(raw[:8], "little")
                    tot[1] += int.from_bytes(raw[8:16], "little")
                per[KINDS[k]] = tot
            out.setdefault(name, {})[direction] = per
        return out


def run(lab, t, build, loss, size, rate, session, counters):
    tool = gcbench.tool(build)
    wd = lab.workdir()
    data = os.urandom(size)
    (wd / "in").write_bytes(data)
    for h in HOSTS:
        lab.add_loss(t.ns[h], t.uplinks[h].b.ifname, loss, os.path.join(build, "bpf", "loss.bpf.o"))
    secs = size / rate
    counters.attach()
    rx = {}
    for h in HOSTS:
        argv = [tool, "ltp", "recv", "--group", G, "--port", PORT, "--source", t.addr("s"),
                "--if", t.uplinks[h].b.ifname, "--out", wd / f"{h}.out", "--session", session,
                "--timeout-ms", int(secs * 1000 + 30000), "--samples", wd / f"{h}.us"]
        if h in ("h1", "h3"):
            argv += ["--replier", "--linger-ms", 3000]
        p = lab.popen(t.ns[h], argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert json.loads(p.stdout.readline()) == {"ready": True}
        rx[h] = p
    tx = lab.popen(t.ns["s"], [tool, "ltp", "send", "--group", G, "--port", PORT,
                               "--if", t.uplinks["r1"].a.ifname, "--file", wd / "in",
                               "--session", session, "--rate", rate, "--linger-ms", 3000],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res = {}
    for n, p in [*rx.items(), ("s", tx)]:
        out, err = p.communicate(timeout=secs + 60)
        res[n] = json.loads(out.splitlines()[-1])
        if p.returncode:
            raise RuntimeError(f"{n}: {err}")
    res["links"] = counters.read()
    for h in HOSTS:
        res[h]["exact"] = (wd / f"{h}.out").read_bytes() == data
        res[h]["samples"] = [int(x) for x in (wd / f"{h}.us").read_text().split()]
    return res


def summarize(loss, res, size):
    s = res["s"]["stats"]
    rows = {}
    pooled = []
    for h in HOSTS:
        st, us = res[h]["stats"], res[h]["samples"]
        pooled += us
        rows[h] = {
            "exact": res[h]["exact"], "own_losses": st["gaps_detected"], "lost": st["lost"],
            "recovery_ms_mean": statistics.mean(us) / 1000 if us else None,
            "recovery_ms_p50": pct(us, .5) / 1000 if us else None,
            "recovery_ms_p99": pct(us, .99) / 1000 if us else None,
            "unneeded_repairs": st["repairs_unneeded"],
            "exposure": st["repairs_unneeded"] / max(1, st["gaps_detected"]),
            "duplicates": st["duplicates"], "requests_sent": st["requests_sent"],
            "repairs_sent": st["repairs_sent"],
            "goodput_Bps": st["bytes_delivered"] / res[h]["seconds"] if res[h]["seconds"] else None,
        }
    top = res["h1"]["stats"]["gaps_detected"]
    links = res["links"]
    data_bytes = links["s-r1"]["down"].get("data", [0, 0])[1]
    per_link = {name: {d: {"repair_bytes": v.get("repair", [0, 0])[1] + v.get("dmcast", [0, 0])[1],
                           "requests": v.get("request", [0, 0])[0]}
                       for d, v in dirs.items()} for name, dirs in links.items()}
    return {
        "links": links, "per_link": per_link,
        "source_link_repair_bytes_per_data_byte":
            per_link["s-r1"]["down"]["repair_bytes"] / max(1, data_bytes),
        "source_link_requests_up": per_link["s-r1"]["up"]["requests"],
        "loss": loss, "bytes": size, "receivers": rows,
        "recovery_ms_mean": statistics.mean(pooled) / 1000 if pooled else None,
        "recovery_ms_p50": pct(pooled, .5) / 1000 if pooled else None,
        "recovery_ms_p90": pct(pooled, .9) / 1000 if pooled else None,
        "recovery_ms_p99": pct(pooled, .99) / 1000 if pooled else None,
        "source_requests": s["requests_received"],
        "source_requests_per_top_loss": s["requests_received"] / max(1, top),
        "source_repair_bytes_per_data_byte": s["repairs_sent"] * WIRE / size,
        "replier_repairs": {h: res[h]["stats"]["repairs_sent"] for h in ("h1", "h3")},
        "samples": pooled,
    }


def figure(results, path):
    plt = plot.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        v = sorted(x / 1000 for x in r["samples"])
        if v:
            ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post",
                    label=f"LTP/LMS {r['loss'] * 100:g} % loss (n={len(v)})")
    ax.set_xscale("log")
    ax.set_xlabel("recovery latency (ms)")
    ax.set_ylabel("fraction of recoveries")
    ax.set_title("L2: LTP/LMS recovery latency, 3-level tree, 4 receivers")
    ax.grid(True, which="both", alpha=.3)
    ax.legend()
    plot.save(fig, path, dpi=120)


def link_table(results):
    order = ["s-r1", "r1-r2", "r1-r3", "r2-h1", "r2-h2", "r3-h3", "r3-h4"]
    lines = ["| loss | link | repair bytes down (mcast + dmcast) | repair bytes up (dmcast) | requests down | requests up |",
             "|---|---|---|---|---|---|"]
    for r in results:
        for name in order:
            p = r["per_link"][name]
            lines.append(f"| {r['loss'] * 100:g} % | {name} | {p['down']['repair_bytes']} | {p['up']['repair_bytes']} | "
                         f"{p['down']['requests']} | {p['up']['requests']} |")
    return "\n".join(lines)


def table(results):
    lines = ["| loss | recovery mean / p50 / p99 (ms) | exposure (unneeded per own loss, per receiver) | "
             "duplicates | source requests (per top-replier loss) | source repair bytes / data byte | "
             "goodput (kB/s, min) | byte-exact |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        rc = r["receivers"]
        lines.append(
            f"| {r['loss'] * 100:g} % | {r['recovery_ms_mean']:.2f} / {r['recovery_ms_p50']:.2f} / "
            f"{r['recovery_ms_p99']:.2f} | "
            + ", ".join(f"{h} {rc[h]['exposure']:.2f}" for h in HOSTS)
            + f" | {sum(rc[h]['duplicates'] for h in HOSTS)} | {r['source_requests']} "
            f"({r['source_requests_per_top_loss']:.2f}) | {r['source_repair_bytes_per_data_byte']:.4f} | "
            f"{min(rc[h]['goodput_Bps'] for h in HOSTS) / 1000:.0f} | "
            f"{all(rc[h]['exact'] for h in HOSTS)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(gcbench.ROOT, "build"))
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--rate", type=int, default=1000000)
    ap.add_argument("--loss", default="0.01,0.05")
    ap.add_argument("--quick", action="store_true", help="1 MB per loss rate (smoke run)")
    ap.add_argument("--out", default=os.path.join(gcbench.ROOT, "bench", "results", "ltp"))
    a = ap.parse_args()
    size = int((1 if a.quick else a.mb) * 1_000_000)
    os.makedirs(a.out, exist_ok=True)
    results = []
    with Lab() as lab:
        t = lab.tree(TREE)
        S = t.addr("s")
        lab.smcroute(t, S, G)
        lmsd = [lab.lmsd(t.ns[r], os.path.join(a.build, "tools", "lmsd"),
                         [(S, G, t.iface(r, via).ifname, t.addr(host))])
                for r, (via, host) in REPLIERS.items()]
        for d in lmsd:
            d.wait(lambda st: st.get("routes") and not st["routes"][0]["fallback"])
        counters = LinkCounters(lab, t, a.build)
        for i, loss in enumerate(float(x) for x in a.loss.split(",")):
            res = run(lab, t, a.build, loss, size, a.rate, 9000 + i, counters)
            results.append(summarize(loss, res, size))
            print(json.dumps({k: v for k, v in results[-1].items() if k != "samples"}), flush=True)
    report.write_json(os.path.join(a.out, "results.json"),
                      [{k: v for k, v in r.items() if k != "samples"} for r in results])
    with open(os.path.join(a.out, "samples.json"), "w") as f:
        json.dump({str(r["loss"]): r["samples"] for r in results}, f)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table(results) + "\n\nPer link (TC egress counters, bench/l2_count.bpf.c):\n\n"
                + link_table(results) + "\n")
    with open(os.path.join(a.out, "command.txt"), "w") as f:
        f.write("sudo python3 bench/ltp.py " + " ".join(sys.argv[1:]) + "\n")
    figure(results, os.path.join(a.out, "l2_recovery_cdf.png"))
    report.portable(a.out)
    print(table(results))
    print(link_table(results))


if __name__ == "__main__":
    main()
