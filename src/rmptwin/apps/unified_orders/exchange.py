"""An exchange floor for unified orders (seed 7.2): executes offers in the order it is given them.

Through RMP (``entry = "rmp"``) it is a receiver of the ring's sequenced stream, built on the
ticker customer (``rmp.customer.CustomerCore``: regional remulticast, gap repair from R_x or the
R_T, in-order delivery by global sequence number); it decodes each delivered message as an
offer instead of a trade report. "If the buy and sell offers are directed to a single
exchange, the order of the sequence may be binding on the trades that occur": it executes
every offer directed to it, and every open one, in that order, on one price-time order book
per symbol (``venue.orderbook.OrderBook``). Every exchange thus executes the offers it shares
with another in the same relative order, and the same trades as replaying its part of the
sequence into a fresh book.

Direct (``entry = "direct"``, the unfair baseline): traders send their offers straight to the
floor, which checks them itself (the same ``OrderEntry``) and executes them in arrival order.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from rmptwin.apps.unified_orders import offers
from rmptwin.apps.unified_orders.offers import BUY, Offer
from rmptwin.apps.unified_orders.portal import OrderEntry
from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest
from rmptwin.rmp.customer import CustomerConfig, CustomerCore, Held
from rmptwin.rmp.repair import SequenceTracker
from rmptwin.venue.orderbook import BUY as BOOK_BUY
from rmptwin.venue.orderbook import SELL as BOOK_SELL
from rmptwin.venue.orderbook import OrderBook


class OfferStream(CustomerCore):
    """A customer whose application is an exchange: each delivered message goes to ``on_message``."""

    def __init__(self, config: CustomerConfig, rng: random.Random,
                 on_message: Callable[[int, int, bytes], None], *, recovering: bool = False) -> None:
        super().__init__(config, rng, recovering=recovering)
        self.on_message = on_message

    def _deliver(self, stripe: int, track: SequenceTracker[Held]) -> None:
        for seq, (payload, repair, region) in track.deliverable():
            self.delivered[stripe].append(seq)
            self.repaired += bool(repair)
            self._events.append(Event(Kind.CUST_RECV, gseq=seq, bytes=len(payload), detail={
                "repair": bool(repair), "mold_seq": seq, "stripe": stripe, "region": region}))
            self.on_message(stripe, seq, payload)


class Executor:
    """The books of one exchange and the order it executed offers in (pure, no I/O)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.books: dict[str, OrderBook] = {}
        self.executed: list[Offer] = []
        self.events: deque[Event] = deque()

    def directed_here(self, offer: Offer) -> bool:
        return offer.exchange in ("", self.name)

    def execute(self, offer: Offer, **detail: Any) -> None:
        position = len(self.executed) + 1   # the book's order id: unique, in execution order
        self.executed.append(offer)
        book = self.books.setdefault(offer.symbol, OrderBook(offer.symbol))
        side = BOOK_BUY if offer.side == BUY else BOOK_SELL
        trades = book.submit(position, side, offer.qty, offer.price)
        self.events.append(Event(Kind.OFFER_EXEC, offer.trader, offer.seq, position, 0, {
            "decision": offer.decision, "pair": offer.pair, "portal": offer.portal, "symbol": offer.symbol,
            "side": offer.side, "trades": len(trades), **detail}))
        for taker, maker, price, qty, _ in trades:
            m = self.executed[maker - 1]
            self.events.append(Event(Kind.TRADE, offer.trader, offer.seq, taker, 0, {
                "symbol": offer.symbol, "price": price, "qty": qty, "maker": f"{m.trader}:{m.seq}",
                "taker": f"{offer.trader}:{offer.seq}", "maker_position": maker}))


class ExchangeCore:
    """One exchange floor; ``stream`` (through RMP) or ``entry`` (direct) says how offers arrive."""

    def __init__(self, name: str, *, stream_config: CustomerConfig | None = None,
                 entry: OrderEntry | None = None, rng: random.Random | None = None,
                 recovering: bool = False) -> None:
        if (stream_config is None) == (entry is None):
            raise ValueError("an exchange takes offers either from the ring or directly, not both")
        self.name = name
        self.executor = Executor(name)
        self.entry = entry
        self.stream = None if stream_config is None else OfferStream(
            stream_config, rng or random.Random(0), self._on_message, recovering=recovering)
        self._malformed = 0

    @property
    def malformed(self) -> int:
        inner = self.stream.malformed if self.stream is not None else self.entry.malformed if self.entry else 0
        return inner + self._malformed

    # ------------------------------------------------------------------ core API
    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if self.stream is not None:
            self.stream.receive_datagram(data, src, now)
        elif offers.is_offer(data) and self.entry is not None:
            self.entry.admit(data, now, self._execute_direct, exchange=self.name)
        else:
            self._malformed += 1   # reached directly, it reads offers only

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        return self.stream.datagrams_to_send(now) if self.stream is not None else []

    def get_timer(self) -> int | None:
        return self.stream.get_timer() if self.stream is not None else None

    def handle_timer(self, now: int) -> None:
        if self.stream is not None:
            self.stream.handle_timer(now)

    def next_event(self) -> Event | None:
        for queue in (self.entry.events if self.entry is not None else None, self.executor.events):
            if queue:
                return queue.popleft()
        return self.stream.next_event() if self.stream is not None else None

    def groups(self) -> frozenset[str]:
        return self.stream.groups() if self.stream is not None else frozenset()

    # ------------------------------------------------------------------ internals
    def _execute_direct(self, offer: Offer) -> dict[str, Any]:
        if not self.executor.directed_here(offer):
            return {"executed": False}
        self.executor.execute(offer, ring_gseq=-1)
        return {"executed": True}

    def _on_message(self, stripe: int, gseq: int, payload: bytes) -> None:
        try:
            offer = offers.decode(payload)
        except offers.OfferDecodeError:
            self._malformed += 1
            return
        if self.executor.directed_here(offer):
            self.executor.execute(offer, ring_gseq=gseq, stripe=stripe)
