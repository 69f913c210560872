"""A servers file (``model.servers_file``) reaches every emulated run that names it: `rmptwin run
--servers FILE`, `rmptwin sweep --backend emulation --servers FILE` and ``api.sweep(options=)``
hand its servers and placement to the run; a sweep over servers records them in its spec;
misuse is one line. No network starts: ``runner.pipeline._emulated`` is replaced by a recorder
that keeps the options it was handed and stops there."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmptwin import api
from rmptwin.cli.main import app
from rmptwin.errors import UserError
from rmptwin.sweeps.sweep_loop import SweepPlan

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"


class NetworkWouldStart(Exception):
    """Raised where the emulated run would bring its network up."""


@pytest.fixture
def handed(monkeypatch) -> list:
    """The EmulationOptions handed to emulated runs; the first one stops the caller."""
    seen: list = []

    def record(loaded, spec, seed, out, options, *args, **kwargs):
        seen.append(options)
        raise NetworkWouldStart

    monkeypatch.setattr("rmptwin.runner.pipeline._emulated", record)
    return seen


@pytest.fixture
def servers_yaml(tmp_path) -> Path:
    f = tmp_path / "servers.yaml"
    f.write_text("servers: [w1, w2, w3]\nplacement: bins\n")
    return f


def _invoke(args: list) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_run_takes_its_servers_and_placement_from_the_file(handed, servers_yaml, tmp_path, monkeypatch):
    checked: list = []
    monkeypatch.setattr("rmptwin.api.check_servers", checked.append)   # w1..w3 are no machines here
    result = _invoke(["run", LINE3, "--nodes", "ns", "--impair", "relay", "--servers", servers_yaml,
                      "--out", tmp_path / "run"])
    assert isinstance(result.exception, NetworkWouldStart), result.output
    assert checked == [("w1", "w2", "w3")]   # checked before the placement is printed
    assert "placement (bins) over 3 servers" in result.output
    assert [(o.servers, o.placement) for o in handed] == [(("w1", "w2", "w3"), "bins")]


def test_an_emulated_sweep_over_a_servers_file_runs_each_point_there(handed, servers_yaml, tmp_path):
    result = _invoke(["sweep", LINE3, "--backend", "emulation", "--set", "protocol.delta_a_ms=100,200",
                      "--seeds", "1", "--servers", servers_yaml, "--out", tmp_path / "sw"])
    assert isinstance(result.exception, NetworkWouldStart), result.output
    [options] = handed
    assert (options.servers, options.placement, options.nodes, options.impair) == (("w1", "w2", "w3"), "bins",
                                                                                     "ns", "relay")


def test_the_api_sweep_hands_its_options_on_and_the_spec_names_the_servers(handed, tmp_path):
    options = api.EmulationOptions(nodes="ns", impair="relay", servers=("w1", "w2"))
    with pytest.raises(NetworkWouldStart):
        api.sweep(LINE3, {"protocol.delta_a_ms": [100]}, seeds=1, backend="emulation", out=tmp_path / "sw",
                  options=options, report=False)
    assert handed == [options]
    loaded = api.load_experiment(LINE3)
    assert SweepPlan(loaded, {}, [1], "emulation", options=options).spec()["servers"] == {
        "names": ["w1", "w2"], "placement": "regions"}
    assert "servers" not in SweepPlan(loaded, {}, [1], "emulation").spec()   # older sweeps resume as before


def test_servers_on_a_simulated_sweep_is_one_line(handed, servers_yaml):
    result = _invoke(["sweep", LINE3, "--set", "protocol.delta_a_ms=100", "--servers", servers_yaml])
    assert isinstance(result.exception, UserError) and "--backend emulation" in str(result.exception)
    with pytest.raises(UserError, match="backend='emulation'"):
        api.sweep(LINE3, {"protocol.delta_a_ms": [100]}, options=api.EmulationOptions())
    assert handed == []
