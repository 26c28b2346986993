#!/usr/bin/env python3
"""Where one thread's CPU time goes, from `perf script -F tid,ip,sym` with call
chains (perf record -g): every sample is put in the first category whose
function is on its chain, else under its own leaf function.

    perf script -i perf.data --tid TID -F tid,ip,sym | python3 bench/perf_split.py

Categories (a sample goes to the first that matches):
  send: IP/UDP receive   sendmsg/sendmmsg whose softirq ran the receive path
                         of the packets just sent (veth -> IP -> UDP socket)
  send                   the rest of sendmsg/sendmmsg (copy, GSO segmentation,
                         veth)
  receive (recvmmsg/recvmsg), sleep/wake (epoll), futex, notify (a write:
  the ring's eventfd), pacing sleep (clock_nanosleep), other context switches
"""
import collections
import sys

RX = ("__udp4_lib_rcv", "ip_rcv", "ip_local_deliver", "process_backlog", "__netif_receive_skb")
CATS = (("sys_sendmsg", "send"), ("sendmmsg", "send"), ("recvmmsg", "receive"), ("sys_recvmsg", "receive"),
        ("epoll", "sleep/wake (epoll)"), ("futex", "futex"), ("ksys_write", "notify (eventfd write)"),
        ("clock_nanosleep", "pacing sleep"), ("__schedule", "other context switches"))


def main():
    cats = collections.Counter()
    chain = []

    def sample():
        if not chain:
            return
        s = " ".join(chain)
        for fn, name in CATS:
            if fn in s:
                if name == "send" and any(r in s for r in RX):
                    name = "send: IP/UDP receive of the sent packets (softirq)"
                cats[name] += 1
                return
        cats["user: " + chain[0]] += 1

    for line in sys.stdin:
        parts = line.split()
        if not parts:
            sample()
            chain.clear()
        elif not (len(parts) <= 2 and parts[0].isdigit()):
            chain.append(parts[-1])
    sample()
    total = sum(cats.values())
    print(f"{total} samples")
    print("| share | where |\n|---|---|")
    for k, v in cats.most_common(12):
        print(f"| {100 * v / total:.1f} % | {k} |")


if __name__ == "__main__":
    main()
