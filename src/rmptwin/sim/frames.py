"""Name a datagram for the drop log and link counts: frame type, source, M_s, gseq.

The simulator carries opaque bytes; only the ground-truth logs want to know what was
lost. RMP frames (magic 0xA5) are decoded with ``rmptwin.rmp.wire`` when it is present;
exchange-venue frames (version 1, type, u32 body length) are named from
``rmptwin.venue.wire``; MoldUDP64 packets are read from their fixed header (their first
byte is an ASCII session name, so they never look like the other two). Nothing here may
raise: a frame we cannot name is logged as ``RMP?``, ``VENUE?`` or ``OTHER``.
"""

from __future__ import annotations

import struct

RMP_MAGIC = 0xA5
_MOLD = struct.Struct("!10sQH")
_VENUE = struct.Struct("!BBI")
_NONE = ("OTHER", "", -1, -1)
INT64_MAX = 2**63 - 1

_decode = None
_decode_loaded = False


def _wire_decode():
    global _decode, _decode_loaded
    if not _decode_loaded:
        _decode_loaded = True
        try:
            from rmptwin.rmp import wire  # H1's frames; optional until they land

            _decode = getattr(wire, "decode", None)
        except Exception:  # noqa: BLE001 - a broken optional module must not stop a run
            _decode = None
    return _decode


def _first_int(obj, names) -> int:
    for n in names:
        v = getattr(obj, n, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return -1


def _rmp(data: bytes) -> tuple[str, str, int, int]:
    decode = _wire_decode()
    fallback = (f"RMP{data[2]}" if len(data) > 2 else "RMP?", "", -1, -1)
    if decode is None:
        return fallback
    try:
        frame = decode(data)
    except Exception:  # noqa: BLE001
        return fallback
    inner = getattr(frame, "original", None) or getattr(frame, "frame", None)
    name = getattr(frame, "TYPE_NAME", None) or getattr(frame, "type_name", None) or type(frame).__name__
    name = str(name).upper().removesuffix("FRAME") or "RMP?"
    probe = frame
    if not hasattr(frame, "src") and inner is not None and not isinstance(inner, (bytes, bytearray)):
        probe = inner
    src = getattr(probe, "src", None) or getattr(probe, "source", None) or ""
    return (
        name,
        src if isinstance(src, str) else "",
        _first_int(probe, ("src_seq", "m_s", "seq")),
        _first_int(probe, ("gseq", "first_gseq", "t", "token")),
    )


_venue_names: dict[int, str] | None = None


def _venue(ftype: int) -> tuple[str, str, int, int]:
    global _venue_names
    if _venue_names is None:
        try:
            from rmptwin.venue.wire import TYPE_NAMES

            _venue_names = dict(TYPE_NAMES)
        except Exception:  # noqa: BLE001
            _venue_names = {}
    return (_venue_names.get(ftype, "VENUE?"), "", -1, -1)


def describe(data: bytes) -> tuple[str, str, int, int]:
    """(frame, src, src_seq, gseq) of a datagram, best effort and never raising."""
    if not data:
        return _NONE
    if data[0] == RMP_MAGIC:
        return _rmp(data)
    if len(data) >= _VENUE.size:
        version, ftype, body = _VENUE.unpack_from(data)
        if version == 1 and body == len(data) - _VENUE.size:
            return _venue(ftype)
    if len(data) >= _MOLD.size:
        session, seq, count = _MOLD.unpack_from(data)
        if seq > INT64_MAX:
            return _NONE   # no position we number; the event and drop tables hold int64
        if len(data) == _MOLD.size and 0 < count < 0xFFFF:
            return ("MOLD_REQ", "", -1, seq)
        return ("MOLD", "", -1, seq)
    return _NONE
