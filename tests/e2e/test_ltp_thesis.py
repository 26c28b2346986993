"""LTP with the routers in the thesis's forwarding (lmsd --no-provisional),
on the tree of test_ltp.py, where r2's interface toward h2 has an ifindex
above 32767 (long-lived hosts and namespaces with interface churn get
there):

        s
        |
        r1
       /  \\
     r2    r3          r2's replier: h1     r3's replier: h3
    /  \\   /  \\
   h1  h2 h3  h4      r2 -> h2: ifindex 40000 (bit 15 of tpif set)

Without provisional marks tpif is the whole 16-bit ifindex, and the
endpoints must be told so (`groupcast ltp --no-provisional`,
GC_LTP_NO_PROVISIONAL): otherwise they read bit 15 as a provisional mark.
"""
import json

from netlab import Lab
from test_ltp import G, REPLIERS, TREE, Transfer, set_loss, summary

HIGH_IFINDEX = 40000


def test_turning_point_with_a_high_ifindex_repairs(build):
    """5 % loss on h2's link only.  h2's requests turn at r2 on the
    interface with ifindex 40000 and reach h1 marked tpif 40000; h1, told
    that the routers run --no-provisional, answers every one with a dmcast
    naming 40000, which r2 forwards down h2's link.  Every loss is repaired
    there: no escalation, nothing asked of or sent by the source.  (Read as
    a provisional mark, h1 drops the requests as not its own, h2 escalates
    after three silent tries and the source multicasts the repairs to the
    whole group.)"""
    with Lab() as lab:
        t = lab.tree(TREE, ifindex={"h2": HIGH_IFINDEX})
        S = t.addr("s")
        lab.smcroute(t, S, G)
        lmsd = {r: lab.lmsd(t.ns[r], build / "tools" / "lmsd", [(S, G, t.iface(r, via).ifname, t.addr(host))],
                            args=["--no-provisional"])
                for r, (via, host) in REPLIERS.items()}
        for d in lmsd.values():
            d.wait(lambda st: st.get("routes") and not st["routes"][0]["fallback"]
                   and all(i["attached"] for i in st["interfaces"]))
        dev = t.iface("r2", "h2").ifname
        assert json.loads(lab.ip(t.ns["r2"], "-j", "link", "show", "dev", dev))[0]["ifindex"] == HIGH_IFINDEX
        drops = set_loss(lab, t, build, {"h2": 0.05})
        x = Transfer(lab, t, build, 300_000, session=6001, recv_args=["--no-provisional"],
                     send_args=["--no-provisional"])
        res = x.finish()
        print(json.dumps(summary(res)))
        x.check_complete(res)
        assert drops["h2"].counts()[1] > 0
        h1, h2, s = (res[n]["stats"] for n in ("h1", "h2", "s"))
        assert h2["gaps_detected"] > 0 and h2["recovered"] == h2["gaps_detected"], h2
        assert h2["escalations_sent"] == 0, h2  # every request answered through r2
        assert h1["bad_packets"] == 0 and h1["requests_received"] > 0, h1
        assert h1["repairs_sent"] >= h2["gaps_detected"], (h1, h2)
        assert (s["requests_received"], s["repairs_sent"]) == (0, 0), s
        for h in ("h1", "h3", "h4"):
            assert res[h]["stats"]["gaps_detected"] == 0, (h, res[h]["stats"])
        # r2 turned h2's requests on the high interface and forwarded every
        # repair h1 sent (no loss between h1 and r2)
        st = lmsd["r2"].wait(lambda st: st["stats"]["dmcast"] >= h1["repairs_sent"])["stats"]
        assert st["dmcast"] == h1["repairs_sent"], st
        assert st["req_turned"] >= h2["requests_sent"] and st["drop_bad_if"] == 0, st
