"""The ``checks`` probe (``sweeps.probes``): every checker's verdict on a run and its outage,
as figures of the run's row. A campaign runs it on every run; a sweep may too (--probe checks).

- ``checks.verdict``: "violation" if any checker found one, else "ok";
- ``checks.<checker>``: ok, violation or skipped;
- ``checks.first``: the first violation's line ("" if none); ``checks.evidence``: its events (JSON);
- ``checks.outage_ms``: the longest time between two consecutive ACK_SENT of a stripe while
  its sources publish (a ring that cannot order does not acknowledge), 0 with no acks;
- ``checks.reformations``: rings re-formed (REFORM_DONE of the reformation servers, per stripe);
- ``checks.venue_outage_ms``: the longest time a gateway completed no order during the venue load
  (``venue_outage_ms``; None without a venue).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmptwin.checkers import first_violation
from rmptwin.checkers.suite import check_events
from rmptwin.core.events import Kind

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment


def outage_ms(df: pd.DataFrame, loaded: LoadedExperiment) -> float:
    w = loaded.experiment.workload
    lo, hi = round(w.start_s * 1e9), round((w.start_s + w.duration_s) * 1e9)
    acks = df[df.kind == Kind.ACK_SENT]
    stripes = acks.d_stripe.fillna(0).astype(int) if "d_stripe" in acks.columns else pd.Series(0, index=acks.index)
    worst = 0.0
    for _, g in acks.groupby(stripes.to_numpy()):
        t = np.sort(g.t_ns.to_numpy())
        t = np.concatenate([[lo], t[(t > lo) & (t < hi)], [hi]])
        worst = max(worst, float(np.diff(t).max()) / 1e6)
    return worst


def checks(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    verdicts = check_events(df, loaded)
    v = first_violation(verdicts)
    out: dict[str, Any] = {"verdict": "violation" if v else "ok", **{x.checker: x.status for x in verdicts},
           "first": v.line() if v else "", "evidence": json.dumps(list(v.events)[:6]) if v else "[]"}
    has_ring = (df.kind == Kind.ACK_SENT).any()
    out["outage_ms"] = outage_ms(df, loaded) if has_ring else None
    out["reformations"] = int(((df.kind == Kind.REFORM_DONE) & (df.role == "reformation")).sum())
    out["venue_outage_ms"] = venue_outage_ms(df, loaded) if (df.kind == Kind.ORDER_DONE).any() else None
    return out


def venue_outage_ms(df: pd.DataFrame, loaded: LoadedExperiment) -> float | None:
    """The longest time one gateway completed no order (ORDER_DONE) while the venue load runs:
    the outage a fault causes to that gateway's clients (with two EVs, losing one need not stop
    any). None without a venue load."""
    v = loaded.experiment.venue
    if v is None:
        return None
    lo, hi = round(v.start_s * 1e9), round((v.start_s + v.duration_s) * 1e9)
    done = df[df.kind == Kind.ORDER_DONE]
    worst = 0.0
    for _, g in done.groupby("node"):
        t = np.sort(g.t_ns.to_numpy())
        t = np.concatenate([[lo], t[(t > lo) & (t < hi)], [hi]])
        worst = max(worst, float(np.diff(t).max()) / 1e6)
    return worst if len(done) else float(hi - lo) / 1e6
