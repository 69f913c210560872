"""Total order of the ticker: one sequence per stripe, every receiver a gap-free run of it.

Which deliveries count (the same receivers as summary.json's ``order_consistent``, plus what
safe delivery promises on top):

- agreed delivery: each receiver's last incarnation, unless it is crashed at the end. A
  receiver cut off from the ring may deliver what a new ring gives to other messages; the
  protocol says so, and the checker finds it whenever that receiver is still up at the end.
- safe delivery: every incarnation of every receiver, crashed or not: a message delivered
  only once stable can never be given away by a later ring.

Within one (receiver, incarnation, stripe) the positions delivered must follow each other
(g, g + 1, ...); a receiver that never recovered must start at the stripe's first position
(its sequence is a prefix of the reference). Across receivers, one position holds one
message and one message holds one position. A message delivered twice at the same position
by one receiver is the ``messages`` checker's to report.
"""

from __future__ import annotations

from rmptwin.checkers import Violation
from rmptwin.checkers.histories import Delivery, Message, RmpHistory

NAME = "total_order"


def counted(h: RmpHistory, d: Delivery) -> bool:
    if h.safe:
        return True
    life = h.lifecycle
    return d.inc == life.last_incarnation(d.node) and not life.crashed_at_end(d.node)


def _msg(m: Message) -> str:
    return f"{m[1]}#{m[2]}"


def total_order(h: RmpHistory) -> Violation | None:
    last: dict[tuple[str, int, int], Delivery] = {}
    at_pos: dict[tuple[int, int], Delivery] = {}
    pos_of: dict[Message, Delivery] = {}
    firsts: dict[tuple[str, int, int], Delivery] = {}
    for d in sorted(h.deliveries, key=lambda d: d.t_ns):   # stable: ties keep the logged order
        if not counted(h, d):
            continue
        key = (d.node, d.inc, d.stripe)
        p = last.get(key)
        if p is not None and (p.gseq, p.msg) == (d.gseq, d.msg):
            continue   # the same delivery twice: the messages checker reports it
        if p is not None and d.gseq != p.gseq + 1:
            what = "out of order" if d.gseq <= p.gseq else f"skipping {p.gseq + 1}..{d.gseq - 1}"
            return Violation(NAME, f"{d.node} stripe {d.stripe}: delivered position {d.gseq} after {p.gseq} "
                                   f"({what})", (p.ev, d.ev))
        last[key] = d
        firsts.setdefault(key, d)
        other = at_pos.setdefault((d.stripe, d.gseq), d)
        if other.msg != d.msg:
            gave = ""
            if h.safe and (other.node != d.node):
                gave = " (safe delivery: a later ring gave away a delivered position)"
            return Violation(NAME, f"stripe {d.stripe} position {d.gseq}: {other.node} delivered {_msg(other.msg)}, "
                                   f"{d.node} delivered {_msg(d.msg)}{gave}", (other.ev, d.ev))
        where = pos_of.setdefault(d.msg, d)
        if where.gseq != d.gseq:
            return Violation(NAME, f"message {_msg(d.msg)} of stripe {d.stripe} at two positions: {where.gseq} "
                                   f"({where.node}) and {d.gseq} ({d.node})", (where.ev, d.ev))
    start: dict[int, int] = {}
    for (_node, _inc, stripe), d in firsts.items():
        start[stripe] = min(start.get(stripe, d.gseq), d.gseq)
    for (node, inc, stripe), d in sorted(firsts.items(), key=lambda kv: kv[1].t_ns):
        if inc == 0 and not h.lifecycle.recoveries(node) and d.gseq != start[stripe]:
            return Violation(NAME, f"{node} stripe {stripe}: first delivery at position {d.gseq}, the stripe "
                                   f"starts at {start[stripe]} (not a prefix)", (d.ev,))
    return None
