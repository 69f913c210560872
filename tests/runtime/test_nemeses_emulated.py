"""The newer nemeses on the real emulated network (line3, network-namespace nodes): each
applied as the simulator applies it, and every history checker passes on the run.

NOT RUN where it was written (a shared machine); run as root:
    pytest -q tests/runtime/test_nemeses_emulated.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.checkers import first_violation
from rmptwin.checkers.suite import check_run
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.model.experiment import Fault
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]

NEMESES = {
    "partition": {"at_s": 1.5, "action": "partition", "groups": [["s3"]], "duration_s": 1.0},
    "pause": {"at_s": 1.5, "action": "pause", "node": "rp2", "duration_s": 0.5},
    "clock": {"at_s": 1.5, "action": "clock", "node": "rp3", "jump_ms": 30, "drift_ppm": 200},
    "flap": {"at_s": 1.5, "action": "flap", "link": "s1-s2", "period_ms": 100, "duration_s": 0.6},
    "dup": {"at_s": 1.0, "action": "dup_reorder", "link": "s1-s2", "duplicate": 0.2, "reorder": 0.1,
            "reorder_ms": 5, "duration_s": 2.0},
}


@pytest.mark.parametrize("name", list(NEMESES))
def test_nemesis_emulated_keeps_every_invariant(name, tmp_path):
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    exp = loaded.experiment.model_copy(update={"faults": [Fault.model_validate(NEMESES[name])]})
    loaded = loaded.model_copy(update={"experiment": exp})
    impair = "relay" if name == "dup" else "auto"
    outcome = run_experiment(loaded, "emulation", out=tmp_path / name,
                             options=EmulationOptions(nodes="ns", impair=impair))
    events = outcome.run_dir.read_events().to_pandas()
    if name == "pause":
        assert (events.kind == Kind.PAUSE).sum() == 1 and (events.kind == Kind.RESUME).sum() == 1
    if name == "clock":
        assert (events.kind == Kind.CLOCK).sum() == 1
    if name in ("partition", "flap"):
        drops = outcome.run_dir.read_drops().to_pandas()
        assert (drops.reason == "down").any()
    verdicts = check_run(outcome.run_dir)
    assert first_violation(verdicts) is None, first_violation(verdicts)


def test_one_emulated_campaign_run(tmp_path):
    """`make test`'s emulated campaign: one schedule on line3, run and checked like a simulated one."""
    from rmptwin.chaos.campaign import Campaign, run_campaign

    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    outcome = run_campaign(Campaign(loaded, 1, 7, backend="emulation"), out=tmp_path / "c")
    rows = outcome.table.to_pylist()
    assert len(rows) == 1 and rows[0]["checks.verdict"] in ("ok", "violation")
    assert outcome.chaos.run_dir(0).summary_path.exists()
    assert outcome.chaos.report_path.exists()
