"""Pluggable trading rules (seed 7.3: "some rules are semantic ... others a matter of style").

A rule is a deterministic state machine over the floor's agreed sequence: every node that
feeds it the same orders and controls in the same order gets the same fills. It never
looks at a clock: whatever depends on time (a Dutch clock's step, the end of a sealed-bid
round) enters the sequence as a ``Control`` that the token site sources, so the sequence
alone decides.

- ``on_order(e)``: an order at its place in the sequence -> the fills it causes;
- ``on_control(c)``: a control at its place -> fills;
- ``controls_due(token)``: what the token site holding token number ``token`` sources now;
- ``snapshot()``: the rule's state as bytes (part of the floor's state hash).

Rules: ``continuous`` (price-time double auction on ``venue.orderbook``, with stop orders),
``second_price`` (single-round sealed high-bid auction, the winner pays the second bid),
``dutch`` (descending clock, Amsterdam flower auction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rmptwin.apps.trading_floor.messages import Control, Order


@dataclass(frozen=True, slots=True)
class Entered:
    """An order at its place: ``oid`` = its gseq, ``who`` = the participant (source label),
    ``token`` = the token number of the ack that placed it."""

    order: Order
    oid: int
    who: str
    token: int


@dataclass(frozen=True, slots=True)
class Fill:
    symbol: str
    price: int
    qty: int
    buy: int          # oid of the buy order
    sell: int         # oid of the sell order
    buyer: str
    seller: str

    def as_tuple(self) -> tuple[str, int, int, int, int, str, str]:
        return (self.symbol, self.price, self.qty, self.buy, self.sell, self.buyer, self.seller)


@dataclass(frozen=True)
class RuleParams:
    """A rule's parameters, in ticker price units (1/10,000)."""

    round_passes: int = 4          # second_price: token passes a round stays open
    dutch_start: int = 20_000      # dutch: clock starts this far above the seller's reserve
    dutch_step: int = 1_000        # dutch: how far the clock falls per token pass


DEFAULT_PARAMS = RuleParams()


class Rule(Protocol):
    name: str
    rejected: int

    def on_order(self, e: Entered) -> list[Fill]: ...

    def on_control(self, c: Control, token: int) -> list[Fill]: ...

    def controls_due(self, token: int) -> list[Control]: ...

    def snapshot(self) -> bytes: ...


def make_rule(name: str, params: RuleParams = DEFAULT_PARAMS) -> Rule:
    # imported here, not at the top: each rule's module imports this package's types
    from rmptwin.apps.trading_floor.rules.continuous import ContinuousAuction
    from rmptwin.apps.trading_floor.rules.dutch import DutchAuction
    from rmptwin.apps.trading_floor.rules.second_price import SecondPriceAuction

    rules: dict[str, Callable[[RuleParams], Rule]] = {"continuous": ContinuousAuction, "second_price": SecondPriceAuction,
                              "dutch": DutchAuction}
    try:
        return rules[name](params)
    except KeyError:
        raise ValueError(f"unknown trading rule {name!r}; known: {', '.join(rules)}") from None


@dataclass
class Lot:
    """One auctioned lot: a seller's sell order (its oid is the lot's id)."""

    lot: int
    symbol: str
    qty: int
    reserve: int
    seller: str
    opened_token: int
    bids: list[tuple[int, int, str]] = field(default_factory=list)   # (price, oid, who), in sequence order
    clock: int = 0
    step: int = 0
