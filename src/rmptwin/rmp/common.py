"""Plumbing shared by the RMP cores: protocol timing in nanoseconds, a timer heap, and a
base class that queues datagrams and events and logs every control datagram it sends."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Hashable

from ..sansio import Dest, Group
from ..groups import rmp_group
from ..events import Event, Kind
from ..spec import LoadedExperiment, Protocol
from . import wire

MS = 1_000_000


@dataclass(frozen=True)
class Timing:
    """``spec.Protocol`` resolved to integer nanoseconds (what the cores compute with)."""

    time_driven: bool
    dn: int
    tau_t: int
    tau_r: int
    delta_a: int
    null_token: int
    k_r: int
    k_p: int | None
    batch_limit: int
    start_policy: str
    safe: bool = False             # delivery "safe": stable positions only, majority rings

    @classmethod
    def from_protocol(cls, p: Protocol) -> "Timing":
        return cls(
            time_driven=p.token_mode == "time_driven",
            dn=round(p.dn_ms * MS), tau_t=round(p.tau_t * MS), tau_r=round(p.tau_r * MS),
            delta_a=round(p.delta_a * MS), null_token=round(p.null_token * MS), k_r=p.k_r, k_p=p.k_p,
            batch_limit=p.batch_limit, start_policy=p.start_policy, safe=p.delivery == "safe",
        )


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


def stripes_of(host, loaded: LoadedExperiment) -> list[int]:
    """The stripes a host serves: its own list, else every stripe of the workload."""
    own = getattr(host, "stripes", None)
    return sorted(own) if own is not None else list(range(loaded.experiment.workload.stripes))


def primary_ring(loaded: LoadedExperiment, stripe: int) -> list[str]:
    """The initial primary token ring of a stripe: its primaries in topology order."""
    return [h.name for h in loaded.topology.hosts_with_role("primary") if stripe in stripes_of(h, loaded)]


def reformation_servers(loaded: LoadedExperiment) -> list[str]:
    return [h.name for h in loaded.topology.hosts_with_role("reformation")]


def secondary_ring(loaded: LoadedExperiment, ring: str, stripe: int) -> list[str]:
    """A secondary ring on a stripe: the R_P of its first R_S, then its R_S in topology order."""
    members = [
        h for h in loaded.topology.hosts_with_role("secondary") if h.ring == ring and stripe in stripes_of(h, loaded)
    ]
    if not members:
        return []
    return [members[0].primary] + [h.name for h in members]
