#!/usr/bin/env python3
"""An asyncio DCCP echo server on groupcast.dccp: each packet a client sends
comes back as one packet.  Connections are read with loop.add_reader() on
their fileno(); accept() blocks, so it runs in the default executor.

    dccp_echo.py --listen 10.0.0.1:6511 [--udp] [--connections 1]

Prints "listening" once it accepts, and a JSON line per connection when the
client has closed it: {"peer_packets": N, "echoed": N}.
"""
import argparse
import asyncio
import json

from groupcast import dccp


async def serve(conn: dccp.Connection) -> dict:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    echoed = 0

    def readable():
        nonlocal echoed
        while True:   # everything queued now; the fd stays readable while more waits
            try:
                pkt = conn.recv_packet(timeout=0)
            except BlockingIOError:
                return
            except OSError as e:
                loop.remove_reader(conn.fileno())
                done.set_exception(e)
                return
            if pkt.eof:
                loop.remove_reader(conn.fileno())
                done.set_result(None)
                return
            conn.send(pkt.data)
            echoed += 1

    loop.add_reader(conn.fileno(), readable)
    await done
    stats = conn.stats()
    conn.close()
    return {"peer_packets": stats.received, "echoed": echoed}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True, help="HOST:PORT")
    ap.add_argument("--udp", action="store_true", help="DCCP-UDP (RFC 6773) instead of native DCCP")
    ap.add_argument("--connections", type=int, default=1)
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    encap = dccp.Encap.UDP if a.udp else dccp.Encap.NATIVE
    loop = asyncio.get_running_loop()
    with dccp.listen((host.strip("[]"), int(port)), encap=encap) as lst:
        print("listening", flush=True)
        tasks = []
        for _ in range(a.connections):
            conn = await loop.run_in_executor(None, lst.accept, 30.0)
            tasks.append(asyncio.create_task(serve(conn)))
        for t in tasks:
            print(json.dumps(await t), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
