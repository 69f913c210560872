"""The ``layers`` sweep probe: the seed's L_i measured (RMP seed 4.1, layered receivers).

L_i is the number of token passes needed to guarantee that every receiver holds a message
when the receivers are arranged in i layers of rings: one ring of m (L_1 = m), or a primary
ring whose members each lead a secondary ring (L_2 = sqrt(L_1) when both have sqrt(m)
members; the rings turn at once, so their times do not add up).

``layered_passes``: per message, the time from its acknowledgement until every ring (the
primary ring and each secondary ring, per stripe) has declared it stable (STABLE,
SECONDARY_STABLE, at the first member to know), in token periods tau_t, plus one: the
acknowledging pass itself, as the seed counts L_1 = m (a ring of m makes ack t stable m - 1
passes after it); the median over messages. ``levels``: 1 without secondary rings, 2 with
them (the topology has no third kind of ring, so L_3 cannot be configured). ``receivers``:
R_P and R_S hosts. ``rings``: how many rings reported stability.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmptwin.core.events import Kind

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment


def _stable_times(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One ring's stability events as (sorted gseq, for each the earliest time an event at that
    gseq or above was logged): a stable gseq covers every position below it."""
    g = events.gseq.to_numpy()
    t = events.t_ns.to_numpy()
    order = np.argsort(g, kind="stable")
    g, t = g[order], t[order]
    return g, np.minimum.accumulate(t[::-1])[::-1]


def layered_passes(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    hosts = loaded.topology.hosts
    receivers = sum(1 for h in hosts if h.role in ("primary", "secondary"))
    levels = 2 if any(h.role == "secondary" and h.ring for h in hosts) else 1
    tau_ns = loaded.experiment.protocol.tau_t * 1e6
    stable = df[(df.kind == Kind.STABLE) | (df.kind == Kind.SECONDARY_STABLE)]
    acks = df[df.kind == Kind.ACK_SENT]
    out: dict[str, Any] = {"layered_passes": None, "levels": levels, "receivers": receivers, "rings": 0}
    if stable.empty or acks.empty:
        return out
    details = [json.loads(d) for d in stable.detail]
    ring_of = [(d.get("stripe", 0), d.get("ring", "primary") if k == Kind.SECONDARY_STABLE else "primary")
               for d, k in zip(details, stable.kind)]
    stable = stable.assign(stripe=[r[0] for r in ring_of], ring=[r[1] for r in ring_of])
    ack_detail = [json.loads(d) for d in acks.detail]
    passes = []
    rings = 0
    for stripe, mine in stable.groupby("stripe"):
        per_ring = [_stable_times(ev) for _, ev in mine.groupby("ring")]
        rings += len(per_ring)
        for first, t_ack, d in zip(acks.gseq.to_numpy(), acks.t_ns.to_numpy(), ack_detail):
            if d.get("stripe", 0) != stripe:
                continue
            for gseq in range(int(first), int(first) + int(d.get("k", 0))):
                done: int | None = 0
                for g, t in per_ring:
                    i = np.searchsorted(g, gseq, side="left")
                    if i == len(g):
                        done = None
                        break
                    assert done is not None   # a ring without the position broke out above
                    done = max(done, int(t[i]))
                if done is not None:
                    passes.append(1 + (done - t_ack) / tau_ns)
    out["rings"] = rings
    out["layered_passes"] = float(np.median(passes)) if passes else None
    return out
