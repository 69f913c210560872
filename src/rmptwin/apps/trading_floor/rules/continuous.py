"""Continuous price-time double auction ("some floors post buys and sells"), one
``venue.orderbook.OrderBook`` per symbol.

A trade is made at the resting order's price (the seed's open question "at A, B, or in
between": here the price the book already showed). Limit orders rest what they do not
fill; market orders fill what they can and drop the rest. A stop order waits off the book
until the symbol's last trade price reaches its stop (buy: last >= stop, sell: last <=
stop; at entry too, if the last price already does); it then enters as a market order (a
limit order when it has a price). Several stops triggered by one trade enter in the order
they were entered, and their own trades may trigger more.
"""

from __future__ import annotations

import hashlib
import struct

from rmptwin.apps.trading_floor.messages import Control
from rmptwin.apps.trading_floor.rules import DEFAULT_PARAMS, Entered, Fill, RuleParams
from rmptwin.venue.orderbook import BUY, LIMIT, MARKET, SELL, OrderBook


class ContinuousAuction:
    name = "continuous"

    def __init__(self, params: RuleParams = DEFAULT_PARAMS) -> None:
        self.books: dict[str, OrderBook] = {}
        self.last: dict[str, int] = {}
        self.stops: dict[str, list[Entered]] = {}
        self.who: dict[int, str] = {}
        self.rejected = 0

    def on_order(self, e: Entered) -> list[Fill]:
        o = e.order
        self.who[e.oid] = e.who
        if o.kind == "stop" and not self._triggered(e):
            self.stops.setdefault(o.symbol, []).append(e)
            return []
        return self._cascade(o.symbol, self._execute(e))

    def on_control(self, c: Control, token: int) -> list[Fill]:
        self.rejected += 1      # a continuous floor has no clock
        return []

    def controls_due(self, token: int) -> list[Control]:
        return []

    # ---------------------------------------------------------------- internals
    def _triggered(self, e: Entered) -> bool:
        last = self.last.get(e.order.symbol)
        if last is None:
            return False
        return last >= e.order.stop if e.order.side == "B" else last <= e.order.stop

    def _execute(self, e: Entered) -> list[Fill]:
        o = e.order
        book = self.books.get(o.symbol)
        if book is None:
            book = self.books[o.symbol] = OrderBook(o.symbol)
        side = BUY if o.side == "B" else SELL
        limit = o.kind == "limit" or (o.kind == "stop" and o.price > 0)
        raw = book.submit(e.oid, side, o.qty, o.price if limit else None, LIMIT if limit else MARKET)
        fills = []
        for taker, maker, price, qty, taker_side in raw:
            buy, sell = (taker, maker) if taker_side == BUY else (maker, taker)
            fills.append(Fill(o.symbol, price, qty, buy, sell, self.who[buy], self.who[sell]))
        if fills:
            self.last[o.symbol] = fills[-1].price
        return fills

    def _cascade(self, symbol: str, fills: list[Fill]) -> list[Fill]:
        """Enter the stops the new last price triggers, earliest entered first, until none is."""
        out = list(fills)
        while fills:
            waiting = self.stops.get(symbol, [])
            due = next((s for s in waiting if self._triggered(s)), None)
            if due is None:
                break
            waiting.remove(due)
            fills = self._execute(due)
            out += fills
        return out

    def snapshot(self) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for symbol in sorted(self.books):
            h.update(self.books[symbol].snapshot())
            h.update(struct.pack("!q", self.last.get(symbol, -1)))
            for s in self.stops.get(symbol, []):
                h.update(struct.pack("!qq", s.oid, s.order.stop))
        return h.digest()
