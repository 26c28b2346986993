"""Analysis of measured rows, with no lab and no root: medians over reps, ratios,
whether a run delivered everything, and the curves of G1 with the G2 method
(interpolation in group size and its inverse).  Pure functions:
tests/e2e/test_bench_analyse.py checks them."""
import bisect
import math
import statistics

from . import papers


def spread(values):
    """(median, min, max) of values, or (None, None, None) if there are none."""
    values = list(values)
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def median_or_none(values):
    return spread(values)[0]


def ratio(a, b):
    """a / b, or None if either is missing or b is 0 (a lost run has no ratio)."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def paired_ratios(runs, baselines, pair, value):
    """Rep-by-rep ratios value(run) / value(baseline), the baseline being
    baselines[pair(run)]: the baseline run of the same interleaved pass.  A run
    whose baseline is missing or lost (baseline["lost"] true) has no ratio."""
    out = []
    for x in runs:
        b = baselines.get(pair(x))
        if b and not b.get("lost"):
            out.append(value(x) / value(b))
    return out


def percentile(values, p):
    """The value at rank int(len * p) of the sorted values (no interpolation)."""
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))] if v else None


# --- interleaved blast rows ------------------------------------------------------------------------

def engine_medians(rows, engines):
    """Per engine, the medians (and min..max) of its blast rows over the reps,
    warm-up rows left out."""
    out = {}
    for e in engines:
        mine = [r for r in rows if r["engine"] == e and not r["warmup"]]
        vals = [r["cpu_ns_per_send"] for r in mine]
        walls = [r["wall_ns_per_send"] for r in mine]
        busy = [r["machine_busy_ns_per_send"] for r in mine]
        out[e] = {
            "cpu_ns": statistics.median(vals), "cpu_min": min(vals), "cpu_max": max(vals),
            "wall_ns": statistics.median(walls), "busy_ns": statistics.median(busy),
            "wall_min": min(walls), "wall_max": max(walls), "reps": len(vals),
            "failed": sum(r["failed"] for r in mine),
        }
    return out


# --- verification of delivery ---------------------------------------------------------------------

def lost(sinks):
    """Datagrams missing (or extra) over all sinks: each sink says what it
    received, the driver what was due to it."""
    return sum(abs(s["due"] - s["received"]) for s in sinks)


def sinks_ok(sinks, lost_count):
    """Everything due arrived, nothing corrupt, nothing twice."""
    return lost_count == 0 and all(s["bad"] == 0 and s["dups"] == 0 for s in sinks)


def verdict(rows, sinks, lost_count):
    """(ok, failed sends, library counters agree) of one blast run: ok only if
    the sinks got exactly what was due, no send failed and blast's own check
    of the library's counters held in every row."""
    failed = sum(r["failed"] for r in rows)
    stats_ok = all(r.get("stats_ok", True) for r in rows)
    return sinks_ok(sinks, lost_count) and failed == 0 and stats_ok, failed, stats_ok


# --- G1 curves and the G2 method ------------------------------------------------------------------

def g1_curve(points, size, replace, engine, metric="cpu_ns"):
    """[(n, median)] of the verified G1 points."""
    cur = []
    for p in points:
        if p["experiment"] == "G1" and p["size"] == size and p["replace"] == replace and p["status"] == "ok" \
                and engine in p["medians"]:
            cur.append((p["n"], p["medians"][engine][metric]))
    return sorted(cur)


def interp(curve, n):
    """Send time (ns) at group size n, linear between the measured sizes; above
    the largest, extended with the per-member slope of the last two points.
    Returns (ns, extrapolated?)."""
    xs = [x for x, _ in curve]
    if not curve:
        return None, False
    if n <= xs[0]:
        return curve[0][1] * n / xs[0], False
    if n > xs[-1]:
        (x0, y0), (x1, y1) = curve[-2], curve[-1]
        return y1 + (y1 - y0) / (x1 - x0) * (n - x1), True
    i = bisect.bisect_left(xs, n)
    if xs[i] == n:
        return curve[i][1], False
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0), False


def inverse(curve, budget_ns):
    """Largest real n with interp(curve, n) <= budget (the curve made monotone
    by a running maximum, so noise at small n cannot give two answers)."""
    mono, top = [], 0.0
    for x, y in curve:
        top = max(top, y)
        mono.append((x, top))
    if not mono:
        return None, False
    if budget_ns < mono[0][1]:
        return mono[0][0] * budget_ns / mono[0][1], False
    for (x0, y0), (x1, y1) in zip(mono, mono[1:]):
        if y0 <= budget_ns < y1:
            return x0 + (x1 - x0) * (budget_ns - y0) / (y1 - y0), False
    (x0, y0), (x1, y1) = mono[-2], mono[-1]
    slope = (y1 - y0) / (x1 - x0)
    if slope <= 0:
        return math.inf, True
    return x1 + (budget_ns - y1) / slope, True


def g2_rows(points, engines, size, replace, metric, rows_by):
    """The paper's Table 1 computed from our G1 curves.  rows_by 'n': the
    paper's group sizes; 'send': the N at which our loop send takes the
    paper's send time (same share of the frame as in the paper)."""
    loop = g1_curve(points, size, replace, "loop", metric)
    if len(loop) < 2:
        return []
    rows = []
    for pn, psend, *_ in papers.TABLE1:
        if rows_by == "n":
            n = pn
            send, ext = interp(loop, n)
        else:
            n, ext = inverse(loop, psend * 1e6)
            send = psend * 1e6
        send_ms = send / 1e6
        other = papers.FRAME_MS - send_ms
        row = {"paper_N": pn, "N": n, "send_ms": send_ms, "other_ms": other, "extrapolated": ext,
               "engines": {}}
        for e in engines:
            if e == "loop":
                continue
            cur = g1_curve(points, size, replace, e, metric)
            if len(cur) < 2:
                continue
            s2, ext2 = interp(cur, n)
            s2_ms = s2 / 1e6
            total = other + s2_ms
            factor = papers.FRAME_MS / total
            # the paper's N': every per-player cost scales (N' = N x factor)
            n_paper = n * factor
            # fixed other: the largest N' whose engine send fits what the frame leaves
            n_fixed, ext3 = inverse(cur, (papers.FRAME_MS - other) * 1e6) if other < papers.FRAME_MS else (0, False)
            row["engines"][e] = {"send_ms": s2_ms, "total_ms": total, "factor": factor,
                                 "N_paper": n_paper, "N_fixed_other": n_fixed,
                                 "extrapolated": ext or ext2 or ext3}
        rows.append(row)
    return rows


def g2_tables(g1, engines):
    """G2's three tables from the G1 points (100 B, fixed group): sender CPU
    at the paper's N and at the N where our loop takes the paper's send time,
    and the latter with wall time."""
    g2 = {"tables": []}
    for metric, mname in (("cpu_ns", "sender CPU"), ("wall_ns", "wall time")):
        for rows_by, what in (("n", "at the paper's group sizes"),
                              ("send", "at the group sizes where our loop send takes the paper's send time")):
            if metric == "wall_ns" and rows_by == "n":
                continue
            g2["tables"].append({
                "name": f"{metric}-{rows_by}", "metric": metric, "size": 100, "replace": False,
                "rows_by": rows_by,
                "title": f"Ours, 100 B, fixed group, {mname}, {what} (ms)",
                "rows": g2_rows(g1, engines, 100, False, metric, rows_by)})
    return g2
