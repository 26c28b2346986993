"""lib/ring has no cycles: each file calls only functions of files listed
above it in the dependency order written at the top of lib/ring/internal.h.

A static check (no build needed): it finds the gc_* functions each file
defines and the gc_* names each file calls.  Calls through function pointers
(the cc.h hooks) are not calls between files and are not seen."""
import pathlib
import re

import layers

ROOT = pathlib.Path(__file__).resolve().parents[2]
RING = ROOT / "lib" / "ring"

DEF = re.compile(r"^(?:GC_EXPORT\s+)?(?!static)[A-Za-z_][\w \t*]*?\b(gc_\w+)\(", re.M)
CALL = re.compile(r"\b(gc_\w+)\s*\(")


def layer_order():
    """{file: rank} from the comment at the top of internal.h."""
    text = (RING / "internal.h").read_text()
    start = text.index("The files, in dependency order")
    lines = []
    for line in text[start:].splitlines()[1:]:
        if line.strip() == "*/":  # the end of that comment: later ones are not the order
            break
        lines.append(line)
    return layers.order(lines)


def graph():
    return layers.graph(RING, DEF, CALL)


def test_every_file_is_in_the_order():
    ranks = layer_order()
    files = {p.name for p in RING.glob("*.c")}
    assert files, "no lib/ring/*.c"
    assert files == set(ranks), (files ^ set(ranks))


def test_calls_go_down_the_layers_only():
    ranks = layer_order()
    defined, edges = graph()
    # the check sees the calls that matter (a parser that finds nothing
    # would pass vacuously)
    assert defined.get("gc_flow_drain") == "flow.c"
    assert defined.get("gc_srv_decode") == "proto.c"
    assert ("server.c", "flow.c", "gc_flow_drain") in edges
    assert ("handle.c", "flow.c", "gc_flow_flush") in edges
    bad = layers.calls_up(ranks, edges)
    assert not bad, "calls up or sideways in lib/ring: " + ", ".join(bad)
