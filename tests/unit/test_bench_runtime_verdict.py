"""The rate benchmark's pass rule (issue 10 item 3), on summaries (no emulation): a run passes
only with agreement, nothing lost, every guaranteed customer complete, p99 within the bound,
no reformation and the sources on the ticker's schedule; each failure says which."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmptwin.bench import bench_runtime as br
from rmptwin.bench.bench_runtime import REPO, at_rate, latency_bound_ms, run_facts, verdict
from rmptwin.model import load_experiment


def _summary(**over) -> dict:
    s = {"agreement": True, "order_consistent": True, "messages_lost": 0,
         "customers": {"guaranteed": 9, "guaranteed_complete": 9}, "delivery_latency_ms": {"p99": 2600.0}}
    return {**s, **over}


def test_the_bound_is_twice_delta_a_plus_the_longest_path():
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    assert 2 * 1500 < latency_bound_ms(loaded) < 2 * (1500 + 300)


def test_a_clean_run_passes_and_each_failure_is_named():
    ok = {"reformations": 0, "behind_s": 0.1}
    assert verdict(_summary(), 3333, ok) == []
    assert verdict(_summary(delivery_latency_ms={"p99": 3900.0}), 3333, ok) == ["latency p99 3900 ms > 3333 ms"]
    assert verdict(_summary(agreement=False), 3333, ok)[0].startswith("no agreement")
    assert verdict(_summary(messages_lost=3), 3333, ok) == ["3 lost"]
    assert verdict(_summary(customers={"guaranteed": 9, "guaranteed_complete": 8}), 3333, ok) == \
        ["guaranteed customers complete 8/9"]
    assert verdict(_summary(), 3333, {"reformations": 2, "behind_s": 0.0}) == ["2 reformation(s)"]
    assert verdict(_summary(), 3333, {"reformations": 0, "behind_s": 3.8}) == \
        ["the sources fell 3.8 s behind the schedule"]


def test_run_facts_counts_reformations_and_how_late_the_last_send_went_out(tmp_path):
    loaded = at_rate(load_experiment(REPO / "experiments" / "quickstart.yaml"), 1000, 3.0)   # trades 0.5-3.5 s
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"t_ns": [600_000_000, 5_500_000_000, 6_000_000_000, 6_100_000_000],
                             "kind": ["send", "send", "reform_start", "reform_done"]}), path)
    assert run_facts(path, loaded) == {"reformations": 1, "behind_s": 2.0}


def _plan(tdf, busy, idle=0.3):
    return {"tdf": tdf, "headroom": 0.25, "cpus": 2, "predicted_busy_cpus": busy, "predicted_idle_cpus": idle,
            "predicted_wall_s": 600.0}


@pytest.mark.parametrize("plan, skipped", [
    (_plan(24.0, 0.45), False),     # on time below the largest factor
    (_plan(64.0, 0.52), False),     # a little over its budget at 64: run, the timers judge
    (_plan(64.0, 1.75), True),      # twice the budget at 64: the run would measure the machine
])
def test_a_dilated_step_is_not_run_when_its_plan_is_overloaded_at_the_largest_factor(monkeypatch, plan, skipped):
    from rmptwin.runner import calibrate

    monkeypatch.setattr(calibrate, "plan_run", lambda loaded, options, say: (loaded, plan))
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    why = br.beyond_the_ladder(loaded, "docker")
    assert (why is not None) == skipped
    if skipped:   # it says what no factor shrinks and the factor that would do
        assert "0.30 idle" in why and "time dilation 464" in why, why
