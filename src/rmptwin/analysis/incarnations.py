"""Which incarnation of its node logged each event: the summary's venue metrics and the
history checkers both count a restarted node's events apart from its earlier life's."""

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
