"""lib/dccp has no cycles and the connection names no CCID.

Each file calls only functions of files listed above it in the dependency
order of lib/dccp/README.md (wire -> options -> CCIDs -> conn -> sock ->
API): nothing below the connection calls up.  The connection layer
(conn.c, listener.c) drives the CCIDs through the ops tables of ccid.h only: it
includes no ccid2.h/ccid3.h, compares with no DCCP_CCID2/DCCP_CCID3 and
calls no dccp_ccid2_*/dccp_ccid3_* function.

A static check (no build needed), like test_ring_layers.py: it finds the
dccp_*/gc_* functions each file defines and the names each file calls.
Calls through function pointers (the ccid.h ops) are not seen."""
import pathlib
import re

import layers

ROOT = pathlib.Path(__file__).resolve().parents[2]
DCCP = ROOT / "lib" / "dccp"
CONN_LAYER = ("conn.c", "listener.c")  # the connection and its listener

DEF = re.compile(r"^(?:GC_EXPORT\s+)?(?!static)[A-Za-z_][\w \t*]*?\b((?:gc|dccp)_\w+)\(", re.M)
CALL = re.compile(r"\b((?:gc|dccp)_\w+)\s*\(")


def layer_order():
    """{file: rank} from the list at the top of lib/dccp/README.md."""
    text = (DCCP / "README.md").read_text()
    start = text.index("The files, in dependency order")
    # the intro, a blank line, the list, a blank line
    return layers.order(text[start:].split("\n\n")[1].splitlines())


def graph():
    return layers.graph(DCCP, DEF, CALL)


def test_every_file_is_in_the_order():
    ranks = layer_order()
    files = {p.name for p in DCCP.glob("*.c")}
    assert files, "no lib/dccp/*.c"
    assert files == set(ranks), (files ^ set(ranks))
    assert set(CONN_LAYER) <= set(ranks)


def test_calls_go_down_the_layers_only():
    ranks = layer_order()
    defined, edges = graph()
    # the check sees the calls that matter (a parser that finds nothing
    # would pass vacuously)
    assert defined.get("dccp_conn_input") == "conn.c"
    assert defined.get("dccp_seq_valid") == "wire.c"
    assert ("engine.c", "conn.c", "dccp_conn_input") in edges
    assert ("dccp.c", "listener.c", "dccp_listener_input") in edges
    assert ("conn.c", "wire.c", "dccp_build") in edges
    bad = layers.calls_up(ranks, edges)
    assert not bad, "calls up or sideways in lib/dccp: " + ", ".join(bad)


def test_the_connection_names_no_ccid():
    bad = []
    for name in CONN_LAYER:
        text = layers.strip_comments((DCCP / name).read_text())
        for inc in re.findall(r'#\s*include\s*"([^"]+)"', (DCCP / name).read_text()):
            if re.search(r"ccid\d", inc):
                bad.append(f"{name} includes {inc}")
        for word in sorted(set(re.findall(r"\bDCCP_CCID\d\b", text))):
            bad.append(f"{name} names {word}")
        for fn in sorted(set(re.findall(r"\bdccp_ccid\d_\w+", text))):
            bad.append(f"{name} calls {fn}")
    assert not bad, "the connection names a CCID: " + ", ".join(bad)
