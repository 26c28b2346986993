"""Fixtures of the Linux 6.1 interop tests: a lab namespace with the guest linked to it."""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "lab"), str(HERE)]

from linux61 import Linux61Guest, fetch  # noqa: E402
from netlab import Lab  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="interop tests need root (namespaces, tap devices, raw sockets)")
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kernel():
    """The Linux 6.1 package, fetched once into $GC_INTEROP_CACHE."""
    return fetch()


@pytest.fixture(scope="module")
def guest(kernel):
    """A booted Linux 6.1 guest linked to namespace guest.ns (a lab's "host"
    namespace); powered off when the module's tests are done."""
    with Lab() as lab:
        ns = lab.add_ns("host")
        with Linux61Guest(lab, ns, kernel) as g:
            print(f"linux61: booted in {g.boot_s:.1f} s (guest uptime {g.uptime_s:.1f} s)")
            yield g
            # A kernel BUG or WARNING in the peer fails the module's last test's teardown.
            bad = [line for line in g.console.splitlines() if "BUG" in line or "WARNING:" in line]
            assert not bad, "guest kernel complained:\n" + "\n".join(bad)
