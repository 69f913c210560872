"""The RMP codec: frames (``rmp.frames``) to bytes and back.

Header (5 bytes): magic 0xA5, version (VERSION), type, body length (u16). The magic byte lets an
R_T tell an RMP frame from a MoldUDP64 packet (whose first byte is an ASCII session
character). Names are u8-length-prefixed UTF-8; numbers are big-endian.

``decode(data)`` returns one of the frame dataclasses of ``rmp.frames`` or raises a ``WireError``
subclass; it never raises anything else, whatever bytes it is given.
"""

from __future__ import annotations

import struct
from functools import lru_cache

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


# ----------------------------------------------------------------------------- encoding

_H = struct.Struct("!H")
_I = struct.Struct("!I")
_Q = struct.Struct("!q")
_B = struct.Struct("!B")


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> _Writer:
        self.parts.append(_B.pack(v))
        return self

    def u16(self, v: int) -> _Writer:
        self.parts.append(_H.pack(v))
        return self

    def u32(self, v: int) -> _Writer:
        self.parts.append(_I.pack(v))
        return self

    def i64(self, v: int) -> _Writer:
        self.parts.append(_Q.pack(v))
        return self

    def text(self, s: str) -> _Writer:
        b = s.encode("utf-8")
        if len(b) > 255:
            raise ValueError(f"name too long for the wire: {s[:20]!r}...")
        self.parts.append(_B.pack(len(b)) + b)
        return self

    def raw(self, b: bytes) -> _Writer:
        self.parts.append(bytes(b))
        return self

    def body(self) -> bytes:
        return b"".join(self.parts)


def _type_code(frame: Frame) -> int:
    if isinstance(frame, Ack):
        return ACK if frame.msgs else NULL_TOKEN
    return _CODES[type(frame)]


def encode(frame: Frame) -> bytes:
    w = _Writer()
    if isinstance(frame, Data):
        w.u16(frame.stripe).text(frame.src).i64(frame.src_seq).i64(frame.acked_below).raw(frame.payload)
    elif isinstance(frame, Ack):
        w.u16(frame.stripe).u32(frame.epoch).i64(frame.token).i64(frame.first_gseq).i64(frame.ts_ns)
        w.i64(frame.stable).text(frame.token_site).text(frame.next_site).u16(len(frame.msgs))
        w.raw(b"".join([_name_bytes(src) + _Q.pack(seq) for src, seq in frame.msgs]))
    elif isinstance(frame, Nack):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.requester).u8(frame.want).i64(frame.lo).i64(frame.hi)
        w.text(frame.src)
    elif isinstance(frame, Retx):
        w.u16(frame.stripe).raw(encode(frame.original))
    elif isinstance(frame, Report):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.reporter).text(frame.suspect).u8(frame.reason)
        w.i64(frame.token).text(frame.ring)
    elif isinstance(frame, ReportAck):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.reporter)
    elif isinstance(frame, Invite):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.reformer)
    elif isinstance(frame, Join):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.member).i64(frame.have).i64(frame.next_gseq)
        w.u8(1 if frame.recovering else 0).u32(frame.have_epoch)
    elif isinstance(frame, JoinAck):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.member)
    elif isinstance(frame, NewRing):
        w.u16(frame.stripe).u32(frame.epoch).i64(frame.start_t).i64(frame.last_t).i64(frame.next_gseq)
        w.i64(frame.ts_ns).text(frame.token_site).text(frame.recovery_site).u16(len(frame.members))
        for m in frame.members:
            w.text(m)
        w.u16(len(frame.lineage))
        for epoch, first in frame.lineage:
            w.u32(epoch).i64(first)
    elif isinstance(frame, SecToken):
        w.u16(frame.stripe).u32(frame.epoch).text(frame.ring).i64(frame.token).text(frame.holder)
        w.text(frame.next_holder).i64(frame.round)
    else:
        raise TypeError(f"not an RMP frame: {type(frame).__name__}")
    body = w.body()
    if len(body) > MAX_BODY:
        raise ValueError(f"{type_name(frame)} frame body of {len(body)} bytes exceeds {MAX_BODY}")
    return _HEADER.pack(MAGIC, VERSION, _type_code(frame), len(body)) + body


_NAMES: dict[str, bytes] = {}       # the few source names, encoded once (bounded: see _name_bytes)


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


# ----------------------------------------------------------------------------- decoding


def _decode_msgs(r: _Reader, n: int) -> tuple[tuple[str, int], ...]:
    """The (src, src_seq) list of an ACK: the hot loop of every receiver, kept tight."""
    data, pos, size = r.data, r.pos, len(r.data)
    names: dict[bytes, str] = {}
    out = []
    for _ in range(n):
        if pos >= size:
            raise TruncatedFrame(f"{r.name} frame truncated at byte {pos}")
        ln = data[pos]
        end = pos + 1 + ln + 8
        if end > size:
            raise TruncatedFrame(f"{r.name} frame truncated at byte {pos}")
        raw = data[pos + 1:pos + 1 + ln]
        name = names.get(raw)
        if name is None:
            try:
                name = names[raw] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BadText(f"{r.name} frame has a name that is not UTF-8") from None
        out.append((name, _Q.unpack_from(data, end - 8)[0]))
        pos = end
    r.pos = pos
    return tuple(out)


class _Reader:
    def __init__(self, data: bytes, name: str) -> None:
        self.data = data
        self.pos = 0
        self.name = name

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise TruncatedFrame(f"{self.name} frame truncated at byte {self.pos} (needs {n} more)")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def _fixed(self, st: struct.Struct) -> int:
        pos = self.pos
        if pos + st.size > len(self.data):
            raise TruncatedFrame(f"{self.name} frame truncated at byte {pos} (needs {st.size} more)")
        self.pos = pos + st.size
        value: int = st.unpack_from(self.data, pos)[0]
        return value

    def u8(self) -> int:
        return self._fixed(_B)

    def u16(self) -> int:
        return self._fixed(_H)

    def u32(self) -> int:
        return self._fixed(_I)

    def i64(self) -> int:
        return self._fixed(_Q)

    def text(self) -> str:
        n = self.u8()
        raw = self._take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadText(f"{self.name} frame has a name that is not UTF-8") from None

    def rest(self) -> bytes:
        b = self.data[self.pos:]
        self.pos = len(self.data)
        return b

    def end(self) -> None:
        if self.pos != len(self.data):
            raise LengthMismatch(f"{self.name} frame has {len(self.data) - self.pos} stray bytes")


def _decode_body(code: int, r: _Reader, depth: int) -> Frame:  # noqa: C901 - one branch per frame type: the codec's table
    f: Frame
    if code == DATA:
        return Data(r.u16(), r.text(), r.i64(), r.i64(), r.rest())
    if code in (ACK, NULL_TOKEN):
        stripe, epoch, token, first, ts, stable = r.u16(), r.u32(), r.i64(), r.i64(), r.i64(), r.i64()
        site, nxt, n = r.text(), r.text(), r.u16()
        if (n == 0) != (code == NULL_TOKEN):
            raise BadField("ACK must carry messages and NULL_TOKEN none")
        msgs = _decode_msgs(r, n)
        r.end()
        return Ack(stripe, epoch, token, first, ts, site, nxt, msgs, stable)
    if code == NACK:
        f = Nack(r.u16(), r.u32(), r.text(), r.u8(), r.i64(), r.i64(), r.text())
        if f.want not in (WANT_ACKS, WANT_MSGS, WANT_ACK_OF):
            raise BadField(f"NACK asks for unknown kind {f.want}")
        if f.hi < f.lo:
            raise BadField("NACK range is empty (hi < lo)")
    elif code == RETX:
        stripe = r.u16()
        if depth > 0:
            raise BadField("RETX inside RETX")
        inner = _decode(r.rest(), depth + 1)
        if not isinstance(inner, (Data, Ack)):
            raise BadField(f"RETX carries {type_name(inner)}, expected DATA or ACK")
        return Retx(stripe, inner)
    elif code == REPORT:
        f = Report(r.u16(), r.u32(), r.text(), r.text(), r.u8(), r.i64(), r.text())
        if f.reason not in REASONS:
            raise BadField(f"REPORT has unknown reason {f.reason}")
    elif code == REPORT_ACK:
        f = ReportAck(r.u16(), r.u32(), r.text())
    elif code == INVITE:
        f = Invite(r.u16(), r.u32(), r.text())
    elif code == JOIN:
        stripe, epoch, member, have, next_gseq, flag = r.u16(), r.u32(), r.text(), r.i64(), r.i64(), r.u8()
        if flag > 1:
            raise BadField("JOIN recovering flag must be 0 or 1")
        f = Join(stripe, epoch, member, have, next_gseq, bool(flag), r.u32())
    elif code == JOIN_ACK:
        f = JoinAck(r.u16(), r.u32(), r.text())
    elif code == NEW_RING:
        head = (r.u16(), r.u32(), r.i64(), r.i64(), r.i64(), r.i64(), r.text(), r.text())
        n = r.u16()
        members = tuple(r.text() for _ in range(n))
        n = r.u16()
        lineage = tuple((r.u32(), r.i64()) for _ in range(n))
        f = NewRing(*head, members, lineage)
        if not members:
            raise BadField("NEW_RING has no members")
        if any(b[1] <= a[1] for a, b in zip(lineage, lineage[1:])):
            raise BadField("NEW_RING lineage is not in token order")
    elif code == SEC_TOKEN:
        f = SecToken(r.u16(), r.u32(), r.text(), r.i64(), r.text(), r.text(), r.i64())
    else:  # pragma: no cover - the caller checked the code
        raise UnknownType(f"unknown RMP frame type {code}")
    r.end()
    return f


def _decode(data: bytes, depth: int) -> Frame:
    if len(data) < HEADER_SIZE:
        raise TruncatedFrame(f"RMP frame of {len(data)} bytes is shorter than its {HEADER_SIZE}-byte header")
    magic, version, code, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BadMagic(f"first byte 0x{magic:02x} is not the RMP magic 0x{MAGIC:02x}")
    if version != VERSION:
        raise BadVersion(f"RMP version {version}, expected {VERSION}")
    if code not in TYPE_NAMES:
        raise UnknownType(f"unknown RMP frame type {code}")
    if len(data) - HEADER_SIZE != length:
        raise LengthMismatch(
            f"{TYPE_NAMES[code]} frame header says {length} body bytes, datagram has {len(data) - HEADER_SIZE}"
        )
    return _decode_body(code, _Reader(bytes(data[HEADER_SIZE:]), TYPE_NAMES[code]), depth)


@lru_cache(maxsize=4096)
def _decode_cached(data: bytes) -> Frame:
    return _decode(data, 0)


def decode(data: bytes) -> Frame:
    """One RMP frame from a datagram; raises WireError (a subclass) if malformed.

    Frames are immutable, so one multicast datagram handed to many receivers (the
    simulator passes the same bytes to each) is decoded once."""
    if type(data) is bytes:
        return _decode_cached(data)
    return _decode(bytes(data), 0)


def is_rmp(data: bytes) -> bool:
    return len(data) > 0 and data[0] == MAGIC


_CODES = {
    Data: DATA, Nack: NACK, Retx: RETX, Report: REPORT, ReportAck: REPORT_ACK, Invite: INVITE,
    Join: JOIN, JoinAck: JOIN_ACK, NewRing: NEW_RING, SecToken: SEC_TOKEN,
}
