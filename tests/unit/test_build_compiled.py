"""How the compiled cores are built (scripts/build_compiled.py) and when: make test and make
bench build them, make run never waits for it. No compiler needed: the build itself is
checked by tests/sim/test_compiled_builds.py."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin import corebuild

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import build_compiled

sys.path.pop(0)


def prerequisites(target: str) -> list[str]:
    line = re.search(rf"^{target}:(.*)$", (REPO / "Makefile").read_text(), re.M)
    assert line, f"no {target} target"
    return line.group(1).split()


def test_make_run_never_builds_and_make_test_and_bench_do():
    assert prerequisites("run") == ["provision"]
    assert prerequisites("test") == ["compiled"] and prerequisites("bench") == ["compiled"]
    recipe = (REPO / "Makefile").read_text().split("\ncompiled:", 1)[1].split("\n\n", 1)[0]
    assert "provision.sh --compiled" in recipe
    # provision.sh builds (and installs gcc) only when asked
    script = (REPO / "scripts" / "provision.sh").read_text()
    calls = [line.strip() for line in script.splitlines() if "build_compiled_cores" in line and "()" not in line]
    assert calls and all(c.startswith('if [ -n "$COMPILED" ]') for c in calls), calls


def test_mypyc_reads_the_projects_mypy_settings_but_not_third_party_packages():
    ini = configparser.ConfigParser()
    ini.read_string(build_compiled.mypy_config())
    assert ini["mypy"]["strict"] == "True" and ini["mypy"]["follow_imports"] == "skip"
    assert ini["mypy-rmptwin.*"]["follow_imports"] == "silent"
    assert ini["mypy-rmptwin.rmp.wire"]["implicit_reexport"] == "True"   # an override of pyproject.toml


def test_the_build_depends_on_every_rmptwin_module_the_compiled_ones_import():
    compiled = build_compiled.modules()
    dep_paths = build_compiled.dependencies(compiled)
    deps = {str(p.relative_to(build_compiled.SRC)) for p in dep_paths}
    assert {"rmptwin/taxonomy/codec.py", "rmptwin/venue/stores.py", "rmptwin/model/__init__.py",
            "rmptwin/records/tables.py", "rmptwin/rmp/__init__.py"} <= deps
    assert not deps & {str(p.relative_to(build_compiled.SRC)) for p in compiled}
    # closed: what the dependencies import is in it too
    for path in dep_paths:
        assert build_compiled.rmptwin_imports(path) <= set(dep_paths) | set(compiled)


def test_a_build_made_with_other_options_is_rebuilt():
    if not corebuild.check()[0].compiled:
        pytest.skip("no fresh compiled build here")
    ok = subprocess.run([sys.executable, "scripts/build_compiled.py", "--check"], cwd=REPO, capture_output=True,
                        text=True, timeout=60)
    if ok.returncode != 0:
        pytest.skip(ok.stdout.strip())
    other_level = "3" if build_compiled.recipe()["opt_level"] != "3" else "2"
    env = {**os.environ, build_compiled.OPT_LEVEL_ENV: other_level}
    other = subprocess.run([sys.executable, "scripts/build_compiled.py", "--check"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and "built with other mypyc options" in other.stdout
