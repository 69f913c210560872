"""Customers, retransmit servers and the regional remulticast, driven through a tiny
in-test network (fixed delay, seeded per-receiver loss) around the real cores.

Expected values come from what the R_T released, never from the cores under test.
"""

from __future__ import annotations

import heapq
import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmptwin.core.sansio import Group, Unicast
from rmptwin.core.groups import region_group
from rmptwin.core.events import Kind
from rmptwin.factories.rmp import build_customer, build_retransmit
from rmptwin.spec.queries import customer_stripes
from rmptwin.rmp.moldudp64 import MoldPacket, MoldRequest, decode_packet
from rmptwin.rmp.remulticast import Remulticaster
from rmptwin.rmp.repair import FIRST_MOLD_SEQ
from rmptwin.core.striping import session_name
from rmptwin.rmp.moldudp64 import request_stripe
from rmptwin.spec import Experiment, LoadedExperiment, Topology
from rmptwin.core.trade_report import TradeReport

MS = 1_000_000


def make_loaded(customers=(), retransmits=(), rts=(), stripes=1, dn_ms=20.0, k_r=3):
    """Two regions (eu on s1, us on s2); R_T hosts given as (name, regions)."""
    hosts = [{"name": "src", "role": "source", "switch": "s1"}]
    for name, regions in rts:
        hosts.append({"name": name, "role": "primary", "switch": "s1", "regions": regions})
    for name, regions in retransmits:
        hosts.append({"name": name, "role": "retransmit", "switch": "s1", "regions": regions})
    for c in customers:
        hosts.append({"switch": "s2", "role": "customer", **c})
    topo = Topology.model_validate({
        "name": "t", "switches": ["s1", "s2"], "regions": {"eu": ["s1"], "us": ["s2"]},
        "links": [{"a": "s1", "b": "s2"}], "hosts": hosts})
    exp = Experiment.model_validate({
        "name": "e", "topology": "t.yaml", "workload": {"stripes": stripes},
        "protocol": {"dn_ms": dn_ms, "k_r": k_r, "p_ms": 0.0}})
    return LoadedExperiment(experiment=exp, topology=topo, path="/tmp/e.yaml")


def trade(i: int) -> bytes:
    return TradeReport(f"S{i % 7:04d}", 1_000_000 + i, 100 + i, "NYSE", i).encode(pad_to=64)


class FakeRT:
    """An R_T reduced to its remulticast half: releases ``schedule`` [(t_ns, gseq, payload)]."""

    def __init__(self, regions, stripe, schedule, heartbeat_ns=50 * MS):
        self.rm = Remulticaster(regions, stripe, heartbeat_ns=heartbeat_ns)
        self.schedule = list(schedule)
        self.crashed = False

    def groups(self):
        return frozenset()

    def receive_datagram(self, data, src, now):
        self._pending = getattr(self, "_pending", []) + self.rm.serve_rerequest(data, src)

    def datagrams_to_send(self, now):
        while self.schedule and self.schedule[0][0] <= now:
            _, g, p = self.schedule.pop(0)
            self.rm.release(g, p)
        out = getattr(self, "_pending", []) + self.rm.datagrams(now)
        self._pending = []
        return out

    def get_timer(self):
        times = [t for t in (self.schedule[0][0] if self.schedule else None, self.rm.get_timer()) if t is not None]
        return min(times) if times else None

    def handle_timer(self, now):
        self.rm.handle_timer(now)

    def next_event(self):
        return None


class Net:
    """Delivers datagrams after 1 ms; ``loss(src, dst, data)`` decides drops. Runs until ``end``."""

    def __init__(self, nodes, loss=lambda s, d, data: False, delay_ns=MS):
        self.nodes = nodes
        self.loss = loss
        self.delay = delay_ns
        self.q = []
        self.n = 0
        self.events = {name: [] for name in nodes}

    def _drain(self, name, now):
        core = self.nodes[name]
        for data, dest in core.datagrams_to_send(now):
            if isinstance(dest, Unicast):
                targets = [dest.node]
            else:
                targets = [n for n, c in self.nodes.items() if n != name and dest.name in c.groups()]
            for t in targets:
                if t in self.nodes and not self.loss(name, t, data):
                    self.n += 1
                    heapq.heappush(self.q, (now + self.delay, self.n, "pkt", t, name, data))
        while (ev := core.next_event()) is not None:
            self.events[name].append((now, ev))

    def run(self, end):
        now = 0
        for name in self.nodes:
            self._drain(name, now)
        while True:
            timers = [(t, n) for n, c in self.nodes.items() if (t := c.get_timer()) is not None]
            t_timer, who = min(timers) if timers else (None, None)
            t_pkt = self.q[0][0] if self.q else None
            if t_timer is not None and (t_pkt is None or t_timer < t_pkt):
                now = max(now, t_timer)
                if now > end:
                    break
                self.nodes[who].handle_timer(now)
                self._drain(who, now)
            elif t_pkt is not None:
                now, _, _, dst, src, data = heapq.heappop(self.q)
                if now > end:
                    break
                self.nodes[dst].receive_datagram(data, src, now)
                self._drain(dst, now)
            else:
                break

    def kinds(self, name, kind):
        return [ev for _, ev in self.events[name] if ev.kind == kind]


def releases(n, first=FIRST_MOLD_SEQ, every_ns=2 * MS, start_ns=5 * MS):
    return [(start_ns + i * every_ns, first + i, trade(i)) for i in range(n)]


def dropper(rate, seed, links):
    """Seeded Bernoulli loss on the (src, dst) pairs in ``links``, multicast data only."""
    rng = random.Random(seed)

    def loss(src, dst, data):
        return (src, dst) in links and rng.random() < rate
    return loss


# ------------------------------------------------------------------ remulticast


def test_every_rt_of_a_stripe_numbers_identically_and_packs_small_packets():
    msgs = [trade(i) for i in range(100)]
    a, b = Remulticaster(["eu"], 3), Remulticaster(["eu", "us"], 3)
    for i, m in enumerate(msgs):
        a.release(10 + i, m)
        b.release(10 + i, m)
    da, db = a.datagrams(), b.datagrams()
    assert {d for _, d in db} == {Group(region_group("eu", 3)), Group(region_group("us", 3))}
    eu_b = [data for data, d in db if d == Group(region_group("eu", 3))]
    assert [data for data, _ in da] == eu_b  # byte-identical streams from different R_T
    pkts = [decode_packet(x) for x in eu_b]
    assert all(len(x) <= 1200 for x in eu_b)
    assert [m for p in pkts for m in p.messages] == msgs
    assert pkts[0].seq == 10 and all(p.session == session_name(3) for p in pkts)
    assert all(p.seq == q.next_seq for q, p in zip(pkts, pkts[1:]))


def test_heartbeat_after_idle_carries_the_next_sequence_number():
    rm = Remulticaster(["eu"], 0, heartbeat_ns=100)
    assert rm.get_timer() is None and rm.datagrams(0) == []  # nothing released: silent
    rm.release(5, b"x")
    rm.release(6, b"y")
    assert len(rm.datagrams(1000)) == 1
    assert rm.get_timer() == 1100
    assert rm.datagrams(1050) == []
    rm.handle_timer(1100)
    [(data, dest)] = rm.datagrams(1100)
    hb = decode_packet(data)
    assert hb.is_heartbeat and hb.seq == 7 and dest == Group("region/eu/0")


def test_release_ignores_repeats_and_a_jump_starts_a_new_packet():
    rm = Remulticaster(["eu"], 0)
    for g in (1, 2, 2, 1, 5, 6):
        rm.release(g, bytes([g]))
    pkts = [decode_packet(d) for d, _ in rm.datagrams()]
    assert [(p.seq, p.messages) for p in pkts] == [(1, (b"\x01", b"\x02")), (5, (b"\x05", b"\x06"))]


def test_serve_rerequest_answers_from_history_by_unicast():
    rm = Remulticaster(["eu"], 2)
    for g in range(100):
        rm.release(g, trade(g))
    rm.datagrams()
    out = rm.serve_rerequest(MoldRequest(session_name(2), 40, 5).encode(), "cx")
    assert {d for _, d in out} == {Unicast("cx")}
    got = [(p.seq + i, m) for p in map(decode_packet, (x for x, _ in out)) for i, m in enumerate(p.messages)]
    assert got == [(g, trade(g)) for g in range(40, 45)]
    # beyond the history only what exists is sent
    out = rm.serve_rerequest(MoldRequest(session_name(2), 98, 10).encode(), "cx")
    assert [decode_packet(x).seq for x, _ in out] == [98] and len(decode_packet(out[0][0]).messages) == 2
    # another stripe's session, malformed input: no answer, no crash
    assert rm.serve_rerequest(MoldRequest(session_name(1), 40, 5).encode(), "cx") == []
    assert rm.serve_rerequest(b"\xa5garbage", "cx") == [] and rm.malformed == 1
    assert request_stripe(MoldRequest(session_name(7), 1, 1).encode()) == 7
    assert request_stripe(b"junk") is None


# ------------------------------------------------------------------ customers


def test_lossless_customer_receives_everything_in_order_once():
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu"]}], rts=[("rt1", ["eu"])])
    rel = releases(200)
    nodes = {"rt1": FakeRT(["eu"], 0, rel),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}
    net = Net(nodes)
    net.run(2_000 * MS)
    c = nodes["c1"]
    assert c.delivered[0] == [g for _, g, _ in rel]
    recv = net.kinds("c1", Kind.CUST_RECV)
    assert [e.gseq for e in recv] == [g for _, g, _ in rel]
    assert all(e.detail["region"] == "eu" and not e.detail["repair"] for e in recv)
    assert recv[3].detail["symbol"] == TradeReport.decode(trade(3)).symbol
    assert not net.kinds("c1", Kind.CUST_GAP) and c.requests_sent == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_guaranteed_customer_repairs_every_gap_from_its_retransmit_server(seed):
    loaded = make_loaded(
        customers=[{"name": "c1", "regions": ["eu"], "retransmit": "rx1"}],
        retransmits=[("rx1", ["eu"])], rts=[("rt1", ["eu"])])
    rel = releases(400)
    nodes = {"rt1": FakeRT(["eu"], 0, rel),
             "rx1": build_retransmit(loaded.topology.host("rx1"), loaded, random.Random(2)),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}
    lost = set()

    def loss(src, dst, data):
        drop = src == "rt1" and dst == "c1" and rng.random() < 0.2
        if drop:
            p = decode_packet(data)
            lost.update(range(p.seq, p.next_seq))
        return drop
    rng = random.Random(seed)
    net = Net(nodes, loss)
    net.run(3_000 * MS)
    c = nodes["c1"]
    assert lost, "the test must lose something"
    assert c.delivered[0] == [g for _, g, _ in rel]
    recv = net.kinds("c1", Kind.CUST_RECV)
    assert {e.gseq for e in recv if e.detail["repair"]} == lost
    assert not net.kinds("c1", Kind.CUST_SKIP)
    gaps = net.kinds("c1", Kind.CUST_GAP)
    assert sum(e.detail["count"] for e in gaps) == len(lost)
    assert nodes["rx1"].messages_served >= len(lost)


def test_best_effort_customer_skips_gaps_and_keeps_order():
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu"], "grade": "best_effort",
                                     "retransmit": "rx1"}],
                         retransmits=[("rx1", ["eu"])], rts=[("rt1", ["eu"])])
    rel = releases(300)
    nodes = {"rt1": FakeRT(["eu"], 0, rel),
             "rx1": build_retransmit(loaded.topology.host("rx1"), loaded, random.Random(2)),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}
    lost = set()
    rng = random.Random(7)

    def loss(src, dst, data):
        drop = src == "rt1" and dst == "c1" and rng.random() < 0.1
        if drop:
            p = decode_packet(data)
            lost.update(range(p.seq, p.next_seq))
        return drop
    net = Net(nodes, loss)
    net.run(3_000 * MS)
    c = nodes["c1"]
    assert lost
    assert c.delivered[0] == [g for _, g, _ in rel if g not in lost]
    assert sum(e.detail["count"] for e in net.kinds("c1", Kind.CUST_SKIP)) == len(lost)
    assert all(e.detail["reason"] == "best_effort" for e in net.kinds("c1", Kind.CUST_SKIP))
    assert c.requests_sent == 0 and nodes["rx1"].requests_served == 0


def test_overlapping_regions_are_deduplicated_and_cover_each_others_losses():
    """Customer in eu and us, one R_T per region; each region loses a different half."""
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu", "us"], "grade": "best_effort"}],
                         rts=[("rta", ["eu"]), ("rtb", ["us"])])
    rel = releases(200, every_ns=3 * MS)
    nodes = {"rta": FakeRT(["eu"], 0, rel), "rtb": FakeRT(["us"], 0, rel),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}

    def loss(src, dst, data):
        p = decode_packet(data)
        return not p.is_heartbeat and (p.seq % 2 == 0) == (src == "rta")
    net = Net(nodes, loss)
    net.run(2_000 * MS)
    c = nodes["c1"]
    assert c.delivered[0] == [g for _, g, _ in rel]  # no loss although each region lost half
    assert c.duplicates == 0  # each message came through exactly one region
    assert not net.kinds("c1", Kind.CUST_SKIP)
    regions = {e.detail["region"] for e in net.kinds("c1", Kind.CUST_RECV)}
    assert regions == {"eu", "us"}


def test_overlapping_regions_without_loss_deliver_each_message_once():
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu", "us"]}],
                         rts=[("rta", ["eu", "us"]), ("rtb", ["us"])])
    rel = releases(100)
    nodes = {"rta": FakeRT(["eu", "us"], 0, rel), "rtb": FakeRT(["us"], 0, rel),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}
    net = Net(nodes)
    net.run(1_000 * MS)
    c = nodes["c1"]
    assert c.delivered[0] == [g for _, g, _ in rel]
    assert len(net.kinds("c1", Kind.CUST_RECV)) == len(rel)
    assert c.duplicates == 2 * len(rel)  # three copies of everything, two of them dropped


def test_tail_loss_is_found_by_the_heartbeat_and_repaired():
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu"], "retransmit": "rx1"}],
                         retransmits=[("rx1", ["eu"])], rts=[("rt1", ["eu"])])
    rel = releases(10, every_ns=0)  # one packet
    nodes = {"rt1": FakeRT(["eu"], 0, rel),
             "rx1": build_retransmit(loaded.topology.host("rx1"), loaded, random.Random(2)),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}

    def loss(src, dst, data):  # the only data packet never reaches the customer
        return src == "rt1" and dst == "c1" and not decode_packet(data).is_heartbeat
    net = Net(nodes, loss)
    net.run(1_000 * MS)
    assert nodes["c1"].delivered[0] == [g for _, g, _ in rel]
    assert all(e.detail["repair"] for e in net.kinds("c1", Kind.CUST_RECV))


def _rx_down_rt_cut_off(nodes, gone, answers_from):
    """c1's R_x rx1 is down for good; the R_T remulticast of the messages ``gone`` never reaches
    c1 (the first 100 ms); R_T ``name`` hears c1's requests only from ``answers_from[name]`` ns
    on (never when absent: cut off, or still rejoining its ring). Returns the Net."""
    def loss(src, dst, data):
        if "rx1" in (src, dst):
            return True
        if dst != "c1" or net_now["t"] >= 100 * MS:
            return False
        p = decode_packet(data)
        return bool(gone & set(range(p.seq, p.next_seq)))
    net_now = {"t": 0}
    for name, node in nodes.items():
        def receive(data, src, now, name=name, inner=node.receive_datagram):
            net_now["t"] = now
            if src == "c1" and now < answers_from.get(name, float("inf")):
                return
            inner(data, src, now)
        node.receive_datagram = receive
    return Net(nodes, loss)


def _rx_rta_rtb_and_c1(k_r=3):
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu"], "retransmit": "rx1"}],
                         retransmits=[("rx1", ["eu"])], rts=[("rta", ["eu"]), ("rtb", ["eu"])], k_r=k_r)
    rel = releases(50)
    nodes = {"rta": FakeRT(["eu"], 0, rel), "rtb": FakeRT(["eu"], 0, rel),
             "c1": build_customer(loaded.topology.host("c1"), loaded, random.Random(1))}
    return rel, nodes


def test_guaranteed_customer_fails_over_past_k_r_to_an_rt_that_holds_the_gap():
    """The line3 chaos finding, reduced: c1's R_x is down and the first R_T of its region does
    not answer; after k_r = 3 requests (rx1, rx1, rta) c1 used to give the gap up
    (retries_exhausted) though rtb held it. Guaranteed delivery recovers every message (seed
    4.1): it asks on, rtb next, and is repaired."""
    rel, nodes = _rx_rta_rtb_and_c1()
    gone = set(range(FIRST_MOLD_SEQ + 10, FIRST_MOLD_SEQ + 13))
    net = _rx_down_rt_cut_off(nodes, gone, {"rtb": 0})
    net.run(2_000 * MS)
    assert nodes["c1"].delivered[0] == [g for _, g, _ in rel]
    assert not net.kinds("c1", Kind.CUST_SKIP)
    asked = [e.detail["to"] for e in net.kinds("c1", Kind.NACK_SENT)]
    assert asked == ["rx1", "rx1", "rta", "rtb"]   # RX_TRIES to the R_x, then the R_T in turn
    assert sorted(e.gseq for e in net.kinds("c1", Kind.CUST_RECV) if e.detail["repair"]) == sorted(gone)


def test_guaranteed_customer_keeps_asking_until_a_partition_heals():
    """Every repair path of c1 is down far longer than k_r tries (R_x crashed, both R_T cut off
    until 600 ms, 15 tau_r): it gives nothing up and is repaired once the path heals."""
    rel, nodes = _rx_rta_rtb_and_c1()
    gone = set(range(FIRST_MOLD_SEQ + 10, FIRST_MOLD_SEQ + 13))
    net = _rx_down_rt_cut_off(nodes, gone, {"rta": 600 * MS, "rtb": 600 * MS})
    net.run(2_000 * MS)
    assert nodes["c1"].delivered[0] == [g for _, g, _ in rel]
    assert not net.kinds("c1", Kind.CUST_SKIP)
    reqs = net.kinds("c1", Kind.NACK_SENT)
    assert len(reqs) > 3 * 3 and {e.detail["to"] for e in reqs} == {"rx1", "rta", "rtb"}   # round all three


def test_guaranteed_customer_gives_a_gap_up_only_when_the_stream_is_max_gap_past_it():
    """The one bound on asking: a position MAX_GAP behind the stream is too far behind (what
    the tracker jumps over at once), so a customer cut from every server does not hold the
    ticker's messages behind it without end."""
    from rmptwin.rmp.repair import MAX_GAP

    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu"], "retransmit": "rx1"}],
                         retransmits=[("rx1", ["eu"])], rts=[("rta", ["eu"])], k_r=3)
    c = build_customer(loaded.topology.host("c1"), loaded, random.Random(1))
    session = session_name(0)
    c.receive_datagram(MoldPacket(session, FIRST_MOLD_SEQ, (trade(0),)).encode(), "rta", 0)
    c.receive_datagram(MoldPacket(session, FIRST_MOLD_SEQ + 2, (trade(2),)).encode(), "rta", MS)  # 1 gap
    now = MS
    for _ in range(20):   # far past k_r: still asking
        now = c.get_timer()
        c.handle_timer(now)
    assert c.skipped == 0 and c.delivered[0] == [FIRST_MOLD_SEQ]
    # the stream moves on in steps short of a jump, to MAX_GAP + 1 past the gap at 1 (and
    # MAX_GAP - 1 past the next one, 3 .. its top)
    for upto in (FIRST_MOLD_SEQ + 2 + MAX_GAP // 2, FIRST_MOLD_SEQ + MAX_GAP + 1):
        c.receive_datagram(MoldPacket(session, upto, (trade(upto),)).encode(), "rta", now)
    for _ in range(10):
        now = c.get_timer()
        c.handle_timer(now)
    skips = [e for e in c._events if e.kind == Kind.CUST_SKIP]
    assert [(e.detail["first"], e.detail["count"], e.detail["reason"]) for e in skips] == \
        [(FIRST_MOLD_SEQ + 1, 1, "too_far_behind")]
    assert c.delivered[0][:2] == [FIRST_MOLD_SEQ, FIRST_MOLD_SEQ + 2]


def test_malformed_packets_are_counted_and_never_crash():
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu"]}], rts=[("rt1", ["eu"])])
    c = build_customer(loaded.topology.host("c1"), loaded, random.Random(1))
    for junk in (b"", b"\xa5\x01\x02", b"RMPT000000" + b"\x00" * 8 + b"\x00\x05" + b"\x00",
                 MoldPacket("RMPT000000", 0, (b"short",)).encode()[:-1], bytes(range(256))):
        c.receive_datagram(junk, "rt1", 0)
    assert c.malformed == 5
    c.receive_datagram(MoldPacket("OTHER", 0, (b"x",)).encode(), "rt1", 0)
    c.receive_datagram(MoldPacket(session_name(9), 0, (b"x",)).encode(), "rt1", 0)  # stripe not joined
    c.receive_datagram(MoldRequest(session_name(0), 0, 5).encode(), "c2", 0)  # customers serve nobody
    assert c.foreign == 3 and not c.datagrams_to_send(0)
    # a message that is not a trade report is still delivered in order, counted as malformed payload
    c.receive_datagram(MoldPacket(session_name(0), FIRST_MOLD_SEQ, (b"tiny",)).encode(), "rt1", 0)
    assert c.delivered[0] == [FIRST_MOLD_SEQ] and c.malformed == 6


def test_customer_joins_its_stripes_and_regions():
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu", "us"], "stripes": [1, 3]},
                                    {"name": "c2", "regions": ["us"]}], stripes=4)
    c1 = build_customer(loaded.topology.host("c1"), loaded, random.Random(1))
    c2 = build_customer(loaded.topology.host("c2"), loaded, random.Random(1))
    assert c1.groups() == {region_group(r, k) for r in ("eu", "us") for k in (1, 3)}
    assert c2.groups() == {region_group("us", k) for k in range(4)}


def test_bandwidth_limited_customer_joins_fewer_stripes():
    # 1 source x 100 msg/s x 64 B = one stripe of ~64 kbit/s per region at 4 stripes -> ~18 kbit/s each
    loaded = make_loaded(customers=[
        {"name": "modem", "regions": ["us"], "link": {"bandwidth_mbps": 0.056}},
        {"name": "broker", "regions": ["us"], "link": {"bandwidth_mbps": 45}}], stripes=4)
    w = loaded.experiment.workload
    per_stripe_bits = w.rate_per_source / w.stripes * (w.message_bytes + 10) * 8 * 1.25
    modem = customer_stripes(loaded.topology.host("modem"), loaded)
    assert len(modem) == int(56_000 // per_stripe_bits) and 1 <= len(modem) < 4
    assert customer_stripes(loaded.topology.host("broker"), loaded) == [0, 1, 2, 3]


# ------------------------------------------------------------------ retransmit servers


def test_retransmit_server_fills_its_own_gaps_from_an_rt_and_rotates_on_failure():
    loaded = make_loaded(retransmits=[("rx1", ["eu"])], rts=[("rta", ["eu"]), ("rtb", ["eu"])])
    rel = releases(100)
    # rtb serves eu per the topology, but its multicast goes where rx1 does not listen: rx1 hears
    # rtb only through answers to requests.
    nodes = {"rta": FakeRT(["eu"], 0, rel), "rtb": FakeRT(["us"], 0, rel),
             "rx1": build_retransmit(loaded.topology.host("rx1"), loaded, random.Random(2))}

    def loss(src, dst, data):
        # requests to rta are lost (as if it had crashed) and it loses 30..39 towards rx1
        if dst == "rta":
            return True
        if src == "rta":
            p = decode_packet(data)
            return bool(set(range(30, 40)) & set(range(p.seq, p.next_seq)))
        return False
    net = Net(nodes, loss)
    net.run(2_000 * MS)
    rx = nodes["rx1"]
    have = [g for _, g, _ in rel if rx.caches[0].get(g) is not None]
    assert have == [g for _, g, _ in rel]
    asked = [e.detail["to"] for e in net.kinds("rx1", Kind.NACK_SENT)]
    assert asked[0] == "rta" and "rtb" in asked  # topology order first, then the next R_T


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.floats(0.0, 0.4), st.floats(0.0, 0.3), st.integers(1, 3))
@example(seed=51, c_loss=0.25, x_loss=0.265625, stripes=3)  # R_x kept losing the repair: ask the R_T
def test_any_loss_pattern_guaranteed_customers_end_complete_and_in_order(seed, c_loss, x_loss, stripes):
    loaded = make_loaded(
        customers=[{"name": "c1", "regions": ["eu"], "retransmit": "rx1"},
                   {"name": "c2", "regions": ["eu", "us"], "retransmit": "rx1"}],
        retransmits=[("rx1", ["eu"])], rts=[("rta", ["eu"]), ("rtb", ["us"])], stripes=stripes, k_r=5)
    nodes = {}
    expected = {}
    for k in range(stripes):
        rel = releases(60, every_ns=1 * MS)
        expected[k] = [g for _, g, _ in rel]
        nodes[f"rta{k}"] = FakeRT(["eu"], k, rel)
        nodes[f"rtb{k}"] = FakeRT(["us"], k, rel)
    for name in ("rx1", "c1", "c2"):
        h = loaded.topology.host(name)
        nodes[name] = (build_retransmit if h.role == "retransmit" else build_customer)(h, loaded, random.Random(3))
    rng = random.Random(seed)
    rt_of_name = {f"rt{x}{k}": f"rt{x}" for k in range(stripes) for x in "ab"}

    def loss(src, dst, data):
        if src in rt_of_name:
            return rng.random() < (x_loss if dst == "rx1" else c_loss)
        return False
    # R_T request routing: the cores name "rta"/"rtb"; deliver to the stripe's fake.
    net = Net(nodes, loss)
    orig = net._drain

    def drain(name, now):
        core = net.nodes[name]
        out = core.datagrams_to_send(now)
        fixed = []
        for data, dest in out:
            if isinstance(dest, Unicast) and dest.node in ("rta", "rtb"):
                dest = Unicast(f"{dest.node}{request_stripe(data)}")
            fixed.append((data, dest))
        core.datagrams_to_send, saved = (lambda now: fixed), core.datagrams_to_send
        try:
            orig(name, now)
        finally:
            core.datagrams_to_send = saved
    net._drain = drain
    net.run(5_000 * MS)
    for c in ("c1", "c2"):
        for k in range(stripes):
            assert nodes[c].delivered[k] == expected[k], (c, k)
