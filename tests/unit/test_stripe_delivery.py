"""One definition of released and received per stripe (analysis.stripe_delivery) serves every
judge of a customer's completeness: summary.json's customers.guaranteed_complete, its edge
section, customers_incomplete (pandas and the kinds its Spark path reads) and the customers
checker. On edge stripes (RMP seed 4.4) the releases a customer owes are the R_T's
EDGE_RELEASE, numbered by the edge stripe's own sequence: a guaranteed customer that missed one
is incomplete by all of them (customers_incomplete and the checker counted RELEASE only, so
found nothing owed on an edge stripe)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rmptwin.analysis import customer_completeness, edge_summary, summary
from rmptwin.analysis.stripe_delivery import stripe_delivery, stripe_of
from rmptwin.checkers.customers import gap_free
from rmptwin.checkers.suite import customer_history
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.model.queries import customer_stripes, edge_plan

REPO = Path(__file__).resolve().parents[2]
POSITIONS = (1, 2, 3)
MISSED = ("modem1", 9, 2)   # the guaranteed modem misses edge position 2 of its edge stripe 9


def _event(t, node, role, kind, position, **detail) -> dict:
    return {"t_ns": t, "node": node, "role": role, "kind": kind, "src": "", "src_seq": -1, "gseq": position,
            "bytes": 64, "detail": json.dumps(detail)}


@pytest.fixture(scope="module")
def edge_run():
    """experiments/edge-stripes.yaml's hosts with a made-up event table: rp1 releases positions
    1..3 on each core stripe and EDGE_RELEASEs 1..3 on each edge stripe; every customer
    receives all of its edge stripes' but MISSED."""
    loaded = load_experiment(REPO / "experiments" / "edge-stripes.yaml")
    plan = edge_plan(loaded)
    rows, t = [], 0
    for core in range(loaded.experiment.workload.stripes):
        for g in POSITIONS:
            t += 1
            rows.append(_event(t, "rp1", "primary", Kind.RELEASE, g, stripe=core))
    for edge in plan.ids():
        for g in POSITIONS:
            t += 1
            rows.append(_event(t, "rp1", "primary", Kind.EDGE_RELEASE, g, stripe=edge, core_stripe=0, gseq=g))
    for c in loaded.topology.hosts_with_role("customer"):
        for s in customer_stripes(c, loaded):
            for g in POSITIONS:
                if (c.name, s, g) != MISSED:
                    t += 1
                    rows.append(_event(t, c.name, "customer", Kind.CUST_RECV, g, stripe=s, session=f"RMPT{s}"))
    return loaded, pd.DataFrame(rows)


def test_customers_incomplete_counts_edge_releases(edge_run):
    loaded, df = edge_run
    found = customer_completeness.incomplete_customers(df, loaded)
    assert found == {"modem1": {"grade": "guaranteed", "regions": ["metro"], "missing": 1, "stripes": [9],
                                "reason": "ended_before_repair"}}
    # the Spark path reads only customer_completeness.KINDS: the same answer
    assert customer_completeness.incomplete_customers(df[df.kind.isin(customer_completeness.KINDS)], loaded) == found


def test_every_judge_of_completeness_agrees_on_edge_stripes(edge_run):
    loaded, df = edge_run
    s = summary.summarize(df, loaded)
    guaranteed = [c.name for c in loaded.topology.hosts_with_role("customer") if c.grade == "guaranteed"]
    assert "modem1" in guaranteed and len(guaranteed) == 3
    assert s["customers"] == {"count": 4, "guaranteed": 3, "guaranteed_complete": 2}
    edge = s["edge"]
    assert {n: c["complete"] for n, c in edge["customers"].items()} == \
        {"modem1": False, "modem2": True, "t1": True, "broker": True}
    assert edge["customers"]["modem1"]["received"] == 2 and edge["customers"]["modem1"]["released"] == 3
    assert not edge["guaranteed_complete"] and edge["broker_everything"] and edge["none_starving"]
    assert edge["customers"] == edge_summary.summarize(df, loaded)["edge"]["customers"]
    assert s["customers_incomplete"] == customer_completeness.incomplete_customers(df, loaded)
    v = gap_free(customer_history(df, loaded))
    assert v is not None and "modem1 never received position 2 of stripe 9 (1 missing)" in v.message


def test_released_and_received_per_stripe():
    df = pd.DataFrame([
        _event(1, "rp1", "primary", Kind.RELEASE, 7, stripe=1),
        _event(2, "rp1", "primary", Kind.EDGE_RELEASE, 1, stripe=4, core_stripe=1, gseq=7),
        _event(3, "src1", "source", Kind.RELEASE, 8, stripe=1),        # not an R_P/R_S: does not count
        _event(4, "c1", "customer", Kind.CUST_RECV, 1, stripe=4),
    ])
    d = stripe_delivery(df, {"rp1"})
    assert d.released == {1: {7}, 4: {1}} and d.received == {("c1", 4): {1}}
    assert d.complete("c1", [4]) and not d.complete("c1", [1, 4]) and d.missing("c1", 1) == {7}
    assert [stripe_of(x) for x in ('{"stripe": 3}', {"stripe": 2}, "{}", "", None, "not json stripe",
                                   '["stripe"]', '{"stripe": null}')] == [3, 2, 0, 0, 0, 0, 0, 0]
