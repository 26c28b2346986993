"""DCCP (RFC 4340) connections: groupcast/dccp.h, gc_dccp(3).

    with groupcast.dccp.connect(("10.0.0.2", 6511), encap=Encap.UDP) as c:
        c.send(b"hello")          # one call, one DCCP packet
        data = c.recv(timeout=1)

A connection has a fileno() that is readable while received packets wait, so
it works with selectors and asyncio's loop.add_reader().  The C API has no
descriptor for that (gc_dccp_recv() blocks on the connection's own lock), so
each connection runs one receiver thread that calls gc_dccp_recv() (ctypes
drops the GIL for it) and queues what arrives, at most `queue` packets, behind
an eventfd in semaphore mode: the eventfd counts the queued packets.  While
the queue is full the thread stops reading and the library holds the rest.
"""
from __future__ import annotations

import collections
import ctypes
import enum
import errno as _errno
import os
import select
import threading
from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

from . import _lib

Address = Tuple[str, int]
UDP_PORT = 6511  #: GC_DCCP_UDP_PORT: RFC 6773's default DCCP-UDP port
_POLL_MS = 100   #: how long the receiver thread blocks in gc_dccp_recv() before checking for close()


class Encap(enum.IntEnum):
    """enum gc_dccp_encap."""
    NATIVE = 0  #: IP protocol 33 over a raw socket: needs CAP_NET_RAW
    UDP = 1     #: RFC 6773 DCCP-UDP


class State(enum.IntEnum):
    """enum gc_dccp_state."""
    CLOSED = 0
    LISTEN = 1
    REQUEST = 2
    RESPOND = 3
    PARTOPEN = 4
    OPEN = 5
    CLOSEREQ = 6
    CLOSING = 7
    TIMEWAIT = 8


class Packet(NamedTuple):
    """What Connection.recv_packet() returns."""
    data: bytes  #: the payload (b"" with eof)
    seq: int     #: its 48-bit DCCP sequence number
    lost: int    #: data packets lost between the previous one delivered and this one
    eof: bool    #: the peer closed (lost: data lost after the last packet)


@dataclass(frozen=True)
class Stats:
    """gc_dccp_stats(3)."""
    state: State
    ccid: int
    cwnd: int           #: CCID 2: window, packets
    pipe: int           #: packets in flight
    x_bps: int          #: CCID 3: allowed rate, bytes/s
    rtt_us: int         #: smoothed RTT (0: none yet)
    p: float            #: loss event rate
    sent: int           #: data packets sent
    acked: int          #: ...acknowledged by the peer
    lost: int           #: ...the sender took as lost
    dead: int           #: ring packets dropped as dead before they went
    retransmitted: int  #: always 0: DCCP never retransmits
    received: int       #: data packets received
    rx_lost: int        #: data packets the peer sent that never came
    syncs: int          #: Syncs sent
    invalid: int        #: packets dropped by the RFC 4340 7.5 checks or parsing


def _opts(ccid: int, encap: Encap, service: int, mps: int, ring_slots: int, timeout: float) -> _lib.DccpOpts:
    o = _lib.sized(_lib.DccpOpts)
    o.ccid, o.encap, o.service, o.mps, o.ring_slots = ccid, int(encap), service, mps, ring_slots
    o.timeout_ms = int(timeout * 1000)
    return o


def _ms(timeout: Optional[float]) -> int:
    return -1 if timeout is None else max(0, int(timeout * 1000))


class Connection:
    """One DCCP connection (struct gc_dccp).  Made by connect() or
    Listener.accept(); ended by close() (or the with block), which sends
    what is queued, closes with the peer and frees everything.

    send() is one DCCP packet per call, datagram boundaries kept; the CCID
    decides when it goes, and DCCP never retransmits.  recv() returns b""
    once the peer closed, and raises ConnectionResetError on a Reset."""

    def __init__(self, handle: int, queue: int = 1024, mps: int = 0):
        self._c = handle
        self._ring = _lib.gc_dccp_ring(handle)
        self._zone = _lib.gc_dccp_zone(handle)
        self._slots = _lib.gc_ring_entries(self._ring)
        self._mps = mps or 1400   # the library's default
        self._seq = 0
        self._send_lock = threading.Lock()
        self._q: collections.deque = collections.deque()
        self._room = threading.Condition()
        self._max = queue
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC | os.EFD_SEMAPHORE)
        self._stop = False
        self._eof: Optional[Packet] = None
        self._thread = threading.Thread(target=self._reader, name="groupcast-dccp-rx", daemon=True)
        self._thread.start()

    # -- receiving ------------------------------------------------------------

    def _push(self, item) -> None:
        with self._room:
            self._q.append(item)
        os.eventfd_write(self._efd, 1)

    def _reader(self) -> None:
        buf = ctypes.create_string_buffer(65536)
        ri = _lib.DccpRxinfo()
        while not self._stop:
            with self._room:
                while len(self._q) >= self._max and not self._stop:
                    self._room.wait(_POLL_MS / 1000)
            if self._stop:
                return
            n = _lib.gc_dccp_recv(self._c, buf, len(buf), ctypes.byref(ri), _POLL_MS)
            if n < 0:
                if ctypes.get_errno() == _errno.EAGAIN:
                    continue
                self._push(_lib.error())
                return
            if ri.eof:
                self._push(Packet(b"", ri.seq, ri.lost, True))
                return
            self._push(Packet(buf.raw[:min(n, len(buf))], ri.seq, ri.lost, False))

    def fileno(self) -> int:
        """A descriptor that is readable while a packet (or the end of the
        connection) waits for recv(): use it with selectors or
        loop.add_reader()."""
        if self._efd < 0:
            raise ValueError("connection is closed")
        return self._efd

    def recv_packet(self, timeout: Optional[float] = None) -> Packet:
        """The next packet with its sequence number and the count of data
        packets lost before it (gc_dccp_recv(3)).  timeout None waits
        forever, 0 polls; BlockingIOError (EAGAIN) when nothing arrived in
        time.  After the peer closed: a Packet with eof set, every time."""
        fd = self.fileno()
        if self._eof is not None:
            return self._eof
        while True:
            try:
                os.eventfd_read(fd)
                break
            except BlockingIOError:
                if timeout is not None and timeout <= 0:
                    raise BlockingIOError(_errno.EAGAIN, "gc_dccp_recv: nothing arrived") from None
                if not select.select([fd], [], [], timeout)[0]:
                    raise BlockingIOError(_errno.EAGAIN, f"gc_dccp_recv: nothing arrived in {timeout} s") from None
                timeout = 0 if timeout is not None else None
        with self._room:
            item = self._q.popleft()
            self._room.notify()
        if isinstance(item, OSError):
            self._eof = Packet(b"", 0, 0, True)
            if item.errno == _errno.ECONNRESET:
                raise ConnectionResetError(item.errno, item.strerror)
            raise item
        if item.eof:
            self._eof = item
            os.eventfd_write(fd, 1)   # the end stays readable, as a socket's does
        return item

    def recv(self, timeout: Optional[float] = None) -> bytes:
        """The next payload; b"" once the peer closed.  As recv_packet()."""
        return self.recv_packet(timeout).data

    # -- sending --------------------------------------------------------------

    def send(self, data: bytes, timeout: Optional[float] = None) -> int:
        """Queue data as one DCCP packet on the connection's ring and wake the
        engine; returns the packet's number (its user_seq, for acked()).

        Waits for a free ring slot up to timeout (None: forever, 0: not at
        all: BlockingIOError).  ValueError when data is longer than the
        connection's mps (1400 bytes unless set)."""
        if self._c is None:
            raise ValueError("connection is closed")
        n = len(data)
        if n > self._mps:
            raise ValueError(f"data: {n} bytes is more than the connection's mps ({self._mps})")
        with self._send_lock:
            p = _lib.gc_ring_get_pkt(self._ring)
            if not p:
                if _lib.gc_ring_wait(self._ring, 1, _ms(timeout)) < 0:
                    e = ctypes.get_errno()
                    if e == _errno.ETIMEDOUT:
                        raise BlockingIOError(_errno.EAGAIN, "the ring is full")
                    raise _lib.error()
                p = _lib.gc_ring_get_pkt(self._ring)
                if not p:
                    raise _lib.error()
            pos = _lib.gc_ring_pos(self._ring, p)
            buf = _lib.gc_zone_buf(self._zone, pos)
            if not buf:
                raise _lib.error()
            ctypes.memmove(buf, data, n)
            self._seq += 1
            pk = p.contents
            pk.off, pk.len, pk.user_seq = _lib.gc_zone_offset(self._zone, buf), n, self._seq
            if _lib.gc_ring_submit(self._ring) < 0:
                raise _lib.error()
            return self._seq

    def acked(self) -> list[int]:
        """Numbers (send()'s return values) of packets the peer acknowledged
        since the last call, oldest first (gc_ring_acks())."""
        out = (ctypes.c_uint64 * self._slots)()
        n = _lib.gc_ring_acks(self._ring, out, self._slots)
        if n < 0:
            raise _lib.error()
        return list(out[:n])

    def stats(self) -> Stats:
        """gc_dccp_stats(3)."""
        if self._c is None:
            raise ValueError("connection is closed")
        st = _lib.sized(_lib.DccpStats)
        if _lib.gc_dccp_stats(self._c, ctypes.byref(st)) < 0:
            raise _lib.error()
        return Stats(State(st.state), st.ccid, st.cwnd, st.pipe, st.x_bps, st.rtt_us, st.p, st.sent, st.acked,
                     st.lost, st.dead, st.retransmitted, st.received, st.rx_lost, st.syncs, st.invalid)

    # -- lifetime -------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """gc_dccp_close(3): send what the ring holds (up to timeout), close
        with the peer, free everything.  TimeoutError if the close was not
        acknowledged in time (the connection was reset; it is freed anyway)."""
        if self._c is None:
            return
        self._stop = True
        with self._room:
            self._room.notify_all()
        self._thread.join()
        c, self._c = self._c, None
        os.close(self._efd)
        self._efd = -1
        if _lib.gc_dccp_close(c, _ms(timeout)) < 0:
            raise _lib.error()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if getattr(self, "_c", None) is not None:
            try:
                self.close(0)
            except OSError:
                pass


def connect(peer: Address, *, encap: Encap = Encap.NATIVE, ccid: int = 2, service: int = 0, mps: int = 0,
            ring_slots: int = 0, timeout: float = 10.0, queue: int = 1024) -> Connection:
    """Active open to peer, (host, port); returns once the handshake is done
    (gc_dccp_connect(3)).  ConnectionRefusedError on a Reset, TimeoutError
    without a Response in time, PermissionError for NATIVE without
    CAP_NET_RAW.  Zero options take the library's defaults (mps 1400, 1024
    ring slots)."""
    ss, alen = _lib.sockaddr(peer)
    o = _opts(ccid, encap, service, mps, ring_slots, timeout)
    c = _lib.gc_dccp_connect(ctypes.byref(ss), alen, ctypes.byref(o))
    if not c:
        raise _lib.error()
    return Connection(c, queue, mps)


class Listener:
    """A passive DCCP socket (gc_dccp_listen(3)): answers Requests with Init
    Cookies and keeps no state for a connection until its handshake is done.
    Connections outlive their listener."""

    def __init__(self, local: Address, *, encap: Encap = Encap.NATIVE, ccid: int = 2, service: int = 0,
                 mps: int = 0, ring_slots: int = 0, queue: int = 1024):
        ss, alen = _lib.sockaddr(local)
        o = _opts(ccid, encap, service, mps, ring_slots, 0)
        self._l = _lib.gc_dccp_listen(ctypes.byref(ss), alen, ctypes.byref(o))
        if not self._l:
            raise _lib.error()
        self._mps, self._queue = mps, queue

    def accept(self, timeout: Optional[float] = None) -> Connection:
        """The next completed connection; timeout None waits forever.
        TimeoutError when none completed in time.  The GIL is released while
        it waits: in asyncio, run it in an executor."""
        if self._l is None:
            raise ValueError("listener is closed")
        c = _lib.gc_dccp_accept(self._l, _ms(timeout))
        if not c:
            raise _lib.error()
        return Connection(c, self._queue, self._mps)

    def close(self) -> None:
        """gc_dccp_listener_destroy(3)."""
        if self._l is not None:
            _lib.gc_dccp_listener_destroy(self._l)
            self._l = None

    def __enter__(self) -> "Listener":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def listen(local: Address, **kw) -> Listener:
    """Listener(local, ...)."""
    return Listener(local, **kw)


def state_name(state: int) -> str:
    """gc_dccp_state_name(3): "OPEN", "CLOSED", ...; "?" for unknown values."""
    return _lib.gc_dccp_state_name(state).decode()
