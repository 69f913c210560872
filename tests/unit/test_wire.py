"""RMP wire frames: every frame type round-trips, and no input makes decode raise anything
but WireError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmptwin.rmp import wire
from rmptwin.rmp.wire import (
    Ack,
    BadField,
    BadMagic,
    BadText,
    BadVersion,
    Data,
    Invite,
    Join,
    JoinAck,
    LengthMismatch,
    Nack,
    NewRing,
    Report,
    ReportAck,
    Retx,
    SecToken,
    TruncatedFrame,
    UnknownType,
    WireError,
    decode,
    encode,
)

names = st.text(min_size=0, max_size=12)
i64 = st.integers(-(2**63), 2**63 - 1)
seq = st.integers(-1, 2**40)
stripe = st.integers(0, 0xFFFF)
epoch = st.integers(0, 2**32 - 1)

datas = st.builds(Data, stripe, names, seq, seq, st.binary(max_size=200))
acks = st.builds(
    Ack, stripe, epoch, seq, seq, i64, names, names,
    st.lists(st.tuples(names, seq), max_size=20).map(tuple), seq,
)
nacks = st.builds(
    lambda s, e, r, w, lo, n, src: Nack(s, e, r, w, lo, lo + n, src),
    stripe, epoch, names, st.sampled_from([wire.WANT_ACKS, wire.WANT_MSGS, wire.WANT_ACK_OF]),
    st.integers(-1, 2**40), st.integers(0, 1000), names,
)
reports = st.builds(Report, stripe, epoch, names, names, st.sampled_from(sorted(wire.REASONS)), seq, names)
frames = st.one_of(
    datas, acks, nacks, reports,
    st.builds(Retx, stripe, st.one_of(datas, acks)),
    st.builds(ReportAck, stripe, epoch, names),
    st.builds(Invite, stripe, epoch, names),
    st.builds(Join, stripe, epoch, names, seq, seq, st.booleans(), epoch),
    st.builds(JoinAck, stripe, epoch, names),
    st.builds(NewRing, stripe, epoch, seq, seq, seq, i64, names, names,
              st.lists(names, min_size=1, max_size=10).map(tuple),
              st.lists(st.tuples(epoch, seq), max_size=8, unique_by=lambda x: x[1])
              .map(lambda xs: tuple(sorted(xs, key=lambda x: x[1])))),
    st.builds(SecToken, stripe, epoch, names, seq, names, names, seq),
)


@settings(max_examples=400, deadline=None)
@given(frames)
def test_every_frame_round_trips(frame):
    data = encode(frame)
    assert data[0] == wire.MAGIC and data[1] == wire.VERSION
    assert decode(data) == frame


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes_raise_only_wire_error(data):
    try:
        decode(data)
    except WireError:
        pass


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames, st.data())
def test_mutated_frames_raise_only_wire_error(frame, draw):
    data = bytearray(encode(frame))
    op = draw.draw(st.sampled_from(["flip", "cut", "extend", "splice"]))
    if op == "flip" and data:
        i = draw.draw(st.integers(0, len(data) - 1))
        data[i] = draw.draw(st.integers(0, 255))
    elif op == "cut":
        data = data[: draw.draw(st.integers(0, len(data)))]
    elif op == "extend":
        data += draw.draw(st.binary(min_size=1, max_size=8))
    else:
        i = draw.draw(st.integers(0, len(data)))
        data[i:i] = draw.draw(st.binary(min_size=1, max_size=4))
    try:
        decoded = decode(bytes(data))
    except WireError:
        return
    # whatever decodes must encode back to the same bytes (no silent reinterpretation)
    assert encode(decoded) == bytes(data)


def _header(code: int, body: bytes, magic: int = wire.MAGIC, version: int = wire.VERSION) -> bytes:
    return struct.pack("!BBBH", magic, version, code, len(body)) + body


def test_typed_errors():
    good = encode(Invite(0, 1, "x1"))
    with pytest.raises(TruncatedFrame):
        decode(good[:3])
    with pytest.raises(TruncatedFrame):
        decode(_header(wire.INVITE, b"\x00"))
    with pytest.raises(BadMagic):
        decode(b"\x00" + good[1:])
    with pytest.raises(BadVersion):
        decode(good[:1] + bytes([wire.VERSION + 1]) + good[2:])
    with pytest.raises(UnknownType):
        decode(_header(99, b""))
    with pytest.raises(LengthMismatch):
        decode(good + b"\x00")
    with pytest.raises(LengthMismatch):
        decode(_header(wire.INVITE, good[5:] + b"zz"))
    with pytest.raises(BadText):
        decode(_header(wire.INVITE, b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x02\xff\xfe"))
    # a null token may not carry messages, an ACK must
    ack = encode(Ack(0, 1, 5, 9, 0, "a", "b", (("s", 1),)))
    with pytest.raises(BadField):
        decode(ack[:2] + bytes([wire.NULL_TOKEN]) + ack[3:])
    null = encode(Ack(0, 1, 5, 9, 0, "a", "b", ()))
    with pytest.raises(BadField):
        decode(null[:2] + bytes([wire.ACK]) + null[3:])
    # RETX carries only DATA or ACK, one level deep
    inner = encode(Invite(0, 1, "x"))
    with pytest.raises(BadField):
        decode(_header(wire.RETX, b"\x00\x00" + inner))


def test_names_and_magic_tell_rmp_from_mold():
    assert wire.is_rmp(encode(Data(0, "src1", 1, 1, b"x")))
    assert not wire.is_rmp(b"RMPT000000" + bytes(10))
    assert Ack(0, 0, 1, 1, 0, "a", "b", ()).TYPE_NAME == "NULL_TOKEN"
    assert Ack(0, 0, 1, 1, 0, "a", "b", (("s", 1), ("s", 2))).last_gseq == 2
