"""A customer checks a late copy against the last ``RECENT`` messages it handed over: a
different payload under one of those numbers is an ALARM, an older number is only a
duplicate; and customers hearing the same message report equal CUST_RECV events."""

from __future__ import annotations

import random

from rmp_bus import MS, drain

from rmptwin.core.events import Kind
from rmptwin.core.striping import session_name
from rmptwin.core.trade_report import TradeReport
from rmptwin.rmp.customer import RECENT, CustomerConfig, CustomerCore
from rmptwin.rmp.moldudp64 import MoldPacket
from rmptwin.rmp.repair import RepairConfig


def trade(i: int) -> bytes:
    return TradeReport(f"S{i % 50:04d}", 1_000_000 + i, 100 + i, "NYSE", i).encode(pad_to=64)


def customer(name="c1", region="eu") -> CustomerCore:
    repair = RepairConfig(name=name, regions=(region,), stripes=(0,), wait_ns=20 * MS, retry_ns=50 * MS, k_r=3)
    cfg = CustomerConfig(repair=repair, grade="best_effort", retransmit=None,
                         remulticasters={0: ("rp1",)}, region_of={"rp1": region})
    return CustomerCore(cfg, random.Random(1))


def packet(seq: int, *payloads: bytes) -> bytes:
    return MoldPacket(session_name(0), seq, tuple(payloads)).encode()


def test_a_conflicting_copy_is_caught_within_the_recent_window_and_only_there():
    c = customer()
    total = 100 * (RECENT // 100 + 6)
    for first in range(1, total + 1, 100):
        c.receive_datagram(packet(first, *(trade(s) for s in range(first, first + 100))), "rp1", 0)
    events = drain(c)
    assert [e.gseq for e in events if e.kind == Kind.CUST_RECV] == list(range(1, total + 1))
    oldest_held = total - RECENT + 1
    for seq in (oldest_held - 1, oldest_held, total):
        c.receive_datagram(packet(seq, trade(seq + 7)), "forger", 1)
    alarms = [e.detail["mold_seq"] for e in drain(c) if e.kind == Kind.ALARM]
    assert alarms == [oldest_held, total]     # the one before the window is forgotten
    assert c.duplicates == 1 and c.delivered[0][-1] == total


def test_customers_hearing_the_same_message_report_equal_events():
    a, b, other = customer("a"), customer("b"), customer("c", region="us")
    for c in (a, b, other):
        c.receive_datagram(packet(1, trade(1), trade(2)), "rp1", 0)
    ea, eb, ec = drain(a), drain(b), drain(other)
    assert ea == eb and [e.gseq for e in ea] == [1, 2] and ea[0].detail["symbol"] == "S0001"
    assert [e.detail["region"] for e in ec] == ["us", "us"] and ec != ea
