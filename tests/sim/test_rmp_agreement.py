"""RMP through the simulator: every receiver places the same messages in the same order and
none is lost, on random trees with 0-20 % loss per link, in both token modes, with and
without secondaries and striping."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rmp_checks import assert_agreement_and_no_loss, frame

from rmptwin.analysis.summary import summarize
from rmptwin.sim.random_trees import loaded_experiment, max_path_delay_ms, random_tree
from rmptwin.sim.simulate import simulate

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def _receivers(topo, stripes: int) -> dict[str, list[int]]:
    return {h.name: list(range(stripes)) for h in topo.hosts if h.role in ("primary", "secondary")}


def run_random(seed: int, mode: str, max_loss: float, *, secondaries: int = 0, stripes: int = 1, k_r: int = 3,
               faults: bool = False):
    """A random tree, ring, protocol options (NACK reduction, batch size, start policy,
    one or two reformation servers) and, with ``faults``, a primary crash (and restart)."""
    rng = random.Random(seed)
    topo = random_tree(rng, switches=rng.randint(2, 8), primaries=rng.randint(2 if faults else 1, 5),
                       sources=rng.randint(1, 3), secondaries=secondaries, reformers=rng.randint(1, 2),
                       max_loss=max_loss)
    protocol = {"token_mode": mode, "dn_ms": max_path_delay_ms(topo) + 5, "k_r": k_r, "p_ms": 1,
                "null_token_ms": rng.choice([60, 100, 200]), "k_p": rng.choice([None, None, 2]),
                "batch_limit": rng.choice([4, 256] + ([1] if mode == "event_driven" else [])),
                "start_policy": rng.choice(["ticker", "conservative"])}
    if mode == "time_driven":
        protocol["tau_t_ms"] = rng.choice([60, 100])
    fault_list = []
    if faults:
        victim = rng.choice([h.name for h in topo.hosts if h.role == "primary"])
        fault_list.append({"at_s": round(rng.uniform(0.3, 1.0), 3), "action": "crash", "node": victim})
        if rng.random() < 0.5:
            fault_list.append({"at_s": round(rng.uniform(1.2, 1.8), 3), "action": "recover", "node": victim})
    loaded = loaded_experiment(
        topo, protocol=protocol, seed=seed, duration_s=6.0, faults=fault_list,
        workload={"rate_per_source": 40, "start_s": 0.2, "duration_s": 1.0, "stripes": stripes},
    )
    result = simulate(loaded)
    return topo, result, loaded


@pytest.mark.parametrize("mode", ["event_driven", "time_driven"])
@SETTINGS
@given(seed=st.integers(0, 10_000), max_loss=st.sampled_from([0.0, 0.05, 0.1, 0.2]))
def test_agreement_and_no_loss_on_random_trees(mode, seed, max_loss):
    topo, result, loaded = run_random(seed, mode, max_loss)
    df = frame(result)
    n = assert_agreement_and_no_loss(df, _receivers(topo, 1))
    summary = summarize(result.events, loaded)
    assert n == summary["messages_sent"] > 0
    # summary.json's figures agree with the independent check
    assert summary["agreement"] and summary["messages_lost"] == 0


@pytest.mark.parametrize("mode", ["event_driven", "time_driven"])
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_secondaries_and_stripes_agree_under_loss(mode, seed):
    topo, result, _ = run_random(seed, mode, 0.1, secondaries=3, stripes=2)
    df = frame(result)
    assert_agreement_and_no_loss(df, _receivers(topo, 2))
    # secondaries never acknowledge: every ack comes from a primary
    acks = df[df.kind.isin(["ack_sent", "null_token"])]
    assert set(acks.role) <= {"primary"}
    # each secondary ring passed its token
    rings = {h.ring for h in topo.hosts if h.role == "secondary"}
    passed = df[df.kind == "secondary_token"]
    ring_names = {__import__("json").loads(d)["ring"] for d in passed.detail}
    assert rings <= ring_names


def test_lost_packets_are_really_recovered():
    """The loss is real: the drop log shows dropped DATA and ACK frames, and receivers
    placed messages they first got as repairs."""
    rng = random.Random(7)
    topo = random_tree(rng, switches=6, primaries=4, sources=2, max_loss=0.2)
    loaded = loaded_experiment(topo, seed=7, duration_s=5.0,
                               protocol={"token_mode": "event_driven", "dn_ms": max_path_delay_ms(topo) + 5,
                                         "p_ms": 1, "null_token_ms": 100},
                               workload={"rate_per_source": 40, "start_s": 0.2, "duration_s": 1.0})
    result = simulate(loaded)
    drops = result.drops.to_pandas()
    assert {"DATA", "ACK"} <= set(drops.frame)
    df = frame(result)
    assert_agreement_and_no_loss(df, _receivers(topo, 1))
    recv = df[df.kind == "recv"]
    assert any('"repair":true' in d for d in recv.detail)
    assert (df.kind == "nack_sent").sum() > 0


@pytest.mark.parametrize("mode", ["event_driven", "time_driven"])
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), max_loss=st.sampled_from([0.0, 0.05, 0.1, 0.2]))
def test_agreement_survives_crashes_and_restarts(mode, seed, max_loss):
    """A random primary crashes (sometimes comes back) under loss: survivors agree and every
    message a source got acknowledged is placed by each of them."""
    topo, result, loaded = run_random(seed, mode, max_loss, secondaries=1, faults=True)
    df = frame(result)
    assert_agreement_and_no_loss(df, _receivers(topo, 1), all_acked=False)
    summary = summarize(result.events, loaded)
    assert summary["agreement"] and summary["messages_lost"] == 0
