"""The taxonomy protocols' wire frames: one small versioned binary codec per protocol.

A frame is a 6-byte header and a body::

    magic 0xC7 | version 1 | protocol id | frame type | u16 body length | body

The magic keeps these frames apart from RMP frames (0xA5), exchange-venue frames (version
byte 1) and MoldUDP64 (ASCII session) on a shared link. Each protocol has its own ``Codec``
(``CODECS``): the frame types it may carry; a frame of another protocol, a type it does not
know, a short or over-long body or a bad string is a ``CodecError`` (typed), never a crash.

Bodies are fixed fields in order, each one of: ``q`` signed 64-bit, ``I`` unsigned 32-bit,
``B`` unsigned 8-bit, ``s`` short string (u8 length + UTF-8), ``b`` bytes (u16 length),
``L`` list of signed 64-bit integers (u16 count).
"""

from __future__ import annotations

import struct
from dataclasses import astuple, dataclass, fields
from typing import Any, ClassVar

MAGIC = 0xC7
VERSION = 1
_HEADER = struct.Struct("!BBBBH")
_Q, _I, _H, _B = struct.Struct("!q"), struct.Struct("!I"), struct.Struct("!H"), struct.Struct("!B")
MAX_BODY = 0xFFFF


class CodecError(ValueError):
    """A datagram that is not a well-formed frame of this protocol."""


@dataclass(frozen=True, slots=True)
class Submit:          # UB: sender -> sequencer
    TYPE: ClassVar[int] = 1
    FORMAT: ClassVar[str] = "sqb"
    src: str
    src_seq: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Data:            # BB: sender -> all, unsequenced (and its FIFO retransmission)
    TYPE: ClassVar[int] = 2
    FORMAT: ClassVar[str] = "sqb"
    src: str
    src_seq: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Seq:             # a sequenced message (src "" = a no-op filling a hole after a takeover)
    TYPE: ClassVar[int] = 3
    FORMAT: ClassVar[str] = "Iqsqb"
    epoch: int
    gseq: int
    src: str
    src_seq: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Retx:            # a sequenced message sent again, stamped with the epoch that vouches for it
    TYPE: ClassVar[int] = 4
    FORMAT: ClassVar[str] = "Iqsqb"
    epoch: int
    gseq: int
    src: str
    src_seq: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Order:           # BB: sequencer -> all, "message (src, src_seq) is gseq"
    TYPE: ClassVar[int] = 5
    FORMAT: ClassVar[str] = "Iqsq"
    epoch: int
    gseq: int
    src: str
    src_seq: int


@dataclass(frozen=True, slots=True)
class Nak:             # member -> sequencer: resend gseq first..last
    TYPE: ClassVar[int] = 6
    FORMAT: ClassVar[str] = "Iqq"
    epoch: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class FifoNak:         # BB member -> sender: resend your src_seq first..last (ISIS FIFO level)
    TYPE: ClassVar[int] = 7
    FORMAT: ClassVar[str] = "sqq"
    src: str
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Heartbeat:       # sequencer/locker -> all when idle: alive, and the top gseq
    TYPE: ClassVar[int] = 8
    FORMAT: ClassVar[str] = "Iq"
    epoch: int
    top: int


@dataclass(frozen=True, slots=True)
class Request:         # UUB/GUP: sender -> sequencer/locker, "a number (permission) for src_seq"
    TYPE: ClassVar[int] = 9
    FORMAT: ClassVar[str] = "sq"
    src: str
    src_seq: int


@dataclass(frozen=True, slots=True)
class Grant:           # sequencer/locker -> sender; done=1: already sequenced at gseq
    TYPE: ClassVar[int] = 10
    FORMAT: ClassVar[str] = "IqqB"
    epoch: int
    gseq: int
    src_seq: int
    done: int


@dataclass(frozen=True, slots=True)
class Forward:         # UUB sequencer -> sender: resend gseq to requester
    TYPE: ClassVar[int] = 11
    FORMAT: ClassVar[str] = "Iqs"
    epoch: int
    gseq: int
    requester: str


@dataclass(frozen=True, slots=True)
class UpdateAck:       # GUP member -> sender
    TYPE: ClassVar[int] = 12
    FORMAT: ClassVar[str] = "Iq"
    epoch: int
    gseq: int


@dataclass(frozen=True, slots=True)
class Release:         # GUP sender -> locker: every member acknowledged gseq, free the lock
    TYPE: ClassVar[int] = 13
    FORMAT: ClassVar[str] = "Iq"
    epoch: int
    gseq: int


@dataclass(frozen=True, slots=True)
class Takeover:        # successor -> all: "I sequence epoch; I hold everything up to top"
    TYPE: ClassVar[int] = 14
    FORMAT: ClassVar[str] = "Iq"
    epoch: int
    top: int


@dataclass(frozen=True, slots=True)
class State:           # member -> successor: the gseqs above its top it holds, as (first, last) runs
    TYPE: ClassVar[int] = 15
    FORMAT: ClassVar[str] = "IL"
    epoch: int
    runs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NewEpoch:        # successor -> all: epoch starts at floor; these gseqs below it are no-ops
    TYPE: ClassVar[int] = 16
    FORMAT: ClassVar[str] = "IqL"
    epoch: int
    floor: int
    noops: tuple[int, ...]


Frame = (Submit | Data | Seq | Retx | Order | Nak | FifoNak | Heartbeat | Request | Grant | Forward | UpdateAck
         | Release | Takeover | State | NewEpoch)
ALL_TYPES = (Submit, Data, Seq, Retx, Order, Nak, FifoNak, Heartbeat, Request, Grant, Forward, UpdateAck,
             Release, Takeover, State, NewEpoch)
_COMMON = (Seq, Retx, Nak, Heartbeat, Takeover, State, NewEpoch)
PROTOCOL_IDS = {"ub": 1, "bb": 2, "uub": 3, "gup": 4}
PROTOCOL_TYPES = {
    "ub": _COMMON + (Submit,),
    "bb": _COMMON + (Data, Order, FifoNak),
    "uub": _COMMON + (Request, Grant, Forward),
    "gup": _COMMON + (Request, Grant, UpdateAck, Release),
}


def _put(fmt: str, value: Any, out: bytearray) -> None:
    if fmt == "q":
        out += _Q.pack(value)
    elif fmt == "I":
        out += _I.pack(value)
    elif fmt == "B":
        out += _B.pack(value)
    elif fmt == "s":
        raw = value.encode()
        if len(raw) > 255:
            raise CodecError(f"string of {len(raw)} bytes (at most 255)")
        out += _B.pack(len(raw)) + raw
    elif fmt == "b":
        out += _H.pack(len(value)) + bytes(value)
    else:  # "L"
        out += _H.pack(len(value)) + b"".join(_Q.pack(v) for v in value)


def _take(fmt: str, body: bytes, pos: int) -> tuple[Any, int]:
    """(value, next position) of one field; CodecError if the body is too short or bad."""
    try:
        if fmt == "q":
            return _Q.unpack_from(body, pos)[0], pos + 8
        if fmt == "I":
            return _I.unpack_from(body, pos)[0], pos + 4
        if fmt == "B":
            return body[pos], pos + 1
        if fmt == "s":
            n = body[pos]
            raw = body[pos + 1:pos + 1 + n]
            if len(raw) != n:
                raise CodecError("truncated string")
            return raw.decode(), pos + 1 + n
        n = _H.unpack_from(body, pos)[0]
        if fmt == "b":
            raw = body[pos + 2:pos + 2 + n]
            if len(raw) != n:
                raise CodecError("truncated bytes")
            return bytes(raw), pos + 2 + n
        end = pos + 2 + 8 * n
        if end > len(body):
            raise CodecError("truncated list")
        return tuple(_Q.unpack_from(body, pos + 2 + 8 * i)[0] for i in range(n)), end
    except (struct.error, IndexError) as e:
        raise CodecError(f"truncated field {fmt!r}") from e
    except UnicodeDecodeError as e:
        raise CodecError("string is not UTF-8") from e


class Codec:
    """Encoder and decoder of one protocol's frames."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.pid = PROTOCOL_IDS[protocol]
        self.types: dict[int, type[Frame]] = {t.TYPE: t for t in PROTOCOL_TYPES[protocol]}

    def encode(self, frame: Frame) -> bytes:
        if type(frame).TYPE not in self.types or self.types[type(frame).TYPE] is not type(frame):
            raise CodecError(f"{type(frame).__name__} is not a {self.protocol} frame")
        body = bytearray()
        try:
            for fmt, value in zip(frame.FORMAT, astuple(frame)):
                _put(fmt, value, body)
        except struct.error as e:
            raise CodecError(f"{type(frame).__name__}: field out of range ({e})") from e
        if len(body) > MAX_BODY:
            raise CodecError(f"body of {len(body)} bytes (at most {MAX_BODY})")
        return _HEADER.pack(MAGIC, VERSION, self.pid, frame.TYPE, len(body)) + bytes(body)

    def decode(self, data: bytes) -> Frame:
        if len(data) < _HEADER.size:
            raise CodecError(f"{len(data)} bytes: shorter than the header")
        magic, version, pid, ftype, n = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise CodecError(f"magic {magic:#x}, not a taxonomy frame")
        if version != VERSION:
            raise CodecError(f"version {version}, this codec reads {VERSION}")
        if pid != self.pid:
            raise CodecError(f"protocol id {pid}, not {self.protocol}")
        cls = self.types.get(ftype)
        if cls is None:
            raise CodecError(f"unknown {self.protocol} frame type {ftype}")
        body = data[_HEADER.size:]
        if len(body) != n:
            raise CodecError(f"body length {len(body)}, header says {n}")
        values: list[Any] = []
        pos = 0
        for fmt in cls.FORMAT:
            value, pos = _take(fmt, body, pos)
            values.append(value)
        if pos != n:
            raise CodecError(f"{n - pos} bytes after the last field")
        return cls(*values)


CODECS = {p: Codec(p) for p in PROTOCOL_IDS}


def type_name(frame: Frame) -> str:
    return type(frame).__name__.upper()


def field_names(cls: type[Frame]) -> list[str]:
    return [f.name for f in fields(cls)]
