"""model.drain: the run length ``auto`` stands for, and who asks it (validate, chaos)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin import api
from rmptwin.chaos.campaign import Campaign, with_faults
from rmptwin.model.drain import (
    auto_duration_s,
    drain_s,
    fault_drain_s,
    recovery_s,
    run_length_warnings,
    workload_end_s,
)

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "experiments" / "quickstart.yaml"


def test_quickstart_figures_are_the_documented_ones():
    q = api.load_experiment(QUICKSTART)
    e, t = q.experiment, q.topology
    assert e.duration_s == "auto" and q.duration_s == auto_duration_s(e, t) == 10.6
    assert workload_end_s(e, t) == 4.5
    assert recovery_s(e, t) == pytest.approx(8.89, abs=0.005)   # model.drain.recovery_s's docstring
    assert q.to_manifest()["experiment"]["duration_s"] == 10.6   # a rerun lasts what the run lasted


@pytest.mark.parametrize("rate, k_r, delta_a", [(100, 3, 1500), (1000, 1, 0), (10, 12, 4000)])
def test_auto_covers_the_workload_and_grows_with_the_protocols_timers(rate, k_r, delta_a):
    q = api.load_experiment(QUICKSTART, {"workload.rate_per_source": rate, "protocol.k_r": k_r,
                                         "protocol.delta_a_ms": delta_a})
    e, t = q.experiment, q.topology
    assert q.duration_s >= workload_end_s(e, t) + drain_s(e, t) - 1e-9
    longer = api.load_experiment(QUICKSTART, {"workload.rate_per_source": rate, "protocol.k_r": k_r,
                                              "protocol.delta_a_ms": delta_a + 1000})
    assert longer.duration_s == pytest.approx(q.duration_s + 1.0, abs=0.1)


def test_only_an_explicit_duration_shorter_than_the_work_is_warned():
    q = api.load_experiment(QUICKSTART)
    e, t = q.experiment, q.topology
    assert run_length_warnings(e, t) == []
    assert run_length_warnings(e.model_copy(update={"duration_s": q.duration_s}), t) == []
    (w,) = run_length_warnings(e.model_copy(update={"duration_s": 8.0}), t)
    assert w.key == "duration_vs_drain" and w.path == ("duration_s",) and "10.6 s in all" in w.message


def test_every_chaos_run_lasts_until_its_last_fault_could_be_recovered_from():
    q = api.load_experiment(QUICKSTART, {"duration_s": 5.0})     # an experiment's own, too short
    c = Campaign(q, runs=2, seed=1)
    e, t = c.loaded.experiment, c.loaded.topology
    assert c.loaded.duration_s == pytest.approx(workload_end_s(e, t) + fault_drain_s(e, t), abs=0.1)
    late = with_faults(c.loaded, [{"at_s": 9.0, "action": "pause", "node": "rp1", "duration_s": 3.0}])
    assert late.duration_s == pytest.approx(12.0 + fault_drain_s(e, t), abs=0.1)
    early = with_faults(c.loaded, [{"at_s": 1.0, "action": "crash", "node": "rp1"}])
    assert early.duration_s == c.loaded.duration_s


def test_delays_from_one_switch_are_the_pairwise_worst_delays_jitter_included():
    """``tree.worst_delays_from`` (one Dijkstra, what the drain's d uses) agrees with
    ``tree.worst_delay_ms`` host by host, on links with jitter."""
    from rmptwin.model.tree import links_delay_ms, worst_delay_ms, worst_delays_from

    t = api.load_experiment(QUICKSTART).topology
    t = t.model_copy(update={"links": [lk.model_copy(update={"jitter_ms": 1.5 * i}) for i, lk in enumerate(t.links)]})
    for src in t.hosts_with_role("source"):
        far = worst_delays_from(t, src.switch)
        for h in t.hosts:
            assert links_delay_ms([src.link, h.link]) + far[h.switch] == pytest.approx(worst_delay_ms(t, src, h))
