"""The security section of a run (seed 6): what attacks achieved and what stopped them.

Registered in ``analysis.sections``: ``summarize`` adds the keys below to summary.json,
``spark_metrics`` computes the same figures (by the same function, on the same events) for
metrics.json, ``report_html`` renders them. A run is of this application when its topology
has ``attacker`` hosts or its experiment has ``security.enabled``.

Definitions (one per figure; simulated and emulated runs alike). A message is (stripe, src
label, src_seq); the sequence is the receivers' DELIVER map (stripe, gseq) -> message; a
customer's copy is *genuine* when it came from an R_T or R_x of the customer (CUST_RECV
``detail.repair`` true, or ``detail.region`` naming one of its regions), *injected* when it
came from any other host (``repair`` false and ``region`` "").

- unauthorized_sequenced: distinct (stripe, gseq) that some R_P/R_S DELIVERed with a message
  whose source (label up to "~") is not a source host publishing that stripe in the topology.
- forged_delivered: CUST_RECV events of injected copies whose trade report was made up
  (symbol ``rmp.attacker.FORGED_SYMBOL``), plus distinct (stripe, gseq) DELIVERed with a message
  under an authorized source's label that the source never SENT (a forgery the ring sequenced).
- replayed_delivered: CUST_RECV events of injected copies carrying any other trade report (a
  genuine report re-sent by a host that is not the customer's R_T or R_x), plus placements of
  one message at a second, third, ... gseq of its stripe (a replayed DATA frame sequenced again).
- alarms: ALARM events by ``detail.reason`` ({} when none).
- security.alarms_by_attack: ALARM events whose ``detail.via`` (the host the frame came from)
  is an attacker, by that attacker's mode.
- security.attack_frames: Kind.ATTACK events (frames attackers sent), by mode.
- security.ticker_latency_ms: p50/p99/max/mean/n over the genuine CUST_RECV events of every
  customer of (CUST_RECV time - the first SEND time of the message sequenced at that
  (stripe, gseq)): the legitimate ticker as investors see it. ``flood_p99_ratio`` holds an
  attacked run's p99 against its baseline's.
- unauthorized_dropped (emulated runs with a controller only): packets counted by the
  controller's edge drop rules (``emulation.flows.PRIO_UNAUTH_DROP``), read from the switches'
  OpenFlow flow statistics at the end of the run and logged as Kind.EDGE_DROPS events (one per
  switch, ``detail.packets``); ``security.unauthorized_dropped_by_switch`` per switch.
- security.enforcement: "cores" (sealing and authentication in the cores), "network" (the
  controller's edge drops), "cores+network", or "none". A simulated run has no controller, so
  at most "cores": the simulator drops nothing at the edge.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.stats import percentiles
from rmptwin.core.events import Kind
from rmptwin.core.striping import serves_stripe
from rmptwin.model import LoadedExperiment, Topology
from rmptwin.rmp.attacker import FORGED_SYMBOL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData

ALARM = Kind.ALARM
RT_ROLES = ("primary", "secondary")
KINDS = (Kind.SEND, Kind.DELIVER, Kind.CUST_RECV, ALARM, Kind.ATTACK, Kind.EDGE_DROPS)
HEADLINE = ("unauthorized_sequenced", "forged_delivered", "replayed_delivered")
Sequenced = dict[tuple[int, int], tuple[str, int]]   # (stripe, gseq) -> (src label, src_seq)


def _details(rows: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in rows.detail:
        try:
            v = json.loads(d) if d else {}
        except (TypeError, ValueError):
            v = {}
        out.append(v if isinstance(v, dict) else {})
    return out


def _source_name(label: str) -> str:
    return label.split("~", 1)[0]


def _sequence(df: pd.DataFrame, rt: set[str]) -> Sequenced:
    """(stripe, gseq) -> (src label, src_seq), first DELIVER at any R_P/R_S wins."""
    dl = df[(df.kind == Kind.DELIVER) & df.node.isin(rt)].sort_values("t_ns", kind="stable")
    seq: Sequenced = {}
    for d, g, s, q in zip(_details(dl), dl.gseq, dl.src, dl.src_seq):
        seq.setdefault((int(d.get("stripe", 0)), int(g)), (s, int(q)))
    return seq


def _ring_figures(df: pd.DataFrame, topo: Topology, seq: Sequenced) -> dict[str, int]:
    sources = {h.name: getattr(h, "stripes", None) for h in topo.hosts if h.role == "source"}
    sends = df[df.kind == Kind.SEND]
    sent = {(int(d.get("stripe", 0)), s, int(q)) for d, s, q in zip(_details(sends), sends.src, sends.src_seq)}
    unauthorized = forged = 0
    placements: Counter[tuple[int, str, int]] = Counter()
    for (stripe, _g), (label, q) in seq.items():
        name = _source_name(label)
        if name not in sources or not serves_stripe(sources[name], stripe):
            unauthorized += 1
        elif (stripe, label, q) not in sent:
            forged += 1
        placements[(stripe, label, q)] += 1
    replayed = sum(n - 1 for n in placements.values())
    return {"unauthorized": unauthorized, "forged": forged, "replayed": replayed}


def _customer_figures(df: pd.DataFrame, seq: Sequenced) -> dict[str, Any]:
    cr = df[df.kind == Kind.CUST_RECV]
    sends = df[df.kind == Kind.SEND].sort_values("t_ns", kind="stable")
    first_send: dict[tuple[int, str, int], int] = {}
    for d, s, q, t in zip(_details(sends), sends.src, sends.src_seq, sends.t_ns):
        first_send.setdefault((int(d.get("stripe", 0)), s, int(q)), int(t))
    forged = replayed = 0
    latencies: list[float] = []
    for d, g, t in zip(_details(cr), cr.gseq, cr.t_ns):
        if not d.get("repair") and not d.get("region"):
            if d.get("symbol") == FORGED_SYMBOL:
                forged += 1
            else:
                replayed += 1
            continue
        stripe = int(d.get("stripe", 0))
        msg = seq.get((stripe, int(g)))
        sent_at = first_send.get((stripe, *msg)) if msg else None
        if sent_at is not None:
            latencies.append((int(t) - sent_at) / 1e6)
    return {"forged": forged, "replayed": replayed, "latency": percentiles(latencies)}


def _by_mode(rows: pd.DataFrame, key: Callable[[dict[str, Any], str], Any],
             modes: Mapping[str, str]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for d, src in zip(_details(rows), rows.src):
        host = key(d, src)
        if host in modes:
            c[modes[host]] += 1
    return dict(sorted(c.items()))


def security_figures(df: pd.DataFrame, topo: Topology, sealed: bool) -> dict[str, Any]:
    """Every figure of the module docstring from an event table (columns of ``tables.EVENT_SCHEMA``)."""
    df = df[df.kind.isin(KINDS)]
    rt = {h.name for h in topo.hosts if h.role in RT_ROLES}
    modes = {h.name: h.mode for h in topo.hosts if h.role == "attacker"}
    seq = _sequence(df, rt)
    ring = _ring_figures(df, topo, seq)
    cust = _customer_figures(df, seq)
    alarms = df[df.kind == ALARM]
    edge = df[df.kind == Kind.EDGE_DROPS]
    by_switch = {n: int(d.get("packets", 0)) for n, d in zip(edge.node, _details(edge))}
    network = len(edge) > 0
    enforcement = "+".join(w for w, on in (("cores", sealed), ("network", network)) if on) or "none"
    out: dict[str, Any] = {
        "unauthorized_sequenced": ring["unauthorized"],
        "forged_delivered": cust["forged"] + ring["forged"],
        "replayed_delivered": cust["replayed"] + ring["replayed"],
        "alarms": dict(sorted(Counter(d.get("reason", "") for d in _details(alarms)).items())),
    }
    section: dict[str, Any] = {
        "enforcement": enforcement,
        "attackers": dict(sorted(modes.items())),
        "alarms_by_attack": _by_mode(alarms, lambda d, src: d.get("via"), modes),
        "attack_frames": _by_mode(df[df.kind == Kind.ATTACK], lambda d, src: src, modes),
        "ticker_latency_ms": cust["latency"],
    }
    if network:
        out["unauthorized_dropped"] = sum(by_switch.values())
        section["unauthorized_dropped_by_switch"] = dict(sorted(by_switch.items()))
    out["security"] = section
    return out


def flood_p99_ratio(attacked: dict[str, Any], baseline: dict[str, Any]) -> float | None:
    """An attacked run's ticker latency p99 over its baseline's (summary.json dicts); None if either lacks one."""
    a = ((attacked.get("security") or {}).get("ticker_latency_ms") or {}).get("p99")
    b = ((baseline.get("security") or {}).get("ticker_latency_ms") or {}).get("p99")
    return a / b if a is not None and b else None


def _applies(topo: Topology, security_enabled: bool) -> bool:
    return security_enabled or any(h.role == "attacker" for h in topo.hosts)


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    security = getattr(loaded.experiment, "security", None)
    enabled = bool(security is not None and security.enabled)
    if not _applies(loaded.topology, enabled):
        return {}
    return security_figures(df, loaded.topology, enabled)


def spark_metrics(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    """The same figures as summary.json, from the run's raw events (detail is needed here,
    which the parsed frame drops), filtered to the kinds they read by Spark."""
    from rmptwin.analysis import schemas
    from rmptwin.rundir.run import RunDir

    enabled = bool(((rd.manifest.get("experiment") or {}).get("security") or {}).get("enabled"))
    if not _applies(rd.topology, enabled):
        return {}
    _, _, files = RunDir(rd.path).check()
    raw = spark.read.schema(schemas.EVENTS).parquet(*[str(f) for f in files])
    df = raw.where(raw.kind.isin(list(KINDS))).toPandas()
    return security_figures(df, rd.topology, enabled)


def report_html(m: dict[str, Any]) -> str:
    s = m.get("security")
    if not s:
        return ""
    sec = s.get("security", {})
    rows = [(k, s.get(k)) for k in (*HEADLINE, "unauthorized_dropped") if k in s]
    rows += [("enforcement", sec.get("enforcement")), ("alarms by reason", s.get("alarms")),
             ("alarms by attack", sec.get("alarms_by_attack")), ("attack frames", sec.get("attack_frames")),
             ("ticker latency (ms)", sec.get("ticker_latency_ms")),
             ("edge drops by switch", sec.get("unauthorized_dropped_by_switch"))]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(json.dumps(v))}</td></tr>"
                   for k, v in rows if v is not None)
    return ("<h2 id='security'>Security (seed 6)</h2><p>What the attackers sent, what the cores and the "
            "network stopped; the first three counts must be 0.</p><table>" + body + "</table>")


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    """The rows `rmptwin sim` / `rmptwin run` print for a security run (``sections``)."""
    if "unauthorized_sequenced" not in summary:
        return []
    rows: list[tuple[str, object]] = [(k, summary.get(k)) for k in HEADLINE]
    rows.append(("alarms total", sum((summary.get("alarms") or {}).values())))
    if "unauthorized_dropped" in summary:
        rows.append(("unauthorized_dropped", summary["unauthorized_dropped"]))
    return rows
