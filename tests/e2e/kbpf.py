"""The raw bpf() system call and cgroup v2 helpers of the kernel-engine
tests (test_kernel_policy.py): load a cgroup_skb program, attach it to a
temporary cgroup.  Through ctypes, so the tests need no BPF toolchain."""
import errno
import platform
import random
import struct
from contextlib import contextmanager
from pathlib import Path

import pytest

BPF_PROG_LOAD, BPF_PROG_ATTACH, BPF_PROG_DETACH = 5, 8, 9
BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS = 8, 1

# __NR_bpf by platform.machine(): asm-generic/unistd.h (arm64, riscv64,
# loongarch64) and each architecture's syscall table.
SYS_BPF = {
    "x86_64": 321,
    "i386": 357, "i686": 357,
    "aarch64": 280, "riscv64": 280, "loongarch64": 280,
    "armv7l": 386,
    "ppc64le": 361, "ppc64": 361,
    "s390x": 351,
}


def sys_bpf():
    """The bpf() system call number of this machine."""
    machine = platform.machine()
    if machine not in SYS_BPF:
        raise RuntimeError(f"bpf(): no system call number known for machine {machine!r}; add __NR_bpf of "
                           f"this architecture to SYS_BPF in {__file__}")
    return SYS_BPF[machine]


def bpf(cmd, attr):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(bytes(attr), 128)
    r = libc.syscall(sys_bpf(), cmd, buf, 128)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf({cmd}): {errno.errorcode.get(e, e)}")
    return r


def load_cgroup_skb_allow_all():
    """A cgroup_skb egress program that lets everything pass (r0 = 1; exit)."""
    import ctypes
    insns = ctypes.create_string_buffer(struct.pack("<BBhi", 0xb7, 0, 0, 1) + struct.pack("<BBhi", 0x95, 0, 0, 0))
    lic = ctypes.create_string_buffer(b"GPL")
    attr = bytearray(128)
    struct.pack_into("<IIQQ", attr, 0, BPF_PROG_TYPE_CGROUP_SKB, 2, ctypes.addressof(insns), ctypes.addressof(lic))
    struct.pack_into("<16s", attr, 48, b"gctest_egress")
    struct.pack_into("<I", attr, 68, BPF_CGROUP_INET_EGRESS)
    return bpf(BPF_PROG_LOAD, attr)


def cgroup2_mount():
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] == "cgroup2":
            return Path(left.split()[4])
    pytest.skip("no cgroup2 mount")


@contextmanager
def temp_cgroup():
    cg = cgroup2_mount() / f"gctest-{random.randrange(1 << 30):x}"
    cg.mkdir()
    try:
        yield cg
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():
            (cg.parent / "cgroup.procs").write_text(pid)
        cg.rmdir()
