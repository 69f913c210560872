"""No acknowledged message lost, none delivered twice, every delivered message sent.

Definitions (those of summary.json's ``messages_lost``, as a verdict with its evidence):

- acknowledged: delivered by some receiver (its last incarnation), or SRC_ACKED at its source;
- lost: an acknowledged message that a receiver up at the end and serving its stripe never
  delivered; a recovered receiver owes only positions from its first delivery after
  recovering on (a message it owes is one whose position is known and at or after that);
- delivered twice: one incarnation of a receiver delivers one position twice, or one
  message at two positions;
- sent: some SEND event names it (stripe, src, src_seq);
- a message first sent after ``RmpHistory.owed_until_ns`` (the cut of a run that ended before
  its drain: ``analysis.drain_state``) is not owed: the run was too short for it.
"""

from __future__ import annotations

from typing import Any

from rmptwin.checkers import Violation
from rmptwin.checkers.histories import Delivery, Message, RmpHistory

NAME = "messages"


def _msg(m: Message) -> str:
    return f"stripe {m[0]} {m[1]}#{m[2]}"


def messages(h: RmpHistory) -> Violation | None:
    life = h.lifecycle
    seen_pos: dict[tuple[str, int, int, int], Delivery] = {}
    seen_msg: dict[tuple[str, int, Message], Delivery] = {}
    final: list[Delivery] = []
    for d in sorted(h.deliveries, key=lambda d: d.t_ns):
        if d.msg not in h.sent:
            return Violation(NAME, f"{d.node} delivered {_msg(d.msg)} at position {d.gseq}, which no source sent",
                             (d.ev,))
        p = seen_pos.setdefault((d.node, d.inc, d.stripe, d.gseq), d)
        if p is not d:
            return Violation(NAME, f"{d.node} delivered position {d.gseq} of stripe {d.stripe} twice",
                             (p.ev, d.ev))
        q = seen_msg.setdefault((d.node, d.inc, d.msg), d)
        if q is not d:
            return Violation(NAME, f"{d.node} delivered {_msg(d.msg)} twice (positions {q.gseq} and {d.gseq})",
                             (q.ev, d.ev))
        if d.inc == life.last_incarnation(d.node):
            final.append(d)
    # acknowledged: delivered by someone (first delivery as the evidence), or acked at the source
    evidence: dict[Message, dict[str, Any]] = {}
    position: dict[Message, int] = {}
    for d in final:
        evidence.setdefault(d.msg, d.ev)
        position.setdefault(d.msg, d.gseq)
    for m, ev in h.acked.items():
        evidence.setdefault(m, ev)
    got: dict[str, set[Message]] = {}
    first: dict[tuple[str, int], int] = {}
    for d in final:
        got.setdefault(d.node, set()).add(d.msg)
        key = (d.node, d.stripe)
        first[key] = min(first.get(key, d.gseq), d.gseq)
    until = h.owed_until_ns
    for m, ev in sorted(evidence.items(), key=lambda kv: kv[1]["t_ns"]):
        if until is not None and m in h.sent and h.sent[m]["t_ns"] > until:
            continue
        for node in sorted(h.receivers):
            if life.crashed_at_end(node) or m[0] not in h.receivers[node] or m in got.get(node, ()):
                continue
            if life.recoveries(node):
                g, lo = position.get(m), first.get((node, m[0]))
                if g is None or lo is None or g < lo:
                    continue
            return Violation(NAME, f"{_msg(m)} was acknowledged ({ev['node']} {ev['kind']}) but {node}, up at the "
                                   f"end and serving stripe {m[0]}, never delivered it", (ev,))
    return None
