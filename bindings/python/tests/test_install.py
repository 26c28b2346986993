"""`pip install ./bindings/python` as the README says, with Debian 12's own
python3 where there is one: its pip refuses the system site (PEP 668,
EXTERNALLY-MANAGED), so the package goes into a venv that sees the system's
setuptools (--system-site-packages), built without fetching anything
(--no-build-isolation --no-index).  The installed package must carry its
py.typed marker and load the library named by GROUPCAST_LIB."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import PKG


def test_pip_install_into_a_venv(tmp_path, lib_path):
    py = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    venv = tmp_path / "venv"
    subprocess.run([py, "-m", "venv", "--system-site-packages", venv], check=True, timeout=120)
    work = tmp_path / "src"     # pip builds in the source tree: build from a copy, leave the checkout clean
    subprocess.run(["cp", "-r", PKG, work], check=True)
    subprocess.run([venv / "bin/python", "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
                    work], check=True, timeout=300)
    code = ("import groupcast, pathlib; print(groupcast.library_version()); "
            "print(pathlib.Path(groupcast.__file__).parent)")
    env = {"GROUPCAST_LIB": str(lib_path), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([venv / "bin/python", "-c", code], check=True, capture_output=True, text=True,
                         env=env, cwd=tmp_path).stdout.splitlines()
    assert out[0] == "(1, 0, 0)"
    where = Path(out[1])
    assert str(where).startswith(str(venv)) and (where / "py.typed").exists() and (where / "dccp.py").exists()
