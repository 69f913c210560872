"""The customer's feed watch (rmp.feed_watch, issue 21): silence for k heartbeats is one
stale_feed alarm per episode, never one while the feed is heard, and a guaranteed customer
polls from the next sequence number it expects."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.core.events import Kind
from rmptwin.core.striping import session_name
from rmptwin.rmp.customer import CustomerConfig, CustomerCore
from rmptwin.rmp.feed_watch import FeedWatch, FeedWatchConfig
from rmptwin.rmp.moldudp64 import MoldPacket, decode_request
from rmptwin.rmp.repair import RepairConfig

MS = 1_000_000
STALE = 750 * MS
CFG = FeedWatchConfig(stale_ns=STALE, retry_ns=160 * MS, watch_from={0: 1000 * MS}, feeds={0: ("rp1",)})


def _drive(watch: FeedWatch, heard: list[int], end: int) -> list[int]:
    """Hear the feed at the times ``heard``; fire the watch whenever it asks; the alarm times."""
    alarms, todo = [], sorted(heard)
    while True:
        at = watch.check_at
        nxt = todo[0] if todo else None
        if at is not None and at <= end and (nxt is None or at <= nxt):
            fresh, _ = watch.due(at, {0: 1})
            alarms += [at for _ in fresh]
        elif nxt is not None:
            watch.heard(0, todo.pop(0))
        else:
            return alarms


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, STALE - 1), min_size=1, max_size=40))
def test_a_feed_heard_within_every_k_heartbeats_never_alarms(gaps):
    t, heard = 1000 * MS, []
    for g in gaps:
        t += g
        heard.append(t)
    assert _drive(FeedWatch(CFG), heard, t + STALE - 1) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 3 * STALE), min_size=1, max_size=30))
def test_each_silence_of_k_heartbeats_is_exactly_one_alarm_at_its_end(gaps):
    t, heard = 1000 * MS, []
    for g in gaps:
        t += g
        heard.append(t)
    end = t + STALE - 1
    starts = [1000 * MS] + heard
    want = [a + STALE for a, b in zip(starts, heard + [end + 1]) if a + STALE < b]
    assert _drive(FeedWatch(CFG), heard, end) == want


def _customer(grade="guaranteed", retransmit="rx1") -> CustomerCore:
    repair = RepairConfig(name="c1", regions=("east",), stripes=(0,), wait_ns=40 * MS, retry_ns=160 * MS, k_r=3)
    return CustomerCore(CustomerConfig(repair=repair, grade=grade, retransmit=retransmit,
                                       remulticasters={0: ("rp1",)}, region_of={"rp1": "east"}, feed_watch=CFG),
                        random.Random(1))


def _fire(core: CustomerCore, until: int) -> None:
    while (t := core.get_timer()) is not None and t <= until:
        core.handle_timer(t)


def test_a_silent_guaranteed_customer_alarms_once_and_asks_its_rx_from_what_it_expects_next():
    core = _customer()
    session = session_name(0)
    core.receive_datagram(MoldPacket(session, 1, (b"a", b"b")).encode(), "rp1", 1100 * MS)
    _fire(core, 1100 * MS + STALE - 1)
    assert not [e for e in core.take_events() if e.kind == Kind.ALARM]
    _fire(core, 3000 * MS)
    events = core.take_events()
    [alarm] = [e for e in events if e.kind == Kind.ALARM]
    assert alarm.src == "rp1" and alarm.detail["reason"] == "stale_feed" and alarm.detail["regions"] == ["east"]
    asks = [(decode_request(d), dest.node) for d, dest in core.datagrams_to_send(3000 * MS)]
    assert asks and all(host == "rx1" for _, host in asks)
    assert asks[0][0].seq == 3 and asks[0][0].session == session     # the next sequence number it expects
    core.receive_datagram(MoldPacket(session, 3).encode(), "rp1", 3100 * MS)   # a heartbeat: feed is back
    _fire(core, 3100 * MS + STALE - 1)
    assert not core.datagrams_to_send(3100 * MS + STALE)


def test_a_silent_best_effort_customer_alarms_but_asks_nobody():
    core = _customer(grade="best_effort", retransmit=None)
    _fire(core, 5000 * MS)
    assert [e.detail["reason"] for e in core.take_events() if e.kind == Kind.ALARM] == ["stale_feed"]
    assert not core.datagrams_to_send(5000 * MS)
