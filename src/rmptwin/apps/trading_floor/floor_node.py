"""One node of the floor: an RMP receiver host and an S_P source in one core, plus the
floor state the node derives from what its receiver delivers.

``FloorNode`` composes the existing cores, unchanged: ``receiver`` (an R_P's
``PrimaryCore`` for a token site, a ``SecondaryCore`` for a participant) and ``source`` (a
``SourceCore`` publishing floor messages on the floor's stripe). The network never hands a
node its own multicast, so what one part multicasts is handed to the other here (the
receiver must hold its node's own orders and reports like anyone else's; the source must
see the acks its own R_P sends). After every call it reads the receiver's events: each
DELIVER on the floor's stripe feeds ``FloorState`` with the delivered payload; a RECOVER
(the receiver started its sequence over) resets it. Subclasses react to events in
``on_receiver_event``.
"""

from __future__ import annotations

from collections import deque

from rmptwin.apps.trading_floor import messages
from rmptwin.apps.trading_floor.state import FloorState
from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Core, Dest, Group
from rmptwin.rmp.receiver_host import ReceiverHost
from rmptwin.rmp.source import SourceCore

FLOOR_TRADE, FLOOR_STATE, FLOOR_REPORT = Kind.FLOOR_TRADE, Kind.FLOOR_STATE, Kind.FLOOR_REPORT


class FloorNode:
    def __init__(self, name: str, receiver: ReceiverHost, source: SourceCore, stripe: int, floor: FloorState) -> None:
        self.name = name
        self.receiver = receiver
        self.source = source
        self.stripe = stripe
        self.floor = floor
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()

    # ------------------------------------------------------------------ core API
    @property
    def malformed(self) -> int:
        return self.receiver.malformed + self.source.malformed + self.floor.malformed

    def groups(self) -> frozenset[str]:
        return self.receiver.groups() | self.source.groups()

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        self.receiver.receive_datagram(data, src, now)
        self.source.receive_datagram(data, src, now)
        self._pump(now)

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        self._pump(now)
        out, self._out = self._out, []
        return out

    def get_timer(self) -> int | None:
        due = [d for d in (self.receiver.get_timer(), self.source.get_timer(), self.own_timer()) if d is not None]
        return min(due) if due else None

    def handle_timer(self, now: int) -> None:
        for core in (self.receiver, self.source):
            due = core.get_timer()
            if due is not None and due <= now:
                core.handle_timer(now)
        self.on_own_timer(now)
        self._pump(now)

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    # ------------------------------------------------------------------ for subclasses
    def own_timer(self) -> int | None:
        return None

    def on_own_timer(self, now: int) -> None:
        pass

    def on_receiver_event(self, ev: Event, now: int) -> None:
        pass

    def emit(self, ev: Event) -> None:
        self._events.append(ev)

    def publish(self, msg: messages.Message, now: int) -> int:
        """Multicast a floor message through this node's S_P."""
        return self.source.publish(self.stripe, messages.encode(msg), now)

    # ------------------------------------------------------------------ plumbing
    def _pump(self, now: int) -> None:
        while True:
            moved = self._loop_back(self.source, self.receiver, now) + self._loop_back(self.receiver, self.source, now)
            ev = self.source.next_event()
            while ev is not None:
                self._events.append(ev)
                ev = self.source.next_event()
            ev = self.receiver.next_event()
            while ev is not None:
                moved += 1
                self._events.append(ev)
                self._on_event(ev, now)
                ev = self.receiver.next_event()
            if not moved:
                return

    def _loop_back(self, sender: Core, other: Core, now: int) -> int:
        out = sender.datagrams_to_send(now)
        mine = other.groups()
        for data, dest in out:
            self._out.append((data, dest))
            if isinstance(dest, Group) and dest.name in mine:
                other.receive_datagram(data, self.name, now)
        return len(out)

    def _on_event(self, ev: Event, now: int) -> None:
        stripe = ev.detail.get("stripe", 0) if ev.detail else 0
        if ev.kind == Kind.DELIVER and stripe == self.stripe:
            payload = self.receiver.receivers[self.stripe].msgs[(ev.src, ev.src_seq)]
            changes = self.floor.apply(payload, ev.src, ev.gseq, ev.detail.get("token", 0))
            for c in changes:
                self.emit(Event(FLOOR_TRADE, ev.src, ev.src_seq, c.gseq, 0,
                                {"status": c.status, "n": c.n, "digest": c.digest}))
            if changes:
                self._emit_state(ev.gseq)
            self.on_delivered(ev, payload, now)
        elif ev.kind == Kind.RECOVER and stripe == self.stripe and ev.detail.get("cause"):
            self.floor.reset()
            self._emit_state(0, reset=True)
        self.on_receiver_event(ev, now)

    def on_delivered(self, ev: Event, payload: bytes, now: int) -> None:
        pass

    def _emit_state(self, gseq: int, reset: bool = False) -> None:
        detail = {"hash": self.floor.state_hash(), **self.floor.counts()}
        if reset:
            detail["reset"] = True
        self.emit(Event(FLOOR_STATE, gseq=gseq, detail=detail))
