"""capture: tcpdump in a lab namespace, and tshark as the judge of what it caught.

    with Capture(lab, ns, "gctap1", tmp_path / "run.pcap") as cap:
        ...                                   # traffic; tcpdump is listening already
    rows = tshark(cap.pcap, ["dccp.type", "dccp.srcport", "_ws.expert.message"])
    # [{"dccp.type": "0", "dccp.srcport": "41000", "_ws.expert.message": ""}, ...]

tcpdump runs with --immediate-mode and -U, or the tail of a run is lost.
tshark runs as nobody on a copy of the pcap: Wireshark loads Lua plugins
(the RFC 6773 registration, later) only when it is not root.
"""
from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

DCCP_FILTER = "ip proto 33 or ip6 proto 33"
DCCP_UDP_PORT = 6511  # RFC 6773
# Debian's tshark dissects DCCP only as IP protocol 33: hand UDP 6511 to the same dissector.
UDP_LUA = f"""-- RFC 6773: DCCP-UDP on its default port goes to the native DCCP dissector
local dccp = DissectorTable.get("ip.proto"):get_dissector(33)
DissectorTable.get("udp.port"):add({DCCP_UDP_PORT}, dccp)
"""


class Capture:
    """tcpdump -i ifname in namespace ns, writing pcap, from enter to exit."""

    def __init__(self, lab, ns: str, ifname: str, pcap: Path, bpf_filter: str = DCCP_FILTER,
                 buffer_kib: int = 0):
        """buffer_kib: tcpdump -B, for runs of tens of thousands of packets
        (the default buffer drops some of them on a loaded machine)."""
        self.lab, self.ns, self.ifname, self.pcap, self.filter = lab, ns, ifname, Path(pcap), bpf_filter
        self.buffer = ["-B", str(buffer_kib)] if buffer_kib else []
        self.proc = None

    def __enter__(self):
        # -Z root: tcpdump would otherwise write as user tcpdump, maybe where it may not.
        self.proc = self.lab.popen(self.ns, ["tcpdump", "-i", self.ifname, "-n", "-U", "--immediate-mode",
                                             *self.buffer, "-Z", "root", "-w", str(self.pcap), self.filter],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stderr], [], [], 20)
        line = self.proc.stderr.readline() if ready else "(nothing in 20 s)"
        if "listening on" not in line:  # "listening on gctap1, link-type EN10MB ..." once capturing
            self.__exit__()
            raise RuntimeError(f"tcpdump on {self.ns}/{self.ifname}: {line.strip()}")
        return self

    def __exit__(self, *exc):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            time.sleep(0.2)  # what is still on the wire
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()
        self.proc = None


def tshark(pcap: Path, fields: list[str], display_filter: str = "dccp", prefs: tuple = (),
           user: str = "nobody", lua: str | None = None) -> list[dict]:
    """One dict per packet that matches display_filter: {field: value as
    tshark prints it, "" when absent; several values joined by ","}.
    prefs: ("dccp.check_checksum:TRUE", ...) for -o; lua: a Lua script to load
    (UDP_LUA: DCCP-UDP on port 6511)."""
    work = Path(tempfile.mkdtemp(prefix="gc-tshark-"))
    try:
        os.chmod(work, 0o755)
        copy = work / "capture.pcap"
        shutil.copyfile(pcap, copy)
        os.chmod(copy, 0o644)
        argv = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups", "--",
                "tshark", "-n", "-r", str(copy), "-Y", display_filter, "-T", "fields",
                "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"]
        for p in prefs:
            argv += ["-o", p]
        if lua:
            script = work / "plugin.lua"
            script.write_text(lua)
            os.chmod(script, 0o644)
            argv += ["-X", f"lua_script:{script}"]
        for f in fields:
            argv += ["-e", f]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work)})
        if out.returncode != 0:
            raise RuntimeError(f"tshark on {pcap}: {out.stderr.strip()}")
        return [dict(zip(fields, line.split("\t"))) for line in out.stdout.splitlines()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
