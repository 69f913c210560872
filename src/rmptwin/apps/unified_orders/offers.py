"""An offer to buy or sell (seed 7.2) and its wire format.

One record travels twice: trader -> portal S_P (with the trader's credential token), and
S_P -> ring -> exchanges as an RMP source message (token blanked, ``portal`` filled in: the
ring's receivers never see a credential). ``exchange`` empty means an open offer, which
every exchange receives.

Layout: ``b"UO"``, version, kind; then seq (q), decision (i), side (B), price (q, x 10,000),
qty (I), decided_ns (q); then the strings trader, account, token, symbol, exchange, pair,
portal, each as one length byte and UTF-8. The first byte, ``U``, is neither an RMP frame
(0xA5) nor a MoldUDP64 session, so the runtime delivers it on the RMP port like any
unicast datagram it does not recognise.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

MAGIC = b"UO"
VERSION = 1
KIND_OFFER = 1
BUY, SELL = "buy", "sell"
_SIDES = (BUY, SELL)

_HEAD = struct.Struct("!2sBB")
_BODY = struct.Struct("!qiBqIq")
_STRINGS = ("trader", "account", "token", "symbol", "exchange", "pair", "portal")
MAX_STRING = 64


class OfferDecodeError(ValueError):
    """Bytes that are not a well-formed offer."""


@dataclass(frozen=True, slots=True)
class Offer:
    trader: str
    seq: int                  # the trader's own offer number, from 1: (trader, seq) names an offer
    side: str                 # BUY or SELL
    symbol: str
    price: int                # x 10,000
    qty: int
    exchange: str = ""        # "" = open to every exchange
    account: str = ""
    token: str = ""           # credential the portal checks; blank once admitted
    decision: int = -1        # the paired decision it answers (fair-entry experiments), else -1
    pair: str = ""
    decided_ns: int = 0       # when the trader decided (its clock)
    portal: str = ""          # the S_P that admitted it (set by the portal)

    @property
    def key(self) -> tuple[str, int]:
        return (self.trader, self.seq)

    @property
    def value(self) -> int:
        """Cash an offer to buy commits, in price units x 10,000."""
        return self.price * self.qty

    def admitted_by(self, portal: str) -> Offer:
        """The copy a portal publishes: its name in, the credential out."""
        return replace(self, token="", portal=portal)

    def encode(self) -> bytes:
        parts = [_HEAD.pack(MAGIC, VERSION, KIND_OFFER),
                 _BODY.pack(self.seq, self.decision, _SIDES.index(self.side), self.price, self.qty, self.decided_ns)]
        for name in _STRINGS:
            raw = getattr(self, name).encode()
            if len(raw) > MAX_STRING:
                raise ValueError(f"offer {name} is longer than {MAX_STRING} bytes")
            parts.append(bytes([len(raw)]) + raw)
        return b"".join(parts)


def is_offer(data: bytes) -> bool:
    return data[:2] == MAGIC


def decode(data: bytes) -> Offer:
    """The offer in ``data``; OfferDecodeError for anything else (never another exception)."""
    try:
        magic, version, kind = _HEAD.unpack_from(data)
        if magic != MAGIC or version != VERSION or kind != KIND_OFFER:
            raise OfferDecodeError(f"not an offer (magic {magic!r}, version {version}, kind {kind})")
        seq, decision, side, price, qty, decided = _BODY.unpack_from(data, _HEAD.size)
        off = _HEAD.size + _BODY.size
        strings = {}
        for name in _STRINGS:
            n = data[off]
            raw = data[off + 1: off + 1 + n]
            if len(raw) != n:
                raise OfferDecodeError("offer is truncated")
            strings[name] = raw.decode()
            off += 1 + n
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise OfferDecodeError(f"offer is malformed ({e})") from None
    if any(data[off:]):   # zero padding is allowed (a payload padded to message_bytes), anything else not
        raise OfferDecodeError("offer has trailing bytes")
    if side >= len(_SIDES):
        raise OfferDecodeError(f"offer side {side} is neither buy nor sell")
    if price <= 0 or qty <= 0 or seq <= 0:
        raise OfferDecodeError("offer price, quantity and number must be positive")
    return Offer(side=_SIDES[side], seq=seq, decision=decision, price=price, qty=qty, decided_ns=decided, **strings)
