"""Control overhead (seed 2, 5): without loss the original event-driven RMP sends one
control message (the ack, which is also the token pass) per data message; time-driven
tokens acknowledging k messages each send about 1/k."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from rmp_checks import assert_agreement_and_no_loss, frame

from rmptwin.analysis.summary import summarize
from rmptwin.model import load_experiment
from rmptwin.rmp.wire import WANT_MSGS
from rmptwin.sim.random_trees import loaded_experiment, max_path_delay_ms, random_tree
from rmptwin.sim.simulate import simulate

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_one_control_message_per_data_message_without_loss(seed):
    rng = random.Random(seed)
    topo = random_tree(rng, switches=5, primaries=4, sources=2, delay_ms=(0.2, 1.0))
    protocol = {"token_mode": "event_driven", "batch_limit": 1, "dn_ms": max_path_delay_ms(topo) + 2,
                "p_ms": 1, "null_token_ms": 400}
    loaded = loaded_experiment(topo, protocol=protocol, seed=seed, duration_s=3.2,
                               workload={"rate_per_source": 25, "start_s": 0.2, "duration_s": 3.0})
    result = simulate(loaded)
    df = frame(result)
    n = assert_agreement_and_no_loss(df, {h.name: [0] for h in topo.hosts if h.role == "primary"})
    ctrl = df[df.kind == "ctrl_sent"]
    types = {json.loads(d)["type"] for d in ctrl.detail}
    assert types <= {"ACK", "NULL_TOKEN"}, f"lossless run sent {types}"
    acks = ctrl[[json.loads(d)["type"] == "ACK" for d in ctrl.detail]]
    assert len(acks) == n                         # exactly one ack per message
    cpd = summarize(result.events, loaded)["control_per_data"]
    assert 1.0 <= cpd <= 1.15, cpd               # plus the odd null token in a lull


@pytest.mark.parametrize("k", [5, 10, 20])
def test_time_driven_batches_cost_one_over_k(k):
    rng = random.Random(k)
    topo = random_tree(rng, switches=5, primaries=4, sources=2, delay_ms=(0.2, 1.0))
    tau_t_ms = 50.0
    rate = k / (tau_t_ms / 1e3) / 2              # two sources: k messages per token period
    run_s = 3.0
    protocol = {"token_mode": "time_driven", "tau_t_ms": tau_t_ms, "dn_ms": max_path_delay_ms(topo) + 2,
                "p_ms": 1}
    loaded = loaded_experiment(topo, protocol=protocol, seed=k, duration_s=run_s,
                               workload={"rate_per_source": rate, "arrival": "constant", "start_s": 0.0,
                                         "duration_s": run_s - 0.1})
    result = simulate(loaded)
    df = frame(result)
    assert_agreement_and_no_loss(df, {h.name: [0] for h in topo.hosts if h.role == "primary"}, all_acked=False)
    acks = df[df.kind == "ack_sent"]
    sizes = [json.loads(d)["k"] for d in acks.detail]
    assert abs(sum(sizes) / len(sizes) - k) <= 0.1 * k
    cpd = summarize(result.events, loaded)["control_per_data"]
    assert abs(cpd - 1 / k) <= 0.15 / k, (cpd, 1 / k)


def _ring_with_k_p(k_p, seed):
    """The NACK-reduction claim's ring (8 primaries, pairs of them behind 4 lossy uplinks)."""
    base = load_experiment(REPO / "experiments/claims/base/ring.yaml")
    protocol = base.experiment.protocol.model_copy(update={"k_p": k_p, "delta_a_ms": 80})
    exp = base.experiment.model_copy(update={"protocol": protocol})
    return base.__class__(experiment=exp, topology=base.topology, path=base.path)


@pytest.mark.parametrize("seed", [1, 2])
def test_nack_reduction_spares_the_later_sets_their_requests(seed):
    # Seed 5.2: a loss on a regional uplink is missed by both primaries behind it; with one
    # receiver per request set (k_p = m) the first asks, the repair is multicast, and the
    # second hears it before its slot. Every message still reaches every primary.
    counts = {}
    for k_p in (1, 8):
        loaded = _ring_with_k_p(k_p, seed)
        df = frame(simulate(loaded, seed))
        primaries = [h.name for h in loaded.topology.hosts if h.role == "primary"]
        assert_agreement_and_no_loss(df, {p: [0] for p in primaries})
        nacks = df[(df.kind == "nack_sent") & df.node.isin(primaries)]
        counts[k_p] = sum(1 for d in nacks.detail if json.loads(d)["want"] == WANT_MSGS)
    assert counts[8] <= 0.75 * counts[1], counts
