"""Name a datagram for the drop log and link counts: frame type, source, M_s, gseq.

Both ground-truth logs use it, so a dropped frame is named alike in both backends: the
simulator's (``sim.network``, which carries opaque bytes) and the user-space relays'
(``emulation.droplog``, which names drops after the run). It sits below both, beside the
wire formats it reads: RMP frames (magic 0xA5) are decoded with ``rmptwin.rmp.wire``;
exchange-venue frames (version 1, type, u32 body length) are named from
``rmptwin.venue.wire``; MoldUDP64 packets are read from their fixed header (their first
byte is an ASCII session name, so they never look like the other two). Nothing here may
raise: a frame we cannot name is logged as ``RMP?``, ``VENUE?`` or ``OTHER``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from rmptwin.core.packetkey import RMP_MAGIC
from rmptwin.rmp.wire import decode as decode_rmp
from rmptwin.venue.wire import TYPE_NAMES as VENUE_TYPE_NAMES

_MOLD = struct.Struct("!10sQH")
_VENUE = struct.Struct("!BBI")
_NONE = ("OTHER", "", -1, -1)
INT64_MAX = 2**63 - 1


def _first_int(obj: object, names: Iterable[str]) -> int:
    for n in names:
        v = getattr(obj, n, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return -1


def _rmp(data: bytes) -> tuple[str, str, int, int]:
    try:
        frame = decode_rmp(data)
    except Exception:
        return (f"RMP{data[2]}" if len(data) > 2 else "RMP?", "", -1, -1)
    inner = getattr(frame, "original", None) or getattr(frame, "frame", None)
    name = getattr(frame, "TYPE_NAME", None) or getattr(frame, "type_name", None) or type(frame).__name__
    name = str(name).upper().removesuffix("FRAME") or "RMP?"
    probe = frame
    # A retransmission names the frame it carries: the source and M_s of the original.
    if not hasattr(frame, "src") and inner is not None and not isinstance(inner, (bytes, bytearray)):
        probe = inner
    src = getattr(probe, "src", None) or getattr(probe, "source", None) or ""
    return (
        name,
        src if isinstance(src, str) else "",
        _first_int(probe, ("src_seq", "m_s", "seq")),
        _first_int(probe, ("gseq", "first_gseq", "t", "token")),
    )


def describe(data: bytes) -> tuple[str, str, int, int]:
    """(frame, src, src_seq, gseq) of a datagram, best effort and never raising."""
    if not data:
        return _NONE
    if data[0] == RMP_MAGIC:
        return _rmp(data)
    if len(data) >= _VENUE.size:
        version, ftype, body = _VENUE.unpack_from(data)
        if version == 1 and body == len(data) - _VENUE.size:
            return (VENUE_TYPE_NAMES.get(ftype, "VENUE?"), "", -1, -1)
    if len(data) >= _MOLD.size:
        session, seq, count = _MOLD.unpack_from(data)
        if seq > INT64_MAX:
            return _NONE   # no position we number; the event and drop tables hold int64
        if len(data) == _MOLD.size and 0 < count < 0xFFFF:
            return ("MOLD_REQ", "", -1, seq)
        return ("MOLD", "", -1, seq)
    return _NONE
