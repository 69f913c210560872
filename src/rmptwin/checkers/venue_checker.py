"""The exchange venue: its CAS history (for ``linearizable``), no trade lost or executed
twice, the EVs' states equal.

- executed twice: one request (gateway, gateway sequence) at two positions (SEQ_POSITION of
  any EV), or one incarnation of an EV executing a position twice;
- the EVs agree: one request per position across EVs, and at every position two EVs both
  checkpointed (VENUE_STATE), the same state and trade hashes;
- trade lost: summary.json's ``trades_lost`` (trades an EV produced that the history
  recorder never stored), when the venue has a history recorder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.incarnations import incarnations, ordered
from rmptwin.checkers import Violation
from rmptwin.checkers.histories import event_dict
from rmptwin.checkers.linearizable import CasOp
from rmptwin.core.events import Kind

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment

Event = dict[str, Any]
RequestKey = tuple[Any, int]   # (gateway, gateway sequence)

NAME = "venue"


@dataclass
class VenueHistory:
    positions: list[tuple[str, int, int, RequestKey, Event]]   # (ev, incarnation, position, request key, event)
    states: list[tuple[str, int, tuple[Any, Any], Event]]       # (ev, position, (state hash, trade hash), event)
    produced: dict[int, tuple[int, Event]] = field(default_factory=dict)   # position -> (trades, first TRADE event)
    stored: dict[int, int] | None = None                      # position -> trades the HR stored; None: no HR


def venue(h: VenueHistory) -> Violation | None:
    at: dict[int, tuple[RequestKey, Event]] = {}
    where: dict[RequestKey, tuple[int, Event]] = {}
    done: dict[tuple[str, int, int], Event] = {}
    for node, inc, pos, key, ev in h.positions:
        first = done.setdefault((node, inc, pos), ev)
        if first is not ev:
            return Violation(NAME, f"{node} executed position {pos} twice", (first, ev))
        other = at.setdefault(pos, (key, ev))
        if other[0] != key:
            return Violation(NAME, f"position {pos}: {other[1]['node']} executed request {list(other[0])}, {node} "
                                   f"executed {list(key)} (the EVs disagree)", (other[1], ev))
        w = where.setdefault(key, (pos, ev))
        if w[0] != pos:
            return Violation(NAME, f"request {list(key)} executed twice: at position {w[0]} ({w[1]['node']}) and "
                                   f"{pos} ({node})", (w[1], ev))
    seen: dict[int, tuple[tuple[Any, Any], Event]] = {}
    for node, pos, hashes, ev in h.states:
        other = seen.setdefault(pos, (hashes, ev))
        if other[0] != hashes:
            return Violation(NAME, f"EV states differ after position {pos}: {other[1]['node']} and {node}",
                             (other[1], ev))
    if h.stored is not None:
        for pos in sorted(h.produced):
            n, ev = h.produced[pos]
            if n > h.stored.get(pos, 0):
                return Violation(NAME, f"trade lost: position {pos} produced {n} trade(s), the history recorder "
                                       f"stored {h.stored.get(pos, 0)}", (ev,))
    return None


def _detail(d: Any) -> dict[str, Any]:
    try:
        return json.loads(d) if isinstance(d, str) and d else {}
    except ValueError:
        return {}


def venue_history(df: pd.DataFrame, loaded: LoadedExperiment) -> VenueHistory:
    evs = {h.name for h in loaded.topology.hosts_with_role("venue")}
    df = ordered(df)
    inc = incarnations(df)
    mask = df.node.isin(list(evs)) & df.kind.isin([Kind.SEQ_POSITION, Kind.VENUE_STATE, Kind.TRADE])
    rows = df[mask]
    positions: list[tuple[str, int, int, RequestKey, Event]] = []
    states: list[tuple[str, int, tuple[Any, Any], Event]] = []
    produced: dict[int, tuple[int, Event]] = {}
    producer: dict[int, tuple[str, int]] = {}   # position -> the EV incarnation whose trades count
    for t, node, kind, src, sseq, g, det, i in zip(rows.t_ns, rows.node, rows.kind, rows.src, rows.src_seq, rows.gseq,
                                                   rows.detail, inc[mask]):
        ev = event_dict(t, node, kind, src, sseq, g, det)
        if kind == Kind.SEQ_POSITION:
            positions.append((node, int(i), int(g), (src, int(sseq)), ev))
        elif kind == Kind.VENUE_STATE:
            d = _detail(det)
            states.append((node, int(g), (d.get("state_hash"), d.get("trade_hash")), ev))
        elif kind == Kind.TRADE:
            # one EV incarnation's trades per position: each EV produces the same, and a
            # restarted EV replaying the hardened requests produces them again
            if producer.setdefault(int(g), (node, int(i))) == (node, int(i)):
                n, e = produced.get(int(g), (0, ev))
                produced[int(g)] = (n + 1, e)
    stored = None
    if loaded.topology.hosts_with_role("history"):
        hr = df[df.kind == Kind.HR_STORE]
        stored = {int(g): int(_detail(d).get("trades", 0)) for g, d in zip(hr.gseq, hr.detail)}
    return VenueHistory(positions, states, produced, stored)


def cas_history(df: pd.DataFrame, evs: set[str]) -> list[CasOp]:
    """The proposals each EV sent and the answers it took. A retry (the same n and keys, sent
    because no answer came in time) is a new operation and leaves the copy before it
    indeterminate; the answer that finally comes back may be the first copy's, so the answered
    operation is invoked when the FIRST copy was sent (measured, emulated under a paused etcd
    member: ev1's first copy won n=29 while ev2 learned its keys, the answer came 0.4 ms after
    the retry; timed from the retry, that WON looked impossible). A crash or the end of the
    run leaves a proposal indeterminate."""
    rows = ordered(df[df.node.isin(list(evs)) & df.kind.isin([Kind.CAS_INVOKE, Kind.CAS_OK, Kind.CRASH])])
    ops: list[CasOp] = []
    pending: dict[str, int] = {}    # EV -> index in ops of its latest unanswered proposal
    first_sent: dict[str, int] = {}   # EV -> when the first copy of that proposal went out
    for t, node, kind, g, det in zip(rows.t_ns, rows.node, rows.kind, rows.gseq, rows.detail):
        ev = event_dict(t, node, kind, gseq=g, detail=det)
        if kind == Kind.CAS_INVOKE:
            keys = tuple(tuple(k) for k in _detail(det).get("keys", ()))
            before = pending.get(node)
            if before is None or (ops[before].n, ops[before].keys) != (int(g), keys):
                first_sent[node] = int(t)
            pending[node] = len(ops)
            ops.append(CasOp(len(ops), node, int(t), int(g), keys, evs=(ev,)))
        elif kind == Kind.CAS_OK:
            i = pending.pop(node, None)
            if i is None or ops[i].n != int(g):
                continue   # an answer the EV ignored (to an abandoned proposal)
            d = _detail(det)
            op = ops[i]
            ops[i] = CasOp(op.id, op.process, first_sent[node], op.n, op.keys, int(t),
                           (int(d.get("status", -1)), int(d.get("next", -1)), tuple(tuple(k) for k in d.get("keys", ()))),
                           op.evs + (ev,))
        else:
            pending.pop(node, None)
    return ops
