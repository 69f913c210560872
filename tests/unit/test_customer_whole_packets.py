"""A customer hands over a whole packet at once when it can (``CustomerCore._in_order_or_held``,
for the simulator's 10,000-customer runs). What the application and the event log see must be
exactly what message-by-message handling gives: same deliveries, events, counters, gaps,
re-requests and timers, on streams with loss, reordering, overlapping regions, repeats,
forged copies and payloads that are no trade report."""

from __future__ import annotations

import heapq
import random

import pytest
from customer_net import MS, make_loaded, trade

from rmptwin import corebuild
from rmptwin.core.striping import session_name
from rmptwin.factories.rmp import build_customer, customer_config
from rmptwin.rmp.customer import CustomerCore
from rmptwin.rmp.moldudp64 import MoldPacket, decode_request, is_request

# The reference is a Python subclass of CustomerCore, which a compiled class does not take:
# under the compiled build this module runs interpreted, from tests/sim/test_compiled_builds.py.
pytestmark = pytest.mark.skipif(corebuild.ACTIVE.compiled, reason="subclasses CustomerCore in Python; "
                                "tests/sim/test_compiled_builds.py runs it with RMPTWIN_PURE=1")


class _OneByOne(CustomerCore):
    """The reference: every packet message by message."""

    def _in_order_or_held(self, *args) -> bool:
        return False


def _stream(rng: random.Random, n: int) -> tuple[list[tuple[int, bytes, str]], list[bytes]]:
    """(t_ns, datagram, sender) of two R_T that pack the same messages differently, with loss,
    late copies, repeats, a forged copy now and then, heartbeats and non-trade payloads; and the
    payloads by position, which the test's retransmit server answers re-requests from."""
    payloads = [trade(i) if rng.random() > 0.05 else b"not a trade %d" % i for i in range(n + 1)]
    out = []
    for sender, step in (("rteu", 3), ("rtus", 5)):
        seq, t = 1, 0
        while seq <= n:
            count = rng.randint(1, step)
            msgs = list(payloads[seq:seq + count])
            if rng.random() < 0.03:
                msgs[0] = b"forged" + msgs[0]
            t += rng.randint(1, 4) * MS
            if rng.random() > 0.15:   # lost on the way
                late = rng.random() < 0.1
                out.append((t + (40 * MS if late else 0), MoldPacket(session_name(0), seq, tuple(msgs)).encode(), sender))
            if rng.random() < 0.05:
                out.append((t + 2 * MS, MoldPacket(session_name(0), seq + count).encode(), sender))   # heartbeat
            seq += count
    out.sort(key=lambda x: x[0])
    return out, payloads


def _state(c: CustomerCore) -> tuple:
    track = c.tracks[0]
    return (c.delivered, c.last_trade, c.duplicates, c.malformed, c.repaired, c.skipped, c.rejected,
            c.requests_sent, track.next, track.top, track.buffer, track.missing, track.skipped,
            dict(c._recent[0]), list(c._recent_order[0]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("grade", ["guaranteed", "best_effort"])
def test_whole_packets_match_message_by_message(seed, grade):
    retransmit = {"retransmit": "rx"} if grade == "guaranteed" else {}
    loaded = make_loaded(customers=[{"name": "c1", "regions": ["eu", "us"], "grade": grade, **retransmit}],
                         retransmits=[("rx", ["eu"])] if retransmit else [],
                         rts=[("rteu", ["eu"]), ("rtus", ["us"])])
    host = loaded.topology.host("c1")
    fast = build_customer(host, loaded, random.Random(1))
    slow = _OneByOne(customer_config(host, loaded), random.Random(1))
    rng = random.Random(seed)
    stream, payloads = _stream(rng, 400)
    # The retransmit server answers every re-request 2 ms later: a guaranteed customer never
    # gives a position up (rmp/customer.py), so without answers it would hold everything behind
    # the first position both regions lost, and the test would compare two stalled customers.
    pending = [(t, i, data, sender) for i, (t, data, sender) in enumerate(stream)]
    heapq.heapify(pending)
    order = len(pending)
    fired = 0
    while pending:
        t, _, data, sender = heapq.heappop(pending)
        outs = []
        for c in (fast, slow):
            deadline = c.get_timer()
            if deadline is not None and deadline <= t:
                c.handle_timer(t)
            c.receive_datagram(data, sender, t)
            outs.append((c.datagrams_to_send(t), list(c.take_events()), c.get_timer()))
        assert outs[0] == outs[1]
        fired += outs[0][2] is not None
        for sent, _dest in outs[0][0]:
            if is_request(sent):
                req = decode_request(sent)
                repair = MoldPacket(req.session, req.seq, tuple(payloads[req.seq:req.seq + req.count])).encode()
                order += 1
                heapq.heappush(pending, (t + 2 * MS, order, repair, "rx"))
    assert _state(fast) == _state(slow)
    assert fast.delivered[0], "the stream delivered nothing: the test would prove nothing"
    assert fast.duplicates > 0 and fast.malformed > 0   # both regions' copies and non-trades were seen
