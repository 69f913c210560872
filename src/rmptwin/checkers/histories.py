"""Histories for the checkers, from a run's event table (pandas): plain records, no Arrow.

A checker never reads the event table itself: the records here are what the hand-made
histories of the tests are made of too. Every record keeps the event it came from
(``ev``: t_ns, node, kind, src, src_seq, gseq, detail) so a violation can show it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import pandas as pd

from rmptwin.analysis.incarnations import incarnations, ordered
from rmptwin.core.events import Kind

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment

RECEIVER_ROLES: Final = ("primary", "secondary")
Message = tuple[int, str, int]   # (stripe, src, src_seq)


class Delivery(NamedTuple):
    t_ns: int
    node: str
    inc: int          # incarnation: RECOVERs of the node before this event
    stripe: int
    gseq: int
    msg: Message
    ev: dict[str, Any]


@dataclass
class Lifecycle:
    """Per node: CRASH/RECOVER times in order (a pause is not a crash: the node keeps its state)."""

    changes: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def crashed_at_end(self, node: str) -> bool:
        ch = self.changes.get(node, [])
        return bool(ch) and ch[-1][1] == Kind.CRASH

    def recoveries(self, node: str) -> list[int]:
        return [t for t, k in self.changes.get(node, ()) if k == Kind.RECOVER]

    def last_incarnation(self, node: str) -> int:
        return len(self.recoveries(node))


@dataclass
class RmpHistory:
    """What the ticker's checkers read."""

    deliveries: list[Delivery]
    lifecycle: Lifecycle
    sent: dict[Message, dict[str, Any]]             # message -> its first SEND event
    acked: dict[Message, dict[str, Any]]            # message -> first SRC_ACKED event
    receivers: dict[str, set[int]]          # receiver -> stripes it serves
    safe: bool = False
    owed_until_ns: int | None = None        # messages first sent later are a short run's, not owed


def event_dict(t_ns: Any, node: str, kind: str, src: str = "", src_seq: Any = -1, gseq: Any = -1,
               detail: Any = "{}") -> dict[str, Any]:
    return {"t_ns": int(t_ns), "node": node, "kind": kind, "src": src, "src_seq": int(src_seq),
            "gseq": int(gseq), "detail": detail if isinstance(detail, str) else json.dumps(detail)}


def _stripes(df: pd.DataFrame) -> list[int]:
    if "d_stripe" in df.columns:
        return [0 if pd.isna(s) else int(s) for s in df.d_stripe]
    out = []
    for d in df.detail:
        try:
            out.append(int(json.loads(d).get("stripe", 0)) if d and "stripe" in d else 0)
        except (ValueError, TypeError, AttributeError):
            out.append(0)
    return out


def _rows(df: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    stripes = _stripes(df)
    for i, (t, node, kind, src, sseq, gseq, det) in enumerate(
            zip(df.t_ns, df.node, df.kind, df.src, df.src_seq, df.gseq, df.detail)):
        yield stripes[i], event_dict(t, node, kind, src, sseq, gseq, det)


def lifecycle(df: pd.DataFrame) -> Lifecycle:
    life = Lifecycle()
    rows = ordered(df[df.kind.isin([Kind.CRASH, Kind.RECOVER])])
    for t, node, kind in zip(rows.t_ns, rows.node, rows.kind):
        life.changes.setdefault(node, []).append((int(t), kind))
    return life


def rmp_history(df: pd.DataFrame, loaded: LoadedExperiment, owed_until_ns: int | None = None) -> RmpHistory:
    topo, n_stripes = loaded.topology, loaded.experiment.workload.stripes
    receivers = {h.name: set(stripes) if (stripes := getattr(h, "stripes", None)) else set(range(n_stripes))
                 for h in topo.hosts if h.role in RECEIVER_ROLES}
    df = ordered(df)
    life = lifecycle(df)
    inc = incarnations(df)
    mask = (df.kind == Kind.DELIVER) & df.node.isin(list(receivers))
    dl, dl_inc = df[mask], inc[mask].tolist()
    deliveries = [Delivery(ev["t_ns"], ev["node"], dl_inc[i], stripe, ev["gseq"], (stripe, ev["src"], ev["src_seq"]), ev)
                  for i, (stripe, ev) in enumerate(_rows(dl))]
    sent: dict[Message, dict[str, Any]] = {}
    for stripe, ev in _rows(df[df.kind == Kind.SEND]):
        sent.setdefault((stripe, ev["src"], ev["src_seq"]), ev)
    acked: dict[Message, dict[str, Any]] = {}
    for stripe, ev in _rows(df[df.kind == Kind.SRC_ACKED]):
        acked.setdefault((stripe, ev["src"], ev["src_seq"]), ev)
    return RmpHistory(deliveries, life, sent, acked, receivers, loaded.experiment.protocol.delivery == "safe",
                      owed_until_ns)


def rows_of(df: pd.DataFrame, kinds: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """(stripe, event) of the events of ``kinds``, in time order."""
    return list(_rows(ordered(df[df.kind.isin(kinds)])))
