"""The common wrong file gets one line that says what it is; a missing topology file names
the experiment's line; `sim --set KEY=VALUE` changes one field as `sweep --set` does (and the
run's manifest holds the changed experiment); flags' help shows no value placeholder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.errors import UserError
from rmptwin.model import load_experiment, load_topology

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_a_topology_given_for_an_experiment_says_so():
    with pytest.raises(UserError, match=r"line3.yaml: this is a topology file; give an experiment"):
        load_experiment(REPO / "topologies" / "line3.yaml")


def test_an_experiment_given_for_a_topology_says_so():
    with pytest.raises(UserError, match=r"quickstart.yaml: this is an experiment file; give a topology"):
        load_topology(REPO / "experiments" / "quickstart.yaml")


def test_a_missing_topology_names_the_experiment_line(tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text("name: e\nseed: 1\ntopology: ../missing.yaml\n")
    with pytest.raises(UserError) as err:
        load_experiment(exp)
    assert str(err.value).startswith(f"{exp}:3: topology: '../missing.yaml' names no file")


def test_sim_of_a_topology_is_one_line_exit_2():
    r = _cli("sim", "topologies/line3.yaml")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "rmptwin: topologies/line3.yaml: this is a topology file; give an experiment (a YAML whose 'topology:' "
        "names a topology file, e.g. experiments/quickstart.yaml)"]


def test_sim_set_changes_one_field_from_another_directory(tmp_path):
    out = tmp_path / "run"
    r = _cli("sim", str(REPO / "labs" / "ring-crash" / "crash.yaml"), "--set", "protocol.tau_t_ms=100",
             "--set", "duration_s=2", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["experiment"]["protocol"]["tau_t_ms"] == 100
    assert manifest["experiment"]["duration_s"] == 2


@pytest.mark.parametrize("bad, message", [
    ("protocol.tau_t_ms=100,200", "--set protocol.tau_t_ms: one value per run; `rmptwin sweep` runs several"),
    ("protocol.tau_x=1", "--set protocol.tau_x: the experiment has no field 'protocol.tau_x' (check its spelling)"),
])
def test_sim_set_mistakes_are_one_line(bad, message):
    r = _cli("sim", "labs/ring-crash/crash.yaml", "--set", bad)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"rmptwin: {message}"]


@pytest.mark.parametrize("command", [("sim",), ("validate",), ("sweep",)])
def test_flags_help_has_no_value_placeholder(command):
    r = _cli(*command, "--help")
    assert r.returncode == 0
    lines = [ln for ln in r.stdout.splitlines() if "--strict" in ln or "--help" in ln or "--keep-runs" in ln]
    assert lines and not any("<bool>" in ln for ln in lines), lines
