"""The trading floor's rules (seed 7.3) as pure functions of the sequence: the same sequence
gives the same trades; the continuous auction keeps price-time priority (checked against a
plain list-based book) and triggers stops on the last trade price; the second-price auction
charges the second bid; the Dutch auction sells at the first step a bid accepts. Plus the
floor state's report rules (tentative, confirmed, withdrawn) and the payload format."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rmptwin.apps.trading_floor import messages
from rmptwin.apps.trading_floor.messages import Control, FloorDecodeError, Order, Report
from rmptwin.apps.trading_floor.rules import Entered, RuleParams, make_rule
from rmptwin.apps.trading_floor.state import FloorState

SYM = "F000"
prices = st.integers(min_value=90, max_value=110).map(lambda c: c * 100)
limit_orders = st.lists(st.tuples(st.sampled_from("BS"), st.integers(1, 5), prices), max_size=60)


def _entered(orders) -> list[Entered]:
    return [Entered(o, i + 1, f"p{i % 3}", i // 4 + 1) for i, o in enumerate(orders)]


def _run(rule, entered, controls=()):
    fills = []
    for e in entered:
        fills += rule.on_order(e)
    return fills


# ----------------------------------------------------------------------------- continuous


def _reference_fills(orders: list[tuple[str, int, int]]) -> list[tuple]:
    """Price-time priority on plain lists: best price first, then earliest; at the maker's price."""
    book = {"B": [], "S": []}      # [price, oid, qty]
    out = []
    for oid, (side, qty, price) in enumerate(orders, start=1):
        other = book["S" if side == "B" else "B"]
        while qty:
            crossing = [o for o in other if (o[0] <= price if side == "B" else o[0] >= price)]
            if not crossing:
                break
            best = min(crossing, key=lambda o: (o[0] if side == "B" else -o[0], o[1]))
            fill = min(qty, best[2])
            out.append((best[0], fill, oid if side == "B" else best[1], best[1] if side == "B" else oid))
            qty -= fill
            best[2] -= fill
            if best[2] == 0:
                other.remove(best)
        if qty:
            book[side].append([price, oid, qty])
    return out


@settings(max_examples=150, deadline=None)
@given(limit_orders)
def test_continuous_is_price_time_priority(raw):
    orders = [Order(side, "limit", SYM, qty * 100, price) for side, qty, price in raw]
    fills = _run(make_rule("continuous"), _entered(orders))
    got = [(f.price, f.qty, f.buy, f.sell) for f in fills]
    assert got == [(p, q * 100, b, s) for p, q, b, s in _reference_fills(raw)]


order_mix = st.lists(st.tuples(st.sampled_from("BS"), st.sampled_from(["limit", "limit", "market", "stop"]),
                               st.integers(1, 5), prices, prices), max_size=60)


def _mixed(raw) -> list[Order]:
    return [Order(side, kind, SYM, qty * 100, price if kind == "limit" else 0, stop if kind == "stop" else 0)
            for side, kind, qty, price, stop in raw]


@settings(max_examples=100, deadline=None)
@given(order_mix)
def test_every_rule_is_deterministic(raw):
    orders = _mixed(raw)
    for name in ("continuous", "second_price", "dutch"):
        a, b = make_rule(name), make_rule(name)
        fa, fb = _run(a, _entered(orders)), _run(b, _entered(orders))
        assert fa == fb and a.snapshot() == b.snapshot()


@settings(max_examples=100, deadline=None)
@given(order_mix)
def test_stop_orders_enter_only_once_the_last_price_reaches_them(raw):
    orders = _mixed(raw)
    rule = make_rule("continuous")
    last = None
    for e in _entered(orders):
        fills = rule.on_order(e)
        for f in fills:
            for oid in (f.buy, f.sell):
                o = orders[oid - 1]
                if o.kind == "stop" and oid != e.oid:
                    # a stop that trades after entering waited for a trade at or beyond its stop
                    seen = [x.price for x in fills[:fills.index(f)]] + ([last] if last is not None else [])
                    assert any(p >= o.stop if o.side == "B" else p <= o.stop for p in seen)
        if fills:
            last = fills[-1].price


def test_a_buy_stop_triggers_on_the_trade_that_reaches_it():
    rule = make_rule("continuous")
    seq = [Order("B", "stop", SYM, 100, 0, 10_100), Order("S", "limit", SYM, 100, 10_000),
           Order("S", "limit", SYM, 100, 10_200), Order("S", "limit", SYM, 100, 10_300),
           Order("B", "limit", SYM, 100, 10_000)]
    # a trade at 100.00: below the stop at 101.00, so the stop keeps waiting
    assert [(f.price, f.buy) for f in _run(rule, _entered(seq))] == [(10_000, 5)]
    assert len(rule.stops[SYM]) == 1
    # a trade at 102.00 reaches it: the stop enters as a market buy and takes the 103.00 ask
    fills = rule.on_order(Entered(Order("B", "limit", SYM, 100, 10_200), 6, "p1", 2))
    assert [(f.price, f.buy, f.sell) for f in fills] == [(10_200, 6, 3), (10_300, 1, 4)]
    assert rule.stops[SYM] == []


# ----------------------------------------------------------------------------- second price


bids = st.lists(st.integers(80, 120).map(lambda c: c * 100), max_size=12)


@settings(max_examples=150, deadline=None)
@given(bids, st.integers(85, 105).map(lambda c: c * 100))
def test_second_price_winner_pays_the_second_bid(bid_prices, reserve):
    rule = make_rule("second_price", RuleParams(round_passes=2))
    rule.on_order(Entered(Order("S", "limit", SYM, 100, reserve), 1, "seller", 1))
    for i, p in enumerate(bid_prices):
        rule.on_order(Entered(Order("B", "limit", SYM, 100, p), i + 2, f"b{i}", 1))
    assert rule.controls_due(2) == []
    assert rule.controls_due(3) == [Control("close", 1)]
    fills = rule.on_control(Control("close", 1), 3)
    counting = sorted(((p, i + 2) for i, p in enumerate(bid_prices) if p >= reserve), key=lambda b: (-b[0], b[1]))
    if not counting:
        assert fills == []
        return
    (fill,) = fills
    assert fill.buy == counting[0][1]
    assert fill.price == (counting[1][0] if len(counting) > 1 else reserve)
    assert rule.on_control(Control("close", 1), 4) == []      # a second close changes nothing


# ----------------------------------------------------------------------------- Dutch


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 25), st.integers(80, 125)), max_size=10))
@example([(0, 100), (20, 100)])       # a bid resting at the reserve wins on the tick that reaches it
def test_dutch_sells_at_the_first_step_a_bid_accepts(timed_bids):
    """Bids enter after tick ``k``; the clock starts 20 cents above the reserve of 100.00
    and falls one cent per tick, down to the reserve."""
    params = RuleParams(dutch_start=2000, dutch_step=100)
    rule = make_rule("dutch", params)
    rule.on_order(Entered(Order("S", "limit", SYM, 100, 10_000), 1, "seller", 1))
    timed = sorted(((k, c * 100, i) for i, (k, c) in enumerate(timed_bids)), key=lambda b: (b[0], b[2]))
    fills, oid, expected = [], 2, None
    for step in range(26):
        if step:
            due = rule.controls_due(step)
            fills += rule.on_control(due[0], step) if due else []
        clock = max(10_000, 12_000 - step * 100)
        if expected is None:
            # the tick comes first: a resting bid accepts at the first step its limit reaches the clock
            resting = [b for b in timed if b[0] < step and b[1] >= clock]
            if resting:
                first = min(resting, key=lambda b: (b[0], b[2]))
                expected = (clock, 2 + timed.index(first))
        for k, price, _ in [b for b in timed if b[0] == step]:
            fills += rule.on_order(Entered(Order("B", "limit", SYM, 100, price), oid, f"b{oid}", step))
            if expected is None and price >= clock:
                expected = (clock, oid)
            oid += 1
    if expected is None:
        assert fills == []
    else:
        assert [(f.price, f.buy) for f in fills] == [expected]


def test_a_repeated_or_stale_tick_is_ignored():
    rule = make_rule("dutch", RuleParams(dutch_start=500, dutch_step=100))
    rule.on_order(Entered(Order("S", "limit", SYM, 100, 10_000), 1, "s", 1))
    rule.on_control(Control("tick", 1, 1), 2)
    rule.on_control(Control("tick", 1, 1), 2)   # a second token site ticked the same step
    rule.on_control(Control("tick", 1, 5), 3)   # not the next step
    assert rule.open[1].clock == 10_400 and rule.open[1].step == 1


# ----------------------------------------------------------------------------- floor state


def _apply_all(state: FloorState, msgs) -> list:
    out = []
    for g, (who, m) in enumerate(msgs, start=1):
        out += state.apply(messages.encode(m), who, g, g)
    return out


def test_reports_tentative_confirmed_withdrawn_identically():
    crossing = [("a", Order("B", "limit", SYM, 100, 10_000)), ("b", Order("S", "limit", SYM, 100, 10_000))]
    probe = FloorState("continuous")
    _apply_all(probe, crossing)
    (trade,) = probe.trades
    seq = crossing + [
        ("rp1", Report("tentative", 1, "0000000000000000")),   # wrong digest: void
        ("rp1", Report("confirmed", 1, trade.digest)),          # not tentative yet: ignored
        ("rp2", Report("tentative", 1, trade.digest)),
        ("rp1", Report("tentative", 1, trade.digest)),          # duplicate
        ("rp2", Report("confirmed", 1, trade.digest)),
        ("rp3", Report("tentative", 2, "ffff")),                 # no trade 2: void
    ]
    a, b = FloorState("continuous"), FloorState("continuous")
    changes = [(c.status, c.n) for c in _apply_all(a, seq)]
    _apply_all(b, seq)
    assert changes == [("derived", 1), ("withdrawn", 1), ("tentative", 1), ("confirmed", 1), ("withdrawn", 2)]
    assert a.state_hash() == b.state_hash()
    assert a.unreported() == [] and a.confirmable(10**9) == []
    b.reset()
    assert b.state_hash() != a.state_hash() and b.trades == []


def test_confirmable_waits_for_the_stable_position():
    s = FloorState("continuous")
    seq = [("a", Order("B", "limit", SYM, 100, 10_000)), ("b", Order("S", "limit", SYM, 100, 10_000))]
    _apply_all(s, seq)
    assert [t.n for t in s.unreported()] == [1]
    s.apply(messages.encode(Report("tentative", 1, s.trades[0].digest)), "rp1", 3, 3)
    assert s.confirmable(2) == [] and [t.n for t in s.confirmable(3)] == [1]


@pytest.mark.parametrize("payload", [b"", b"TF1", b"TF1{}", b'TF1{"o":["X","limit","F",1,1,0]}',
                                     b'TF1{"o":["B","limit","F",0,1,0]}', b'TF1{"c":["tick",-1,0]}',
                                     b'TF1{"r":["maybe",1,"d",[]]}', b"XX1{}", b"TF1\xff"])
def test_malformed_payloads_are_rejected_and_counted(payload):
    with pytest.raises(FloorDecodeError):
        messages.decode(payload)
    s = FloorState("dutch")
    assert s.apply(payload, "x", 1, 1) == [] and s.malformed == 1


@given(st.sampled_from([Order("S", "stop", "F001", 300, 0, 9_900), Control("close", 7), Control("tick", 3, 4),
                        Report("confirmed", 9, "abcd", ("F000", 1, 2, 3, 4, "a", "b"))]))
def test_messages_round_trip(msg):
    assert messages.decode(messages.encode(msg)) == msg


def test_unknown_rule_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown trading rule 'english'; known: continuous, second_price, dutch"):
        make_rule("english")
