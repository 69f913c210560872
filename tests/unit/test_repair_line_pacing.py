"""A guaranteed customer on a slow line waits for its answer to cross the line before asking
again (rmp.repair ``answer_ns``): on a 56 Kbps modem an answer of 8 messages takes longer than
tau_r, and one that re-requested every tau_r gave up before its first answer arrived."""

from __future__ import annotations

import random

from rmp_bus import MS, drain

from rmptwin.core.events import Kind
from rmptwin.core.striping import session_name
from rmptwin.core.trade_report import TradeReport
from rmptwin.rmp.customer import CustomerConfig, CustomerCore
from rmptwin.rmp.moldudp64 import MoldPacket
from rmptwin.rmp.repair import RepairConfig

TAU_R = 30 * MS


def trade(i: int) -> bytes:
    return TradeReport(f"S{i % 50:04d}", 1_000_000 + i, 100 + i, "NYSE", i).encode(pad_to=64)


def packet(seq: int, *payloads: bytes) -> bytes:
    return MoldPacket(session_name(0), seq, tuple(payloads)).encode()


def modem(line_bps: float | None) -> CustomerCore:
    repair = RepairConfig(name="modem1", regions=("metro",), stripes=(0,), wait_ns=10 * MS, retry_ns=TAU_R,
                          k_r=3, line_bps=line_bps, message_bytes=64)
    cfg = CustomerConfig(repair=repair, grade="guaranteed", retransmit="rx1",
                         remulticasters={0: ("rp1",)}, region_of={"rp1": "metro"})
    return CustomerCore(cfg, random.Random(1))


def ask_after_gap_of_8(c: CustomerCore) -> int:
    """Messages 1, 2-9 lost, 10: the time of the first re-request (its retry is c.get_timer())."""
    c.receive_datagram(packet(1, trade(1)), "rp1", 0)
    c.receive_datagram(packet(10, trade(10)), "rp1", 5 * MS)
    asked_at = c.get_timer()
    assert asked_at == 15 * MS   # dN after the gap was seen
    c.handle_timer(asked_at)
    nacks = [e for e in drain(c) if e.kind == Kind.NACK_SENT]
    assert [(e.detail["first"], e.detail["count"], e.detail["to"]) for e in nacks] == [(2, 8, "rx1")]
    return asked_at


def test_the_retry_waits_for_the_answer_to_cross_a_56_kbps_line():
    c = modem(56_000)
    asked_at = ask_after_gap_of_8(c)
    # the answer: 8 x (64 + 2) + Mold 20 + UDP/IP/Ethernet 42 = 590 bytes, behind one full live
    # packet of 1200 + 42: 1832 bytes, 261.7 ms at 56 Kbps; then tau_r
    assert c.answer_ns(8) == round(1832 * 8 / 56_000 * 1e9)
    assert c.get_timer() == asked_at + TAU_R + c.answer_ns(8)
    assert c.get_timer() - asked_at > 290 * MS
    # the answer arrives 94 ms after the request (as in the emulated run that missed it): repaired, no retry
    c.receive_datagram(packet(2, *(trade(s) for s in range(2, 10))), "rx1", asked_at + 94 * MS)
    events = drain(c)
    assert [e.gseq for e in events if e.kind == Kind.CUST_RECV] == list(range(2, 11))
    assert not [e for e in events if e.kind == Kind.CUST_SKIP] and c.get_timer() is None


def test_without_a_line_rate_the_retry_is_tau_r_and_a_fast_line_adds_little():
    c = modem(None)
    asked_at = ask_after_gap_of_8(c)
    assert c.get_timer() == asked_at + TAU_R
    assert modem(1e9).answer_ns(8) < 20_000   # 1 Gbps: microseconds
