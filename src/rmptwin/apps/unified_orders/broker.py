"""S_S: a secondary source for orders (seed 4.2, 7.2): trusts its traders, is trusted by an S_P.

"If there are too many S for the network based S_P to track, there can be secondary sources,
S_S, that trust the S and are trusted by the S_P." A broker checks its own traders' offers with
the same ``OrderEntry`` an S_P uses (their accounts, funds, holdings and rate at the broker),
then forwards each admitted offer to its S_P under its own account and credential: the S_P
tracks one account per broker, not one per trader, and checks that account's funds,
holdings and rate in turn. The trader's name and offer number travel unchanged, so the offer
is still the trader's (and admitted at most once) all the way to the exchange.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rmptwin.apps.unified_orders import offers
from rmptwin.apps.unified_orders.offers import Offer
from rmptwin.apps.unified_orders.portal import OrderEntry
from rmptwin.core.events import Event
from rmptwin.core.sansio import Dest, NoTimerJoinsNoGroup, Unicast


class BrokerCore(NoTimerJoinsNoGroup):
    def __init__(self, name: str, entry: OrderEntry, portal: str, account: str, token: str) -> None:
        self.name = name
        self.entry = entry
        self.portal = portal
        self.account = account
        self.token = token
        self._out: list[tuple[bytes, Dest]] = []
        self._not_offers = 0   # datagrams that are no offer at all (dropped)

    @property
    def malformed(self) -> int:
        return self.entry.malformed + self._not_offers

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if offers.is_offer(data):
            self.entry.admit(data, now, self._forward, broker=self.name)
        else:
            self._not_offers += 1

    def _forward(self, offer: Offer) -> dict[str, Any]:
        signed = replace(offer, account=self.account, token=self.token)
        self._out.append((signed.encode(), Unicast(self.portal)))
        return {"forwarded_to": self.portal}

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def next_event(self) -> Event | None:
        return self.entry.events.popleft() if self.entry.events else None
