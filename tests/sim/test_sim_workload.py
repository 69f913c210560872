"""The workload schedule: rates, stripes a source serves, payloads, determinism."""

from __future__ import annotations

import math

from sim_stubs import loaded

from rmptwin.core.striping import symbol_stripe
from rmptwin.core.trade_report import TradeReport
from rmptwin.factories.ticker_workload import schedule

TOPO = {
    "name": "t", "switches": ["a"],
    "hosts": [
        {"name": "s1", "role": "source", "switch": "a", "stripes": [1]},
        {"name": "s2", "role": "source", "switch": "a"},
        {"name": "s3", "role": "source", "switch": "a"},
    ],
}


def test_poisson_rate_stripes_and_payloads():
    exp = loaded(TOPO, workload={"sources": ["s1", "s2"], "rate_per_source": 400, "arrival": "poisson",
                                 "start_s": 1.0, "duration_s": 10.0, "stripes": 3, "symbols": 12,
                                 "message_bytes": 100})
    pubs = schedule(exp, seed=3)
    by_src = {s: [p for p in pubs if p.source == s] for s in ("s1", "s2", "s3")}
    assert by_src["s3"] == []                                  # not in workload.sources
    for s in ("s1", "s2"):
        n = len(by_src[s])
        assert abs(n - 4000) < 5 * math.sqrt(4000)             # Poisson count, 5 sigma
    assert {p.stripe for p in by_src["s1"]} == {1}              # s1 serves stripe 1 only
    assert {p.stripe for p in by_src["s2"]} == {0, 1, 2}
    assert [p.t_ns for p in pubs] == sorted(p.t_ns for p in pubs)
    assert all(1_000_000_000 <= p.t_ns < 11_000_000_000 for p in pubs)
    for p in pubs[:200]:
        assert len(p.payload) == 100
        r = TradeReport.decode(p.payload)
        assert r.time_ns == p.t_ns and symbol_stripe(int(r.symbol[1:]), 3) == p.stripe and r.price_e4 > 0


def test_constant_rate_is_exact_and_sources_are_staggered():
    exp = loaded(TOPO, workload={"rate_per_source": 100, "arrival": "constant", "start_s": 0.0, "duration_s": 1.0,
                                 "stripes": 2})
    pubs = schedule(exp, seed=1)
    for s in ("s1", "s2", "s3"):
        times = [p.t_ns for p in pubs if p.source == s]
        assert len(times) == 100 and {b - a for a, b in zip(times, times[1:])} <= {10_000_000, 10_000_001, 9_999_999}
    assert len({p.t_ns for p in pubs}) == 300


def test_same_seed_same_schedule_and_sources_do_not_disturb_each_other():
    wl = {"rate_per_source": 200, "start_s": 0.0, "duration_s": 2.0, "stripes": 2}
    a = schedule(loaded(TOPO, workload=wl), seed=5)
    assert a == schedule(loaded(TOPO, workload=wl), seed=5)
    assert a != schedule(loaded(TOPO, workload=wl), seed=6)
    only_s2 = schedule(loaded(TOPO, workload={**wl, "sources": ["s2"]}), seed=5)
    assert only_s2 == [p for p in a if p.source == "s2"]
