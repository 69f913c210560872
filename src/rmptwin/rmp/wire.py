"""The RMP codec: frames (``rmp.frames``) to bytes and back.

Header (5 bytes): magic 0xA5, version (VERSION), type, body length (u16). The magic byte lets an
R_T tell an RMP frame from a MoldUDP64 packet (whose first byte is an ASCII session
character). Names are u8-length-prefixed UTF-8; numbers are big-endian.

``decode(data)`` returns one of the frame classes of ``rmp.frames`` or raises a ``WireError``
subclass; it never raises anything else, whatever bytes it is given. The bytes each frame
encodes to, and the error each malformed datagram raises, are pinned by
tests/unit/test_wire_vectors.py.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

from rmptwin.core.packetkey import RMP_MAGIC
from rmptwin.rmp.frames import (  # noqa: F401 - re-exported: wire is where callers find every frame name
    ACK,
    DATA,
    INVITE,
    JOIN,
    JOIN_ACK,
    NACK,
    NEW_RING,
    NULL_TOKEN,
    REASON_JOIN,
    REASON_MISSING_TOKEN,
    REASON_NO_ACK,
    REASON_NO_ANSWER,
    REASON_SECONDARY,
    REASON_TOKEN_LOST,
    REASONS,
    REPORT,
    REPORT_ACK,
    RETX,
    SEC_TOKEN,
    TYPE_NAMES,
    WANT_ACK_OF,
    WANT_ACKS,
    WANT_MSGS,
    Ack,
    Data,
    Frame,
    Invite,
    Join,
    JoinAck,
    Nack,
    NewRing,
    Report,
    ReportAck,
    Retx,
    SecToken,
    lineage_epoch,
    superseded,
    type_name,
)

MAGIC = RMP_MAGIC   # its one definition is core's: the link model and the port rules read it too
VERSION = 2     # 2: ACK carries the stable token
_HEADER = struct.Struct("!BBBH")
HEADER_SIZE = _HEADER.size
MAX_BODY = 0xFFFF


class WireError(ValueError):
    """A datagram is not a well-formed RMP frame."""


class TruncatedFrame(WireError):
    pass


class BadMagic(WireError):
    pass


class BadVersion(WireError):
    pass


class UnknownType(WireError):
    pass


class LengthMismatch(WireError):
    pass


class BadText(WireError):
    pass


class BadField(WireError):
    pass


# ----------------------------------------------------------------------------- layouts
# Each frame is packed and read a run of fixed-size fields at a time, one precompiled Struct
# per run, rather than one call per field: a struct call costs much the same whatever it
# packs, and stays a call into the struct module under mypyc too. A run ends where a name
# starts: names are u8-length-prefixed, so a run that is read also takes the length byte of
# the name after it.

_H = struct.Struct("!H")
_I = struct.Struct("!I")
_Q = struct.Struct("!q")
_B = struct.Struct("!B")

# encoding: the header and the body's leading fields in one run
_E_H = struct.Struct("!BBBHH")              # DATA, RETX: stripe
_E_HI = struct.Struct("!BBBHHI")            # stripe, epoch (the control frames)
_E_HIQQQQ = struct.Struct("!BBBHHIqqqq")    # ACK: token first_gseq ts_ns stable; NEW_RING: start_t last_t ...
_QQ = struct.Struct("!qq")                  # DATA: src_seq acked_below
_BQQ = struct.Struct("!Bqq")                # NACK: want lo hi
_BQ = struct.Struct("!Bq")                  # REPORT: reason token
_QQBI = struct.Struct("!qqBI")              # JOIN: have next_gseq recovering have_epoch
_IQ = struct.Struct("!Iq")                  # NEW_RING lineage: epoch first token

# decoding: (Struct, the size of each of its fields). The sizes give the error of a run cut
# short, naming the first field that does not fit, as reading field by field did (_truncated).
_D_HB = (struct.Struct("!HB"), (2, 1))                                # DATA (cut short): stripe, src
_D_HIB = (struct.Struct("!HIB"), (2, 4, 1))                           # stripe epoch, a name
_D_HIQQQQB = (struct.Struct("!HIqqqqB"), (2, 4, 8, 8, 8, 8, 1))       # ACK, NEW_RING heads, a name
_D_QQ = (_QQ, (8, 8))                                                 # DATA: src_seq acked_below
_D_BQQB = (struct.Struct("!BqqB"), (1, 8, 8, 1))                      # NACK: want lo hi, src
_D_BQB = (struct.Struct("!BqB"), (1, 8, 1))                           # REPORT: reason token, ring
_D_QQB = (struct.Struct("!qqB"), (8, 8, 1))                           # JOIN: have next_gseq recovering
_D_QB = (struct.Struct("!qB"), (8, 1))                                # SEC_TOKEN: token, holder
_D_H = (_H, (2,))
_D_I = (_I, (4,))
_D_Q = (_Q, (8,))
# an ACK's messages when every source name has one length L (the usual case): a message is
# then a fixed run, and the whole list is read by one iter_unpack (_MSG_RUNS[L])
_MSG_RUNS = [struct.Struct(f"!x{n}sq") for n in range(256)]
# so is a DATA frame's from the stripe to the payload once its src's length is known
# (measured interpreted: 0.78 -> 0.51 us to decode a DATA frame)
_DATA_RUNS = [struct.Struct(f"!Hx{n}sqq") for n in range(256)]

# ----------------------------------------------------------------------------- encoding


def _fits(size: int, frame: Frame) -> int:
    if size > MAX_BODY:
        raise ValueError(f"{type_name(frame)} frame body of {size} bytes exceeds {MAX_BODY}")
    return size


_NAMES: dict[str, bytes] = {}       # the few names, encoded once (bounded: see _name_bytes)


def _name_bytes(name: str) -> bytes:
    b = _NAMES.get(name)
    if b is None:
        raw = name.encode("utf-8")
        if len(raw) > 255:
            raise ValueError(f"name too long for the wire: {name[:20]!r}...")
        b = _B.pack(len(raw)) + raw
        if len(_NAMES) < 4096:
            _NAMES[name] = b
    return b


def encode(frame: Frame) -> bytes:
    if isinstance(frame, Data):
        src, payload = _name_bytes(frame.src), frame.payload
        head = _E_H.pack(MAGIC, VERSION, DATA, _fits(18 + len(src) + len(payload), frame), frame.stripe)
        return b"".join((head, src, _QQ.pack(frame.src_seq, frame.acked_below), payload))
    if isinstance(frame, Ack):
        msgs = frame.msgs
        parts = [b"", _name_bytes(frame.token_site), _name_bytes(frame.next_site), _H.pack(len(msgs))]
        names, pack = _NAMES, _Q.pack
        for source, seq in msgs:
            parts.append(names.get(source) or _name_bytes(source))    # a name's bytes are never empty
            parts.append(pack(seq))
        size = _fits(sum(map(len, parts)) + 38, frame)
        parts[0] = _E_HIQQQQ.pack(MAGIC, VERSION, ACK if msgs else NULL_TOKEN, size, frame.stripe, frame.epoch,
                                  frame.token, frame.first_gseq, frame.ts_ns, frame.stable)
        return b"".join(parts)
    if isinstance(frame, Retx):
        inner = encode(frame.original)
        return _E_H.pack(MAGIC, VERSION, RETX, _fits(2 + len(inner), frame), frame.stripe) + inner
    if isinstance(frame, Nack):
        parts = [b"", _name_bytes(frame.requester), _BQQ.pack(frame.want, frame.lo, frame.hi),
                 _name_bytes(frame.src)]
        return _join_control(NACK, frame, parts)
    if isinstance(frame, Report):
        parts = [b"", _name_bytes(frame.reporter), _name_bytes(frame.suspect), _BQ.pack(frame.reason, frame.token),
                 _name_bytes(frame.ring)]
        return _join_control(REPORT, frame, parts)
    if isinstance(frame, ReportAck):
        return _join_control(REPORT_ACK, frame, [b"", _name_bytes(frame.reporter)])
    if isinstance(frame, Invite):
        return _join_control(INVITE, frame, [b"", _name_bytes(frame.reformer)])
    if isinstance(frame, Join):
        parts = [b"", _name_bytes(frame.member),
                 _QQBI.pack(frame.have, frame.next_gseq, 1 if frame.recovering else 0, frame.have_epoch)]
        return _join_control(JOIN, frame, parts)
    if isinstance(frame, JoinAck):
        return _join_control(JOIN_ACK, frame, [b"", _name_bytes(frame.member)])
    if isinstance(frame, NewRing):
        parts = [b"", _name_bytes(frame.token_site), _name_bytes(frame.recovery_site), _H.pack(len(frame.members))]
        parts += [_name_bytes(m) for m in frame.members]
        parts.append(_H.pack(len(frame.lineage)))
        parts += [_IQ.pack(epoch, first) for epoch, first in frame.lineage]
        parts[0] = _E_HIQQQQ.pack(MAGIC, VERSION, NEW_RING, _fits(sum(map(len, parts)) + 38, frame), frame.stripe,
                                  frame.epoch, frame.start_t, frame.last_t, frame.next_gseq, frame.ts_ns)
        return b"".join(parts)
    if isinstance(frame, SecToken):
        parts = [b"", _name_bytes(frame.ring), _Q.pack(frame.token), _name_bytes(frame.holder),
                 _name_bytes(frame.next_holder), _Q.pack(frame.round)]
        return _join_control(SEC_TOKEN, frame, parts)
    raise TypeError(f"not an RMP frame: {type(frame).__name__}")


def _join_control(code: int, frame: Nack | Report | ReportAck | Invite | Join | JoinAck | SecToken,
                  parts: list[bytes]) -> bytes:
    """A frame whose body starts with stripe and epoch: ``parts`` is the rest after a
    placeholder (parts[0]) for the header and those two."""
    parts[0] = _E_HI.pack(MAGIC, VERSION, code, _fits(sum(map(len, parts)) + 6, frame), frame.stripe, frame.epoch)
    return b"".join(parts)


# ----------------------------------------------------------------------------- decoding
# Positions are in the datagram, header included (the body is never copied out); error
# messages count from the body's start, as they always have (tests/unit/test_wire_vectors.py
# pins them).


def _truncated(what: str, pos: int, size: int, sizes: tuple[int, ...]) -> TruncatedFrame:
    """The error of a run of fields (``sizes``) from ``pos`` that does not fit in ``size``
    bytes: at the first field that does not fit, as a field-by-field reader reports it."""
    need = 0
    for need in sizes:
        if pos + need > size:
            break
        pos += need
    return TruncatedFrame(f"{what} frame truncated at byte {pos - HEADER_SIZE} (needs {need} more)")


def _run(run: tuple[struct.Struct, tuple[int, ...]], data: bytes, pos: int, what: str) -> tuple[Any, ...]:
    st, sizes = run
    if pos + st.size > len(data):
        raise _truncated(what, pos, len(data), sizes)
    return st.unpack_from(data, pos)


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadText(f"{what} frame has a name that is not UTF-8") from None


def _name(data: bytes, pos: int, n: int, what: str) -> str:
    """The ``n``-byte name at ``pos`` (its length byte was read by the run before it)."""
    end = pos + n
    if end > len(data):
        raise TruncatedFrame(f"{what} frame truncated at byte {pos - HEADER_SIZE} (needs {n} more)")
    return _utf8(data[pos:end], what)


def _text(data: bytes, pos: int, what: str) -> tuple[str, int]:
    """The length-prefixed name at ``pos``, and the position after it."""
    if pos >= len(data):
        raise TruncatedFrame(f"{what} frame truncated at byte {pos - HEADER_SIZE} (needs 1 more)")
    n = data[pos]
    return _name(data, pos + 1, n, what), pos + 1 + n


def _end(data: bytes, pos: int, what: str) -> None:
    if pos != len(data):
        raise LengthMismatch(f"{what} frame has {len(data) - pos} stray bytes")


def _decode_msgs(data: bytes, pos: int, n: int, what: str) -> tuple[tuple[tuple[str, int], ...], int]:
    """The (src, src_seq) list of an ACK and the position after it: the hot loop of every
    receiver. Names repeat, so each distinct one is decoded once."""
    size = len(data)
    names: dict[bytes, str] = {}
    out: list[tuple[str, int]] = []
    if n and pos < size:
        ln = data[pos]
        stride = ln + 9
        end = pos + n * stride
        if end <= size and data[pos:end:stride] == bytes((ln,)) * n:    # every name ln bytes long
            for raw, seq in _MSG_RUNS[ln].iter_unpack(data[pos:end]):
                name = names.get(raw)
                if name is None:
                    name = names[raw] = _utf8(raw, what)
                out.append((name, seq))
            return tuple(out), end
    for _ in range(n):      # names of several lengths, or the list is cut short
        if pos >= size:
            raise TruncatedFrame(f"{what} frame truncated at byte {pos - HEADER_SIZE}")
        ln = data[pos]
        end = pos + 1 + ln + 8
        if end > size:
            raise TruncatedFrame(f"{what} frame truncated at byte {pos - HEADER_SIZE}")
        raw = data[pos + 1:pos + 1 + ln]
        name = names.get(raw)
        if name is None:
            name = names[raw] = _utf8(raw, what)
        out.append((name, _Q.unpack_from(data, end - 8)[0]))
        pos = end
    return tuple(out), pos


def _decode(data: bytes, depth: int) -> Frame:
    size = len(data)
    if size < HEADER_SIZE:
        raise TruncatedFrame(f"RMP frame of {size} bytes is shorter than its {HEADER_SIZE}-byte header")
    magic, version, code, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BadMagic(f"first byte 0x{magic:02x} is not the RMP magic 0x{MAGIC:02x}")
    if version != VERSION:
        raise BadVersion(f"RMP version {version}, expected {VERSION}")
    if code not in TYPE_NAMES:
        raise UnknownType(f"unknown RMP frame type {code}")
    what = TYPE_NAMES[code]
    if size - HEADER_SIZE != length:
        raise LengthMismatch(f"{what} frame header says {length} body bytes, datagram has {size - HEADER_SIZE}")
    if code == DATA:
        if size >= 8 and size >= 24 + data[7]:    # it all fits: one run, the name's length known
            stripe, raw, seq, acked_below = _DATA_RUNS[data[7]].unpack_from(data, 5)
            return Data(stripe, _utf8(raw, what), seq, acked_below, data[24 + data[7]:])
        stripe, n = _run(_D_HB, data, 5, what)
        src = _name(data, 8, n, what)
        pos = 8 + n
        seq, acked_below = _run(_D_QQ, data, pos, what)
        return Data(stripe, src, seq, acked_below, data[pos + 16:])
    if code == ACK or code == NULL_TOKEN:
        stripe, epoch, token, first, ts, stable, n = _run(_D_HIQQQQB, data, 5, what)
        site = _name(data, 44, n, what)
        nxt, pos = _text(data, 44 + n, what)
        count = _run(_D_H, data, pos, what)[0]
        if (count == 0) != (code == NULL_TOKEN):
            raise BadField("ACK must carry messages and NULL_TOKEN none")
        msgs, pos = _decode_msgs(data, pos + 2, count, what)
        _end(data, pos, what)
        return Ack(stripe, epoch, token, first, ts, site, nxt, msgs, stable)
    if code == NEW_RING:
        return _decode_new_ring(data, what)
    return _decode_control(code, data, what, depth)


def _decode_new_ring(data: bytes, what: str) -> NewRing:
    stripe, epoch, start_t, last_t, next_gseq, ts, n = _run(_D_HIQQQQB, data, 5, what)
    site = _name(data, 44, n, what)
    recovery, pos = _text(data, 44 + n, what)
    count = _run(_D_H, data, pos, what)[0]
    pos += 2
    members = []
    for _ in range(count):
        member, pos = _text(data, pos, what)
        members.append(member)
    count = _run(_D_H, data, pos, what)[0]
    pos += 2
    end = pos + 12 * count
    if end > len(data):
        raise _truncated(what, pos, len(data), (4, 8) * count)
    lineage = tuple([(epoch_, first) for epoch_, first in _IQ.iter_unpack(data[pos:end])])
    f = NewRing(stripe, epoch, start_t, last_t, next_gseq, ts, site, recovery, tuple(members), lineage)
    if not members:
        raise BadField("NEW_RING has no members")
    if any(b[1] <= a[1] for a, b in zip(lineage, lineage[1:])):
        raise BadField("NEW_RING lineage is not in token order")
    _end(data, end, what)
    return f


def _decode_control(code: int, data: bytes, what: str, depth: int) -> Frame:
    f: Frame
    if code == RETX:
        stripe = _run(_D_H, data, 5, what)[0]
        if depth > 0:
            raise BadField("RETX inside RETX")
        inner = _decode(data[7:], depth + 1)
        if not isinstance(inner, (Data, Ack)):
            raise BadField(f"RETX carries {type_name(inner)}, expected DATA or ACK")
        return Retx(stripe, inner)
    if code not in (NACK, REPORT, REPORT_ACK, INVITE, JOIN, JOIN_ACK, SEC_TOKEN):  # pragma: no cover - checked
        raise UnknownType(f"unknown RMP frame type {code}")
    stripe, epoch, n = _run(_D_HIB, data, 5, what)     # each of these starts so, with a name
    name = _name(data, 12, n, what)
    pos = 12 + n
    if code == NACK:
        want, lo, hi, n = _run(_D_BQQB, data, pos, what)
        f = Nack(stripe, epoch, name, want, lo, hi, _name(data, pos + 18, n, what))
        pos += 18 + n
        if want not in (WANT_ACKS, WANT_MSGS, WANT_ACK_OF):
            raise BadField(f"NACK asks for unknown kind {want}")
        if hi < lo:
            raise BadField("NACK range is empty (hi < lo)")
    elif code == REPORT:
        suspect, pos = _text(data, pos, what)
        reason, token, n = _run(_D_BQB, data, pos, what)
        f = Report(stripe, epoch, name, suspect, reason, token, _name(data, pos + 10, n, what))
        pos += 10 + n
        if reason not in REASONS:
            raise BadField(f"REPORT has unknown reason {reason}")
    elif code == REPORT_ACK:
        f = ReportAck(stripe, epoch, name)
    elif code == INVITE:
        f = Invite(stripe, epoch, name)
    elif code == JOIN_ACK:
        f = JoinAck(stripe, epoch, name)
    elif code == JOIN:
        have, next_gseq, flag = _run(_D_QQB, data, pos, what)
        if flag > 1:        # checked before have_epoch is read, as the field-by-field reader did
            raise BadField("JOIN recovering flag must be 0 or 1")
        f = Join(stripe, epoch, name, have, next_gseq, bool(flag), _run(_D_I, data, pos + 17, what)[0])
        pos += 21
    else:
        token, n = _run(_D_QB, data, pos, what)
        holder = _name(data, pos + 9, n, what)
        nxt, pos = _text(data, pos + 9 + n, what)
        f = SecToken(stripe, epoch, name, token, holder, nxt, _run(_D_Q, data, pos, what)[0])
        pos += 8
    _end(data, pos, what)
    return f


@lru_cache(maxsize=4096)
def _decode_cached(data: bytes) -> Frame:
    return _decode(data, 0)


def decode(data: bytes | bytearray | memoryview) -> Frame:
    """One RMP frame from a datagram (any bytes-like: compiled, a ``bytes`` parameter would
    refuse the others); raises WireError (a subclass) if malformed.

    Frames are never changed (``rmp.frames``), so one multicast datagram handed to many receivers (the
    simulator passes the same bytes to each) is decoded once."""
    if type(data) is bytes:
        return _decode_cached(data)
    return _decode(bytes(data), 0)


def is_rmp(data: bytes) -> bool:
    return len(data) > 0 and data[0] == MAGIC
