"""Fixtures of the Python binding's tests.  They build network namespaces
(lab/netlab.py), so they run as root; the library under test is
$GROUPCAST_LIB, or $GC_BUILD_DIR/libgroupcast.so.1 (default: build/ of the
repository), and the package is imported from src/ (no install needed)."""
import contextlib
import ctypes
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPO = PKG.parents[1]
BUILD = Path(os.environ.get("GC_BUILD_DIR", REPO / "build")).resolve()
os.environ.setdefault("GROUPCAST_LIB", str(BUILD / "libgroupcast.so.1"))
sys.path.insert(0, str(PKG / "src"))
sys.path.insert(0, str(REPO / "lab"))

from netlab import Lab  # noqa: E402

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="the binding's tests need root (they create network namespaces)")
    for item in items:
        item.add_marker(skip)


@contextlib.contextmanager
def netns(name: str):
    """Run the calling thread in network namespace `name` for the with block;
    sockets made there stay in it after."""
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        if _libc.setns(back, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(fd)
        os.close(back)


@pytest.fixture(scope="session")
def lib_path():
    path = Path(os.environ["GROUPCAST_LIB"])
    if not path.exists():
        pytest.fail(f"missing {path}: build with cmake -S {REPO} -B {BUILD} && cmake --build {BUILD}, "
                    f"or set GC_BUILD_DIR or GROUPCAST_LIB")
    return path


@pytest.fixture(scope="module")
def lab(lib_path):
    """A star lab: sender namespace s and receiver namespaces r1, r2."""
    with Lab() as lab:
        lab.star(2)
        yield lab


def child_env():
    """The environment of a binding program run in a lab namespace."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PKG / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env
