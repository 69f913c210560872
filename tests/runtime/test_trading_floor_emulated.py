"""The distributed trading floor (seed 7.3) on the emulated network: one `rmptwin run` of
experiments/trading-floor.yaml (namespace hosts, no captures). Every participant and
arbiter derives the same trades, nothing confirmed is lost, and confirmation comes about
one token rotation after the tentative report, as in the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]


def test_trading_floor_agrees_and_confirms_within_a_rotation(tmp_path):
    loaded = load_experiment(REPO / "experiments" / "trading-floor.yaml")
    s = run_experiment(loaded, "emulation", out=tmp_path / "run",
                       options=EmulationOptions(nodes="ns", capture=[])).summary
    assert s["participants_agree"] is True and s["floor_nodes"] == 12
    assert s["floor_trades_lost"] == 0 and s["trades_unconfirmed"] == 0 and s["trades_confirmed"] >= 10
    rotation = s["token_rotation_ms"]["p50"]
    assert 0.5 * rotation <= s["confirm_latency_ms"]["p50"] <= 2 * rotation
