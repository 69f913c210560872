"""Unified orders (seed 7.2, issue 13) on simulated runs of the shipped experiments.

- Fair entry: sent directly, the floor executes the near trader's offer first almost always;
  through the rotating token, about half the time, at every distance (orders_summary explains).
- Admission on a run: wrong credentials, too little money or stock and too many offers per
  second are refused and counted by reason; nothing is admitted or executed twice; a trader
  behind a broker S_S gets in through the broker's account.
- Exchanges execute the ring's order: rebuilt from what the portals and the ring report (not
  from the exchanges' own logs), the sequence of offers directed to each exchange, replayed into
  fresh order books, gives exactly the executions and trades each exchange reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rmptwin.analysis.orders_summary import figures
from rmptwin.core.events import Kind
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.sim.simulate import simulate
from rmptwin.venue.orderbook import BUY, SELL, OrderBook

REPO = Path(__file__).resolve().parents[2]
SEEDS = (1, 2, 3)


def _with(loaded, seed=None, pairs_only=False):
    exp = loaded.experiment if seed is None else loaded.experiment.model_copy(update={"seed": seed})
    topo = loaded.topology
    if pairs_only:   # the fairness claim needs only the pairs; the admission traders cost time
        topo = topo.model_copy(update={"hosts": [h for h in topo.hosts if h.role != "trader" or h.pair]})
    return loaded.model_copy(update={"experiment": exp, "topology": topo})


def _summary(loaded):
    events = simulate(loaded).events.to_pandas()
    return figures(events, loaded.topology, loaded.experiment.orders.entry), events


@pytest.fixture(scope="module")
def fairness():
    out = {}
    for name in ("unified-orders", "unified-orders-direct"):
        loaded = load_experiment(REPO / "experiments" / f"{name}.yaml")
        out[name] = [_summary(_with(loaded, seed, pairs_only=True))[0] for seed in SEEDS]
    return out


@pytest.fixture(scope="module")
def full_run():
    loaded = load_experiment(REPO / "experiments" / "unified-orders.yaml")
    summary, events = _summary(loaded)
    return loaded, summary, events


def test_direct_entry_favours_the_trader_in_the_floors_city(fairness):
    for s in fairness["unified-orders-direct"]:
        assert set(s["near_first_fraction"]) == {"5", "20", "45", "80"}
        assert all(n == 200 for n in s["near_first_decisions"].values())
        assert all(f >= 0.9 for f in s["near_first_fraction"].values()), s["near_first_fraction"]


def test_through_the_ring_who_goes_first_is_a_coin_toss_at_every_distance(fairness):
    for s in fairness["unified-orders"]:
        assert all(n == 200 for n in s["near_first_decisions"].values())
        assert all(abs(f - 0.5) <= 0.15 for f in s["near_first_fraction"].values()), s["near_first_fraction"]
        assert s["exchanges_agree"] is True and s["offers_admitted_twice"] == 0


def test_admission_on_a_run_refuses_and_counts_by_reason(full_run):
    loaded, s, events = full_run
    assert {"credentials", "funds", "holdings", "rate"} <= set(s["offers_rejected"])
    assert s["offers_admitted"] + s["offers_rejected_total"] == s["offers_sent"]
    assert s["offers_admitted_twice"] == 0
    admitted = events[events.kind == Kind.OFFER_ADMIT]
    assert "tbad" not in set(admitted.src)              # a wrong token never gets in
    assert set(events[(events.kind == Kind.OFFER_REJECT) & (events.src == "tbad")].detail.map(
        lambda d: json.loads(d)["reason"])) == {"credentials"}
    # what tpoor got in is within what it holds (50,000 cash: 5 buys of 100 x 100; 300 shares of each)
    poor = [json.loads(d) for d in events[(events.kind == Kind.OFFER_SENT) & (events.src == "tpoor")].detail]
    poor_admitted = set(admitted[admitted.src == "tpoor"].src_seq)
    sent = dict(zip(events[(events.kind == Kind.OFFER_SENT) & (events.src == "tpoor")].src_seq, poor))
    assert sum(sent[k]["qty"] for k in poor_admitted if sent[k]["side"] == "buy") <= 500
    for symbol in ("IBM", "ACME"):   # 300 shares of each listed symbol
        assert sum(sent[k]["qty"] for k in poor_admitted
                   if sent[k]["side"] == "sell" and sent[k]["symbol"] == symbol) <= 300
    assert s["offers_executed"] == {"floor": s["offers_admitted"]}   # every admitted offer executed, once
    # tbrok enters through the broker S_S: its offers are forwarded, admitted by the S_P, executed
    forwarded = events[(events.kind == Kind.OFFER_ADMIT) & (events.node == "sshnl")]
    assert s["offers_forwarded"] == len(forwarded) > 0 and set(forwarded.src) == {"tbrok"}
    executed = events[(events.kind == Kind.OFFER_EXEC) & (events.src == "tbrok")]
    assert set(executed.src_seq) == set(admitted[admitted.src == "tbrok"].src_seq) == set(forwarded.src_seq)


def ring_sequence(events) -> list[dict]:
    """The offers in the ring's order, from the portals' admissions and acknowledgements and the
    traders' own records: never from an exchange."""
    ev = events
    sent = {(s, int(q)): json.loads(d) for s, q, d in
            zip(ev[ev.kind == Kind.OFFER_SENT].src, ev[ev.kind == Kind.OFFER_SENT].src_seq,
                ev[ev.kind == Kind.OFFER_SENT].detail)}
    adm = ev[(ev.kind == Kind.OFFER_ADMIT) & (ev.role == "portal")]
    by_msg = {(n, json.loads(d)["msg"]): (s, int(q)) for n, s, q, d in zip(adm.node, adm.src, adm.src_seq, adm.detail)}
    acked = ev[(ev.kind == Kind.SRC_ACKED) & ev.node.isin({n for n, _ in by_msg})]
    seq = sorted((int(g), by_msg[(n, int(m))]) for n, m, g in zip(acked.node, acked.src_seq, acked.gseq))
    assert [g for g, _ in seq] == list(range(1, len(seq) + 1))   # one stripe, no hole
    return [{"key": key, **sent[key]} for _, key in seq]


def replay(sequence: list[dict], exchange: str) -> tuple[list, list]:
    """(offers executed, trades) of ``exchange`` replaying its part of the sequence into fresh books."""
    mine = [o for o in sequence if o["exchange"] in ("", exchange)]
    books: dict[str, OrderBook] = {}
    trades = []
    for pos, o in enumerate(mine, 1):
        book = books.setdefault(o["symbol"], OrderBook(o["symbol"]))
        for taker, maker, price, qty, _ in book.submit(pos, BUY if o["side"] == "buy" else SELL, o["qty"], o["price"]):
            trades.append((taker, maker, price, qty))
    return [o["key"] for o in mine], trades


def reported(events, exchange: str) -> tuple[list, list]:
    ex = events[events.node == exchange]
    execs = ex[ex.kind == Kind.OFFER_EXEC].sort_values("gseq")
    trades = [(int(g), d["maker_position"], d["price"], d["qty"]) for g, d in
              zip(ex[ex.kind == Kind.TRADE].gseq, ex[ex.kind == Kind.TRADE].detail.map(json.loads))]
    return list(zip(execs.src, execs.src_seq.astype(int))), trades


def test_the_floor_executes_the_rings_order_and_its_trades_replay(full_run):
    _, s, events = full_run
    seq = ring_sequence(events)
    want_execs, want_trades = replay(seq, "floor")
    got_execs, got_trades = reported(events, "floor")
    assert len(want_execs) == s["offers_admitted"] and got_execs == want_execs
    assert want_trades and got_trades == want_trades


@pytest.fixture(scope="module")
def two_exchanges(tmp_path_factory):
    """A second exchange at the far end, lossy links: each trader directed to one exchange or open."""
    d = tmp_path_factory.mktemp("uo2")
    topo = yaml.safe_load((REPO / "topologies" / "orders-line.yaml").read_text())
    for link in topo["links"]:
        link["loss"] = 0.02
    topo["hosts"].append({"name": "sgpx", "role": "exchange", "switch": "sgp", "regions": ["asia"]})
    for h in topo["hosts"]:
        if h["role"] == "exchange":   # the ring repairs its own losses; these the exchanges must
            h["link"] = {"delay_ms": 0.1, "loss": 0.05}
        if h["name"] in ("tn80", "tf80"):
            h["exchange"] = "sgpx"
        if h["name"] == "tfast":
            h["rate_per_s"] = 10
    (d / "topo.yaml").write_text(yaml.safe_dump(topo))
    exp = yaml.safe_load((REPO / "experiments" / "unified-orders.yaml").read_text())
    exp.update(topology="topo.yaml", duration_s=25.0)
    exp["orders"]["decisions"] = 30
    (d / "exp.yaml").write_text(yaml.safe_dump(exp))
    loaded = load_experiment(d / "exp.yaml")
    return loaded, simulate(loaded).events.to_pandas()


def test_every_exchange_executes_the_rings_order_under_loss(two_exchanges):
    loaded, events = two_exchanges
    s = figures(events, loaded.topology, "rmp")
    assert s["exchanges_agree"] is True and s["offers_admitted_twice"] == 0
    seq = ring_sequence(events)
    assert any(o["exchange"] == "" for o in seq) and any(o["exchange"] == "sgpx" for o in seq)
    for exchange in ("floor", "sgpx"):
        want_execs, want_trades = replay(seq, exchange)
        got_execs, got_trades = reported(events, exchange)
        assert got_execs == want_execs and got_trades == want_trades
    repaired = events[(events.kind == Kind.CUST_RECV) & events.node.isin(["floor", "sgpx"])].detail.map(
        lambda d: json.loads(d)["repair"])
    assert repaired.any()   # the loss was real: exchanges recovered offers they missed


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("edit, message", [
    (lambda t, e: t["hosts"][9].pop("portal"), "needs portal"),
    (lambda t, e: t["hosts"][9].update(exchange="rpnyc"), "names no exchange host"),
    (lambda t, e: t["hosts"][0].update(regions=[]), "needs regions"),
    (lambda t, e: e.pop("orders"), "needs the experiment's orders section"),
])
def test_bad_orders_setups_are_one_line_errors(tmp_path, edit, message):
    topo = yaml.safe_load((REPO / "topologies" / "orders-line.yaml").read_text())
    exp = yaml.safe_load((REPO / "experiments" / "unified-orders.yaml").read_text())
    assert topo["hosts"][9]["name"] == "tn05" and topo["hosts"][0]["name"] == "floor"
    edit(topo, exp)
    (tmp_path / "topo.yaml").write_text(yaml.safe_dump(topo))
    exp["topology"] = "topo.yaml"
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    with pytest.raises(UserError) as e:
        simulate(load_experiment(tmp_path / "exp.yaml"))
    assert message in str(e.value) and "\n" not in str(e.value)
