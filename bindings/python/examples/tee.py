#!/usr/bin/env python3
"""A syslog/NetFlow tee: every datagram that arrives on --listen goes, byte
for byte, to every receiver, with one group send.  On SIGTERM or SIGINT it
prints its counters as one JSON line and exits.

    tee.py --listen 0.0.0.0:2055 [--engine kernel] 10.0.0.5/2055 [fd00::6]/2055 ...
"""
import argparse
import json
import os
import signal
import socket
import sys

import groupcast


def receiver(text: str) -> tuple[str, int]:   # samplicator's HOST/PORT
    return text.rpartition("/")[0].strip("[]"), int(text.rpartition("/")[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to receive on")
    ap.add_argument("--engine", default="auto", choices=[e.libname for e in groupcast.Engine])
    ap.add_argument("receivers", nargs="+", type=receiver, metavar="HOST/PORT")
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    inp = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    inp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    inp.bind((host.strip("[]"), int(port)))
    out = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)   # dual-stack: IPv4 and IPv6 receivers
    out.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    buf = bytearray(65535)
    with groupcast.Group(out) as g:
        g.engine = groupcast.Engine[a.engine.upper()]
        g.set(a.receivers)
        count = {"in": 0, "failed": {}, "engine": g.engine.libname}
        print(f"tee: {len(a.receivers)} receivers on {count['engine']}", file=sys.stderr, flush=True)
        try:
            while True:
                n = inp.recv_into(buf)
                count["in"] += 1
                try:
                    g.send(memoryview(buf)[:n])
                except groupcast.PartialSendError as e:   # the others got it; say who did not
                    for (h, p), err in e.errors.items():
                        count["failed"][f"{h}/{p}"] = count["failed"].get(f"{h}/{p}", 0) + 1
                        print(f"tee: {h}/{p}: {os.strerror(err)}", file=sys.stderr)
        except (SystemExit, KeyboardInterrupt):
            pass
        finally:
            count["stats"] = vars(g.stats())
            print(json.dumps(count), flush=True)


if __name__ == "__main__":
    main()
