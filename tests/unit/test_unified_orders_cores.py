"""Unified orders cores (seed 7.2): the S_P admission, the offer wire format, the portal and the
exchange, fed by hand. The claims on whole runs are in tests/sim/test_unified_orders.py."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmp_bus import timing

from rmptwin.apps.unified_orders import offers
from rmptwin.apps.unified_orders.admission import NS, Account, Admission, AdmissionConfig, account_token
from rmptwin.apps.unified_orders.broker import BrokerCore
from rmptwin.apps.unified_orders.exchange import ExchangeCore
from rmptwin.apps.unified_orders.offers import BUY, SELL, Offer
from rmptwin.apps.unified_orders.plan import paired_plan, random_plan
from rmptwin.apps.unified_orders.portal import OrderEntry, PortalCore
from rmptwin.core.events import Kind
from rmptwin.core.sansio import Group, Unicast
from rmptwin.rmp import wire
from rmptwin.rmp.source import SourceCore

SECRET = "test-portal-secret"
PRICE = 100 * 10_000


def config(funds=10 * PRICE * 100, holdings=500, rate=10.0, burst=3) -> AdmissionConfig:
    accounts = {"acc1": Account(frozenset({"t1", "t1b"}), funds, {"IBM": holdings}),
                "acc2": Account(frozenset({"t2"}), funds, {"IBM": holdings})}
    return AdmissionConfig(SECRET, accounts, frozenset({"IBM"}), rate, burst)


def offer(seq=1, trader="t1", account="acc1", side=BUY, qty=100, price=PRICE, token=None, symbol="IBM") -> Offer:
    return Offer(trader=trader, seq=seq, side=side, symbol=symbol, price=price, qty=qty, exchange="floor",
                 account=account, token=account_token(SECRET, account) if token is None else token)


# ----------------------------------------------------------------------------- admission


@pytest.mark.parametrize("bad, reason", [
    (offer(token="0" * 32), "credentials"),
    (offer(token=account_token("another-secret", "acc1")), "credentials"),
    (offer(account="nobody"), "credentials"),
    (offer(trader="t2"), "trader"),               # t2 holds the right token for acc1 but is not its trader
    (offer(symbol="ACME"), "symbol"),
    (offer(qty=1100), "funds"),                   # 1100 x 100 > the 1000 x 100 the account has
    (offer(side=SELL, qty=600), "holdings"),
])
def test_refused_offers_are_counted_with_their_reason(bad, reason):
    adm = Admission(config())
    assert adm.check(bad, 0) == reason
    assert adm.rejected == {reason: 1} and not adm.admitted
    assert adm.check(offer(seq=2), 0) is None     # the account itself is untouched by the refusal


def test_admitted_offers_reserve_cash_and_shares_until_they_run_out():
    adm = Admission(config(funds=3 * PRICE * 100, rate=0))
    assert [adm.check(offer(seq=i), i) for i in (1, 2, 3, 4)] == [None, None, None, "funds"]
    assert adm.balance("acc1")[0] == 0
    assert [adm.check(offer(seq=10 + i, side=SELL, qty=200), 0) for i in (1, 2, 3)] == [None, None, "holdings"]
    assert adm.balance("acc1")[1] == {"IBM": 100}
    # two traders of one account draw on the same balance
    assert adm.check(offer(seq=1, trader="t1b", side=SELL, qty=100), 0) is None
    assert adm.balance("acc1")[1] == {"IBM": 0}


def test_rate_limit_allows_a_burst_then_the_sustained_rate():
    adm = Admission(config(rate=10.0, burst=3))
    verdicts = [adm.check(offer(seq=i), 0) for i in range(1, 6)]
    assert verdicts == [None, None, None, "rate", "rate"]
    assert adm.check(offer(seq=6), NS // 20) == "rate"          # 0.05 s: half a token back
    assert adm.check(offer(seq=7), NS // 10) is None            # 0.1 s: one token back
    assert adm.check(offer(seq=1, trader="t2", account="acc2"), 0) is None   # other accounts unaffected
    assert adm.rejected == {"rate": 3}


def test_nothing_is_admitted_twice():
    adm = Admission(config())
    assert adm.check(offer(seq=1), 0) is None
    assert adm.check(offer(seq=1), 10 * NS) == "duplicate"
    assert adm.admitted == {("t1", 1)}


offer_draws = st.builds(
    lambda seq, trader, acct, good, side, qty, price: offer(
        seq=seq, trader=trader, account=acct, side=side, qty=qty, price=price,
        token=None if good else "x" * 32),
    st.integers(1, 30), st.sampled_from(["t1", "t1b", "t2"]), st.sampled_from(["acc1", "acc2", "nobody"]),
    st.booleans(), st.sampled_from([BUY, SELL]), st.integers(1, 400), st.integers(1, 3 * PRICE))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(offer_draws, st.integers(0, NS // 4)), max_size=60),
       st.floats(0, 50), st.integers(1, 5))
def test_admission_never_admits_beyond_credentials_balance_rate_or_twice(draws, rate, burst):
    cfg = config(funds=PRICE * 100, holdings=300, rate=rate, burst=burst)
    adm = Admission(cfg)
    now, admitted = 0, []
    for o, gap in draws:
        now += gap
        verdict = adm.check(o, now)
        assert verdict is None or verdict in adm.rejected
        if verdict is None:
            admitted.append((o, now))
    assert sum(adm.rejected.values()) + len(admitted) == len(draws)
    keys = [o.key for o, _ in admitted]
    assert len(keys) == len(set(keys))
    for o, _ in admitted:
        acc = cfg.accounts.get(o.account)
        assert acc is not None and o.trader in acc.traders and o.token == account_token(SECRET, o.account)
    for name, acc in cfg.accounts.items():
        mine = [(o, t) for o, t in admitted if o.account == name]
        assert sum(o.value for o, _ in mine if o.side == BUY) <= acc.funds
        assert sum(o.qty for o, _ in mine if o.side == SELL) <= acc.holdings["IBM"]
        if rate > 0:   # token bucket: in any window [a, b] at most burst + rate (b - a) admitted
            times = [t for _, t in mine]
            for i, a in enumerate(times):
                for j in range(i, len(times)):
                    assert j - i + 1 <= burst + rate * (times[j] - a) / NS + 1e-9


# ----------------------------------------------------------------------------- wire


# Strings are at most MAX_STRING (64) bytes encoded: 16 characters of up to 4 UTF-8 bytes each.
@given(st.builds(Offer, trader=st.text(max_size=10), seq=st.integers(1, 2**62), side=st.sampled_from([BUY, SELL]),
                 symbol=st.text(max_size=8), price=st.integers(1, 2**62), qty=st.integers(1, 2**31),
                 exchange=st.text(max_size=10), account=st.text(max_size=10), token=st.text(max_size=16),
                 decision=st.integers(-1, 2**31 - 1), pair=st.text(max_size=8), decided_ns=st.integers(0, 2**62),
                 portal=st.text(max_size=10)))
def test_offers_survive_the_wire(o):
    assert offers.decode(o.encode()) == o


@given(st.binary(max_size=120))
def test_garbage_is_an_offer_decode_error_never_a_crash(data):
    try:
        offers.decode(data)
    except offers.OfferDecodeError:
        pass


def test_truncated_offer_is_refused_as_malformed():
    data = offer().encode()
    with pytest.raises(offers.OfferDecodeError):
        offers.decode(data[:-3])
    entry = OrderEntry(Admission(config()))
    assert entry.admit(data[:-3], 0) is None
    ev = entry.events.popleft()
    assert (ev.kind, ev.detail["reason"], entry.malformed) == (Kind.OFFER_REJECT, "malformed", 1)


# ----------------------------------------------------------------------------- portal and exchange


def _drain(core) -> list:
    out = []
    while (ev := core.next_event()) is not None:
        out.append(ev)
    return out


def test_portal_publishes_only_admitted_offers_into_the_ring_without_credentials():
    source = SourceCore("sp1", [0], timing(), [], {0: "rp1"})
    portal = PortalCore("sp1", source, OrderEntry(Admission(config())), {"IBM": 0})
    kinds = []
    for data in (offer(seq=1).encode(), offer(seq=2, token="bad").encode(),
                 b"\xa5 not an rmp frame either"):   # the last goes to the source core
        portal.receive_datagram(data, "t1", 0)
        kinds += [(e.kind, e.detail.get("reason")) for e in _drain(portal) if e.kind != Kind.CTRL_SENT]
    assert kinds == [(Kind.OFFER_ADMIT, None), (Kind.SEND, None), (Kind.OFFER_REJECT, "credentials")]
    sent = portal.datagrams_to_send(0)
    assert len(sent) == 1 and sent[0][1] == Group("rmp/0")
    data = wire.decode(sent[0][0])
    published = offers.decode(data.payload)
    assert (published.trader, published.seq, published.token, published.portal) == ("t1", 1, "", "sp1")
    assert portal.source.malformed == 1
    assert portal.get_timer() is not None          # re-sent until acknowledged, like any source message


def test_direct_exchange_executes_in_arrival_order_and_matches():
    ex = ExchangeCore("floor", entry=OrderEntry(Admission(config())))
    ex.receive_datagram(offer(seq=1, side=SELL, trader="t1").encode(), "t1", 0)
    ex.receive_datagram(offer(seq=1, side=SELL, trader="t2", account="acc2").encode(), "t2", 1)
    ex.receive_datagram(offer(seq=2, side=BUY, trader="t2", account="acc2").encode(), "t2", 2)
    evs = _drain(ex)
    execs = [(e.src, e.src_seq, e.gseq) for e in evs if e.kind == Kind.OFFER_EXEC]
    assert execs == [("t1", 1, 1), ("t2", 1, 2), ("t2", 2, 3)]
    trades = [e.detail for e in evs if e.kind == Kind.TRADE]
    assert [(t["maker"], t["taker"], t["qty"]) for t in trades] == [("t1:1", "t2:2", 100)]   # time priority


def test_exchange_ignores_offers_directed_elsewhere():
    ex = ExchangeCore("floor", entry=OrderEntry(Admission(config())))
    ex.receive_datagram(dataclasses.replace(offer(), exchange="other").encode(), "t1", 0)
    ex.receive_datagram(dataclasses.replace(offer(seq=2), exchange="").encode(), "t1", 0)   # open: every exchange
    assert [e.src_seq for e in _drain(ex) if e.kind == Kind.OFFER_EXEC] == [2]


def test_exchange_takes_offers_one_way_only():
    with pytest.raises(ValueError):
        ExchangeCore("floor")


def test_a_broker_forwards_what_it_admits_under_its_own_account():
    # behind the broker: t1 (account acc1 at the broker); at the S_P: one account, the broker's
    broker = BrokerCore("ss1", OrderEntry(Admission(config())), "sp1", "ss1", account_token(SECRET, "ss1"))
    at_portal = AdmissionConfig(SECRET, {"ss1": Account(frozenset({"t1"}), PRICE * 150, {"IBM": 0})},
                                frozenset({"IBM"}), 0, 1)
    portal = PortalCore("sp1", SourceCore("sp1", [0], timing(), [], {0: "rp1"}), OrderEntry(Admission(at_portal)),
                        {"IBM": 0})
    broker.receive_datagram(offer(seq=1).encode(), "t1", 0)
    broker.receive_datagram(offer(seq=2, token="bad").encode(), "t1", 0)          # the broker refuses it
    broker.receive_datagram(offer(seq=3).encode(), "t1", 0)
    forwarded = broker.datagrams_to_send(0)
    assert [d for _, d in forwarded] == [Unicast("sp1")] * 2
    assert [(e.kind, e.detail.get("reason")) for e in _drain(broker)] == [
        (Kind.OFFER_ADMIT, None), (Kind.OFFER_REJECT, "credentials"), (Kind.OFFER_ADMIT, None)]
    for data, _ in forwarded:
        assert offers.decode(data).account == "ss1"
        portal.receive_datagram(data, "ss1", 0)
    verdicts = [(e.kind, e.src_seq, e.detail.get("reason")) for e in _drain(portal)
                if e.kind in (Kind.OFFER_ADMIT, Kind.OFFER_REJECT)]
    # the broker's account at the S_P holds cash for one offer of 100 x 100, not two
    assert verdicts == [(Kind.OFFER_ADMIT, 1, None), (Kind.OFFER_REJECT, 3, "funds")]
    # a trader cannot skip the broker: its own credential is not the broker account's
    portal.receive_datagram(offer(seq=4, account="ss1", token=account_token(SECRET, "acc1")).encode(), "t1", 0)
    assert _drain(portal)[-1].detail["reason"] == "credentials"


def test_both_traders_of_a_pair_follow_one_seeded_schedule():
    a = paired_plan(7, "d05", 50, 10**9, 6 * 10**8, "IBM", PRICE, 100)
    assert a == paired_plan(7, "d05", 50, 10**9, 6 * 10**8, "IBM", PRICE, 100)
    assert a != paired_plan(8, "d05", 50, 10**9, 6 * 10**8, "IBM", PRICE, 100)
    assert [p.decision for p in a] == list(range(50))
    assert all(10**9 + k * 6 * 10**8 <= p.t_ns < 10**9 + (k + 1) * 6 * 10**8 for k, p in enumerate(a))
    assert [p.side for p in a[:4]] == [SELL, BUY, SELL, BUY]
    r = random_plan(7, "t9", 5.0, 0, 10 * 10**9, ["IBM", "ACME"], PRICE, 100)
    assert 20 < len(r) < 90 and r == random_plan(7, "t9", 5.0, 0, 10 * 10**9, ["IBM", "ACME"], PRICE, 100)
