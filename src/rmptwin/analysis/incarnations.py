"""Which incarnation of its node logged each event: the summary's venue metrics and the
history checkers both count a restarted node's events apart from its earlier life's; and how
each node's lives ended (``lives_at_end``), which the summary and its sections share."""

from __future__ import annotations

import pandas as pd

from rmptwin.core.events import Kind


def ordered(df: pd.DataFrame) -> pd.DataFrame:
    """Events in time order, ties in the order they were logged."""
    return df.sort_values("t_ns", kind="stable")


def incarnations(df: pd.DataFrame) -> pd.Series:
    """Per row of the time-ordered ``df``: RECOVERs of its node at or before it, in logged order
    (a core that starts over logs RECOVER after what it delivered at the same instant)."""
    return (df.kind == Kind.RECOVER).astype(int).groupby(df.node.to_numpy()).cumsum()


def lives_at_end(df: pd.DataFrame) -> tuple[set[str], dict[str, int]]:
    """Nodes crashed at the end (the last of their CRASH/RECOVER is a CRASH), and the time each
    recovered node last recovered."""
    life = ordered(df[df.kind.isin([Kind.CRASH, Kind.RECOVER])])
    crashed_at_end: set[str] = set()
    recovered_at: dict[str, int] = {}
    for node, g in life.groupby("node", sort=False):
        last = g.iloc[-1]
        if last.kind == Kind.CRASH:
            crashed_at_end.add(node)
        else:
            recovered_at[node] = int(last.t_ns)
    return crashed_at_end, recovered_at
