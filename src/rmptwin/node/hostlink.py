"""A host's access link shaped inside its own node process, instead of by a relay process.

On the relay backend every impaired link gets a relay: a Python process in a namespace of its
own that reads each frame from one veth and writes it to the other when the link model says.
An access link that only delays (no loss, no jitter) needs no process of its own for that: the
node that owns the host applies the same ``linkmodel.LinkDirection`` to what it sends (host to
switch) and to what it receives (switch to host). Measured on the emulated quickstart at 1,000
msg/s: 61 % of all relayed frames crossed lossless access links, at 36-52 us of relay CPU each,
and they were what kept the Docker-host run from its schedule.

Same model, same seed string (``linkmodel.stream_seed`` with the link name the relay would use,
``<host>-<switch>``), same counts and drop records as a relay: ``counts()`` has the relay's
``counts.json`` layout and ``drops()`` the fields of ``emulation.droplog.DroppedFrame``, so the
runner merges both into the run's ground truth unchanged. What differs, and is said where the
docs name the backend (docs/architecture.md): a datagram is delayed on the node's event loop, whose timer wakes up
to the selector's 1 ms rounding late (a relay waits with microsecond resolution), and the host's
packet capture sees a sent datagram after its access delay and a received one before it.

Pure bookkeeping: the driver passes the time in and does the sending and delivering.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rmptwin.core.linkmodel import REASONS, WIRE_HEADER_BYTES, LinkConfig, LinkDirection, stream_seed

if TYPE_CHECKING:
    from rmptwin.model import LinkParams

Peer = TypeVar("Peer")   # a datagram's destination address (up) or its source host's name (down)


def access_link_name(host: str, switch: str) -> str:
    """The name a relay gives a host's access link (``emulation.topo``), also in drop records."""
    return f"{host}-{switch}"


class _Line(Generic[Peer]):
    """One direction: its link model, the datagrams on their way (FIFO: the model never
    reorders) and the relay's counters."""

    __slots__ = ("model", "items", "packets", "dropped")

    def __init__(self, params: LinkParams, seed: int, link: str, frm: str, to: str) -> None:
        self.model = LinkDirection(LinkConfig.from_spec(params), stream_seed(seed, link, frm, to))
        self.items: deque[tuple[int, bytes, Peer]] = deque()
        self.packets = 0
        self.dropped = [0, 0, 0]

    def offer(self, now: int, data: bytes, peer: Peer) -> int:
        """Queue ``data`` (``peer``: its destination or source); a negative drop code if dropped."""
        self.packets += 1
        leave = self.model.offer(now, len(data) + WIRE_HEADER_BYTES)
        if leave < 0:
            self.dropped[-leave - 1] += 1
            return leave
        self.items.append((leave, data, peer))
        return leave

    def due(self, now: int) -> list[tuple[int, bytes, Peer]]:
        """The datagrams whose time has come, in order."""
        items = self.items
        out: list[tuple[int, bytes, Peer]] = []
        while items and items[0][0] <= now:
            out.append(items.popleft())
        return out


class HostLink:
    """Both directions of one host's access link: ``up`` (host to switch) and ``down``."""

    def __init__(self, host: str, switch: str, params: LinkParams, seed: int) -> None:
        self.link = access_link_name(host, switch)
        self.host, self.switch = host, switch
        self.up: _Line[tuple[str, int]] = _Line(params, seed, self.link, host, switch)
        self.down: _Line[str] = _Line(params, seed, self.link, switch, host)
        self.dropped_frames: list[dict[str, Any]] = []

    def send(self, now: int, data: bytes, addr: tuple[str, int], own_ip: str) -> None:
        code = self.up.offer(now, data, addr)
        if code < 0:
            self._record_drop(now, self.host, self.switch, code, own_ip, addr, data, self.up.model.last_copy)

    def receive(self, now: int, data: bytes, src: str, src_ip: str, own_ip: str, port: int) -> None:
        code = self.down.offer(now, data, src)
        if code < 0:
            self._record_drop(now, self.switch, self.host, code, src_ip, (own_ip, port), data, self.down.model.last_copy)

    def next_due(self) -> int | None:
        heads = [line.items[0][0] for line in (self.up, self.down) if line.items]
        return min(heads) if heads else None

    def _record_drop(self, now: int, frm: str, to: str, code: int, src_ip: str, addr: tuple[str, int], data: bytes,
                     copy: int) -> None:
        self.dropped_frames.append({"t_ns": now, "link": self.link, "from_node": frm, "to_node": to,
                                    "reason": REASONS[-code - 1], "src_ip": src_ip, "dst_ip": addr[0],
                                    "dst_port": addr[1], "payload": data.hex(), "copy": copy})

    def counts(self) -> dict[str, Any]:
        """The relay's ``counts.json`` layout (``emulation.droplog.counts_table`` reads it)."""
        def direction(line: _Line[Any]) -> dict[str, int]:
            return {"packets": line.packets, **{r: line.dropped[i] for i, r in enumerate(REASONS)}}
        return {"link": self.link, "a": self.host, "b": self.switch,
                "directions": {"ab": direction(self.up), "ba": direction(self.down)}}
