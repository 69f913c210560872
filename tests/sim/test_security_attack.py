"""Seed section 6 in the simulator: four attackers against the sealed ticker achieve nothing.

experiments/security-attack.yaml (an unauthorized source, a replayer, a forger of a region's
remulticast, a flooder at 10 x) against experiments/security-baseline.yaml (the same network
without them). The simulator has no controller and drops nothing at the edge, so the cores'
sealing alone must keep the three counts at 0. The same attacked run without sealing shows
the attacks (and the counts that catch them) are real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.analysis.security_summary import HEADLINE, flood_p99_ratio
from rmptwin.analysis.summary import summarize
from rmptwin.factories.keys import generate, key_path, write_keys
from rmptwin.model import load_experiment
from rmptwin.rmp.attacker import MODES
from rmptwin.sim.simulate import simulate

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _run(loaded) -> dict:
    return summarize(simulate(loaded, seed=1).events, loaded)


@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    out = {}
    try:
        for name in ("security-attack", "security-baseline"):
            loaded = load_experiment(EXPERIMENTS / f"{name}.yaml")
            write_keys(generate(loaded), key_path(loaded))
            out[name] = _run(loaded)
        attack = load_experiment(EXPERIMENTS / "security-attack.yaml")
        off = attack.experiment.model_copy(update={"security": attack.experiment.security.model_copy(
            update={"enabled": False})})
        out["unsealed"] = _run(attack.model_copy(update={"experiment": off}))
    finally:
        mp.undo()
    return out


def test_no_attack_gets_anything_into_the_ticker(summaries):
    s = summaries["security-attack"]
    assert {k: s[k] for k in HEADLINE} == {k: 0 for k in HEADLINE}
    assert s["agreement"] and s["messages_lost"] == 0
    assert s["security"]["enforcement"] == "cores" and "unauthorized_dropped" not in s


def test_every_attack_mode_sends_and_raises_alarms(summaries):
    sec = summaries["security-attack"]["security"]
    assert sorted(sec["attackers"].values()) == sorted(MODES)
    for mode in MODES:
        assert sec["attack_frames"].get(mode, 0) > 0, mode
        assert sec["alarms_by_attack"].get(mode, 0) > 0, mode
    assert sum(summaries["security-attack"]["alarms"].values()) >= sum(sec["alarms_by_attack"].values())
    # the flooder sends 10 x what the unauthorized source sends
    assert sec["attack_frames"]["flood"] == pytest.approx(10 * sec["attack_frames"]["unauthorized"], rel=0.02)


def test_ticker_latency_under_attack_stays_within_20_percent_of_the_baseline(summaries):
    attacked, base = summaries["security-attack"], summaries["security-baseline"]
    assert base["alarms"] == {} and base["security"]["ticker_latency_ms"]["n"] > 1000
    ratio = flood_p99_ratio(attacked, base)
    assert ratio is not None and abs(ratio - 1) <= 0.2, ratio


def test_without_sealing_the_same_attacks_succeed(summaries):
    s = summaries["unsealed"]
    assert s["security"]["enforcement"] == "none"
    assert s["unauthorized_sequenced"] > 0 and s["forged_delivered"] > 0 and s["replayed_delivered"] > 0
