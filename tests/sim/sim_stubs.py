"""Small stand-in cores for simulator tests: they only send, receive and log, so a test
checks the network and the driver, not a protocol."""

from __future__ import annotations

import struct
from collections import deque

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Group, Unicast
from rmptwin.model import Experiment, LoadedExperiment, Topology

# A MoldUDP64-shaped datagram (session, seq, count=1, one 8-byte message: the sender's local
# send time), so the simulator's drop log names each packet by its number (gseq column).
_HDR = struct.Struct("!10sQHHq")
SESSION = b"stub".ljust(10)


class StubCore:
    """Joins ``groups``; ``publish`` sends a numbered datagram to ``dest``; every arrival is a RECV
    event (src_seq = the datagram's number, detail.sent = sender's local clock at sending,
    detail.now = receiver's local clock at arrival). ``period_ns``: also send on a timer."""

    def __init__(self, name: str, groups=(), dest=None, period_ns: int | None = None, size: int = 0,
                 recovering: bool = False) -> None:
        self.name = name
        self._groups = frozenset(groups)
        self.dest = dest
        self.period_ns = period_ns
        self.size = size
        self.seq = 0
        self.out: list = []
        self.events: deque = deque()
        self.timer = period_ns if period_ns else None
        self.recovering = recovering
        self.timer_calls: list[int] = []

    def groups(self) -> frozenset[str]:
        return self._groups

    def set_groups(self, groups) -> None:
        self._groups = frozenset(groups)

    def _send(self, now: int) -> None:
        data = _HDR.pack(SESSION, self.seq, 1, 8, now).ljust(max(self.size, _HDR.size), b"\0")
        self.out.append((data, self.dest))
        self.events.append(Event(Kind.SEND, src=self.name, src_seq=self.seq, bytes=len(data)))
        self.seq += 1

    def publish(self, stripe: int, payload: bytes, now: int) -> None:
        if self.dest is not None:
            self._send(now)

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        _, seq, _, _, sent = _HDR.unpack_from(data)
        self.events.append(Event(Kind.RECV, src=src, src_seq=seq, bytes=len(data),
                                 detail={"sent": sent, "now": now}))

    def datagrams_to_send(self, now: int):
        out, self.out = self.out, []
        return out

    def get_timer(self):
        return self.timer

    def handle_timer(self, now: int) -> None:
        self.timer_calls.append(now)
        if self.dest is not None:
            self._send(now)
        self.timer = self.timer + self.period_ns if self.period_ns else None

    def next_event(self):
        return self.events.popleft() if self.events else None


def loaded(topo: dict, **exp) -> LoadedExperiment:
    """A LoadedExperiment from plain dicts (no files)."""
    t = Topology.model_validate(topo)
    e = Experiment.model_validate({"name": "t", "topology": "inline", **exp})
    return LoadedExperiment(experiment=e, topology=t, path="/nonexistent/inline.yaml")


def builder(make):
    """A ``build`` function for ``simulate`` from ``make(host, recovering) -> core``."""
    def build(host, loaded, rng, *, recovering=False):
        return make(host, recovering)
    return build


def line_topo(n_switches: int = 2, delay_ms: float = 1.0, loss: float = 0.0, hosts=None, **link) -> dict:
    sw = [f"s{i}" for i in range(n_switches)]
    links = [{"a": sw[i], "b": sw[i + 1], "delay_ms": delay_ms, "loss": loss, **link} for i in range(n_switches - 1)]
    return {"name": "line", "switches": sw, "links": links, "hosts": hosts or []}


def recv_rows(result, node: str | None = None):
    df = result.events.to_pandas()
    df = df[df.kind == Kind.RECV]
    return df if node is None else df[df.node == node]


def build_stub(host, loaded, rng, *, recovering=False):
    """A factories.FACTORIES stand-in: sources publish on the stripe group, everyone else listens."""
    from rmptwin.core.groups import rmp_group

    if host.role == "source":
        return StubCore(host.name, dest=Group(rmp_group(0)), recovering=recovering)
    return StubCore(host.name, groups=[rmp_group(0)], recovering=recovering)


__all__ = ["StubCore", "Group", "Unicast", "loaded", "builder", "line_topo", "recv_rows"]
