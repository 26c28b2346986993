"""ctypes declarations of libgroupcast 1.0 (include/groupcast/*.h).

The library is found as $GROUPCAST_LIB when that is set (a path, e.g. the
build tree's build/libgroupcast.so.1), else as the installed soname
libgroupcast.so.1.  Structs mirror the C ones field for field; sized structs
get sz = sizeof(struct), as the C GC_..._INIT() macros set it.
"""
from __future__ import annotations

import ctypes
import errno as _errno
import ipaddress
import os
import socket
import sys
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int32, c_size_t, c_ssize_t,
                    c_uint, c_uint32, c_uint64, c_void_p)

SONAME = "libgroupcast.so.1"


def _load() -> ctypes.CDLL:
    path = os.environ.get("GROUPCAST_LIB") or SONAME
    try:
        return ctypes.CDLL(path, use_errno=True)
    except OSError as e:
        raise ImportError(f"groupcast: cannot load {path} ({e}); install libgroupcast1, "
                          f"or set GROUPCAST_LIB to the library's path") from e


lib = _load()


class SockaddrStorage(Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", c_char * 118), ("_align", c_uint64)]


class Iovec(Structure):
    _fields_ = [("iov_base", c_void_p), ("iov_len", c_size_t)]


class Giovec(Structure):
    """struct gc_giovec: fixed layout (frozen at 1.0)."""
    _fields_ = [("dest", SockaddrStorage), ("prepend", Iovec), ("append", Iovec)]


class Stats(Structure):
    _fields_ = [("sz", c_size_t), ("group_sends", c_uint64), ("datagrams", c_uint64), ("bytes", c_uint64),
                ("failed", c_uint64), ("user_fallback", c_uint64), ("last_errno", c_int32)]


class DccpOpts(Structure):
    _fields_ = [("sz", c_size_t), ("ccid", c_int), ("encap", c_int), ("service", c_uint32), ("mps", c_uint32),
                ("ring_slots", c_uint32), ("zone_bufs", c_uint32), ("seq_window", c_uint32),
                ("ack_ratio", c_uint32), ("timeout_ms", c_uint32)]


class DccpRxinfo(Structure):
    _fields_ = [("seq", c_uint64), ("lost", c_uint64), ("eof", c_int)]


class DccpStats(Structure):
    _fields_ = [("sz", c_size_t), ("state", c_int), ("ccid", c_int), ("cwnd", c_uint32), ("pipe", c_uint32),
                ("x_bps", c_uint64), ("rtt_us", c_uint64), ("p", c_double), ("sent", c_uint64),
                ("acked", c_uint64), ("lost", c_uint64), ("dead", c_uint64), ("retransmitted", c_uint64),
                ("received", c_uint64), ("rx_lost", c_uint64), ("syncs", c_uint64), ("invalid", c_uint64)]


class Pkt(Structure):
    """struct gc_pkt (shared memory, fixed).  flags is an _Atomic uint32_t the
    library owns; the binding never writes it."""
    _fields_ = [("off", c_uint64), ("len", c_uint32), ("flags", c_uint32), ("user_seq", c_uint64)]


def sized(cls):
    """A sized struct set up as GC_..._INIT() does: zero, sz = sizeof."""
    s = cls()
    s.sz = ctypes.sizeof(cls)
    return s


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


P = c_void_p
gc_errmsg = _fn("gc_errmsg", c_char_p)
gc_version = _fn("gc_version", c_uint)
gc_setgroup = _fn("gc_setgroup", c_int, c_int, POINTER(SockaddrStorage), c_size_t)
gc_getgroup_size = _fn("gc_getgroup_size", c_ssize_t, c_int)
gc_send = _fn("gc_send", c_ssize_t, c_int, P, c_size_t, c_int)
gc_last_errors = _fn("gc_last_errors", c_ssize_t, c_int, POINTER(c_int), c_size_t)
gc_sendgroup = _fn("gc_sendgroup", c_int, c_int, POINTER(Iovec), POINTER(Giovec), c_size_t, c_int, POINTER(c_int))
gc_set_engine = _fn("gc_set_engine", c_int, c_int, c_int)
gc_get_engine = _fn("gc_get_engine", c_int, c_int)
gc_auto_reason = _fn("gc_auto_reason", c_int, c_int, ctypes.c_char_p, c_size_t)
gc_engine_available = _fn("gc_engine_available", c_int, c_int)
gc_set_limit = _fn("gc_set_limit", c_int, c_int, c_size_t)
gc_get_limit = _fn("gc_get_limit", c_ssize_t, c_int)
gc_stats = _fn("gc_stats", c_int, c_int, POINTER(Stats))
gc_release = _fn("gc_release", c_int, c_int)

gc_dccp_connect = _fn("gc_dccp_connect", P, POINTER(SockaddrStorage), c_uint32, POINTER(DccpOpts))
gc_dccp_listen = _fn("gc_dccp_listen", P, POINTER(SockaddrStorage), c_uint32, POINTER(DccpOpts))
gc_dccp_accept = _fn("gc_dccp_accept", P, P, c_int)
gc_dccp_listener_destroy = _fn("gc_dccp_listener_destroy", None, P)
gc_dccp_ring = _fn("gc_dccp_ring", P, P)
gc_dccp_zone = _fn("gc_dccp_zone", P, P)
gc_dccp_recv = _fn("gc_dccp_recv", c_ssize_t, P, P, c_size_t, POINTER(DccpRxinfo), c_int)
gc_dccp_stats = _fn("gc_dccp_stats", c_int, P, POINTER(DccpStats))
gc_dccp_state_name = _fn("gc_dccp_state_name", c_char_p, c_int)
gc_dccp_close = _fn("gc_dccp_close", c_int, P, c_int)

gc_ring_get_pkt = _fn("gc_ring_get_pkt", POINTER(Pkt), P)
gc_ring_pos = _fn("gc_ring_pos", c_uint, P, POINTER(Pkt))
gc_ring_entries = _fn("gc_ring_entries", c_uint, P)
gc_ring_submit = _fn("gc_ring_submit", c_int, P)
gc_ring_wait = _fn("gc_ring_wait", c_int, P, c_uint, c_int)
gc_ring_acks = _fn("gc_ring_acks", c_ssize_t, P, POINTER(c_uint64), c_size_t)
gc_zone_buf = _fn("gc_zone_buf", P, P, c_size_t)
gc_zone_offset = _fn("gc_zone_offset", c_uint64, P, P)


def error(name: str = "") -> OSError:
    """The OSError for the errno a call just set, with gc_errmsg()'s line."""
    e = ctypes.get_errno()
    msg = (gc_errmsg() or b"").decode(errors="replace")
    return OSError(e, f"{os.strerror(e)}: {msg}" if msg else os.strerror(e))


def sockaddr(member: tuple, into: SockaddrStorage | None = None) -> tuple[SockaddrStorage, int]:
    """(host, port) -> sockaddr_in or sockaddr_in6 in a sockaddr_storage, and
    its length.  host is a numeric IPv4 or IPv6 address (no name lookup: a
    group send must not block on DNS); an IPv6 scope may follow as %ifname."""
    if not isinstance(member, tuple) or len(member) < 2:
        raise TypeError(f"member {member!r}: a (host, port) tuple")
    host, port = member[0], member[1]
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"member {member!r}: port must be an int in 0..65535")
    scope = 0
    if isinstance(host, str) and "%" in host:
        host, ifname = host.split("%", 1)
        scope = socket.if_nametoindex(ifname)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError as e:
        raise ValueError(f"member {member!r}: host must be a numeric IPv4 or IPv6 address") from e
    ss = into if into is not None else SockaddrStorage()
    raw = (c_char * ctypes.sizeof(SockaddrStorage)).from_buffer(ss)
    ctypes.memset(ctypes.addressof(ss), 0, ctypes.sizeof(ss))
    if ip.version == 4:
        ss.family = socket.AF_INET
        raw[2:8] = port.to_bytes(2, "big") + ip.packed
        return ss, 16
    ss.family = socket.AF_INET6
    raw[2:4] = port.to_bytes(2, "big")
    raw[8:24] = ip.packed
    raw[24:28] = scope.to_bytes(4, sys.byteorder)   # sin6_scope_id: host order
    return ss, 28


CALL_ERRNOS = frozenset({_errno.EINVAL, _errno.EFAULT, _errno.EBADF, _errno.ENOTSOCK, _errno.EPROTOTYPE,
                         _errno.EDESTADDRREQ})
