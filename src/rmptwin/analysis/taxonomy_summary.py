"""The sequencer-taxonomy section of a run (seed sequencer-taxonomy; ``rmptwin.taxonomy``):
summary keys, Spark metrics (same function, same events), report fragment and headline rows
(see ``sections``).

A run is a taxonomy run when its experiment has a ``taxonomy:`` section. Its members are the
``taxonomy_member`` hosts (the sequencer and every receiver); a member is operable when the
last of its CRASH/RECOVER events is not CRASH. A message is (src, src_seq).

``order_figures`` defines each figure once; ``taxonomy_compare.measure_run`` calls it on a
run directory's events for the taxonomy, RMP and CAS runs it compares (RMP: the primaries
are the receivers; CAS: a message is (gateway, gw_seq) of ORDER_IN, delivered at the
venues' SEQ_POSITION).

- messages_sent: distinct messages of SEND (CAS: ORDER_IN); a message is sent at its first.
- messages_delivered_min: least number of distinct messages an operable receiver DELIVERed.
- messages_lost: sent messages some operable receiver did not DELIVER by the end.
- agreement: no two operable receivers DELIVERed different messages at one gseq.
- latency_ms: DELIVER time - send time over every delivery of a sent message at an operable
  receiver (``stats.percentiles``).
- resume_ms: when a receiver is crashed at the end, from the first such crash to the first
  delivery, at an operable receiver, of a message sent after it; None if none (or no crash).

Summary keys: ``taxonomy: {protocol, members, operable_members, agreement, messages_sent,
messages_delivered_min, messages_lost, latency_ms, resume_ms}``. The ticker's top-level
``receivers``, ``operable_receivers``, ``agreement``, ``messages_delivered_min`` and
``messages_lost`` count R_P/R_S hosts, of which a taxonomy run has none (0 receivers,
vacuously agreeing): for a taxonomy run they are replaced by the members' figures above.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.stats import percentiles
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData

ROLE = "taxonomy_member"
KINDS = (Kind.SEND, Kind.DELIVER, Kind.ORDER_IN, Kind.SEQ_POSITION, Kind.CRASH, Kind.RECOVER)
COLUMNS = ("t_ns", "node", "kind", "src", "src_seq", "gseq", "detail")
Message = tuple[str, int]                    # (src, src_seq), or (gateway, gw_seq) under CAS
Delivery = tuple[int, str, Message, int]     # (t, node, message, gseq)


def _message_events(df: pd.DataFrame, receivers: set[str],
                    protocol: str) -> tuple[dict[Message, int], list[Delivery]]:
    """({message: first send time}, [(t, node, message, gseq)] of the receivers' deliveries)."""
    cas = protocol == "cas"
    send_kind = Kind.ORDER_IN if cas else Kind.SEND
    deliver_kind = Kind.SEQ_POSITION if cas else Kind.DELIVER
    df = df[df.kind.isin([send_kind, deliver_kind])].sort_values("t_ns", kind="stable")
    sent: dict[Message, int] = {}
    deliveries: list[Delivery] = []
    for t, node, kind, src, seq, gseq, detail in zip(df.t_ns, df.node, df.kind, df.src, df.src_seq,
                                                     df.gseq, df.detail):
        if kind == send_kind:
            key = (node, json.loads(detail)["gw_seq"]) if cas else (src, int(seq))
            sent.setdefault(key, int(t))
        elif node in receivers:
            deliveries.append((int(t), node, (src, int(seq)), int(gseq)))
    return sent, deliveries


def crashed_at_end(df: pd.DataFrame) -> dict[str, int]:
    """{node: its last CRASH time} of the nodes whose last CRASH/RECOVER is a CRASH."""
    life = df[df.kind.isin([Kind.CRASH, Kind.RECOVER])].sort_values("t_ns", kind="stable")
    out: dict[str, int] = {}
    for t, node, kind in zip(life.t_ns, life.node, life.kind):
        if kind == Kind.CRASH:
            out[node] = int(t)
        else:
            out.pop(node, None)
    return out


def order_figures(df: pd.DataFrame, receivers: set[str], protocol: str) -> dict[str, Any]:
    """Every figure of the module docstring from an event table (columns of ``tables.EVENT_SCHEMA``)."""
    crashed = crashed_at_end(df)
    operable = receivers - set(crashed)
    sent, deliveries = _message_events(df, receivers, protocol)
    got: dict[str, set[Message]] = defaultdict(set)
    at: dict[int, set[Message]] = defaultdict(set)
    latencies: list[float] = []
    for t, node, msg, gseq in deliveries:
        if node in operable:
            got[node].add(msg)
            at[gseq].add(msg)
            if msg in sent:
                latencies.append((t - sent[msg]) / 1e6)
    first_crash = min(crashed.values()) if crashed else None
    return {
        "members": len(receivers),
        "operable_members": len(operable),
        "agreement": all(len(msgs) == 1 for msgs in at.values()),
        "messages_sent": len(sent),
        "messages_delivered_min": min((len(got[n]) for n in operable), default=0),
        "messages_lost": sum(1 for m in sent if any(m not in got[n] for n in operable)),
        "latency_ms": percentiles(latencies),
        "resume_ms": None if first_crash is None else _resume_ms(first_crash, sent, deliveries, operable),
    }


def _resume_ms(t_crash: int, sent: dict[Message, int], deliveries: list[Delivery], operable: set[str]) -> float | None:
    after = [t for t, node, msg, _ in deliveries if node in operable and t > t_crash and sent.get(msg, -1) > t_crash]
    return (min(after) - t_crash) / 1e6 if after else None


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    taxonomy = getattr(loaded.experiment, "taxonomy", None)
    if taxonomy is None:
        return {}
    members = {h.name for h in loaded.topology.hosts if h.role == ROLE}
    t = {"protocol": taxonomy.protocol, **order_figures(df, members, taxonomy.protocol)}
    return {"receivers": t["members"], "operable_receivers": t["operable_members"], "agreement": t["agreement"],
            "messages_delivered_min": t["messages_delivered_min"], "messages_lost": t["messages_lost"],
            "taxonomy": t}


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    t = summary.get("taxonomy")
    if not t:
        return []
    lat = t.get("latency_ms") or {}
    return [("protocol", t.get("protocol")), ("members", t.get("members")), ("agreement", t.get("agreement")),
            ("messages lost", t.get("messages_lost")),
            ("latency ms", {"p50": lat.get("p50"), "p99": lat.get("p99")}), ("resume ms", t.get("resume_ms"))]


def spark_metrics(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    """The same figures (``order_figures``) over the run's raw event files, read with Spark and
    filtered to the kinds they read (detail is needed, which the parsed frame drops)."""
    from rmptwin.rundir.run import RunDir

    taxonomy = (rd.manifest.get("experiment") or {}).get("taxonomy")
    if not taxonomy:
        return {}
    raw = spark.read.parquet(*[str(f) for f in RunDir(rd.path).event_files()])
    rows = raw.filter(raw.kind.isin(list(KINDS))).select(*COLUMNS).toPandas()
    members = {h.name for h in rd.topology.hosts if h.role == ROLE}
    return {"protocol": taxonomy["protocol"], **order_figures(rows, members, taxonomy["protocol"])}


def report_html(m: dict[str, Any]) -> str:
    t = m.get("taxonomy")
    if not t:
        return ""
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(json.dumps(v))}</td></tr>" for k, v in t.items())
    return ("<h2 id='taxonomy'>Sequencer taxonomy</h2><p>Order, loss and latency over the "
            "taxonomy members; resume_ms: first crash to the first delivery of a message sent after it.</p>"
            "<table>" + body + "</table>")
