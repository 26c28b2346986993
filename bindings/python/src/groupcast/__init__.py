"""groupcast: one send, many unicast receivers (libgroupcast 1.0 over ctypes).

    import socket, groupcast
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with groupcast.Group(sock) as g:
        g.set([("10.0.0.2", 5000), ("10.0.0.3", 5000)])
        g.send(b"frame")        # every member gets it, or PartialSendError names who did not

groupcast.dccp has DCCP connections.  The library is libgroupcast.so.1, or
$GROUPCAST_LIB.  Man pages: groupcast(7), gc_send(3), gc_sendgroup(3),
gc_set_engine(3), gc_dccp(3).
"""
from . import dccp
from ._lib import gc_version as _gc_version
from .group import UDP4_MAX, UDP6_MAX, Engine, Group, Member, PartialSendError, Recipient, Stats

__all__ = ["Group", "Engine", "PartialSendError", "Recipient", "Stats", "Member", "UDP4_MAX", "UDP6_MAX",
           "dccp", "library_version"]
__version__ = "1.0.0"


def library_version() -> tuple[int, int, int]:
    """The version of the libgroupcast this process loaded (gc_version())."""
    v = _gc_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)
