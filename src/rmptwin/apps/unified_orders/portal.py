"""S_P for orders (seed 7.2): a network-owned source that admits traders' offers into the ring.

"The sources cannot be trusted ... Both of these problems are solved by not giving the
sources direct access to the RMP group. The sources, S_P, are either owned by the network or
are completely trusted." A ``PortalCore`` is an ``OrderEntry`` (decode, ``Admission``, count)
in front of an ``rmp.source.SourceCore``: what the entry admits, the source core publishes on
the symbol's stripe exactly like a ticker source's message (re-sent until acknowledged, the
ring's token site gives it its place). Everything that is not an offer (acks, NACKs, new
rings) goes to the source core.

``OrderEntry`` has no RMP in it: any order-entry point (the distributed trading floor's, a
secondary source S_S) can put it in front of whatever carries the admitted offers on.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rmptwin.apps.unified_orders import offers
from rmptwin.apps.unified_orders.admission import Admission
from rmptwin.apps.unified_orders.offers import Offer
from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest
from rmptwin.rmp.source import SourceCore


class OrderEntry:
    """Decode an offer datagram, check it, and report the verdict as an event."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.events: deque[Event] = deque()
        self.malformed = 0

    def admit(self, data: bytes, now: int, hand_on: Callable[[Offer], dict[str, Any]] | None = None,
              **detail: Any) -> Offer | None:
        """The offer in ``data`` if it is admitted, else None (an OFFER_REJECT event says why).
        ``hand_on`` takes an admitted offer on (publishes it, executes it) and returns what the
        OFFER_ADMIT event should also say about where it went."""
        try:
            offer = offers.decode(data)
        except offers.OfferDecodeError:
            self.malformed += 1
            self.admission.count_rejection("malformed")
            self.events.append(Event(Kind.OFFER_REJECT, bytes=len(data), detail={"reason": "malformed"}))
            return None
        reason = self.admission.check(offer, now)
        info = {"account": offer.account, "decision": offer.decision, "pair": offer.pair, **detail}
        if reason is not None:
            self.events.append(Event(Kind.OFFER_REJECT, offer.trader, offer.seq, -1, len(data),
                                     {**info, "reason": reason}))
            return None
        if hand_on is not None:
            info.update(hand_on(offer))
        # the owners drain these events before those hand_on caused: admitted, then published
        self.events.append(Event(Kind.OFFER_ADMIT, offer.trader, offer.seq, -1, len(data), info))
        return offer


class PortalCore:
    """One S_P: admission in front of a ring source."""

    def __init__(self, name: str, source: SourceCore, entry: OrderEntry, stripe_of: Mapping[str, int]) -> None:
        self.name = name
        self.source = source
        self.entry = entry
        self.stripe_of = dict(stripe_of)

    @property
    def malformed(self) -> int:
        return self.source.malformed + self.entry.malformed

    # ------------------------------------------------------------------ core API
    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if not offers.is_offer(data):
            self.source.receive_datagram(data, src, now)
            return
        self.entry.admit(data, now, functools.partial(self._publish, now=now), portal=self.name)

    def _publish(self, offer: Offer, now: int) -> dict[str, Any]:
        stripe = self.stripe_of[offer.symbol]
        msg = self.source.publish(stripe, offer.admitted_by(self.name).encode(), now)
        return {"stripe": stripe, "msg": msg}

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        return self.source.datagrams_to_send(now)

    def get_timer(self) -> int | None:
        return self.source.get_timer()

    def handle_timer(self, now: int) -> None:
        self.source.handle_timer(now)

    def next_event(self) -> Event | None:
        if self.entry.events:
            return self.entry.events.popleft()
        return self.source.next_event()

    def groups(self) -> frozenset[str]:
        return self.source.groups()
