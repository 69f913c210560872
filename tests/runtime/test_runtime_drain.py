"""The runner's stop rule (``node.drain``), fed with a simulated run's real event stream:
a finished run is quiescent, a run cut short is not, and the rule names what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmptwin.core.events import Event
from rmptwin.model import load_experiment
from rmptwin.node.drain import NodeProgress, owed_stripes, quiescent
from rmptwin.sim.simulate import simulate

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture(scope="module")
def line3():
    loaded = load_experiment(EXPERIMENTS / "line3.yaml")
    rows = simulate(loaded, 1).events.to_pylist()
    return loaded, rows


def _statuses(loaded, rows, until_ns=None, skip=lambda r: False):
    progress = {h.name: NodeProgress(h.role == "customer" and h.grade == "guaranteed")
                for h in loaded.topology.hosts}
    for r in rows:
        if (until_ns is None or r["t_ns"] <= until_ns) and r["node"] in progress and not skip(r):
            progress[r["node"]].add(Event(r["kind"], r["src"], r["src_seq"], r["gseq"], r["bytes"],
                                          json.loads(r["detail"])))
    # Through JSON, as the STATUS lines travel.
    return {n: json.loads(json.dumps(p.status())) for n, p in progress.items()}


def test_a_finished_run_is_quiescent(line3):
    loaded, rows = line3
    assert quiescent(_statuses(loaded, rows), owed_stripes(loaded)) == (True, "")


def test_a_run_cut_while_messages_are_in_flight_is_not(line3):
    loaded, rows = line3
    w = loaded.experiment.workload
    mid = round((w.start_s + w.duration_s / 2) * 1e9)
    done, why = quiescent(_statuses(loaded, rows, until_ns=mid), owed_stripes(loaded))
    assert not done and why


def test_a_guaranteed_customer_missing_one_message_holds_the_run(line3):
    loaded, rows = line3
    who = sorted(h.name for h in loaded.topology.hosts_with_role("customer") if h.grade == "guaranteed")[0]
    first = next(r for r in rows if r["node"] == who and r["kind"] == "cust_recv")
    done, why = quiescent(_statuses(loaded, rows, skip=lambda r: r is first), owed_stripes(loaded))
    assert not done and who in why


def test_a_receiver_that_has_not_released_the_last_ack_holds_the_run(line3):
    loaded, rows = line3
    last = max((r for r in rows if r["node"] == "rp2" and r["kind"] == "release"), key=lambda r: r["gseq"])
    done, why = quiescent(_statuses(loaded, rows, skip=lambda r: r is last), owed_stripes(loaded))
    assert not done and "rp2" in why


def test_edge_stripes_hold_the_run_until_each_guaranteed_customer_has_every_edge_sequence():
    """Edge stripes (seed 4.4) have their own sequence numbers: a guaranteed customer owes each
    edge stripe it joined up to what an R_T released on it, not up to the core stripe's gseq."""
    loaded = load_experiment(EXPERIMENTS / "edge-stripes.yaml")
    rows = simulate(loaded, 1).events.to_pylist()
    owes = owed_stripes(loaded)
    assert owes["modem1"] == [9]
    assert quiescent(_statuses(loaded, rows), owes) == (True, "")
    last = max((r for r in rows if r["node"] == "modem1" and r["kind"] == "cust_recv"), key=lambda r: r["gseq"])
    done, why = quiescent(_statuses(loaded, rows, skip=lambda r: r is last), owes)
    assert not done and "modem1" in why and "stripe 9" in why


# An emulated chaos campaign on line3 (2026-11-29, campaign seed 1, run 13) drew this schedule;
# two of its first twenty runs waited out the 60 s cap for work that was done. The simulator
# gives both ways it happened.
PARTITION = [{"action": "clock", "at_s": 0.711, "drift_ppm": -489.096, "jump_ms": -36.431, "node": "rp2"},
             {"action": "partition", "at_s": 1.57, "duration_s": 0.63, "groups": [["s1", "s3"]]}]


@pytest.mark.parametrize("seed, what", [
    (1, "a NEW_RING revoked acks that died with the old token site; the source re-sent those messages and "
        "the new ring acknowledged them again: two SRC_ACKED for one message"),
    (14, "rp3, cut off, started over (RECOVER) and delivered the history again; it releases what it had "
         "not released, late (the stop rule once waited for releases that never came)"),
])
def test_a_run_whose_ring_reformed_around_a_partition_is_quiescent_at_its_end(seed, what):
    from rmptwin.chaos.campaign import with_faults

    loaded = with_faults(load_experiment(EXPERIMENTS / "line3.yaml"), PARTITION)
    rows = simulate(loaded, seed).events.to_pylist()
    kinds = [r["kind"] for r in rows]
    acked = [(r["src"], r["src_seq"]) for r in rows if r["kind"] == "src_acked"]
    # the case is what the parameter says it is
    assert (len(acked) > len(set(acked))) == (seed == 1) and ("recover" in kinds), what
    assert quiescent(_statuses(loaded, rows), owed_stripes(loaded)) == (True, ""), what
    # and still not before the last message is acknowledged
    last_ack = max(r["t_ns"] for r in rows if r["kind"] == "src_acked")
    assert not quiescent(_statuses(loaded, rows, until_ns=last_ack - 1), owed_stripes(loaded))[0]


def test_a_receiver_that_started_over_releases_every_message_once():
    """Seed 14's rp3 started over after the partition: before, it never released positions
    69-100 (due before it started over, never released before either); now it releases what it
    had not released, late, and nothing twice, so its customers owe nothing to other R_Ts."""
    from rmptwin.chaos.campaign import with_faults

    loaded = with_faults(load_experiment(EXPERIMENTS / "line3.yaml"), PARTITION)
    rows = simulate(loaded, 14).events.to_pylist()
    started_over = {r["node"] for r in rows if r["kind"] == "recover" and "cause" in (r.get("detail") or "")}
    assert started_over, "the schedule no longer makes a receiver start over: the test judges nothing"
    for node in started_over:
        mine = [r for r in rows if r["node"] == node]
        released = [(r["src"], r["src_seq"]) for r in mine if r["kind"] == "release"]
        delivered = {(r["src"], r["src_seq"]) for r in mine if r["kind"] == "deliver"}
        assert len(released) == len(set(released)), f"{node} released a message twice"
        assert set(released) == delivered, f"{node} never released {sorted(delivered - set(released))[:5]}"
