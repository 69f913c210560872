"""Frozen wire vectors: the bytes of one frame of each type, taken from
the codec before it was rewritten around precompiled structs, and the error each truncated or
byte-changed copy of them raised then. The codec may change how it packs; the bytes on the wire
and what ``decode`` says about bad ones may not.

Every vector: the frame encodes to exactly these bytes, decodes from them to an equal frame, and
its hostile variants (``error_outcomes``) give the same exception types and messages as before,
checked by a digest of all of them (a mismatch prints the outcomes, to compare by eye).
"""

from __future__ import annotations

import copy
import hashlib
import pickle

import pytest

from rmptwin.rmp import wire
from rmptwin.rmp.wire import (  # noqa: F401 - the vectors' expressions name them
    REASON_NO_ACK,
    REASON_TOKEN_LOST,
    WANT_ACKS,
    WANT_MSGS,
    Ack,
    Data,
    Invite,
    Join,
    JoinAck,
    Nack,
    NewRing,
    Report,
    ReportAck,
    Retx,
    SecToken,
    WireError,
    decode,
    encode,
)

# (name, the frame as an expression, its encoding in hex)
VECTORS = [
    ('DATA', "Data(3, 's1', 42, 40, bytes(range(64)))",
     'a5020100550003027331000000000000002a0000000000000028000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'),
    ('DATA_empty_payload_unicode_src', "Data(0xFFFF, 'sourcé-ü', -1, 2**40, b'')",
     'a50201001dffff0a736f757263c3a92dc3bcffffffffffffffff0000010000000000'),
    ('ACK', "Ack(1, 7, 100, 3201, 1_700_000_000_123_456_789, 'rp1', 'rp2', (('s1', 10), ('s2', 11), ('s1', 12)), 97)",
     'a50202005100010000000700000000000000640000000000000c8117979cfe3d85cd15000000000000006103727031037270320003027331000000000000000a027332000000000000000b027331000000000000000c'),
    ('ACK_negative', "Ack(0, 2**32 - 1, -1, -(2**63), 2**63 - 1, '', 'next', (('', -5),), -2)",
     'a5020200370000ffffffffffffffffffffffff80000000000000007ffffffffffffffffffffffffffffffe00046e657874000100fffffffffffffffb'),
    ('NULL_TOKEN', "Ack(2, 3, 9, 50, 123456, 'rp2', 'rp3')",
     'a50203003000020000000300000000000000090000000000000032000000000001e240000000000000000003727032037270330000'),
    ('NACK', "Nack(1, 4, 'rp3', WANT_MSGS, 10, 20, 's1')",
     'a50204001e0001000000040372703302000000000000000a0000000000000014027331'),
    ('NACK_no_src', "Nack(0, 4, 'c1', WANT_ACKS, -1, 2**40)",
     'a50204001b00000000000402633101ffffffffffffffff000001000000000000'),
    ('RETX_DATA', "Retx(2, Data(2, 's2', 5, 4, b'trade'))",
     'a5020500210002a50201001a0002027332000000000000000500000000000000047472616465'),
    ('RETX_ACK', "Retx(1, Ack(1, 7, 101, 3204, 5, 'rp2', 'rp3', (('s3', 1),), 99))",
     'a5020500420001a50202003b00010000000700000000000000650000000000000c8400000000000000050000000000000063037270320372703300010273330000000000000001'),
    ('RETX_NULL_TOKEN', "Retx(1, Ack(1, 7, 102, 3205, 6, 'rp3', 'rp1'))",
     'a5020500370001a50203003000010000000700000000000000660000000000000c850000000000000006000000000000000003727033037270310000'),
    ('REPORT', "Report(1, 7, 'rp2', 'rp3', REASON_TOKEN_LOST, 101, 'ring-a')",
     'a50206001e00010000000703727032037270330200000000000000650672696e672d61'),
    ('REPORT_no_ring', "Report(0, 1, 's1', 'rp1', REASON_NO_ACK, 3)",
     'a5020600170000000000010273310372703101000000000000000300'),
    ('REPORT_ACK', "ReportAck(1, 7, 'rp2')",
     'a50207000a00010000000703727032'),
    ('INVITE', "Invite(1, 8, 'xr1')",
     'a50208000a00010000000803787231'),
    ('JOIN', "Join(1, 8, 'rp2', 100, 3205, True, 7)",
     'a50209001f0001000000080372703200000000000000640000000000000c850100000007'),
    ('JOIN_defaults', "Join(0, 9, 'rp3', -1, 0)",
     'a50209001f00000000000903727033ffffffffffffffff00000000000000000000000000'),
    ('JOIN_ACK', "JoinAck(1, 8, 'rp2')",
     'a5020a000a00010000000803727032'),
    ('NEW_RING', "NewRing(1, 8, 101, 100, 3205, 99_000, 'rp1', 'rp2', ('rp1', 'rp2', 'rp3'), ((6, 1), (7, 50), (8, 101)))",
     'a5020b0062000100000008000000000000006500000000000000640000000000000c8500000000000182b8037270310372703200030372703103727032037270330003000000060000000000000001000000070000000000000032000000080000000000000065'),
    ('NEW_RING_no_lineage', "NewRing(0, 2, 1, 0, 1, 0, 'rp1', 'rp1', ('rp1',))",
     'a5020b0036000000000002000000000000000100000000000000000000000000000001000000000000000003727031037270310001037270310000'),
    ('SEC_TOKEN', "SecToken(1, 7, 'eu', 100, 'rp1', 'rs1', 12)",
     'a5020c002100010000000702657500000000000000640372703103727331000000000000000c'),
]


def error_outcomes(data: bytes) -> list[str]:
    """What decode makes of hostile variants of ``data``: the body cut at every length (the
    header's length adjusted, so the body's own parsing fails), one stray byte appended, and
    each body byte replaced by 0x00, 0x80 and 0xFF."""
    header, body = data[:3], data[wire.HEADER_SIZE:]
    variants = [body[:k] for k in range(len(body))] + [body + b"\x00"]
    variants += [body[:i] + bytes([v]) + body[i + 1:] for i in range(len(body)) for v in (0x00, 0x80, 0xFF)]
    out = []
    for i, b in enumerate(variants):
        try:
            decode(header + len(b).to_bytes(2, "big") + b)
            out.append(f"{i} ok")
        except WireError as e:
            out.append(f"{i} {type(e).__name__} {e}")
    return out


# sha256 (first 32 hex digits) of error_outcomes(vector), joined by newlines, as the old codec gave them
OUTCOME_DIGESTS = {
    'DATA': '5d8afb5f2f5bb86382c7432eaec78b21',  # 341 cases
    'DATA_empty_payload_unicode_src': '850921e9358eff13602ff07b03043127',  # 117 cases
    'ACK': '9c7eb10e549dfb91fbe7d82684c63f47',  # 325 cases
    'ACK_negative': 'e90acac928baa115699578eb68dab245',  # 221 cases
    'NULL_TOKEN': '2d87db17f345747a853af52283274079',  # 193 cases
    'NACK': 'b49bb5858704dc1f5f566565cc3d605a',  # 121 cases
    'NACK_no_src': '22707d3d8ee30b6605b72d96fa30b280',  # 109 cases
    'RETX_DATA': '73e3720cbcf9c94322a9554e5a612032',  # 133 cases
    'RETX_ACK': '10881798074251f1fad80378276247b8',  # 265 cases
    'RETX_NULL_TOKEN': 'f80ebf1b0841e012fc1e30854eb833c7',  # 221 cases
    'REPORT': '455bb77c14a30f6e87c692460e26f92b',  # 121 cases
    'REPORT_no_ring': 'b6b4d2b3ea45ef589450e4402f29e885',  # 93 cases
    'REPORT_ACK': 'c8b15dfc84870e46593c655f58d636d8',  # 41 cases
    'INVITE': '11d1c43303f4427af7d8e231f484d4d1',  # 41 cases
    'JOIN': '1f43f07a9ad6a0d8fdf04727c5bd5aed',  # 125 cases
    'JOIN_defaults': '1f43f07a9ad6a0d8fdf04727c5bd5aed',  # 125 cases
    'JOIN_ACK': 'e38e4549f2f71c7dc5d352770b9e4e0d',  # 41 cases
    'NEW_RING': '0448e7946f3693c729d815724de5029f',  # 393 cases
    'NEW_RING_no_lineage': '465a21c5f51f3db944487b4a798d32c1',  # 217 cases
    'SEC_TOKEN': '8c8f740be094208f94fcb70d00150fe7',  # 133 cases
}

# a few of those outcomes spelled out: (case, datagram in hex, exception, message)
ERRORS = [
    ('short header', 'a50202', 'TruncatedFrame', 'RMP frame of 3 bytes is shorter than its 5-byte header'),
    ('bad magic', '000202004600010000000700000000000000640000000000000c810000000000000005000000000000006103727031037270320002027331000000000000000a027332000000000000000b', 'BadMagic', 'first byte 0x00 is not the RMP magic 0xa5'),
    ('bad version', 'a50702004600010000000700000000000000640000000000000c810000000000000005000000000000006103727031037270320002027331000000000000000a027332000000000000000b', 'BadVersion', 'RMP version 7, expected 2'),
    ('unknown type', 'a50263004600010000000700000000000000640000000000000c810000000000000005000000000000006103727031037270320002027331000000000000000a027332000000000000000b', 'UnknownType', 'unknown RMP frame type 99'),
    ('length', 'a50202004600010000000700000000000000640000000000000c810000000000000005000000000000006103727031037270320002027331000000000000000a027332000000000000000b00', 'LengthMismatch', 'ACK frame header says 70 body bytes, datagram has 71'),
    ('ack cut in head', 'a5020200140001000000070000000000000064000000000000', 'TruncatedFrame', 'ACK frame truncated at byte 14 (needs 8 more)'),
    ('ack cut in msgs', 'a50202004300010000000700000000000000640000000000000c810000000000000005000000000000006103727031037270320002027331000000000000000a0273320000000000', 'TruncatedFrame', 'ACK frame truncated at byte 59'),
    ('nack bad want', 'a50204001e0001000000040372703309000000000000000a0000000000000014027331', 'BadField', 'NACK asks for unknown kind 9'),
    ('nack empty', 'a50204001e0001000000040372703302000000000000000a0000000000000001027331', 'BadField', 'NACK range is empty (hi < lo)'),
    ('retx of invite', 'a5020500110001a50208000a00010000000803787231', 'BadField', 'RETX carries INVITE, expected DATA or ACK'),
    ('join flag', 'a50209001f0001000000080372703200000000000000640000000000000c850200000007', 'BadField', 'JOIN recovering flag must be 0 or 1'),
    ('new ring no members', 'a5020b00320000000000020000000000000001000000000000000000000000000000010000000000000000037270310372703100000000', 'BadField', 'NEW_RING has no members'),
]

IDS = [v[0] for v in VECTORS]


@pytest.mark.parametrize(("name", "expr", "hexstr"), VECTORS, ids=IDS)
def test_encodes_to_the_frozen_bytes_and_back(name, expr, hexstr):
    frame = eval(expr)
    assert encode(frame).hex() == hexstr
    assert decode(bytes.fromhex(hexstr)) == frame
    assert wire._decode(bytes.fromhex(hexstr), 0) == frame          # past the decode cache
    assert decode(bytearray.fromhex(hexstr)) == frame               # not bytes: not cached


def test_every_frame_type_has_a_vector():
    codes = {bytes.fromhex(h)[2] for _, _, h in VECTORS}
    inner = {bytes.fromhex(h)[9] for _, _, h in VECTORS if bytes.fromhex(h)[2] == wire.RETX}
    assert codes == set(wire.TYPE_NAMES)
    assert inner == {wire.DATA, wire.ACK, wire.NULL_TOKEN}


@pytest.mark.parametrize(("name", "expr", "hexstr"), VECTORS, ids=IDS)
def test_hostile_variants_fail_as_they_did(name, expr, hexstr):
    lines = error_outcomes(bytes.fromhex(hexstr))
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]
    assert digest == OUTCOME_DIGESTS[name], "\n".join(lines)


@pytest.mark.parametrize(("case", "hexstr", "error", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_messages(case, hexstr, error, message):
    with pytest.raises(WireError) as got:
        decode(bytes.fromhex(hexstr))
    assert (type(got.value).__name__, str(got.value)) == (error, message)


# ----------------------------------------------------------------------------- the frames as values


@pytest.mark.parametrize(("name", "expr", "hexstr"), VECTORS, ids=IDS)
def test_frames_are_values(name, expr, hexstr):
    """Equal and equally hashed when their fields are, printable as they are built, and
    copied or pickled to an equal frame."""
    a, b = eval(expr), eval(expr)
    assert a == b and not (a != b) and hash(a) == hash(b) and len({a, b}) == 1
    assert eval(repr(a)) == a and repr(a).startswith(type(a).__name__ + "(")
    assert copy.copy(a) == a and copy.deepcopy(a) == a
    assert pickle.loads(pickle.dumps(a)) == a
    assert a != wire.Invite(0, 0, "x") and a != object()


def test_frames_compare_by_type_and_every_field():
    assert wire.JoinAck(1, 2, "a") != wire.ReportAck(1, 2, "a")      # same fields, another frame
    assert wire.Nack(0, 1, "r", WANT_MSGS, 1, 2) != wire.Nack(0, 1, "r", WANT_MSGS, 1, 2, "s")
    assert wire.Nack(0, 1, "r", WANT_MSGS, 1, 2) == wire.Nack(0, 1, "r", WANT_MSGS, 1, 2, src="")
    assert repr(wire.Data(1, "s", 2, 3, b"x")) == "Data(stripe=1, src='s', src_seq=2, acked_below=3, payload=b'x')"
    assert wire.Retx(1, wire.Data(1, "s", 2, 3, b"x")) != wire.Retx(1, wire.Data(1, "s", 2, 3, b"y"))


def test_keyword_construction_and_defaults():
    ack = wire.Ack(stripe=0, epoch=1, token=2, first_gseq=3, ts_ns=4, token_site="a", next_site="b")
    assert ack.msgs == () and ack.stable == 0 and ack.TYPE_NAME == "NULL_TOKEN" and ack.last_gseq == 2
    ring = wire.NewRing(0, 1, 2, 1, 5, 0, "a", "b")
    assert ring.members == () and ring.lineage == ()
    join = wire.Join(0, 1, "m", 2, 3)
    assert join.recovering is False and join.have_epoch == 0
    assert wire.Report(0, 1, "r", "s", REASON_NO_ACK, 3).ring == ""
