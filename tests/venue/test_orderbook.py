"""Matching engine: hand-made cases for every order type, and properties against the
sortedcontainers baseline book that `make bench` measures it against."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.bench.baseline_books import SortedContainersBook
from rmptwin.bench.bench_matching import order_flow, replay
from rmptwin.venue.orderbook import BUY, FOK, IOC, LIMIT, MARKET, SELL, BookError, OrderBook


def book_with_asks(*asks):
    b = OrderBook("IBM")
    for oid, price, qty in asks:
        assert b.submit(oid, SELL, qty, price) == []
    return b


def test_limit_rests_then_crosses_at_maker_price_in_time_priority():
    b = book_with_asks((1, 101, 5), (2, 100, 5), (3, 100, 5))
    trades = b.submit(10, BUY, 12, 101)
    # best price first (100), oldest first at a price (2 before 3), then 101
    assert trades == [(10, 2, 100, 5, BUY), (10, 3, 100, 5, BUY), (10, 1, 101, 2, BUY)]
    assert b.depth(SELL) == [(101, 3)]
    assert b.depth(BUY) == []


def test_limit_remainder_rests_on_its_own_side():
    b = book_with_asks((1, 100, 5))
    assert b.submit(10, BUY, 8, 100) == [(10, 1, 100, 5, BUY)]
    assert b.depth(BUY) == [(100, 3)] and b.best(SELL) is None


def test_market_fills_at_any_price_and_never_rests():
    b = book_with_asks((1, 100, 5), (2, 150, 5))
    trades = b.submit(10, BUY, 20, None, MARKET)
    assert [(t[1], t[2], t[3]) for t in trades] == [(1, 100, 5), (2, 150, 5)]
    assert len(b) == 0 and b.depth(BUY) == []


def test_ioc_fills_what_it_can_within_its_limit_and_drops_the_rest():
    b = book_with_asks((1, 100, 5), (2, 102, 5))
    trades = b.submit(10, BUY, 8, 101, IOC)
    assert trades == [(10, 1, 100, 5, BUY)]
    assert b.depth(BUY) == [] and b.depth(SELL) == [(102, 5)]


def test_fok_fills_completely_or_not_at_all():
    b = book_with_asks((1, 100, 5), (2, 101, 5))
    assert b.submit(10, BUY, 11, 101, FOK) == []
    assert b.depth(SELL) == [(100, 5), (101, 5)]           # untouched
    assert b.submit(11, BUY, 10, 101, FOK) == [(11, 1, 100, 5, BUY), (11, 2, 101, 5, BUY)]
    assert len(b) == 0


def test_cancel_removes_and_unknown_cancel_is_an_error():
    b = book_with_asks((1, 100, 5), (2, 100, 7))
    assert b.cancel(1) == 5
    assert b.order_queue(SELL, 100) == [(2, 7)]
    with pytest.raises(BookError):
        b.cancel(1)
    assert b.submit(10, BUY, 7, 100) == [(10, 2, 100, 7, BUY)]


def test_replace_keeps_priority_only_when_shrinking_at_the_same_price():
    b = book_with_asks((1, 100, 5), (2, 100, 5))
    b.replace(1, 3, 100)                      # shrink: stays first
    assert b.order_queue(SELL, 100) == [(1, 3), (2, 5)]
    b.replace(1, 6, 100)                      # grow: goes to the back
    assert b.order_queue(SELL, 100) == [(2, 5), (1, 6)]
    trades = b.replace(2, 5, 99)              # new price: may even trade... not here (no bids)
    assert trades == [] and b.best(SELL) == 99
    b.submit(20, BUY, 1, 90)
    assert b.replace(20, 2, 99) == [(20, 2, 99, 2, BUY)]  # a replace that crosses trades as taker


def test_duplicate_order_id_is_refused():
    b = book_with_asks((1, 100, 5))
    with pytest.raises(BookError):
        b.submit(1, SELL, 5, 100)


def test_snapshot_restore_gives_the_same_state_hash():
    b = book_with_asks((1, 100, 5), (2, 101, 5), (3, 100, 2))
    b.submit(4, BUY, 3, 95)
    b.cancel(3)
    r = OrderBook.restore(b.snapshot())
    assert r.state_hash() == b.state_hash()
    assert r.submit(9, BUY, 10, 101) == b.submit(9, BUY, 10, 101)
    assert r.state_hash() == b.state_hash()
    with pytest.raises(BookError):
        OrderBook.restore(b.snapshot()[:-3])


# ---------------------------------------------------------------------------- properties
new_op = st.tuples(st.just("new"), st.integers(0, 1), st.integers(1, 50), st.integers(95, 105),
                   st.sampled_from([LIMIT, LIMIT, LIMIT, MARKET, IOC, FOK]))
op = st.one_of(
    new_op,
    st.tuples(st.just("cancel"), st.integers(0, 60)),
    st.tuples(st.just("replace"), st.integers(0, 60), st.integers(0, 50), st.integers(95, 105)),
)


def _apply(book, ops):
    trades, sizes = [], {}
    for i, o in enumerate(ops):
        try:
            if o[0] == "new":
                _, side, qty, price, kind = o
                sizes[i] = qty
                trades.append(book.submit(i, side, qty, price, kind))
            elif o[0] == "cancel":
                trades.append(("cancel", book.cancel(o[1])))
            else:
                trades.append(book.replace(o[1], o[2], o[3]))
        except BookError:
            trades.append("error")
    return trades, sizes


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=60))
def test_fast_book_matches_the_sortedcontainers_baseline(ops):
    """Same trades, errors, resting orders and depth as the benchmark's baseline book, so the
    benchmark compares two implementations of one behaviour."""
    fast, base = OrderBook("X"), SortedContainersBook("X")
    assert _apply(fast, ops)[0] == _apply(base, ops)[0]
    assert fast.resting() == base.resting()
    for side in (BUY, SELL):
        assert fast.depth(side) == base.depth(side)
        assert fast.best(side) == base.best(side)


@settings(max_examples=300, deadline=None)
@given(st.lists(new_op, max_size=80))
def test_never_crossed_and_quantity_conserved(ops):
    book = OrderBook("X")
    filled: dict[int, int] = {}
    for i, (_, side, qty, price, kind) in enumerate(ops):
        for taker, maker, p, q, tside in book.submit(i, side, qty, price, kind):
            assert q > 0 and tside == side
            # price-time priority: the taker never pays worse than its limit
            if kind != MARKET:
                assert (p <= price) if side == BUY else (p >= price)
            filled[taker] = filled.get(taker, 0) + q
            filled[maker] = filled.get(maker, 0) + q
        bid, ask = book.best(BUY), book.best(SELL)
        assert bid is None or ask is None or bid < ask
    resting = book.resting()
    for i, (_, side, qty, price, kind) in enumerate(ops):
        rest = resting.get(i, (side, price, 0))[2]
        assert filled.get(i, 0) + rest <= qty
        if kind == LIMIT:
            assert filled.get(i, 0) + rest == qty      # a limit order is filled or resting, never lost
        if kind == FOK:
            assert filled.get(i, 0) in (0, qty)
        if kind != LIMIT:
            assert i not in resting


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.integers(98, 102)), min_size=1, max_size=30),
       st.integers(1, 400))
def test_price_time_priority_of_fills(asks, qty):
    """A market buy consumes asks in (price, arrival) order, exactly as sorting predicts."""
    book = OrderBook("X")
    for i, (q, p) in enumerate(asks):
        book.submit(i, SELL, q, p)
    expected, left = [], qty
    for i, (q, p) in sorted(enumerate(asks), key=lambda e: (e[1][1], e[0])):
        if left == 0:
            break
        f = min(q, left)
        expected.append((1000, i, p, f, BUY))
        left -= f
    assert book.submit(1000, BUY, qty, None, MARKET) == expected


def test_book_updates_report_every_level_change():
    b = OrderBook("IBM", track_updates=True)
    b.submit(1, SELL, 5, 100)
    b.submit(2, SELL, 5, 100)
    b.submit(3, BUY, 7, 100)      # takes 5 from order 1 and 2 from order 2
    b.cancel(2)
    assert b.updates == [(SELL, 100, 5), (SELL, 100, 10), (SELL, 100, 3), (SELL, 100, 0)]


def test_baseline_cancel_frees_the_level_and_the_order_id():
    b = SortedContainersBook("IBM")
    b.submit(1, SELL, 5, 100)
    b.submit(2, SELL, 7, 101)
    assert b.cancel(1) == 5 and b.best(SELL) == 101 and len(b) == 1
    with pytest.raises(BookError):
        b.cancel(1)
    assert b.submit(1, SELL, 3, 99) == []        # the id is free again once it no longer rests
    assert b.depth(SELL) == [(99, 3), (101, 7)]


def test_benchmark_order_flow_cancels_mostly_hit_resting_orders():
    """The bench's flow must measure cancels of resting orders, not failed look-ups."""
    ops = order_flow(20_000, seed=3)
    _, cancels, hits = replay(OrderBook, ops)
    assert cancels >= 0.2 * len(ops)
    assert hits / cancels >= 0.8
    # both books see the same flow the same way
    assert replay(SortedContainersBook, ops)[1:] == (cancels, hits)
