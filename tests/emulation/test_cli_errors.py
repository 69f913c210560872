"""Clear one-line errors from the CLI, run as a real subprocess (no tracebacks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from emukit import NET4  # tests/emulation is on sys.path (rootdir conftest)

RMPTWIN = [sys.executable, "-m", "rmptwin.cli.main"]


def _run(args, env=None, prefix=()):
    return subprocess.run([*prefix, *RMPTWIN, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def _one_line(r) -> str:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_bad_topology_is_one_line_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nswitches: [s1]\nlinks:\n  - {a: s1, b: s9}\n")
    err = _one_line(_run(["net", "up", str(bad)]))
    assert str(bad) in err and "s9" in err


def test_missing_topology_file_is_one_line(tmp_path):
    err = _one_line(_run(["net", "selftest", str(tmp_path / "nope.yaml")]))
    assert "no such file" in err


@pytest.mark.root
def test_not_root_is_one_line():
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) missing")
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    probe = subprocess.run([*nobody, sys.executable, "-c", "import rmptwin.cli.main"], capture_output=True, timeout=60,
                           env={**os.environ, "HOME": "/tmp"})
    if probe.returncode == 0:
        # A real unprivileged user (the repository and its venv are world-readable).
        r = _run(["net", "up", str(NET4)], prefix=nobody, env={"HOME": "/tmp"})
    else:
        # The checkout is not readable by other users (e.g. under /root): the same check,
        # told to treat root as unprivileged (it can only make the check stricter).
        r = _run(["net", "up", str(NET4)], env={"RMPTWIN_ASSUME_NOT_ROOT": "1"})
    err = _one_line(r)
    assert "needs root" in err


@pytest.mark.root
def test_no_docker_engine_is_one_line(tmp_path):
    # A PATH with every tool of this machine except the Docker engine.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if not Path(d).is_dir():
            continue
        for f in Path(d).iterdir():
            if f.name.startswith(("docker", "containerd", "runc")) or (bin_dir / f.name).exists():
                continue
            (bin_dir / f.name).symlink_to(f)
    # The SDK needs no docker binary: the engine's socket must be missing too.
    r = _run(["net", "up", str(NET4), "--nodes", "docker", "--state-dir", str(tmp_path / "state")],
             env={"PATH": str(bin_dir), "DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}"})
    err = _one_line(r)
    assert "Docker engine" in err
    assert not (tmp_path / "state").exists()   # nothing was built


def test_unknown_node_mode_is_one_line():
    err = _one_line(_run(["net", "up", str(NET4), "--nodes", "vm"]))
    assert "node mode" in err


def test_env_names_the_backends():
    r = _run(["env"])
    assert r.returncode == 0, r.stderr
    assert "impairment backend:" in r.stdout and "switch datapath:" in r.stdout
