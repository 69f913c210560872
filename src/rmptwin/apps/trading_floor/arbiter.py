"""The arbiter (seed 7.3): an R_P of the floor's ring that, whenever it holds the token,
declares the trades the acknowledged sequence makes.

"By making the token site the arbiter we can guarantee that the arbiter has the most
complete acknowledged sequence": an R_P accepts the token only once it holds every ack
and message up to it, so at TOKEN_ACCEPT its ``FloorState`` has applied everything
acknowledged. It then sources, through its own S_P, in this order:

1. the rule's controls due at this token (a Dutch tick, a round's close);
2. ``tentative`` for every derived trade that no valid tentative report in the sequence
   names yet: at once, while it holds the token, so its own ack carries it;
3. ``confirmed`` for every tentative trade whose report sits at or below the ring's stable
   position (``RingMember.stable_gseq``: every member holds it). For a report it sourced
   itself that is exactly "the next time it holds the token" (its report went out with
   ack t; holding again, it has accepted t + m - 1, so all m members hold t).

Crash of the token site (the reformation rule). Nothing here is stored outside the
sequence, so the new ring needs no hand-over: its token sites apply the same three steps
to the agreed sequence. A tentative report that made it into the agreed sequence is
confirmed by whichever site holds the token once it is stable in the new ring. One that
did not (it died with the crashed site) leaves its trade unreported in the agreed
sequence, so the next token site re-issues it: the same trade number and digest, since
the trade is a function of the orders before it, which the agreed sequence keeps. A report
whose trade the agreed sequence does not make is void (``FloorState``: withdrawn). Every
verdict is a function of the agreed sequence, so it is the same at every node.

Nothing is sourced twice while the first copy is still on its way (``pending``); a
repeated report or control is harmless anyway (the first in the sequence counts).
"""

from __future__ import annotations

from rmptwin.apps.trading_floor import messages
from rmptwin.apps.trading_floor.floor_node import FloorNode
from rmptwin.apps.trading_floor.messages import Control, Report
from rmptwin.apps.trading_floor.state import FloorState
from rmptwin.core.events import Event, Kind
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.source import SourceCore


def message_key(msg: messages.Message) -> tuple[object, ...] | None:
    return _key(msg) if isinstance(msg, (Report, Control)) else None


def _key(msg: Report | Control) -> tuple[object, ...]:
    if isinstance(msg, Report):
        return (msg.status, msg.n, msg.digest)
    return ("control", msg.what, msg.lot, msg.step)


class ArbiterCore(FloorNode):
    def __init__(self, primary: PrimaryCore, source: SourceCore, stripe: int, floor: FloorState) -> None:
        super().__init__(primary.name, primary, source, stripe, floor)
        self.primary = primary
        self.pending: set[tuple[object, ...]] = set()
        self.holds = 0

    def on_receiver_event(self, ev: Event, now: int) -> None:
        if ev.kind == Kind.TOKEN_ACCEPT and ev.detail.get("stripe", 0) == self.stripe:
            self.arbitrate(now)

    def on_delivered(self, ev: Event, payload: bytes, now: int) -> None:
        try:
            key = message_key(messages.decode(payload))
        except messages.FloorDecodeError:
            return
        self.pending.discard(key)

    def arbitrate(self, now: int) -> None:
        member = self.primary.members.get(self.stripe)
        if member is None or not member.holding:
            return
        self.holds += 1
        token = member.token_t
        for c in self.floor.rule.controls_due(token):
            self._source(c, now, token)
        for t in self.floor.unreported():
            self._source(Report("tentative", t.n, t.digest, t.fill.as_tuple()), now, token)
        for t in self.floor.confirmable(member.stable_gseq):
            self._source(Report("confirmed", t.n, t.digest), now, token)

    def _source(self, msg: Report | Control, now: int, token: int) -> None:
        key = _key(msg)
        if key in self.pending:
            return
        self.pending.add(key)
        seq = self.publish(msg, now)
        if isinstance(msg, Report):
            self.emit(Event(Kind.FLOOR_REPORT, self.source.label, seq, -1, 0,
                            {"status": msg.status, "n": msg.n, "digest": msg.digest, "token": token}))
