"""Striping rules (seed 4.4): which stripe a symbol, a host, a customer and a MoldUDP64 session is on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmptwin.core.striping import (
    customer_stripes,
    host_stripes,
    serves_stripe,
    session_name,
    session_stripe,
    symbol_stripe,
    symbols_on,
)
from rmptwin.rmp.moldudp64 import MoldRequest, request_stripe


def test_symbols_are_dealt_round_the_stripes():
    assert [symbol_stripe(i, 3) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert symbols_on({1}, 10, 3) == [1, 4, 7]
    assert symbols_on({0, 2}, 6, 3) == [0, 2, 3, 5]


def test_a_host_serves_its_configured_stripes_else_all():
    assert host_stripes(None, 4) == [0, 1, 2, 3]
    assert host_stripes([3, 1, 3], 4) == [1, 3]
    assert host_stripes([], 4) == []          # configured with none: serves none
    assert serves_stripe(None, 2) and serves_stripe([2], 2) and not serves_stripe([1], 2)


def _customer(own=None, link_mbps=None, regions=1):
    # 4 stripes of 1,000 msg/s each, 100-byte messages
    return customer_stripes(own, 4, link_mbps=link_mbps, msgs_per_stripe=1000.0, message_bytes=100, regions=regions)


def test_a_customer_joins_what_its_link_carries():
    assert _customer() == [0, 1, 2, 3]                     # unlimited link
    assert _customer(link_mbps=100.0) == [0, 1, 2, 3]
    # one stripe needs 1000 x 110 B x 8 x 1.25 = 1.1 Mbit/s: 2.5 Mbit/s carries two
    assert _customer(link_mbps=2.5) == [0, 1]
    assert _customer(link_mbps=2.5, regions=2) == [0]      # two regions deliver two copies
    assert _customer(link_mbps=0.056) == [0]               # a 56 Kbps modem still gets one stripe
    assert _customer(own=[3, 2], link_mbps=0.056) == [2, 3]  # configured stripes are taken as given


@given(st.integers(0, 999_999))
def test_every_stripe_has_its_own_session_and_back(stripe):
    name = session_name(stripe)
    assert len(name) == 10 and session_stripe(name) == stripe
    assert request_stripe(MoldRequest(name, 1, 1).encode()) == stripe


@pytest.mark.parametrize("foreign", ["NASDAQ0001", "RMPT00001", "RMPT00000x", "rmpt000001", ""])
def test_foreign_sessions_and_junk_belong_to_no_stripe(foreign):
    assert session_stripe(foreign) is None
    assert request_stripe(b"junk") is None
