"""Seed 6 on the emulated network: the controller drops the attackers' multicast at their edge.

One `rmptwin run` of experiments/security-attack.yaml (namespace hosts): the network builds
trees only for authorized senders, so every frame the four attackers multicast is dropped
by a drop rule at their own switch and counted in the switches' flow statistics; nothing
of theirs is sequenced or delivered, and the legitimate ticker loses nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.analysis.security_summary import HEADLINE
from rmptwin.factories.keys import generate, key_path, write_keys
from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]


def test_attackers_are_dropped_at_their_edge_and_achieve_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    loaded = load_experiment(REPO / "experiments" / "security-attack.yaml")
    write_keys(generate(loaded), key_path(loaded))
    s = run_experiment(loaded, "emulation", out=tmp_path / "run",
                       options=EmulationOptions(nodes="ns", capture=[])).summary
    assert {k: s[k] for k in HEADLINE} == {k: 0 for k in HEADLINE}
    assert s["agreement"] and s["messages_lost"] == 0
    sec = s["security"]
    assert sec["enforcement"] == "cores+network"
    # every frame an attacker multicast met its edge switch's drop rule (attackers on s1, s2, s3)
    sent = sum(sec["attack_frames"].values())
    # (a frame the attacker's own host failed to put on the wire is logged yet never reaches it)
    assert sent > 0 and 0.95 * sent <= s["unauthorized_dropped"] <= sent
    assert all(n > 0 for n in sec["unauthorized_dropped_by_switch"].values())
