"""The same token-ring workload on our scheduler and on SimPy: the simulator's baseline.

``members`` ring members pass a token round the ring (one hop every ``ring_delay_ns``);
``sources`` sources each publish ``rate`` messages/s for ``seconds``; each message reaches
every member over its own link delay (one event per member) and every member acknowledges
it to its source over the same delay (one event per ack). Both runs do the same small
bookkeeping per event (``RingState``) and process exactly ``expected_events`` events, in
the same order; only the event machinery differs: our heap of tuples
(``rmptwin.sim.scheduler.Scheduler``) against SimPy's environment. On SimPy the sources and
the token are processes (``yield env.timeout``); deliveries and acks are timeouts with a
callback, SimPy's cheapest delayed event (a process per packet would cost it more), so
the ratio is not flattering to us. ``run_heapq`` is the floor both are held to: the same
events from a bare ``heapq`` loop with the dispatch written inline.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from rmptwin.sim.scheduler import Scheduler

if TYPE_CHECKING:
    import simpy


@dataclass(frozen=True)
class RingWorkload:
    members: int = 8
    sources: int = 3
    rate: float = 1000.0          # messages/s per source
    seconds: float = 2.0
    delay_ns: int = 5_000_000     # link delay to member 0; member m adds m * step_ns
    step_ns: int = 250_000
    ring_delay_ns: int = 2_000_000

    @property
    def per_source(self) -> int:
        return int(self.rate * self.seconds)

    @property
    def interval_ns(self) -> int:
        return round(1e9 / self.rate)

    @property
    def end_ns(self) -> int:
        return round(self.seconds * 1e9)

    def link_ns(self, member: int) -> int:
        return self.delay_ns + member * self.step_ns

    def expected_events(self) -> int:
        """Publications + deliveries + acks + token hops."""
        msgs = self.sources * self.per_source
        return msgs * (1 + 2 * self.members) + self.end_ns // self.ring_delay_ns + 1


class RingState:
    """What both runs compute: per member messages received and not yet ordered, per source
    acks, messages ordered by the token; and the events processed."""

    def __init__(self, w: RingWorkload) -> None:
        self.received = [0] * w.members
        self.pending = [0] * w.members
        self.acked = [0] * w.sources
        self.ordered = 0
        self.token_at = 0
        self.events = 0

    def on_publish(self) -> None:
        self.events += 1

    def on_data(self, member: int) -> None:
        self.events += 1
        self.received[member] += 1
        self.pending[member] += 1

    def on_ack(self, source: int) -> None:
        self.events += 1
        self.acked[source] += 1

    def on_token(self) -> None:
        self.events += 1
        m = self.token_at
        self.ordered += self.pending[m]
        self.pending[m] = 0
        self.token_at = (m + 1) % len(self.pending)

    def outcome(self) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        return self.events, self.ordered, tuple(self.received), tuple(self.acked)


def run_ours(w: RingWorkload) -> RingState:
    s, st = Scheduler(), RingState(w)
    at = s.at
    links = [w.link_ns(m) for m in range(w.members)]

    def publish(t: int, src: int, k: int) -> None:
        st.on_publish()
        for m, d in enumerate(links):
            at(t + d, data, m, src)
        if k + 1 < w.per_source:
            at(t + w.interval_ns, publish, src, k + 1)

    def data(t: int, m: int, src: int) -> None:
        st.on_data(m)
        at(t + links[m], ack, src)

    def ack(t: int, src: int, _unused: object) -> None:
        st.on_ack(src)

    def token(t: int, _a: object, _b: object) -> None:
        st.on_token()
        if t + w.ring_delay_ns <= w.end_ns:
            at(t + w.ring_delay_ns, token)

    for src in range(w.sources):
        at(src * w.interval_ns // w.sources, publish, src, 0)
    at(0, token)
    s.run_until(1 << 62)
    return st


def run_heapq(w: RingWorkload) -> RingState:
    """The scheduler's floor: the same events in the same order from a bare ``heapq`` of
    (time, tie, kind, a, b) tuples dispatched inline (no callables, no scheduler object)."""
    import heapq

    st, links = RingState(w), [w.link_ns(m) for m in range(w.members)]
    heap: list[tuple[int, int, int, int, int]] = []
    push, pop, n = heapq.heappush, heapq.heappop, 0
    PUBLISH, DATA, ACK, TOKEN = range(4)
    for src in range(w.sources):
        n += 1
        push(heap, (src * w.interval_ns // w.sources, n, PUBLISH, src, 0))
    n += 1
    push(heap, (0, n, TOKEN, 0, 0))
    while heap:
        t, _, kind, a, b = pop(heap)
        if kind == DATA:
            st.on_data(a)
            n += 1
            push(heap, (t + links[a], n, ACK, b, 0))
        elif kind == ACK:
            st.on_ack(a)
        elif kind == PUBLISH:
            st.on_publish()
            for m, d in enumerate(links):
                n += 1
                push(heap, (t + d, n, DATA, m, a))
            if b + 1 < w.per_source:
                n += 1
                push(heap, (t + w.interval_ns, n, PUBLISH, a, b + 1))
        else:
            st.on_token()
            if t + w.ring_delay_ns <= w.end_ns:
                n += 1
                push(heap, (t + w.ring_delay_ns, n, TOKEN, 0, 0))
    return st


def simpy_available() -> bool:
    return importlib.util.find_spec("simpy") is not None


def run_simpy(w: RingWorkload) -> RingState:
    import simpy

    env, st = simpy.Environment(), RingState(w)
    links = [w.link_ns(m) for m in range(w.members)]

    def on_ack(ev: simpy.Event) -> None:
        st.on_ack(cast(int, ev.value))   # the timeout's value: the source

    def on_data(ev: simpy.Event) -> None:
        m, src = cast("tuple[int, int]", ev.value)   # the timeout's value: (member, source)
        st.on_data(m)
        env.timeout(links[m], src).callbacks.append(on_ack)

    def source(src: int) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(src * w.interval_ns // w.sources)
        for k in range(w.per_source):
            st.on_publish()
            for m, d in enumerate(links):
                env.timeout(d, (m, src)).callbacks.append(on_data)
            if k + 1 < w.per_source:
                yield env.timeout(w.interval_ns)

    def token() -> Generator[simpy.Event, Any, None]:
        while True:
            st.on_token()
            if env.now + w.ring_delay_ns > w.end_ns:
                return
            yield env.timeout(w.ring_delay_ns)

    for src in range(w.sources):
        env.process(source(src))
    env.process(token())
    env.run()
    return st
