"""Descending-clock auction (the Amsterdam flower auction, seed 7.3).

A sell order opens a lot: its quantity, its price the reserve; the clock starts
``dutch_start`` above the reserve. Each token pass the token site sources a ``tick`` that
lowers the clock by ``dutch_step`` (never below the reserve). A buy order for the symbol is
a bid on the earliest open lot of that symbol: "I take it at any clock price up to my
limit". The lot sells at the first step at which a bid accepts (its limit >= the clock),
at the clock's price, to the earliest such bid in the sequence; a bid entered while the
clock is already at or below its limit buys at once at the clock's price. A lot whose
clock reached its reserve with no bid stays open at the reserve.
"""

from __future__ import annotations

import hashlib
import struct

from rmptwin.apps.trading_floor.messages import Control
from rmptwin.apps.trading_floor.rules import DEFAULT_PARAMS, Entered, Fill, Lot, RuleParams


class DutchAuction:
    name = "dutch"

    def __init__(self, params: RuleParams = DEFAULT_PARAMS) -> None:
        self.start = params.dutch_start
        self.step = params.dutch_step
        self.open: dict[int, Lot] = {}
        self.sold = 0
        self.rejected = 0

    def clock_at(self, lot: Lot, step: int) -> int:
        return max(lot.reserve, lot.reserve + self.start - step * self.step)

    def on_order(self, e: Entered) -> list[Fill]:
        o = e.order
        if o.side == "S":
            lot = Lot(e.oid, o.symbol, o.qty, o.price, e.who, e.token)
            lot.clock = self.clock_at(lot, 0)
            self.open[e.oid] = lot
            return []
        open_lot = next((lt for lt in self.open.values() if lt.symbol == o.symbol), None)
        if open_lot is None or o.kind != "limit":
            self.rejected += 1
            return []
        open_lot.bids.append((o.price, e.oid, e.who))
        return self._sell(open_lot)

    def on_control(self, c: Control, token: int) -> list[Fill]:
        lot = self.open.get(c.lot)
        if c.what != "tick" or lot is None or c.step != lot.step + 1 or lot.clock <= lot.reserve:
            return []           # stale or repeated tick (two token sites ticked the same step)
        lot.step = c.step
        lot.clock = self.clock_at(lot, c.step)
        return self._sell(lot)

    def _sell(self, lot: Lot) -> list[Fill]:
        taker = next((b for b in lot.bids if b[0] >= lot.clock), None)   # bids are in sequence order
        if taker is None:
            return []
        del self.open[lot.lot]
        self.sold += 1
        _, oid, who = taker
        return [Fill(lot.symbol, lot.clock, lot.qty, oid, lot.lot, who, lot.seller)]

    def controls_due(self, token: int) -> list[Control]:
        return [Control("tick", lt.lot, lt.step + 1) for lt in self.open.values() if lt.clock > lt.reserve]

    def snapshot(self) -> bytes:
        h = hashlib.blake2b(struct.pack("!q", self.sold), digest_size=16)
        for lt in self.open.values():
            h.update(struct.pack("!qqqq", lt.lot, lt.clock, lt.step, len(lt.bids)))
        return h.digest()
