"""The code passes ruff's rules of pyproject.toml ([tool.ruff.lint]): pyflakes' (no undefined
name, no import used nowhere or from where the name no longer lives, nothing defined twice),
syntax and pylint errors, no blanket ``type: ignore`` or ``noqa``, and most of bugbear's."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.skip("ruff is not installed (it is in the dev extra: make provision)")


def test_the_code_passes_the_lint_rules():
    r = subprocess.run([*ruff(), "check", "--no-cache", "--output-format", "concise",
                        "src", "tests", "controllers", "labs", "scripts", "notebooks"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_lint_sees_a_stale_import(tmp_path):
    """The check can fail: a module importing a name its source no longer has is reported."""
    bad = tmp_path / "stale.py"
    bad.write_text("from os import path\n\nprint(undefined_name)\n")
    r = subprocess.run([*ruff(), "check", "--no-cache", "--isolated", "--select", "F", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "F401" in r.stdout and "F821" in r.stdout


def test_every_noqa_says_why():
    """A ``noqa`` names its rule and, after " - ", why the rule does not hold there."""
    import re
    bare = []
    for top in ("src", "tests", "controllers", "labs", "scripts", "notebooks"):
        for path in (REPO / top).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = re.search(r"#\s*noqa\b(.*)", line)
                if m and not re.match(r":\s*[A-Z]+[0-9]+(,\s*[A-Z]+[0-9]+)*\s+-\s+\S", m.group(1)):
                    bare.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert bare == [], "noqa without a reason:\n" + "\n".join(bare)


def test_every_type_ignore_says_why():
    """A ``type: ignore[code]`` in the package is followed on its line by a comment saying why."""
    import re
    bare = []
    for path in (REPO / "src").rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"#\s*type:\s*ignore", line) and not re.search(r"type:\s*ignore\[[\w-]+(,\s*[\w-]+)*\]\s*#\s*\S",
                                                                         line):
                bare.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert bare == [], "type: ignore without its reason:\n" + "\n".join(bare)
