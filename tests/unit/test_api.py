"""rmptwin.api: load with overrides, simulate, and read a run from Python; bad input is the
command line's one-line UserError, raised."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import rmptwin.api as rt
from rmptwin.rundir.run import RunDir

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"


def test_overrides_are_sweeps_set_keys_validated_like_the_yaml():
    exp = rt.load_experiment(LINE3, {"protocol.delta_a_ms": 321, "topology.links.0.loss": 0.02})
    assert exp.experiment.protocol.delta_a_ms == 321
    assert exp.topology.links[0].loss.p == pytest.approx(0.02)
    assert rt.load_experiment(LINE3).experiment.protocol.delta_a_ms != 321   # the file is untouched
    with pytest.raises(rt.UserError, match="no field 'protocol.delta_aa_ms'"):
        rt.load_experiment(LINE3, {"protocol.delta_aa_ms": 1})
    with pytest.raises(rt.UserError, match="greater than or equal to 0"):
        rt.load_experiment(LINE3, {"protocol.delta_a_ms": -5})


def test_load_tells_an_experiment_from_a_topology():
    assert rt.load(LINE3).experiment.name == "line3"
    topo = rt.load(REPO / "topologies" / "line3.yaml", {"links.0.loss": 0.1})
    assert topo.links[0].loss.p == pytest.approx(0.1)
    with pytest.raises(rt.UserError, match="no such file"):
        rt.load(REPO / "experiments" / "nope.yaml")
    with pytest.raises(rt.UserError, match="links.0.loss"):
        rt.load_topology(REPO / "topologies" / "line3.yaml", {"links.0.loss": 7})


def test_simulate_gives_a_run_with_summary_manifest_and_tables(tmp_path):
    run = rt.simulate(LINE3, seed=3, out=tmp_path / "a", overrides={"protocol.delta_a_ms": 150})
    assert run.path == tmp_path / "a"
    assert run.manifest["seed"] == 3 and run.manifest["experiment"]["protocol"]["delta_a_ms"] == 150
    assert run.summary == RunDir(run.path).read_summary()
    assert run.summary["agreement"] is True and run.summary["messages_lost"] == 0
    events = run.events()
    assert isinstance(events, pd.DataFrame) and len(events) == run.summary["events"]
    assert {"t_ns", "node", "kind"} <= set(events.columns)
    assert run.events_arrow().num_rows == len(events)
    assert isinstance(run.drops(), pd.DataFrame) and isinstance(run.counts(), pd.DataFrame)
    assert run.counts()["packets"].sum() > 0
    assert (run.metrics, run.report_path, run.analysed) == (None, None, False)
    # a loaded experiment is accepted as well, and the same seed gives the same summary
    again = rt.simulate(rt.load_experiment(LINE3, {"protocol.delta_a_ms": 150}), seed=3, out=tmp_path / "b")
    assert again.summary == run.summary
    assert rt.open_run(tmp_path / "a").summary == run.summary


def test_open_run_on_a_directory_that_is_no_run_is_one_line(tmp_path):
    with pytest.raises(rt.UserError, match=str(tmp_path)):
        rt.open_run(tmp_path)
    with pytest.raises(rt.UserError, match="choose sim or emulation"):
        rt.sweep(LINE3, {"protocol.delta_a_ms": [1]}, backend="docker")
