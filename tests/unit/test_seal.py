"""rmp.seal: what a source seals only the R_T read; any changed byte, position or key fails;
a holder without a key cannot read what it is not entitled to; control frames carry a MAC."""

from __future__ import annotations

import pytest

from rmptwin.core.events import Kind
from rmptwin.rmp import wire
from rmptwin.rmp.seal import (
    MAC_BYTES,
    OVERHEAD,
    PURPOSE_REGION,
    PURPOSE_REPAIR,
    KeySet,
    Reason,
    Sealer,
    SealError,
    alarm,
)


def _keys() -> KeySet:
    return KeySet(sources={"S1": b"\x01" * 32, "S2": b"\x02" * 32}, regions={"eu": b"\x03" * 32, "as": b"\x04" * 32},
                  retransmit={"eu": b"\x05" * 32, "as": b"\x06" * 32}, control=b"\x07" * 32)


def _reason(fn) -> str:
    with pytest.raises(SealError) as e:
        fn()
    return e.value.reason


def test_a_source_message_opens_only_at_its_own_position_and_hides_the_trade():
    s = Sealer(_keys())
    env = s.seal_source("S1", 0, 5, b"IBM 100 @ 187.25")
    assert b"IBM" not in env and len(env) == len(b"IBM 100 @ 187.25") + OVERHEAD
    assert s.open_source("S1", 0, 5, env) == b"IBM 100 @ 187.25"
    assert _reason(lambda: s.open_source("S1", 0, 6, env)) == Reason.MAC_FAILED       # replayed at another seq
    assert _reason(lambda: s.open_source("S1", 1, 5, env)) == Reason.MAC_FAILED       # on another stripe
    assert _reason(lambda: s.open_source("S2", 0, 5, env)) == Reason.MAC_FAILED       # claimed by another source
    assert _reason(lambda: s.open_source("S9", 0, 5, env)) == Reason.UNAUTHORIZED     # a source with no key
    for i in range(len(env)):
        flipped = bytearray(env)
        flipped[i] ^= 0x40
        assert _reason(lambda: s.open_source("S1", 0, 5, bytes(flipped))) == Reason.MAC_FAILED


def test_sealing_is_deterministic_and_a_restarted_source_label_gets_fresh_ciphertext():
    s = Sealer(_keys())
    assert s.seal_source("S1", 0, 1, b"x" * 20) == Sealer(_keys()).seal_source("S1", 0, 1, b"x" * 20)
    restarted = s.seal_source("S1~00ab", 0, 1, b"x" * 20)
    assert restarted != s.seal_source("S1", 0, 1, b"x" * 20)
    assert s.open_source("S1~00ab", 0, 1, restarted) == b"x" * 20


def test_a_source_holding_only_its_own_key_cannot_read_another_source():
    floor = Sealer(_keys().only(sources=["S2"], control=True))
    env = Sealer(_keys()).seal_source("S1", 0, 1, b"secret trade")
    assert _reason(lambda: floor.open_source("S1", 0, 1, env)) == Reason.UNAUTHORIZED


def test_repairs_are_readable_by_guaranteed_customers_only():
    rt = Sealer(_keys())
    guaranteed = Sealer(_keys().only(regions=["eu"], retransmit=["eu"]))
    best_effort = Sealer(_keys().only(regions=["eu"]))
    regional, repair = rt.seal_region("eu", 0, 9, b"trade"), rt.seal_repair("eu", 0, 9, b"trade")
    assert guaranteed.open_regional(0, 9, regional) == (b"trade", PURPOSE_REGION, "eu")
    assert guaranteed.open_regional(0, 9, repair) == (b"trade", PURPOSE_REPAIR, "eu")
    assert best_effort.open_regional(0, 9, regional)[0] == b"trade"
    assert _reason(lambda: best_effort.open_regional(0, 9, repair)) == SealError.NOT_ENTITLED
    other_region = Sealer(_keys().only(regions=["as"]))
    assert _reason(lambda: other_region.open_regional(0, 9, regional)) == SealError.NOT_ENTITLED
    assert _reason(lambda: guaranteed.open_regional(0, 10, regional)) == Reason.MAC_FAILED
    # every R_T seals the same agreed message identically: customers dedupe copies by bytes
    assert Sealer(_keys()).seal_region("eu", 0, 9, b"trade") == regional


def test_control_frames_carry_a_mac_that_any_change_breaks():
    s = Sealer(_keys())
    frame = wire.encode(wire.Ack(0, 1, 7, 100, 123, "rp1", "rp2", (("S1", 1),)))
    macced = s.mac_control(frame)
    assert len(macced) == len(frame) + MAC_BYTES and s.open_control(macced) == frame
    assert _reason(lambda: s.open_control(frame)) == Reason.MAC_FAILED
    assert _reason(lambda: s.open_control(macced[:-1] + bytes([macced[-1] ^ 1]))) == Reason.MAC_FAILED
    stranger = Sealer(KeySet(control=b"\x08" * 32))
    assert _reason(lambda: stranger.open_control(macced)) == Reason.MAC_FAILED


def test_a_key_set_never_shows_its_keys_and_round_trips_through_json():
    keys = _keys()
    assert "\\x01" not in repr(keys) and "AQEB" not in repr(keys) and "S1" in repr(keys)
    again = KeySet.from_json_dict(keys.to_json_dict())
    assert dict(again.sources) == dict(keys.sources) and again.control == keys.control
    assert dict(keys.only(regions=["eu"]).regions) == {"eu": b"\x03" * 32}
    assert keys.only(regions=["eu"]).control is None
    with pytest.raises(ValueError, match="not 32 bytes"):
        KeySet(sources={"S1": b"short"})
    with pytest.raises(ValueError, match="version 1"):
        KeySet.from_json_dict({"version": 2})


def test_an_alarm_names_the_claimed_sender_and_where_it_came_from():
    ev = alarm(Reason.MAC_FAILED, "S1", "evil", stripe=0)
    assert ev.kind == Kind.ALARM and ev.src == "S1"
    assert ev.detail == {"reason": "mac_failed", "claimed": "S1", "via": "evil", "stripe": 0}
