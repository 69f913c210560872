"""The commands in the docs work as written. The shell blocks of README.md and of every
lab's README are extracted and the quick, simulated ones run in a temporary copy of the
clone (experiments/, topologies/, labs/ and a .venv/bin with this interpreter's rmptwin and
python), as a student would paste them from the clone's top directory. Every lab check line
must PASS: this runs every lab's checks on every simulated run and sweep its README makes.

Not run: sudo, emulated runs (run, net), make, vagrant, and commands whose output is an HTML
report only (claims); `analyze` runs (it is what lab 2's check compares with).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICK = ("rmptwin validate", "rmptwin sim", "rmptwin sweep", "rmptwin analyze", "rmptwin venue timeline",
         "python labs/")
# The README's tour sweeps and claims stand for minutes of Spark; the labs' sweeps run below.
SLOW_IN_README = ("rmptwin claims", "rmptwin analyze results/qs-sim results/qs-emu", "rmptwin compare",
                  "rmptwin sweep experiments/")


def shell_commands(markdown: str) -> list[str]:
    """Each command of each ```sh block: continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"^ *```sh\n(.*?)^ *```", markdown, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                out.append(re.sub(r"\s+", " ", line))
    return out


def is_quick(command: str) -> bool:
    return (not command.startswith("sudo") and any(q in command for q in QUICK)
            and not any(s in command for s in SLOW_IN_README))


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clone")
    for d in ("experiments", "topologies", "labs", "schemas"):
        shutil.copytree(REPO / d, root / d)
    bin_ = root / ".venv" / "bin"
    bin_.mkdir(parents=True)
    env = f'PYTHONPATH={shlex.quote(str(REPO / "src"))} exec {shlex.quote(sys.executable)}'
    (bin_ / "python").write_text(f"#!/bin/sh\n{env} \"$@\"\n")
    (bin_ / "rmptwin").write_text(f"#!/bin/sh\n{env} -m rmptwin.cli.main \"$@\"\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return root


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "COLUMNS": "100"})


def test_the_readme_quick_commands_work_as_written(clone):
    commands = [c for c in shell_commands((REPO / "README.md").read_text()) if is_quick(c)]
    assert any("rmptwin sim" in c for c in commands)
    for command in commands:
        r = _run(command, clone)
        assert r.returncode == 0, f"{command}\n{r.stderr}"


LABS = sorted(p.parent.name for p in (REPO / "labs").glob("*/check.py"))


@pytest.mark.spark
@pytest.mark.parametrize("lab", LABS)
def test_a_lab_readme_works_as_written_and_every_check_passes(clone, lab):
    commands = [c for c in shell_commands((REPO / "labs" / lab / "README.md").read_text()) if is_quick(c)]
    assert any("check.py" in c for c in commands)
    checked = 0
    for command in commands:
        r = _run(command, clone)
        assert r.returncode == 0, f"{command}\n{r.stdout}\n{r.stderr}"
        if "check.py" in command:
            lines = r.stdout.splitlines()
            assert lines and all(ln.startswith("PASS") for ln in lines), f"{command}\n{r.stdout}"
            checked += len(lines)
    assert checked


def test_shell_commands_are_extracted_with_continuations_joined():
    md = "x\n\n   ```sh\n   a --b \\\n       c   # note\n   d\n   ```\n"
    assert shell_commands(md) == ["a --b c", "d"]
