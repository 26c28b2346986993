"""Fixtures of the end-to-end tests: they build network namespaces, so they need root."""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))

from netlab import Lab  # noqa: E402
from kengine import RUN_DIR, require_kernel  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="e2e tests need root (they create network namespaces); run them as root")
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def build():
    """The CMake build directory: $GC_BUILD_DIR, or build/ in the repository."""
    path = Path(os.environ.get("GC_BUILD_DIR", REPO / "build")).resolve()
    missing = [p for p in (path / "libgroupcast.so", path / "tools" / "groupcast") if not p.exists()]
    if missing:
        pytest.fail(f"missing {', '.join(map(str, missing))}: build with "
                    f"cmake -S {REPO} -B {path} && cmake --build {path}, or set GC_BUILD_DIR")
    return path


@pytest.fixture
def klab(build):
    """For the kernel engine's tests (test_kernel_*.py, kengine.py): a fresh
    star lab (sender + 2 receivers) per test; skips if the kernel engine is
    unavailable here.  Afterwards no owner file of the library (GC_RUN_DIR)
    for the deleted sender namespace is left behind, even when the test
    failed while a sender held the engine."""
    with Lab() as lab:
        lab.star(2)
        netns = Path("/run/netns", lab.topology.sender).stat().st_ino
        try:
            require_kernel(lab, build)
            yield lab
        finally:
            lab.close()
            for stale in [*RUN_DIR.glob(f"lo-{netns}-*"), *RUN_DIR.glob(f"lo-{netns}.fwd*")]:
                stale.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def lab():
    """A Lab whose topology is a sender namespace and 2 receiver namespaces."""
    with Lab() as lab:
        lab.star(2)
        yield lab
