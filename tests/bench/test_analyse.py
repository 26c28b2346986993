"""The bench's pure analysis (bench/gcbench/analyse.py and the sample
classification of profile.py) on rows made up here: no lab, no root.  Run by
ctest (bench_analyse) and so by `make unit` / `make test`, or alone:
python3 -m pytest -q tests/bench"""
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from gcbench import analyse, papers, profile  # noqa: E402


def row(engine, rep, cpu, wall=None, busy=None, failed=0, warmup=False, **kw):
    return {"engine": engine, "rep": rep, "cpu_ns_per_send": cpu, "wall_ns_per_send": wall or 2 * cpu,
            "machine_busy_ns_per_send": busy or 3 * cpu, "failed": failed, "warmup": warmup, **kw}


# --- medians over reps -----------------------------------------------------------------------------

def test_spread_odd_even_empty():
    assert analyse.spread([5, 1, 3]) == (3, 1, 5)
    assert analyse.spread(iter([4, 1, 3, 2])) == (2.5, 1, 4)     # even count: mean of the middle two
    assert analyse.spread([]) == (None, None, None)
    assert analyse.median_or_none([]) is None
    assert analyse.median_or_none(x for x in (7,)) == 7


def test_engine_medians_leave_out_warmups():
    rows = []
    for rep, (lo, ke) in enumerate([(300, 100), (310, 90), (290, 120)]):
        # a warm-up run of each engine first, slow (the engine switch), then the measured one
        rows += [row("loop", rep, 9999, warmup=True), row("loop", rep, lo),
                 row("kernel", rep, 9999, warmup=True, failed=5), row("kernel", rep, ke, failed=1)]
    m = analyse.engine_medians(rows, ["loop", "kernel"])
    assert m["loop"]["cpu_ns"] == 300 and (m["loop"]["cpu_min"], m["loop"]["cpu_max"]) == (290, 310)
    assert m["kernel"]["cpu_ns"] == 100 and (m["kernel"]["cpu_min"], m["kernel"]["cpu_max"]) == (90, 120)
    assert m["kernel"]["wall_ns"] == 200 and (m["kernel"]["wall_min"], m["kernel"]["wall_max"]) == (180, 240)
    assert m["kernel"]["busy_ns"] == 300
    assert m["loop"]["reps"] == m["kernel"]["reps"] == 3
    assert m["kernel"]["failed"] == 3          # the measured rows' failures; warm-ups are verified elsewhere


# --- ratios ----------------------------------------------------------------------------------------

def test_ratio():
    assert analyse.ratio(300, 100) == 3
    assert analyse.ratio(None, 100) is None and analyse.ratio(300, None) is None
    assert analyse.ratio(300, 0) is None


def test_paired_ratios_same_pass_only():
    udp = {0: {"rep": 0, "v": 100, "lost": False}, 1: {"rep": 1, "v": 200, "lost": True},
           2: {"rep": 2, "v": 50, "lost": False}}
    runs = [{"rep": 0, "v": 30}, {"rep": 1, "v": 60}, {"rep": 2, "v": 20}, {"rep": 3, "v": 10}]
    got = analyse.paired_ratios(runs, udp, lambda x: x["rep"], lambda x: x["v"])
    # rep 1's baseline was lost and rep 3 has none: neither gives a ratio
    assert got == [0.3, 0.4]
    assert analyse.spread(got) == (pytest.approx(0.35), 0.3, 0.4)


def test_percentile():
    v = list(range(100, 0, -1))         # 1..100, unsorted
    assert analyse.percentile(v, 0.5) == 51
    assert analyse.percentile(v, 0.99) == 100
    assert analyse.percentile(v, 1.0) == 100
    assert analyse.percentile([], 0.5) is None


# --- verification of delivery ----------------------------------------------------------------------

def sink(due, received, bad=0, dups=0):
    return {"due": due, "received": received, "bad": bad, "dups": dups}


def test_lost_counts_missing_and_extra():
    assert analyse.lost([sink(100, 100), sink(50, 50)]) == 0
    assert analyse.lost([sink(100, 97), sink(50, 52)]) == 5


@pytest.mark.parametrize("sinks, rows, ok", [
    ([sink(10, 10), sink(10, 10)], [row("loop", 0, 1)], True),
    ([sink(10, 9), sink(10, 10)], [row("loop", 0, 1)], False),                    # one missing
    ([sink(10, 10, bad=1)], [row("loop", 0, 1)], False),                          # corrupt
    ([sink(10, 10, dups=1)], [row("loop", 0, 1)], False),                         # duplicated
    ([sink(10, 10)], [row("loop", 0, 1, failed=2)], False),                       # a send failed
    ([sink(10, 10)], [row("loop", 0, 1, stats_ok=False)], False),                 # counters disagree
    ([sink(10, 10)], [row("loop", 0, 1, warmup=True, failed=1)], False),          # warm-ups count too
])
def test_verdict(sinks, rows, ok):
    lost = analyse.lost(sinks)
    got, failed, stats_ok = analyse.verdict(rows, sinks, lost)
    assert got is ok
    assert failed == sum(r["failed"] for r in rows)
    assert stats_ok == all(r.get("stats_ok", True) for r in rows)


# --- G1 curves and the G2 method -------------------------------------------------------------------

def point(n, medians, status="ok", size=100, replace=False, experiment="G1"):
    return {"experiment": experiment, "n": n, "size": size, "replace": replace, "status": status,
            "medians": {e: {"cpu_ns": v, "wall_ns": 2 * v} for e, v in medians.items()}}


def linear_points(per_member):
    """G1 points whose engines cost per_member[e] ns per member, exactly."""
    return [point(n, {e: c * n for e, c in per_member.items()}) for n in (10, 100, 1000, 10000)]


def test_g1_curve_picks_verified_points_of_the_configuration():
    pts = [point(10, {"loop": 30}), point(100, {"loop": 300}), point(1000, {}, status="LOST"),
           point(100, {"loop": 999}, size=1000), point(100, {"loop": 999}, replace=True),
           point(1000, {"loop": 999}, experiment="G1-shuffle")]
    assert analyse.g1_curve(pts, 100, False, "loop") == [(10, 30), (100, 300)]
    assert analyse.g1_curve(pts, 100, False, "loop", "wall_ns") == [(10, 60), (100, 600)]
    assert analyse.g1_curve(pts, 100, False, "kernel") == []


def test_interp_between_below_and_beyond():
    cur = [(10, 100.0), (100, 400.0), (1000, 1300.0)]
    assert analyse.interp(cur, 100) == (400.0, False)
    assert analyse.interp(cur, 55) == (250.0, False)              # halfway between 10 and 100
    assert analyse.interp(cur, 5) == (50.0, False)                # below: proportional to the first point
    assert analyse.interp(cur, 2000) == (2300.0, True)            # beyond: the last per-member slope (1 ns)
    assert analyse.interp([], 5) == (None, False)


def test_inverse_is_monotone_and_extrapolates():
    cur = [(10, 100.0), (100, 400.0), (1000, 1300.0)]
    assert analyse.inverse(cur, 250.0) == (55.0, False)
    assert analyse.inverse(cur, 50.0) == (5.0, False)
    assert analyse.inverse(cur, 2300.0) == (2000.0, True)
    # noise: a dip at 100 must not give two answers; the running maximum flattens it
    noisy = [(10, 500.0), (100, 300.0), (1000, 1400.0)]
    n, ext = analyse.inverse(noisy, 950.0)
    assert n == pytest.approx(550.0) and not ext
    # a flat end: any budget above it fits any group
    assert analyse.inverse([(10, 100.0), (100, 100.0)], 200.0) == (math.inf, True)


def test_g2_rows_follow_the_papers_method():
    loop_pm, kernel_pm = 3000.0, 1000.0                   # ns per member
    pts = linear_points({"loop": loop_pm, "kernel": kernel_pm})
    by_n = analyse.g2_rows(pts, ["loop", "kernel"], 100, False, "cpu_ns", "n")
    assert [r["paper_N"] for r in by_n] == [t[0] for t in papers.TABLE1]
    for r, (pn, *_) in zip(by_n, papers.TABLE1):
        send = pn * loop_pm / 1e6
        other = papers.FRAME_MS - send
        k = r["engines"]["kernel"]
        assert r["N"] == pn and r["send_ms"] == pytest.approx(send)
        assert r["other_ms"] == pytest.approx(other)
        assert k["send_ms"] == pytest.approx(pn * kernel_pm / 1e6)
        assert k["factor"] == pytest.approx(papers.FRAME_MS / (other + pn * kernel_pm / 1e6))
        assert k["N_paper"] == pytest.approx(pn * k["factor"])
        # fixed other: the engine may spend what loop spent, so 3x the members
        assert k["N_fixed_other"] == pytest.approx(3 * pn)
        assert not k["extrapolated"]

    by_send = analyse.g2_rows(pts, ["loop", "kernel"], 100, False, "cpu_ns", "send")
    for r, (pn, psend, *_) in zip(by_send, papers.TABLE1):
        assert r["N"] == pytest.approx(psend * 1e6 / loop_pm)   # where our loop takes the paper's send time
        assert r["send_ms"] == pytest.approx(psend)
        assert r["engines"]["kernel"]["send_ms"] == pytest.approx(psend / 3)

    assert analyse.g2_rows(pts[:1], ["loop", "kernel"], 100, False, "cpu_ns", "n") == []   # one point: no curve


def test_g2_tables():
    pts = linear_points({"loop": 3000.0, "mmsg": 2000.0})
    g2 = analyse.g2_tables(pts, ["loop", "mmsg"])
    assert [t["name"] for t in g2["tables"]] == ["cpu_ns-n", "cpu_ns-send", "wall_ns-send"]
    assert all(len(t["rows"]) == len(papers.TABLE1) for t in g2["tables"])


# --- F5: perf samples charged to categories --------------------------------------------------------

PERF = """\
groupcast 123 10.000100: 250000 cpu-clock:
\tffffffff81000001 _raw_spin_lock+0x10 ([kernel.kallsyms])
\tffffffff81000002 x2apic_send_IPI+0x10 ([kernel.kallsyms])
\tffffffff81000003 udp_sendmsg+0x20 ([kernel.kallsyms])
\t7f0000000001 loop_send+0x5 (/usr/lib/libgroupcast.so)

groupcast 123 10.000200: 250000 cpu-clock:
\t7f0000000002 loop_send+0x9 (/usr/lib/libgroupcast.so)

groupcast 123 10.000300: 250000 cpu-clock:
\tffffffff81000004 hrtimer_nanosleep+0x1 ([kernel.kallsyms])
\tffffffff81000005 do_syscall_64+0x1 ([kernel.kallsyms])

groupcast 123 10.000400: 250000 cpu-clock:
\tffffffff81000006 memcpy_orig+0x1 ([kernel.kallsyms])
\tffffffff81000007 udp_sendmsg+0x20 ([kernel.kallsyms])

groupcast 123 10.000500: 250000 cpu-clock:
\tffffffff81000008 do_exit+0x1 ([kernel.kallsyms])
"""


def test_perf_samples_to_categories():
    samples = profile.parse_perf_script(PERF)
    assert [t for t, _ in samples] == [10.0001, 10.0002, 10.0003, 10.0004, 10.0005]
    assert samples[0][1][0] == ("_raw_spin_lock", True) and samples[0][1][-1] == ("loop_send", False)
    # a generic leaf (the spin lock) is charged to the first frame that names a category
    assert profile.classify(samples[0][1]) == profile.IPI
    assert profile.classify(samples[1][1]) == "user space"
    assert profile.classify(samples[3][1]) == "copy"
    assert profile.classify([]) == "other"
    w = profile.window_counts(samples)
    # the window runs from the first to the last sample under udp_sendmsg: the exit is outside,
    # the nanosleep is pacing
    assert w["samples_total"] == 5 and w["samples_outside_window"] == 1 and w["samples_pacing"] == 1
    assert w["samples_counted"] == 3
    assert {c: k for c, k in w["counts"].items() if k} == {profile.IPI: 1, "user space": 1, "copy": 1}
    assert set(w["counts"]) == set(profile.F5_ORDER)
