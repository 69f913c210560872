"""The applications' agreement keys as checkers (their definitions stay in their summary
sections: ``analysis.floor_summary`` and ``analysis.orders_summary``).

- ``floor``: participants_agree (every operable floor node ends with the same state hash)
  and floor_trades_lost == 0 (no trade confirmed once and missing at the end);
- ``orders``: exchanges_agree (each exchange executed in ring order; shared offers in one order).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rmptwin.analysis.incarnations import ordered
from rmptwin.checkers import Violation
from rmptwin.checkers.histories import event_dict
from rmptwin.core.events import Kind


def _last_per_node(df: pd.DataFrame, kind: str) -> tuple[dict[str, Any], ...]:
    rows = ordered(df[df.kind == kind]).groupby("node", sort=True).tail(1)
    return tuple(event_dict(t, n, k, s, q, g, d) for t, n, k, s, q, g, d in
                 zip(rows.t_ns, rows.node, rows.kind, rows.src, rows.src_seq, rows.gseq, rows.detail))


def floor_verdict(summary: dict[str, Any], df: pd.DataFrame) -> Violation | None:
    if summary.get("participants_agree") is False:
        return Violation("floor", "participants_agree is false: the floor nodes end with different states",
                         _last_per_node(df, Kind.FLOOR_STATE))
    if summary.get("floor_trades_lost"):
        return Violation("floor", f"{summary['floor_trades_lost']} trade(s) confirmed and missing at the end",
                         _last_per_node(df, Kind.FLOOR_TRADE))
    return None


def orders_verdict(summary: dict[str, Any], df: pd.DataFrame) -> Violation | None:
    if summary.get("exchanges_agree") is False:
        return Violation("orders", "exchanges_agree is false: exchanges executed shared offers in different orders "
                                   "(or out of ring order)", _last_per_node(df, Kind.OFFER_EXEC))
    return None
