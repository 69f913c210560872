"""A fair baseline for the matching engine: the same book built on ``sortedcontainers``.

Per side a ``SortedDict`` price -> level, a level an ``OrderedDict`` oid -> remaining qty
(time priority is insertion order; removing any order is O(1)), and an order-id index
oid -> (side, price), so a cancel is one index lookup, one O(1) delete and, when the level
empties, one O(log n) ``SortedDict`` delete. Matching semantics are exactly those of
``rmptwin.venue.orderbook.OrderBook`` (the property tests in tests/venue/test_orderbook.py
check that both produce the same trades and resting orders on random order flows); only
the data structures differ, so ``make bench`` compares implementations, not behaviours.
"""

from __future__ import annotations

from collections import OrderedDict

from sortedcontainers import SortedDict

from rmptwin.venue.orderbook import BUY, FOK, LIMIT, MARKET, BookError, Trade


class SortedContainersBook:
    """Price-time priority book on SortedDict levels with an order-id index."""

    __slots__ = ("symbol", "_sides", "_index")

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol
        self._sides: tuple[SortedDict, SortedDict] = (SortedDict(), SortedDict())  # [BUY], [SELL]
        self._index: dict[int, tuple[int, int]] = {}                                # oid -> (side, price)

    # ------------------------------------------------------------------ queries
    def best(self, side: int) -> int | None:
        levels = self._sides[side]
        if not levels:
            return None
        price: int = levels.peekitem(-1 if side == BUY else 0)[0]
        return price

    def depth(self, side: int) -> list[tuple[int, int]]:
        items = self._sides[side].items()
        ordered = reversed(items) if side == BUY else items
        return [(p, sum(level.values())) for p, level in ordered]

    def resting(self) -> dict[int, tuple[int, int, int]]:
        return {oid: (side, price, self._sides[side][price][oid]) for oid, (side, price) in self._index.items()}

    def __len__(self) -> int:
        return len(self._index)

    # ------------------------------------------------------------------ requests
    def submit(self, oid: int, side: int, qty: int, price: int | None = None, kind: int = LIMIT) -> list[Trade]:
        if oid in self._index:
            raise BookError(f"order {oid} already rests in the book")
        if kind == MARKET:
            price = None
        if kind == FOK and self._fillable(side, qty, price) < qty:
            return []
        trades: list[Trade] = []
        levels = self._sides[1 - side]
        best_at = 0 if side == BUY else -1          # a buy takes the lowest ask, a sell the highest bid
        while qty and levels:
            best, level = levels.peekitem(best_at)
            if price is not None and (best > price if side == BUY else best < price):
                break
            while qty and level:
                maker, left = next(iter(level.items()))
                fill = left if left < qty else qty
                trades.append((oid, maker, best, fill, side))
                qty -= fill
                if fill == left:
                    level.popitem(last=False)
                    del self._index[maker]
                else:
                    level[maker] = left - fill
            if not level:
                del levels[best]
        if qty and kind == LIMIT:
            assert price is not None   # a limit order has its price
            self._rest(oid, side, price, qty)
        return trades

    def cancel(self, oid: int) -> int:
        where = self._index.pop(oid, None)
        if where is None:
            raise BookError(f"order {oid} is not in the book")
        side, price = where
        levels = self._sides[side]
        level = levels[price]
        qty: int = level.pop(oid)
        if not level:
            del levels[price]
        return qty

    def replace(self, oid: int, qty: int, price: int) -> list[Trade]:
        where = self._index.get(oid)
        if where is None:
            raise BookError(f"order {oid} is not in the book")
        side, old_price = where
        level = self._sides[side][old_price]
        if price == old_price and 0 < qty <= level[oid]:
            level[oid] = qty                       # shrinking in place keeps time priority
            return []
        self.cancel(oid)
        return self.submit(oid, side, qty, price, LIMIT) if qty > 0 else []

    # ------------------------------------------------------------------ internals
    def _rest(self, oid: int, side: int, price: int, qty: int) -> None:
        levels = self._sides[side]
        level = levels.get(price)
        if level is None:
            level = levels[price] = OrderedDict()
        level[oid] = qty
        self._index[oid] = (side, price)

    def _fillable(self, side: int, qty: int, price: int | None) -> int:
        levels = self._sides[1 - side]
        prices = levels.irange(maximum=price) if side == BUY else levels.irange(minimum=price, reverse=True)
        total = 0
        for p in prices:
            total += sum(levels[p].values())
            if total >= qty:
                break
        return total

