"""Shared by the bench drivers (bench/README.md), one concept per module:

    run.py      the lab, `groupcast blast` runs verified by sinks, points with
                retries, pacing, CPU accounting, the bench's BPF programs
    analyse.py  medians over reps, ratios, verification of delivery, G1
                curves and the G2 method (pure; tests/e2e/test_bench_analyse.py)
    profile.py  F5: perf samples charged to categories of kernel symbols
    report.py   results.md tables, CSV, JSON, command.txt, machine facts,
                portable paths
    plot.py     matplotlib figures
    papers.py   the papers' numbers put beside ours

The names below are the ones the drivers used before the split
(`gcbench.blast`, `gcbench.make_lab`, ...): they stay importable from here.
"""
from .report import machine_facts, portable  # noqa: F401
from .run import (PORT_BASE, ROOT, Lab, Result, blast, engines_available, make_lab,  # noqa: F401
                  tool)
