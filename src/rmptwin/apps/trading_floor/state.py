"""The floor's state as every node derives it from the agreed sequence (seed 7.3: "depending
on the sequence of the orders, each participant knows which trades have occurred").

``FloorState.apply`` takes each delivered message in gseq order. Orders and controls go to
the rule; each fill becomes trade number n (n = 1, 2, ... in derivation order) with a
digest of its content. Reports are checked against the derived trades:

- ``tentative(n, d)`` is valid where trade n is already derived with digest d (its basis
  always precedes it in the sequence); the first valid one makes trade n *tentative*, later
  ones are duplicates. An invalid one (no trade n, or another digest: the sequence under
  it changed, e.g. an arbiter that kept going with a superseded ring) *withdraws* that
  report: (n, d) is void everywhere, at the same place.
- ``confirmed(n, d)`` makes a tentative trade n with digest d *confirmed*; anything else is
  ignored.

The state hash rolls over every change (trade derived, tentative, confirmed, withdrawn)
and the rule's snapshot: two nodes that applied the same sequence have the same hash.
A receiver that must start its sequence over (``RECOVER`` from the RMP receiver) calls
``reset`` and derives everything again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from rmptwin.apps.trading_floor.messages import Control, FloorDecodeError, Order, Report, decode
from rmptwin.apps.trading_floor.rules import DEFAULT_PARAMS, Entered, Fill, Rule, RuleParams, make_rule


@dataclass(frozen=True, slots=True)
class Trade:
    n: int
    fill: Fill
    digest: str
    gseq: int        # where the order or control that made it stands


def trade_digest(n: int, fill: Fill) -> str:
    text = "|".join(str(v) for v in (n, *fill.as_tuple()))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Change:
    """What one message changed: status derived|tentative|confirmed|withdrawn of (n, digest)."""

    status: str
    n: int
    digest: str
    gseq: int


class FloorState:
    def __init__(self, rule: str, params: RuleParams = DEFAULT_PARAMS) -> None:
        self.rule_name = rule
        self.params = params
        self.reset()

    def reset(self) -> None:
        self.rule: Rule = make_rule(self.rule_name, self.params)
        self.trades: list[Trade] = []
        self.tentative: dict[int, int] = {}      # n -> gseq of its first valid tentative report
        self.confirmed: dict[int, int] = {}      # n -> gseq of its confirmation
        self.withdrawn: dict[tuple[int, str], int] = {}   # void tentative reports -> gseq
        self.orders = 0
        self.malformed = 0
        self.duplicates = 0
        self.position = 0
        self._hash = b""

    # ------------------------------------------------------------------ the sequence
    def apply(self, payload: bytes, who: str, gseq: int, token: int) -> list[Change]:
        self.position = gseq
        try:
            msg = decode(payload)
        except FloorDecodeError:
            self.malformed += 1
            return []
        if isinstance(msg, Order):
            self.orders += 1
            changes = self._derive(self.rule.on_order(Entered(msg, gseq, who, token)), gseq)
        elif isinstance(msg, Control):
            changes = self._derive(self.rule.on_control(msg, token), gseq)
        else:
            changes = self._report(msg, gseq)
        for c in changes:
            self._hash = hashlib.blake2b(self._hash + f"{c.status}|{c.n}|{c.digest}|{c.gseq}".encode(),
                                         digest_size=16).digest()
        return changes

    def _derive(self, fills: list[Fill], gseq: int) -> list[Change]:
        out = []
        for fill in fills:
            n = len(self.trades) + 1
            t = Trade(n, fill, trade_digest(n, fill), gseq)
            self.trades.append(t)
            out.append(Change("derived", n, t.digest, gseq))
        return out

    def _report(self, r: Report, gseq: int) -> list[Change]:
        valid = r.n <= len(self.trades) and self.trades[r.n - 1].digest == r.digest
        if r.status == "tentative":
            if not valid:
                if (r.n, r.digest) in self.withdrawn:
                    self.duplicates += 1
                    return []
                self.withdrawn[(r.n, r.digest)] = gseq
                return [Change("withdrawn", r.n, r.digest, gseq)]
            if r.n in self.tentative:
                self.duplicates += 1
                return []
            self.tentative[r.n] = gseq
            return [Change("tentative", r.n, r.digest, gseq)]
        if valid and r.n in self.tentative and r.n not in self.confirmed:
            self.confirmed[r.n] = gseq
            return [Change("confirmed", r.n, r.digest, gseq)]
        self.duplicates += 1
        return []

    # ------------------------------------------------------------------ for the arbiter
    def unreported(self) -> list[Trade]:
        """Derived trades no valid tentative report in the sequence names yet."""
        return [t for t in self.trades if t.n not in self.tentative]

    def confirmable(self, stable_gseq: int) -> list[Trade]:
        """Tentative trades whose report every ring member holds (placed at or below the
        stable position), not yet confirmed."""
        return [self.trades[n - 1] for n, g in self.tentative.items() if g <= stable_gseq and n not in self.confirmed]

    # ------------------------------------------------------------------ state
    def state_hash(self) -> str:
        return hashlib.blake2b(self._hash + self.rule.snapshot(), digest_size=16).hexdigest()

    def counts(self) -> dict[str, int]:
        return {"trades": len(self.trades), "tentative": len(self.tentative), "confirmed": len(self.confirmed),
                "withdrawn": len(self.withdrawn), "orders": self.orders, "rejected": self.rule.rejected,
                "malformed": self.malformed}
