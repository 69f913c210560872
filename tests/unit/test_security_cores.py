"""The RMP cores with keys (issue 12, seed 6 and 7.1), fed frames by hand: only sources that
authenticate are sequenced, control frames without the ring's MAC are never acted on, the
R_T read a trade only at release, forgeries raise an ALARM naming the claimed sender and
are never delivered, repairs are readable by guaranteed customers only and coalesced."""

from __future__ import annotations

import random

import pytest
from rmp_bus import MS, drain, fire, timing

from rmptwin.core.events import Kind
from rmptwin.core.groups import region_group
from rmptwin.core.sansio import Group
from rmptwin.core.striping import session_name
from rmptwin.core.trade_report import TradeReport
from rmptwin.rmp import wire
from rmptwin.rmp.customer import CustomerConfig, CustomerCore
from rmptwin.rmp.moldudp64 import MoldPacket, MoldRequest, decode_packet
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.remulticast import Remulticaster
from rmptwin.rmp.repair import RepairConfig
from rmptwin.rmp.retransmit import RetransmitConfig, RetransmitCore
from rmptwin.rmp.seal import KeySet, Reason, Sealer, SealError

KEYS = KeySet(sources={"s1": b"\x11" * 32}, regions={"eu": b"\x22" * 32}, retransmit={"eu": b"\x33" * 32},
              control=b"\x44" * 32)
ALL = Sealer(KEYS)


def trade(i: int) -> bytes:
    return TradeReport(f"S{i:04d}", 1_000_000 + i, 100 + i, "NYSE", i).encode(pad_to=64)


def rp(name="rp1", regions=("eu",)) -> PrimaryCore:
    keys = KEYS.only(sources=["s1"], regions=list(regions), retransmit=list(regions), control=True)
    return PrimaryCore(name, {0: ["rp1", "rp2"]}, timing(), ["xr1"], regions=list(regions), keys=keys,
                       requester_region={"c1": "eu"})


def sealed_data(seq: int, payload: bytes, label="s1", sealer=ALL) -> bytes:
    return wire.encode(wire.Data(0, label, seq, 1, sealer.seal_source(label, 0, seq, payload)))


def alarms(events) -> list:
    return [e for e in events if e.kind == Kind.ALARM]


def test_the_primaries_sequence_only_messages_that_open_under_their_sources_key():
    core = rp()
    drain(core)
    impostor = Sealer(KeySet(sources={"s1": b"\x99" * 32}))
    core.receive_datagram(sealed_data(1, trade(1), sealer=impostor), "evil", 0)          # s1's name, wrong key
    core.receive_datagram(wire.encode(wire.Data(0, "mallory", 1, 1, b"x" * 40)), "evil", 0)  # no key at all
    core.receive_datagram(sealed_data(1, trade(1)), "s1", 0)
    events = drain(core)
    assert [(e.detail["reason"], e.src, e.detail["via"]) for e in alarms(events)] == [
        (Reason.MAC_FAILED, "s1", "evil"), (Reason.UNAUTHORIZED, "mallory", "evil")]
    assert [(e.src, e.src_seq) for e in events if e.kind == Kind.RECV] == [("s1", 1)]
    assert core.rejected == 2
    fire(core, 5 * MS)
    acks = [wire.decode(ALL.open_control(d)) for d, _ in core.datagrams_to_send(5 * MS) if d[2] == wire.ACK]
    assert [a.msgs for a in acks] == [(("s1", 1),)]


def test_a_control_frame_without_the_rings_mac_is_dropped_and_names_its_claimed_sender():
    core = rp("rp2")
    drain(core)
    forged = wire.encode(wire.Ack(0, 1, 1, 1, 0, "rp1", "rp2", (("s1", 1),)))
    core.receive_datagram(sealed_data(1, trade(1)), "s1", 0)
    core.receive_datagram(forged, "evil", 0)
    core.receive_datagram(forged + b"\0" * 16, "evil", 0)
    events = drain(core)
    assert [(e.detail["reason"], e.src) for e in alarms(events)] == [(Reason.MAC_FAILED, "rp1")] * 2
    assert not [e for e in events if e.kind == Kind.DELIVER] and core.members[0].t_r == 1
    core.receive_datagram(ALL.mac_control(forged), "rp1", 0)      # the same ack, MACed: acted on
    assert [e.gseq for e in drain(core) if e.kind == Kind.DELIVER] == [1]


def test_the_rt_holds_ciphertext_and_reads_the_trade_only_at_release():
    core = rp("rp2")
    drain(core)
    secret = trade(7)
    core.receive_datagram(sealed_data(1, secret), "s1", 0)
    core.receive_datagram(ALL.mac_control(wire.encode(wire.Ack(0, 1, 1, 1, 0, "rp1", "rp2", (("s1", 1),)))),
                          "rp1", MS)
    assert all(secret not in held for held in core.members[0].msgs.values())
    early = [d for d, _ in core.datagrams_to_send(MS)]
    assert len(core.remulticasters[0].history) == 0 and not any(secret in d for d in early)
    release_at = core.tm.delta_a          # ack ts 0 + Delta_A
    fire(core, release_at)
    out = core.datagrams_to_send(release_at)
    regional = [(d, dest) for d, dest in out if dest == Group(region_group("eu", 0))]
    assert regional and not any(secret in d for d, _ in out)
    pkt = decode_packet(regional[0][0])
    assert pkt.session == session_name(0)                             # the MoldUDP64 header is in the clear
    assert Sealer(KEYS.only(regions=["eu"])).open_regional(0, pkt.seq, pkt.messages[0])[0] == secret


def customer(grade="guaranteed", keys=KEYS) -> CustomerCore:
    repair = RepairConfig(name="c1", regions=("eu",), stripes=(0,), wait_ns=20 * MS, retry_ns=50 * MS, k_r=3)
    held = None if keys is None else keys.only(regions=["eu"], retransmit=["eu"] if grade == "guaranteed" else [])
    cfg = CustomerConfig(repair=repair, grade=grade, retransmit="rx1" if grade == "guaranteed" else None,
                         remulticasters={0: ("rp1",)}, region_of={"rp1": "eu"}, keys=held)
    return CustomerCore(cfg, random.Random(1))


def packet(seq: int, *payloads: bytes) -> bytes:
    return MoldPacket(session_name(0), seq, tuple(payloads)).encode()


def delivered(events) -> list[int]:
    return [e.gseq for e in events if e.kind == Kind.CUST_RECV]


def test_a_second_payload_under_one_sequence_number_raises_an_alarm_and_is_never_delivered():
    c = customer(keys=None)
    c.receive_datagram(packet(1, trade(1)), "rp1", 0)
    c.receive_datagram(packet(1, trade(99)), "forger", 1)
    c.receive_datagram(packet(1, trade(1)), "rp9", 2)                # an honest duplicate: no alarm
    events = drain(c)
    assert delivered(events) == [1] and c.last_trade[TradeReport.decode(trade(1)).symbol]
    assert [(e.detail["reason"], e.src) for e in alarms(events)] == [(Reason.CONFLICTING_PAYLOAD, "forger")]
    assert TradeReport.decode(trade(99)).symbol not in c.last_trade


def test_a_sealed_customer_drops_forgeries_and_a_best_effort_one_cannot_read_repairs():
    forger = Sealer(KeySet(regions={"eu": b"\x98" * 32}))
    for c in (customer("guaranteed"), customer("best_effort")):
        c.receive_datagram(packet(1, forger.seal_region("eu", 0, 1, trade(1))), "evil", 0)
        c.receive_datagram(packet(1, trade(1)), "evil", 0)                       # in the clear
        c.receive_datagram(packet(1, ALL.seal_region("eu", 0, 1, trade(1))), "rp1", 0)
        c.receive_datagram(packet(2, ALL.seal_repair("eu", 0, 2, trade(2))), "rx1", 0)
        events = drain(c)
        assert [e.detail["reason"] for e in alarms(events)] == [Reason.MAC_FAILED] * 2
        if c.grade == "guaranteed":
            assert delivered(events) == [1, 2] and c.repaired == 1 and c.unreadable == 0
        else:
            assert delivered(events) == [1] and c.unreadable == 1


def test_the_retransmit_server_repairs_a_region_by_one_multicast_under_the_retransmit_key():
    repair = RepairConfig(name="rx1", regions=("eu",), stripes=(0,), wait_ns=20 * MS, retry_ns=100 * MS, k_r=3)
    rx = RetransmitCore(RetransmitConfig(repair=repair, upstream={0: ("rp1",)},
                                         keys=KEYS.only(regions=["eu"], retransmit=["eu"]),
                                         requester_region={"c1": "eu", "c2": "eu", "c3": "eu"}), random.Random(1))
    rx.receive_datagram(packet(1, *[ALL.seal_region("eu", 0, s, trade(s)) for s in (1, 2, 3)]), "rp1", 0)
    ask = MoldRequest(session_name(0), 2, 1).encode()
    rx.receive_datagram(ask, "c1", 10 * MS)
    rx.receive_datagram(ask, "c2", 12 * MS)           # the same loss elsewhere in the region: coalesced
    rx.receive_datagram(ask, "stranger", 12 * MS)     # of no region we serve: refused
    out = rx.datagrams_to_send(12 * MS)
    assert [dest for _, dest in out] == [Group(region_group("eu", 0))]
    pkt = decode_packet(out[0][0])
    assert (pkt.seq, len(pkt.messages)) == (2, 1) and trade(2) not in out[0][0]
    assert (rx.coalesced, rx.refused) == (1, 1)
    be, g = customer("best_effort"), customer("guaranteed")
    for c in (be, g):
        c.receive_datagram(packet(1, ALL.seal_region("eu", 0, 1, trade(1))), "rp1", 0)
        c.receive_datagram(out[0][0], "rx1", 13 * MS)
    assert delivered(drain(g)) == [1, 2] and delivered(drain(be)) == [1] and be.unreadable == 1
    rx.receive_datagram(ask, "c3", 200 * MS)           # after the window: repaired again
    assert len(rx.datagrams_to_send(200 * MS)) == 1


def test_a_captured_source_message_sent_again_by_a_third_host_is_a_replay_alarm():
    core = rp()
    drain(core)
    frame = sealed_data(1, trade(1))
    core.receive_datagram(frame, "s1", 0)
    core.receive_datagram(frame, "s1", MS)            # the source itself re-sending: a duplicate
    core.receive_datagram(frame, "attacker", 2 * MS)  # someone else: a replay
    events = drain(core)
    assert [(e.detail["reason"], e.src, e.detail["via"]) for e in alarms(events)] == [
        (Reason.REPLAY, "s1", "attacker")]
    assert len([e for e in events if e.kind == Kind.RECV]) == 1 and core.duplicates == 1


def test_each_region_gets_the_remulticast_under_its_own_key():
    keys = KeySet(regions={"eu": b"\x22" * 32, "as": b"\x55" * 32})
    rm = Remulticaster(["eu", "as"], 0, sealer=Sealer(keys), heartbeat_ns=None)
    rm.release(1, trade(1))
    out = dict((dest.name, decode_packet(d)) for d, dest in rm.datagrams(0))
    assert set(out) == {region_group("eu", 0), region_group("as", 0)}
    eu_msg, as_msg = out[region_group("eu", 0)].messages[0], out[region_group("as", 0)].messages[0]
    assert eu_msg != as_msg and trade(1) not in eu_msg + as_msg
    europe = Sealer(keys.only(regions=["eu"]))
    assert europe.open_regional(0, 1, eu_msg)[0] == trade(1)
    with pytest.raises(SealError, match="lacks"):
        europe.open_regional(0, 1, as_msg)


def test_with_keys_only_the_regions_rt_may_send_a_heartbeat():
    c = customer()
    c.receive_datagram(packet(1, ALL.seal_region("eu", 0, 1, trade(1))), "rp1", 0)
    c.receive_datagram(MoldPacket(session_name(0), 1 << 40).encode(), "evil", MS)   # "you are far behind"
    c.receive_datagram(packet(2, ALL.seal_region("eu", 0, 2, trade(2))), "rp1", 2 * MS)
    events = drain(c)
    assert delivered(events) == [1, 2] and not [e for e in events if e.kind == Kind.CUST_SKIP]
    assert [(e.detail["reason"], e.src) for e in alarms(events)] == [(Reason.UNAUTHORIZED, "evil")]
    c.receive_datagram(MoldPacket(session_name(0), 4).encode(), "rp1", 3 * MS)      # the R_T's own: a gap
    assert [e.detail["first"] for e in drain(c) if e.kind == Kind.CUST_GAP] == [3]
