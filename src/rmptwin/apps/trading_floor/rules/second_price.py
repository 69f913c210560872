"""Single-round sealed high-bid auction (seed 7.3: "the highest bidder gets to buy the stock at
the price offered by the second highest bidder").

A sell order opens a lot: its quantity, its price the reserve. Buy orders for the symbol
are bids on the earliest open lot of that symbol (a bid with no lot open is rejected). The
round ends where a ``close`` control for the lot stands in the sequence: the token site
sources it once it holds a token ``round_passes`` passes after the one that placed the
sell order. Bids below the reserve do not count. The highest bid wins (the earliest of
equal bids); it pays the second-highest counting bid, or the reserve when it is alone.
No counting bid: the lot closes unsold.
"""

from __future__ import annotations

import hashlib
import struct

from rmptwin.apps.trading_floor.messages import Control
from rmptwin.apps.trading_floor.rules import DEFAULT_PARAMS, Entered, Fill, Lot, RuleParams


def second_price_winner(lot: Lot) -> tuple[tuple[int, int, str], int] | None:
    """(winning bid, price it pays) of a closed lot, or None when no bid reaches the reserve."""
    counting = sorted((b for b in lot.bids if b[0] >= lot.reserve), key=lambda b: (-b[0], b[1]))
    if not counting:
        return None
    price = counting[1][0] if len(counting) > 1 else lot.reserve
    return counting[0], price


class SecondPriceAuction:
    name = "second_price"

    def __init__(self, params: RuleParams = DEFAULT_PARAMS) -> None:
        self.round_passes = params.round_passes
        self.open: dict[int, Lot] = {}          # lot id -> lot, in opening order
        self.closed = 0
        self.rejected = 0

    def on_order(self, e: Entered) -> list[Fill]:
        o = e.order
        if o.side == "S":
            self.open[e.oid] = Lot(e.oid, o.symbol, o.qty, o.price, e.who, e.token)
            return []
        lot = next((lt for lt in self.open.values() if lt.symbol == o.symbol), None)
        if lot is None or o.kind != "limit":
            self.rejected += 1
            return []
        lot.bids.append((o.price, e.oid, e.who))
        return []

    def on_control(self, c: Control, token: int) -> list[Fill]:
        lot = self.open.get(c.lot)
        if c.what != "close" or lot is None:
            return []           # a repeated close, or a control of another rule
        del self.open[c.lot]
        self.closed += 1
        won = second_price_winner(lot)
        if won is None:
            return []
        (_, oid, who), price = won
        return [Fill(lot.symbol, price, lot.qty, oid, lot.lot, who, lot.seller)]

    def controls_due(self, token: int) -> list[Control]:
        return [Control("close", lt.lot) for lt in self.open.values() if token >= lt.opened_token + self.round_passes]

    def snapshot(self) -> bytes:
        h = hashlib.blake2b(struct.pack("!q", self.closed), digest_size=16)
        for lt in self.open.values():
            h.update(struct.pack("!qqq", lt.lot, lt.reserve, len(lt.bids)))
            for price, oid, _ in lt.bids:
                h.update(struct.pack("!qq", price, oid))
        return h.digest()
