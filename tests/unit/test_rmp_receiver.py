"""The seed's receive rules (section 2.1) on one primary receiver fed frames by hand:
duplicates, placement at t_r, out-of-order acks and missing messages are requested, and the
token is accepted only once everything up to it is held."""

from __future__ import annotations

from rmp_bus import MS, ack, data, drain, fire, member, sent

from rmptwin.core.events import Kind
from rmptwin.core.sansio import Unicast
from rmptwin.rmp import wire


def test_message_then_ack_places_in_order_and_duplicates_are_ignored():
    c = member()
    c.receive_datagram(data(1), "s1", 0)
    c.receive_datagram(data(1), "s1", 1)          # duplicate while waiting
    c.receive_datagram(data(2), "s1", 2)
    c.receive_datagram(ack(1, [("s1", 1), ("s1", 2)], 1), "rp1", 3)
    c.receive_datagram(data(2), "s1", 4)          # duplicate of an acknowledged message
    c.receive_datagram(ack(1, [("s1", 1), ("s1", 2)], 1), "rp1", 5)   # duplicate ack
    evs = drain(c)
    recv = [e for e in evs if e.kind == Kind.RECV]
    deliver = [(e.src, e.src_seq, e.gseq) for e in evs if e.kind == Kind.DELIVER]
    assert [(e.src, e.src_seq) for e in recv] == [("s1", 1), ("s1", 2)]
    assert deliver == [("s1", 1, 1), ("s1", 2, 2)]
    m = c.members[0]
    assert m.t_r == 2 and m.m_sr["s1"] == 3 and not m.waiting


def test_ack_ahead_of_t_r_requests_the_missing_acks_from_its_sender():
    c = member()
    for s in (1, 2, 3):
        c.receive_datagram(data(s), "s1", 0)
    c.receive_datagram(ack(3, [("s1", 3)], 3, site="rp3", nxt="rp1"), "rp3", 0)
    assert not [e for e in drain(c) if e.kind == Kind.DELIVER]      # t = 3 > t_r = 1: held
    fire(c, c.tm.dn)
    nacks = [(f, d) for f, d in sent(c) if isinstance(f, wire.Nack)]
    assert nacks and all(d == Unicast("rp3") for _, d in nacks)
    assert (nacks[0][0].want, nacks[0][0].lo, nacks[0][0].hi) == (wire.WANT_ACKS, 1, 2)
    # the repairs arrive as RETX: everything is placed in gseq order
    c.receive_datagram(wire.encode(wire.Retx(0, wire.decode(ack(2, [("s1", 2)], 2, site="rp2")))), "rp3", 0)
    c.receive_datagram(wire.encode(wire.Retx(0, wire.decode(ack(1, [("s1", 1)], 1)))), "rp3", 0)
    deliver = [(e.src_seq, e.gseq) for e in drain(c) if e.kind == Kind.DELIVER]
    assert deliver == [(1, 1), (2, 2), (3, 3)]


def test_ack_for_a_message_not_received_requests_it_before_placing():
    c = member()
    c.receive_datagram(ack(1, [("s1", 1), ("s2", 1)], 1), "rp1", 0)
    c.receive_datagram(data(1, src="s2"), "s2", 0)
    fire(c, c.tm.dn)       # the first request goes out dN/2 after the gap is seen
    nacks = [f for f, _ in sent(c) if isinstance(f, wire.Nack)]
    assert [(n.want, n.src, n.lo, n.hi) for n in nacks] == [(wire.WANT_MSGS, "s1", 1, 1)]
    assert not [e for e in drain(c) if e.kind == Kind.DELIVER]
    c.receive_datagram(data(1), "rp1", 0)
    assert [(e.src, e.gseq) for e in drain(c) if e.kind == Kind.DELIVER] == [("s1", 1), ("s2", 2)]


def test_source_ahead_of_m_sr_means_a_missed_ack():
    """Seed: M_s > M_s,r -> the ack for (s, M_s - 1) is missing and is requested."""
    c = member()
    c.receive_datagram(data(3, acked_below=3), "s1", 0)   # the source saw M 1 and 2 acknowledged
    fire(c, c.tm.dn)
    nacks = [f for f, _ in sent(c) if isinstance(f, wire.Nack)]
    assert [(n.want, n.src, n.lo, n.hi) for n in nacks] == [(wire.WANT_ACK_OF, "s1", 1, 2)]


def test_requests_repeat_every_tau_r_then_report_the_server():
    c = member()
    c.receive_datagram(ack(2, [], 1, site="rp3", nxt="rp1"), "rp3", 0)
    tm = c.tm
    fire(c, tm.dn // 2 + tm.k_r * tm.tau_r)     # k_r requests, then the (k_r + 1)-th attempt
    nacks = [d.node for f, d in sent(c) if isinstance(f, wire.Nack)]
    assert nacks == ["rp3"] * tm.k_r + ["rp1"]      # rp3 silent: another member is asked
    fire(c, tm.dn // 2 + 2 * tm.k_r * tm.tau_r)
    out = sent(c)
    assert [d.node for f, d in out if isinstance(f, wire.Nack)] == ["rp1"] * (tm.k_r - 1) + ["rp3"]
    # nobody answers k_r requests twice over: the server is reported
    reports = [(f, d) for f, d in out if isinstance(f, wire.Report)]
    assert len(reports) == 1 and reports[0][0].suspect == "rp3" and reports[0][1] == Unicast("xr1")
    assert reports[0][0].reason == wire.REASON_NO_ANSWER


def test_token_accepted_only_when_everything_up_to_it_is_held():
    c = member()
    c.receive_datagram(data(1), "s1", 0)
    c.receive_datagram(ack(1, [("s1", 1)], 1, nxt="rp3"), "rp1", 0)
    # ack 2 passes the token to us (rp2) but we lack (s1, 2)
    c.receive_datagram(ack(2, [("s1", 2)], 2, site="rp3", nxt="rp2"), "rp3", 0)
    assert not [e for e in drain(c) if e.kind == Kind.TOKEN_ACCEPT]
    assert not [f for f, _ in sent(c) if isinstance(f, wire.Ack)]
    c.receive_datagram(data(2), "s1", 0)
    evs = drain(c)
    assert [e.detail["token"] for e in evs if e.kind == Kind.TOKEN_ACCEPT] == [2]
    # holding the token with a message waiting: it acknowledges at once (event-driven)
    c.receive_datagram(data(3), "s1", 0)
    fire(c, 0)
    acks = [f for f, _ in sent(c) if isinstance(f, wire.Ack)]
    assert [(a.token, a.first_gseq, a.msgs, a.next_site) for a in acks] == [(3, 3, (("s1", 3),), "rp3")]


def test_null_token_after_idle_and_pass_resent_until_next_ack():
    c = member(name="rp1")           # the initial token site
    tm = c.tm
    fire(c, tm.null_token)
    (a, dest), = [(f, d) for f, d in sent(c) if isinstance(f, wire.Ack)]
    assert a.msgs == () and a.token == 1 and a.next_site == "rp2"
    assert [e.kind for e in drain(c) if e.kind == Kind.NULL_TOKEN] == [Kind.NULL_TOKEN]
    # nobody answers: the pass is re-sent to rp2 every tau_r, then rp2 is reported
    fire(c, tm.null_token * 2 + tm.tau_r * (tm.k_r + 2))
    out = sent(c)
    resends = [(f, d) for f, d in out if isinstance(f, wire.Ack)]
    assert len(resends) >= tm.k_r and all(d == Unicast("rp2") and f.token == 1 for f, d in resends)
    # reported to xr1 (re-sent every tau_r until xr1 acknowledges the report)
    reports = [(f.suspect, f.reason, d) for f, d in out if isinstance(f, wire.Report)]
    assert reports and set(reports) == {("rp2", wire.REASON_TOKEN_LOST, Unicast("xr1"))}


def test_previous_site_resending_its_pass_gets_our_ack_again():
    c = member()   # rp2
    c.receive_datagram(data(1), "s1", 0)
    c.receive_datagram(ack(1, [], 1, site="rp1", nxt="rp2"), "rp1", 0)
    fire(c, 0)
    first = [f for f, _ in sent(c) if isinstance(f, wire.Ack)]
    assert [a.token for a in first] == [2]
    c.receive_datagram(ack(1, [], 1, site="rp1", nxt="rp2"), "rp1", 5 * MS)   # rp1 missed ack 2
    again = [(f, d) for f, d in sent(c) if isinstance(f, wire.Ack)]
    assert [(a.token, d) for a, d in again] == [(2, Unicast("rp1"))]


def test_source_retransmission_of_acked_message_gets_the_ack():
    c = member(name="rp1")
    c.receive_datagram(data(1), "s1", 0)
    fire(c, 0)
    (a,) = [f for f, _ in sent(c) if isinstance(f, wire.Ack)]
    c.receive_datagram(data(1), "s1", 1 * MS)     # the source did not hear it
    out = sent(c)
    assert [(type(f), f.original, d) for f, d in out] == [(wire.Retx, a, Unicast("s1"))]


def test_time_driven_missing_token_is_requested_dn_after_schedule():
    c = member(token_mode="time_driven", tau_t_ms=100)
    c.receive_datagram(ack(1, [], 1, site="rp1", nxt="rp3", ts=0), "rp1", 1 * MS)
    tm = c.tm
    fire(c, tm.tau_t + tm.dn - 1)
    assert not [f for f, _ in sent(c) if isinstance(f, wire.Nack)]
    fire(c, tm.tau_t + tm.dn)
    nacks = [(f, d) for f, d in sent(c) if isinstance(f, wire.Nack)]
    assert [(f.want, f.lo, f.hi, d) for f, d in nacks] == [(wire.WANT_ACKS, 2, 2, Unicast("rp3"))]


def test_malformed_datagrams_are_counted_not_raised():
    c = member()
    for junk in (b"\xa5", b"\xa5\x01\x63\x00\x00", wire.encode(wire.Invite(0, 2, "x"))[:-1]):
        c.receive_datagram(junk, "x", 0)
    assert c.malformed == 3


def test_acks_lost_above_a_message_gap_are_requested_once_the_message_places():
    """Seed 2.1: a receiver requests an ack with a larger t than expected until it has it.
    Ack 4 arrives while ack 1 waits for its message; acks 2-3 were lost. Once the message
    places ack 1, acks 2-3 are asked for (before the fix nothing asked: the message request
    found nothing from the missing t_r on and ended; quickstart clock-jump regression)."""
    c = member()
    tm = c.tm
    c.receive_datagram(ack(1, [("s1", 1)], 1, site="rp1", nxt="rp1"), "rp1", 0)
    c.receive_datagram(ack(4, [], 2, site="rp3", nxt="rp1"), "rp3", 0)
    fire(c, tm.dn)
    assert [(f.want, f.src, f.lo) for f, _ in sent(c) if isinstance(f, wire.Nack)] == [(wire.WANT_MSGS, "s1", 1)]
    c.receive_datagram(data(1), "rp1", tm.dn)
    assert [e.gseq for e in drain(c) if e.kind == Kind.DELIVER] == [1]
    fire(c, tm.dn + 2 * tm.tau_r)
    nacks = [(f.want, f.lo, f.hi, d) for f, d in sent(c) if isinstance(f, wire.Nack)]
    assert nacks and nacks[0] == (wire.WANT_ACKS, 2, 3, Unicast("rp3"))


def test_after_a_new_ring_an_open_request_asks_the_recovery_site_first():
    """A NEW_RING names the recovery site that holds every ack up to last_t: an open request
    should start over with it, not go on round the members where the old ring left it."""
    c = member(ring=("rp1", "rp2", "rp3", "rp4"))
    tm = c.tm
    c.receive_datagram(ack(2, [], 1, site="rp3", nxt="rp4"), "rp3", 0)   # ack 1 missed
    t = tm.dn // 2 + tm.k_r * tm.tau_r
    fire(c, t)                              # rp3 silent k_r times: rp1 is asked next
    assert [d.node for f, d in sent(c) if isinstance(f, wire.Nack)][-1] == "rp1"
    nr = wire.NewRing(0, 2, 3, 2, 2, 0, "rp4", "rp4", ("rp1", "rp2", "rp3", "rp4"))
    c.receive_datagram(wire.encode(nr), "xr1", t + 1)
    fire(c, t + 1)                          # asked at once, not a tau_r later
    assert [d.node for f, d in sent(c) if isinstance(f, wire.Nack)] == ["rp4"]
