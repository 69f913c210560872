"""MoldUDP64 framing (NASDAQ MoldUDP64 protocol specification, version 1.00).

Downstream packet (R_T remulticast, R_x / R_T retransmissions)::

    Session (10 bytes, ASCII, space padded) | Sequence Number (uint64, big endian: the
    sequence number of the first message) | Message Count (uint16) | message blocks

    message block = Message Length (uint16) | Message Data

A count of 0 is a heartbeat (Sequence Number = the next sequence number the sender will
use); 0xFFFF is end of session (no message blocks). A request packet (customer -> R_x,
R_x -> R_T) is the bare header: Session | Sequence Number | Requested Message Count.

The wire format is NASDAQ's exactly, so tshark decodes captures with
``-d udp.port==7500,moldudp64``; it has no version byte of its own. Downstream and
request packets share the 20-byte header; they are told apart by content: a request is
exactly 20 bytes with a count in 1..0xFFFE, which a downstream packet can never be (a
downstream packet of n >= 1 messages carries at least 2 n more bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rmptwin.core.packetkey import is_mold_request
from rmptwin.core.striping import session_stripe

_HEADER = struct.Struct("!10sQH")
HEADER_SIZE = _HEADER.size  # 20
_LEN = struct.Struct("!H")
LENGTH_SIZE = _LEN.size     # 2: the length field before each message

HEARTBEAT_COUNT = 0
END_OF_SESSION = 0xFFFF
MAX_MESSAGE_COUNT = 0xFFFE
MAX_MESSAGE_BYTES = 0xFFFF
MAX_SEQUENCE = 2**64 - 1
# ~1200 bytes keeps a packet under any path MTU we build, tunnels included.
DEFAULT_MAX_PACKET = 1200


class MoldDecodeError(ValueError):
    """A datagram is not a well-formed MoldUDP64 packet."""


@dataclass(frozen=True, slots=True)
class MoldPacket:
    """A downstream packet: messages ``seq``, ``seq + 1``, ... of ``session``."""

    session: str
    seq: int
    messages: tuple[bytes, ...] = ()
    end_of_session: bool = False

    @property
    def is_heartbeat(self) -> bool:
        return not self.messages and not self.end_of_session

    @property
    def next_seq(self) -> int:
        """The sequence number after this packet's last message."""
        return self.seq + len(self.messages)

    def encode(self) -> bytes:
        count = END_OF_SESSION if self.end_of_session else len(self.messages)
        if self.end_of_session and self.messages:
            raise ValueError("an end-of-session packet carries no messages")
        if count > MAX_MESSAGE_COUNT and not self.end_of_session:
            raise ValueError(f"at most {MAX_MESSAGE_COUNT} messages per packet")
        parts = [_HEADER.pack(_session_bytes(self.session), _check_seq(self.seq), count)]
        for m in self.messages:
            if len(m) > MAX_MESSAGE_BYTES:
                raise ValueError(f"a message is at most {MAX_MESSAGE_BYTES} bytes")
            parts.append(_LEN.pack(len(m)))
            parts.append(m)
        return b"".join(parts)


@dataclass(frozen=True, slots=True)
class MoldRequest:
    """A re-request: send ``count`` messages of ``session`` starting at ``seq``."""

    session: str
    seq: int
    count: int

    def encode(self) -> bytes:
        if not 1 <= self.count <= MAX_MESSAGE_COUNT:
            raise ValueError(f"a request asks for 1..{MAX_MESSAGE_COUNT} messages")
        return _HEADER.pack(_session_bytes(self.session), _check_seq(self.seq), self.count)


def _session_bytes(session: str) -> bytes:
    raw = session.encode("ascii")
    if len(raw) > 10:
        raise ValueError(f"session {session!r} is longer than 10 ASCII characters")
    return raw.ljust(10)


def _check_seq(seq: int) -> int:
    if not 0 <= seq <= MAX_SEQUENCE:
        raise ValueError(f"sequence number {seq} outside uint64")
    return seq


def _decode_session(raw: bytes) -> str:
    if any(b < 0x20 or b > 0x7E for b in raw):
        raise MoldDecodeError("session is not printable ASCII")
    return raw.decode("ascii").rstrip(" ")


def is_request(data: bytes) -> bool:
    """True when ``data`` has the shape of a re-request (see the module docstring): the
    shape test is ``core.packetkey``'s, which the link model and the port rules use too."""
    return is_mold_request(data)


def decode_packet(data: bytes) -> MoldPacket:
    """Decode a downstream packet; raises ``MoldDecodeError`` for anything malformed."""
    if len(data) < HEADER_SIZE:
        raise MoldDecodeError(f"packet of {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    raw_session, seq, count = _HEADER.unpack_from(data)
    session = _decode_session(raw_session)
    if count == END_OF_SESSION:
        if len(data) != HEADER_SIZE:
            raise MoldDecodeError("end-of-session packet carries data")
        return MoldPacket(session, seq, (), end_of_session=True)
    if seq + count > MAX_SEQUENCE + 1:
        raise MoldDecodeError("sequence numbers overflow uint64")
    messages = []
    off = HEADER_SIZE
    end = len(data)
    for i in range(count):
        if off + 2 > end:
            raise MoldDecodeError(f"truncated: message {i} of {count} has no length field")
        (n,) = _LEN.unpack_from(data, off)
        off += 2
        if off + n > end:
            raise MoldDecodeError(f"truncated: message {i} claims {n} bytes, {end - off} left")
        messages.append(bytes(data[off:off + n]))
        off += n
    if off != end:
        raise MoldDecodeError(f"{end - off} bytes after the last of {count} messages")
    return MoldPacket(session, seq, tuple(messages))


def decode_request(data: bytes) -> MoldRequest:
    """Decode a re-request; raises ``MoldDecodeError`` for anything malformed."""
    if len(data) != HEADER_SIZE:
        raise MoldDecodeError(f"a request is {HEADER_SIZE} bytes, got {len(data)}")
    raw_session, seq, count = _HEADER.unpack_from(data)
    session = _decode_session(raw_session)
    if not 1 <= count <= MAX_MESSAGE_COUNT:
        raise MoldDecodeError(f"a request asks for 1..{MAX_MESSAGE_COUNT} messages, got {count}")
    if seq + count > MAX_SEQUENCE + 1:
        raise MoldDecodeError("requested range overflows uint64")
    return MoldRequest(session, seq, count)


def pack_messages(
    session: str, first_seq: int, messages: list[bytes], max_packet: int = DEFAULT_MAX_PACKET
) -> list[MoldPacket]:
    """Split consecutive messages ``first_seq, first_seq + 1, ...`` into packets of at most
    ``max_packet`` bytes (a message larger than that travels alone in its own packet)."""
    packets: list[MoldPacket] = []
    batch: list[bytes] = []
    size = HEADER_SIZE
    seq = first_seq
    for m in messages:
        block = 2 + len(m)
        if batch and (size + block > max_packet or len(batch) == MAX_MESSAGE_COUNT):
            packets.append(MoldPacket(session, seq, tuple(batch)))
            seq += len(batch)
            batch, size = [], HEADER_SIZE
        batch.append(m)
        size += block
    if batch:
        packets.append(MoldPacket(session, seq, tuple(batch)))
    return packets


def request_stripe(data: bytes) -> int | None:
    """The stripe a MoldUDP64 re-request asks about (None if ``data`` is not a valid request):
    an R_T serving several stripes routes the request to that stripe's Remulticaster."""
    try:
        return session_stripe(decode_request(data).session)
    except MoldDecodeError:
        return None
