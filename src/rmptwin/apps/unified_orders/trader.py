"""A trader S (seed 7.2): sends its planned offers, each at its instant, to one entry point.

The entry point is its portal S_P (through RMP) or, in the direct experiments, the exchange
floor itself by unicast; an open offer sent directly goes to every exchange. The trader
holds a credential (``token``) for its ``account``; the experiments give some traders a wrong
one. It fires and forgets (UDP, no retry), as a trader racing for the front of the queue
would: a lost offer is simply not executed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rmptwin.apps.unified_orders.offers import Offer
from rmptwin.apps.unified_orders.plan import PlannedOffer
from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, JoinsNoGroup, Unicast


@dataclass(frozen=True)
class TraderConfig:
    name: str
    entry: tuple[str, ...]      # where offers go: its portal, or the exchange(s) when entry is direct
    exchange: str               # where its offers are directed; "" = open
    account: str
    token: str
    pair: str
    plan: tuple[PlannedOffer, ...]


class TraderCore(JoinsNoGroup):
    def __init__(self, config: TraderConfig) -> None:
        self.cfg = config
        self._plan = sorted(config.plan, key=lambda p: p.t_ns)
        self._next = 0
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.sent = 0
        self.ignored = 0   # datagrams received: a trader reads none

    # ------------------------------------------------------------------ core API
    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        self.ignored += 1  # portals and exchanges answer nothing a trader needs

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def get_timer(self) -> int | None:
        return self._plan[self._next].t_ns if self._next < len(self._plan) else None

    def handle_timer(self, now: int) -> None:
        while self._next < len(self._plan) and self._plan[self._next].t_ns <= now:
            self._send(self._plan[self._next], now)
            self._next += 1

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    # ------------------------------------------------------------------ internals
    def _send(self, p: PlannedOffer, now: int) -> None:
        cfg = self.cfg
        self.sent += 1
        offer = Offer(trader=cfg.name, seq=self.sent, side=p.side, symbol=p.symbol, price=p.price, qty=p.qty,
                      exchange=cfg.exchange, account=cfg.account, token=cfg.token, decision=p.decision,
                      pair=cfg.pair, decided_ns=now)
        data = offer.encode()
        for dest in cfg.entry:
            self._out.append((data, Unicast(dest)))
        self._events.append(Event(Kind.OFFER_SENT, cfg.name, offer.seq, -1, len(data), {
            "decision": p.decision, "pair": cfg.pair, "side": p.side, "symbol": p.symbol, "price": p.price,
            "qty": p.qty, "to": list(cfg.entry), "exchange": cfg.exchange}))
