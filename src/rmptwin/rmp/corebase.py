"""What every RMP core is built on: ``CoreBase`` (outbox, event queue, control-datagram
logging, frame decoding) and ``Timers`` (named deadlines on a lazy-deleting heap)."""

from __future__ import annotations

import heapq
from collections import deque
from typing import Hashable

from ..sansio import Dest, Group
from ..groups import rmp_group
from ..events import Event, Kind
from . import wire


class Timers:
    """Named deadlines; setting a name again moves it. Lazy-deleting heap."""

    def __init__(self) -> None:
        self._due: dict[Hashable, int] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._n = 0

    def set(self, key: Hashable, when: int) -> None:
        self._due[key] = when
        self._n += 1
        heapq.heappush(self._heap, (when, self._n, key))

    def set_earlier(self, key: Hashable, when: int) -> None:
        """Set unless already due sooner."""
        cur = self._due.get(key)
        if cur is None or when < cur:
            self.set(key, when)

    def cancel(self, key: Hashable) -> None:
        self._due.pop(key, None)

    def has(self, key: Hashable) -> bool:
        return key in self._due

    def keys_due_at(self, when: int) -> list[Hashable]:
        """The keys set to fire at ``when`` (a driver asks which timer a deadline is)."""
        return [key for key, due in self._due.items() if due == when]

    def next(self) -> int | None:
        h = self._heap
        while h and self._due.get(h[0][2]) != h[0][0]:
            heapq.heappop(h)
        return h[0][0] if h else None

    def pop_due(self, now: int) -> list[Hashable]:
        out = []
        h = self._heap
        while h and h[0][0] <= now:
            when, _, key = heapq.heappop(h)
            if self._due.get(key) == when:
                del self._due[key]
                out.append(key)
        return out


class CoreBase:
    """Outbox, event queue and timers of one node; subclasses dispatch the timers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.timers = Timers()
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.malformed = 0

    # -- core API -----------------------------------------------------------------
    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def get_timer(self) -> int | None:
        return self.timers.next()

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def handle_timer(self, now: int) -> None:
        # a handler may set a timer due at once ("send now"): run those here too, because
        # a driver never fires the same deadline twice
        for _ in range(100_000):
            keys = self.timers.pop_due(now)
            if not keys:
                break
            for key in keys:
                self.on_timer(key, now)

    def on_timer(self, key: Hashable, now: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------
    def decode_frame(self, data: bytes) -> wire.Frame | None:
        """The RMP frame in ``data``, or None (counted in ``malformed``) if it is malformed."""
        try:
            return wire.decode(data)
        except wire.WireError:
            self.malformed += 1
            return None

    def emit(self, ev: Event) -> None:
        self._events.append(ev)

    def send(self, frame: wire.Frame, dest: Dest, *, control: bool = True) -> bytes:
        data = wire.encode(frame)
        self._out.append((data, dest))
        if control:
            self.emit(Event(Kind.CTRL_SENT, bytes=len(data), detail={"type": wire.type_name(frame)}))
        return data

    def multicast(self, stripe: int, frame: wire.Frame, *, control: bool = True) -> bytes:
        return self.send(frame, Group(rmp_group(stripe)), control=control)
