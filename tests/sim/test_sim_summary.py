"""analysis.summary.summarize on tiny hand-made event tables: every figure against a value
worked out by hand from the definitions in rmptwin/analysis/summary.py."""

from __future__ import annotations

import pyarrow as pa
import pytest
from sim_stubs import loaded

from rmptwin.analysis.summary import summarize
from rmptwin.core.events import Event
from rmptwin.records.tables import EventLog

MS = 1_000_000

TOPO = {
    "name": "t", "switches": ["a"], "regions": {"r": ["a"]},
    "hosts": [
        {"name": "s1", "role": "source", "switch": "a"},
        {"name": "rp1", "role": "primary", "switch": "a", "regions": ["r"]},
        {"name": "rp2", "role": "primary", "switch": "a", "regions": ["r"]},
        {"name": "rs1", "role": "secondary", "switch": "a", "primary": "rp1", "ring": "x", "regions": ["r"]},
        {"name": "rx1", "role": "retransmit", "switch": "a", "regions": ["r"]},
        {"name": "c1", "role": "customer", "switch": "a", "regions": ["r"], "retransmit": "rx1"},
        {"name": "c2", "role": "customer", "switch": "a", "regions": ["r"], "grade": "best_effort"},
        {"name": "c3", "role": "customer", "switch": "a", "regions": ["r"], "retransmit": "rx1"},
    ],
}
ROLE = {h["name"]: h["role"] for h in TOPO["hosts"]}


def table(rows) -> pa.Table:
    log = EventLog()
    for t_ms, node, kind, *rest in rows:
        src, seq, g = (rest + [("", -1, -1)])[0] if rest else ("", -1, -1)
        log.add(round(t_ms * MS), node, ROLE[node], Event(kind, src=src, src_seq=seq, gseq=g,
                                                           detail={"stripe": 0}))
    return log.table()


def base_rows():
    rows = [(0, "s1", "send", ("s1", 0, -1)), (10, "s1", "send", ("s1", 1, -1)), (20, "s1", "send", ("s1", 2, -1))]
    for node in ("rp1", "rp2", "rs1"):
        rows += [(30, node, "deliver", ("s1", q, q)) for q in range(3)]
    rel = {"rp1": (100, 110, 120), "rp2": (100, 112, 125), "rs1": (101, 110, 120)}
    for node, ts in rel.items():
        rows += [(t, node, "release", ("s1", q, q)) for q, t in enumerate(ts)]
    rows += [(40 + i, "rp1", "ctrl_sent") for i in range(6)]
    rows += [(50, "rp1", "ack_sent"), (60, "rp2", "ack_sent"), (70, "rp1", "ack_sent")]
    rows += [(200, "rp2", "crash"), (300, "rp1", "ack_sent"), (350, "rp1", "reform_done"), (400, "rp1", "ack_sent")]
    rows += [(130, "c1", "cust_recv", ("", -1, g)) for g in range(3)]
    rows += [(130, "c3", "cust_recv", ("", -1, g)) for g in (0, 2)]
    rows += [(130, "c2", "cust_recv", ("", -1, 0))]
    return rows


def test_figures_of_a_clean_run_by_hand():
    s = summarize(table(sorted(base_rows(), key=lambda r: r[0])), loaded(TOPO))
    assert s["receivers"] == 3 and s["operable_receivers"] == 2   # rp2 crashed and stayed down
    assert s["agreement"] is True and s["order_consistent"] is True
    assert s["messages_sent"] == 3 and s["messages_delivered_min"] == 3 and s["messages_lost"] == 0
    assert s["control_per_data"] == pytest.approx(6 / 3)
    # latencies (release - send): rp1 100,100,100; rp2 100,102,105; rs1 101,100,100
    lat = s["delivery_latency_ms"]
    assert lat["p50"] == pytest.approx(100) and lat["max"] == pytest.approx(105)
    assert lat["p99"] == pytest.approx(102 + 0.92 * 3) and lat["n"] == 9
    # spread over OPERABLE R_T only (rp1, rs1): 1, 0, 0 ms
    spread = s["fairness_spread_ms"]
    assert spread["max"] == pytest.approx(1) and spread["p50"] == pytest.approx(0) and spread["n"] == 3
    # crash at 200 ms, reformation done at 350 ms, first ack after it at 400 ms
    assert s["reformation_ms"] == [pytest.approx(200)] and s["reformation_median_ms"] == pytest.approx(200)
    assert s["customers"] == {"count": 3, "guaranteed": 2, "guaranteed_complete": 1}


def test_disagreement_and_loss_are_caught():
    rows = [r for r in base_rows() if not (r[1] == "rs1" and r[2] == "deliver")]
    # rs1 swaps messages 1 and 2 and never gets message 0; the source saw (s1, 3) acknowledged.
    rows += [(30, "rs1", "deliver", ("s1", 2, 1)), (30, "rs1", "deliver", ("s1", 1, 2)),
             (35, "s1", "src_acked", ("s1", 3, -1))]
    s = summarize(table(sorted(rows, key=lambda r: r[0])), loaded(TOPO))
    assert s["agreement"] is False and s["order_consistent"] is False
    # (s1,0) missing at rs1, (s1,3) missing everywhere: two distinct messages lost.
    assert s["messages_lost"] == 2 and s["messages_delivered_min"] == 2


def test_a_receiver_that_lags_breaks_agreement_but_not_order():
    # rs1 delivered only the first two messages, in the right places, when the run ended.
    rows = [r for r in base_rows() if not (r[1] == "rs1" and r[2] == "deliver" and r[3][2] == 2)]
    s = summarize(table(sorted(rows, key=lambda r: r[0])), loaded(TOPO))
    assert s["agreement"] is False and s["order_consistent"] is True
    assert s["messages_lost"] == 1


def test_a_recovered_receiver_owes_only_what_came_after_it_rejoined():
    rows = base_rows() + [(250, "rs1", "crash"), (260, "rs1", "recover")]
    rows = [r for r in rows if not (r[1] == "rs1" and r[2] == "deliver")]
    rows += [(30, "rs1", "deliver", ("s1", 0, 0)), (270, "rs1", "deliver", ("s1", 2, 2))]
    s = summarize(table(sorted(rows, key=lambda r: r[0])), loaded(TOPO))
    assert s["agreement"] is True and s["messages_lost"] == 0
    # ... but one that skips a message after rejoining disagrees and loses it
    rows2 = [r for r in rows if r[:2] != (270, "rs1")] + [(270, "rs1", "deliver", ("s1", 1, 1))]
    s2 = summarize(table(sorted(rows2, key=lambda r: r[0])), loaded(TOPO))
    assert s2["agreement"] is False and s2["messages_lost"] == 1


def test_an_empty_run_has_every_key():
    s = summarize(EventLog().table(), loaded(TOPO))
    for key in ("receivers", "agreement", "messages_sent", "messages_delivered_min", "messages_lost",
                "control_per_data", "delivery_latency_ms", "fairness_spread_ms", "reformation_ms", "customers"):
        assert key in s
    assert s["messages_sent"] == 0 and s["reformation_ms"] == [] and s["delivery_latency_ms"]["p50"] is None
