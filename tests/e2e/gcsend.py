#!/usr/bin/env python3
"""Drive libgroupcast with ctypes: read a JSON job on stdin, print JSON results.

Meant to run inside the sender namespace:
    ip netns exec NS python3 gcsend.py /path/libgroupcast.so < job.json

Job:
    {"engine": "mmsg", "socket": "inet" | "inet6", "pace_ms": 20,
     "sends": [{"kind": "send", "members": [[addr, port], ...], "payload_hex": "..."},
               {"kind": "sendgroup", "shared_hex": "...",
                "recs": [[addr, port, prepend_hex, append_hex], ...]}]}
An "inet6" socket is dual-stack (IPV6_V6ONLY off), so it takes v4 members too.
Before every "send" the group is replaced with gc_setgroup(); sleeps pace_ms
after every send.

Output when the engine is unavailable: {"available": false, "reason": "..."}.
Otherwise {"available": true, "engine": <gc_get_engine name>, "results": [...],
"stats": {...}} with one result per send:
    send:      {"setgroup": r, "ret": r, "errno": e, "failed": n, "gerrno": [...]}
    sendgroup: {"ret": r, "errno": e, "gerrno": [...]}
errno is 0 unless ret is -1 (then "errmsg" is gc_errmsg()).
"""
import ctypes
import json
import socket
import struct
import sys
import time
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_ssize_t, c_uint64, c_void_p


class SockaddrStorage(ctypes.Structure):
    """struct sockaddr_storage: 128 bytes, aligned like unsigned long."""
    _fields_ = [("raw", ctypes.c_ubyte * 120), ("_align", c_uint64)]


class Iovec(ctypes.Structure):
    _fields_ = [("iov_base", c_void_p), ("iov_len", c_size_t)]


class GcGiovec(ctypes.Structure):
    _fields_ = [("dest", SockaddrStorage), ("prepend", Iovec), ("append", Iovec)]


class GcStats(ctypes.Structure):
    _fields_ = [("group_sends", c_uint64), ("datagrams", c_uint64), ("bytes", c_uint64),
                ("failed", c_uint64), ("last_errno", c_int), ("user_fallback", c_uint64)]


assert ctypes.sizeof(SockaddrStorage) == 128 and ctypes.sizeof(GcGiovec) == 160


def load(path):
    lib = ctypes.CDLL(path, use_errno=True)
    sigs = {
        "gc_setgroup": (c_int, [c_int, POINTER(SockaddrStorage), c_size_t]),
        "gc_send": (c_ssize_t, [c_int, c_void_p, c_size_t, c_int]),
        "gc_last_errors": (c_ssize_t, [c_int, POINTER(c_int), c_size_t]),
        "gc_sendgroup": (c_int, [c_int, POINTER(Iovec), POINTER(GcGiovec), c_size_t, c_int, POINTER(c_int)]),
        "gc_set_engine": (c_int, [c_int, c_int]),
        "gc_get_engine": (c_int, [c_int]),
        "gc_engine_available": (c_int, [c_int]),
        "gc_engine_name": (c_char_p, [c_int]),
        "gc_engine_from_name": (c_int, [c_char_p]),
        "gc_stats": (c_int, [c_int, POINTER(GcStats)]),
        "gc_errmsg": (c_char_p, []),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def sockaddr(addr, port):
    """sockaddr_in or sockaddr_in6 (family in host order, port big-endian)."""
    if ":" in addr:
        raw = (struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", port, 0)
               + socket.inet_pton(socket.AF_INET6, addr) + struct.pack("=I", 0))
    else:
        raw = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_pton(socket.AF_INET, addr)
    ss = SockaddrStorage()
    ctypes.memmove(ctypes.byref(ss), raw, len(raw))
    return ss


class Buffers:
    """Keeps the memory behind iovecs alive for the duration of a call."""

    def __init__(self):
        self.keep = []

    def iovec(self, data):
        if not data:
            return Iovec(None, 0)
        buf = ctypes.create_string_buffer(data, len(data))
        self.keep.append(buf)
        return Iovec(ctypes.cast(buf, c_void_p), len(data))


def call(lib, fn, *args):
    """Call fn; return (result, errno, errmsg) with errno/errmsg only on -1."""
    ctypes.set_errno(0)
    ret = fn(*args)
    if ret == -1:
        return ret, ctypes.get_errno(), lib.gc_errmsg().decode()
    return ret, 0, None


def do_send(lib, sd, job):
    members = job["members"]
    group = (SockaddrStorage * len(members))(*(sockaddr(a, p) for a, p in members))
    res = {"kind": "send"}
    res["setgroup"], res["errno"], res["errmsg"] = call(lib, lib.gc_setgroup, sd, group, len(members))
    if res["setgroup"] != 0:
        return res
    payload = bytes.fromhex(job["payload_hex"])
    res["ret"], res["errno"], res["errmsg"] = call(lib, lib.gc_send, sd, payload, len(payload), 0)
    gerrno = (c_int * len(members))(*([-1] * len(members)))
    res["failed"] = lib.gc_last_errors(sd, gerrno, len(members))
    res["gerrno"] = list(gerrno)
    return res


def do_sendgroup(lib, sd, job):
    bufs = Buffers()
    recs = job["recs"]
    rec = (GcGiovec * len(recs))(*(
        GcGiovec(sockaddr(a, p), bufs.iovec(bytes.fromhex(pre)), bufs.iovec(bytes.fromhex(app)))
        for a, p, pre, app in recs))
    shared = bufs.iovec(bytes.fromhex(job["shared_hex"]))
    gerrno = (c_int * len(recs))(*([-1] * len(recs)))
    res = {"kind": "sendgroup"}
    res["ret"], res["errno"], res["errmsg"] = call(
        lib, lib.gc_sendgroup, sd, ctypes.byref(shared), rec, len(recs), 0, gerrno)
    res["gerrno"] = list(gerrno)
    return res


def main():
    lib = load(sys.argv[1])
    job = json.load(sys.stdin)
    engine = lib.gc_engine_from_name(job["engine"].encode())
    if engine == -1:
        sys.exit(f"unknown engine {job['engine']!r}")
    if lib.gc_engine_available(engine) != 0:
        json.dump({"available": False, "reason": lib.gc_errmsg().decode()}, sys.stdout)
        return
    if job.get("socket", "inet") == "inet6":
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sd = sock.fileno()
    ret, err, msg = call(lib, lib.gc_set_engine, sd, engine)
    if ret != 0:
        sys.exit(f"gc_set_engine({job['engine']}): errno {err}: {msg}")
    results = []
    for send in job["sends"]:
        results.append((do_send if send["kind"] == "send" else do_sendgroup)(lib, sd, send))
        time.sleep(job.get("pace_ms", 20) / 1000)
    st = GcStats()
    if lib.gc_stats(sd, ctypes.byref(st)) != 0:
        sys.exit(f"gc_stats: {lib.gc_errmsg().decode()}")
    json.dump({"available": True, "engine": lib.gc_engine_name(lib.gc_get_engine(sd)).decode(),
               "results": results, "stats": {name: getattr(st, name) for name, _ in GcStats._fields_}},
              sys.stdout)


if __name__ == "__main__":
    main()
