"""Hand-made histories for the checker tests: a clean one and helpers to plant violations."""

from __future__ import annotations

from rmptwin.checkers.histories import Delivery, Lifecycle, RmpHistory, event_dict

RECEIVERS = ("ra", "rb", "rc")


def msg(i: int, stripe: int = 0) -> tuple:
    return (stripe, "src", i)


def dl(node: str, gseq: int, m: tuple, t: int, inc: int = 0) -> Delivery:
    ev = event_dict(t, node, "deliver", m[1], m[2], gseq, {"stripe": m[0]})
    return Delivery(t, node, inc, m[0], gseq, m, ev)


def clean(n: int = 5, safe: bool = False, receivers=RECEIVERS) -> RmpHistory:
    """Every receiver delivers messages 1..n at positions 1..n, all sent and acked."""
    deliveries = [dl(r, g, msg(g), 1000 * g + k) for g in range(1, n + 1) for k, r in enumerate(receivers)]
    sent = {msg(g): event_dict(10 * g, "src", "send", "src", g) for g in range(1, n + 1)}
    acked = {msg(g): event_dict(1000 * g + 500, "src", "src_acked", "src", g, g) for g in range(1, n + 1)}
    return RmpHistory(deliveries, Lifecycle(), sent, acked, {r: {0} for r in receivers}, safe)


def replace(h: RmpHistory, node: str, gseq: int, new: Delivery | None) -> RmpHistory:
    """``h`` with ``node``'s delivery of ``gseq`` replaced by ``new`` (or removed)."""
    out = [d for d in h.deliveries if not (d.node == node and d.gseq == gseq)]
    if new is not None:
        out.append(new)
    return RmpHistory(sorted(out, key=lambda d: d.t_ns), h.lifecycle, h.sent, h.acked, h.receivers, h.safe)
