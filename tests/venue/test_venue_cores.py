"""Venue cores driven by hand: the seed's p/q total-order example, random local orders,
the sequencer's window, gateway validation, HR duplicates."""

from __future__ import annotations

import random

from rmptwin.core.events import Kind
from rmptwin.core.sansio import Group, Unicast
from rmptwin.venue import wire
from rmptwin.venue.execution_venue import SEQ_PROBE, VenueConfig, VenueCore
from rmptwin.venue.gateway import GatewayConfig, GatewayCore
from rmptwin.venue.history import HistoryConfig, HistoryCore
from rmptwin.venue.orderbook import BUY, LIMIT, SELL
from rmptwin.venue.sequencer import CasLog, CasProxyCore, SequencerConfig, SequencerCore
from rmptwin.venue.stores import MemoryGatewayLog, MemoryHistoryStore
from rmptwin.venue.wire import Order, Request, seq_ranges

GWS = ["gw1", "gw2"]


def events(core):
    out = []
    while (e := core.next_event()) is not None:
        out.append(e)
    return out


def make_ev(ev_id, **kw):
    kw.setdefault("sequencer", "seq")
    config = VenueConfig(ev_id=ev_id, symbols=("IBM",), gateways=tuple(GWS), history=None, durable=False,
                         checkpoint_every=kw.pop("checkpoint_every", 1000), **kw)
    return VenueCore(config, lambda: 1)


def req(gw, seq, side, qty, price):
    oid = (gw + 1) << 40 | seq
    return Request(gw, seq, 0, Order(wire.NEW, LIMIT, side, "IBM", oid, qty, price))


def settle(ev, now):
    """Let an EV execute everything it can (service time is 1 ns)."""
    for _ in range(1000):
        t = ev.get_timer()
        if t is None or t > now:
            return
        ev.handle_timer(now)


def proposals(ev, now):
    return [d for d, dest in ev.datagrams_to_send(now) if dest == Unicast("seq")]


def positions(evs):
    return [(e.gseq, e.src, e.src_seq) for e in evs if e.kind == Kind.SEQ_POSITION]


def test_seed_p_q_example_two_evs_agree_on_the_total_order():
    """GW1 sends p0..p2, GW2 q0..q2; EV1 sees q0 q1 p0 p1 q2 p2, EV2 sees p0 p1 q0 p2 q1 q2.
    With the seed's winners (EV1, EV2, EV2, EV2, ...) the total order is q0 p0 p1 p2 q1 q2."""
    p = [req(0, i, BUY, 100, 1_000_000 - 100 * i) for i in range(3)]
    q = [req(1, i, SELL, 60, 999_900 + 100 * i) for i in range(3)]
    ev1, ev2 = make_ev(0, lookahead=1, batch=1), make_ev(1, lookahead=1, batch=1)
    seq = SequencerCore(SequencerConfig(window=100))
    now = 1000
    for r in (q[0], q[1], p[0], p[1], q[2], p[2]):
        ev1.receive_datagram(wire.request_frame(r), "gw", now)
    for r in (p[0], p[1], q[0], p[2], q[1], q[2]):
        ev2.receive_datagram(wire.request_frame(r), "gw", now)
    winners = [ev1, ev2, ev2, ev2, ev1, ev2]
    for winner in winners:
        now += 1000
        loser = ev2 if winner is ev1 else ev1
        for ev, name in ((winner, "ev-w"), (loser, "ev-l")):
            for d in proposals(ev, now):
                seq.receive_datagram(d, name, now)
        for d, dest in seq.datagrams_to_send(now):
            (winner if dest.node == "ev-w" else loser).receive_datagram(d, "seq", now)
        now += 1000
        settle(ev1, now)
        settle(ev2, now)
    e1, e2 = events(ev1), events(ev2)
    order = [(0, "gw2", 0), (1, "gw1", 0), (2, "gw1", 1), (3, "gw1", 2), (4, "gw2", 1), (5, "gw2", 2)]
    assert positions(e1) == order
    assert positions(e2) == order
    assert [e for e in e1 if e.kind == Kind.TRADE] == [e for e in e2 if e.kind == Kind.TRADE]
    assert any(e.kind == Kind.TRADE for e in e1)     # the example's orders do cross
    assert ev1.state_hash() == ev2.state_hash()


def test_random_local_orders_and_races_give_identical_trades_and_state():
    rng = random.Random(7)
    reqs = [req(g, i, rng.randrange(2), rng.randint(1, 5) * 100, 1_000_000 + rng.randint(-5, 5) * 100)
            for g in range(2) for i in range(150)]
    evs = [make_ev(i, lookahead=rng.choice([1, 4, 16]), batch=rng.choice([1, 3, 8])) for i in range(3)]
    seq = SequencerCore(SequencerConfig(window=10_000))
    streams = []
    for _ in evs:   # per gateway FIFO, gateways interleaved differently at each EV
        a, b = [r for r in reqs if r.gw == 0], [r for r in reqs if r.gw == 1]
        mixed = []
        while a or b:
            src = a if (a and (not b or rng.random() < 0.5)) else b
            mixed.append(src.pop(0))
        streams.append(mixed)
    now = 0
    logs = [[] for _ in evs]
    inbox = []
    while any(streams) or inbox or any(ev.get_timer() is not None for ev in evs) or \
            any(ev.next_pos < len(reqs) for ev in evs):
        now += 10
        i = rng.randrange(len(evs))
        if streams[i] and rng.random() < 0.6:
            evs[i].receive_datagram(wire.request_frame(streams[i].pop(0)), "gw", now)
        for k, ev in enumerate(evs):
            settle(ev, now)
            inbox.extend((d, f"ev{k}") for d in proposals(ev, now))
        rng.shuffle(inbox)
        keep = []
        for d, name in inbox:
            if rng.random() < 0.5:
                seq.receive_datagram(d, name, now)
            else:
                keep.append((d, name))
        inbox = keep
        for d, dest in seq.datagrams_to_send(now):
            evs[int(dest.node[2:])].receive_datagram(d, "seq", now)
        for k, ev in enumerate(evs):
            logs[k].extend(events(ev))
        assert now < 10_000_000, "venues stopped making progress"
    ref = positions(logs[0])
    assert len(ref) == len(reqs) and len({(s, q) for _, s, q in ref}) == len(reqs)
    for log in logs[1:]:
        assert positions(log) == ref
        assert [e for e in log if e.kind == Kind.TRADE] == [e for e in logs[0] if e.kind == Kind.TRADE]
    assert len({ev.state_hash() for ev in evs}) == 1


def test_cas_log_window_contiguity_and_too_far_behind():
    log = CasLog(window=4)
    assert log.propose(0, [(0, 0), (0, 1)]) == (wire.WON, 2, [(0, 0), (0, 1)])
    assert log.propose(0, [(1, 0)]) == (wire.LOST, 2, [(0, 0), (0, 1)])   # loser learns the winners
    assert log.propose(5, [(1, 0)])[0] == wire.LOST and log.get(5) is None  # no holes
    assert log.propose(2, [(0, 0), (1, 0)]) == (wire.WON, 3, [(1, 0)])       # (0,0) is never placed twice
    log.propose(3, [(1, i) for i in range(1, 5)])
    assert log.next == 7 and log.low == 3
    assert log.propose(1, [(2, 0)])[0] == wire.TOO_FAR


def test_follower_out_of_the_window_reports_soft_failure_and_resyncs():
    seq = SequencerCore(SequencerConfig(window=2))
    for i in range(5):
        seq.log.propose(i, [(0, i)])
    ev = make_ev(0)
    ev.receive_datagram(wire.request_frame(req(0, 0, BUY, 1, 1_000_000)), "gw", 10)
    for d in proposals(ev, 10):
        seq.receive_datagram(d, "ev", 10)
    for d, _ in seq.datagrams_to_send(10):
        ev.receive_datagram(d, "seq", 11)
    assert Kind.SEQ_TOO_FAR in [e.kind for e in events(ev)]
    assert Kind.SEQ_TOO_FAR in [e.kind for e in events(seq)]


class DeferredCas:
    """A CAS memory outside the core that answers only when told to (as etcd does, later)."""

    def __init__(self, window: int) -> None:
        self.log = CasLog(window)
        self.asked: list[tuple[int, int, list]] = []

    def submit(self, request_id, n, keys, owner) -> None:
        self.asked.append((request_id, n, list(keys)))

    def answer_all(self, proxy: CasProxyCore, now: int) -> None:
        asked, self.asked = self.asked, []
        for request_id, n, keys in asked:
            proxy.receive_answer(request_id, *self.log.propose(n, keys), now)


def test_sequencer_proxy_never_waits_and_decides_what_the_outside_memory_answers():
    cas = DeferredCas(window=100)
    proxy = CasProxyCore(cas)
    evs = {"ev1": make_ev(0), "ev2": make_ev(1)}
    reqs = [req(0, k, BUY if k % 2 else SELL, 1, 1_000_000) for k in range(3)]
    for ev, stream in zip(evs.values(), (reqs, reqs[::-1])):   # the two EVs get them in opposite orders
        for r in stream:
            ev.receive_datagram(wire.request_frame(r), "gw1", 10)
    now = 10
    for round_ in range(10):
        for name, ev in evs.items():
            for d in proposals(ev, now):
                proxy.receive_datagram(d, name, now)
        if round_ == 0:
            proxy.receive_datagram(b"junk", "ev1", now)
            assert proxy.datagrams_to_send(now) == [] and proxy.malformed == 1   # nothing decided before the answer
            assert [(n, keys) for _, n, keys in cas.asked] == [(0, [(0, 0)]), (0, [(0, 2)])]
        cas.answer_all(proxy, now + 5)
        out = proxy.datagrams_to_send(now + 5)
        if round_ == 0:   # the first proposal to reach the memory won; the other learns what stands there
            assert [dest for _, dest in out] == [Unicast("ev1"), Unicast("ev2")]
            assert [wire.decode(d)[1] for d, _ in out] == [(wire.WON, 0, 1, [(0, 0)]), (wire.LOST, 0, 1, [(0, 0)])]
            proxy.receive_answer(99, wire.WON, 1, [(0, 1)], now)   # an answer nobody asked for: ignored
            assert proxy.datagrams_to_send(now) == []
        for d, dest in out:
            evs[dest.node].receive_datagram(d, "seq", now + 10)
        now += 100
        for ev in evs.values():
            settle(ev, now)
    order = positions(events(evs["ev1"]))
    assert order == positions(events(evs["ev2"]))                  # one total order at both EVs
    assert [p for p, _, _ in order] == [0, 1, 2] and order[0] == (0, "gw1", 0)
    assert sorted(s for _, _, s in order) == [0, 1, 2]                # every request once


def test_gateway_rejects_malformed_orders_with_a_reason_and_never_numbers_them():
    log = MemoryGatewayLog()
    gw = GatewayCore(GatewayConfig(gw_id=0, venues=("ev1", "ev2"), symbols=("IBM",), tick=100, fsync_ns=50), log)
    bad = [
        (Order(wire.NEW, LIMIT, BUY, "IBM", 1, -5, 1_000_000), "not positive"),
        (Order(wire.NEW, LIMIT, BUY, "ZZZZ", 2, 5, 1_000_000), "unknown symbol"),
        (Order(wire.NEW, LIMIT, SELL, "IBM", 3, 5, 1_000_050), "tick"),
        (Order(wire.NEW, LIMIT, SELL, "IBM", 4, 0, 1_000_000), "not positive"),
    ]
    for i, (o, _) in enumerate(bad):
        gw.receive_datagram(wire.order_frame(i, 0, o), "cl1", 10)
    gw.receive_datagram(b"\x01\x01\x00\x00\x00\x05abc", "cl1", 10)   # truncated frame
    gw.receive_datagram(wire.order_frame(9, 0, Order(wire.NEW, LIMIT, BUY, "IBM", 9, 5, 1_000_000)), "cl1", 10)
    evs = events(gw)
    rejects = [e for e in evs if e.kind == Kind.ORDER_REJECT]
    assert len(rejects) == 5 and gw.rejected == 4 and gw.malformed == 1
    for e, (_, why) in zip(rejects, bad):
        assert why in e.detail["reason"]
    acks = [wire.decode(d)[1] for d, dest in gw.datagrams_to_send(10) if dest == Unicast("cl1")]
    assert [a[1] for a in acks] == [wire.REJECTED] * 4 and all(a[3] for a in acks)
    # only the good order is numbered, logged, and (after the fsync) multicast
    assert list(log.requests) == [0]
    gw.handle_timer(gw.get_timer())
    sent = [wire.decode(d)[1] for d, dest in gw.datagrams_to_send(100) if dest == Group(wire.REQUEST_GROUP)]
    assert [(r.gw, r.gw_seq, r.order.oid) for r in sent] == [(0, 0, 9)]


class _LogOnItsWay(MemoryGatewayLog):
    """A gateway log whose appended batch is not on disk until the test says so (a log that
    syncs in the background: the GatewayLog protocol's ``synced``)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_disk = True

    def append(self, batch) -> None:
        super().append(batch)
        self.on_disk = False

    def synced(self) -> bool:
        return self.on_disk


def test_a_gateway_sends_nothing_until_its_log_is_on_disk():
    # the core must not multicast (or acknowledge) a request before the log holds it
    log = _LogOnItsWay()
    gw = GatewayCore(GatewayConfig(gw_id=0, venues=("ev1",), symbols=("IBM",), fsync_ns=0), log)
    gw.receive_datagram(wire.order_frame(0, 0, Order(wire.NEW, LIMIT, BUY, "IBM", 1, 5, 1_000_000)), "c", 10)
    assert not log.synced() and gw.get_timer() is None      # nothing due while the sync runs
    gw.handle_timer(20)                                    # a spurious wake-up changes nothing
    assert gw.datagrams_to_send(20) == [] and gw.accepted == 0
    log.on_disk = True
    gw.handle_timer(gw.get_timer())
    sent = [dest for _, dest in gw.datagrams_to_send(30)]
    assert Group(wire.REQUEST_GROUP) in sent and gw.accepted == 1
    assert log.unfinished() == [(0, log.get(0))]


def test_gateway_replays_unfinished_requests_after_restart():
    log = MemoryGatewayLog()
    config = GatewayConfig(gw_id=0, venues=("ev1",), symbols=("IBM",), fsync_ns=10)
    gw = GatewayCore(config, log)
    for i in range(3):
        gw.receive_datagram(wire.order_frame(i, 0, Order(wire.NEW, LIMIT, BUY, "IBM", i, 5, 1_000_000)), "c", 0)
    for _ in range(2):                   # group fsyncs: [0], then [1, 2]
        gw.handle_timer(gw.get_timer())
    assert gw.accepted == 3
    gw.datagrams_to_send(20)
    gw.receive_datagram(wire.complete_frame(wire.T_COMPLETE, 1, 0, 0), "ev1", 30)
    assert [e.src_seq for e in events(gw) if e.kind == Kind.ORDER_DONE] == [1]
    again = GatewayCore(config, log, recovering=True)
    again.handle_timer(again.get_timer())
    replayed = [wire.decode(d)[1].gw_seq for d, dest in again.datagrams_to_send(30) if dest == Group(wire.REQUEST_GROUP)]
    assert replayed == [0, 2] and again.next_seq == 3


def test_history_ignores_duplicate_positions_and_acknowledges_after_commit():
    store = MemoryHistoryStore()
    hr = HistoryCore(HistoryConfig(commit_ns=100), store)
    r0, r1 = req(0, 0, BUY, 1, 1_000_000), req(0, 1, SELL, 1, 1_000_000)
    hr.receive_datagram(wire.store_frame(0, [(0, r0, []), (1, r1, [(2, 1, 1_000_000, 1, SELL)])]), "ev1", 0)
    hr.receive_datagram(wire.store_frame(1, [(0, r0, []), (1, r1, [(2, 1, 1_000_000, 1, SELL)])]), "ev2", 5)
    assert hr.datagrams_to_send(5) == []              # nothing acknowledged before the commit
    hr.handle_timer(100)
    out = hr.datagrams_to_send(100)
    assert len(out) == 1 and out[0][1] == Group(wire.HARDENED_GROUP)
    upto, entries = wire.decode(out[0][0])[1]
    assert upto == 1 and [(n, r.key) for n, r in entries] == [(0, (0, 0)), (1, (0, 1))]
    assert hr.duplicates == 2 and store.commits == 1 and store.trade_count() == 1


def _route(cores: dict, sent: list, name: str, out, now: int) -> None:
    """Deliver ``out`` from core ``name`` to the cores it names (unicast or a group of EVs)."""
    for data, dest in out:
        sent.append((name, wire.decode(data)[0]))
        targets = [dest.node] if isinstance(dest, Unicast) else [n for n in cores if n.startswith("ev")]
        for t in targets:
            if t in cores and t != name:
                cores[t].receive_datagram(data, name, now)


def _run(cores: dict, sent: list, now: int) -> None:
    for _ in range(200):
        for name, core in cores.items():
            t = core.get_timer()
            if t is not None and t <= now:
                core.handle_timer(now)
            _route(cores, sent, name, core.datagrams_to_send(now), now)


def test_a_restarted_ev_asks_the_hr_and_the_sequencer_at_once_and_syncs_after_one_hr_answer():
    def ev(ev_id, recovering=False):
        config = VenueConfig(ev_id=ev_id, symbols=("IBM",), gateways=tuple(GWS), sequencer="seq", history="hr1",
                             durable=True, checkpoint_every=4)
        return VenueCore(config, lambda: 0, recovering=recovering)
    live, sent = ev(0), []
    cores = {"ev1": live, "seq": SequencerCore(SequencerConfig(window=100)),
             "hr1": HistoryCore(HistoryConfig(commit_ns=0), MemoryHistoryStore())}
    for i in range(10):
        live.receive_datagram(wire.request_frame(req(0, i, BUY if i % 2 else SELL, 1 + i, 1_000_000)), "gw1", i)
        _run(cores, sent, i)
    assert live.next_pos == 10 and cores["hr1"].top == 9
    new = cores["ev2"] = ev(1, recovering=True)
    first = [(dest, wire.decode(d)) for d, dest in new.datagrams_to_send(20)]
    assert [(dest, f[0]) for dest, f in first] == [(Unicast("seq"), wire.T_PROPOSE), (Unicast("hr1"), wire.T_CKPT_REQ)]
    assert first[0][1][1][1] == SEQ_PROBE                        # a read: where the sequencer stands
    for d, dest in [(wire.propose_frame(1, SEQ_PROBE, []), "seq"), (wire.ckpt_req_frame(1), "hr1")]:
        cores[dest].receive_datagram(d, "ev2", 20)
    sent.clear()
    _route(cores, sent, "hr1", cores["hr1"].datagrams_to_send(20), 20)   # checkpoint @7, then positions 8 and 9
    assert Kind.SYNC_DONE not in [e.kind for e in events(new)]            # the target is not known yet
    _route(cores, sent, "seq", cores["seq"].datagrams_to_send(20), 21)
    done = [e for e in events(new) if e.kind == Kind.SYNC_DONE]
    assert len(done) == 1 and done[0].detail["position"] == 9
    assert new.next_pos == live.next_pos and new.state_hash() == live.state_hash()
    _route(cores, sent, "ev2", new.datagrams_to_send(21), 21)
    assert ("ev2", wire.T_HARDENED_REQ) not in sent                   # one HR round trip, not two


def test_missing_bodies_are_asked_for_in_runs_per_gateway():
    assert seq_ranges([(1, 5), (0, 3), (0, 4), (1, 7), (0, 9)]) == [(0, 3, 4), (0, 9, 9), (1, 5, 5), (1, 7, 7)]
    assert seq_ranges([]) == []
