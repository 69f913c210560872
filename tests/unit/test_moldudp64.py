"""MoldUDP64 codec: NASDAQ layout, round trips, and malformed input rejected with a typed error."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.rmp.moldudp64 import (
    HEADER_SIZE,
    MoldDecodeError,
    MoldPacket,
    MoldRequest,
    decode_packet,
    decode_request,
    is_request,
    pack_messages,
)

sessions = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=10)
seqs = st.integers(min_value=0, max_value=2**63)
payloads = st.lists(st.binary(max_size=300), max_size=40)


def test_layout_matches_the_nasdaq_spec():
    """Session (10, space padded) | seq uint64 BE | count uint16 BE | (len uint16 BE | data)*."""
    pkt = MoldPacket("RMPT000003", 0x0102030405060708, (b"ab", b"")).encode()
    expected = b"RMPT000003" + bytes([1, 2, 3, 4, 5, 6, 7, 8]) + b"\x00\x02" + b"\x00\x02ab" + b"\x00\x00"
    assert pkt == expected
    assert MoldPacket("AB", 7).encode() == b"AB        " + struct.pack("!QH", 7, 0)       # heartbeat
    assert MoldPacket("AB", 7, end_of_session=True).encode()[-2:] == b"\xff\xff"
    assert MoldRequest("AB", 9, 3).encode() == b"AB        " + struct.pack("!QH", 9, 3)


@given(sessions, seqs, payloads)
def test_packet_round_trip(session, seq, msgs):
    pkt = MoldPacket(session, seq, tuple(msgs))
    back = decode_packet(pkt.encode())
    assert back == pkt
    assert back.is_heartbeat == (not msgs)
    assert back.next_seq == seq + len(msgs)


@given(sessions, seqs, st.integers(min_value=1, max_value=0xFFFE))
def test_request_round_trip_and_is_told_apart_from_downstream(session, seq, count):
    data = MoldRequest(session, seq, count).encode()
    assert decode_request(data) == MoldRequest(session, seq, count)
    assert is_request(data)


@given(sessions, seqs, payloads)
def test_downstream_packets_are_never_taken_for_requests(session, seq, msgs):
    assert not is_request(MoldPacket(session, seq, tuple(msgs)).encode())
    assert not is_request(MoldPacket(session, seq, end_of_session=True).encode())


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_mold_decode_error(data):
    for decode in (decode_packet, decode_request):
        try:
            decode(data)
        except MoldDecodeError:
            pass


@settings(max_examples=300)
@given(sessions, seqs, st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=8),
       st.data())
def test_mutated_packets_decode_or_raise_mold_decode_error(session, seq, msgs, data):
    raw = bytearray(MoldPacket(session, seq, tuple(msgs)).encode())
    how = data.draw(st.sampled_from(["truncate", "extend", "flip"]))
    if how == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif how == "extend":
        raw += data.draw(st.binary(min_size=1, max_size=5))
    else:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    try:
        pkt = decode_packet(bytes(raw))
    except MoldDecodeError:
        return
    assert pkt.encode() == bytes(raw)  # whatever decodes re-encodes to the same bytes


@pytest.mark.parametrize("data, why", [
    (b"", "shorter"),
    (b"RMPT000000" + struct.pack("!QH", 1, 2) + b"\x00\x01a", "truncated"),
    (b"RMPT000000" + struct.pack("!QH", 1, 1) + b"\x00\x05ab", "truncated"),
    (b"RMPT000000" + struct.pack("!QH", 1, 1) + b"\x00\x01ab", "after the last"),
    (b"RMPT00000\x00" + struct.pack("!QH", 1, 0), "ASCII"),
    (b"RMPT000000" + struct.pack("!QH", 1, 0xFFFF) + b"x", "end-of-session"),
    (b"RMPT000000" + struct.pack("!QH", 2**64 - 1, 2) + b"\x00\x00\x00\x00", "overflow"),
])
def test_malformed_packets_say_what_is_wrong(data, why):
    with pytest.raises(MoldDecodeError, match=why):
        decode_packet(data)


def test_malformed_requests_are_rejected():
    with pytest.raises(MoldDecodeError):
        decode_request(b"RMPT000000" + struct.pack("!QH", 1, 0))      # count 0 is a heartbeat
    with pytest.raises(MoldDecodeError):
        decode_request(b"RMPT000000" + struct.pack("!QH", 1, 3) + b"x")
    with pytest.raises(MoldDecodeError):
        decode_request(b"RMPT000000" + struct.pack("!QH", 2**64 - 1, 5))


def test_encoder_refuses_what_the_format_cannot_carry():
    with pytest.raises(ValueError):
        MoldPacket("ELEVENCHARS", 1).encode()
    with pytest.raises(ValueError):
        MoldPacket("é", 1).encode()
    with pytest.raises(ValueError):
        MoldPacket("A", -1).encode()
    with pytest.raises(ValueError):
        MoldRequest("A", 1, 0).encode()


@given(seqs, st.lists(st.binary(max_size=700), max_size=60), st.integers(min_value=100, max_value=1500))
def test_pack_messages_keeps_packets_small_and_sequence_consecutive(first, msgs, limit):
    packets = pack_messages("S", first, msgs, limit)
    assert [m for p in packets for m in p.messages] == msgs
    expect = first
    for p in packets:
        assert p.seq == expect
        expect = p.next_seq
        size = len(p.encode())
        assert size <= limit or len(p.messages) == 1  # an oversized message travels alone
        assert size == HEADER_SIZE + sum(2 + len(m) for m in p.messages)
