"""The venue metrics of summary.json, from the event table alone (pandas, no Spark).

- ev_agreement: ev_consistent, and every EV alive at the end executed up to the same
  last position. ev_consistent: every pair of EVs that executed the same position
  executed the same request there, produced the same trades there, and logged the same
  state hash and trade-sequence hash at every common checkpoint position (a run stopped
  while EVs were still draining is consistent but not in agreement).
- trades_lost: trades an EV produced (per position, from SEQ_POSITION) that the history
  recorder did not store (HR_STORE); None without a history recorder.
- sync_ms: synchronization time of each restarted EV (SYNC_DONE), the largest; sync_ms_all.
- max_gap / avg_gap: executed-position difference between the two most advanced live EVs,
  sampled every ``GAP_SAMPLE_MS``; the delays divide the gap by the EV's service rate
  (the seed's Table 1 divides by the maximum processing rate).
- latency_ms: gateway send to first completion (ORDER_DONE), p50/p99/max/mean/n (``stats.percentiles``).
- live_throughput_ratio: for each EV crash, the other EVs' execution rate from the crash
  until the crashed EV synchronized, over their rate in as long a window before the crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmptwin.analysis.incarnations import incarnations, ordered
from rmptwin.analysis.stats import percentiles
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment

if TYPE_CHECKING:
    import pyarrow as pa

GAP_SAMPLE_MS = 10.0


def _details(series: Iterable[str]) -> list[dict[str, Any]]:
    return [json.loads(d) if d and d != "{}" else {} for d in series]


def _live_venues(df: pd.DataFrame, venues: list[str]) -> list[str]:
    """The EVs not crashed at the end of the run."""
    life = df[df.kind.isin([Kind.CRASH, Kind.RECOVER]) & df.node.isin(venues)].sort_values("t_ns", kind="stable")
    crashed_at_end = {n for n, g in life.groupby("node") if g.iloc[-1].kind == Kind.CRASH}
    return [n for n in venues if n not in crashed_at_end]


@dataclass
class _Order:
    """Which request each position holds, and what the EVs say about it."""

    order: dict[int, tuple[str, int]]      # position -> (gateway, gw seq), as first executed
    produced: dict[int, int]     # position -> trades it produced (the most any EV reported)
    conflicts: int               # executions that placed another request at a taken position
    consistent: bool             # no position, request, trade or checkpoint differs between EVs


def _order_and_consistency(df: pd.DataFrame, sp: pd.DataFrame, venues: list[str]) -> _Order:
    order: dict[int, tuple[str, int]] = {}
    produced: dict[int, int] = {}
    agree = True
    conflicts = 0
    for g, src, q, d in zip(sp.gseq, sp.src, sp.src_seq, sp.detail):
        if order.setdefault(int(g), (src, int(q))) != (src, int(q)):
            agree = False
            conflicts += 1
        produced[int(g)] = max(produced.get(int(g), 0), json.loads(d).get("trades", 0))
    inverse: dict[tuple[str, int], int] = {}
    for g, key in order.items():
        if inverse.setdefault(key, g) != g:
            agree = False   # one request at two positions
    return _Order(order, produced, conflicts, agree and _same_trades_and_states(df, venues))


def _same_trades_and_states(df: pd.DataFrame, venues: list[str]) -> bool:
    """Every EV incarnation produced the same trades at each position (a restarted EV replays
    positions its earlier incarnation executed, and logs their trades again) and every EV
    logged the same checkpoint hashes."""
    agree = True
    vdf = ordered(df[df.node.isin(venues) & df.kind.isin([Kind.TRADE, Kind.RECOVER])])
    incarnation = incarnations(vdf)
    is_trade = vdf.kind == Kind.TRADE
    tr = vdf[is_trade]
    trades_at: dict[tuple[str, int, int], list[tuple[int, int, str]]] = {}
    for node, i, g, q, b, d in zip(tr.node, incarnation[is_trade], tr.gseq, tr.src_seq, tr.bytes, tr.detail):
        trades_at.setdefault((node, int(i), int(g)), []).append((int(q), int(b), d))
    ref_trades: dict[int, list[tuple[int, int, str]]] = {}
    for (node, _, g), ts in trades_at.items():
        if ref_trades.setdefault(g, ts) != ts:
            agree = False
    vs = df[(df.kind == Kind.VENUE_STATE) & df.node.isin(venues)]
    states: dict[int, tuple[Any, Any]] = {}
    for g, d in zip(vs.gseq, _details(vs.detail)):
        st = (d.get("state_hash"), d.get("trade_hash"))
        if states.setdefault(int(g), st) != st:
            agree = False
    return agree


def _trades_lost(df: pd.DataFrame, loaded: LoadedExperiment, produced: dict[int, int]) -> int | None:
    if not loaded.topology.hosts_with_role("history"):
        return None
    hr = df[df.kind == Kind.HR_STORE]
    stored = {int(g): json.loads(d).get("trades", 0) for g, d in zip(hr.gseq, hr.detail)}
    return int(sum(max(0, c - stored.get(g, 0)) for g, c in produced.items()))


def _gap_metrics(gaps: list[int], service_ms: float) -> dict[str, Any]:
    return {
        "max_gap": int(max(gaps)) if gaps else None,
        "avg_gap": float(np.mean(gaps)) if gaps else None,
        "max_gap_delay_ms": float(max(gaps) * service_ms) if gaps else None,
        "avg_gap_delay_ms": float(np.mean(gaps) * service_ms) if gaps else None,
    }


def venue_summary(events: pa.Table | pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    df = events.to_pandas() if not isinstance(events, pd.DataFrame) else events
    venues = [h.name for h in loaded.topology.hosts_with_role("venue")]
    v = loaded.experiment.venue
    live = _live_venues(df, venues)
    sp = df[(df.kind == Kind.SEQ_POSITION) & df.node.isin(venues)]
    o = _order_and_consistency(df, sp, venues)
    last = {n: int(sp[sp.node == n].gseq.max()) if (sp.node == n).any() else -1 for n in live}
    sync = df[(df.kind == Kind.SYNC_DONE) & df.node.isin(venues)]
    sync_ms = [d["sync_ns"] / 1e6 for d in _details(sync.detail)]
    service_ms = (v.ev_service_us / 1000.0) if v is not None else 0.0
    done = df[df.kind == Kind.ORDER_DONE]
    lat = [d["latency_ns"] / 1e6 for d in _details(done.detail)]
    return {
        "venues": len(venues),
        "live_venues": len(live),
        "ev_agreement": bool(o.consistent and len(set(last.values())) <= 1),
        "ev_consistent": bool(o.consistent),
        "ev_order_conflicts": o.conflicts,
        "ev_last_position": last,
        "requests_accepted": int((df.kind == Kind.ORDER_IN).sum()),
        "requests_rejected": int((df.kind == Kind.ORDER_REJECT).sum()),
        "requests_completed": int(done.src_seq.size),
        "requests_ordered": len(o.order),
        "trades": int(sum(o.produced.values())),
        "trades_lost": _trades_lost(df, loaded, o.produced),
        "sync_ms": max(sync_ms) if sync_ms else None,
        "sync_ms_all": sync_ms,
        **_gap_metrics(_gaps(sp, live, df), service_ms),
        "latency_ms": percentiles(lat),
        "live_throughput_ratio": _throughput_ratios(df, sp, venues, sync),
    }


def _positions_over_time(sp: pd.DataFrame, node: str) -> tuple[np.ndarray, np.ndarray]:
    rows = sp[sp.node == node]
    return rows.t_ns.to_numpy(), rows.gseq.to_numpy()


def _gaps(sp: pd.DataFrame, live: list[str], df: pd.DataFrame) -> list[int]:
    """Sampled |position(a) - position(b)| for the two live EVs, while both are running."""
    if len(live) < 2:
        return []
    a, b = live[:2]
    ta, pa_ = _positions_over_time(sp, a)
    tb, pb = _positions_over_time(sp, b)
    if len(ta) == 0 or len(tb) == 0:
        return []
    # only while both are up and synchronized: after the later of their last (re)start + sync
    start = max(ta[0], tb[0])
    sync = df[(df.kind == Kind.SYNC_DONE) & df.node.isin([a, b])]
    if len(sync):
        start = max(start, int(sync.t_ns.max()))
    end = min(ta[-1], tb[-1])
    step = int(GAP_SAMPLE_MS * 1e6)
    out: list[int] = []
    for t in range(int(start), int(end) + 1, step):
        ia = np.searchsorted(ta, t, side="right") - 1
        ib = np.searchsorted(tb, t, side="right") - 1
        if ia >= 0 and ib >= 0:
            out.append(abs(int(pa_[ia]) - int(pb[ib])))
    return out


def _throughput_ratios(df: pd.DataFrame, sp: pd.DataFrame, venues: list[str],
                       sync: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    crashes = df[(df.kind == Kind.CRASH) & df.node.isin(venues)]
    for node, t in zip(crashes.node, crashes.t_ns):
        t = int(t)
        after = sync[(sync.node == node) & (sync.t_ns > t)]
        end = int(after.t_ns.min()) if len(after) else int(df.t_ns.max())
        span = end - t
        if span <= 0:
            continue
        for other in venues:
            if other == node:
                continue
            ts = sp[sp.node == other].t_ns.to_numpy()
            during = np.count_nonzero((ts >= t) & (ts < end))
            before = np.count_nonzero((ts >= t - span) & (ts < t))
            if before:
                out.append({"crashed": node, "live": other, "window_ms": span / 1e6,
                            "rate_before": before * 1e9 / span, "rate_during": during * 1e9 / span,
                            "ratio": during / before})
    return out
