"""A standby EV in the simulator (experiments/venue-failover-standby.yaml, shortened): ev1
crashes under load, the standby ev3 is promoted at once and is in sync in well under the
seed's 5 ms, with no trade lost and every EV's state the same."""

from __future__ import annotations

import pytest
from test_venue_sim import REPO, run, with_venue

from rmptwin.core.events import Kind
from rmptwin.errors import UserError
from rmptwin.model import Fault, LoadedExperiment, load_experiment
from rmptwin.model.loading import cross_check


@pytest.fixture(scope="module")
def standby_run():
    base = load_experiment(REPO / "experiments" / "venue-failover-standby.yaml")
    exp = base.experiment.model_copy(update={"duration_s": 3.0, "faults": [Fault(at_s=1.5, action="crash", node="ev1")]})
    loaded = with_venue(LoadedExperiment(experiment=exp, topology=base.topology, path=base.path), duration_s=2.6)
    return loaded, *run(loaded)


def test_crash_with_a_standby_loses_nothing_and_syncs_under_5ms(standby_run):
    loaded, sim, df, s = standby_run
    assert s["requests_completed"] == s["requests_accepted"] > 5_000
    assert s["trades"] > 500 and s["trades_lost"] == 0
    assert s["ev_agreement"] is True
    assert sim.by_name["ev3"].core.state_hash() == sim.by_name["ev2"].core.state_hash()
    assert sim.by_name["ev3"].core.trade_hash == sim.by_name["ev2"].core.trade_hash
    # promoted once, at the crash, and in sync well under the seed's 5 ms
    promoted = df[(df.kind == Kind.CTRL_SENT) & (df.node == "ev3") & df.detail.str.contains("PROMOTED")]
    assert list(promoted.t_ns) == [1_500_000_000]
    (sync,) = df[df.kind == Kind.SYNC_DONE].itertuples()
    assert sync.node == "ev3" and sync.t_ns - 1_500_000_000 == s["sync_ms"] * 1e6
    assert 0 < s["sync_ms"] < 5.0
    # standing by it logged the same checkpoint states as the live EVs, and completed nothing
    vs = df[df.kind == Kind.VENUE_STATE]
    ev2 = dict(zip(vs[vs.node == "ev2"].gseq, vs[vs.node == "ev2"].detail))
    before = vs[(vs.node == "ev3") & (vs.t_ns < 1.5e9)]
    assert len(before) >= 2 and all(ev2[g] == d for g, d in zip(before.gseq, before.detail))
    done = df[(df.kind == Kind.ORDER_DONE) & (df.src == "ev3")]
    assert len(done) > 0 and (done.t_ns > 1.5e9).all()


def test_standby_needs_two_venue_hosts_and_a_history_recorder():
    base = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    exp = base.experiment.model_copy(update={"venue": base.experiment.venue.model_copy(update={"standby": True})})
    cross_check(base.path, exp, base.topology)   # venue.yaml: two EVs and an HR: fine
    one_ev = base.topology.model_copy(update={"hosts": [h for h in base.topology.hosts if h.name != "ev2"]})
    with pytest.raises(UserError, match="at least two venue hosts"):
        cross_check(base.path, exp, one_ev)
    no_hr = base.topology.model_copy(update={"hosts": [h for h in base.topology.hosts if h.role != "history"]})
    with pytest.raises(UserError, match="no history host"):
        cross_check(base.path, exp, no_hr)
