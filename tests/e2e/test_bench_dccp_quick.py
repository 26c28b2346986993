"""bench/dccp.py --quick (P2 and P3 of the packet-ring paper, seed 001) runs
UDP, TCP and our DCCP (and, in P3, QUIC DATAGRAM through bench/quic_peer)
through the tbf lab, and every packet is accounted: each one the application
sent is logged once, each received one was sent, arrived once and was not one
the sender marked dead.  No assertion about delay or shares: those are the
benchmark's numbers, not a pass criterion."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "bench" / "dccp.py"


def check_run(row):
    st = row["tx_stats"]["check"]
    if st.get("sender_cut_at_s") is None:  # a blocked TCP sender may be stopped
        assert row["sent"] == st["count"] > 0, row
    assert 0 < row["sent"] <= st["count"], row
    assert 0 < row["received"] <= row["sent"] - row["dead"], row
    assert st["unknown_rx"] == 0 and st["dup_rx"] == 0 and st["dead_rx"] == 0, row
    assert row["tbf_sent"] > 0, row  # the traffic crossed the bucket


@pytest.fixture(scope="module")
def quick_run(build, tmp_path_factory):
    """One --quick run of the driver, shared by the tests below."""
    out = tmp_path_factory.mktemp("dccp")
    p = subprocess.run([sys.executable, str(DRIVER), "--quick", "--build", str(build), "--out", str(out)],
                       capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, f"dccp.py --quick failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return out, p.stdout


def test_dccp_bench_quick(quick_run):
    out, _ = quick_run
    raw = json.loads((out / "raw.json").read_text())
    assert raw["quick"] is True
    assert [r["proto"] for r in raw["p2"]] == ["udp", "tcp", "dccp"]
    for row in raw["p2"]:
        check_run(row)
        assert row["median_ms"] > 0, row
    # TCP never loses at the application level
    assert raw["p2"][1]["received"] == raw["p2"][1]["sent"]
    assert {r["stack"] for r in raw["p3"]} - {"quic"} == {"udp", "tcp", "dccp-ccid2", "dccp-ccid3"}
    for row in raw["p3"]:
        check_run(row)
        assert 0 <= row["i_received"] <= row["received"], row
    for row in raw["p2"] + raw["p3"]:
        if row.get("proto", row.get("stack", "")).startswith("dccp"):
            # the library's own count of packets that went agrees with the log
            assert row["tx_stats"]["sent"] + row["tx_stats"]["dead"] <= row["sent"], row
    md = (out / "results.md").read_text()
    assert "## P2" in md and "## P3" in md
    for name in ("p2.csv", "p3.csv", "p2_delays.csv", "command.txt"):
        assert (out / name).stat().st_size > 0, name


def test_quic_datagram_quick(build, quick_run):
    """P3's QUIC row: the same accounting, and quic_peer's own counts (what
    ngtcp2 accepted, what the policy dropped, what was left queued) add up
    to every packet the application sent."""
    if not (build / "bench" / "quic_peer").exists():
        pytest.skip("bench/quic_peer was not built: pkg-config found no libngtcp2 and "
                    "libngtcp2_crypto_gnutls (scripts/install-deps.sh installs them)")
    out, stdout = quick_run
    raw = json.loads((out / "raw.json").read_text())
    rows = [r for r in raw["p3"] if r["stack"] == "quic"]
    assert len(rows) == 1, stdout[-2000:]  # --quick: one interval
    row = rows[0]
    check_run(row)
    t = row["tx_stats"]
    assert t["cc"] == "cubic" and t["ngtcp2"], t
    assert t["sent"] + t["dead"] + t["unsent"] == row["sent"], t
    assert t["dead"] == row["dead"], t
    assert t["went_at_once"] + t["went_after_cwnd"] + t["went_after_pacing"] == t["sent"], t
    # a DATAGRAM frame is never retransmitted: what arrived was acked or is unknown
    assert row["received"] <= t["sent"] and t["acked"] <= t["sent"], t
    assert "QUIC (bench/quic_peer.c" in (out / "results.md").read_text()
