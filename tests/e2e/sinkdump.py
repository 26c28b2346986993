"""Read what `groupcast sink --dump FILE` wrote: records of
[u16 port, big-endian][u16 length, big-endian][that many bytes]."""
import struct


def read_dump(path):
    """[(port, payload bytes), ...] in arrival order."""
    with open(path, "rb") as f:
        data = f.read()
    pos, out = 0, []
    while pos < len(data):
        port, n = struct.unpack_from("!HH", data, pos)
        out.append((port, data[pos + 4:pos + 4 + n]))
        pos += 4 + n
    return out
