"""MINC link-loss inference: the estimator's algebra, the logical tree, and accuracy on a
seeded binary tree of known loss with 20,000 packets."""

from __future__ import annotations

import numpy as np
import pytest

from rmptwin.analysis import extract, latency, loss, minc, synthetic
from rmptwin.model import Topology

pytestmark = pytest.mark.spark


def test_solve_a_recovers_reach_probability_from_exact_gammas():
    # A node reached with probability a, leaves below passing with b_j: the exact gammas.
    for a, bs in [(0.9, [0.95, 0.97]), (0.8, [0.9, 0.99, 0.93]), (0.99, [0.5, 0.6, 0.7, 0.8])]:
        g_children = [a * b for b in bs]
        g = a * (1 - np.prod([1 - b for b in bs]))
        assert minc.solve_a(g, g_children) == pytest.approx(a, abs=1e-9)


def test_solve_a_binary_closed_form():
    g1, g2, g = 0.81, 0.77, 0.86
    assert minc.solve_a(g, [g1, g2]) == pytest.approx(g1 * g2 / (g1 + g2 - g), abs=1e-9)


def test_logical_tree_collapses_single_child_switches():
    topo = Topology.model_validate({
        "name": "chain", "switches": ["s1", "s2", "s3", "s4"],
        "links": [{"a": "s1", "b": "s2"}, {"a": "s2", "b": "s3"}, {"a": "s2", "b": "s4"}],
        "hosts": [{"name": "h0", "role": "source", "switch": "s1"},
                  {"name": "r1", "role": "primary", "switch": "s3"},
                  {"name": "r2", "role": "primary", "switch": "s3"},
                  {"name": "r3", "role": "primary", "switch": "s4"}]})
    t = minc.logical_tree(topo, "h0", ["r1", "r2", "r3"])
    # h0 -> s1 -> s2 has one child each: the first logical link is the chain h0>s1>s2.
    assert t.children["h0"] == ["s2"] and t.label("s2") == "h0>s1>s2"
    assert t.children["s2"] == ["r3", "s3"]  # s4 has only r3 below it: s2>s4>r3 is one link
    assert t.label("r3") == "s2>s4>r3" and t.children["s3"] == ["r1", "r2"]
    assert t.leaves_in_order() == ["r3", "r1", "r2"]
    assert set(t.ancestors("r1")) == {"r1", "s3", "s2"}


def test_minc_estimates_every_link_within_one_point_of_ground_truth(spark, tmp_path):
    losses = synthetic.default_losses(seed=11)
    assert min(losses.values()) >= 0.01 and max(losses.values()) <= 0.10
    run = synthetic.write_run(tmp_path / "run", packets=20_000, seed=5, losses=losses, loss_only=True)
    truth = synthetic.true_drop_rates(run)  # counted from the drawn fates, independently of Spark
    rd = extract.load_run(spark, run)
    fate = loss.fates(rd.events, rd.hosts).cache()
    rows = minc.minc_links(spark, rd.topology, fate, latency.sends(rd.events), rd.drops, None, 75.0)
    fate.unpersist()
    assert len(rows) == 15  # src link, 6 switch links, 8 access links: a binary tree, nothing collapsed
    for r in rows:
        link = (r["parent"], r["child"])
        assert r["packets"] == 20_000
        assert r["configured"] == pytest.approx(losses[link])
        assert r["truth"] == pytest.approx(truth[link], abs=1e-12), link
        assert abs(r["estimate"] - truth[link]) < 0.01, (link, r["estimate"], truth[link])


def test_first_reception_patterns_and_gamma(spark, events_df):
    from spark_eventlog import ev, small_topology

    # 4 packets; a first-received 0, 1; b 0, 1, 3; c all (as test_transforms.loss_log).
    rows = [ev(1000 * i, "h0", "source", "send", "h0", i) for i in range(4)]
    rows += [ev(1000 * i + 50, "c", "primary", "recv", "h0", i, repair=False) for i in range(4)]
    rows += [ev(1000 * i + 100, "a", "primary", "recv", "h0", i, repair=False) for i in (0, 1)]
    rows += [ev(1000 * i + 100, "b", "primary", "recv", "h0", i, repair=False) for i in (0, 1, 3)]
    rows += [ev(2900, "a", "primary", "recv", "h0", 2, repair=True)]
    fate = loss.fates(events_df(rows), extract.hosts_frame(spark, small_topology()))
    receivers = ["a", "b", "c"]  # bits 1, 2, 4
    masks = {r["src_seq"]: (r["n"], r["first_0"]) for r in minc.packet_masks(fate, receivers).collect()}
    assert masks == {0: (3, 7), 1: (3, 7), 2: (3, 4), 3: (3, 6)}
    patterns = minc.first_patterns(minc.complete_packets(minc.packet_masks(fate, receivers))).collect()
    assert {r["first_0"]: r["packets"] for r in patterns} == {7: 2, 4: 1, 6: 1}
    # h0 -> s1 -> {a, b}; h0 -> c.
    tree = minc.LogicalTree(root="h0", parent={"s1": "h0", "a": "s1", "b": "s1", "c": "h0"},
                            children={"h0": ["c", "s1"], "s1": ["a", "b"]},
                            hops={n: [("x", n)] for n in ("s1", "a", "b", "c")}, receivers=receivers)
    gam, npk = minc.gamma([r.asDict() for r in patterns], {("h0", 0): tree}, receivers)
    assert npk == {("h0", 0): 4}
    assert gam == {("h0", 0): {"a": 0.5, "b": 0.75, "c": 1.0, "s1": 0.75}}


def test_complete_packets_leave_out_those_a_crashed_receiver_missed(spark, events_df):
    from spark_eventlog import ev, small_topology

    rows = [ev(1000 * i, "h0", "source", "send", "h0", i) for i in range(4)]
    rows += [ev(1000 * i + 50, n, "primary", "recv", "h0", i, repair=False) for i in range(4) for n in "abc"]
    rows += [ev(1500, "c", "primary", "crash"), ev(2500, "c", "primary", "recover"),
             ev(100, "b", "primary", "crash")]  # b expects only packet 0, c all but 2
    fate = loss.fates(events_df(rows), extract.hosts_frame(spark, small_topology()))
    masks = minc.packet_masks(fate, ["a", "b", "c"])
    assert {r["src_seq"]: r["n"] for r in masks.collect()} == {0: 3, 1: 2, 2: 1, 3: 2}
    assert [(r["src_seq"], r["first_0"]) for r in minc.complete_packets(masks).collect()] == [(0, 7)]
