"""Silence is an alarm: a customer watches each of its sessions for the R_T feed.

An R_T sends a MoldUDP64 heartbeat whenever it has sent nothing for one heartbeat interval
(``remulticast``), so a customer that hears neither data nor a heartbeat from any R_T of its
regions on a session for k intervals has lost its feed: its region is cut, its access link is
down, or every R_T of its regions is gone. Without this, such a customer hears nothing and
knows of no gap (the heartbeats that would reveal one are lost too), so it raises nothing.

``FeedWatch`` keeps, per watched stripe, when the feed was last heard, and says when one goes
stale (once per episode: the feed heard again ends it) and when a stale stripe should be
polled: the customer then asks a repair server (its R_x) for what follows the next sequence
number it expects, every ``retry_ns`` while the answers bring new messages, else every
``stale_ns``. Pure: time is passed in.

A stripe's silence counts from ``watch_from`` (local ns): no R_T heartbeats a session before
its first release, so the factory sets it past the time the first message of the stripe is
expected to be released (``factories.rmp.feed_watch_config``); a stripe nothing is published
on is not watched. A recovering customer counts from the first time it is called, at the
earliest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

STALE_FEED = "stale_feed"   # ALARM detail.reason


@dataclass(frozen=True)
class FeedWatchConfig:
    stale_ns: int                          # k heartbeat intervals of silence make a feed stale
    retry_ns: int                          # tau_r: between polls while they bring new messages
    watch_from: Mapping[int, int]          # stripe -> local ns from which silence counts
    feeds: Mapping[int, tuple[str, ...]]   # stripe -> the R_T remulticasting it into our regions


class FeedWatch:
    def __init__(self, config: FeedWatchConfig, *, recovering: bool = False) -> None:
        self.stale_ns = config.stale_ns
        self.retry_ns = config.retry_ns
        self.feeds = {k: tuple(v) for k, v in config.feeds.items()}
        self.sources = frozenset(n for names in self.feeds.values() for n in names)
        self._since = dict(config.watch_from)   # stripe -> when silence started counting
        self._recovering = recovering
        self.stale: dict[int, int] = {}         # stripe -> feed last heard (or watch start): an episode
        self._poll_at: dict[int, int] = {}      # stale stripe -> next poll
        self._polled: dict[int, int | None] = {}   # stale stripe -> next seq expected at the last poll
        self.episodes = 0
        self.check_at: int | None = min((t + self.stale_ns for t in self._since.values()), default=None)

    def heard(self, stripe: int, now: int) -> None:
        """A datagram (data or heartbeat) of ``stripe`` from one of its R_T."""
        if stripe in self._since:
            self._since[stripe] = now
            if self.stale:
                self.stale.pop(stripe, None)
                self._poll_at.pop(stripe, None)
                self._polled.pop(stripe, None)

    def due(self, now: int, expected: Mapping[int, int | None]) -> tuple[list[tuple[int, int]], list[int]]:
        """At ``now`` (>= ``check_at``): (stripes gone stale now with the time their feed was last
        heard, stripes to poll now). ``expected``: each stripe's next sequence number expected."""
        if self._recovering:
            self._recovering = False
            self._since = {k: max(t, now) for k, t in self._since.items()}
        fresh, poll = [], []
        nxt = None
        for stripe, since in self._since.items():
            at = since + self.stale_ns
            if now >= at:
                if stripe not in self.stale:
                    self.stale[stripe] = since
                    self.episodes += 1
                    fresh.append((stripe, since))
                at = self._poll_at.get(stripe, now)
                if now >= at:
                    progress = self._polled.get(stripe, -1) != expected.get(stripe)
                    self._polled[stripe] = expected.get(stripe)
                    poll.append(stripe)
                    at = self._poll_at[stripe] = now + (self.retry_ns if progress else self.stale_ns)
            nxt = at if nxt is None else min(nxt, at)
        self.check_at = nxt
        return fresh, poll
