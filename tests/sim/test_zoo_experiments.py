"""The two shipped real-world topologies (topologies/zoo/, imported) simulate cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.analysis.summary import summarize
from rmptwin.model import load_experiment
from rmptwin.model.bounds import violated_bounds
from rmptwin.sim.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["euro-research", "intercontinental"])
def test_imported_zoo_experiment_agrees_and_loses_nothing(name):
    loaded = load_experiment(ROOT / "experiments" / f"{name}.yaml")
    assert violated_bounds(loaded) == []
    s = summarize(simulate(loaded, loaded.experiment.seed).events, loaded)
    assert s["agreement"] and s["messages_lost"] == 0 and s["messages_sent"] > 100
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"] > 0
