"""What every taxonomy core is built on: outbox, event queue, named timers, the codec.

``TaxonomyNode`` keeps the ``rmptwin.core.sansio.Core`` plumbing in one place; members
(``member.MemberCore``) and senders (``sender.SenderCore``) add the protocol.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Sequence

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, Group, Unicast
from rmptwin.rmp.corebase import Timers
from rmptwin.taxonomy.codec import CODECS, CodecError, Frame, type_name
from rmptwin.taxonomy.config import TaxonomyConfig

DATA_FRAMES = frozenset({"SUBMIT", "DATA", "SEQ"})   # a message's first copy; everything else is control


class TaxonomyNode:
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        self.name = name
        self.cfg = config
        self.codec = CODECS[config.protocol]
        self.timers: Timers[Hashable] = Timers()   # "heartbeat", "watch", "nak", (what, src_seq), ...
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.malformed = 0
        self.epoch = 0
        self.sequencer = config.members[0]

    # -- sansio.Core --------------------------------------------------------------
    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def get_timer(self) -> int | None:
        return self.timers.next()

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def handle_timer(self, now: int) -> None:
        for _ in range(10_000):   # a handler may set a timer due at once: run it now too
            keys = self.timers.pop_due(now)
            if not keys:
                break
            for key in keys:
                self.on_timer(key, now)

    def groups(self) -> frozenset[str]:
        return frozenset({self.cfg.group})

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        try:
            frame = self.codec.decode(data)
        except CodecError:
            self.malformed += 1
            return
        self.on_frame(frame, src, now)

    # -- for subclasses -------------------------------------------------------------
    def on_frame(self, frame: Frame, src: str, now: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_timer(self, key: Hashable, now: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def emit(self, ev: Event) -> None:
        self._events.append(ev)

    def _send(self, frame: Frame, dest: Dest) -> None:
        data = self.codec.encode(frame)
        self._out.append((data, dest))
        name = type_name(frame)
        if name not in DATA_FRAMES:
            self.emit(Event(Kind.CTRL_SENT, bytes=len(data), detail={"type": name}))

    def unicast(self, frame: Frame, node: str) -> None:
        self._send(frame, Unicast(node))

    def broadcast(self, frame: Frame) -> None:
        self._send(frame, Group(self.cfg.group))


def runs_of(values: Iterable[int]) -> tuple[int, ...]:
    """Sorted integers as a flat tuple of (first, last) runs: 1,2,3,7 -> (1, 3, 7, 7)."""
    out: list[int] = []
    for v in sorted(values):
        if out and v == out[-1] + 1:
            out[-1] = v
        else:
            out += [v, v]
    return tuple(out)


def expand_runs(runs: Sequence[int]) -> list[int]:
    out: list[int] = []
    for i in range(0, len(runs) - 1, 2):
        out.extend(range(runs[i], runs[i + 1] + 1))
    return out
