"""What the static layering tests (test_ring_layers.py, test_dccp_layers.py)
share: C source without comments and strings, and the call graph between
the .c files of one folder (which file defines a function, which files call
it).  Calls through function pointers are not calls between files and are
not seen."""
import re


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def graph(folder, define, call):
    """({function: file defining it}, {(caller file, callee file, function)})
    for the *.c files of folder; define and call are the regexes that find
    the names defined (not static) and called."""
    defined, calls = {}, {}
    for path in sorted(folder.glob("*.c")):
        text = strip_comments(path.read_text())
        for name in define.findall(text):
            defined[name] = path.name
        calls[path.name] = set(call.findall(text))
    edges = set()
    for src, names in calls.items():
        for name in names:
            dst = defined.get(name)
            if dst and dst != src:
                edges.add((src, dst, name))
    return defined, edges


def order(lines):
    """{file: rank} from lines that each name the files of one rank first
    ("a.c b.c   what they hold"), lowest first; comment stars and
    indentation are ignored, and so are lines that name no file."""
    ranks, rank = {}, 0
    for line in lines:
        names = re.findall(r"^(\w+\.c(?:\s+\w+\.c)*)\s", line.strip(" */") + " ")
        if names:
            for name in names[0].split():
                ranks[name] = rank
            rank += 1
    return ranks


def calls_up(ranks, edges):
    """The calls to a file of the same rank or above, as "a.c -> b.c (f)"."""
    return sorted(f"{s} -> {d} ({n})" for s, d, n in edges if ranks[d] >= ranks[s])
