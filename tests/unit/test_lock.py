"""requirements.lock is the whole truth about the venv's Python packages.

The venv sees Debian's site packages (for Mininet), so these tests look at what the running
interpreter actually imports: every locked package at its locked version and from the venv,
and every package rmptwin needs (with the dev extra, transitively) locked.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import sys
from pathlib import Path

import pytest

from rmptwin import lockcheck

REPO = Path(__file__).resolve().parents[2]
LOCK_TEXT = (REPO / "requirements.lock").read_text()
PINS = lockcheck.read_lock(LOCK_TEXT)

in_project_venv = pytest.mark.skipif(
    sys.prefix == sys.base_prefix or not Path(sys.prefix).resolve().is_relative_to(REPO),
    reason="not running in the project's venv (.venv/bin/python -m pytest)",
)


def test_the_lock_pins_exact_versions_with_hashes():
    pinned_lines = [ln for ln in LOCK_TEXT.splitlines() if "==" in ln and not ln.startswith("#")]
    assert len(PINS) == len(pinned_lines) > 50
    blocks = LOCK_TEXT.split("\n")
    for i, line in enumerate(blocks):
        if "==" in line and not line.startswith("#"):
            assert blocks[i + 1].strip().startswith("--hash=sha256:"), f"{line.split()[0]} has no hash"


def test_mininet_is_left_to_debian():
    assert "mininet" not in PINS


@in_project_venv
def test_every_locked_package_is_installed_at_its_locked_version():
    wrong = {}
    for name, version in PINS.values():
        try:
            installed = md.version(name)
        except md.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (installed, version)
    assert not wrong, f"(installed, locked): {wrong}; run `sudo make provision`"


@in_project_venv
def test_every_locked_package_imports_from_the_venv_not_debian():
    venv_site = {str(Path(p).resolve()) for p in lockcheck.venv_dirs()}
    outside = {}
    for module, dists in md.packages_distributions().items():
        locked = [d for d in dists if lockcheck.normalize(d) in PINS]
        if not locked or not module.isidentifier():
            continue
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec else None
        if origin and origin not in ("built-in", "frozen"):
            if not any(str(Path(origin).resolve()).startswith(d + "/") for d in venv_site):
                outside[module] = origin
    assert not outside, f"locked packages imported from outside the venv: {outside}"
    # The case that used to leak: Debian's python3-yaml.
    assert importlib.util.find_spec("yaml").origin.startswith(sys.prefix)


@in_project_venv
def test_every_dependency_of_rmptwin_and_its_dev_extra_is_locked():
    needed = lockcheck.dependency_closure("rmptwin", ("dev",))
    # The walk itself must reach the far ends: pyyaml (direct), sortedcontainers (via
    # hypothesis, dev) and pycparser (cryptography -> cffi -> pycparser).
    assert {"pyyaml", "sortedcontainers", "pycparser", "jsonschema"} <= set(needed)
    assert sorted(set(needed) - set(PINS)) == []


# --- the provisioning check itself (src/rmptwin/lockcheck.py), fed made-up locks


def test_read_lock_normalizes_names_and_ignores_hashes_and_comments():
    text = "# header\nPyYAML==6.0.3 \\\n    --hash=sha256:ab \\\n    # via\n    #   rmptwin\noslo.config==10.7.0\n"
    assert lockcheck.read_lock(text) == {"pyyaml": ("PyYAML", "6.0.3"), "oslo-config": ("oslo.config", "10.7.0")}


@in_project_venv
def test_a_version_the_venv_does_not_have_is_one_line_naming_both_versions():
    locked = PINS["pyyaml"][1]
    found = lockcheck.problems(LOCK_TEXT.replace(f"pyyaml=={locked} ", "pyyaml==0.0.1 "))
    assert found == [f"pyyaml is {md.version('pyyaml')} in the venv but the lock pins 0.0.1"]


@in_project_venv
def test_a_dependency_missing_from_the_lock_is_named():
    without_yaml = "\n".join(ln for ln in LOCK_TEXT.splitlines() if not ln.startswith("pyyaml=="))
    assert lockcheck.problems(without_yaml) == ["pyyaml is a dependency of rmptwin but not in requirements.lock"]


@in_project_venv
def test_a_package_that_resolves_to_debian_is_named():
    # Seen from a venv that lives elsewhere, the real pyyaml is "outside" it.
    found = lockcheck.location_problems({"pyyaml": ("pyyaml", md.version("pyyaml"))}, dirs=("/elsewhere",))
    assert found == [f"pyyaml is installed in {md.distribution('pyyaml').locate_file('')}, not in the venv"]


def test_pip_check_lines_about_debian_packages_outside_the_project_are_not_ours():
    output = ("pygobject 3.42.2 requires pycairo, which is not installed.\n"
              "typer 0.29.2 has requirement rich>=13.8.0, but you have rich 13.0.0.\n")
    found = lockcheck.pip_check_problems({"typer": ("typer", "0.29.2")}, output)
    assert found == ["pip check: typer 0.29.2 has requirement rich>=13.8.0, but you have rich 13.0.0."]
