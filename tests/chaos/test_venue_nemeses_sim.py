"""The venue under the four nemeses of issue 22 item 5, in the simulator (the emulated twin:
tests/runtime/test_venue_nemeses_emulated.py): every run keeps every invariant: no trade lost,
the CAS history linearizable, the EVs' states equal; the outage is measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.chaos.venue_nemeses import SCENARIOS, scenario
from rmptwin.checkers import first_violation
from rmptwin.checkers.probe_checker import venue_outage_ms
from rmptwin.checkers.suite import check_events
from rmptwin.core.events import Kind
from rmptwin.model import load_experiment
from rmptwin.sim.simulate import simulate

REPO = Path(__file__).resolve().parents[2]


def short_venue():
    loaded = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    exp = loaded.experiment
    v = exp.venue.model_copy(update={"rate": 800, "duration_s": 4.0})
    return loaded.model_copy(update={"experiment": exp.model_copy(update={"venue": v, "faults": [],
                                                                        "duration_s": 5.0})})


@pytest.mark.parametrize("name", SCENARIOS)
def test_venue_keeps_its_invariants_under(name):
    loaded, _ = scenario(short_venue(), name)
    result = simulate(loaded)
    df = result.events.to_pandas()
    verdicts = {v.checker: v for v in check_events(df, loaded)}
    assert verdicts["cas_linearizable"].status == "ok", verdicts["cas_linearizable"]
    assert verdicts["venue"].status == "ok", verdicts["venue"].violation
    assert first_violation(list(verdicts.values())) is None
    outage = venue_outage_ms(df, loaded)
    if name == "gateway_restart":   # its clients wait the second it is down
        assert outage >= 900
    else:                           # the other EV (or two etcd members of three) goes on
        assert outage < 200
    if name == "ev_partition":   # the EV's switch was cut off: frames to and from it dropped as 'down'
        drops = result.drops.to_pandas()
        assert (drops.reason == "down").any()
        # and it catches up: it misses the bodies of a second's requests and asks the gateways
        # for all it lacks at once (asked one per timer: 114 ms behind at the end here, and
        # emulated at 300 req/s it never caught up; now 0.2 ms, as docs/fault-campaigns.md says)
        done = df[df.kind == Kind.SEQ_POSITION].groupby("node").agg(last=("gseq", "max"), t=("t_ns", "max"))
        assert done["last"].nunique() == 1, done
        assert round((done.t.max() - done.t.min()) / 1e6, 1) == 0.2, done
        page = " ".join((REPO / "docs" / "fault-campaigns.md").read_text().split())
        assert "Simulated, the cut-off EV ended 114 ms behind the other; now 0.2 ms." in page
