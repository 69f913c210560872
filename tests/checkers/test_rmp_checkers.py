"""The ticker's checkers on hand-made histories: each planted violation of its kind is caught
and named; the clean history and what the protocol allows pass."""

from __future__ import annotations

import pytest
from checker_histories import clean, dl, msg, replace

from rmptwin.checkers.histories import Lifecycle, RmpHistory
from rmptwin.checkers.messages_checker import messages
from rmptwin.checkers.order import total_order


def _swap(h):
    # rb delivers message 3 at position 2 and message 2 at position 3
    h = replace(h, "rb", 2, dl("rb", 2, msg(3), 2001))
    return replace(h, "rb", 3, dl("rb", 3, msg(2), 3001))


def _out_of_order(h):
    return replace(h, "rc", 2, dl("rc", 2, msg(2), 3999))     # rc delivers 1, 3, 2


def _skip(h):
    return replace(h, "rc", 3, None)                           # rc delivers 1, 2, 4, 5


def _not_prefix(h):
    return replace(h, "rc", 1, None)                           # rc starts at 2, never crashed


def _two_positions(h):
    extra = dl("ra", 6, msg(2), 7000)                          # ra delivers message 2 again at 6
    return RmpHistory(h.deliveries + [extra], h.lifecycle, h.sent, h.acked, h.receivers, h.safe)


PLANTED_ORDER = {"swapped": _swap, "out_of_order": _out_of_order, "skipped": _skip, "not_prefix": _not_prefix,
                 "message_at_two_positions": _two_positions}


def test_clean_history_is_in_total_order():
    assert total_order(clean()) is None
    assert messages(clean()) is None


@pytest.mark.parametrize("plant", list(PLANTED_ORDER))
def test_total_order_catches_planted(plant):
    v = total_order(PLANTED_ORDER[plant](clean()))
    assert v is not None and v.checker == "total_order"
    assert v.events, "a violation shows the events"


def test_safe_delivery_may_not_give_away_what_a_crashed_receiver_delivered():
    h = clean(5)
    h.lifecycle = Lifecycle({"rc": [(5500, "crash")]})
    # rc, cut off, delivered message 9 at position 6 before it crashed; the new ring gave 6 to message 6
    h.sent[msg(6)] = h.sent[msg(9)] = {"t_ns": 0, "node": "src", "kind": "send"}
    more = [dl("rc", 6, msg(9), 5200), dl("ra", 6, msg(6), 6000), dl("rb", 6, msg(6), 6001)]
    agreed = RmpHistory(h.deliveries + more, h.lifecycle, h.sent, h.acked, h.receivers, safe=False)
    safe = RmpHistory(h.deliveries + more, h.lifecycle, h.sent, h.acked, h.receivers, safe=True)
    assert total_order(agreed) is None          # agreed delivery promises nothing for rc
    v = total_order(safe)
    assert v is not None and "gave away" in v.message


def test_a_recovered_receiver_may_start_late():
    h = replace(clean(), "rc", 1, None)
    h = replace(h, "rc", 2, None)
    h = RmpHistory([d._replace(inc=1) if d.node == "rc" else d for d in h.deliveries],
                   Lifecycle({"rc": [(100, "crash"), (2500, "recover")]}), h.sent, h.acked, h.receivers)
    assert total_order(h) is None
    assert messages(h) is None


def _unsent(h):
    del h.sent[msg(4)]
    return h


def _dup_position(h):
    extra = dl("rb", 3, msg(3), 3500)
    return RmpHistory(h.deliveries + [extra], h.lifecycle, h.sent, h.acked, h.receivers)


def _dup_message(h):
    return _two_positions(h)


def _lost(h):
    return replace(h, "rb", 5, None)   # acked, rb is up at the end and never delivered 5


PLANTED_MESSAGES = {"unsent": _unsent, "delivered_twice_position": _dup_position,
                    "delivered_twice_message": _dup_message, "lost": _lost}


@pytest.mark.parametrize("plant", list(PLANTED_MESSAGES))
def test_messages_catches_planted(plant):
    v = messages(PLANTED_MESSAGES[plant](clean()))
    assert v is not None and v.checker == "messages" and v.events


def test_lost_names_the_receiver_and_the_ack():
    v = messages(_lost(clean()))
    assert "rb" in v.message and "src#5" in v.message
    assert v.events[0]["kind"] in ("deliver", "src_acked")


def test_a_receiver_crashed_at_the_end_owes_nothing():
    h = replace(clean(), "rb", 5, None)
    h.lifecycle = Lifecycle({"rb": [(4500, "crash")]})
    assert messages(h) is None
