"""The floor's order workload (pure): when each participant enters which order.

Each participant draws from its own RNG (a seed its factory draws from the host's RNG, and its
name), Poisson arrivals at
``rate`` per second from ``start_ns`` for ``duration_ns``. Symbol i's mid price is
100.00 + i (ticker units, 1/10,000); limit prices lie within ``spread`` ticks of the mid.

- continuous: buy or sell alike; a ``stop_fraction`` share are stop orders (a buy stop a
  few ticks above the mid, a sell stop below), a ``market_fraction`` share market orders;
- second_price and dutch: a ``sell_fraction`` share are sell orders opening a lot (reserve
  ``spread`` ticks below the mid), the rest limit bids around the mid.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rmptwin.apps.trading_floor.messages import Order

TICK = 100     # one cent in ticker units


@dataclass(frozen=True)
class OrderWorkload:
    rule: str
    symbols: int
    rate: float
    start_ns: int
    duration_ns: int
    spread: int
    stop_fraction: float
    market_fraction: float
    sell_fraction: float
    lot_qty: int = 100


def symbol(i: int) -> str:
    return f"F{i:03d}"


def mid_price(i: int) -> int:
    return 1_000_000 + 10_000 * i


def _order(w: OrderWorkload, rng: random.Random) -> Order:
    i = rng.randrange(w.symbols)
    sym, mid = symbol(i), mid_price(i)
    near = mid + TICK * rng.randint(-w.spread, w.spread)
    if w.rule != "continuous":
        if rng.random() < w.sell_fraction:
            return Order("S", "limit", sym, w.lot_qty, mid - TICK * w.spread)
        return Order("B", "limit", sym, w.lot_qty, near)
    side = "B" if rng.random() < 0.5 else "S"
    qty = 100 * rng.randint(1, 5)
    u = rng.random()
    if u < w.stop_fraction:
        away = TICK * rng.randint(1, max(1, w.spread // 2))
        return Order(side, "stop", sym, qty, 0, mid + away if side == "B" else mid - away)
    if u < w.stop_fraction + w.market_fraction:
        return Order(side, "market", sym, qty)
    return Order(side, "limit", sym, qty, near)


def order_schedule(w: OrderWorkload, participant: str, seed: int) -> list[tuple[int, Order]]:
    rng = random.Random(f"{seed}:floor:{participant}")
    out: list[tuple[int, Order]] = []
    if w.rate <= 0:
        return out
    end = w.start_ns + w.duration_ns
    t = w.start_ns + rng.expovariate(w.rate) * 1e9
    while t < end:
        out.append((int(t), _order(w, rng)))
        t += rng.expovariate(w.rate) * 1e9
    return out
