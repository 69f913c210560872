"""The attacker core (rmp/attacker.py) does what each mode says, at the rate its factory sets."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rmptwin.core.events import Kind
from rmptwin.core.groups import region_group, rmp_group
from rmptwin.core.sansio import Group
from rmptwin.core.striping import session_name
from rmptwin.core.trade_report import TradeReport
from rmptwin.errors import UserError
from rmptwin.factories.attacker_factory import attacker_config, legitimate_rate
from rmptwin.model import load_experiment
from rmptwin.rmp import wire
from rmptwin.rmp.attacker import FORGED_SYMBOL, AttackerConfig, AttackerCore
from rmptwin.rmp.moldudp64 import MoldPacket, decode_packet
from rmptwin.rmp.seal import PURPOSE_REGION, key_id, key_name

REPO = Path(__file__).resolve().parents[2]
MS = 1_000_000


def _core(mode: str, region: str | None = None, sealed: bool = False, rate: float = 100.0) -> AttackerCore:
    cfg = AttackerConfig(name="x1", mode=mode, stripe=0, region=region, rate=rate, start_ns=100 * MS,
                         stop_ns=200 * MS, sealed=sealed)
    return AttackerCore(cfg, random.Random(1))


def _run(core: AttackerCore, until_ns: int) -> list[tuple[bytes, object]]:
    out = []
    while (t := core.get_timer()) is not None and t <= until_ns:
        core.handle_timer(t)
        out += core.datagrams_to_send(t)
    return out


def test_an_unauthorized_source_publishes_under_its_own_label_at_its_rate_until_it_stops():
    core = _core("unauthorized")
    assert core.groups() == frozenset() and core.get_timer() == 100 * MS
    sent = _run(core, 10**12)
    assert len(sent) == 10                                 # 100/s for 100 ms
    frames = [wire.decode(d) for d, _ in sent]
    assert all(isinstance(f, wire.Data) and f.src == "x1" for f in frames)
    assert [f.src_seq for f in frames] == list(range(1, 11))
    assert {dest for _, dest in sent} == {Group(rmp_group(0))}
    assert core.get_timer() is None
    events = iter(core.next_event, None)
    assert [e.kind for e in events] == [Kind.ATTACK] * 10


def test_a_replayer_sends_captured_frames_again_and_old_trades_at_the_next_sequence_number():
    core = _core("replay", region="east")
    assert core.groups() == {rmp_group(0), region_group("east", 0)}
    data = wire.encode(wire.Data(0, "src1", 7, 1, b"trade"))
    core.receive_datagram(data, "src1", 50 * MS)
    core.receive_datagram(MoldPacket(session_name(0), 41, (b"old41", b"old42")).encode(), "rp3", 60 * MS)
    sent = _run(core, 100 * MS)
    assert (data, Group(rmp_group(0))) in sent               # byte for byte
    mold = [decode_packet(d) for d, dest in sent if dest == Group(region_group("east", 0))]
    assert mold and mold[0].seq == 43 and mold[0].messages[0] in (b"old41", b"old42")


@pytest.mark.parametrize("sealed", [False, True])
def test_a_forger_makes_up_trades_at_the_next_sequence_number_only_once_it_heard_one(sealed):
    core = _core("forge", region="west", sealed=sealed)
    assert _run(core, 120 * MS) == []                        # heard nothing: nothing to forge at
    core.receive_datagram(MoldPacket(session_name(0), 5, (b"m5",)).encode(), "rp1", 125 * MS)
    sent = _run(core, 130 * MS)
    pkt = decode_packet(sent[0][0])
    assert pkt.seq == 6 and sent[0][1] == Group(region_group("west", 0))
    msg = pkt.messages[0]
    if sealed:   # looks like a west envelope, cannot be one
        assert msg[0] == PURPOSE_REGION and msg[1:5] == key_id(key_name(PURPOSE_REGION, "west"))
    else:
        assert TradeReport.decode(msg).symbol == FORGED_SYMBOL


def test_the_flooder_sends_ten_times_the_legitimate_rate_and_bad_placement_is_one_line():
    loaded = load_experiment(REPO / "experiments" / "security-attack.yaml")
    hosts = {h.name: h for h in loaded.topology.hosts}
    assert legitimate_rate(loaded) == 200.0
    assert attacker_config(hosts["xflood"], loaded).rate == 2000.0
    assert attacker_config(hosts["xunauth"], loaded).rate == 200.0
    moved = hosts["xforge"].model_copy(update={"switch": "s3"})   # s3 is not in west
    with pytest.raises(UserError, match="not in region 'west'"):
        attacker_config(moved, loaded)
