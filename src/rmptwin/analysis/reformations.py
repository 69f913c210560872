"""Reformations and outages: one definition each, for summary.json, the report, lab 3's
check and its README.

- A *reformation* is the reformation server's REFORM_START followed by its REFORM_DONE (same
  node and stripe): the ring re-formed. Its cause is the REFORM_START's ``why`` (a member
  reported failed, a recovered member asking to join). start_ms, took_ms, cause, ring.
- An *outage* is per CRASH of a ring member (R_P/R_S): the time from the crash until the next
  acknowledgement after the first REFORM_DONE that follows it (``summary.reformation_outages``,
  summary.json's ``reformation_ms``): how long the ring acknowledged nothing. A crash has one
  outage; the member's recovery causes a second reformation (it joins) but no outage.
- A *failure report that led to no reformation* is a FAILURE_REPORT at no time within a
  reformation (from its start to its done) of its stripe: a suspicion the server did not act on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from rmptwin.core.events import Kind

KINDS = (Kind.FAILURE_REPORT, Kind.REFORM_START, Kind.REFORM_DONE)


def _detail(text: object) -> dict[str, Any]:
    try:
        return json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}


def reformation_list(df: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """{"reformations": [...], "failure_reports_unanswered": [...]} from the events (any
    columns t_ns, node, kind, detail; only the kinds in KINDS are read)."""
    rows = df[df.kind.isin(KINDS)].sort_values("t_ns", kind="stable")
    open_: dict[tuple[str, int], tuple[int, str]] = {}
    reformations: list[dict[str, Any]] = []
    windows: list[tuple[int, int, int | None]] = []
    reports: list[tuple[int, int, dict[str, Any]]] = []
    for t, node, kind, det in zip(rows.t_ns, rows.node, rows.kind, rows.detail):
        d = _detail(det)
        key = (node, int(d.get("stripe", 0) or 0))
        if kind == Kind.REFORM_START:
            open_[key] = (int(t), str(d.get("why", "")))
        elif kind == Kind.REFORM_DONE and key in open_:
            start, why = open_.pop(key)
            reformations.append({"start_ms": start / 1e6, "took_ms": (int(t) - start) / 1e6, "cause": why,
                                 "ring": ",".join(d.get("ring") or []), "stripe": key[1]})
            windows.append((key[1], start, int(t)))
        elif kind == Kind.FAILURE_REPORT:
            reports.append((int(t), key[1], d))
    for key, (start, why) in open_.items():   # started, never done before the run ended
        reformations.append({"start_ms": start / 1e6, "took_ms": None, "cause": why, "ring": "", "stripe": key[1]})
        windows.append((key[1], start, None))
    unanswered = [{"t_ms": t / 1e6, "reporter": d.get("reporter"), "suspect": d.get("suspect"), "stripe": s}
                  for t, s, d in reports
                  if not any(s == ws and lo <= t and (hi is None or t <= hi) for ws, lo, hi in windows)]
    return {"reformations": sorted(reformations, key=lambda r: r["start_ms"]),
            "failure_reports_unanswered": unanswered}


def read_reformation_events(files: Iterable[str | Path]) -> pd.DataFrame:
    """The few events ``reformation_list`` reads, straight from a run's event files (the Spark
    analysis' parsed events carry no ``why``)."""
    import pyarrow.parquet as pq

    tables = [pq.read_table(f, columns=["t_ns", "node", "kind", "detail"], filters=[("kind", "in", list(KINDS))])
              for f in files]
    return pd.concat([t.to_pandas() for t in tables], ignore_index=True) if tables else \
        pd.DataFrame(columns=["t_ns", "node", "kind", "detail"])
