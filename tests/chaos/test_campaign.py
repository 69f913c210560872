"""Campaigns: schedules drawn within their bounds, delta debugging finds a minimal schedule,
and a short simulated campaign (30 schedules, the one `make test` runs) writes its table and
report, with every violating run shrunk to a YAML that reproduces the same violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmptwin.chaos.campaign import (
    Campaign,
    run_campaign,
    simulated_violation,
    with_faults,
)
from rmptwin.chaos.schedule import NEMESES, Plan, draw, nemeses_of, within_majority
from rmptwin.chaos.shrink import ddmin
from rmptwin.checkers.suite import CHECKERS
from rmptwin.cli.main import app
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.sweeps.sweep_loop import run_loop

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quickstart():
    return load_experiment(REPO / "experiments" / "quickstart.yaml")


def test_schedules_are_reproducible_valid_and_bounded(quickstart):
    w = quickstart.experiment.workload
    end = w.start_s + w.duration_s
    seen = set()
    for run in range(200):
        faults = draw(quickstart, Plan(), 5, run)
        assert faults == draw(quickstart, Plan(), 5, run)
        assert 1 <= len([f for f in faults if f["action"] != "recover"]) <= 3
        assert within_majority(faults, quickstart)
        for f in faults:
            assert w.start_s <= f["at_s"] <= end + 1e-9
            assert f["at_s"] + f.get("duration_s", 0) <= end + 1e-6, "over by the end of the workload"
        with_faults(quickstart, faults)   # validates like a YAML's schedule
        seen.update(nemeses_of(faults))
    assert seen == set(NEMESES)


def test_the_majority_bound_can_be_lifted(quickstart):
    primaries = [h.name for h in quickstart.topology.hosts if h.role == "primary"]
    half = [{"at_s": 1.0, "action": "crash", "node": p} for p in primaries[:len(primaries) // 2]]
    assert not within_majority(half, quickstart)
    assert within_majority(half[:-1], quickstart)
    bounded, free = Plan(("crash", "pause", "partition"), 6, True), Plan(("crash", "pause", "partition"), 6, False)
    assert all(within_majority(draw(quickstart, bounded, 3, r), quickstart) for r in range(150))
    assert not all(within_majority(draw(quickstart, free, 3, r), quickstart) for r in range(150))


def test_only_the_asked_nemeses_are_drawn(quickstart):
    for run in range(50):
        assert set(nemeses_of(draw(quickstart, Plan(("pause", "clock")), 1, run))) <= {"pause", "clock"}


def test_ddmin_finds_a_one_minimal_schedule():
    faults = [{"id": i} for i in range(8)]
    culprit = lambda sub: {2, 5} <= {f["id"] for f in sub}
    small, tests = ddmin(faults, culprit)
    assert [f["id"] for f in small] == [2, 5] and tests < 40
    one, _ = ddmin(faults, lambda sub: any(f["id"] == 6 for f in sub))
    assert [f["id"] for f in one] == [6]


def test_short_campaign_writes_table_report_and_reproductions(tmp_path):
    line3 = load_experiment(REPO / "experiments" / "line3.yaml")
    outcome = run_campaign(Campaign(line3, 30, 7), out=tmp_path / "c", runner=run_loop)
    rows = outcome.table.to_pylist()
    assert len(rows) == 30 and [r["run"] for r in rows] == list(range(30))
    for r in rows:
        assert r["checks.verdict"] in ("ok", "violation")
        assert all(r[f"checks.{c}"] in ("ok", "violation", "skipped") for c in CHECKERS)
        assert r["checks.outage_ms"] is not None and "delivery_latency_ms.p99" in r
        assert json.loads(r["schedule"])
    assert outcome.chaos.table_path.exists()
    page = outcome.chaos.report_path.read_text()
    assert "Violating runs per nemesis and checker" in page and page.count("<tr class=") == 30
    bad = [r for r in rows if r["checks.verdict"] == "violation"]
    assert outcome.violations == len(bad) and len(outcome.repros) == len(bad)
    for r in bad:   # each shrunk schedule reproduces the same checker's violation from its YAML alone
        repro = load_experiment(r["repro"])
        checker = r["checks.first"].split(":")[0]
        faults = [f.model_dump(mode="json", exclude_none=True) for f in repro.experiment.faults]
        assert r["shrunk_faults"] <= r["faults"]
        assert simulated_violation(repro, faults, repro.experiment.seed, checker)


def test_chaos_cli_rejects_an_unknown_nemesis():
    result = CliRunner().invoke(app, ["chaos", str(REPO / "experiments" / "line3.yaml"), "--nemesis", "crash,meteor"])
    assert isinstance(result.exception, UserError) and "meteor" in str(result.exception)
