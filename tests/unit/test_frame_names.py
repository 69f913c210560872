"""Naming datagrams for the drop log: RMP, venue and MoldUDP64 frames, and junk that never raises."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.records.frame_names import describe
from rmptwin.rmp import wire
from rmptwin.venue import wire as vwire


def test_rmp_frames_are_named_with_their_message():
    data = wire.encode(wire.Data(stripe=1, src="srcny", src_seq=42, acked_below=40, payload=b"x" * 32))
    assert describe(data) == ("DATA", "srcny", 42, -1)
    ack = wire.Ack(stripe=0, epoch=1, token=9, first_gseq=100, ts_ns=5, token_site="rp1", next_site="rp2",
                   msgs=(("srcny", 1), ("srclon", 2)))
    name, _, _, gseq = describe(wire.encode(ack))
    assert name == "ACK" and gseq == 100
    retx = wire.Retx(stripe=1, original=wire.Data(stripe=1, src="s2", src_seq=7, acked_below=0, payload=b""))
    assert describe(wire.encode(retx)) == ("RETX", "s2", 7, -1)


def test_mold_and_venue_frames_are_named():
    assert describe(struct.pack("!10sQH", b"RMPT000000", 77, 1) + struct.pack("!H", 2) + b"ab") == ("MOLD", "", -1, 77)
    assert describe(struct.pack("!10sQH", b"RMPT000000", 5, 3))[0] == "MOLD_REQ"
    assert describe(vwire.range_frame(vwire.T_RESEND_REQ, 1, 2))[0] == "RESEND_REQ"


@settings(max_examples=300, derandomize=True)
@given(st.binary(max_size=80))
def test_any_bytes_get_a_name_and_never_raise(data):
    name, src, src_seq, gseq = describe(data)
    assert isinstance(name, str) and name and isinstance(src, str)
    assert isinstance(src_seq, int) and isinstance(gseq, int)
    # They land in int64 columns (links/drops.parquet): a MoldUDP64 sequence is unsigned.
    assert -(2**63) <= src_seq < 2**63 and -(2**63) <= gseq < 2**63


@settings(max_examples=200, derandomize=True)
@given(st.binary(max_size=60))
def test_rmp_magic_with_garbage_never_raises(tail):
    assert describe(b"\xa5" + tail)[0]
