"""An EV's state: what every EV must agree on, how a request changes it, and its checkpoint.

The state after a position is the EV's order books, which requests it executed
(``ProcessedSet``: a replayed or duplicate request is not executed twice) and its trade
hash chain with the trade count. Executing a request (``apply_request``) is the same on
every EV; ``chain_trades`` folds a position's trades into the chain the EVs' VENUE_STATE
events compare. ``venue.VenueCore`` decides when to execute what (ordering, durability,
recovery); this module is the state it executes on.

A checkpoint (``Checkpoint``) is that state as one blob: the EV sends it to the HR every
``checkpoint_every`` positions (``wire.ckpt_frames``); a recovering EV installs the latest
one and re-executes only the hardened requests after it. The HR never reads the blob.
Layout: u32 length of a JSON header, the header (each book's symbol and snapshot length,
the processed set, the trade hash in hex, the trade count), then the books' snapshots in
the header's order.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

from rmptwin.venue import wire
from rmptwin.venue.orderbook import BookError, OrderBook, Trade
from rmptwin.venue.wire import Request

Key = tuple[int, int]   # a request: (gateway id, gateway seq)
_BLOB_LEN = struct.Struct("!I")


class ProcessedSet:
    """Which [gw id, gw seq] were executed: per gateway a watermark plus the few above it."""

    def __init__(self) -> None:
        self.mark: dict[int, int] = {}      # gw -> every seq <= mark executed
        self.above: dict[int, set[int]] = {}

    def __contains__(self, key: Key) -> bool:
        gw, seq = key
        return seq <= self.mark.get(gw, -1) or seq in self.above.get(gw, ())

    def add(self, key: Key) -> None:
        gw, seq = key
        m = self.mark.get(gw, -1)
        s = self.above.setdefault(gw, set())
        s.add(seq)
        while m + 1 in s:
            m += 1
            s.discard(m)
        self.mark[gw] = m

    def to_json(self) -> dict[str, list[Any]]:
        return {str(g): [m, sorted(self.above.get(g, ()))] for g, m in self.mark.items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProcessedSet:
        p = cls()
        for g, (m, above) in d.items():
            p.mark[int(g)] = m
            p.above[int(g)] = set(above)
        return p


@dataclass
class Checkpoint:
    """An EV's state after one position, as a checkpoint blob carries it."""

    books: dict[str, OrderBook]
    processed: ProcessedSet
    trade_hash: bytes      # the chained hash of every trade so far
    trade_count: int

    def encode(self, symbols: list[str]) -> bytes:
        """The blob, the books in ``symbols``' order."""
        snaps = [(s, self.books[s].snapshot()) for s in symbols]
        meta = json.dumps({"books": [(s, len(b)) for s, b in snaps], "processed": self.processed.to_json(),
                           "trade_hash": self.trade_hash.hex(), "trades": self.trade_count}).encode()
        return _BLOB_LEN.pack(len(meta)) + meta + b"".join(b for _, b in snaps)

    @classmethod
    def decode(cls, blob: bytes) -> Checkpoint:
        (hlen,) = _BLOB_LEN.unpack_from(blob)
        meta = json.loads(blob[4:4 + hlen])
        off = 4 + hlen
        books = {}
        for sym, size in meta["books"]:
            books[sym] = OrderBook.restore(blob[off:off + size])
            off += size
        return cls(books, ProcessedSet.from_json(meta["processed"]), bytes.fromhex(meta["trade_hash"]),
                   meta["trades"])


def apply_request(books: dict[str, OrderBook], req: Request) -> list[Trade]:
    """Execute one request on the books; its trades."""
    o = req.order
    book = books.get(o.symbol)
    if book is None:
        return []
    try:
        if o.action == wire.NEW:
            return book.submit(o.oid, o.side, o.qty, o.price or None, o.kind)
        if o.action == wire.CANCEL:
            book.cancel(o.oid)
            return []
        return book.replace(o.oid, o.qty, o.price)
    except BookError:
        return []   # cancel of a filled order, duplicate id: a no-op on every EV alike


def chain_trades(trade_hash: bytes, pos: int, trades: list[Trade]) -> bytes:
    """The trade hash chain after position ``pos``'s trades: blake2b(previous + these trades)."""
    return hashlib.blake2b(trade_hash + b";".join(b"%d:%d:%d:%d:%d:%d" % (pos, *t) for t in trades),
                           digest_size=16).digest()
