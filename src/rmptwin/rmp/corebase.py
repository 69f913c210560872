"""What every RMP core is built on: ``CoreBase`` (outbox, event queue, control-datagram
logging, frame decoding) and ``Timers`` (named deadlines on a lazy-deleting heap).

Security (``keys`` given, seed 6): every frame but DATA leaves with a MAC under the ring
control key (``seal.Sealer.mac_control``) and is opened before decoding; a frame that
fails it is dropped unread, counted in ``rejected`` and reported as an ALARM naming the
sender it claims. DATA frames are sealed by their source instead (``source``, ``receiver``)."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import rmp_group
from rmptwin.core.sansio import Dest, Group, QueuedEvents
from rmptwin.rmp import wire
from rmptwin.rmp.seal import MAC_BYTES, KeySet, Sealer, SealError, alarm

Key = TypeVar("Key", bound=Hashable)
# An RMP core's timer names: tuples, e.g. (stripe, "pass"), ("report", key), ("sec", ring, "wait").
TimerKey = tuple[Any, ...]


class Timers(Generic[Key]):
    """Named deadlines; setting a name again moves it. Lazy-deleting heap."""

    def __init__(self) -> None:
        self._due: dict[Key, int] = {}
        self._heap: list[tuple[int, int, Key]] = []
        self._n = 0

    def set(self, key: Key, when: int) -> None:
        self._due[key] = when
        self._n += 1
        heapq.heappush(self._heap, (when, self._n, key))

    def set_earlier(self, key: Key, when: int) -> None:
        """Set unless already due sooner."""
        cur = self._due.get(key)
        if cur is None or when < cur:
            self.set(key, when)

    def cancel(self, key: Key) -> None:
        self._due.pop(key, None)

    def has(self, key: Key) -> bool:
        return key in self._due

    def keys_due_at(self, when: int) -> list[Key]:
        """The keys set to fire at ``when`` (a driver asks which timer a deadline is)."""
        return [key for key, due in self._due.items() if due == when]

    def next(self) -> int | None:
        h = self._heap
        while h and self._due.get(h[0][2]) != h[0][0]:
            heapq.heappop(h)
        return h[0][0] if h else None

    def pop_due(self, now: int) -> list[Key]:
        out: list[Key] = []
        h = self._heap
        while h and h[0][0] <= now:
            when, _, key = heapq.heappop(h)
            if self._due.get(key) == when:
                del self._due[key]
                out.append(key)
        return out


class CoreBase(QueuedEvents):
    """Outbox, event queue and timers of one node; subclasses dispatch the timers."""

    def __init__(self, name: str, keys: KeySet | None = None) -> None:
        self.name = name
        self.timers: Timers[TimerKey] = Timers()
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.malformed = 0
        self.sealer = Sealer(keys) if keys is not None else None
        self.rejected = 0          # frames dropped unread for security (each also an ALARM event)
        self.duplicates = 0        # source messages and acks already held (replays land here)
        self.ignored = 0           # well-formed frames of no use to this core (another stripe, a role's frame)

    # -- core API -----------------------------------------------------------------
    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        out = self._out
        if not out:
            return ()  # the common case, after every datagram: no new list
        self._out = []
        return out

    def get_timer(self) -> int | None:
        return self.timers.next()

    def handle_timer(self, now: int) -> None:
        # a handler may set a timer due at once ("send now"): run those here too, because
        # a driver never fires the same deadline twice
        for _ in range(100_000):
            keys = self.timers.pop_due(now)
            if not keys:
                break
            for key in keys:
                self.on_timer(key, now)

    def on_timer(self, key: TimerKey, now: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------
    def decode_frame(self, data: bytes, src: str = "") -> wire.Frame | None:
        """The RMP frame in ``data``, or None if it is malformed (counted in ``malformed``) or,
        with security on, a control frame failing its MAC (counted in ``rejected``, ALARM)."""
        if self.sealer is not None and not _is_data(data):
            try:
                data = self.sealer.open_control(data)
            except SealError as e:
                self.reject(e.reason, _claimed_sender(data, src), src)
                return None
        try:
            return wire.decode(data)
        except wire.WireError:
            self.malformed += 1
            return None

    def reject(self, reason: str, claimed: str, via: str, **detail: Any) -> None:
        """Drop a frame for security: count it and raise an ALARM naming its claimed sender."""
        self.rejected += 1
        self.emit(alarm(reason, claimed, via, **detail))

    def emit(self, ev: Event) -> None:
        self._events.append(ev)

    def send(self, frame: wire.Frame, dest: Dest, *, control: bool = True) -> bytes:
        data = wire.encode(frame)
        if self.sealer is not None and not isinstance(frame, wire.Data):
            data = self.sealer.mac_control(data)
        self._out.append((data, dest))
        if control:
            self.emit(Event(Kind.CTRL_SENT, bytes=len(data), detail={"type": wire.type_name(frame)}))
        return data

    def multicast(self, stripe: int, frame: wire.Frame, *, control: bool = True) -> bytes:
        return self.send(frame, Group(rmp_group(stripe)), control=control)


def _is_data(data: bytes) -> bool:
    """A DATA frame by its header (sealed by its source, not MACed as control)."""
    return len(data) >= wire.HEADER_SIZE and data[0] == wire.MAGIC and data[2] == wire.DATA


_SENDER_FIELDS = ("token_site", "requester", "reporter", "reformer", "member", "holder", "src")


def _claimed_sender(data: bytes, via: str) -> str:
    """Who a frame that failed its MAC claims to come from (its sender field), else ``via``.
    The frame may carry a bad MAC or none at all."""
    frame = None
    for candidate in (data[:-MAC_BYTES], data):
        try:
            frame = wire.decode(bytes(candidate))
            break
        except wire.WireError:
            continue
    if frame is None:
        return via
    if isinstance(frame, wire.Retx):
        frame = frame.original
    for name in _SENDER_FIELDS:
        value = getattr(frame, name, None)
        if isinstance(value, str) and value:
            return value
    return via
