"""Order book and matching engine of one symbol: price-time priority, integer tick prices.

Per side a dict price -> level ``[total_qty, deque of orders]`` plus a heap of prices
(bids negated) with lazy deletion: a level that empties is removed from the dict at
once, its heap entry when it next reaches the top. An order is a small list
``[oid, qty, price, side]``; a cancelled order keeps its deque slot with qty 0 and is
skipped when it reaches the front, so cancel is O(1).

Order types: LIMIT rests what it does not fill; MARKET fills at any price and drops the
rest; IOC fills up to its limit and drops the rest; FOK fills completely or not at all.
``replace`` keeps time priority only when the price is unchanged and the size shrinks.

The property tests check this book against a plain ``sortedcontainers`` book
(rmptwin.bench.baseline_books), which ``make bench`` also measures beside it.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from heapq import heappop, heappush
from typing import Any

BUY, SELL = 0, 1
LIMIT, MARKET, IOC, FOK = 0, 1, 2, 3
ORDER_TYPES = {"limit": LIMIT, "market": MARKET, "ioc": IOC, "fok": FOK}

# A trade: (taker oid, maker oid, price, qty, taker side)
Trade = tuple[int, int, int, int, int]
# A resting order, mutated in place as it fills: [oid, qty left, price, side].
Resting = list[int]
# A price level: [total qty, deque of its Resting orders in time priority] (a list, not a
# class: updated in place on every fill).
Level = list[Any]

_LEVEL = struct.Struct("!qI")
_ORDER = struct.Struct("!qq")
_HEAD = struct.Struct("!BI")


class BookError(ValueError):
    """A request the book cannot apply (duplicate order id, unknown order, bad snapshot)."""


class OrderBook:
    __slots__ = ("symbol", "_levels", "_heaps", "_orders", "updates")

    def __init__(self, symbol: str, track_updates: bool = False) -> None:
        self.symbol = symbol
        self._levels: tuple[dict[int, Level], dict[int, Level]] = ({}, {})   # [BUY], [SELL]: price -> level
        self._heaps: tuple[list[int], list[int]] = ([], [])    # bids as -price, asks as price
        self._orders: dict[int, Resting] = {}
        # (side, price, new level total) after each change, for a market-data feed
        self.updates: list[tuple[int, int, int]] | None = [] if track_updates else None

    # ------------------------------------------------------------------ queries
    def best(self, side: int) -> int | None:
        levels, heap = self._levels[side], self._heaps[side]
        while heap:
            p: int = heap[0] if side == SELL else -heap[0]
            if p in levels:
                return p
            heappop(heap)
        return None

    def depth(self, side: int) -> list[tuple[int, int]]:
        """All levels of a side, best first: (price, total qty)."""
        levels = self._levels[side]
        return [(p, levels[p][0]) for p in sorted(levels, reverse=(side == BUY))]

    def resting(self) -> dict[int, tuple[int, int, int]]:
        """oid -> (side, price, qty) of every resting order."""
        return {o[0]: (o[3], o[2], o[1]) for o in self._orders.values()}

    def order_queue(self, side: int, price: int) -> list[tuple[int, int]]:
        level = self._levels[side].get(price)
        return [] if level is None else [(o[0], o[1]) for o in level[1] if o[1] > 0]

    def __len__(self) -> int:
        return len(self._orders)

    # ------------------------------------------------------------------ requests
    def submit(self, oid: int, side: int, qty: int, price: int | None = None, kind: int = LIMIT) -> list[Trade]:
        """Match an incoming order; rest the remainder of a LIMIT order. Returns trades."""
        if oid in self._orders:
            raise BookError(f"order {oid} already rests in the book")
        if kind == FOK and self._fillable(side, qty, price) < qty:
            return []
        if kind == MARKET:
            price = None
        trades: list[Trade] = []
        opp = 1 - side
        levels, heap = self._levels[opp], self._heaps[opp]
        orders, updates = self._orders, self.updates
        sign = 1 if opp == SELL else -1
        while qty and heap:
            best = heap[0] * sign
            level = levels.get(best)
            if level is None:
                heappop(heap)
                continue
            if price is not None and (best > price if side == BUY else best < price):
                break
            q = level[1]
            while qty and q:
                o = q[0]
                oq = o[1]
                if oq == 0:
                    q.popleft()
                    continue
                fill = oq if oq < qty else qty
                trades.append((oid, o[0], best, fill, side))
                qty -= fill
                oq -= fill
                o[1] = oq
                level[0] -= fill
                if oq == 0:
                    q.popleft()
                    del orders[o[0]]
            if level[0] == 0:
                del levels[best]
                heappop(heap)
            if updates is not None:
                updates.append((opp, best, level[0]))
        if qty and kind == LIMIT:
            assert price is not None   # a LIMIT order has its price
            self._rest(oid, side, price, qty)
        return trades

    def cancel(self, oid: int) -> int:
        """Remove a resting order; returns the quantity it still had."""
        o = self._orders.pop(oid, None)
        if o is None:
            raise BookError(f"order {oid} is not in the book")
        qty, price, side = o[1], o[2], o[3]
        levels = self._levels[side]
        level = levels[price]
        level[0] -= qty
        o[1] = 0
        if level[0] == 0:
            del levels[price]
        if self.updates is not None:
            self.updates.append((side, price, level[0]))
        return qty

    def replace(self, oid: int, qty: int, price: int) -> list[Trade]:
        """Change size and/or price of a resting order (same side, same id)."""
        o = self._orders.get(oid)
        if o is None:
            raise BookError(f"order {oid} is not in the book")
        side = o[3]
        if price == o[2] and 0 < qty <= o[1]:
            level = self._levels[side][price]
            level[0] -= o[1] - qty
            o[1] = qty
            if self.updates is not None:
                self.updates.append((side, price, level[0]))
            return []
        self.cancel(oid)
        return self.submit(oid, side, qty, price, LIMIT) if qty > 0 else []

    # ------------------------------------------------------------------ internals
    def _rest(self, oid: int, side: int, price: int, qty: int) -> None:
        levels = self._levels[side]
        o = [oid, qty, price, side]
        level = levels.get(price)
        if level is None:
            levels[price] = [qty, deque((o,))]
            heappush(self._heaps[side], price if side == SELL else -price)
        else:
            level[0] += qty
            level[1].append(o)
        self._orders[oid] = o
        if self.updates is not None:
            self.updates.append((side, price, levels[price][0]))

    def _fillable(self, side: int, qty: int, price: int | None) -> int:
        """Quantity an order could fill now (FOK pre-check); stops counting at ``qty``."""
        total = 0
        levels = self._levels[1 - side]
        for p in sorted(levels, reverse=(side == SELL)):
            if price is not None and (p > price if side == BUY else p < price):
                break
            total += levels[p][0]
            if total >= qty:
                break
        return total

    # ------------------------------------------------------------------ state
    def snapshot(self) -> bytes:
        """Compact binary image: per side, levels best first, orders in time priority."""
        out = [self.symbol.encode().ljust(8, b" ")[:8]]
        for side in (BUY, SELL):
            levels = self._levels[side]
            prices = sorted(levels, reverse=(side == BUY))
            out.append(_HEAD.pack(side, len(prices)))
            for p in prices:
                live = [o for o in levels[p][1] if o[1] > 0]
                out.append(_LEVEL.pack(p, len(live)))
                out.extend(_ORDER.pack(o[0], o[1]) for o in live)
        return b"".join(out)

    @classmethod
    def restore(cls, data: bytes, track_updates: bool = False) -> OrderBook:
        try:
            book = cls(data[:8].decode().rstrip(), track_updates)
            off = 8
            for _ in (BUY, SELL):
                side, nlev = _HEAD.unpack_from(data, off)
                off += _HEAD.size
                for _ in range(nlev):
                    price, n = _LEVEL.unpack_from(data, off)
                    off += _LEVEL.size
                    for _ in range(n):
                        oid, qty = _ORDER.unpack_from(data, off)
                        off += _ORDER.size
                        book._rest(oid, side, price, qty)
        except (struct.error, UnicodeDecodeError, IndexError) as e:
            raise BookError(f"order book snapshot is malformed ({e})") from None
        if off != len(data):
            raise BookError("order book snapshot has trailing bytes")
        if book.updates is not None:
            book.updates.clear()
        return book

    def state_hash(self) -> str:
        """Equal on two books exactly when they hold the same orders in the same priority."""
        return hashlib.blake2b(self.snapshot(), digest_size=16).hexdigest()

