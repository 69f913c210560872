"""A CAS proposal's invocation is on disk before its datagram leaves (node.driver.WRITE_AHEAD).

Measured emulated (CI, ev_kill9): an EV's proposal made in answer to a DECIDE went out before
its CAS_INVOKE was flushed; the EV was killed 25 ms later, the proposal won at etcd, and the
history showed 27 positions nobody had asked for. Both ways a datagram reaches a core are
checked here: a socket read (``_readable``) and the timer (``after``)."""

from __future__ import annotations

import socket

from rmptwin.core.events import Event, Kind
from rmptwin.node.driver import NodeDriver


class _Log:
    def __init__(self, trail: list) -> None:
        self.trail = trail

    def add(self, t, node, role, ev) -> None:
        self.trail.append(("log", ev.kind))

    def flush(self) -> None:
        self.trail.append(("flush",))


class _ProposingCore:
    """Answers every datagram, and every timer, with a proposal: an event, then a datagram."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._out: list = []

    def _propose(self) -> None:
        self._events.append(Event(Kind.CAS_INVOKE, gseq=510, detail={"keys": [[1, 243]]}))
        self._out.append((b"PROPOSE", "seq1"))

    def receive_datagram(self, data, src, now) -> None:
        self._propose()

    def handle_timer(self, now) -> None:
        self._propose()

    def groups(self):
        return frozenset()

    def datagrams_to_send(self, now):
        out, self._out = self._out, []
        return out

    def next_event(self):
        return self._events.pop(0) if self._events else None

    def get_timer(self):
        return None


def _driver(trail: list) -> NodeDriver:
    d = NodeDriver(_ProposingCore(), "ev1", "venue", {"ev1": "127.0.0.1", "seq1": "127.0.0.2"}, 0, _Log(trail))
    d._send = lambda data, dest: trail.append(("send", data))
    return d


def test_a_proposal_made_on_a_received_datagram_is_flushed_before_it_is_sent():
    trail: list = []
    d = _driver(trail)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.bind(("127.0.0.2", 0))
        tx.sendto(b"DECIDE", rx.getsockname())
        d._readable(rx)
    finally:
        rx.close()
        tx.close()
    assert trail == [("log", Kind.CAS_INVOKE), ("flush",), ("send", b"PROPOSE")]


def test_a_retry_on_the_timer_is_flushed_before_it_is_sent():
    trail: list = []
    d = _driver(trail)
    d.core.handle_timer(0)
    d.after(0)
    assert trail == [("log", Kind.CAS_INVOKE), ("flush",), ("send", b"PROPOSE")]
