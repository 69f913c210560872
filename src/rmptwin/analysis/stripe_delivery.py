"""What was released on each stripe and what each customer received on it: the one definition
by which summary.py (``customers.guaranteed_complete``), edge_summary.py (``edge``),
customer_completeness.py (``customers_incomplete``) and the ``customers`` checker judge a
customer complete.

- *released* on a stripe: the gseqs an R_P/R_S RELEASEd on it and, on an edge stripe (RMP seed
  4.4, docs/edge-stripes.md), the edge sequence numbers an R_T EDGE_RELEASEd on it: a customer
  behind an edge stripe numbers its messages by that stripe's own sequence, and edge stripes
  are numbered after the core stripes, so the two never share a stripe.
- *received* by a customer on a stripe: the gseqs of its CUST_RECV events there.
- a customer's *missing* messages on a stripe: released there less received; it is complete
  on the stripes it joins when none is missing on any.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from rmptwin.core.events import Kind
from rmptwin.model import Topology

RT_ROLES = ("primary", "secondary")
RELEASE_KINDS = (Kind.RELEASE, Kind.EDGE_RELEASE)


def stripe_of(detail: object) -> int:
    """An event's stripe from its detail (a JSON text or a dict); 0 where it names none."""
    if isinstance(detail, dict):
        value = detail.get("stripe", 0)
    elif not isinstance(detail, str) or "stripe" not in detail:   # most details name none: no parse
        return 0
    else:
        try:
            parsed = json.loads(detail)
        except ValueError:
            return 0
        value = parsed.get("stripe", 0) if isinstance(parsed, dict) else 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def first_send_times(df: pd.DataFrame) -> dict[tuple[int, str, int], int]:
    """Each message's (stripe, src, src_seq) first SEND time."""
    send = df[df.kind == Kind.SEND]
    send_t: dict[tuple[int, str, int], int] = {}
    for s, q, t, det in zip(send.src, send.src_seq, send.t_ns, send.detail):
        send_t.setdefault((stripe_of(det), s, int(q)), int(t))
    return send_t


@dataclass(frozen=True)
class StripeDelivery:
    released: dict[int, set[int]]              # stripe -> gseqs released on it
    received: dict[tuple[str, int], set[int]]  # (customer, stripe) -> gseqs it received there

    def received_on(self, customer: str, stripe: int) -> set[int]:
        return self.received.get((customer, stripe), set())

    def missing(self, customer: str, stripe: int) -> set[int]:
        return self.released.get(stripe, set()) - self.received_on(customer, stripe)

    def complete(self, customer: str, stripes: Iterable[int]) -> bool:
        return not any(self.missing(customer, s) for s in stripes)


def stripe_delivery(df: pd.DataFrame, rt_names: set[str]) -> StripeDelivery:
    """Released and received per stripe (the module docstring) from an event table with
    columns kind, node, gseq, detail; ``rt_names``: the R_P/R_S hosts."""
    released: dict[int, set[int]] = {}
    rel = df[df.kind.isin(RELEASE_KINDS) & df.node.isin(rt_names)]
    for g, det in zip(rel.gseq, rel.detail):
        released.setdefault(stripe_of(det), set()).add(int(g))
    received: dict[tuple[str, int], set[int]] = {}
    cr = df[df.kind == Kind.CUST_RECV]
    for node, g, det in zip(cr.node, cr.gseq, cr.detail):
        received.setdefault((node, stripe_of(det)), set()).add(int(g))
    return StripeDelivery(released, received)


def rt_names(topo: Topology) -> set[str]:
    """The R_P/R_S hosts' names: the nodes whose releases count."""
    return {h.name for h in topo.hosts if h.role in RT_ROLES}
