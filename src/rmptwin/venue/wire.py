"""Binary frames between clients, gateways (GW), execution venues (EV), the sequencer and
the history recorder (HR).

Every frame: version byte, type byte, body length (u32), body. ``decode`` rejects
anything malformed with ``VenueWireError`` (never another exception), so a core can
drop bad input and count it.

Message flow (the seed's section 5): client -ORDER-> GW -REQUEST (multicast)-> EVs;
EV -PROPOSE-> sequencer -DECIDE-> EV; EV -STORE-> HR -HARDENED (multicast)-> EVs;
EV -COMPLETE-> GW -DONE-> client. Recovery: EV -CKPT_REQ/HARDENED_REQ-> HR.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

VERSION = 1
REQUEST_GROUP = "venue/req"      # GWs -> every EV
HARDENED_GROUP = "venue/hr"      # HR acknowledgements -> every EV
CKPT_PART_BYTES = 1200           # checkpoint fragments fit one Ethernet frame

NEW, CANCEL, REPLACE = 0, 1, 2
ACTIONS = {"new": NEW, "cancel": CANCEL, "replace": REPLACE}

(T_ORDER, T_ORDER_ACK, T_REQUEST, T_PROPOSE, T_DECIDE, T_STORE, T_HARDENED, T_COMPLETE,
 T_DONE, T_CKPT_STORE, T_CKPT_REQ, T_CKPT_PART, T_HARDENED_REQ, T_RESEND_REQ) = range(1, 15)
TYPE_NAMES = {
    T_ORDER: "ORDER", T_ORDER_ACK: "ORDER_ACK", T_REQUEST: "REQUEST", T_PROPOSE: "PROPOSE",
    T_DECIDE: "DECIDE", T_STORE: "STORE", T_HARDENED: "HARDENED", T_COMPLETE: "COMPLETE",
    T_DONE: "DONE", T_CKPT_STORE: "CKPT_STORE", T_CKPT_REQ: "CKPT_REQ", T_CKPT_PART: "CKPT_PART",
    T_HARDENED_REQ: "HARDENED_REQ", T_RESEND_REQ: "RESEND_REQ",
}

WON, LOST, TOO_FAR = 0, 1, 2      # DECIDE status
ACCEPTED, REJECTED = 0, 1         # ORDER_ACK status

_HDR = struct.Struct("!BBI")
_ORDER = struct.Struct("!BBB8sqqqq")   # action kind side symbol oid qty price target... (see Order)
_Q = struct.Struct("!q")
_H = struct.Struct("!H")
_KEY = struct.Struct("!Hq")             # (gw, gw_seq)
_REQ_HEAD = struct.Struct("!Hqq")       # gw, gw_seq, t_ns
_ORDER_HEAD = struct.Struct("!qq")      # client_seq, t_ns
_ACK = struct.Struct("!qBqH")           # client_seq, status, gw_seq, reason length
_PROPOSE = struct.Struct("!HqH")        # ev, n, count
_DECIDE = struct.Struct("!BqqH")        # status, n, next, count
_STORE_HEAD = struct.Struct("!HH")      # ev, count
_ENTRY = struct.Struct("!qH")           # n, trade count
_TRADE = struct.Struct("!qqqqB")        # taker, maker, price, qty, taker side
_HARD_HEAD = struct.Struct("!qH")       # upto, count
_COMPLETE = struct.Struct("!qqH")       # gw_seq (client_seq in DONE), n, trades
_CKPT = struct.Struct("!qHH")           # n, part, parts
_RANGE = struct.Struct("!qq")


Key = tuple[int, int]                       # (gw, gw_seq): a request's identity
TradeRow = tuple[int, int, int, int, int]   # (taker, maker, price, qty, taker side), as in STORE


class VenueWireError(ValueError):
    """Bytes that are not a well-formed venue frame."""


@dataclass(frozen=True, slots=True)
class Order:
    action: int          # NEW / CANCEL / REPLACE
    kind: int            # orderbook LIMIT / MARKET / IOC / FOK
    side: int            # orderbook BUY / SELL
    symbol: str
    oid: int             # order id, unique per exchange (client index << 40 | client seq)
    qty: int
    price: int           # price x 10,000 (ticker.TradeReport units); 0 for market orders
    spare: int = 0

    def encode(self) -> bytes:
        try:
            sym = self.symbol.encode("ascii")
        except UnicodeEncodeError:
            sym = b"?"
        return _ORDER.pack(self.action, self.kind, self.side, sym[:8].ljust(8), self.oid, self.qty,
                           self.price, self.spare)

    @classmethod
    def decode_from(cls, data: bytes, off: int) -> Order:
        a, k, s, sym, oid, qty, price, spare = _ORDER.unpack_from(data, off)
        try:
            symbol = sym.decode("ascii").rstrip()
        except UnicodeDecodeError:
            raise VenueWireError("order symbol is not ASCII") from None
        return cls(a, k, s, symbol, oid, qty, price, spare)


ORDER_SIZE = _ORDER.size


@dataclass(frozen=True, slots=True)
class Request:
    """An order as numbered by its gateway: the unit the venues put in total order."""

    gw: int
    gw_seq: int
    t_ns: int            # gateway's clock when it accepted the order (latency origin)
    order: Order

    @property
    def key(self) -> tuple[int, int]:
        return (self.gw, self.gw_seq)

    def encode_body(self) -> bytes:
        return _REQ_HEAD.pack(self.gw, self.gw_seq, self.t_ns) + self.order.encode()

    @classmethod
    def decode_from(cls, data: bytes, off: int) -> Request:
        gw, seq, t = _REQ_HEAD.unpack_from(data, off)
        return cls(gw, seq, t, Order.decode_from(data, off + _REQ_HEAD.size))


REQUEST_SIZE = _REQ_HEAD.size + ORDER_SIZE


def frame(ftype: int, body: bytes) -> bytes:
    return _HDR.pack(VERSION, ftype, len(body)) + body


def split(data: bytes) -> tuple[int, bytes]:
    """Check the header; return (type, body)."""
    if len(data) < _HDR.size:
        raise VenueWireError(f"frame of {len(data)} bytes is shorter than its header")
    version, ftype, length = _HDR.unpack_from(data)
    if version != VERSION:
        raise VenueWireError(f"unknown frame version {version}")
    if ftype not in TYPE_NAMES:
        raise VenueWireError(f"unknown frame type {ftype}")
    if length != len(data) - _HDR.size:
        raise VenueWireError(f"{TYPE_NAMES[ftype]} frame says {length} bytes, carries {len(data) - _HDR.size}")
    return ftype, data[_HDR.size:]


# ---------------------------------------------------------------------- encoders
def order_frame(client_seq: int, t_ns: int, order: Order) -> bytes:
    return frame(T_ORDER, _ORDER_HEAD.pack(client_seq, t_ns) + order.encode())


def order_ack_frame(client_seq: int, status: int, gw_seq: int, reason: str = "") -> bytes:
    r = reason.encode()[:200]
    return frame(T_ORDER_ACK, _ACK.pack(client_seq, status, gw_seq, len(r)) + r)


def request_frame(req: Request) -> bytes:
    return frame(T_REQUEST, req.encode_body())


def propose_frame(ev: int, n: int, keys: list[tuple[int, int]]) -> bytes:
    return frame(T_PROPOSE, _PROPOSE.pack(ev, n, len(keys)) + b"".join(_KEY.pack(*k) for k in keys))


def decide_frame(status: int, n: int, next_pos: int, keys: list[tuple[int, int]]) -> bytes:
    return frame(T_DECIDE, _DECIDE.pack(status, n, next_pos, len(keys)) + b"".join(_KEY.pack(*k) for k in keys))


def store_frame(ev: int, entries: list[tuple[int, Request, list[TradeRow]]]) -> bytes:
    """entries: (position, request, trades)."""
    parts = [_STORE_HEAD.pack(ev, len(entries))]
    for n, req, trades in entries:
        parts.append(_ENTRY.pack(n, len(trades)))
        parts.append(req.encode_body())
        parts.extend(_TRADE.pack(*t) for t in trades)
    return frame(T_STORE, b"".join(parts))


def hardened_frame(upto: int, entries: list[tuple[int, Request]]) -> bytes:
    parts = [_HARD_HEAD.pack(upto, len(entries))]
    for n, req in entries:
        parts.append(_Q.pack(n))
        parts.append(req.encode_body())
    return frame(T_HARDENED, b"".join(parts))


def complete_frame(ftype: int, seq: int, n: int, trades: int) -> bytes:
    """COMPLETE (EV -> GW, seq = gw_seq) or DONE (GW -> client, seq = client_seq)."""
    return frame(ftype, _COMPLETE.pack(seq, n, trades))


def ckpt_frames(ftype: int, n: int, blob: bytes) -> list[bytes]:
    chunks = [blob[i:i + CKPT_PART_BYTES] for i in range(0, len(blob), CKPT_PART_BYTES)] or [b""]
    return [frame(ftype, _CKPT.pack(n, i, len(chunks)) + c) for i, c in enumerate(chunks)]


def ckpt_req_frame(ev: int) -> bytes:
    return frame(T_CKPT_REQ, _H.pack(ev))


def range_frame(ftype: int, first: int, last: int) -> bytes:
    """HARDENED_REQ [first, last] positions, or RESEND_REQ [first, last] gw_seq."""
    return frame(ftype, _RANGE.pack(first, last))


def seq_ranges(keys: Iterable[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(gateway, first, last) runs of consecutive gateway sequence numbers among ``keys``."""
    out: list[tuple[int, int, int]] = []
    for gw, seq in sorted(keys):
        if out and out[-1][0] == gw and out[-1][2] == seq - 1:
            out[-1] = (gw, out[-1][1], seq)
        else:
            out.append((gw, seq, seq))
    return out


# ---------------------------------------------------------------------- decoder
def decode(data: bytes) -> tuple[int, Any]:
    """(type, fields) for any frame; raises VenueWireError on malformed input. The fields
    are what the type's decoder below returns (Any here: their type follows the type code)."""
    ftype, body = split(data)
    try:
        return ftype, _DECODERS[ftype](body)
    except struct.error as e:
        raise VenueWireError(f"{TYPE_NAMES[ftype]} frame is truncated ({e})") from None


def _need(body: bytes, size: int, what: str) -> None:
    if len(body) != size:
        raise VenueWireError(f"{what} frame has {len(body)} bytes, expected {size}")


def _d_order(b: bytes) -> tuple[int, int, Order]:
    _need(b, _ORDER_HEAD.size + ORDER_SIZE, "ORDER")
    seq, t = _ORDER_HEAD.unpack_from(b)
    return seq, t, Order.decode_from(b, _ORDER_HEAD.size)


def _d_ack(b: bytes) -> tuple[int, int, int, str]:
    seq, status, gw_seq, rlen = _ACK.unpack_from(b)
    _need(b, _ACK.size + rlen, "ORDER_ACK")
    return seq, status, gw_seq, b[_ACK.size:].decode(errors="replace")


def _d_request(b: bytes) -> Request:
    _need(b, REQUEST_SIZE, "REQUEST")
    return Request.decode_from(b, 0)


def _keys(b: bytes, off: int, count: int, what: str) -> list[Key]:
    _need(b, off + count * _KEY.size, what)
    return [_KEY.unpack_from(b, off + i * _KEY.size) for i in range(count)]


def _d_propose(b: bytes) -> tuple[int, int, list[Key]]:
    ev, n, count = _PROPOSE.unpack_from(b)
    return ev, n, _keys(b, _PROPOSE.size, count, "PROPOSE")


def _d_decide(b: bytes) -> tuple[int, int, int, list[Key]]:
    status, n, nxt, count = _DECIDE.unpack_from(b)
    if status not in (WON, LOST, TOO_FAR):
        raise VenueWireError(f"DECIDE status {status} is unknown")
    return status, n, nxt, _keys(b, _DECIDE.size, count, "DECIDE")


def _d_store(b: bytes) -> tuple[int, list[tuple[int, Request, list[TradeRow]]]]:
    ev, count = _STORE_HEAD.unpack_from(b)
    off = _STORE_HEAD.size
    out: list[tuple[int, Request, list[TradeRow]]] = []
    for _ in range(count):
        n, ntr = _ENTRY.unpack_from(b, off)
        off += _ENTRY.size
        req = Request.decode_from(b, off)
        off += REQUEST_SIZE
        trades = [_TRADE.unpack_from(b, off + i * _TRADE.size) for i in range(ntr)]
        off += ntr * _TRADE.size
        out.append((n, req, trades))
    if off != len(b):
        raise VenueWireError("STORE frame has trailing bytes")
    return ev, out


def _d_hardened(b: bytes) -> tuple[int, list[tuple[int, Request]]]:
    upto, count = _HARD_HEAD.unpack_from(b)
    off = _HARD_HEAD.size
    out: list[tuple[int, Request]] = []
    for _ in range(count):
        (n,) = _Q.unpack_from(b, off)
        out.append((n, Request.decode_from(b, off + _Q.size)))
        off += _Q.size + REQUEST_SIZE
    if off != len(b):
        raise VenueWireError("HARDENED frame has trailing bytes")
    return upto, out


def _d_complete(b: bytes) -> tuple[int, int, int]:
    _need(b, _COMPLETE.size, "COMPLETE")
    return _COMPLETE.unpack(b)


def _d_ckpt(b: bytes) -> tuple[int, int, int, bytes]:
    n, part, parts = _CKPT.unpack_from(b)
    if part >= max(parts, 1):
        raise VenueWireError(f"checkpoint part {part} of {parts}")
    return n, part, parts, b[_CKPT.size:]


def _d_ckpt_req(b: bytes) -> int:
    _need(b, _H.size, "CKPT_REQ")
    ev: int = _H.unpack(b)[0]
    return ev


def _d_range(b: bytes) -> tuple[int, int]:
    _need(b, _RANGE.size, "range")
    return _RANGE.unpack(b)


_DECODERS: dict[int, Callable[[bytes], Any]] = {
    T_ORDER: _d_order, T_ORDER_ACK: _d_ack, T_REQUEST: _d_request, T_PROPOSE: _d_propose,
    T_DECIDE: _d_decide, T_STORE: _d_store, T_HARDENED: _d_hardened, T_COMPLETE: _d_complete,
    T_DONE: _d_complete, T_CKPT_STORE: _d_ckpt, T_CKPT_REQ: _d_ckpt_req, T_CKPT_PART: _d_ckpt,
    T_HARDENED_REQ: _d_range, T_RESEND_REQ: _d_range,
}
