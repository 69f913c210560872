"""Ring-level behaviour of the RMP cores on an in-test network: stability, NACK reduction,
the reformation server's choices, sources, secondaries, and the seed's token-passing time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmp_bus import MS, Bus, ack, data, drain, fire, member, sent, timing

from rmptwin.core.events import Kind
from rmptwin.core.sansio import Group, Unicast
from rmptwin.core.timing import token_passing_time_ms
from rmptwin.rmp import wire
from rmptwin.rmp.nack_reduction import request_sets, request_slot
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.reformation import ReformationCore, start_token
from rmptwin.rmp.secondary import SecondaryCore
from rmptwin.rmp.source import SourceCore

# ----------------------------------------------------------------------------- seed formulas


def test_token_passing_time_matches_the_seed():
    # tau_t = (1 + 2 k_r) dN + k_r (X + P); dN = 75 ms (half the globe), k_r = 3, X = 0,
    # P = 30 ms: 7 x 75 + 3 x 30 = 615 ms.
    assert token_passing_time_ms(75, 3, 0, 30) == pytest.approx(615.0)
    # The seed's "about 3 seconds" needs dN to include the "few hundred milliseconds" of
    # router delay it allows: dN = 75 + 300 ms gives 7 x 375 + 90 = 2,715 ms.
    assert token_passing_time_ms(375, 3, 0, 30) == pytest.approx(2715.0)
    assert 2500 <= token_passing_time_ms(375, 3, 0, 30) <= 3500


def test_nack_reduction_sets_worked_example():
    # m = 10, k_p = 3, token t sent by r = 0
    assert request_sets(0, 10, 3) == [frozenset({1, 4, 7, 0}), frozenset({2, 5, 8}), frozenset({3, 6, 9})]
    # r = 8: S_0 starts at the next token site 9
    assert request_sets(8, 10, 3)[0] == frozenset({9, 2, 5, 8})


@settings(max_examples=300, deadline=None)
@given(m=st.integers(1, 40), k_p=st.integers(1, 12), data=st.data())
def test_nack_reduction_sets_partition_the_ring(m, k_p, data):
    r = data.draw(st.integers(0, m - 1))
    sets = request_sets(r, m, k_p)
    assert len(sets) == k_p
    flat = [p for s in sets for p in s]
    assert sorted(flat) == list(range(m))                # every receiver exactly once
    assert (r + 1) % m in sets[0]                        # the next token site asks first
    for p in range(m):
        i = request_slot(p, r, m, k_p)
        assert p in sets[i]
        # by the seed's definition: p = (r + i + 1 + j k_p) mod m for some admissible j
        assert any((r + i + 1 + j * k_p) % m == p for j in range((m - i - 1) // k_p + 1))


def test_nack_reduction_receiver_waits_for_its_slot():
    ring = ["rp1", "rp2", "rp3", "rp4", "rp5"]
    c = PrimaryCore("rp3", {0: ring}, timing(k_p=2), ["xr1"])   # position 2
    # token 1 sent by rp1 (position 0) acknowledges a message rp3 missed: rp3 is in S_1
    c.receive_datagram(ack(1, [("s1", 1)], 1, site="rp1", nxt="rp2"), "rp1", 0)
    fire(c, 10 * c.tm.tau_r)
    assert not [f for f, _ in sent(c) if isinstance(f, wire.Nack)]
    # once it holds token t + 1 it may ask
    now = 10 * c.tm.tau_r
    c.receive_datagram(ack(2, [], 2, site="rp2", nxt="rp3"), "rp2", now)
    fire(c, now + c.tm.tau_r)
    nacks = [f for f, _ in sent(c) if isinstance(f, wire.Nack)]
    assert [(n.want, n.src, n.lo) for n in nacks][:1] == [(wire.WANT_MSGS, "s1", 1)]


def test_nack_reduction_repairs_are_multicast():
    c = PrimaryCore("rp1", {0: ["rp1", "rp2"]}, timing(k_p=2), ["xr1"])
    c.receive_datagram(data(1), "s1", 0)
    fire(c, 0)
    sent(c)
    c.receive_datagram(wire.encode(wire.Nack(0, 1, "rp2", wire.WANT_MSGS, 1, 1, "s1")), "rp2", 1)
    assert [(type(f), d) for f, d in sent(c)] == [(wire.Retx, Group("rmp/0"))]


# ----------------------------------------------------------------------------- a ring on a bus


def _ring(n=3, **kw):
    names = [f"rp{i + 1}" for i in range(n)]
    tm = timing(**kw)
    cores = {name: PrimaryCore(name, {0: names}, tm, ["xr1"]) for name in names}
    cores["s1"] = SourceCore("s1", [0], tm, ["xr1"], {0: names[0]})
    return names, cores


def test_stable_means_every_member_holds_it():
    names, cores = _ring(4, batch_limit=1)
    bus = Bus(cores, delay_ns=2 * MS)
    for i in range(30):
        bus.run_until(i * 7 * MS)
        bus.call("s1", lambda c: c.publish(0, b"m%d" % i, bus.now))
    bus.run_until(2_000 * MS)
    delivered_at = {}
    for t, node, ev in bus.events:
        if ev.kind == Kind.DELIVER:
            delivered_at[(node, ev.gseq)] = t
    assert {g for (_, g) in delivered_at} == set(range(1, 31))
    stables = [(t, node, ev) for t, node, ev in bus.events if ev.kind == Kind.STABLE]
    assert stables and max(ev.gseq for _, _, ev in stables) >= 25
    for t, node, ev in stables:
        for other in names:   # STABLE at time t: every member had already placed gseq
            assert delivered_at[(other, ev.gseq)] <= t, (node, other, ev.gseq)
    # and the token went around: every member acknowledged something
    assert {n for _, n, ev in bus.events if ev.kind == Kind.ACK_SENT} == set(names)


def test_source_sends_once_and_retransmits_as_control_until_acked():
    names, cores = _ring(3)
    dropped = {"n": 0}

    def drop(data_, src, dst):   # lose the first two copies of the message everywhere
        if src == "s1" and wire.decode(data_).TYPE_NAME == "DATA" and dropped["n"] < 2 * 3:
            dropped["n"] += 1
            return True
        return False

    bus = Bus(cores, delay_ns=1 * MS, drop=drop)
    bus.call("s1", lambda c: c.publish(0, b"hello", 0))
    bus.run_until(1_000 * MS)
    src_events = [ev.kind for _, n, ev in bus.events if n == "s1"]
    assert src_events.count(Kind.SEND) == 1
    assert src_events.count(Kind.SRC_RETX) == 2
    ctrl = [ev.detail["type"] for _, n, ev in bus.events if n == "s1" and ev.kind == Kind.CTRL_SENT]
    assert ctrl == ["DATA", "DATA"]                   # the retransmissions, not the original
    (acked,) = [ev for _, n, ev in bus.events if n == "s1" and ev.kind == Kind.SRC_ACKED]
    assert acked.gseq == 1
    assert all(sum(1 for _, n, ev in bus.events if n == r and ev.kind == Kind.DELIVER) == 1 for r in names)


def test_source_reports_to_the_next_reformation_server_when_one_is_silent():
    tm = timing()
    s = SourceCore("s1", [0], tm, ["xr1", "xr2"], {0: "rp1"})
    s.publish(0, b"x", 0)
    fire(s, 40 * tm.tau_r)
    reports = [d.node for f, d in sent(s) if isinstance(f, wire.Report)]
    assert reports[: tm.k_r] == ["xr1"] * tm.k_r and "xr2" in reports[tm.k_r:]


def test_source_resends_what_a_reformation_dropped():
    tm = timing()
    s = SourceCore("s1", [0], tm, ["xr1"], {0: "rp1"})
    s.publish(0, b"a", 0)
    s.publish(0, b"b", 0)
    sent(s)
    s.receive_datagram(ack(5, [("s1", 1)], 9, site="rp1", nxt="rp2"), "rp1", 1)
    s.receive_datagram(ack(6, [("s1", 2)], 10, site="rp2", nxt="rp3"), "rp2", 2)
    assert [e.src_seq for e in drain(s) if e.kind == Kind.SRC_ACKED] == [1, 2]
    # the new ring starts after ack 5: ack 6 died with the old token site
    nr = wire.NewRing(0, 2, 6, 5, 10, 3, "rp1", "rp1", ("rp1", "rp3"))
    s.receive_datagram(wire.encode(nr), "xr1", 3)
    again = [f for f, _ in sent(s) if isinstance(f, wire.Data)]
    assert [(f.src_seq, f.payload) for f in again] == [(2, b"b")]


def test_secondary_asks_only_its_primary():
    tm = timing()
    rs = SecondaryCore("rs1", [0], tm, ["xr1"], primary="rp2", primaries={0: ["rp1", "rp2", "rp3"]},
                       ring="east", ring_members={0: ["rp2", "rs1"]})
    rs.receive_datagram(ack(2, [], 1, site="rp3", nxt="rp1"), "rp3", 0)   # ack 1 missed
    rs.receive_datagram(ack(1, [("s1", 1)], 1, site="rp1", nxt="rp2"), "rp1", 0)   # (s1, 1) missed
    fire(rs, 3 * tm.tau_r)
    out = sent(rs)
    assert {d for f, d in out if isinstance(f, wire.Nack)} == {Unicast("rp2")}
    assert not [f for f, _ in out if isinstance(f, wire.Ack)]    # never acknowledges


def test_secondary_asks_the_new_rings_members_once_a_reformation_left_its_primary_out():
    """Seed 4.3: the reformation reassigns a dead primary's secondaries. The re-opened
    requests go to a member of the new ring at once, not k_r times to the primary it left out;
    a later ring that takes the primary back gives it its secondary again."""
    tm = timing()
    rs = SecondaryCore("rs1", [0], tm, ["xr1"], primary="rp2", primaries={0: ["rp1", "rp2", "rp3"]},
                       ring="east", ring_members={0: ["rp2", "rs1"]})
    rs.receive_datagram(ack(2, [], 1, site="rp3", nxt="rp1"), "rp3", 0)     # ack 1 missed
    drain(rs)
    sent(rs)
    rs.receive_datagram(wire.encode(wire.NewRing(0, 2, 4, 3, 2, 0, "rp3", "rp3", ("rp3", "rp1"))), "xr1", 1)
    fire(rs, tm.tau_r)
    asked = {d for f, d in sent(rs) if isinstance(f, wire.Nack)}
    assert asked and Unicast("rp2") not in asked and asked <= {Unicast("rp1"), Unicast("rp3")}

    rs.receive_datagram(wire.encode(wire.NewRing(0, 3, 6, 5, 2, 0, "rp1", "rp1", ("rp1", "rp2", "rp3"))), "xr1",
                        2 * tm.tau_r)
    fire(rs, 3 * tm.tau_r)
    assert {d for f, d in sent(rs) if isinstance(f, wire.Nack)} == {Unicast("rp2")}


# ----------------------------------------------------------------------------- reformation


def test_start_token_policies():
    assert start_token([5, 9, 7], "ticker") == 10
    assert start_token([5, 9, 7], "conservative") == 6


@pytest.mark.parametrize("policy", ["ticker", "conservative"])
def test_reformation_server_builds_the_ring_from_those_that_answer(policy):
    tm = timing(start_policy=policy)
    ring = ["rp1", "rp2", "rp3", "rp4"]
    x = ReformationCore("xr1", {0: ring}, {0: ring}, tm)
    x.receive_datagram(wire.encode(wire.Report(0, 1, "s1", "rp2", wire.REASON_NO_ACK, 0)), "s1", 0)
    out = sent(x)
    assert (wire.ReportAck(0, 1, "s1"), Unicast("s1")) in out
    invites = [f for f, d in out if isinstance(f, wire.Invite)]
    assert invites == [wire.Invite(0, 8, "xr1")]       # epoch 8 n + rank: the first X_R's next
    # rp3 and rp1 answer (rp4 too late, rp2 is down)
    x.receive_datagram(wire.encode(wire.Join(0, 8, "rp3", 7, 20, have_epoch=1)), "rp3", 1)
    x.receive_datagram(wire.encode(wire.Join(0, 8, "rp1", 5, 15, have_epoch=1)), "rp1", 1)
    fire(x, 10 * tm.tau_r)
    out = sent(x)
    assert sum(isinstance(f, wire.Invite) for f, _ in out) == tm.k_r - 1    # k_r invitations in all
    assert {(f.member, d) for f, d in out if isinstance(f, wire.JoinAck)} == {("rp3", Unicast("rp3")),
                                                                               ("rp1", Unicast("rp1"))}
    rings = [f for f, _ in out if isinstance(f, wire.NewRing)]
    assert rings and all(r == rings[0] for r in rings)
    nr = rings[0]
    assert nr.members == ("rp1", "rp3")                 # topology order, only those that answered
    assert nr.token_site == nr.recovery_site == "rp3"   # it holds t_r,max
    assert nr.last_t == 7 and nr.next_gseq == 20 and nr.epoch == 8
    assert nr.lineage == ((1, 1), (8, 8))               # ring 1 issued 1..7, ring 8 issues from 8 on
    assert nr.start_t == (8 if policy == "ticker" else 6)
    done = [e for e in drain(x) if e.kind == Kind.REFORM_DONE]
    assert done[0].detail["ring"] == ["rp1", "rp3"] and done[0].detail["token_site"] == "rp3"


def test_member_answers_invitation_and_recovers_before_taking_the_token():
    tm = timing()
    c = PrimaryCore("rp3", {0: ["rp1", "rp2", "rp3"]}, tm, ["xr1"])
    c.receive_datagram(wire.encode(wire.Invite(0, 2, "xr1")), "xr1", 0)
    (j, d), = [(f, d) for f, d in sent(c) if isinstance(f, wire.Join)]
    assert (j.epoch, j.member, j.have, d) == (2, "rp3", 0, Unicast("xr1"))
    # the new ring appoints rp3 as token site but rp1 holds acks up to 2
    nr = wire.NewRing(0, 2, 3, 2, 3, 0, "rp3", "rp1", ("rp1", "rp3"))
    c.receive_datagram(wire.encode(nr), "xr1", 1)
    fire(c, 1)
    out = sent(c)
    assert [(f.want, f.lo, f.hi, d) for f, d in out if isinstance(f, wire.Nack)] == [
        (wire.WANT_ACKS, 1, 2, Unicast("rp1"))]
    assert not [f for f, _ in out if isinstance(f, wire.Ack)]     # not before it holds 1..2
    c.receive_datagram(data(1), "rp1", 2)
    c.receive_datagram(ack(1, [("s1", 1)], 1), "rp1", 2)
    c.receive_datagram(ack(2, [], 2, site="rp2", nxt="rp3"), "rp1", 2)
    fire(c, 2 + tm.null_token)
    acks = [f for f, _ in sent(c) if isinstance(f, wire.Ack)]
    assert [(a.token, a.first_gseq, a.epoch, a.next_site) for a in acks] == [(3, 2, 2, "rp1")]


def test_lower_ranked_reformation_server_hands_reports_up():
    tm = timing()
    ring = ["rp1", "rp2"]
    x2 = ReformationCore("xr2", {0: ring}, {0: ring}, tm, servers=["xr1", "xr2"])
    x2.receive_datagram(wire.encode(wire.Report(0, 1, "s1", "rp2", wire.REASON_NO_ACK, 0)), "s1", 0)
    out = sent(x2)
    assert (wire.ReportAck(0, 1, "s1"), Unicast("s1")) in out          # the reporter may stop
    assert [(f.suspect, d) for f, d in out if isinstance(f, wire.Report)] == [("rp2", Unicast("xr1"))]
    assert not [f for f, _ in out if isinstance(f, wire.Invite)]
    # xr1 answers: xr2 leaves the reformation to it
    x2.receive_datagram(wire.encode(wire.ReportAck(0, 1, "xr2")), "xr1", 1)
    fire(x2, 20 * tm.tau_r)
    assert not [f for f, _ in sent(x2) if isinstance(f, (wire.Invite, wire.Report))]
    # another report, and xr1 stays silent: after k_r tries xr2 reforms itself, epoch 8 n + 1
    x2.receive_datagram(wire.encode(wire.Report(0, 1, "s1", "rp2", wire.REASON_NO_ACK, 0)), "s1", 30 * tm.tau_r)
    fire(x2, 60 * tm.tau_r)
    out = sent(x2)
    assert [d for f, d in out if isinstance(f, wire.Report)] == [Unicast("xr1")] * tm.k_r
    invites = [f for f, _ in out if isinstance(f, wire.Invite)]
    assert invites and invites[0].epoch == 9 and invites[0].reformer == "xr2"


def test_secondary_answers_invitations_and_stops_taking_the_old_ring():
    tm = timing()
    rs = SecondaryCore("rs1", [0], tm, ["xr1"], primary="rp2", primaries={0: ["rp1", "rp2"]},
                       ring="east", ring_members={0: ["rp2", "rs1"]})
    rs.receive_datagram(data(1), "s1", 0)
    rs.receive_datagram(ack(1, [("s1", 1)], 1, site="rp1", nxt="rp2"), "rp1", 0)
    rs.receive_datagram(wire.encode(wire.Invite(0, 8, "xr1")), "xr1", 1)
    (j, d), = [(f, d) for f, d in sent(rs) if isinstance(f, wire.Join)]
    assert (j.member, j.have, j.next_gseq, d) == ("rs1", 1, 2, Unicast("xr1"))
    drain(rs)
    # an ack of the old ring above what it reported is not placed
    rs.receive_datagram(data(2), "s1", 2)
    rs.receive_datagram(ack(2, [("s1", 2)], 2, site="rp2", nxt="rp1"), "rp2", 2)
    assert not [e for e in drain(rs) if e.kind == Kind.DELIVER]


def test_lineage_trusts_a_members_acks_only_up_to_the_ring_that_superseded_them():
    from rmptwin.rmp.reformation import valid_have
    lineage = [(1, 1), (8, 10), (16, 14)]
    assert valid_have(lineage, 20, 16) == 20      # issued by the current ring
    assert valid_have(lineage, 12, 8) == 12
    assert valid_have(lineage, 15, 8) == 13       # slept through ring 16, which restarted at 14
    assert valid_have(lineage, 11, 1) == 9        # ring 8 superseded ring 1's acks from 10 on
    assert wire.lineage_epoch(tuple(lineage), 9) == 1 and wire.lineage_epoch(tuple(lineage), 14) == 16


def test_receiver_that_slept_through_a_reformation_resynchronises():
    c = member()                                    # rp2, epoch 1
    c.receive_datagram(data(1), "s1", 0)
    c.receive_datagram(data(2), "s1", 0)
    c.receive_datagram(ack(1, [("s1", 1)], 1), "rp1", 0)
    c.receive_datagram(ack(2, [("s1", 2)], 2, site="rp3", nxt="rp1"), "rp3", 0)
    drain(c)
    # meanwhile ring 8 restarted after token 1 and ring 16 after token 3: our ack 2 (epoch 1)
    # is not the lineage's ack 2, though 2 <= last_t
    nr = wire.NewRing(0, 16, 4, 3, 4, 0, "rp1", "rp1", ("rp1", "rp2"), ((1, 1), (8, 2), (16, 4)))
    c.receive_datagram(wire.encode(nr), "xr1", 1)
    evs = drain(c)
    assert [e.kind for e in evs if e.kind == Kind.RECOVER] == [Kind.RECOVER]
    m = c.members[0]
    assert m.t_r == 1 and not m.acks
    fire(c, c.tm.dn)
    nacks = [(f.want, f.lo, f.hi, d) for f, d in sent(c) if isinstance(f, wire.Nack)]
    assert (wire.WANT_ACKS, 1, 3, Unicast("rp1")) in nacks


def test_a_resynchronised_receiver_releases_what_it_never_released_late_and_nothing_twice():
    c = member()                                    # rp2, epoch 1
    da = c.tm.delta_a
    c.receive_datagram(data(1), "s1", 0)
    c.receive_datagram(data(2), "s1", 0)
    c.receive_datagram(ack(1, [("s1", 1)], 1), "rp1", 0)
    c.receive_datagram(ack(2, [("s1", 2)], 2, site="rp3", nxt="rp1", ts=50 * MS), "rp3", 0)
    fire(c, da + MS)                                # message 1 released; message 2 not due yet
    assert [e.src_seq for e in drain(c) if e.kind == Kind.RELEASE] == [1]
    # ring 8 took over after token 1 and placed message 2 at ts 0: its release fell due at
    # delta_A, before we resynchronise and place it again
    t = da + 2 * MS
    nr = wire.NewRing(0, 16, 4, 3, 4, 0, "rp1", "rp1", ("rp1", "rp2"), ((1, 1), (8, 2), (16, 4)))
    c.receive_datagram(wire.encode(nr), "xr1", t)
    for f in (ack(1, [("s1", 1)], 1), ack(2, [("s1", 2)], 2, epoch=8), ack(3, [], 3, epoch=8)):
        c.receive_datagram(f, "rp1", t + MS)
    fire(c, t + 100 * MS)
    evs = drain(c)
    assert [e.src_seq for e in evs if e.kind == Kind.DELIVER] == [1, 2]     # the history again
    released = [e for e in evs if e.kind == Kind.RELEASE]
    assert [e.src_seq for e in released] == [2]     # once, late (its customers wait for it)
    assert released[0].detail["late_ns"] == t + MS - da
