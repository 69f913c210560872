"""The contract every protocol core keeps (RMP roles, venue roles), after aioquic.

A core is a pure state machine: bytes and ``now`` (int nanoseconds, the node's local
clock) in; datagrams, one timer deadline and events out. It never reads a clock, never
draws from a global random generator, never touches a socket. The simulator and the
asyncio runtime are two drivers of the same cores.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rmptwin.core.events import Event


@dataclass(frozen=True, slots=True)
class Group:
    """A multicast group by logical name, e.g. ``rmp/0`` or ``region/europe/0``."""

    name: str


@dataclass(frozen=True, slots=True)
class Unicast:
    """One host by name."""

    node: str


Dest = Group | Unicast


class Core(Protocol):
    def receive_datagram(self, data: bytes, src: str, now: int) -> None: ...

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]: ...

    def get_timer(self) -> int | None: ...

    def handle_timer(self, now: int) -> None: ...

    def next_event(self) -> Event | None: ...

    def groups(self) -> frozenset[str]:
        """Groups this node is joined to now (membership may change)."""
        ...


# Mixins for the parts of ``Core`` some cores do not have, so each says so in its class line
# instead of repeating the empty methods.


class JoinsNoGroup:
    """A core that joins no multicast group (it may still send to one)."""

    def groups(self) -> frozenset[str]:
        return frozenset()


class NoTimerJoinsNoGroup(JoinsNoGroup):
    """A core that keeps no timer and joins no group: it acts only on the datagrams sent to it.
    (One mixin for both rather than two side by side: mypyc compiles single inheritance only.)"""

    def get_timer(self) -> int | None:
        return None

    def handle_timer(self, now: int) -> None:
        """Nothing is ever due."""


class QueuedEvents:
    """A core whose events wait in ``self._events`` (a deque), oldest first."""

    _events: deque[Event]

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def take_events(self) -> tuple[Event, ...]:
        """Every queued event at once, oldest first: what calling ``next_event`` until None
        gives (a driver may call either; the simulator drains a core per delivery this way)."""
        events = self._events
        if not events:
            return ()
        out = tuple(events)
        events.clear()
        return out
