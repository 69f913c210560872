"""The emulated venue (etcd sequencer) under the four nemeses of issue 22, item 5: kill -9 of
an EV, a partition between an EV and the etcd members, a paused etcd member, a gateway
restart. Each run: 0 trades lost, the CAS history linearizable, the EV states equal, and the
outage the fault causes measured (printed; checkers.probe.venue_outage_ms).

Measured as root on the emulated network, 2026-11-26, at 300 req/s (``RATE``; at venue-failover's
5,000 req/s both EVs fell seconds behind and every scenario failed on agreement): all four keep
every invariant; outages 114 ms (ev_kill9), 351 ms (ev_partition), 2,014 ms (etcd_member_pause:
the sequencer host's client waits its 2 s timeout on the paused member before asking the next)
and 4,370 ms (gateway_restart: the gateway is down 1 s, its clients wait on it). Measured again
(2026-11-26 23:37, etcd's gRPC API, a restarted node a spare started ahead): 103, 144, 2,007 and
1,240 ms (the restarted gateway no longer spends its interpreter's start after the fault). Before this
round's fixes none passed: the partitioned EV asked for one missing body per timer and never
caught up (648 against 1,828 positions), and the CAS checker charged a retried proposal from the
retry, not its first copy, and gave up after 2 M steps on 100-180 indeterminate copies.

A run that flags itself overloaded (its timers late: ``runtime.overloaded``) may end with an EV
still catching up; there, and only there, unequal EV positions are an expected failure that
names the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.chaos.venue_nemeses import SCENARIOS, scenario
from rmptwin.checkers.probe_checker import venue_outage_ms
from rmptwin.checkers.suite import check_run
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]
# venue-failover offers 5,000 req/s for 6 s: four times what the etcd-sequenced emulated venue
# completes on 2 CPUs (bench_venue: ~1,000 req/s with both EVs as processes). Overloaded, the
# EVs fall seconds behind (measured: 658 and 206 of 30,000 positions by the end) and "states
# equal at the end" judges the backlog, not the fault. The nemeses are judged at a rate the
# machine sustains; the faults keep their times.
RATE = 300.0


def _sustainable(loaded):
    venue = loaded.experiment.venue.model_copy(update={"rate": RATE})
    return loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"venue": venue})})


@pytest.mark.parametrize("name", SCENARIOS)
def test_emulated_venue_keeps_its_invariants_under(name, tmp_path):
    base = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    assert base.experiment.venue.sequencer == "etcd"
    loaded, _ = scenario(_sustainable(base), name)
    outcome = run_experiment(loaded, "emulation", out=tmp_path / name, options=EmulationOptions(nodes="ns"))
    verdicts = {v.checker: v for v in check_run(outcome.run_dir)}
    assert verdicts["venue"].status == "ok", verdicts["venue"].violation
    assert outcome.summary.get("trades_lost") in (0, None)
    if outcome.summary.get("ev_agreement") is not True:
        positions = f"last positions {outcome.summary.get('ev_last_position')}"
        assert outcome.summary["runtime"].get("overloaded"), f"the EVs disagree at the end: {positions}"
        pytest.xfail(f"the run flagged itself overloaded and an EV was still catching up: {positions}")
    df = outcome.run_dir.read_events().to_pandas()
    if name == "etcd_member_pause":
        assert (df.kind == Kind.PAUSE).sum() == 1 and (df.kind == Kind.RESUME).sum() == 1
    outage = venue_outage_ms(df, loaded)
    print(f"{name}: outage {outage:.1f} ms")
    assert outage is not None
    cas = verdicts["cas_linearizable"]
    assert cas.status == "ok", cas.violation.message if cas.violation else cas
