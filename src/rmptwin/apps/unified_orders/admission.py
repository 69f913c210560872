"""What an S_P checks before an offer may enter the sequence (seed 7.2).

The seed's sources S "must present credentials to the S_P that they own the stock that they
would like to sell or that they have the funds that they would like to spend", or prove
their identity to an account they hold there; and they "may transmit a large number of
messages to disrupt the system". So, in this order, an offer is refused for:

- ``credentials``: unknown account, or a token that is not HMAC-SHA256(portal secret, account)
  (``account_token``: the password system the S_P and its account holders agree on);
- ``trader``: the account exists but this trader may not use it;
- ``symbol``: a stock the portal does not list;
- ``duplicate``: an offer (trader, seq) already admitted: nothing enters the sequence twice;
- ``funds``: a buy worth more than the cash the account has left;
- ``holdings``: a sell of more shares than the account has left;
- ``rate``: more than the account's token bucket allows (``rate_per_s``, ``burst``).

An admitted offer reserves what it commits (cash for a buy, shares for a sell). The portal
does not see executions, so a reservation is never released: an account can offer at most
what it holds, however its offers fare. Pure: time comes in as ``now`` (ns).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmptwin.apps.unified_orders.offers import BUY, Offer

REASONS = ("malformed", "credentials", "trader", "symbol", "duplicate", "funds", "holdings", "rate")
NS = 1_000_000_000


def account_token(secret: str, account: str) -> str:
    """The credential of ``account`` at a portal holding ``secret``."""
    return hmac.new(secret.encode(), account.encode(), hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class Account:
    """An account at a portal: who may use it and what it holds (cash x 10,000, shares per symbol)."""

    traders: frozenset[str]
    funds: int
    holdings: Mapping[str, int]


@dataclass(frozen=True)
class AdmissionConfig:
    secret: str
    accounts: Mapping[str, Account]
    symbols: frozenset[str]
    rate_per_s: float          # sustained offers per second per account; 0: no limit
    burst: int                 # offers an idle account may send at once


@dataclass
class _Balance:
    funds: int
    holdings: dict[str, int]
    bucket: float                  # offers the rate limit allows now
    refilled_at: int | None = None  # when ``bucket`` was last brought up to date


@dataclass
class Admission:
    """The admission state of one portal: balances, rate buckets, what it admitted."""

    config: AdmissionConfig
    admitted: set[tuple[str, int]] = field(default_factory=set)
    rejected: dict[str, int] = field(default_factory=dict)
    _balances: dict[str, _Balance] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, acc in self.config.accounts.items():
            self._balances[name] = _Balance(acc.funds, dict(acc.holdings), float(self.config.burst))

    def check(self, offer: Offer, now: int) -> str | None:
        """None if ``offer`` is admitted (and its commitment reserved), else the reason it is not."""
        reason = self._refusal(offer, now)
        if reason is None:
            self._reserve(offer)
        else:
            self.count_rejection(reason)
        return reason

    def count_rejection(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def balance(self, account: str) -> tuple[int, dict[str, int]]:
        """(cash left, shares left) of an account."""
        b = self._balances[account]
        return b.funds, dict(b.holdings)

    # ------------------------------------------------------------------ internals

    def _refusal(self, offer: Offer, now: int) -> str | None:
        cfg = self.config
        acc = cfg.accounts.get(offer.account)
        # as bytes: compare_digest raises TypeError on a str that is not ASCII (a forged token)
        expected = account_token(cfg.secret, offer.account).encode()
        if acc is None or not hmac.compare_digest(offer.token.encode(), expected):
            return "credentials"
        if offer.trader not in acc.traders:
            return "trader"
        if offer.symbol not in cfg.symbols:
            return "symbol"
        if offer.key in self.admitted:
            return "duplicate"
        bal = self._balances[offer.account]
        if offer.side == BUY and offer.value > bal.funds:
            return "funds"
        if offer.side != BUY and offer.qty > bal.holdings.get(offer.symbol, 0):
            return "holdings"
        if not self._take_rate_token(bal, now):
            return "rate"
        return None

    def _take_rate_token(self, bal: _Balance, now: int) -> bool:
        """Token bucket: ``rate_per_s`` tokens a second up to ``burst``; an offer takes one.
        A refused offer does not take one (else a flood would starve the account for good)."""
        rate = self.config.rate_per_s
        if rate <= 0:
            return True
        if bal.refilled_at is not None and now > bal.refilled_at:
            bal.bucket = min(float(self.config.burst), bal.bucket + (now - bal.refilled_at) * rate / NS)
        bal.refilled_at = now if bal.refilled_at is None else max(now, bal.refilled_at)
        if bal.bucket >= 1.0:
            bal.bucket -= 1.0
            return True
        return False

    def _reserve(self, offer: Offer) -> None:
        bal = self._balances[offer.account]
        if offer.side == BUY:
            bal.funds -= offer.value
        else:
            bal.holdings[offer.symbol] -= offer.qty
        self.admitted.add(offer.key)
