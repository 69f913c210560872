"""A run that ended before its drain: the ``ended_before_drain`` key.

Registered in ``analysis.sections`` like the applications: ``summarize`` adds the key to
summary.json only when the run was cut short (a run that lasted its work has no such key),
``headline`` prints it under the run's table, ``report_html`` shows it. The checkers ask
``cut_ns`` too, so that what a short run left open is reported as that and never as a loss.

Definitions (simulated and emulated runs alike):

- the run's end: its duration, or its last event if that came later (an emulated run drains
  past its duration until quiescent);
- the drain: what the protocol's timers need after the last piece of work
  (``model.drain.drain_s``; with faults, ``fault_drain_s``);
- the cut: the end minus the drain. Work that started after the cut could not be finished by
  the end, whatever the protocol does;
- messages: messages first sent after the cut that some receiver (R_P/R_S) up at the end and
  serving their stripe has not released;
- repairs: positions released after the cut that a guaranteed customer up at the end, taking
  that stripe, has not received;
- work_cut: the run ended before its workload did (``model.drain.workload_end_s``): messages
  were never sent.

``messages_lost`` leaves the open messages out, and the messages and customers checkers do not
owe them: they are a short run, not a protocol's violation.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.incarnations import lives_at_end
from rmptwin.analysis.stripe_delivery import RELEASE_KINDS, first_send_times, rt_names, stripe_delivery, stripe_of
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment
from rmptwin.model.drain import auto_duration_s, drain_s, fault_drain_s, workload_end_s
from rmptwin.model.queries import customer_stripes, stripes_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData

KEY = "ended_before_drain"
S = 1_000_000_000
KINDS = (Kind.SEND, Kind.DELIVER, *RELEASE_KINDS, Kind.CUST_RECV, Kind.CRASH, Kind.RECOVER)
Message = tuple[int, str, int]   # (stripe, src, src_seq)


def end_ns(df: pd.DataFrame, loaded: LoadedExperiment, last_ns: int | None = None) -> int:
    """The run's end: its duration, or its last event (``last_ns`` if the frame holds only some
    kinds) if later."""
    last = last_ns if last_ns is not None else int(df.t_ns.max()) if len(df) else 0
    return max(round(loaded.duration_s * S), last)


def needed_drain_s(loaded: LoadedExperiment) -> float:
    e, t = loaded.experiment, loaded.topology
    return fault_drain_s(e, t) if e.faults else drain_s(e, t)


def cut_ns(df: pd.DataFrame, loaded: LoadedExperiment, last_ns: int | None = None) -> int:
    """Work that started after this instant could not be finished by the run's end."""
    return end_ns(df, loaded, last_ns) - round(needed_drain_s(loaded) * S)


def open_messages(df: pd.DataFrame, loaded: LoadedExperiment, cut: int) -> set[Message]:
    """Messages first sent after ``cut`` that an operable receiver serving their stripe has not
    released (module docstring)."""
    late = {m for m, t in first_send_times(df).items() if t > cut}
    if not late:
        return set()
    down, _ = lives_at_end(df)
    receivers = [h for h in loaded.topology.hosts if h.role in ("primary", "secondary") and h.name not in down]
    dl = df[(df.kind == Kind.DELIVER) & df.node.isin([h.name for h in receivers])]
    at: dict[tuple[int, int], Message] = {}
    for s, q, g, det in zip(dl.src, dl.src_seq, dl.gseq, dl.detail):
        at.setdefault((stripe_of(det), int(g)), (stripe_of(det), s, int(q)))
    rel = df[(df.kind == Kind.RELEASE) & df.node.isin([h.name for h in receivers])]
    released: dict[str, set[Message]] = {h.name: set() for h in receivers}
    for node, s, q, g, det in zip(rel.node, rel.src, rel.src_seq, rel.gseq, rel.detail):
        k = stripe_of(det)
        msg = (k, s, int(q)) if s else at.get((k, int(g)))
        if msg is not None:
            released[node].add(msg)
    return {m for m in late for h in receivers if m[0] in stripes_of(h, loaded) and m not in released[h.name]}


def open_repairs(df: pd.DataFrame, loaded: LoadedExperiment, cut: int) -> int:
    """Positions released after ``cut`` that a guaranteed customer up at the end lacks."""
    customers = [c for c in loaded.topology.hosts_with_role("customer") if c.grade == "guaranteed"]
    if not customers:
        return 0
    rel = df[df.kind.isin(list(RELEASE_KINDS))]
    first: dict[tuple[int, int], int] = {}
    for g, t, det in zip(rel.gseq, rel.t_ns, rel.detail):
        key = (stripe_of(det), int(g))
        first[key] = min(first.get(key, int(t)), int(t))
    delivery = stripe_delivery(df, rt_names(loaded.topology))
    down, _ = lives_at_end(df)
    return sum(1 for c in customers if c.name not in down for k in customer_stripes(c, loaded)
               for g in delivery.missing(c.name, k) if first.get((k, g), 0) > cut)


def drain_state(df: pd.DataFrame, loaded: LoadedExperiment, last_ns: int | None = None) -> dict[str, Any]:
    """{messages, repairs, run_s, work_end_s, drain_s, needs_s} of a run cut short; {} for a run that
    lasted its work."""
    e, t = loaded.experiment, loaded.topology
    run_s = end_ns(df, loaded, last_ns) / S
    work = workload_end_s(e, t)
    cut = cut_ns(df, loaded, last_ns)
    messages, repairs = len(open_messages(df, loaded, cut)), open_repairs(df, loaded, cut)
    if not messages and not repairs and run_s >= work:
        return {}
    return {"messages": messages, "repairs": repairs, "run_s": round(run_s, 3), "work_end_s": round(work, 3),
            "drain_s": round(needed_drain_s(loaded), 3), "needs_s": auto_duration_s(e, t)}


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    found = drain_state(df, loaded)
    return {KEY: found} if found else {}


def spark_metrics(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    """The same figure from the run's raw events (their detail is needed, which the parsed
    frame drops), filtered by Spark to the kinds it reads; the run's end from all of them."""
    from pyspark.sql import functions as F

    from rmptwin.analysis import schemas
    from rmptwin.rundir.run import RunDir

    loaded = LoadedExperiment.from_manifest(rd.manifest, rd.path)
    _, _, files = RunDir(rd.path).check()
    raw = spark.read.schema(schemas.EVENTS).parquet(*[str(f) for f in files])
    last = raw.agg(F.max("t_ns")).first()
    found = drain_state(raw.where(raw.kind.isin(list(KINDS))).toPandas(), loaded,
                        int(last[0]) if last is not None and last[0] is not None else 0)
    return {KEY: found} if found else {}


def describe(found: dict[str, Any]) -> str:
    """``117 messages, 0 repairs (the run lasted 5.5 s; its work needs 6.2 s: duration_s: auto)``."""
    cut = f"; its workload ran to {found['work_end_s']:g} s" if found["run_s"] < found["work_end_s"] else ""
    return (f"{found['messages']} messages, {found['repairs']} repairs (the run lasted {found['run_s']:g} s; "
            f"its work needs {found['needs_s']:g} s{cut}: duration_s: auto)")


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    found = summary.get(KEY)
    return [(KEY, describe(found))] if found else []


def report_html(m: dict[str, Any]) -> str:
    found = (m.get("drain") or {}).get(KEY)
    if not found:
        return ""
    return (f"<h2 id='ended-before-drain'>Ended before its drain</h2><p>The run ended before the protocol could "
            f"finish its work: {html.escape(describe(found))}. What was still open is not counted as lost.</p>")
