"""The taxonomy codecs (rmptwin.taxonomy.codec): every frame of every protocol survives an
encode/decode round trip, and no datagram -- random, truncated, another protocol's -- makes a
decoder raise anything but the typed CodecError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.taxonomy.codec import CODECS, PROTOCOL_TYPES, CodecError, Data, Seq, Submit

I64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
FIELD = {
    "q": I64,
    "I": st.integers(0, 2 ** 32 - 1),
    "B": st.integers(0, 255),
    "s": st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255),
    "b": st.binary(max_size=300),
    "L": st.lists(I64, max_size=20).map(tuple),
}


def frames(protocol: str):
    return st.sampled_from(PROTOCOL_TYPES[protocol]).flatmap(
        lambda cls: st.tuples(*(FIELD[f] for f in cls.FORMAT)).map(lambda vals: cls(*vals)))


@pytest.mark.parametrize("protocol", sorted(CODECS))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_frame_round_trips(protocol, data):
    codec = CODECS[protocol]
    frame = data.draw(frames(protocol))
    assert codec.decode(codec.encode(frame)) == frame


@pytest.mark.parametrize("protocol", sorted(CODECS))
@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200), header=st.booleans(), ftype=st.integers(0, 20))
def test_random_bytes_raise_only_the_typed_error(protocol, raw, header, ftype):
    codec = CODECS[protocol]
    if header:   # a plausible header, so the body parsers are exercised too
        raw = bytes([0xC7, 1, codec.pid, ftype]) + len(raw).to_bytes(2, "big") + raw
    try:
        codec.decode(raw)
    except CodecError:
        pass


@pytest.mark.parametrize("protocol", sorted(CODECS))
def test_every_truncation_of_a_frame_is_a_codec_error(protocol):
    codec = CODECS[protocol]
    data = codec.encode(Seq(3, 42, "src1", 7, b"payload"))
    for n in range(len(data)):
        with pytest.raises(CodecError):
            codec.decode(data[:n])


def test_a_frame_of_another_protocol_is_refused_by_name():
    data = CODECS["ub"].encode(Submit("src1", 1, b"x"))
    with pytest.raises(CodecError, match="not bb"):
        CODECS["bb"].decode(data)
    with pytest.raises(CodecError, match="not a ub frame"):
        CODECS["ub"].encode(Data("src1", 1, b"x"))


def test_the_header_carries_magic_version_protocol_type_and_length():
    data = CODECS["gup"].encode(Seq(1, 2, "a", 3, b"xyz"))
    assert data[0] == 0xC7 and data[1] == 1 and data[2] == CODECS["gup"].pid and data[3] == Seq.TYPE
    assert int.from_bytes(data[4:6], "big") == len(data) - 6
    with pytest.raises(CodecError, match="version"):
        CODECS["gup"].decode(data[:1] + b"\x02" + data[2:])
