"""Trading client: Poisson order flow to one gateway (the load of venue experiments).

Half buys, half sells around a fixed mid price, overlapping by a few ticks so some
orders trade; a mix of limit, market, IOC and FOK orders, replaces, and cancels that
keep each client's resting orders bounded (so books and checkpoints stay small).
A ``malformed_fraction`` of orders is deliberately bad (negative size, unknown symbol,
off-tick price) to exercise the gateway's validation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmptwin.core.events import Event
from rmptwin.core.sansio import Dest, JoinsNoGroup, Unicast
from rmptwin.venue import wire
from rmptwin.venue.orderbook import BUY, FOK, IOC, LIMIT, MARKET, SELL
from rmptwin.venue.wire import Order

if TYPE_CHECKING:
    import random

MID_PRICE = 1_000_000      # $100.00 in ticker units (price x 10,000)
MAX_RESTING = 40           # per client: beyond this, cancel the oldest instead of adding


@dataclass(frozen=True)
class ClientConfig:
    index: int                    # this client's number (order ids are unique per client)
    gateway: str                  # the gateway it sends its orders to
    symbols: tuple[str, ...]
    rate: float                   # orders per second (Poisson)
    start_ns: int
    stop_ns: int
    tick: int = 100
    malformed_fraction: float = 0.0


class ClientCore(JoinsNoGroup):
    def __init__(self, config: ClientConfig, rng: random.Random) -> None:
        self.config = config
        self.index = config.index
        self.gateway = config.gateway
        self.symbols = list(config.symbols)
        self.rate = config.rate
        self.rng = rng
        self.stop_ns = config.stop_ns
        self.tick = config.tick
        self.malformed_fraction = config.malformed_fraction
        self.seq = 0
        self._next = config.start_ns + (int(rng.expovariate(self.rate) * 1e9) if self.rate > 0 else 0)
        self._resting: deque[tuple[int, str, int]] = deque()   # (oid, symbol, side)
        self._out: list[tuple[bytes, Dest]] = []
        self.acked = self.rejected = self.done = 0
        self.malformed = 0   # answers that did not decode (dropped)

    def _oid(self) -> int:
        return ((self.index + 1) << 40) | self.seq

    def make_order(self) -> Order:
        r = self.rng
        self.seq += 1
        if r.random() < self.malformed_fraction:
            bad = r.randrange(3)
            sym = r.choice(self.symbols)
            if bad == 0:
                return Order(wire.NEW, LIMIT, BUY, sym, self._oid(), -r.randint(1, 100), MID_PRICE)
            if bad == 1:
                return Order(wire.NEW, LIMIT, SELL, "ZZZZ", self._oid(), 10, MID_PRICE)
            return Order(wire.NEW, LIMIT, BUY, sym, self._oid(), 10, MID_PRICE + self.tick // 2 + 1)
        if len(self._resting) >= MAX_RESTING:
            oid, sym, side = self._resting.popleft()
            return Order(wire.CANCEL, LIMIT, side, sym, oid, 0, 0)
        x = r.random()
        sym = r.choice(self.symbols)
        side = r.randrange(2)
        qty = r.randint(1, 10) * 100
        off = r.randint(-10, 2) if side == BUY else r.randint(-2, 10)
        price = MID_PRICE + off * self.tick
        if x < 0.08 and self._resting:
            oid, sym, side = self._resting[r.randrange(len(self._resting))]
            off = r.randint(-10, 2) if side == BUY else r.randint(-2, 10)
            return Order(wire.REPLACE, LIMIT, side, sym, oid, qty, MID_PRICE + off * self.tick)
        kind = LIMIT if x < 0.85 else MARKET if x < 0.90 else IOC if x < 0.96 else FOK
        oid = self._oid()
        if kind == LIMIT:
            self._resting.append((oid, sym, side))
        return Order(wire.NEW, kind, side, sym, oid, qty, 0 if kind == MARKET else price)

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        try:
            ftype, f = wire.decode(data)
        except wire.VenueWireError:
            self.malformed += 1
            return
        if ftype == wire.T_ORDER_ACK:
            if f[1] == wire.ACCEPTED:
                self.acked += 1
            else:
                self.rejected += 1
        elif ftype == wire.T_DONE:
            self.done += 1

    def get_timer(self) -> int | None:
        return self._next if self._next < self.stop_ns and self.rate > 0 else None

    def handle_timer(self, now: int) -> None:
        due = self.get_timer()
        if due is not None and now < due:
            now = due   # fired a little early by a real event loop
        while self._next <= now and self._next < self.stop_ns:
            self._out.append((wire.order_frame(self.seq + 1, now, self.make_order()), Unicast(self.gateway)))
            self._next += max(1, int(self.rng.expovariate(self.rate) * 1e9))

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def next_event(self) -> Event | None:
        return None
