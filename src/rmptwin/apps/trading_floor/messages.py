"""What travels in the trading floor's ring (seed 7.3): payloads of RMP source messages.

Participants publish ``Order`` (buy, sell, stop); the token site publishes ``Control``
(an auction rule's clock tick or round close) and ``Report`` (a trade tentative or
confirmed). A payload is ``b"TF1"`` then compact JSON; ``decode`` rejects anything else
with ``FloorDecodeError``, so a bad message is counted, never a crash, and every node
treats it alike (ignored at its place in the sequence).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAGIC = b"TF1"
SIDES = ("B", "S")
ORDER_KINDS = ("limit", "market", "stop")
CONTROLS = ("tick", "close")
STATUSES = ("tentative", "confirmed")


class FloorDecodeError(ValueError):
    """A payload that is not a well-formed trading floor message."""


@dataclass(frozen=True, slots=True)
class Order:
    """A participant's order. Prices are integers in ticker units (1/10,000 of a currency unit).

    ``kind`` limit: ``price`` is the limit; market: no limit; stop: becomes a market order
    (a limit order at ``price`` when price > 0) once the last trade price reaches ``stop``
    (buy: last >= stop; sell: last <= stop)."""

    side: str
    kind: str
    symbol: str
    qty: int
    price: int = 0
    stop: int = 0


@dataclass(frozen=True, slots=True)
class Control:
    """A rule's clock, sourced by the token site: ``tick`` lowers a Dutch lot's clock to step
    ``step``; ``close`` ends a sealed-bid round on ``lot``."""

    what: str
    lot: int
    step: int = 0


@dataclass(frozen=True, slots=True)
class Report:
    """A trade report: trade number ``n`` (its place in the derived trade list), ``digest`` of
    the trade's content, and the trade itself for the ticker."""

    status: str
    n: int
    digest: str
    trade: tuple[Any, ...] = ()   # a Fill's as_tuple(); read back from JSON


Message = Order | Control | Report


def encode(msg: Message) -> bytes:
    if isinstance(msg, Order):
        body = {"o": [msg.side, msg.kind, msg.symbol, msg.qty, msg.price, msg.stop]}
    elif isinstance(msg, Control):
        body = {"c": [msg.what, msg.lot, msg.step]}
    else:
        body = {"r": [msg.status, msg.n, msg.digest, list(msg.trade)]}
    return MAGIC + json.dumps(body, separators=(",", ":")).encode()


def _ints(*values: object) -> bool:
    return all(type(v) is int and v >= 0 for v in values)


def decode(payload: bytes) -> Message:
    if not payload.startswith(MAGIC):
        raise FloorDecodeError("not a trading floor message")
    try:
        body = json.loads(payload[len(MAGIC):].rstrip(b"\0 "))
    except (ValueError, UnicodeDecodeError) as e:
        raise FloorDecodeError(f"bad JSON ({e})") from None
    if not isinstance(body, dict) or len(body) != 1:
        raise FloorDecodeError("one of o, c, r expected")
    (key, v), = body.items()
    if not isinstance(v, list):
        raise FloorDecodeError(f"{key}: list expected")
    if key == "o" and len(v) == 6:
        side, kind, symbol, qty, price, stop = v
        if side in SIDES and kind in ORDER_KINDS and isinstance(symbol, str) and _ints(qty, price, stop) and qty > 0:
            return Order(side, kind, symbol, qty, price, stop)
    elif key == "c" and len(v) == 3:
        what, lot, step = v
        if what in CONTROLS and _ints(lot, step):
            return Control(what, lot, step)
    elif key == "r" and len(v) == 4:
        status, n, digest, trade = v
        if status in STATUSES and _ints(n) and n > 0 and isinstance(digest, str) and isinstance(trade, list):
            return Report(status, n, digest, tuple(trade))
    raise FloorDecodeError(f"malformed {key!r} message")
