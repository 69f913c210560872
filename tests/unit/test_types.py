"""Every package of src/rmptwin type-checks strictly (pyproject.toml, [tool.mypy]); what mypyc
compiles (the cores and the simulator) is what mypy checked.

mypy runs in a subprocess of this interpreter with its incremental cache in ``.mypy_cache``
(a first run reads every imported module, about 25 s on 2 busy CPUs; later runs re-check
only what changed, a few seconds)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_whole_package_type_checks_strictly():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the dev extra: make provision)")
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(REPO / ".mypy_cache")],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout


def test_the_check_sees_a_type_error(tmp_path):
    """The check can fail: strict mode rejects an unannotated function and a wrong argument type."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x):\n    return x\n\n\ndef g(n: int) -> int:\n    return n\n\n\ng('1')\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", "",
                        str(bad)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert "no-untyped-def" in r.stdout and "arg-type" in r.stdout
