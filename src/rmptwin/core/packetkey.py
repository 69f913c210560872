"""Packet identities: what the link model's keyed draws are keyed by (``rmptwin.core.linkmodel``).

``packet_key`` names the UDP payload of a datagram, ``frame_key`` that of an Ethernet frame, as
``(identity, stream, index)``: for an RMP DATA frame (stripe, src, src_seq), for ACK/NULL_TOKEN
(stripe, epoch, token), for a RETX the frame it carries, for MoldUDP64 (session, sequence); other
frames by their kind alone (``stream`` None: keyed by their place among such packets). ``stream``
and ``index`` place a first copy in its stream's Gilbert-Elliott chain.

Computed from the bytes alone, so both backends get the same key for the same frame: the
simulator from the datagram it carries, the relay from the Ethernet frame it reads.
Layouts: rmptwin.rmp.wire (RMP, magic 0xA5), rmptwin.venue.wire (version 1, type, u32
length), MoldUDP64 (10-byte session, u64 sequence, u16 count). Never raises. Pure.
"""

from __future__ import annotations

PacketKey = tuple[bytes, bytes | None, int]  # (identity, stream (None: none), index in the stream)

UNKEYED: PacketKey = (b"?", None, -1)   # no identity: keyed by its place among such packets

_FROM_BYTES = int.from_bytes

RMP_MAGIC = 0xA5   # the first byte of every RMP frame (rmptwin.rmp.wire's MAGIC)
_RMP_DATA, _RMP_ACK, _RMP_NULL, _RMP_RETX = 1, 2, 3, 5
MOLD_HEADER_SIZE = 20
_RMP_KINDS = tuple(b"K%d" % t for t in range(256))
_VENUE_KINDS = tuple(b"V%d" % t for t in range(256))
_MOLD_REQUEST: PacketKey = (b"MQ", None, -1)
_NOT_UDP: PacketKey = (b"L2", None, -1)


def _rmp_key(data: bytes, s: int, tag: bytes) -> PacketKey:
    """DATA by (stripe, src, src_seq), ACK/NULL_TOKEN by (stripe, epoch, token), RETX by
    what it carries; other RMP frames by type. Fields that differ between backends for
    the same frame (acked_below, timestamps, payload) are left out."""
    size = len(data)
    if size < s + 5:
        return (tag + b"K?", None, -1)
    kind, b = data[s + 2], s + 5
    if kind == _RMP_DATA and size >= b + 3:
        end = b + 3 + data[b + 2] + 8          # stripe u16, src (u8 length + bytes), src_seq i64
        if size >= end:
            stream = tag + b"D" + data[b:end - 8]
            return (stream + data[end - 8:end], stream, _FROM_BYTES(data[end - 8:end], "big", signed=True))
    elif (kind == _RMP_ACK or kind == _RMP_NULL) and size >= b + 14:
        stream = tag + b"A" + data[b:b + 6]    # stripe u16, epoch u32; then token i64
        return (stream + data[b + 6:b + 14], stream, _FROM_BYTES(data[b + 6:b + 14], "big", signed=True))
    elif kind == _RMP_RETX and not tag:
        return _rmp_key(data, b + 2, b"R")
    return (tag + _RMP_KINDS[kind], None, -1)


def packet_key(data: bytes, start: int = 0) -> PacketKey:
    """The identity of the UDP payload ``data[start:]`` for ``LinkDirection.offer``."""
    n = len(data) - start
    if n <= 0:
        return UNKEYED
    if data[start] == RMP_MAGIC:
        return _rmp_key(data, start, b"")
    if n >= 6 and data[start] == 1 and _FROM_BYTES(data[start + 2:start + 6], "big") == n - 6:
        return (_VENUE_KINDS[data[start + 1]], None, -1)
    if n >= MOLD_HEADER_SIZE:
        if is_mold_request(data, start):
            return _MOLD_REQUEST
        stream = b"M" + data[start:start + 10]
        seq = data[start + 10:start + 18]
        return (stream + seq, stream, _FROM_BYTES(seq, "big"))
    return UNKEYED


def is_mold_request(data: bytes, start: int = 0) -> bool:
    """Whether ``data[start:]`` is a MoldUDP64 re-request: exactly the 20-byte header, with a
    message count in 1..0xFFFE, which no downstream packet can be (``rmptwin.rmp.moldudp64``)."""
    if len(data) - start != MOLD_HEADER_SIZE:
        return False
    count = _FROM_BYTES(data[start + 18:start + 20], "big")
    return 0 < count < 0xFFFF


def udp_payload_start(frame: bytes) -> int:
    """Where the UDP payload of an Ethernet frame (IPv4, optional 802.1Q tag) starts; -1 if none."""
    if len(frame) < 42:
        return -1
    off, ethertype = 14, (frame[12] << 8) | frame[13]
    if ethertype == 0x8100:
        off, ethertype = 18, (frame[16] << 8) | frame[17]
    if ethertype != 0x0800 or len(frame) < off + 20 or frame[off + 9] != 17:
        return -1
    if (frame[off + 6] & 0x1F) or frame[off + 7]:   # a later IP fragment: no UDP header
        return -1
    start = off + (frame[off] & 0x0F) * 4 + 8
    return start if start <= len(frame) else -1


def frame_key(frame: bytes) -> PacketKey:
    """``packet_key`` of an Ethernet frame's UDP payload (what the relay reads)."""
    start = udp_payload_start(frame)
    return _NOT_UDP if start < 0 else packet_key(frame, start)
