"""The simulator's SimPy baseline measures the same thing on both sides: the same events, in
the same order, with the same outcome (otherwise the ratio in the benchmark means nothing)."""

from __future__ import annotations

import pytest

from rmptwin.bench.simpy_ring import RingWorkload, run_ours, run_simpy, simpy_available


def test_our_scheduler_processes_every_event_of_the_ring_workload():
    w = RingWorkload(members=4, sources=2, rate=200.0, seconds=0.2)
    st = run_ours(w)
    assert st.events == w.expected_events()
    assert sum(st.acked) == w.sources * w.per_source * w.members   # every member acked every message
    assert 0 < st.ordered <= sum(st.received)


@pytest.mark.skipif(not simpy_available(), reason="simpy is not installed (requirements.lock pins it)")
def test_simpy_runs_the_same_events_to_the_same_outcome():
    w = RingWorkload(members=5, sources=3, rate=300.0, seconds=0.3)
    assert run_simpy(w).outcome() == run_ours(w).outcome()
