"""When an emulated run may stop: every message acknowledged, released and delivered.

The simulator stops at the experiment's duration because its clock is exact. An emulated
run on a loaded machine can fall behind its own schedule (two cores shared by dozens of
nodes, relays and a user-space switch), and a hard stop at the duration would then cut off
messages still being acknowledged or repaired and report them lost. So the runner keeps
the nodes running past the duration until the run is quiescent, up to a cap, and reports
how long that took (summary ``runtime.drain_s``).

Each node folds the events it logs into a ``NodeProgress`` and prints it as a ``STATUS``
line; ``quiescent`` decides from the latest status of every live node. Quiescent means:
- every source has every message it sent acknowledged;
- every receiver that releases (R_T) has released up to the highest acknowledged position
  of each stripe;
- every guaranteed-grade customer holds every position of its stripes up to that point; on an
  edge stripe (seed 4.4, numbered after the core ones, its own sequence) up to the highest
  edge sequence an R_T released on it (EDGE_RELEASE).
Best-effort customers skip gaps by design and are not waited for.
"""

from __future__ import annotations

from typing import Any

from rmptwin.core.events import Event, Kind
from rmptwin.model import LoadedExperiment
from rmptwin.model.queries import customer_stripes, stripes_of

STATUS_EVERY_S = 0.25
DRAIN_MAX_S = 60.0  # past the duration; a run that needs more has a real problem


def owed_stripes(loaded: LoadedExperiment) -> dict[str, list[int]]:
    """Per R_T and guaranteed customer, the stripes it must complete before the run stops."""

    topo = loaded.topology
    owes = {h.name: stripes_of(h, loaded) for h in topo.hosts if h.role in ("primary", "secondary")}
    return owes | {h.name: customer_stripes(h, loaded) for h in topo.hosts_with_role("customer")
                   if h.grade == "guaranteed"}


class NodeProgress:
    """What one node has done so far, from the events it logs."""

    def __init__(self, guaranteed: bool = False) -> None:
        self.guaranteed = guaranteed
        self.sent = 0
        # (stripe, seq) acknowledged now. A count of SRC_ACKED would not do: a NEW_RING revokes
        # acks that died with the old token site (a paused site's, say) and the source
        # re-sends those messages (SRC_RETX), to be acknowledged again by the new ring.
        self.acked: set[tuple[int, int]] = set()
        self.acked_top: dict[int, int] = {}     # stripe -> highest acknowledged gseq seen
        self.released_top: dict[int, int] = {}  # stripe -> highest released gseq
        self.edge_top: dict[int, int] = {}      # edge stripe -> highest edge sequence released on it
        self.held: dict[int, set[int]] = {}     # customer: stripe -> positions held above the prefix
        self.prefix: dict[int, int] = {}        # customer: stripe -> every position <= this is held

    def add(self, ev: Event) -> None:
        kind = ev.kind
        if kind == Kind.SEND:
            self.sent += 1
        elif kind == Kind.SRC_ACKED:
            k = ev.detail.get("stripe", 0)
            self.acked.add((k, ev.src_seq))
            self.acked_top[k] = max(self.acked_top.get(k, 0), ev.gseq)
        elif kind == Kind.SRC_RETX:
            self.acked.discard((ev.detail.get("stripe", 0), ev.src_seq))
        elif kind == Kind.RELEASE:
            k = ev.detail.get("stripe", 0)
            self.released_top[k] = max(self.released_top.get(k, 0), ev.gseq)
        elif kind == Kind.EDGE_RELEASE:
            k = ev.detail.get("stripe", 0)
            self.edge_top[k] = max(self.edge_top.get(k, 0), ev.gseq)
        elif kind == Kind.CUST_RECV:
            k = ev.detail.get("stripe", 0)
            held = self.held.setdefault(k, set())
            held.add(ev.gseq)
            top = self.prefix.get(k, 0)
            while top + 1 in held:
                top += 1
                held.discard(top)
            self.prefix[k] = top

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.sent:
            out.update(sent=self.sent, acked=len(self.acked), acked_top=self.acked_top)
        if self.released_top:
            out["released_top"] = self.released_top
        if self.edge_top:
            out["edge_top"] = self.edge_top
        if self.guaranteed:
            out["prefix"] = self.prefix
        return out


def _stripes(d: dict[str, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in d.items()}  # JSON turned the stripe keys into strings


def quiescent(statuses: dict[str, dict[str, Any]], owes: dict[str, list[int]]) -> tuple[bool, str]:
    """(done, what is still outstanding) from the live nodes' latest ``status()``.

    ``owes`` is ``owed_stripes``."""
    top: dict[int, int] = {}
    for name, st in statuses.items():
        if st.get("sent", 0) != st.get("acked", 0):
            return False, f"{name} has {st['sent'] - st['acked']} unacknowledged"
        for k, g in _stripes(st.get("acked_top", {})).items():
            top[k] = max(top.get(k, 0), g)
        for k, g in _stripes(st.get("edge_top", {})).items():   # edge stripes: what the R_T released
            top[k] = max(top.get(k, 0), g)
    for name, st in statuses.items():
        held = _stripes(st.get("prefix", st.get("released_top", {})))
        for k in owes.get(name, []):
            if held.get(k, 0) < top.get(k, 0):
                what = "misses" if "prefix" in st else "has not released"
                return False, f"{name} {what} stripe {k} messages up to {top[k]}"
    return True, ""
