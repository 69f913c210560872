"""Failure reports to the reformation servers X_R (seed 4.3): positive acknowledgement,
and the next X_R in the list when one does not answer."""

from __future__ import annotations

from collections.abc import Callable

from rmptwin.core.sansio import Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase, TimerKey


class Reporter:
    def __init__(self, core: CoreBase, servers: list[str], timing: Timing,
                 on_give_up: Callable[[int, str, int], None] | None = None) -> None:
        self.core = core
        self.on_give_up = on_give_up      # (stripe, ring, now): no server answered at all
        self.servers = list(servers)
        self.tm = timing
        self._idx = 0
        self._pending: dict[tuple[int, str], tuple[wire.Report, int]] = {}  # -> (report, attempts)
        self._quiet_until: dict[tuple[int, str], int] = {}
        self.sent = 0

    def report(self, stripe: int, epoch: int, suspect: str, reason: int, token: int, now: int, ring: str = "") -> None:
        """Report ``suspect`` unless a report for this stripe/ring is in flight or was just answered."""
        key = (stripe, ring)
        if not self.servers or key in self._pending or now < self._quiet_until.get(key, -1):
            return
        rep = wire.Report(stripe, epoch, self.core.name, suspect, reason, token, ring)
        self._pending[key] = (rep, 0)
        self._send(key, now)

    def _send(self, key: tuple[int, str], now: int) -> None:
        rep, attempts = self._pending[key]
        if attempts and attempts % self.tm.k_r == 0:
            self._idx = (self._idx + 1) % len(self.servers)   # that X_R seems down: try the next
        if attempts >= self.tm.k_r * len(self.servers):
            del self._pending[key]
            self._quiet_until[key] = now + self.tm.k_r * self.tm.tau_r
            if self.on_give_up is not None:
                self.on_give_up(key[0], key[1], now)
            return
        self.core.send(rep, Unicast(self.servers[self._idx]))
        self.sent += 1
        self._pending[key] = (rep, attempts + 1)
        self.core.timers.set(("report", key), now + self.tm.tau_r)

    def on_timer(self, key: TimerKey, now: int) -> None:
        if key in self._pending:
            self._send(key, now)

    def on_ack(self, ack: wire.ReportAck, now: int) -> None:
        for key in [k for k in self._pending if k[0] == ack.stripe]:
            del self._pending[key]
            self.core.timers.cancel(("report", key))
            # a reformation is under way: give it time before complaining again
            self._quiet_until[key] = now + 2 * self.tm.k_r * self.tm.tau_r
