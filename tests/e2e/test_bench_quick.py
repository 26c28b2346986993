"""bench/group.py --quick runs every experiment (G1, G2, F5, G3) end to end and
every datagram of every point arrives intact.  No assertion about speed: this
machine class is far too noisy for that, and the numbers are the benchmark's
business (bench/README.md)."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GROUP = REPO / "bench" / "group.py"


def test_group_quick(build, tmp_path):
    out = tmp_path / "group"
    p = subprocess.run([sys.executable, str(GROUP), "--quick", "--build", str(build), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"group.py --quick failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"

    raw = json.loads((out / "raw.json").read_text())
    assert raw["quick"] is True
    assert raw["lost_points"] == [] and raw["all_points_ok"], raw["lost_points"]
    engines = raw["engines"]
    assert "loop" in engines

    points = raw["points"]
    assert {p["experiment"] for p in points} >= {"G1", "G3", "F5"}
    for p in points:
        assert p["status"] == "ok", p["key"]
        final = p["attempts"][-1]
        # the sinks counted exactly what was due, nothing failed at the sender
        assert final["received"] == final["due"] > 0, p["key"]
        assert final["lost"] == 0 and final["failed"] == 0, p["key"]
        assert all(s["bad"] == 0 and s["dups"] == 0 for s in final["sinks"]), p["key"]
        # a median for every engine the point ran
        assert set(p["medians"]) == set(p["engines"]), p["key"]

    g1 = [p for p in points if p["experiment"] == "G1"]
    assert {p["size"] for p in g1} == {100, 1000}
    assert {p["replace"] for p in g1} == {False, True}
    assert all(set(p["engines"]) == set(engines) for p in g1)

    assert raw["g2"] and all(t["rows"] for t in raw["g2"]["tables"])
    assert raw["f5"]["runs"] and all(r["status"] == "ok" for r in raw["f5"]["runs"])
    assert all(r.get("percent") for r in raw["f5"]["runs"]), raw["f5"]["notes"]

    g3 = [p for p in points if p["experiment"] == "G3"]
    assert g3 and all(p["sendgroup"] for p in g3)

    md = (out / "results.md").read_text()
    for title in ("## G1", "## G2", "## F5", "## G3"):
        assert title in md
    cmd = (out / "command.txt").read_text()
    assert "commit:" in cmd and "machine:" in cmd and "--quick" in cmd
    for name in ("rows.csv", "medians.csv", "g2.csv", "f5.csv"):
        assert (out / name).stat().st_size > 0, name
