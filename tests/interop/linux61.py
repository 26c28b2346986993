#!/usr/bin/env python3
"""linux61: Linux 6.1's own DCCP as a test peer, in a QEMU guest linked to a lab namespace.

Linux removed DCCP in 6.16 (the host runs a newer kernel without it); Debian's
`linux-image-6.1.0-*-amd64-unsigned` still ships dccp.ko, dccp_ipv4.ko and
dccp_ipv6.ko with CCID 2 and CCID 3.  This module fetches that package (never
installing it as the host's kernel), boots it under qemu-system-x86 with TCG
from a busybox initramfs, and links the guest's eth0 to a tap device inside a
namespace of a `lab/netlab.py` lab.  Nothing else is reachable from the guest.

    import sys; sys.path[:0] = ["lab", "tests/interop"]
    from netlab import Lab
    from linux61 import Linux61Guest

    with Lab() as lab:
        ns = lab.add_ns("host")
        with Linux61Guest(lab, ns) as g:              # boots; g.boot_s is the boot time
            srv = g.start("dccp_peer server 5001 --ccid 2 --count 100")
            g.wait_output(srv, "listening")          # the server is bound
            r = g.run(f"dccp_peer client 127.0.0.1 5001 --ccid 2 --count 100")
            print(r.json["sent"], srv.wait().json["received"])
            # or, from the host namespace: connect to g.guest_v4 / g.guest_v6
            # (the host end of the link is g.host_v4 / g.host_v6)

API
  fetch(cache=None) -> Kernel       download and unpack the newest 6.1 package
                                    (cache: $GC_INTEROP_CACHE or /var/cache/groupcast-interop)
  build_peer(cache=None) -> Path    the static dccp_peer binary (cc -static -O2)
  Linux61Guest(lab, ns, kernel=None, mem=256, boot_timeout=120, files=None, cache=None, append=())
      context manager; boots on enter, powers off (or kills qemu) on exit, and
      on any failure; `append`: more kernel command-line words.
      .run(cmd, timeout=30, check=True) -> Result   run a shell command in the guest;
                                                     the guest kills it (rc 137) after timeout s
      .start(cmd, timeout=60) -> Job                 the same, in the background
      Job.wait(timeout=None, check=True) -> Result
      .wait_output(job, text, timeout=10)            until job's output contains text
      .guest_v4, .guest_v6, .host_v4, .host_v6, .tap, .ns, .link (a netlab Link)
      .boot_s (qemu start to guest ready, s), .uptime_s (guest's own clock at ready)
      .console (the guest's serial console so far: kernel log and /init's "@@gc-guest" lines)
  Result: .rc, .output (stdout and stderr together), .json (last line that parses
      as a JSON object, or None); check=True raises GuestError if rc != 0.
  netns_socket(ns, family, type, proto) -> socket   a socket inside namespace ns

Commands run with `sh -c` in the guest under busybox, with `ip` and `tc` from
the host's iproute2 (busybox's tc cannot do netem), `dccp_peer`, and the
modules loaded: virtio_net, dccp, dccp_ipv4, dccp_ipv6, sch_netem, sch_tbf.
`files={"/bin/name": Path}` adds more (static) programs to the initramfs.

CLI (root): linux61.py fetch | boot-time [--boots N] [--append ARGS] | run CMD [CMD...]
"""
from __future__ import annotations

import argparse
import base64
import ctypes
import fcntl
import hashlib
import json
import lzma
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "lab"))
from netlab import Lab, Link, Node, UNROUTED  # noqa: E402

PACKAGE_RE = re.compile(r"^linux-image-6\.1\.0-(\d+)-amd64-unsigned$")
QBOOT = Path("/usr/share/qemu/qboot.rom")  # in qemu-system-data
BUSYBOX = Path("/bin/busybox")             # busybox-static
# Modules the guest loads, in this order after their dependencies.
GUEST_MODULES = ["virtio_pci", "virtio_net", "dccp", "dccp_ipv4", "dccp_ipv6", "sch_netem", "sch_tbf"]
HOST_TOOLS = ["/sbin/ip", "/sbin/tc"]
NETEM_TABLES = Path("/usr/lib/x86_64-linux-gnu/tc")


class GuestError(RuntimeError):
    pass


def default_cache() -> Path:
    return Path(os.environ.get("GC_INTEROP_CACHE", "/var/cache/groupcast-interop"))


def _log(msg):
    print(f"linux61: {msg}", file=sys.stderr, flush=True)


# -- fetching the kernel --------------------------------------------------------

@dataclass(frozen=True)
class Kernel:
    package: str       # linux-image-6.1.0-N-amd64-unsigned
    release: str       # 6.1.0-N-amd64
    vmlinux: Path      # uncompressed ELF: boots through PVH, no decompression under TCG
    modules: dict      # module name -> uncompressed .ko, GUEST_MODULES and their dependencies
    load_order: tuple  # names in an order insmod accepts


def _sh(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise GuestError(f"{' '.join(map(str, argv))}: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


def newest_package() -> str | None:
    """The newest linux-image-6.1.0-N-amd64-unsigned that apt knows, by N."""
    out = _sh(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$"])
    found = [(int(m.group(1)), m.group(0)) for m in
             (PACKAGE_RE.match(line.split(" - ")[0].strip()) for line in out.splitlines()) if m]
    return max(found)[1] if found else None


def _extract_vmlinux(bzimage: bytes) -> bytes:
    """The ELF kernel inside a bzImage (boot protocol 2.08+: payload_offset at
    0x248, payload_length at 0x24c, relative to the protected-mode code)."""
    if bzimage[0x202:0x206] != b"HdrS":
        raise GuestError("vmlinuz is not a bzImage")
    setup_sects = bzimage[0x1f1] or 4
    pm = (setup_sects + 1) * 512
    off, length = struct.unpack_from("<II", bzimage, 0x248)
    payload = bzimage[pm + off:pm + off + length]
    if not payload.startswith(b"\xfd7zXZ\x00"):  # Debian's 6.1 kernels: CONFIG_KERNEL_XZ
        raise GuestError(f"vmlinuz: payload is not xz ({payload[:6].hex()})")
    out = lzma.LZMADecompressor().decompress(payload)  # stops at the end of the stream
    if not out.startswith(b"\x7fELF"):
        raise GuestError("vmlinuz: payload is not an ELF kernel")
    return out


def _ko_bytes(path: Path) -> bytes:
    """A module as insmod takes it (busybox's cannot unpack .ko.xz)."""
    data = path.read_bytes()
    return lzma.decompress(data) if path.name.endswith(".xz") else data


def _modinfo_depends(ko: bytes) -> list[str]:
    """`depends=` of a module (its .modinfo strings; modinfo may be absent)."""
    m = re.search(rb"(?:^|\0)depends=([^\0]*)\0", ko)
    return [d for d in m.group(1).decode().split(",") if d] if m else []


def fetch(cache: Path | None = None) -> Kernel:
    """Download the newest 6.1 package into the cache, unpack the kernel and
    the guest's modules; reuse what an earlier call prepared."""
    cache = Path(cache or default_cache())
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other test processes wait here
        package = newest_package()
        if package is None:  # a fresh machine's apt may not have its lists yet
            _sh(["apt-get", "update", "-qq"])
            package = newest_package()
        prepared = sorted((int(PACKAGE_RE.match(r.parent.name).group(1)), r.parent.name)
                          for r in cache.glob("linux-image-6.1.0-*-amd64-unsigned/ready"))
        try:
            if package is None:
                raise GuestError("apt knows no linux-image-6.1.0-*-amd64-unsigned package")
            return _prepare(cache, package)
        except GuestError as e:
            if not prepared:
                raise
            _log(f"{e}; using the {prepared[-1][1]} fetched earlier")
            return _prepare(cache, prepared[-1][1])


def _prepare(cache: Path, package: str) -> Kernel:
    kdir = cache / package
    if not (kdir / "ready").exists():
        t0 = time.monotonic()
        shutil.rmtree(kdir, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            try:
                shutil.chown(tmp, user="_apt")  # apt's sandbox user downloads into it
            except LookupError:
                pass
            _sh(["apt-get", "download", "-qq", package], cwd=tmp)
            deb, = Path(tmp).glob(f"{package}_*.deb")
            _log(f"downloaded {deb.name} ({deb.stat().st_size >> 20} MiB) in {time.monotonic() - t0:.1f} s")
            root = Path(tmp) / "root"
            root.mkdir()
            # Only the kernel and the modules: the package is never installed.
            tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
            _sh(["tar", "-x", "-C", str(root), "--wildcards", "./boot/vmlinuz-*", "./lib/modules/*/kernel/*"],
                stdin=tar.stdout)
            if tar.wait() != 0:
                raise GuestError(f"dpkg-deb --fsys-tarfile {deb.name} failed")
            vmlinuz, = (root / "boot").glob("vmlinuz-*")
            release = vmlinuz.name[len("vmlinuz-"):]
            staging = Path(tmp) / "kernel"
            (staging / "modules").mkdir(parents=True)
            (staging / "vmlinux").write_bytes(_extract_vmlinux(vmlinuz.read_bytes()))
            index = {}
            for ko in (root / "lib" / "modules" / release / "kernel").rglob("*.ko*"):
                index[re.sub(r"\.ko(\.xz)?$", "", ko.name).replace("-", "_")] = ko
            order = []

            def visit(name, path=()):
                if name in order:
                    return
                if name in path or name not in index:
                    raise GuestError(f"module {name}: {'dependency cycle' if name in path else 'not in ' + package}")
                data = _ko_bytes(index[name])
                for dep in _modinfo_depends(data):
                    visit(dep.replace("-", "_"), path + (name,))
                (staging / "modules" / f"{name}.ko").write_bytes(data)
                order.append(name)

            for name in GUEST_MODULES:
                visit(name)
            (staging / "release").write_text(release + "\n")
            (staging / "load_order").write_text("\n".join(order) + "\n")
            staging.rename(kdir)
        (kdir / "ready").write_text(f"{time.time()}\n")
        _log(f"prepared {package} in {time.monotonic() - t0:.1f} s")
        for old in cache.glob("linux-image-6.1.0-*/ready"):  # superseded, and not just fetched by a running test
            if old.parent != kdir and time.time() - old.stat().st_mtime > 3600:
                shutil.rmtree(old.parent, ignore_errors=True)
    order = tuple((kdir / "load_order").read_text().split())
    return Kernel(package, (kdir / "release").read_text().strip(), kdir / "vmlinux",
                  {n: kdir / "modules" / f"{n}.ko" for n in order}, order)


def build_peer(cache: Path | None = None) -> Path:
    """dccp_peer, built static from tests/interop/dccp_peer.c into the cache
    (named by the source's hash, so an edited source is rebuilt)."""
    cache = Path(cache or default_cache())
    src = HERE / "dccp_peer.c"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    out = cache / "bin" / f"dccp_peer-{digest}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp%d" % os.getpid())
        _sh([os.environ.get("CC", "cc"), "-static", "-O2", "-std=c11", "-Wall", "-Wextra", "-o", str(tmp), str(src)])
        tmp.rename(out)
    return out


# -- the initramfs ----------------------------------------------------------------

INIT = r"""#!/bin/sh
# /init of the groupcast Linux 6.1 guest (tests/interop/linux61.py).
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
# Debian's busybox runs its own applets before any PATH lookup; functions
# come first, so ip and tc are iproute2's (busybox's tc has no netem).
tools='ip() { /sbin/ip "$@"; }; tc() { /sbin/tc "$@"; };'
eval "$tools"
say() { echo "@@gc-guest $*"; }
fail() { say "fail $*"; poweroff -f; }
while read -r m; do
  insmod "/lib/gc/$m.ko" || fail "insmod $m"
done < /etc/gc-modules
for w in $(cat /proc/cmdline); do
  case "$w" in
    gc.ip4=*) ip4="${w#gc.ip4=}" ;;
    gc.ip6=*) ip6="${w#gc.ip6=}" ;;
  esac
done
ip link set lo up
ip link set eth0 up || fail "no eth0"
# Only the link's own subnets: no default route, nothing beyond the lab.
[ -n "$ip4" ] && { ip addr add "$ip4" dev eth0 || fail "ip4 $ip4"; }
[ -n "$ip6" ] && { ip -6 addr add "$ip6" dev eth0 nodad || fail "ip6 $ip6"; }
stty -F /dev/ttyS1 icanon -echo -isig -iexten -icrnl -ixon -opost || fail "no control port"
exec 3<>/dev/ttyS1
say "ready $(cut -d' ' -f1 /proc/uptime)"
echo "@@gc-ready $(cut -d' ' -f1 /proc/uptime)" >&3
# Control protocol on ttyS1: the host writes "ID TIMEOUT BASE64(COMMAND)."
# lines; each command runs in the background and its output comes back as one
# block "@@gc-begin ID" OUTPUT "@@gc-end ID RC" (a lock keeps blocks whole).
# Lines are read by dd from the tty in canonical mode (one read(), one line):
# sh's own read builtin loses bytes when a finished job's SIGCHLD interrupts it.
fails=0
while [ $fails -lt 50 ]; do
  line=$(dd bs=4096 count=1 2>/dev/null <&3)
  [ -n "$line" ] || { fails=$((fails + 1)); continue; }
  fails=0
  case "$line" in *.) ;; *) say "bad control line: $line"; continue ;; esac
  set -- ${line%.}
  [ "$1" = poweroff ] && break
  id=$1 tmo=$2 cmd=$(echo "$3" | base64 -d)
  (
    cd /tmp
    timeout -s KILL "$tmo" sh -c "$tools $cmd" > "/tmp/gc.$id" 2>&1 < /dev/null
    rc=$?
    until mkdir /tmp/gc.lock 2>/dev/null; do usleep 1000; done
    { echo "@@gc-begin $id"; cat "/tmp/gc.$id"; echo; echo "@@gc-end $id $rc"; } >&3
    rmdir /tmp/gc.lock
    say "done $id rc=$rc"
  ) &
done
say "poweroff $(cut -d' ' -f1 /proc/uptime)"
poweroff -f
"""


class _Cpio:
    """A newc archive written entry by entry (no cpio tool, no root needed
    for device nodes)."""

    def __init__(self):
        self.parts, self.ino = [], 1

    def _entry(self, name, mode, data=b"", rdev=(0, 0)):
        name_b = name.lstrip("/").encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0]
        self.ino += 1
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.parts += [hdr, name_b, b"\0" * (-(len(hdr) + len(name_b)) % 4), data, b"\0" * (-len(data) % 4)]

    def dir(self, name):
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name, data: bytes, mode=0o755):
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, name, major, minor):
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def bytes(self):
        self._entry("TRAILER!!!", 0)
        return b"".join(self.parts)


def _shared_libs(binary):
    """The shared objects `binary` loads, from ldd (path as the loader finds it)."""
    libs = []
    for line in _sh(["ldd", binary]).splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def build_initramfs(kernel: Kernel, peer: Path, files: dict | None = None) -> bytes:
    """busybox, the host's ip and tc with their libraries, the modules,
    dccp_peer, `files` ({guest path: host path}) and /init."""
    a = _Cpio()
    dirs, libs = set(), set()

    def mkdir(path):
        parts = Path(path).parts[1:]
        for i in range(len(parts)):
            d = "/" + "/".join(parts[:i + 1])
            if d not in dirs:
                dirs.add(d)
                a.dir(d)

    def put(path, data, mode=0o755):
        mkdir(str(Path(path).parent))
        a.file(path, data, mode)

    for d in ("/bin", "/sbin", "/proc", "/sys", "/dev", "/tmp", "/etc", "/lib/gc"):
        mkdir(d)
    a.chardev("/dev/console", 5, 1)  # the kernel opens it for /init before devtmpfs
    put("/bin/busybox", BUSYBOX.read_bytes())
    applets = _sh([str(BUSYBOX), "--list"]).split()
    for applet in applets:
        if applet != "busybox":
            a.symlink(f"/bin/{applet}", "busybox")
    for tool in HOST_TOOLS:
        put(f"/sbin/{Path(tool).name}", Path(tool).read_bytes())
        for lib in _shared_libs(tool):
            if lib not in libs:
                libs.add(lib)
                put(lib, Path(lib).read_bytes())
    for t in sorted(NETEM_TABLES.glob("*.dist")):  # netem delay distributions, where tc looks
        put(str(t), t.read_bytes(), 0o644)
    for name in kernel.load_order:
        put(f"/lib/gc/{name}.ko", kernel.modules[name].read_bytes(), 0o644)
    put("/etc/gc-modules", ("\n".join(kernel.load_order) + "\n").encode(), 0o644)
    put("/bin/dccp_peer", peer.read_bytes())
    for gpath, hpath in (files or {}).items():
        put(gpath, Path(hpath).read_bytes())
    put("/init", INIT.encode())
    return a.bytes()


# -- the guest -----------------------------------------------------------------------

@dataclass
class Result:
    rc: int
    output: str
    json: dict | None = None

    def __post_init__(self):
        for line in reversed(self.output.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.json = json.loads(line)
                    break
                except ValueError:
                    pass


@dataclass
class Job:
    id: int
    cmd: str
    guest: "Linux61Guest"
    timeout: int = 60
    done: threading.Event = field(default_factory=threading.Event)
    result: Result | None = None

    def wait(self, timeout: float | None = None, check: bool = True) -> Result:
        """The command's Result once it ended in the guest (timeout: its own
        guest-side limit plus a margin, by default)."""
        if not self.done.wait(timeout if timeout is not None else self.timeout + 15):
            raise GuestError(f"guest command {self.id} ({self.cmd!r}) gave no result in time"
                             f"{self.guest._tail()}")
        if self.result is None:
            raise GuestError(f"guest stopped before command {self.id} ({self.cmd!r}) ended{self.guest._tail()}")
        if check and self.result.rc != 0:
            raise GuestError(f"guest command {self.cmd!r} exited {self.result.rc}:\n{self.result.output}")
        return self.result


def netns_socket(ns: str, family, type_, proto=0) -> socket.socket:
    """A socket created inside network namespace `ns` (setns() on this thread,
    then back); it stays in ns for its whole life."""
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNET = 0x40000000
    with open("/proc/thread-self/ns/net") as home, open(f"/run/netns/{ns}") as there:
        if libc.setns(there.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({ns})")
        try:
            return socket.socket(family, type_, proto)
        finally:
            if libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns(back)")


class Linux61Guest:
    """A Linux 6.1 guest whose eth0 is a tap device in namespace `ns` of `lab`.

    The link takes the next link index i of the lab, addressed like netlab's
    veths: the namespace end (tap) is 10.R.i.1/24 and fd00:R:i::1/64, the
    guest 10.R.i.2 and fd00:R:i::2.  No route leads anywhere else."""

    def __init__(self, lab: Lab, ns: str, kernel: Kernel | None = None, mem: int = 256,
                 boot_timeout: float = 120, files: dict | None = None, cache: Path | None = None,
                 append: tuple = ()):
        self.lab, self.ns, self.mem, self.boot_timeout = lab, ns, mem, boot_timeout
        self.append = tuple(append)
        self.cache = Path(cache or default_cache())
        self.kernel = kernel or fetch(self.cache)
        self.files = files
        self.proc = None
        self._console = ""
        self.boot_s = self.uptime_s = None
        self._jobs: dict[int, Job] = {}
        self._next_id = 1
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._conn = None
        self._dir = None

    # -- lifetime --

    def __enter__(self):
        try:
            self.boot()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _reserve_link(self):
        """Take the lab's next link index for the tap, so later veths of the
        lab get other subnets."""
        index = len(self.lab.links) + 1
        if index >= UNROUTED:
            raise GuestError("the lab has no free link index for the guest")
        o = self.lab.octet
        self.tap = f"gctap{index}"
        self.host_v4, self.guest_v4 = f"10.{o}.{index}.1", f"10.{o}.{index}.2"
        self.host_v6, self.guest_v6 = f"fd00:{o}:{index}::1", f"fd00:{o}:{index}::2"
        self.link = Link(index, Node(self.ns, self.tap, self.host_v4, self.host_v6),
                         Node(f"{self.ns}/guest", "eth0", self.guest_v4, self.guest_v6),
                         f"10.{o}.{index}.0/24", f"fd00:{o}:{index}::/64")
        self.lab.links.append(self.link)

    def boot(self):
        t0 = time.monotonic()
        missing = [str(p) for p in (QBOOT, BUSYBOX, *map(Path, HOST_TOOLS)) if not p.exists()]
        missing += [] if shutil.which("qemu-system-x86_64") else ["qemu-system-x86_64"]
        if missing:
            raise GuestError(f"missing {', '.join(missing)}: run scripts/install-deps.sh")
        self._reserve_link()
        self.lab.ip(self.ns, "tuntap", "add", "dev", self.tap, "mode", "tap")
        self.lab.ip(self.ns, "addr", "add", f"{self.host_v4}/24", "dev", self.tap)
        self.lab.ip(self.ns, "-6", "addr", "add", f"{self.host_v6}/64", "dev", self.tap, "nodad")
        self.lab.ip(self.ns, "link", "set", self.tap, "up")

        self._dir = Path(tempfile.mkdtemp(prefix="gc-linux61-"))
        initrd = self._dir / "initrd.cpio"
        initrd.write_bytes(build_initramfs(self.kernel, build_peer(self.cache), self.files))
        ctl_path = self._dir / "ctl.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(ctl_path))
        listener.listen(1)
        listener.settimeout(0.5)
        append = ["console=ttyS0", "panic=-1", "cryptomgr.notests", "nokaslr",
                  f"gc.ip4={self.guest_v4}/24", f"gc.ip6={self.guest_v6}/64", *self.append]
        argv = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(self.mem), "-nographic", "-nodefaults",
                "-no-reboot", "-monitor", "none", "-bios", str(QBOOT),
                "-kernel", str(self.kernel.vmlinux), "-initrd", str(initrd), "-append", " ".join(append),
                "-chardev", f"file,id=con,path={self._dir / 'console.log'}", "-serial", "chardev:con",
                "-chardev", f"socket,id=ctl,path={ctl_path}", "-serial", "chardev:ctl",
                "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no",
                "-device", "virtio-net-pci,netdev=n0"]
        t_qemu = time.monotonic()
        with open(self._dir / "qemu.log", "w") as qemu_log:  # qemu keeps its own copy of the fd
            self.proc = self.lab.popen(self.ns, argv, stdin=subprocess.DEVNULL, stdout=qemu_log,
                                       stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.boot_timeout
        try:
            while self._conn is None:
                try:
                    self._conn, _ = listener.accept()
                except socket.timeout:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise GuestError(f"qemu did not connect its control port{self._tail()}")
        finally:
            listener.close()
        threading.Thread(target=self._reader, daemon=True).start()
        while not self._ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise GuestError(f"guest not ready ({'qemu exited' if self.proc.poll() is not None else 'timeout'})"
                                 f"{self._tail()}")
        self.boot_s = time.monotonic() - t_qemu
        self.prepare_s = t_qemu - t0
        return self

    def close(self):
        """Power the guest off (kill qemu if it does not stop in 10 s),
        remove the tap; keep the console log in .console."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                if self._conn is None or not self._ready.is_set():
                    raise OSError("not booted: nothing to power off")
                self._conn.sendall(b"poweroff.\n")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._dir is not None:
            self._console = self._read_console()
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        for job in self._jobs.values():
            job.done.set()
        if getattr(self, "tap", None):
            subprocess.run(["ip", "-n", self.ns, "link", "del", self.tap], capture_output=True)

    # -- commands --

    def start(self, cmd: str, timeout: int = 60) -> Job:
        """Run `cmd` (sh -c, in the guest's /tmp) in the background; the guest
        kills it after `timeout` seconds."""
        if len(cmd) > 2000:  # the guest's tty takes lines of up to 4095 bytes, base64 included
            raise ValueError("cmd: longer than 2000 characters")
        if self._conn is None:
            raise GuestError("the guest is not running")
        with self._lock:
            job = Job(self._next_id, cmd, self, timeout=int(timeout))
            self._next_id += 1
            self._jobs[job.id] = job
        encoded = base64.b64encode(cmd.encode()).decode()
        self._conn.sendall(f"{job.id} {int(timeout)} {encoded}.\n".encode())
        return job

    def run(self, cmd: str, timeout: int = 30, check: bool = True) -> Result:
        """Run `cmd` in the guest and return its Result."""
        return self.start(cmd, timeout).wait(check=check)

    def wait_output(self, job: Job, text: str, timeout: float = 10):
        """Wait until `job`'s output so far contains `text` (e.g. a server's
        "listening" line)."""
        if "'" in text:
            raise ValueError("text: no single quotes")
        t = max(1, int(timeout))
        probe = f"i=0; until grep -qF '{text}' /tmp/gc.{job.id}; do i=$((i+1)); [ $i -gt {t * 50} ] && exit 1; usleep 20000; done"
        r = self.run(probe, timeout=t + 5, check=False)
        if r.rc != 0:
            raise GuestError(f"guest command {job.cmd!r} did not print {text!r} in {timeout} s"
                             f"{': it ended with ' + repr(job.result) if job.done.is_set() else ''}")

    # -- plumbing --

    def _reader(self):
        buf = b""
        current, lines = None, []
        while True:
            try:
                chunk = self._conn.recv(65536) if self._conn else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode(errors="replace")
                if current is None:
                    if line.startswith("@@gc-ready "):
                        self.uptime_s = float(line.split()[1])
                        self._ready.set()
                    elif line.startswith("@@gc-begin "):
                        current, lines = int(line.split()[1]), []
                elif line.startswith(f"@@gc-end {current} "):
                    rc = int(line.split()[2])
                    job = self._jobs.get(current)
                    if job is not None:
                        # The block is OUTPUT + "\n": drop the last (empty or partial-closing) line.
                        job.result = Result(rc, "\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else ""))
                        job.done.set()
                    current = None
                else:
                    lines.append(line)
        for job in self._jobs.values():
            job.done.set()

    @property
    def console(self) -> str:
        """The guest's serial console so far (kernel log, /init's lines)."""
        return self._read_console() if self._dir else self._console

    def _read_console(self):
        try:
            return (self._dir / "console.log").read_text(errors="replace")
        except (OSError, TypeError):
            return self._console

    def _tail(self):
        text = self.console
        qemu = ""
        if self._dir and (self._dir / "qemu.log").exists():
            qemu = (self._dir / "qemu.log").read_text(errors="replace")
        return f"\n--- guest console (tail) ---\n{text[-3000:]}\n--- qemu ---\n{qemu[-1000:]}"


# -- CLI -------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description="Linux 6.1's DCCP as a test peer in a QEMU guest")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download and unpack the newest linux-image-6.1.0-*-amd64-unsigned")
    bt = sub.add_parser("boot-time", help="boot, run nothing, power off; print timings")
    bt.add_argument("--boots", type=int, default=1)
    bt.add_argument("--append", default="", help="more kernel command line")
    rn = sub.add_parser("run", help="boot and run shell commands in the guest, one after the other")
    rn.add_argument("commands", nargs="+")
    rn.add_argument("--timeout", type=int, default=60)
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    kernel = fetch()
    t_fetch = time.monotonic() - t0
    print(json.dumps({"package": kernel.package, "release": kernel.release, "vmlinux": str(kernel.vmlinux),
                      "modules": list(kernel.load_order), "fetch_s": round(t_fetch, 2)}))
    if args.cmd == "fetch":
        return 0
    rc = 0
    for _ in range(getattr(args, "boots", 1)):
        with Lab() as lab:
            ns = lab.add_ns("host")
            t1 = time.monotonic()
            with Linux61Guest(lab, ns, kernel, append=getattr(args, "append", "").split()) as g:
                print(json.dumps({"boot_s": round(g.boot_s, 2), "guest_uptime_s": g.uptime_s,
                                  "prepare_s": round(g.prepare_s, 2)}))
                for cmd in getattr(args, "commands", []):
                    r = g.run(cmd, timeout=args.timeout, check=False)
                    sys.stdout.write(r.output)
                    print(json.dumps({"cmd": cmd, "rc": r.rc}))
                    rc = rc or r.rc
            print(json.dumps({"total_s": round(time.monotonic() - t1, 2)}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
