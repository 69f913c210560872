"""Where a venue request's time goes, stage by stage (``bench.venue_procs``).

Every process stamps the requests it handles with ``time.monotonic_ns`` (one clock for all
processes on a machine), keyed by gateway sequence number: the EVs when a REQUEST arrives
and when they execute it, the HR when its commit holds it, the gateway when the first
completion arrived (and so when it sent it, after its fsync: that minus the latency). ``stage_breakdown`` joins them
into per-stage percentiles; the stages add up to the end-to-end latency.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rmptwin.core.events import Event, Kind
from rmptwin.venue import wire

_REQ_AT = 6            # a REQUEST frame's body (gw, gw_seq, t_ns) follows the 6-byte header
_CAP = 400_000         # stamps kept per process (a long run keeps its first ones)


class StageStamps:
    """(gw seq, monotonic ns) pairs: when each request arrived, and when it was marked."""

    def __init__(self) -> None:
        self.arrived: list[tuple[int, int]] = []
        self.marked: list[tuple[int, int]] = []

    def on_request(self, _core: str, data: bytes, now: int) -> None:
        """A ``pump`` tap: stamp REQUEST frames by peeking at their header (no full decode)."""
        if len(data) >= _REQ_AT + 10 and data[1] == wire.T_REQUEST and len(self.arrived) < _CAP:
            self.arrived.append((int.from_bytes(data[_REQ_AT + 2:_REQ_AT + 10], "big", signed=True), now))

    def on_complete(self, _core: str, data: bytes, now: int) -> None:
        """A ``pump`` tap at the gateway: stamp COMPLETE frames (body: gw_seq first) as they arrive."""
        if len(data) >= _REQ_AT + 8 and data[1] == wire.T_COMPLETE and len(self.marked) < _CAP:
            self.marked.append((int.from_bytes(data[_REQ_AT:_REQ_AT + 8], "big", signed=True), now))

    def mark(self, gw_seq: int, now: int | None = None) -> None:
        if len(self.marked) < _CAP:
            self.marked.append((gw_seq, time.monotonic_ns() if now is None else now))

    def on_hr_event(self, _core: str, e: Event) -> None:
        if e.kind == Kind.HR_STORE:
            self.mark(e.src_seq)

    def arrays(self) -> dict[str, Any]:
        return {k: np.asarray(v, dtype=np.int64).reshape(-1, 2) for k, v in
                (("arrived", self.arrived), ("marked", self.marked))}


def _first(pairs: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """The first stamp of each of ``seqs`` in (seq, t) ``pairs``; -1 where there is none."""
    out = np.full(len(seqs), -1, dtype=np.int64)
    if len(pairs) == 0:
        return out
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    p = pairs[order]
    keep = np.ones(len(p), dtype=bool)
    keep[1:] = p[1:, 0] != p[:-1, 0]
    p = p[keep]
    idx = np.searchsorted(p[:, 0], seqs)
    idx = np.clip(idx, 0, len(p) - 1)
    hit = p[idx, 0] == seqs
    out[hit] = p[idx[hit], 1]
    return out


def _pct(ns: np.ndarray) -> dict[str, Any]:
    if len(ns) == 0:
        return {"p50_ms": None, "p99_ms": None, "mean_ms": None}
    ms = ns / 1e6
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "mean_ms": round(float(ms.mean()), 3)}


def _txn_split(arrived: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For requests arriving at ``arrived``: the wait until the EV's next transaction started,
    and that transaction's duration (the one that carried or learned them)."""
    if len(spans) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = spans[:, 0]
    idx = np.searchsorted(starts, arrived)
    ok = idx < len(starts)
    return starts[idx[ok]] - arrived[ok], spans[idx[ok], 1] - starts[idx[ok]]


def stage_breakdown(front: dict[str, Any], hr: dict[str, Any], evs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-stage percentiles over the requests every stage saw (the first EV to reach each stage)."""
    seqs = front["done_seq"]
    done = _first(front["stamps"]["marked"], seqs)   # the first COMPLETE's arrival, as the gateway timed it
    done = np.where(done >= 0, done, front["done_t"])
    sent = done - front["lat_ns"]
    arrived = np.stack([_first(e["stamps"]["arrived"], seqs) for e in evs])
    executed = np.stack([_first(e["stamps"]["marked"], seqs) for e in evs])
    committed = _first(hr["stamps"]["marked"], seqs)
    never = np.iinfo(np.int64).max   # an EV that did not see a request (killed, or started after it)
    first_arrived = np.where(arrived >= 0, arrived, never).min(axis=0)
    first_exec = np.where(executed >= 0, executed, never).min(axis=0)
    ok = (first_arrived < never) & (first_exec < never) & (committed >= 0)
    out = {"requests": int(ok.sum()),
           "gw_send_to_ev_arrival": _pct((first_arrived - sent)[ok]),
           "ev_arrival_to_executed": _pct((first_exec - first_arrived)[ok]),
           "executed_to_hr_committed": _pct((committed - first_exec)[ok]),
           "hr_committed_to_gw_done": _pct((done - committed)[ok]),
           "end_to_end": _pct((done - sent)[ok])}
    for i, e in enumerate(evs):
        wait, txn = _txn_split(arrived[i][ok & (arrived[i] >= 0)], e["txn_spans"])
        out[f"ev{i + 1}_arrival_to_txn_start"] = _pct(wait)
        out[f"ev{i + 1}_txn"] = _pct(txn)
    return out
