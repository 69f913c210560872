"""Guaranteed customers and retransmit servers when servers fail: failover past k_r, a
partition healed, a gap given up only far behind, the R_x filling its own gaps; and the
property that any loss pattern leaves guaranteed customers complete and in order. The same
in-test network as test_customer.py (customer_net).

Expected values come from what the R_T released, never from the cores under test.
"""

from __future__ import annotations

import random

from customer_net import MS, FakeRT, Net, make_loaded, releases, trade
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmptwin.core.events import Kind
from rmptwin.core.sansio import Unicast
from rmptwin.core.striping import session_name
from rmptwin.factories.rmp import build_customer, build_retransmit
from rmptwin.rmp.moldudp64 import MoldPacket, decode_packet, request_stripe
from rmptwin.rmp.repair import FIRST_MOLD_SEQ


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
