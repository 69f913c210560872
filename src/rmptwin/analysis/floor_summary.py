"""The distributed trading floor's figures (seed 7.3; ``rmptwin.apps.trading_floor``): the
summary keys, the Spark metrics (same function, same events) and the report section.

A run is a floor run when its experiment has a ``floor:`` section. Floor nodes: every
participant and every arbiter (an R_P of the floor's ring: it logs FLOOR_STATE). A node is
operable when the last of its driver's CRASH/RECOVER events is not CRASH (a RECOVER with
``detail.cause`` is the RMP receiver starting its sequence over, not a restart). A node's
*current ledger* is what it derived since it last started over (its last restart, or its
last FLOOR_STATE with ``reset``): the (n, digest) pairs of its FLOOR_TRADE events by status.
The *reference* ledger is the current ledger of the operable floor node with the most
FLOOR_TRADE events since starting over (any other, if the run agrees, is the same).

Keys (n = trade number, d = digest: a trade is the pair (n, d)):

- trades_tentative: distinct trades some arbiter reported tentative (FLOOR_REPORT status
  tentative), whether or not that report reached the agreed sequence.
- trades_confirmed: distinct trades the reference ledger holds confirmed (a confirmed
  report for them stands in the agreed sequence).
- trades_withdrawn: distinct trades reported tentative (by a FLOOR_REPORT, or a report the
  reference ledger voided) that the reference ledger does not derive: the agreed sequence
  does not make them.
- trades_unconfirmed: reported tentative, derived by the reference ledger, not confirmed
  (the run ended within a rotation of the report). So trades_tentative = confirmed-of-those
  + trades_withdrawn + trades_unconfirmed.
- floor_trades_lost: distinct trades that any node ever held confirmed (FLOOR_TRADE status
  confirmed), or any arbiter reported confirmed, that the reference ledger does not hold
  confirmed. Must be 0. (Not ``trades_lost``: that is the venues' key, and a run may have both.)
- trades_derived: trades the reference ledger derives from the agreed sequence.
- confirm_latency_ms: per trade confirmed, the first confirmed report's time minus the first
  tentative report's time (both FLOOR_REPORT, at the arbiters that sourced them):
  p50/p99/max/mean/n.
- token_rotation_ms: per arbiter, the time between two consecutive TOKEN_ACCEPT of the
  floor's stripe (one full rotation of the token): p50/p99/max/mean/n. Confirmation is
  expected after about one rotation; confirm_latency_rotations = the two p50s' ratio.
- participants_agree: every operable floor node's last FLOOR_STATE has the same state hash
  (a participant that logged none has the empty state's), and there is at least one.
- floor_rule, floor_orders: the experiment's rule and the orders the reference ledger placed.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.stats import percentiles
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment, Topology

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData

KINDS = (Kind.FLOOR_REPORT, Kind.FLOOR_TRADE, Kind.FLOOR_STATE, Kind.TOKEN_ACCEPT, Kind.CRASH, Kind.RECOVER)
PLOT = "floor_confirm_latency.png"
HEADLINE = ("trades_tentative", "trades_confirmed", "trades_withdrawn", "trades_unconfirmed", "floor_trades_lost",
            "trades_derived", "participants_agree", "confirm_latency_ms", "token_rotation_ms",
            "confirm_latency_rotations", "floor_rule", "floor_orders")
Trade = tuple[int, str]                         # (n, digest)
FloorEvent = tuple[int, str, str, dict[str, Any]]   # (t_ns, node, kind, parsed detail)


def _detail(d: str | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(d, dict):
        return d
    return json.loads(d) if d and d != "{}" else {}


def _restart(det: dict[str, Any]) -> bool:
    return "cause" not in det      # a driver's RECOVER; the receiver's own carries a cause


def floor_figures(df: pd.DataFrame, rule: str, stripe: int = 0, participants: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keys above from the run's events; ``participants`` (the topology's) count as floor
    nodes even if they logged no FLOOR_STATE (their state is then the empty one)."""
    df = df[df.kind.isin(KINDS)].sort_values("t_ns", kind="stable")
    rows: list[FloorEvent] = [(r.t_ns, r.node, r.kind, _detail(r.detail)) for r in df.itertuples(index=False)]
    crashed: dict[str, bool] = {}
    ledgers: dict[str, dict[str, set[Trade]]] = {}
    final_hash: dict[str, str] = {p: "" for p in participants}
    ever_confirmed: set[Trade] = set()
    reported: dict[str, dict[Trade, int]] = {"tentative": {}, "confirmed": {}}
    accepts: dict[str, list[int]] = {}
    for t, node, kind, det in rows:
        if kind == Kind.CRASH:
            crashed[node] = True
        elif kind == Kind.RECOVER and _restart(det):
            crashed[node] = False
            ledgers[node] = {}
        elif kind == Kind.FLOOR_STATE:
            final_hash[node] = det.get("hash", "")
            if det.get("reset"):
                ledgers[node] = {}
        elif kind == Kind.FLOOR_TRADE:
            key = (det["n"], det["digest"])
            ledgers.setdefault(node, {}).setdefault(det["status"], set()).add(key)
            if det["status"] == "confirmed":
                ever_confirmed.add(key)
        elif kind == Kind.FLOOR_REPORT:
            key = (det["n"], det["digest"])
            reported[det["status"]].setdefault(key, t)
            if det["status"] == "confirmed":
                ever_confirmed.add(key)
        elif kind == Kind.TOKEN_ACCEPT and det.get("stripe", 0) == stripe:
            accepts.setdefault(node, []).append(t)
    floor_nodes = [n for n in final_hash if not crashed.get(n, False)]
    ref_node = max(floor_nodes, key=lambda n: (sum(len(s) for s in ledgers.get(n, {}).values()), n), default=None)
    ref = ledgers.get(ref_node, {}) if ref_node else {}
    derived, confirmed = ref.get("derived", set()), ref.get("confirmed", set())
    tentative = set(reported["tentative"]) | ref.get("withdrawn", set())
    # sorted: a set's order follows string hashing, which differs per process, and so would
    # the mean's last digit (summary.json must be byte-identical run to run)
    latency = [(reported["confirmed"][k] - reported["tentative"][k]) / 1e6
               for k in sorted(confirmed) if k in reported["confirmed"] and k in reported["tentative"]]
    rotation = [(b - a) / 1e6 for ts in accepts.values() for a, b in pairwise(ts)]
    lat, rot = percentiles(latency), percentiles(rotation)
    return {
        "floor_rule": rule,
        "trades_tentative": len(set(reported["tentative"])),
        "trades_confirmed": len(confirmed),
        "trades_withdrawn": len(tentative - derived),
        "trades_unconfirmed": len((tentative & derived) - confirmed),
        "floor_trades_lost": len(ever_confirmed - confirmed),
        "trades_derived": len(derived),
        "participants_agree": bool(floor_nodes) and len({final_hash[n] for n in floor_nodes}) == 1,
        "confirm_latency_ms": lat,
        "token_rotation_ms": rot,
        "confirm_latency_rotations": (lat["p50"] / rot["p50"]) if lat["p50"] is not None and rot["p50"] else None,
        "floor_nodes": len(floor_nodes),
        "floor_orders": _orders(rows, ref_node),
        "confirm_latencies_ms": sorted(latency),
    }


def _orders(rows: list[FloorEvent], node: str | None) -> int:
    last = [det for _, n, kind, det in rows if n == node and kind == Kind.FLOOR_STATE]
    return int(last[-1].get("orders", 0)) if last else 0


def _participants(topology: Topology) -> tuple[str, ...]:
    return tuple(h.name for h in topology.hosts_with_role("participant"))


def _floor(experiment: dict[str, Any] | None) -> dict[str, Any] | None:
    floor: dict[str, Any] | None = (experiment or {}).get("floor")
    return floor


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    fl = getattr(loaded.experiment, "floor", None)
    if fl is None:
        return {}
    out = floor_figures(df, fl.rule, fl.stripe, _participants(loaded.topology))
    out.pop("confirm_latencies_ms")
    return out


# ----------------------------------------------------------------------------- Spark and report


def spark_metrics(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    """The same figures (one definition: ``floor_figures``) over the run's raw event files,
    read with Spark and filtered to the kinds they read, and the confirm-latency plot."""
    from rmptwin.rundir.run import RunDir

    fl = _floor(rd.manifest.get("experiment"))
    if not fl:
        return {}
    run = RunDir(rd.path)
    raw = spark.read.parquet(*[str(f) for f in run.event_files()])
    rows = raw.filter(raw.kind.isin(list(KINDS))).select("t_ns", "node", "kind", "detail").toPandas()
    m = floor_figures(rows, fl.get("rule", "continuous"), fl.get("stripe", 0), _participants(rd.topology))
    m["plot"] = plot_confirm_latency(m, run.analysis_path(PLOT)).name
    return m


def plot_confirm_latency(m: dict[str, Any], path: Path) -> Path:
    from rmptwin.analysis.plots import plt, save_figure  # matplotlib: only when drawing

    lat = m.get("confirm_latencies_ms") or []
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if lat:
        ax.plot(lat, [(i + 1) / len(lat) for i in range(len(lat))], drawstyle="steps-post", label="tentative -> confirmed")
    rot = (m.get("token_rotation_ms") or {}).get("p50")
    if rot:
        ax.axvline(rot, color="grey", ls="--", lw=1, label=f"token rotation p50 ({rot:.0f} ms)")
    ax.set_xlabel("confirm latency (ms)")
    ax.set_ylabel("fraction of confirmed trades")
    ax.set_ylim(0, 1.05)
    ax.set_xlim(left=0)
    ax.legend(loc="lower right")
    return save_figure(fig, path)


def report_html(m: dict[str, Any]) -> str:
    f = m.get("trading_floor")
    if not f:
        return ""
    import html as _html

    def fmt(v: object) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k}={v[k]:.1f}" if isinstance(v[k], float) else f"{k}={v[k]}" for k in ("p50", "p99", "n")
                             if k in v and v[k] is not None)
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    rows = "".join(f"<tr><th>{k}</th><td>{_html.escape(fmt(f.get(k)))}</td></tr>" for k in HEADLINE if k in f)
    return (
        "<h2 id='trading-floor'>Distributed trading floor (seed 7.3)</h2>"
        "<p>The token site is the arbiter: it reports each trade tentative while it holds the token and "
        "confirmed the next time it holds it, once every R_P has the report. floor_trades_lost must be 0 and "
        "participants_agree true.</p>"
        f"<table>{rows}</table>"
        f"<img src='{f.get('plot', PLOT)}' alt='confirm latency'>"
        "<div class='caption'>Time from a trade's tentative report to its confirmed report (CDF), beside the "
        "measured token rotation: expected about one rotation.</div>"
    )


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    """The rows `rmptwin sim` / `rmptwin run` print for a trading-floor run (``sections``)."""
    if "trades_confirmed" not in summary:
        return []
    trades = {k: summary.get(f"trades_{k}") for k in ("tentative", "confirmed", "withdrawn")}
    trades["lost"] = summary.get("floor_trades_lost")
    return [("trades", trades),
            ("confirm latency p50 ms", (summary.get("confirm_latency_ms") or {}).get("p50")),
            ("participants_agree", summary.get("participants_agree"))]
