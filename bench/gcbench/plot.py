"""Figures (matplotlib, Agg): the shared setup, then group.py's figures."""
import os

from . import papers
from .analyse import g1_curve
from .profile import F5_ORDER

# One colour per engine in every figure.
ENGINE_COLORS = {e: c for e, c in zip(["loop", "mmsg", "uring", "uring_zc", "kernel"],
                                      ["black", "tab:blue", "tab:green", "tab:purple", "tab:red"])}


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (raises ImportError
    without matplotlib: callers decide whether that is fatal)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, path, dpi=110):
    """tight_layout, write to path, close the figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


# --- group.py's figures ----------------------------------------------------------------------------

def group_plots(outdir, g1, g2, f5, g3, engines, cfg):
    try:
        plt = pyplot()
    except ImportError:
        return ["matplotlib is not installed: no plots"]
    made = []
    colors = ENGINE_COLORS
    if g1:
        for metric, fname, label in (("cpu_ns", "g1_cpu.png", "sender CPU per group send (µs)"),
                                     ("wall_ns", "g1_wall.png", "wall time per group send (µs)")):
            fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharex=True)
            for i, size in enumerate(cfg["g1_sizes"][:2]):
                for j, replace in enumerate((False, True)):
                    ax = axes[i][j]
                    for e in engines:
                        cur = g1_curve(g1, size, replace, e, metric)
                        if not cur:
                            continue
                        xs, ys = zip(*cur)
                        ax.plot(xs, [y / 1e3 for y in ys], "o-", ms=3, color=colors.get(e), label=e)
                        if metric == "cpu_ns":
                            pts = sorted((p for p in g1 if p["size"] == size and p["replace"] == replace
                                          and p["status"] == "ok"), key=lambda p: p["n"])
                            ax.fill_between([p["n"] for p in pts],
                                            [p["medians"][e]["cpu_min"] / 1e3 for p in pts],
                                            [p["medians"][e]["cpu_max"] / 1e3 for p in pts],
                                            color=colors.get(e), alpha=0.12, lw=0)
                    lost = [p["n"] for p in g1 if p["size"] == size and p["replace"] == replace
                            and p["status"] != "ok"]
                    for n in lost:
                        ax.axvline(n, color="red", ls=":", lw=1)
                        ax.text(n, ax.get_ylim()[1] if ax.has_data() else 1, "LOST", color="red",
                                fontsize=7, rotation=90, va="top")
                    ax.set_xscale("log")
                    ax.set_yscale("log")
                    ax.grid(True, which="both", alpha=0.3)
                    ax.set_title(f"{size} B, {'group replaced every send' if replace else 'fixed group'}",
                                 fontsize=10)
                    if i == 1:
                        ax.set_xlabel("group size N")
                    if j == 0:
                        ax.set_ylabel(label)
                    ax.legend(fontsize=8)
            fig.suptitle("G1: one group send against group size (cf. Karsten et al. 2005, Fig. 3/4); "
                         "median of reps, band = min..max", fontsize=10)
            save(fig, os.path.join(outdir, fname))
            made.append(fname)
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
        for i, size in enumerate(cfg["g1_sizes"][:2]):
            ax = axes[i]
            for e in engines:
                if e == "loop":
                    continue
                for replace, ls in ((False, "-"), (True, "--")):
                    loop = dict(g1_curve(g1, size, replace, "loop"))
                    cur = [(n, loop[n] / y) for n, y in g1_curve(g1, size, replace, e) if n in loop]
                    if cur:
                        xs, ys = zip(*cur)
                        ax.plot(xs, ys, ls, marker="o", ms=3, color=colors.get(e),
                                label=f"{e}{' (replaced)' if replace else ''}")
            pn, pr, _ = papers.RATIO_100 if size == 100 else papers.RATIO_1000
            ax.plot([pn], [pr], "k*", ms=12, label=f"paper {pr:.2f}× at N={pn}")
            ax.axhline(1, color="gray", lw=0.8)
            ax.set_xscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{size} B: speed-up vs loop (loop CPU / engine CPU)", fontsize=10)
            ax.set_xlabel("group size N")
            ax.legend(fontsize=7)
        save(fig, os.path.join(outdir, "g1_speedup.png"))
        made.append("g1_speedup.png")
    if f5 and any(r.get("ns_per_member") for r in f5["runs"]):
        runs = [r for r in f5["runs"] if r.get("ns_per_member")]
        fig, axes = plt.subplots(1, 2, figsize=(11, 5))
        labels = [f"{r['engine']}\n{r['size']} B" for r in runs]
        cmap = plt.get_cmap("tab10")
        for k, (ax, key, ylabel) in enumerate(((axes[0], "ns_per_member", "sender CPU per member (ns)"),
                                                (axes[1], "percent", "share of sender CPU (%)"))):
            bottom = [0.0] * len(runs)
            for ci, c in enumerate(F5_ORDER):
                vals = [r[key][c] for r in runs]
                ax.bar(labels, vals, bottom=bottom, color=cmap(ci), label=c if k == 0 else None)
                bottom = [b + v for b, v in zip(bottom, vals)]
            ax.set_ylabel(ylabel)
        axes[0].legend(fontsize=7, loc="upper right")
        fig.suptitle("F5: where a group send's time goes, N=1000 (perf cpu-clock samples, "
                     "cf. Karsten et al. 2005, Fig. 5)", fontsize=10)
        save(fig, os.path.join(outdir, "f5_breakdown.png"))
        made.append("f5_breakdown.png")
    if g3:
        ns = sorted({p["n"] for p in g3})
        pas = sorted({p["prepend"] for p in g3})
        fig, axes = plt.subplots(len(ns), len(pas), figsize=(3.2 * len(pas), 3.3 * len(ns)), squeeze=False,
                                 sharex=True)
        for i, n in enumerate(ns):
            for j, s in enumerate(pas):
                ax = axes[i][j]
                pts = sorted((p for p in g3 if p["n"] == n and p["prepend"] == s), key=lambda p: p["size"])
                for e in engines:
                    xy = [(p["size"], p["medians"][e]["cpu_ns"] / n) for p in pts if e in p["medians"]]
                    if xy:
                        xs, ys = zip(*xy)
                        ax.plot(xs, ys, "o-", ms=3, color=colors.get(e), label=e)
                for p in pts:
                    if p["status"] != "ok":
                        ax.axvline(p["size"], color="red", ls=":", lw=1)
                ax.set_title(f"N={n}, prepend=append={s} B", fontsize=9)
                ax.grid(True, alpha=0.3)
                ax.set_ylim(bottom=0)
                if i == len(ns) - 1:
                    ax.set_xlabel("shared payload (B)")
                if j == 0:
                    ax.set_ylabel("sender CPU per member (ns)")
        axes[0][0].legend(fontsize=7)
        fig.suptitle("G3: gc_sendgroup() cost against payload and per-recipient data", fontsize=10)
        save(fig, os.path.join(outdir, "g3_sendgroup.png"))
        made.append("g3_sendgroup.png")
    return made

