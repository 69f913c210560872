"""The matching engine (dict + heap book) beside a fair ``sortedcontainers`` baseline.

Both books run the same order flow: limit orders around a mid price and cancels that
target orders still resting (the generator tracks which orders rest by replaying the flow
on a book as it writes it), so the ratio compares matching and O(1) / O(log n) cancels,
not failed look-ups. The share of cancels that hit a resting order is measured on the
replay and reported.
"""

from __future__ import annotations

import random
import time
from typing import Any

from rmptwin.bench.baseline_books import SortedContainersBook
from rmptwin.venue.orderbook import BookError, OrderBook

RUNS = 1          # the module repeats each timing itself (TIMINGS times)
TIMINGS = 5
CANCEL_SHARE = 0.25   # of all requests
LATE_CANCEL = 0.05    # of cancels: aimed at an order that may have filled (a realistic race)


class _Live:
    """Resting order ids with their remaining size; O(1) add, remove and random pick."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.pos: dict[int, int] = {}
        self.left: dict[int, int] = {}

    def add(self, oid: int, qty: int) -> None:
        self.pos[oid] = len(self.ids)
        self.ids.append(oid)
        self.left[oid] = qty

    def remove(self, oid: int) -> None:
        i, last = self.pos.pop(oid), self.ids.pop()
        if last != oid:
            self.ids[i], self.pos[last] = last, i
        del self.left[oid]

    def fill(self, oid: int, qty: int) -> None:
        self.left[oid] -= qty
        if self.left[oid] == 0:
            self.remove(oid)


Op = tuple[Any, ...]   # ("n", oid, side, qty, price) or ("c", oid)


def order_flow(n: int, seed: int = 1) -> list[Op]:
    """``n`` requests: ("n", oid, side, qty, price) limit orders within 20 ticks of the mid,
    ("c", oid) cancels of a resting order (or, LATE_CANCEL of the time, of any earlier order)."""
    r = random.Random(seed)
    out: list[Op]
    book, live, out = OrderBook("FLOW"), _Live(), []
    for oid in range(n):
        if r.random() < CANCEL_SHARE and live.ids:
            target = r.randrange(oid) if r.random() < LATE_CANCEL else live.ids[r.randrange(len(live.ids))]
            out.append(("c", target))
            if target in live.pos:
                book.cancel(target)
                live.remove(target)
            continue
        side, qty, price = r.randrange(2), r.randint(1, 100), 10_000 + r.randint(-20, 20)
        out.append(("n", oid, side, qty, price))
        filled = 0
        for _, maker, _, q, _ in book.submit(oid, side, qty, price):
            live.fill(maker, q)
            filled += q
        if filled < qty:
            live.add(oid, qty - filled)
    return out


def replay(cls: type[OrderBook | SortedContainersBook], ops: list[Op]) -> tuple[float, int, int]:
    """Run ``ops`` on a fresh ``cls`` book: (seconds, cancels, cancels that hit a resting order)."""
    book = cls("IBM")
    submit, cancel = book.submit, book.cancel
    cancels = hits = 0
    t = time.perf_counter()
    for op in ops:
        if op[0] == "n":
            submit(op[1], op[2], op[3], op[4])
        else:
            cancels += 1
            try:
                cancel(op[1])
                hits += 1
            except BookError:
                pass
    return time.perf_counter() - t, cancels, hits


def run(quick: bool) -> list[dict[str, Any]]:
    n = 60_000 if quick else 200_000
    ops = order_flow(n)
    fast, base, ratio = [], [], []
    replay(OrderBook, ops[:n // 10])     # warm-up: first-call costs out of the timings
    replay(SortedContainersBook, ops[:n // 10])
    for _ in range(TIMINGS):             # interleaved, so a busy moment hurts both books alike
        t_fast, cancels, hits = replay(OrderBook, ops)
        t_base, _, hits_base = replay(SortedContainersBook, ops)
        assert hits_base == hits, "the two books disagree on which cancels hit"
        fast.append(n / t_fast)
        base.append(n / t_base)
        ratio.append(t_base / t_fast)
    hit_rate = hits / cancels if cancels else 0.0
    cond = (f"{n:,} requests, one symbol, {CANCEL_SHARE:.0%} cancels of which {hit_rate:.1%} hit a resting "
            f"order, limits within 20 ticks of mid; {TIMINGS} interleaved timings, one process")
    return [
        {"metric": "matching engine (dict+heap book)", "samples": fast, "unit": "orders/s", "better": "higher",
         "goal": ">= 300k/s", "goal_min": 300_000, "conditions": cond},
        {"metric": "sortedcontainers book (O(log n) cancel)", "samples": base, "unit": "orders/s",
         "better": "higher", "conditions": cond},
        {"metric": "dict+heap / sortedcontainers (same orders)", "samples": ratio, "unit": "x", "better": "higher",
         "conditions": cond, "note": f"cancel hit rate {hit_rate:.1%} ({hits:,} of {cancels:,} cancels)"},
    ]
