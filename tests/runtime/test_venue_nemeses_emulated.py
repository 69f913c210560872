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

Each run is at ``time_dilation: auto`` (virtual time, docs/virtual-time.md: factor 3 on this
2-CPU machine at 300 req/s), where it is on time, so the EVs must agree at the end: the xfail for
an overloaded run that ended with an EV still catching up is gone. etcd's raft timers and the
sequencer host's deadlines are dilated with the run (``node.etcd_cluster.dilated_raft_timers``):
the paused member costs the client's 2 s timeout in run time at every factor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.chaos.venue_nemeses import SCENARIOS, scenario
from rmptwin.checkers.probe_checker import venue_outage_ms
from rmptwin.checkers.suite import check_run
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.node.etcd_client import CAS_TIMEOUT_S
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
    exp = loaded.experiment.model_copy(update={"venue": venue, "time_dilation": "auto"})
    return loaded.model_copy(update={"experiment": exp})


@pytest.mark.parametrize("name", SCENARIOS)
def test_emulated_venue_keeps_its_invariants_under(name, tmp_path):
    base = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    assert base.experiment.venue.sequencer == "etcd"
    loaded, _ = scenario(_sustainable(base), name)
    outcome = run_experiment(loaded, "emulation", out=tmp_path / name, options=EmulationOptions(nodes="ns"))
    verdicts = {v.checker: v for v in check_run(outcome.run_dir)}
    assert verdicts["venue"].status == "ok", verdicts["venue"].violation
    assert outcome.summary.get("trades_lost") in (0, None)
    runtime = outcome.summary["runtime"]
    assert not runtime.get("overloaded"), f"overloaded at time dilation {runtime.get('time_dilation')}: {runtime}"
    assert outcome.summary.get("ev_agreement") is True, f"last positions {outcome.summary.get('ev_last_position')}"
    df = outcome.run_dir.read_events().to_pandas()
    outage = venue_outage_ms(df, loaded)
    print(f"{name}: outage {outage:.1f} ms of run time at time dilation {runtime.get('time_dilation')}")
    assert outage is not None
    if name == "etcd_member_pause":
        assert (df.kind == Kind.PAUSE).sum() == 1 and (df.kind == Kind.RESUME).sum() == 1
        # the client passes the paused member over after its timeout, in run time at any factor
        # (undilated, it would be the timeout / the factor)
        assert CAS_TIMEOUT_S * 1e3 <= outage <= CAS_TIMEOUT_S * 1e3 * 1.5, outage
    cas = verdicts["cas_linearizable"]
    assert cas.status == "ok", cas.violation.message if cas.violation else cas
