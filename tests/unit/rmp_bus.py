"""A tiny in-test network for driving RMP cores directly: every datagram takes ``delay_ns``,
a ``drop(data, src, dst)`` predicate loses chosen ones, timers fire in time order."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from rmptwin.core.sansio import Unicast
from rmptwin.core.timing import Timing
from rmptwin.model import Protocol
from rmptwin.model.queries import timing_from_protocol
from rmptwin.rmp import wire
from rmptwin.rmp.primary import PrimaryCore


class Bus:
    def __init__(self, cores: dict[str, object], delay_ns: int = 1_000_000,
                 drop: Callable[[bytes, str, str], bool] | None = None) -> None:
        self.cores = cores
        self.delay = delay_ns
        self.drop = drop or (lambda data, src, dst: False)
        self.now = 0
        self._q: list = []
        self._n = 0
        self.events: list[tuple[int, str, object]] = []
        self.sent: list[tuple[int, str, str, object]] = []   # (t, from, to, frame)
        self.down: set[str] = set()
        for name in cores:
            self._collect(name)

    def _push(self, t: int, kind: str, *args) -> None:
        self._n += 1
        heapq.heappush(self._q, (t, self._n, kind, args))

    def _collect(self, name: str) -> None:
        core = self.cores[name]
        for data, dest in core.datagrams_to_send(self.now):
            if isinstance(dest, Unicast):
                targets = [dest.node] if dest.node in self.cores else []
            else:
                targets = [n for n, c in self.cores.items() if n != name and dest.name in c.groups()]
            for t in targets:
                try:
                    f = wire.decode(data)
                except wire.WireError:
                    f = data
                self.sent.append((self.now, name, t, f))
                if not self.drop(data, name, t):
                    self._push(self.now + self.delay, "rx", t, data, name)
        ev = core.next_event()
        while ev is not None:
            self.events.append((self.now, name, ev))
            ev = core.next_event()
        deadline = core.get_timer()
        if deadline is not None:
            self._push(max(deadline, self.now), "timer", name, deadline)

    def inject(self, name: str, data: bytes, src: str) -> None:
        """Deliver ``data`` to ``name`` now."""
        self.cores[name].receive_datagram(data, src, self.now)
        self._collect(name)

    def call(self, name: str, fn: Callable[[object], object]):
        out = fn(self.cores[name])
        self._collect(name)
        return out

    def run_until(self, t_end: int) -> None:
        while self._q and self._q[0][0] <= t_end:
            t, _, kind, args = heapq.heappop(self._q)
            self.now = t
            if kind == "rx":
                name, data, src = args
                if name in self.down:
                    continue
                self.cores[name].receive_datagram(data, src, t)
                self._collect(name)
            else:
                name, deadline = args
                core = self.cores[name]
                if name in self.down or core.get_timer() != deadline:
                    continue
                core.handle_timer(t)
                self._collect(name)
        self.now = t_end

    def kinds(self, kind: str, node: str | None = None) -> list:
        return [ev for _, n, ev in self.events if ev.kind == kind and (node is None or n == node)]

    def frames(self, frm: str | None = None, to: str | None = None, typ=None) -> list:
        return [f for _, a, b, f in self.sent if (frm is None or a == frm) and (to is None or b == to)
                and (typ is None or isinstance(f, typ))]


# ----------------------------------------------------------------------------- feeding one core by hand

MS = 1_000_000


def timing(**kw) -> Timing:
    base = {"token_mode": "event_driven", "dn_ms": 10, "k_r": 3, "p_ms": 1, "null_token_ms": 50}
    base.update(kw)
    return timing_from_protocol(Protocol(**base))


def member(name="rp2", ring=("rp1", "rp2", "rp3"), **kw) -> PrimaryCore:
    return PrimaryCore(name, {0: list(ring)}, timing(**kw), ["xr1"])


def data(seq, src="s1", acked_below=1, payload=b"p"):
    return wire.encode(wire.Data(0, src, seq, acked_below, payload + bytes([seq % 256])))


def ack(t, msgs, first_gseq, site="rp1", nxt="rp3", ts=0, epoch=1):
    return wire.encode(wire.Ack(0, epoch, t, first_gseq, ts, site, nxt, tuple(msgs)))


def drain(core):
    evs = []
    ev = core.next_event()
    while ev is not None:
        evs.append(ev)
        ev = core.next_event()
    return evs


def sent(core, now=0):
    return [(wire.decode(d), dest) for d, dest in core.datagrams_to_send(now)]


def fire(core, until):
    """Fire every timer due up to ``until`` (in order)."""
    while core.get_timer() is not None and core.get_timer() <= until:
        core.handle_timer(core.get_timer())


