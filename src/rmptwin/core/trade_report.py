"""Ticker payloads: trade reports (symbol, price, size, venue, time) as fixed binary records.

A trade report is the payload of one RMP source message and of one MoldUDP64 message.
Which stripe a symbol goes on is ``core.striping.symbol_stripe``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# symbol (8 bytes, ASCII, space padded), price in 1/10000 units, size, venue (4 bytes), time ns
_FMT = struct.Struct("!8sqI4sq")
SIZE = _FMT.size


class TickerDecodeError(ValueError):
    """A payload is not a trade report."""


@dataclass(frozen=True, slots=True)
class TradeReport:
    symbol: str
    price_e4: int       # price x 10,000 (integer ticks, no float drift)
    size: int
    venue: str
    time_ns: int

    def encode(self, pad_to: int = 0) -> bytes:
        body = _FMT.pack(
            self.symbol.encode("ascii")[:8].ljust(8), self.price_e4, self.size,
            self.venue.encode("ascii")[:4].ljust(4), self.time_ns,
        )
        return body.ljust(pad_to, b"\0")

    @classmethod
    def decode(cls, data: bytes) -> TradeReport:
        if len(data) < SIZE:
            raise TickerDecodeError(f"trade report needs {SIZE} bytes, got {len(data)}")
        sym, price, size, venue, t = _FMT.unpack_from(data)
        try:
            return cls(sym.decode("ascii").rstrip(), price, size, venue.decode("ascii").rstrip(), t)
        except UnicodeDecodeError:
            raise TickerDecodeError("trade report symbol or venue is not ASCII") from None


def symbol_name(i: int) -> str:
    return f"S{i:04d}"
