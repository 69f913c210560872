"""Customers, retransmit servers and the regional remulticast, driven through a tiny
in-test network (fixed delay, seeded per-receiver loss) around the real cores.

Expected values come from what the R_T released, never from the cores under test.
"""

from __future__ import annotations

import random

import pytest
from customer_net import MS, FakeRT, Net, make_loaded, releases, trade

from rmptwin.core.events import Kind
from rmptwin.core.groups import region_group
from rmptwin.core.sansio import Group, Unicast
from rmptwin.core.striping import session_name
from rmptwin.core.trade_report import TradeReport
from rmptwin.factories.rmp import build_customer, build_retransmit
from rmptwin.model.queries import customer_stripes
from rmptwin.rmp.moldudp64 import MoldPacket, MoldRequest, decode_packet, request_stripe
from rmptwin.rmp.remulticast import Remulticaster
from rmptwin.rmp.repair import FIRST_MOLD_SEQ

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

