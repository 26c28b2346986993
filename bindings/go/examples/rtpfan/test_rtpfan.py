# SPDX-License-Identifier: MIT
"""rtpfan end to end (make go-test): ffmpeg sends a 5 s RTP stream to rtpfan,
which fans it out to 200 subscribers in two namespaces (100 each).  Every
subscriber is checked for bytes and SSRC: its own SSRC on every packet, the
same packet count and, SSRC aside, the same bytes (header and payload) as every
other subscriber.  ffprobe decodes the stream of a sample of 4 subscribers (2
per namespace; a decoder per subscriber would not fit the time budget on a
2-core machine): the receiver forwards their datagrams unchanged to it.  The
subscriber file starts with one namespace only and SIGHUP loads the full one."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "lab"))
from netlab import Lab  # noqa: E402

RTPFAN = os.environ.get("GC_RTPFAN")
PER_NS, BASE, SAMPLE = 100, 7000, 2

RECEIVER = r"""
import hashlib, json, selectors, socket, sys, time
addr, base, n, sample, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
sel = selectors.DefaultSelector()
for p in range(base, base + n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((addr, p))
    sel.register(s, selectors.EVENT_READ, p)
fwd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
st = {p: {"n": 0, "ssrc": [], "h": hashlib.sha256()} for p in range(base, base + n)}
print("ready", flush=True)
end = time.monotonic() + secs
while time.monotonic() < end:
    for key, _ in sel.select(0.2):
        d = key.fileobj.recv(65536)
        p = key.data
        e = st[p]
        e["n"] += 1
        ssrc = int.from_bytes(d[8:12], "big")
        if ssrc not in e["ssrc"]:
            e["ssrc"].append(ssrc)
        e["h"].update(len(d).to_bytes(4, "big") + d[:8] + d[12:])
        if p - base < sample:
            fwd.sendto(d, ("127.0.0.1", 9000 + 2 * (p - base)))
print(json.dumps({p: {"n": e["n"], "ssrc": e["ssrc"], "h": e["h"].hexdigest()} for p, e in st.items()}))
"""


def sdp(port):
    return ("v=0\no=- 0 0 IN IP4 127.0.0.1\ns=rtpfan\nc=IN IP4 127.0.0.1\nt=0 0\n"
            f"m=video {port} RTP/AVP 96\na=rtpmap:96 MP4V-ES/90000\na=fmtp:96 profile-level-id=1\n")


@pytest.mark.skipif(not RTPFAN, reason="GC_RTPFAN: the rtpfan binary (make go-test builds it)")
def test_rtpfan_200_subscribers_own_ssrc_decoded(tmp_path):
    with Lab() as lab:
        star = lab.star(2)
        subs = {}
        for k, link in enumerate(star.links):
            for i in range(PER_NS):
                subs[(link.b.ns, BASE + i)] = (link.b.v4, 0x10000 + 1000 * k + i)
        path = tmp_path / "subs.txt"
        first = [f"{a}:{p} {ssrc:#x}" for (ns, p), (a, ssrc) in subs.items() if ns == star.links[0].b.ns]
        path.write_text("# one namespace only: SIGHUP loads the full list\n" + "\n".join(first) + "\n")
        inp = f"{star.links[0].a.v4}:5004"
        fan = lab.popen(star.sender, [RTPFAN, "-in", inp, "-subs", path, "-engine", "auto"],
                        stderr=subprocess.PIPE, text=True)
        assert "subscribers, engine" in fan.stderr.readline()
        path.write_text("\n".join(f"{a}:{p} {ssrc}" for (ns, p), (a, ssrc) in subs.items()) + "\n")
        fan.send_signal(signal.SIGHUP)
        line = fan.stderr.readline()
        assert f"reload: {2 * PER_NS} subscribers" in line, line

        rx, probes = [], []
        for link in star.links:
            r = lab.popen(link.b.ns, [sys.executable, "-c", RECEIVER, link.b.v4, BASE, PER_NS, SAMPLE, 9],
                          stdout=subprocess.PIPE, text=True)
            assert r.stdout.readline().strip() == "ready"
            rx.append((link.b.ns, r))
            for j in range(SAMPLE):
                f = tmp_path / f"{link.index}-{j}.sdp"
                f.write_text(sdp(9000 + 2 * j))
                probes.append((link.b.ns, BASE + j, lab.popen(link.b.ns, [
                    "ffprobe", "-v", "error", "-protocol_whitelist", "file,udp,rtp", "-read_intervals", "%+3",
                    "-count_frames", "-select_streams", "v:0", "-show_entries",
                    "stream=codec_name,width,height,nb_read_frames", "-of", "json", "-i", f],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        time.sleep(1.0)  # ffprobe opens its port
        src = lab.run(star.sender, ["ffmpeg", "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i",
                                    "testsrc=size=160x120:rate=25", "-t", 5, "-c:v", "mpeg4", "-f", "rtp",
                                    f"rtp://{inp}"], capture_output=True, text=True, timeout=60)
        assert src.returncode == 0, src.stderr

        got = {}
        for ns, r in rx:
            out, _ = r.communicate(timeout=30)
            for p, e in json.loads(out.splitlines()[-1]).items():
                got[(ns, int(p))] = e
        assert len(got) == 2 * PER_NS
        counts = {e["n"] for e in got.values()}
        digests = {e["h"] for e in got.values()}
        assert len(counts) == 1 and min(counts) >= 100, f"packet counts differ or too few: {sorted(counts)}"
        assert len(digests) == 1, "subscribers got different bytes (SSRC aside)"
        for key, e in got.items():
            assert e["ssrc"] == [subs[key][1]], f"{key}: SSRCs {e['ssrc']}, want {subs[key][1]:#x}"
        for ns, port, p in probes:
            out, err = p.communicate(timeout=30)
            st = json.loads(out)["streams"]
            assert st and st[0]["codec_name"] == "mpeg4" and (st[0]["width"], st[0]["height"]) == (160, 120), err
            assert int(st[0]["nb_read_frames"]) >= 60, f"{ns}:{port}: {st}"
        fan.kill()
        fan.wait()
