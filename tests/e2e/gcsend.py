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

Optional job keys (all additive; without them the behaviour is as above):
    "stats_each": true     each result also gets "stats", gc_stats() right after that send
    a send's "wait_file": X   before that send, create X + ".reached", then wait (60 s) for X
    a send's "timed": true    its result gets "t_send", time.monotonic() just before the send
    a send's "run_before": [argv, ...]  before that send (after any wait_file), run each argv
                           here, in turn (our namespace, no shell); each must exit 0; their
                           stdouts go in the result's "before_out", a list
    "probe": ["kernel", ...]  before anything else, for each engine: gc_engine_available(),
                           gc_set_engine() on a fresh socket, and gc_set_engine() on a
                           fresh socket first set to mmsg; output "probe": {name:
                           {"available": [ret, errno, errmsg], "set_engine": [...],
                           "engine_after": name or null, "set_engine_after_mmsg": [...]}}
    "threads": [job, ...]  run each sub-job (keys "engine", "socket", "pace_ms", "sends",
                           "stats_each") on a socket of its own in a thread of its own, all
                           starting together; output "threads": [{"engine", "results",
                           "stats", "t_start", "t_end"}, ...] instead of the single-socket keys
    "start_file": path     wait (up to 60 s) until path exists before the first send
    "ready_file": path     after the last send write our pid to path (sockets still open) ...
    "hold_file": path      ... then wait (up to "hold_s", default 60 s) until path exists
    "sockopts": [[level, name, value], ...]  setsockopt() on the socket before gc_set_engine();
                           value an int, or a string (bytes, e.g. a device name)
    "bind": [addr, port]   bind() the socket before gc_set_engine()
    "pid_file": path       write our pid to path first thing, then ...
    "go_file": path        ... wait (up to 60 s) until path exists before gc_set_engine()
    "attached_file": path  after gc_set_engine(), write our pid to path
t_start / t_end (time.monotonic() around the sends) come with every socket's output, and
"auto_reason": gc_auto_reason() after the sends.
"""
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import threading
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
    """struct gc_stats (group.h): sized, sz first (GC_STATS_INIT)."""
    _fields_ = [("sz", c_size_t), ("group_sends", c_uint64), ("datagrams", c_uint64), ("bytes", c_uint64),
                ("failed", c_uint64), ("user_fallback", c_uint64), ("last_errno", ctypes.c_int32)]


assert ctypes.sizeof(SockaddrStorage) == 128 and ctypes.sizeof(GcGiovec) == 160
assert ctypes.sizeof(GcStats) == 56  # sizeof(struct gc_stats) on LP64


def expected(sends):
    """What a job's sends must deliver: {(addr, port): [datagram, ...] in send
    order}.  Pure; the tests import it to check the receivers."""
    want = {}
    for s in sends:
        if s["kind"] == "send":
            for addr, port in s["members"]:
                want.setdefault((addr, port), []).append(bytes.fromhex(s["payload_hex"]))
        else:
            shared = bytes.fromhex(s["shared_hex"])
            for addr, port, pre, app in s["recs"]:
                want.setdefault((addr, port), []).append(bytes.fromhex(pre) + shared + bytes.fromhex(app))
    return want


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
        "gc_auto_reason": (c_int, [c_int, c_char_p, c_size_t]),
    }
    for name, (restype, argtypes) in sigs.items():
        if name == "gc_auto_reason" and not hasattr(lib, name):
            continue  # a library from before gc_auto_reason(): "auto_reason" is null
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


def stats_of(lib, sd):
    st = GcStats(sz=ctypes.sizeof(GcStats))
    if lib.gc_stats(sd, ctypes.byref(st)) != 0:
        raise RuntimeError(f"gc_stats: {lib.gc_errmsg().decode()}")
    return {name: getattr(st, name) for name, _ in GcStats._fields_ if name != "sz"}


def wait_file(path, timeout):
    """Wait until path exists (bounded); False if it never did."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def open_socket(kind):
    if kind == "inet6":
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        return sock
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def probe(lib, names):
    """gc_engine_available() and gc_set_engine() for each engine, on fresh
    sockets: one straight away, one after gc_set_engine(mmsg)."""
    out = {}
    mmsg = lib.gc_engine_from_name(b"mmsg")
    for name in names:
        e = lib.gc_engine_from_name(name.encode())
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock2:
            avail = call(lib, lib.gc_engine_available, e)
            setr = call(lib, lib.gc_set_engine, sock.fileno(), e)
            got = lib.gc_get_engine(sock.fileno())
            call(lib, lib.gc_set_engine, sock2.fileno(), mmsg)
            setr2 = call(lib, lib.gc_set_engine, sock2.fileno(), e)
            out[name] = {"available": list(avail), "set_engine": list(setr),
                         "engine_after": lib.gc_engine_name(got).decode() if got >= 0 else None,
                         "set_engine_after_mmsg": list(setr2)}
    return out


def write_pid(path):
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)


def auto_reason(lib, sd):
    if not hasattr(lib, "gc_auto_reason"):
        return None
    buf = ctypes.create_string_buffer(256)
    if lib.gc_auto_reason(sd, buf, len(buf)) != 0:
        return "error: " + lib.gc_errmsg().decode()
    return buf.value.decode()


def run_socket(lib, engine, job, start=None):
    """One socket: set the engine, run the job's sends; returns (output, socket)."""
    sock = open_socket(job.get("socket", "inet"))
    sd = sock.fileno()
    for level, name, value in job.get("sockopts", []):
        sock.setsockopt(level, name, value.encode() if isinstance(value, str) else value)
    if job.get("bind"):
        sock.bind(tuple(job["bind"]))
    if job.get("go_file") and not wait_file(job["go_file"], 60):
        raise RuntimeError(f"go_file {job['go_file']} did not appear in 60 s")
    ret, err, msg = call(lib, lib.gc_set_engine, sd, engine)
    if ret != 0:
        raise RuntimeError(f"gc_set_engine({job['engine']}): errno {err}: {msg}")
    if job.get("attached_file"):
        write_pid(job["attached_file"])
    if start is not None:
        start()
    results = []
    t_start = time.monotonic()
    for send in job["sends"]:
        if send.get("wait_file"):
            open(send["wait_file"] + ".reached", "w").close()
            if not wait_file(send["wait_file"], 60):
                raise RuntimeError(f"wait_file {send['wait_file']} did not appear in 60 s")
        before = None
        if send.get("run_before"):
            before = [subprocess.run(argv, check=True, capture_output=True, text=True).stdout
                      for argv in send["run_before"]]
        t_send = time.monotonic()
        results.append((do_send if send["kind"] == "send" else do_sendgroup)(lib, sd, send))
        if before is not None:
            results[-1]["before_out"] = before
        if send.get("timed"):
            results[-1]["t_send"] = t_send
        if job.get("stats_each"):
            results[-1]["stats"] = stats_of(lib, sd)
        time.sleep(job.get("pace_ms", 20) / 1000)
    t_end = time.monotonic()
    return {"engine": lib.gc_engine_name(lib.gc_get_engine(sd)).decode(), "results": results,
            "stats": stats_of(lib, sd), "t_start": t_start, "t_end": t_end,
            "auto_reason": auto_reason(lib, sd)}, sock


def run_threads(lib, jobs, start):
    """Each sub-job on its own socket and thread; the sends start together."""
    barrier = threading.Barrier(len(jobs), action=start)
    outs, errors, socks = [None] * len(jobs), [], []

    def worker(i, sub):
        try:
            engine = lib.gc_engine_from_name(sub["engine"].encode())
            outs[i], sock = run_socket(lib, engine, sub, start=barrier.wait)
            socks.append(sock)
        except Exception as e:  # reported after the join
            barrier.abort()
            errors.append(f"thread {i}: {e}")

    threads = [threading.Thread(target=worker, args=(i, sub)) for i, sub in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return outs, socks


def main():
    lib = load(sys.argv[1])
    job = json.load(sys.stdin)
    if job.get("pid_file"):
        write_pid(job["pid_file"])
    probed = {"probe": probe(lib, job["probe"])} if job.get("probe") else {}
    engine = lib.gc_engine_from_name(job["engine"].encode())
    if engine == -1:
        sys.exit(f"unknown engine {job['engine']!r}")
    if lib.gc_engine_available(engine) != 0:
        json.dump({"available": False, "reason": lib.gc_errmsg().decode(), **probed}, sys.stdout)
        return

    def start():
        if job.get("start_file") and not wait_file(job["start_file"], 60):
            raise RuntimeError(f"start_file {job['start_file']} did not appear in 60 s")

    try:
        if "threads" in job:
            outs, socks = run_threads(lib, job["threads"], start)
            out = {"threads": outs}
        else:
            out, sock = run_socket(lib, engine, job, start=start)
            socks = [sock]
    except RuntimeError as e:
        sys.exit(str(e))
    if job.get("ready_file"):
        with open(job["ready_file"] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(job["ready_file"] + ".tmp", job["ready_file"])
        if job.get("hold_file"):
            wait_file(job["hold_file"], job.get("hold_s", 60))
    json.dump({"available": True, **out, **probed}, sys.stdout)
    del socks  # the sockets stay open (and their engine attached) until here

if __name__ == "__main__":
    main()
