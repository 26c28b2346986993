"""Group send, sendgroup, engine choice and per-member errors, at real
receivers in a lab: the sender socket lives in namespace s, receivers in r1
(IPv4) and r2 (IPv6)."""
import ctypes
import errno
import os
import socket
import subprocess
import textwrap

import pytest

from conftest import REPO, netns

import groupcast
from groupcast import _lib
from groupcast.group import Engine

ENGINES = [e for e in Engine if e != Engine.AUTO and e.available()]


@pytest.fixture(scope="module")
def where(lab):
    star = lab.topology
    l1, l2 = star.links
    return {"s": star.sender, "r1": l1.b, "r2": l2.b}


@pytest.fixture
def receivers(where):
    """3 IPv4 receivers in r1 and 3 IPv6 receivers in r2: {(host, port): socket}."""
    socks = {}
    for name, fam, host in (("r1", socket.AF_INET, where["r1"].v4), ("r2", socket.AF_INET6, where["r2"].v6)):
        with netns(where[name].ns):
            for _ in range(3):
                s = socket.socket(fam, socket.SOCK_DGRAM)
                s.bind((host, 0))
                s.settimeout(2)
                socks[(host, s.getsockname()[1])] = s
    yield socks
    for s in socks.values():
        s.close()


@pytest.fixture
def sender(where):
    """A dual-stack IPv6 UDP socket in s, and its Group."""
    with netns(where["s"]):
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        with groupcast.Group(sock) as g:
            yield g
        sock.close()


def drain(s):
    s.settimeout(0)
    try:
        while True:
            s.recv(70000)
    except BlockingIOError:
        pass
    s.settimeout(2)


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.libname)
def test_send_reaches_every_member_byte_exact(sender, receivers, engine):
    sender.engine = engine
    assert sender.engine == engine
    sender.set(list(receivers))
    assert len(sender) == 6 and sender.members == list(receivers)
    payloads = [bytes((i * 7 + j) & 0xFF for j in range(n)) for i, n in enumerate((1, 1000, 1400))]
    for p in payloads:
        assert sender.send(p) == len(p)
    sender.send(bytearray(b"from a bytearray"))
    sender.send(memoryview(b"xx from a memoryview xx")[3:-3])
    for s in receivers.values():
        assert [s.recv(2000) for _ in payloads] == payloads
        assert s.recv(2000) == b"from a bytearray"
        assert s.recv(2000) == b"from a memoryview"
    st = sender.stats()
    assert st.datagrams >= 5 * 6 and st.failed == 0


def test_engine_enum_is_the_librarys(sender):
    name = _lib.lib.gc_engine_name
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.c_int]
    for e in Engine:
        assert name(int(e)).decode() == e.libname
    assert name(len(Engine)) is None            # GC_ENGINE_COUNT: no more engines than ours


def test_auto_takes_the_kernel_engine_as_root_and_says_why(sender):
    if not Engine.KERNEL.available():
        pytest.skip(f"kernel engine unavailable: {Engine.KERNEL.unavailable_reason()}")
    sender.engine = Engine.AUTO
    assert sender.engine == Engine.KERNEL
    assert "taken by AUTO" in sender.auto_reason()
    sender.engine = Engine.MMSG
    assert sender.engine == Engine.MMSG
    with pytest.raises(ValueError):
        sender.engine = 42


def test_unavailable_engine_is_refused_with_the_reason(where):
    """An unprivileged process (nobody, in s) cannot choose the kernel engine:
    ENOTSUP, with the library's reason in the message; AUTO falls back."""
    code = textwrap.dedent("""
        import errno, socket, groupcast
        from groupcast import Engine
        g = groupcast.Group(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        assert not Engine.KERNEL.available() and Engine.KERNEL.unavailable_reason()
        try:
            g.engine = Engine.KERNEL
        except OSError as e:
            assert e.errno == errno.ENOTSUP, e
            print("refused:", e.strerror)
        assert g.engine == Engine.MMSG, g.engine
        print("auto:", g.auto_reason())
    """)
    env = {"PYTHONPATH": str(REPO / "bindings/python/src"), "GROUPCAST_LIB": os.environ["GROUPCAST_LIB"]}
    out = subprocess.run(["ip", "netns", "exec", where["s"], "setpriv", "--reuid=nobody", "--regid=nogroup",
                          "--clear-groups", "env", *[f"{k}={v}" for k, v in env.items()], "python3", "-c", code],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "auto:" in out.stdout


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.libname)
def test_unreachable_member_raises_partial_send_error(lab, sender, receivers, engine):
    """A member with no route: PartialSendError names it with ENETUNREACH;
    every other member still gets the datagram."""
    sender.engine = engine
    bad4, bad6 = (lab.unrouted_v4(), 7000), (lab.unrouted_v6(), 7000)
    members = [bad4, *receivers, bad6]
    sender.set(members)
    with pytest.raises(groupcast.PartialSendError) as ei:
        sender.send(b"partial")
    e = ei.value
    assert e.errno == errno.ENETUNREACH and e.members == len(members)
    assert e.errors == {bad4: errno.ENETUNREACH, bad6: errno.ENETUNREACH}
    assert isinstance(e, OSError)
    for s in receivers.values():
        assert s.recv(100) == b"partial"
    sender.set(list(receivers))
    assert sender.send(b"ok") == 2      # the next send is clean again
    for s in receivers.values():
        assert s.recv(100) == b"ok"


def test_call_errors_are_plain_oserrors(sender, receivers):
    with pytest.raises(OSError) as ei:
        sender.send(b"nobody")
    assert ei.value.errno == errno.EDESTADDRREQ and not isinstance(ei.value, groupcast.PartialSendError)
    sender.set(list(receivers))
    with pytest.raises(OSError) as ei:
        sender.set([*receivers, ("10.1.1.1", 0)])
    assert ei.value.errno == errno.EINVAL and "port" in ei.value.strerror
    assert sender.members == list(receivers) and len(sender) == 6    # the old group stays
    with pytest.raises(OSError) as ei:
        sender.send(b"x" * 65508)   # IPv4 members: GC_UDP4_MAX
    assert ei.value.errno == errno.EMSGSIZE and not isinstance(ei.value, groupcast.PartialSendError)
    with pytest.raises(OSError) as ei:
        sender.send(b"x", flags=0x40000000)
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(ValueError):
        sender.set([("example.org", 53)])
    for s in receivers.values():
        with pytest.raises(socket.timeout):
            s.settimeout(0.05)
            s.recv(100)
    sock4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with groupcast.Group(sock4) as g4, pytest.raises(OSError) as ei:
        g4.set([("fd00::1", 9)])
    assert ei.value.errno == errno.EAFNOSUPPORT
    sock4.close()
    with pytest.raises(OSError) as ei:
        groupcast.Group(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    assert ei.value.errno == errno.EPROTOTYPE


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.libname)
def test_sendgroup_per_recipient_bytes_and_errors(lab, sender, receivers, engine):
    sender.engine = engine
    recs = [groupcast.Recipient(dest, f"<{i}|".encode(), bytearray(f"|{i}>".encode()))
            for i, dest in enumerate(receivers)]
    recs.insert(2, ((lab.unrouted_v4(), 7001), b"lost"))
    recs.append(groupcast.Recipient(("10.1.1.1", 0)))        # a bad destination: its own EINVAL
    errs = sender.sendgroup(memoryview(bytearray(b"shared payload")), recs)
    assert errs[2] == errno.ENETUNREACH and errs[-1] == errno.EINVAL
    assert errs[:2] == [0, 0] and errs[3:-1] == [0] * 4
    for i, s in enumerate(receivers.values()):
        assert s.recv(100) == f"<{i}|shared payload|{i}>".encode()
    with pytest.raises(OSError) as ei:
        sender.sendgroup(b"x", recs, flags=0x40000000)
    assert ei.value.errno == errno.EINVAL
    sender.limit = 2
    with pytest.raises(OSError) as ei:
        sender.sendgroup(b"x", recs[:3])
    assert ei.value.errno == errno.E2BIG and sender.limit == 2


def test_struct_layouts_match_the_headers(tmp_path):
    """The ctypes structs against the C headers: sizes and the offsets of every field."""
    structs = {"gc_giovec": _lib.Giovec, "gc_stats": _lib.Stats, "gc_dccp_opts": _lib.DccpOpts,
               "gc_dccp_rxinfo": _lib.DccpRxinfo, "gc_dccp_stats": _lib.DccpStats, "gc_pkt": _lib.Pkt,
               "sockaddr_storage": _lib.SockaddrStorage}
    lines = []
    for c, py in structs.items():
        lines.append(f'printf("{c} %zu\\n", sizeof(struct {c}));')
        for f, *_ in py._fields_:
            if not f.startswith("_") and c != "sockaddr_storage":
                lines.append(f'printf("{c}.{f} %zu\\n", offsetof(struct {c}, {f}));')
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <groupcast/group.h>\n"
                   "#include <groupcast/dccp.h>\nint main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n")
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", f"-I{REPO / 'include'}", "-o", exe, src], check=True)
    got = dict(line.split() for line in subprocess.run([exe], capture_output=True, text=True).stdout.splitlines())
    for c, py in structs.items():
        assert int(got[c]) == ctypes.sizeof(py), c
        for f, *_ in py._fields_:
            if f"{c}.{f}" in got:
                assert int(got[f"{c}.{f}"]) == getattr(py, f).offset, f"{c}.{f}"
