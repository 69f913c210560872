"""Layered rings (RMP seed 4.1): a secondary ring reports a message stable (SECONDARY_STABLE)
only once every one of its members holds it, and two layers of k rings of k need far fewer
token passes than one ring of k x k (the seed's L_2 = sqrt(L_1))."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rmptwin.claims.evaluate import CLAIMS_DIR
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.model.overrides import make_point
from rmptwin.sim.simulate import simulate
from rmptwin.sweeps.layering_probe import layered_passes

TOPOLOGIES = "../../../topologies/claims"


def _run(topology: str):
    base = load_experiment(CLAIMS_DIR / "base" / "ring.yaml")
    loaded = make_point(base, {"topology": f"{TOPOLOGIES}/{topology}.yaml"}).loaded   # the claim's runs
    return loaded, simulate(loaded).events.to_pandas()


@pytest.fixture(scope="module")
def layered():
    return _run("ring2-n16")


def test_secondary_stable_only_once_every_member_of_the_ring_holds_it(layered):
    loaded, df = layered
    stable = df[df.kind == Kind.SECONDARY_STABLE]
    rings = {json.loads(d)["ring"] for d in stable.detail}
    assert rings == {f"reg{j}" for j in range(1, 5)}          # every secondary ring reports
    members = {}
    for h in loaded.topology.hosts:
        if h.role == "secondary":
            members.setdefault(h.ring, {h.primary}).add(h.name)
    deliver = df[df.kind == Kind.DELIVER]
    checked = 0
    for t, g, d in zip(stable.t_ns, stable.gseq, stable.detail):
        if g < 1:
            continue   # an ack of no message (gseqs start at 1)
        for m in members[json.loads(d)["ring"]]:
            held = deliver[(deliver.node == m) & (deliver.t_ns <= t)].gseq
            assert len(held) and held.max() >= g, f"{m} did not hold {g} when its ring called it stable"
        checked += 1
    assert checked > 50


def test_two_layers_need_about_sqrt_of_the_passes_of_one_ring(layered):
    loaded, df = layered
    two = layered_passes(df, loaded, None)
    one_loaded, one_df = _run("ring-m16")
    one = layered_passes(one_df, one_loaded, None)
    assert one["levels"] == 1 and two["levels"] == 2 and one["receivers"] == two["receivers"] == 16
    assert two["rings"] == 5
    assert abs(one["layered_passes"] - 16) <= 0.2 * 16             # L_1 = m
    assert two["layered_passes"] < 0.5 * one["layered_passes"]     # L_2 far below L_1 (seed: sqrt)
    assert np.isfinite(two["layered_passes"])
