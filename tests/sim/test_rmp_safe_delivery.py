"""Delivery "safe" against the seed's ticker delivery ("agreed") when failures are suspected
falsely: one request attempt (k_r = 1) on links losing 10-30 %, and sometimes a dN far
below the real path delay, so members are declared dead while they are alive, miss every
invitation and go on with the old ring, and two reformation servers race.

Agreed delivery hands a message to the application as soon as it is acknowledged, so a
member cut off that way can deliver acks a new ring reassigns: two receivers then place
different messages at one sequence number. Safe delivery waits until the token has gone
round the ring (the seed's stability, t - m + 1) and forms rings from a majority of the
primaries; no two receivers ever disagree, whatever the timing."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rmp_checks import assert_agreement_and_no_loss, frame

from rmptwin.analysis.summary import summarize
from rmptwin.model import load_experiment
from rmptwin.sim.random_trees import loaded_experiment, max_path_delay_ms, random_tree
from rmptwin.sim.simulate import simulate


def chaotic(seed: int, delivery: str, *, dn_factor: float = 1.0):
    """A random tree, ring and protocol where false suspicions are common; ``dn_factor``
    below 1 also breaks the seed's timing assumption (dN bounds the one-way delay)."""
    rng = random.Random(seed)
    mode = rng.choice(["event_driven", "time_driven"])
    topo = random_tree(rng, switches=rng.randint(2, 8), primaries=rng.randint(2, 5), sources=rng.randint(1, 3),
                       secondaries=rng.randint(0, 1), reformers=rng.randint(1, 2),
                       max_loss=rng.choice([0.1, 0.2, 0.3]))
    protocol = {"token_mode": mode, "dn_ms": round(max_path_delay_ms(topo) * dn_factor) + 5,
                "k_r": rng.choice([1, 2]), "p_ms": 1, "null_token_ms": rng.choice([60, 100, 200]),
                "batch_limit": rng.choice([4, 256]), "start_policy": rng.choice(["ticker", "conservative"]),
                "delivery": delivery}
    if mode == "time_driven":
        protocol["tau_t_ms"] = rng.choice([20, 60, 100])
    loaded = loaded_experiment(topo, protocol=protocol, seed=seed, duration_s=6.0, workload={
        "rate_per_source": rng.choice([40, 200]), "start_s": 0.2, "duration_s": 1.0})
    return summarize(simulate(loaded).events, loaded)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), dn_factor=st.sampled_from([0.3, 1.0]))
def test_safe_delivery_never_places_two_messages_at_one_number(seed, dn_factor):
    # Safety only: with reformations this frequent a ring may never get a token round.
    assert chaotic(seed, "safe", dn_factor=dn_factor)["order_consistent"]


@pytest.mark.parametrize("seed", [1023])
def test_where_agreed_delivery_disagrees_safe_delivery_does_not(seed):
    """A run where two reformation servers race and install rings that share no member, each
    numbering the history anew: under agreed delivery their members deliver different messages
    at one number; safe delivery, which forms rings of a majority only, does not. (Seeds 943,
    1279 and 1581 split too until a NEW_RING started open requests over with its recovery site
    and receivers asked for every gap in the acks: docs/experiments.md.)"""
    assert not chaotic(seed, "agreed")["order_consistent"]
    assert chaotic(seed, "safe")["order_consistent"]


@pytest.mark.parametrize("seed", [943, 1279, 1581, 646])
def test_seeds_agreed_delivery_split_before_the_fixes_no_longer_split(seed):
    """docs/experiments.md: 943, 1279 and 1581 split with dN at the path delay, and 646 with the
    first of the two fixes alone, until a NEW_RING started open requests over with its recovery
    site and receivers asked for every gap in the acks."""
    assert chaotic(seed, "agreed")["order_consistent"]


def test_without_faults_safe_delivery_agrees_loses_nothing_and_costs_one_rotation(repo):
    base = load_experiment(repo / "experiments" / "line3.yaml")
    runs, summaries = {}, {}
    for delivery in ("agreed", "safe"):
        proto = base.experiment.protocol.model_copy(update={"delivery": delivery})
        loaded = base.model_copy(update={"experiment": base.experiment.model_copy(update={"protocol": proto})})
        runs[delivery] = simulate(loaded, 1)
        summaries[delivery] = summarize(runs[delivery].events, loaded)
    safe = runs["safe"]
    assert_agreement_and_no_loss(frame(safe), {h.name: [0] for h in base.topology.hosts
                                               if h.role in ("primary", "secondary")})
    assert summaries["safe"]["messages_lost"] == 0
    # line3: three primaries, a token pass per message at 50 msg/s (20 ms): a message is
    # stable m - 1 = 2 passes after its ack. Both runs lose the same packets (the link draws
    # are keyed by the seed and the packet), so compare message by message: safe delivery
    # never delivers earlier, and typically two passes later. Delta_A (150 ms) covers that,
    # so the release times (the summary's latency) only grow in the tail.
    def delivered(run):
        ev = run.events.to_pandas()
        return ev[ev.kind == "deliver"].set_index(["node", "src", "src_seq"]).t_ns

    extra_ms = (delivered(safe) - delivered(runs["agreed"])) / 1e6
    assert extra_ms.notna().all() and (extra_ms >= 0).all()
    passes_ms = 2 * 1000 / base.experiment.workload.rate_per_source
    assert extra_ms.median() >= 0.9 * passes_ms
    latency = {d: summaries[d]["delivery_latency_ms"] for d in runs}
    assert latency["safe"]["p50"] >= latency["agreed"]["p50"] and latency["safe"]["p99"] > latency["agreed"]["p99"]


def test_quickstart_safe_releases_simultaneously_with_delta_a_over_a_rotation(repo):
    """Delta_A = 1.8 s >= (m - 1) tau_t + dN = 5 x 0.3 + 0.18 s: most releases stay simultaneous."""
    loaded = load_experiment(repo / "experiments" / "quickstart-safe.yaml")
    s = summarize(simulate(loaded, 1).events, loaded)
    assert s["agreement"] and s["messages_lost"] == 0
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"]
    assert s["fairness_spread_ms"]["p50"] == 0.0
