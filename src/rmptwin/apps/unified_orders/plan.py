"""When traders decide and what they offer (pure; the factories call it, the cores get the plan).

Fair entry (seed 7.2): "two traders in different parts of the world ... decide
simultaneously to sell their stocks at the same price". The two traders of a ``pair`` share
one schedule, drawn from the run seed and the pair's name alone: decision k falls at a
uniformly random instant of slot k (``start + k interval`` to ``start + (k+1) interval``), so
decisions sample every phase of the token's rotation. Both offer the same side, symbol, price
and size: a sell on even k, a buy on odd k, which takes the two sells resting from k - 1
(so the book trades, and drains, as it goes).

An unpaired trader with ``rate_per_s`` > 0 offers at Poisson instants from its own seeded
stream: a random side, one of the symbols, a price a few ticks around the reference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rmptwin.apps.unified_orders.offers import BUY, SELL

TICK = 100  # one cent, in price x 10,000


@dataclass(frozen=True, slots=True)
class PlannedOffer:
    t_ns: int
    side: str
    symbol: str
    price: int
    qty: int
    decision: int = -1


def paired_plan(seed: int, pair: str, decisions: int, start_ns: int, interval_ns: int,
                symbol: str, price: int, qty: int) -> list[PlannedOffer]:
    """The schedule both traders of ``pair`` follow."""
    rng = random.Random(f"{seed}:orders:pair:{pair}")
    return [PlannedOffer(start_ns + k * interval_ns + rng.randrange(interval_ns), SELL if k % 2 == 0 else BUY,
                         symbol, price, qty, k) for k in range(decisions)]


def random_plan(seed: int, trader: str, rate_per_s: float, start_ns: int, end_ns: int,
                symbols: list[str], price: int, qty: int) -> list[PlannedOffer]:
    """Poisson offers of one unpaired trader."""
    if rate_per_s <= 0 or not symbols:
        return []
    rng = random.Random(f"{seed}:orders:trader:{trader}")
    out, t = [], start_ns + rng.expovariate(rate_per_s) * 1e9
    while t < end_ns:
        side = BUY if rng.random() < 0.5 else SELL
        out.append(PlannedOffer(int(t), side, rng.choice(symbols), price + TICK * rng.randint(-3, 3), qty))
        t += rng.expovariate(rate_per_s) * 1e9
    return out
