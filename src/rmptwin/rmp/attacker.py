"""An attacker (seed 6): a hostile host that attacks one stripe, as a pure core.

It holds no key. Its mode says what it tries, from ``start_ns`` to ``stop_ns``, one frame
every 1/``rate`` seconds:

- ``unauthorized``: publish on the stripe's global group ``rmp/k`` as a source of its own
  (label = its host name), hoping the primary ring sequences its messages;
- ``replay``: capture what it hears (DATA frames on ``rmp/k``; MoldUDP64 remulticast on its
  region's group) and send it again: DATA frames byte for byte, and captured remulticast
  messages re-numbered to the next sequence number its region has not seen yet, so that an
  old trade would stand in for a new one;
- ``forge``: inside a region, remulticast made-up trade reports (symbol ``FORGED_SYMBOL``)
  under the next sequence number, as if it were the region's R_T (``claim``);
- ``flood``: like ``unauthorized``, at ``rate`` = 10 x the stripe's legitimate rate.

When the experiment seals (``sealed``), forgeries imitate envelopes (the right purpose byte
and public key id, then bytes it cannot make authentic), which is what a clever attacker
who has read ``rmp.seal`` would send; otherwise they carry plain trade reports.

Every frame it sends is logged as an ``ATTACK`` event (detail: mode, group, stripe, and the
sequence number it targets), so the analysis can tell which attack caused what.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import region_group, rmp_group
from rmptwin.core.sansio import Dest, Group
from rmptwin.core.striping import session_name, session_stripe
from rmptwin.core.trade_report import TradeReport
from rmptwin.rmp import wire
from rmptwin.rmp.moldudp64 import MoldDecodeError, MoldPacket, decode_packet
from rmptwin.rmp.seal import OVERHEAD, PURPOSE_REGION, PURPOSE_SOURCE, TAG_BYTES, key_id, key_name

MODES = ("unauthorized", "replay", "forge", "flood")
FORGED_SYMBOL = "FORGED"      # the symbol of every trade report an attacker makes up
CAPTURE_LIMIT = 512           # frames a replaying attacker keeps


@dataclass(frozen=True)
class AttackerConfig:
    name: str
    mode: str                  # one of MODES
    stripe: int
    region: str | None         # replay (remulticast half) and forge: the region it sits in
    rate: float                # frames per second
    start_ns: int
    stop_ns: int
    sealed: bool               # the experiment seals its traffic
    claim: str = ""            # forge: the R_T it pretends to be (for the record)
    message_bytes: int = 64


class AttackerCore:
    """A pure sans-IO core (``rmptwin.core.sansio.Core``) that attacks; see the module docstring."""

    def __init__(self, config: AttackerConfig, rng: random.Random) -> None:
        if config.mode not in MODES:
            raise ValueError(f"unknown attack mode {config.mode!r}; choose {', '.join(MODES)}")
        self.cfg = config
        self.rng = rng
        self.period_ns = max(1, round(1e9 / config.rate))
        self._next = config.start_ns
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self._seq = 0                       # its own source numbering
        self._head: int | None = None       # next region sequence number not yet seen
        self._data: deque[bytes] = deque(maxlen=CAPTURE_LIMIT)
        self._mold: deque[bytes] = deque(maxlen=CAPTURE_LIMIT)
        self._replayed = 0
        self.global_group = rmp_group(config.stripe)
        self.region_group = region_group(config.region, config.stripe) if config.region else None
        self.sent = 0

    # ------------------------------------------------------------------ core API
    def groups(self) -> frozenset[str]:
        mode = self.cfg.mode
        if mode == "replay":
            return frozenset(g for g in (self.global_group, self.region_group) if g)
        if mode == "forge" and self.region_group:
            return frozenset({self.region_group})
        return frozenset()

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if self.cfg.mode not in ("replay", "forge"):
            return
        if data[:1] == bytes([wire.MAGIC]):
            if self.cfg.mode == "replay" and self._is_data(data):
                self._data.append(bytes(data))
            return
        try:
            pkt = decode_packet(data)
        except MoldDecodeError:
            return
        if session_stripe(pkt.session) != self.cfg.stripe or pkt.end_of_session:
            return
        self._head = max(self._head or 0, pkt.next_seq)
        if self.cfg.mode == "replay":
            self._mold.extend(pkt.messages)

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def get_timer(self) -> int | None:
        return self._next if self._next < self.cfg.stop_ns else None

    def handle_timer(self, now: int) -> None:
        while self._next <= now and self._next < self.cfg.stop_ns:
            self._next += self.period_ns
            self._attack()

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    # ------------------------------------------------------------------ attacks
    def _attack(self) -> None:
        mode = self.cfg.mode
        if mode in ("unauthorized", "flood"):
            self._publish()
        elif mode == "replay":
            self._replay()
        elif mode == "forge":
            self._forge()

    def _send(self, data: bytes, group: str, target: int) -> None:
        self._out.append((data, Group(group)))
        self.sent += 1
        self._events.append(Event(Kind.ATTACK, self.cfg.name, self.sent, target, len(data), {
            "mode": self.cfg.mode, "group": group, "stripe": self.cfg.stripe}))

    def _publish(self) -> None:
        self._seq += 1
        payload = self._made_up(PURPOSE_SOURCE, key_name(PURPOSE_SOURCE, self.cfg.name))
        frame = wire.Data(self.cfg.stripe, self.cfg.name, self._seq, 1, payload)
        self._send(wire.encode(frame), self.global_group, -1)

    def _replay(self) -> None:
        if self._data:
            self._send(self._data[self.rng.randrange(len(self._data))], self.global_group, -1)
        if self._mold and self._head is not None and self.region_group:
            old = self._mold[self._replayed % len(self._mold)]
            self._replayed += 1
            packet = MoldPacket(session_name(self.cfg.stripe), self._head, (old,)).encode()
            self._send(packet, self.region_group, self._head)

    def _forge(self) -> None:
        if self._head is None or not self.region_group or self.cfg.region is None:
            return   # nothing heard yet: no sequence number to forge at (region_group: a region)
        payload = self._made_up(PURPOSE_REGION, key_name(PURPOSE_REGION, self.cfg.region))
        packet = MoldPacket(session_name(self.cfg.stripe), self._head, (payload,)).encode()
        self._send(packet, self.region_group, self._head)

    def _made_up(self, purpose: int, name: str) -> bytes:
        """A trade report it invents; sealed-looking when the experiment seals."""
        pad = max(0, self.cfg.message_bytes - (OVERHEAD if self.cfg.sealed else 0))
        trade = TradeReport(FORGED_SYMBOL, 1_000_000 + self.rng.randrange(1_000_000), 100, "ATK",
                            self.sent).encode(pad_to=pad)
        if not self.cfg.sealed:
            return trade
        body = self.rng.randbytes(len(trade) + TAG_BYTES)
        return bytes([purpose]) + key_id(name) + body

    @staticmethod
    def _is_data(data: bytes) -> bool:
        try:
            return isinstance(wire.decode(data), wire.Data)
        except wire.WireError:
            return False
