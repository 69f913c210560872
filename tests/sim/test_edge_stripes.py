"""Edge stripes (RMP seed 4.4): the R_T re-cuts each core stripe into narrow stripes of related
stocks sized for the slowest line; customers join what their line carries and get all of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmptwin.core.events import Kind
from rmptwin.core.striping import session_name
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.model.queries import edge_plan
from rmptwin.rmp.edge_stripes import message_bits, plan_edges, stripes_within
from rmptwin.runner.pipeline import run_experiment

REPO = Path(__file__).resolve().parents[2]


def test_plan_puts_each_symbol_on_one_edge_stripe_of_its_core_stripe_within_the_line():
    plan = plan_edges(symbols=200, stripes=2, msgs_per_symbol=10.0, message_bytes=64, line_kbps=56)
    ids = plan.ids()
    assert ids == list(range(2, 2 + len(ids)))                       # numbered after the core stripes
    seen = []
    for core, edges in plan.edges.items():
        for e, syms in edges:
            assert all(s % 2 == core for s in syms)                  # only its core stripe's stocks
            assert list(syms) == sorted(syms) and len(syms) >= 1     # related = adjacent numbers
            assert plan.rate_bps(e) <= 56_000
            seen += syms
    assert sorted(seen) == list(range(200))                          # every stock exactly once
    assert len({session_name(e) for e in ids}) == len(ids)           # a MoldUDP64 session each


def test_a_line_takes_as_many_edge_stripes_as_it_carries_and_always_one():
    plan = plan_edges(symbols=200, stripes=2, msgs_per_symbol=10.0, message_bytes=64, line_kbps=56)
    assert len(stripes_within(plan, 56, None)) == 1
    assert len(stripes_within(plan, 56, [9])) == 1 and stripes_within(plan, 56, [9]) == [9]
    t1 = stripes_within(plan, 1500, None)
    assert 1 < len(t1) < len(plan.ids()) and sum(plan.rate_bps(e) for e in t1) <= 1.5e6
    assert stripes_within(plan, 45_000, None) == plan.ids()
    with pytest.raises(ValueError, match="more than the line"):
        plan_edges(symbols=10, stripes=1, msgs_per_symbol=100.0, message_bytes=64, line_kbps=56)
    assert message_bits(64) == (64 + 2 + 62) * 8 * 1.25


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    loaded = load_experiment(REPO / "experiments" / "edge-stripes.yaml")
    out = tmp_path_factory.mktemp("edge") / "run"
    summary = run_experiment(loaded, out=out).summary
    return loaded, out, summary


def test_customers_within_their_lines_none_starving_guaranteed_complete(run):
    loaded, out, s = run
    e = s["edge"]
    assert s["agreement"] and s["messages_lost"] == 0
    c = e["customers"]
    assert len(c["modem1"]["stripes"]) == 1 and c["modem1"]["stripes"] == [9]   # the one it picked
    assert len(c["modem2"]["stripes"]) == 1
    assert 1 < len(c["t1"]["stripes"]) < e["stripes"]
    assert len(c["broker"]["stripes"]) == e["stripes"]
    for name, cust in c.items():
        assert cust["received_kbps"] <= cust["line_kbps"], name
        assert cust["received"] > 0 and not cust["starving"], name
        if cust["grade"] == "guaranteed":
            assert cust["complete"] and cust["received"] == cust["released"], name
    assert c["broker"]["released"] == s["messages_sent"]      # the broker: every message of the ticker
    assert e["all_within_line"] and e["none_starving"] and e["guaranteed_complete"] and e["broker_everything"]
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"]


def test_each_edge_stripe_is_its_own_session_and_group(run):
    loaded, out, s = run
    import pyarrow.parquet as pq

    df = pq.read_table(out / "events" / "events.parquet").to_pandas()
    recv = df[(df.kind == Kind.CUST_RECV) & (df.node == "modem1")]
    sessions = {json.loads(d)["session"] for d in recv.detail}
    assert sessions == {session_name(9)}
    # its Mold sequence numbers are its own: 1, 2, 3, ... with nothing missing
    seqs = sorted(set(recv.gseq))
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_customer_naming_a_stripe_that_is_no_edge_stripe_is_one_error_line():
    from rmptwin.model.overrides import make_point
    from rmptwin.model.queries import customer_stripes

    loaded = load_experiment(REPO / "experiments" / "edge-stripes.yaml")
    bad = make_point(loaded, {"topology.hosts.7.stripes": [999]}).loaded
    with pytest.raises(UserError, match="not edge stripes"):
        customer_stripes(bad.topology.hosts[7], bad)
    assert edge_plan(loaded) is not None


def test_a_modem_repairs_a_lost_packet_of_its_stripe_within_its_line(tmp_path):
    """Seed 1 at 500 msg/s loses the packet of edge stripe 21 carrying Mold 35-41 on the
    core-metro link. A modem on stripe 21 asks rx1 once and is repaired: the answer (524 bytes,
    75 ms at 56 Kbps behind the live feed) arrived 94 ms after the request, after a customer
    that re-requested every tau_r (30 ms) had given the 7 messages up (retries_exhausted)."""
    import pyarrow.parquet as pq

    from rmptwin.model.overrides import make_point

    loaded = load_experiment(REPO / "experiments" / "edge-stripes.yaml")
    point = make_point(loaded, {"workload.rate_per_source": 500, "topology.hosts.7.stripes": [21]}).loaded
    s = run_experiment(point, out=tmp_path / "run").summary
    df = pq.read_table(tmp_path / "run" / "events" / "events.parquet").to_pandas()
    modem = s["edge"]["customers"]["modem1"]
    assert modem["stripes"] == [21] and modem["complete"], s.get("customers_incomplete")
    m = df[df.node == "modem1"]
    gaps = [json.loads(d) for d in m[m.kind == Kind.CUST_GAP].detail]
    assert [(g["first"], g["count"]) for g in gaps] == [(35, 7)]     # the loss this test is about
    assert (m.kind == Kind.CUST_SKIP).sum() == 0
    assert (m.kind == Kind.NACK_SENT).sum() == 1                     # one request, one answer on the line
    repaired = m[(m.kind == Kind.CUST_RECV) & (m.d_repair == True)]
    assert sorted(repaired.gseq) == list(range(35, 42))
