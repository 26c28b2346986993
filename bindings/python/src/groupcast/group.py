"""Group unicast over a socket.socket: groupcast/group.h, gc_send(3),
gc_sendgroup(3), gc_set_engine(3)."""
from __future__ import annotations

import ctypes
import enum
import errno as _errno
import socket
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence, Tuple, Union

from . import _lib

Member = Tuple[str, int]
Buffer = Union[bytes, bytearray, memoryview]

UDP4_MAX = 65507  #: GC_UDP4_MAX: largest UDP payload of an IPv4 datagram
UDP6_MAX = 65527  #: GC_UDP6_MAX


class Engine(enum.IntEnum):
    """enum gc_engine.  Every engine sends the same bytes; AUTO picks one
    (groupcast(7)): KERNEL where the process may load BPF and no egress
    policy would be bypassed, else MMSG."""
    AUTO = 0
    LOOP = 1      #: sendto() per member: the papers' user-groupcast
    MMSG = 2      #: sendmmsg() in batches, iovecs into the caller's buffers
    URING = 3     #: io_uring SENDMSG, one submit per group send
    URING_ZC = 4  #: io_uring SENDMSG_ZC, waits for the zero-copy notifications
    KERNEL = 5    #: eBPF fan-out in the kernel: CAP_BPF + CAP_NET_ADMIN

    @property
    def libname(self) -> str:
        """The library's name for the engine: "auto", "loop", ... (gc_engine_name())."""
        return self.name.lower()

    def available(self) -> bool:
        """Whether this engine can be used on this machine (gc_engine_available())."""
        return _lib.gc_engine_available(int(self)) == 0

    def unavailable_reason(self) -> str:
        """Why the engine cannot be used here, or "" if it can."""
        if _lib.gc_engine_available(int(self)) == 0:
            return ""
        return (_lib.gc_errmsg() or b"").decode(errors="replace")


class PartialSendError(OSError):
    """Group.send(): some members were not sent to.  The others were.

    errno is the first failed member's errno (as gc_send() returns it);
    errors maps each failed member, as given to Group.set(), to its errno."""

    def __init__(self, errno: int, message: str, errors: dict[Member, int], members: int):
        super().__init__(errno, message)
        self.errors = errors
        self.members = members


class Recipient(NamedTuple):
    """One recipient of Group.sendgroup(): it gets prepend | shared | append."""
    dest: Member
    prepend: Buffer = b""
    append: Buffer = b""


@dataclass(frozen=True)
class Stats:
    """gc_stats(3): counters since the socket's state was created."""
    group_sends: int   #: send() and sendgroup() calls that reached an engine
    datagrams: int     #: datagrams handed to the kernel
    bytes: int         #: their payload bytes
    failed: int        #: datagrams that failed or were refused (reported per member)
    user_fallback: int  #: kernel engine: datagrams it left to a user engine
    last_errno: int    #: errno of the most recent failed datagram, or 0


def _ptr(data: Buffer) -> tuple[int | None, int, object]:
    """The address and length of data's bytes, without copying them (a
    read-only buffer other than bytes is copied once), and the object to keep
    alive while the library reads them."""
    if isinstance(data, bytes):
        keep = ctypes.c_char_p(data)
        return ctypes.cast(keep, ctypes.c_void_p).value, len(data), keep
    mv = memoryview(data)
    if not mv.contiguous:
        raise BufferError("data must be a contiguous buffer")
    if mv.nbytes == 0:
        return None, 0, None
    if mv.readonly:
        return _ptr(mv.tobytes())
    keep = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
    return ctypes.addressof(keep), mv.nbytes, keep


class Group:
    """A group of unicast receivers attached to a UDP socket (gc_setgroup(3)).

        with groupcast.Group(sock) as g:
            g.set([("10.0.0.2", 5000), ("fd00::2", 5000)])
            g.send(b"frame")

    The socket stays the caller's: closing the Group (or leaving the with
    block) frees what the library keeps for it (gc_release()), not the socket.
    Calls on one socket are serialized by the library; calls on different
    sockets never block each other."""

    def __init__(self, sock: socket.socket):
        if sock.type != socket.SOCK_DGRAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
            raise OSError(_errno.EPROTOTYPE, "sock: not an AF_INET/AF_INET6 UDP socket")
        self._sock = sock
        self._fd = sock.fileno()
        self._members: list[Member] = []
        self._v4 = sock.family == socket.AF_INET
        self._errs = (ctypes.c_int * 0)()

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def fileno(self) -> int:
        """The socket's descriptor."""
        return self._fd

    def close(self) -> None:
        """gc_release(3): free the library's state for the socket; it stays open."""
        if self._fd >= 0:
            _lib.gc_release(self._fd)
            self._fd = -1

    def _check(self) -> int:
        if self._fd < 0:
            raise ValueError("Group is closed")
        return self._fd

    def set(self, members: Iterable[Member]) -> None:
        """Replace the whole group with members, (host, port) tuples of
        numeric IPv4 or IPv6 addresses; an empty list clears it.

        An AF_INET socket takes IPv4 members; an AF_INET6 socket takes IPv6
        members, and IPv4 ones too when it is dual-stack (IPV6_V6ONLY off).
        One bad member fails the call (OSError: EAFNOSUPPORT for a family the
        socket does not take, EINVAL for port 0 or an unspecified, multicast
        or broadcast address, E2BIG above the limit) and the previous group
        stays in place."""
        fd = self._check()
        members = [tuple(m) for m in members]
        arr = (_lib.SockaddrStorage * len(members))()
        v4 = False   # as the library: one IPv4 (or v4-mapped) member gives the group the IPv4 limit
        for i, m in enumerate(members):
            _, alen = _lib.sockaddr(m, arr[i])
            v4 = v4 or alen == 16 or ctypes.string_at(ctypes.addressof(arr[i]) + 8, 12) == bytes(10) + b"\xff\xff"
        if _lib.gc_setgroup(fd, arr, len(members)) < 0:
            raise _lib.error()
        self._members = members
        self._v4 = v4 or self._sock.family == socket.AF_INET
        if len(self._errs) < len(members):
            self._errs = (ctypes.c_int * len(members))()

    @property
    def members(self) -> list[Member]:
        """The members given to the last successful set()."""
        return list(self._members)

    def __len__(self) -> int:
        n = _lib.gc_getgroup_size(self._check())
        if n < 0:
            raise _lib.error()
        return n

    def send(self, data: Buffer, flags: int = 0) -> int:
        """Send data to every member as one datagram each; returns len(data).

        Every member is tried.  If any failed, raises PartialSendError: the
        others were sent to, and .errors names each failed member and its
        errno (gc_last_errors()).  Errors of the call itself raise OSError
        and nothing was sent: EDESTADDRREQ (no group), EMSGSIZE (data longer
        than a UDP datagram: UDP4_MAX, UDP6_MAX), EINVAL (flags other than
        MSG_DONTWAIT, MSG_CONFIRM, MSG_DONTROUTE, MSG_NOSIGNAL)."""
        fd = self._check()
        if isinstance(data, bytes):   # the common case, without the detour through _ptr()
            buf, n = data, len(data)
        else:
            buf, n, _keep = _ptr(data)
        r = _lib.gc_send(fd, buf, n, flags)
        if r >= 0:
            return r
        e = ctypes.get_errno()
        too_big = n > (UDP4_MAX if self._v4 else UDP6_MAX)
        if e in _lib.CALL_ERRNOS or (e == _errno.EMSGSIZE and too_big) or not self._members:
            raise _lib.error()
        msg = (_lib.gc_errmsg() or b"").decode(errors="replace")
        count = len(self._members)
        failed = _lib.gc_last_errors(fd, self._errs, count)
        if failed < 0:
            raise _lib.error()
        errors = {self._members[i]: self._errs[i] for i in range(count) if self._errs[i]}
        raise PartialSendError(e, msg, errors, count)

    def sendgroup(self, shared: Buffer, recipients: Sequence[Union[Recipient, tuple]], flags: int = 0) -> list[int]:
        """Send one datagram to each recipient: its prepend, then shared,
        then its append (gc_sendgroup(3)).  The group set with set() is not
        used; the engine and limit are.

        Returns each recipient's errno, 0 where its datagram was handed to the
        kernel; a recipient that breaks the rules (a bad destination, a
        datagram too big) is that recipient's failure, and the others are
        sent.  Only the call's own arguments raise OSError (EINVAL flags,
        E2BIG more recipients than the limit), and then nothing was sent."""
        fd = self._check()
        recs = [r if isinstance(r, Recipient) else Recipient(*r) for r in recipients]
        arr = (_lib.Giovec * len(recs))()
        keep = []   # buffers arr points into stay alive until the call returns
        for i, r in enumerate(recs):
            _lib.sockaddr(tuple(r.dest), arr[i].dest)
            for iov, data in ((arr[i].prepend, r.prepend), (arr[i].append, r.append)):
                iov.iov_base, iov.iov_len, k = _ptr(data)
                keep.append(k)
        base, n, k = _ptr(shared)
        sh = _lib.Iovec(base, n)
        gerrno = (ctypes.c_int * len(recs))()
        if _lib.gc_sendgroup(fd, ctypes.byref(sh), arr, len(recs), flags, gerrno) < 0:
            raise _lib.error()
        return list(gerrno)

    @property
    def engine(self) -> Engine:
        """The engine that sends for the socket (AUTO resolved: gc_get_engine()).
        Setting it chooses one (gc_set_engine()); OSError ENOTSUP when that
        engine is not available here, with the reason."""
        e = _lib.gc_get_engine(self._check())
        if e < 0:
            raise _lib.error()
        return Engine(e)

    @engine.setter
    def engine(self, e: Engine) -> None:
        if _lib.gc_set_engine(self._check(), int(Engine(e))) < 0:
            raise _lib.error()

    def auto_reason(self) -> str:
        """Why AUTO took the kernel engine for this socket, or why not
        (gc_auto_reason(3))."""
        buf = ctypes.create_string_buffer(512)
        if _lib.gc_auto_reason(self._check(), buf, len(buf)) < 0:
            raise _lib.error()
        return buf.value.decode(errors="replace")

    @property
    def limit(self) -> int:
        """The limit on group size and recipients (gc_set_limit(3);
        1..16777216, default 65536)."""
        n = _lib.gc_get_limit(self._check())
        if n < 0:
            raise _lib.error()
        return n

    @limit.setter
    def limit(self, n: int) -> None:
        if _lib.gc_set_limit(self._check(), n) < 0:
            raise _lib.error()

    def stats(self) -> Stats:
        """gc_stats(3)."""
        st = _lib.sized(_lib.Stats)
        if _lib.gc_stats(self._check(), ctypes.byref(st)) < 0:
            raise _lib.error()
        return Stats(st.group_sends, st.datagrams, st.bytes, st.failed, st.user_fallback, st.last_errno)
