"""ev_consistent (analysis.venue_metrics) with a restarted EV: the trades its new incarnation
logs while replaying positions the old one executed are compared per incarnation, not appended
to the old ones. (Measured emulated, ev_kill9 with a spare: both EVs ended at position 1,828
with equal checkpoints, and the summary said ev_agreement false.)"""

from __future__ import annotations

import pandas as pd

from rmptwin.analysis.venue_metrics import _same_trades_and_states

COLUMNS = ["t_ns", "node", "kind", "src_seq", "gseq", "bytes", "detail"]


def _run(replayed: str) -> pd.DataFrame:
    trade = lambda t, node, d: (t, node, "trade", 7, 20, 0, d)
    rows = [trade(10, "ev2", '{"price":1}'), trade(10, "ev2", '{"price":2}'),
            trade(11, "ev1", '{"price":1}'), trade(11, "ev1", '{"price":2}'),
            (20, "ev2", "crash", -1, -1, 0, "{}"), (30, "ev2", "recover", -1, -1, 0, "{}"),
            trade(40, "ev2", '{"price":1}'), trade(40, "ev2", replayed)]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_a_replayed_position_with_the_same_trades_is_consistent():
    assert _same_trades_and_states(_run('{"price":2}'), ["ev1", "ev2"])


def test_a_replay_that_produces_other_trades_is_not():
    assert not _same_trades_and_states(_run('{"price":3}'), ["ev1", "ev2"])
