"""A standby EV: kept in sync with the live EVs, silent until promoted to take a crashed one's place.

A restarted EV (``venue.VenueCore(recovering=True)``) must first be started, then fetch the
HR's checkpoint and hardened requests and replay them before it is in sync; a standby does
that work ahead of time. It joins the same groups as the live EVs: it hears every request
body the gateways multicast and every HARDENED copy the HR multicasts (position, request:
the order the live EVs agreed on, as the seed's follower EV observes its leader's). It
executes each position as it learns it, so its books, processed set and trade chain are
the live EVs' (its VENUE_STATE events say so at each checkpoint). Until promoted it does
nothing an EV does for others: it proposes nothing to the sequencer, stores nothing and
sends no checkpoint to the HR, completes nothing to a gateway.

``promote(now)`` (a supervisor saw an EV die; the driver calls it) makes it a live EV. The
only positions it can miss are those ordered but not yet hardened (the HR's commit lag: a few
requests), so it asks the sequencer what stands from the first position it does not know,
with a read-only proposal (no keys: nothing written, no etcd fsync), adopts the answer and
goes on as any live EV: its sync time (SYNC_DONE, from ``promote``) is that one round trip
and the execution of the few positions it learns there; the answer's ``next`` is the target
(everything ordered when it was promoted and possibly a little after).

A standby that misses a HARDENED frame (the HR holds positions it does not know for
``retry_ns``) asks the HR for the hardened requests from its first unknown position
(HARDENED_REQ). A standby may itself start from nothing (``recovering=True``: the
checkpoint and hardened requests, as a restarted EV, then standing by): how a supervisor
replaces the standby it promoted.
"""

from __future__ import annotations

from collections.abc import Callable

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Unicast
from rmptwin.venue import wire
from rmptwin.venue.evstate import Key
from rmptwin.venue.execution_venue import VenueConfig, VenueCore
from rmptwin.venue.wire import Request


class StandbyVenueCore(VenueCore):
    """A VenueCore that follows the hardened order silently until ``promote``."""

    def __init__(self, config: VenueConfig, service: Callable[[], int], *, recovering: bool = False,
                 replay_service: Callable[[], int] | None = None) -> None:
        if config.history is None:
            raise ValueError("a standby EV follows the history recorder's HARDENED multicasts: it needs one")
        self.standby = True
        self.promoted_at: int | None = None
        self._gap_at: int | None = None   # when to ask the HR again for hardened positions not heard
        super().__init__(config, service, recovering=recovering, replay_service=replay_service)

    def promote(self, now: int) -> None:
        """Become a live EV now (a no-op if already live)."""
        if not self.standby:
            return
        self.standby = False
        self.promoted_at = now
        self._gap_at = None
        self._events.append(Event(Kind.CTRL_SENT, gseq=self.known_top, detail={"type": "PROMOTED"}))
        self._recovering = True   # SYNC_DONE reports when it has executed everything ordered now
        self._start_ns = now
        self._sync_target = None
        if self.phase != "live":
            return   # still recovering (a standby started from nothing): it goes live when that ends
        if self.sequencer is None:
            self._sync_target = self.known_top   # (no sequencer: the order is the HR's, all heard)
        else:
            n = self.known_top   # a read: what stands from here, and where the sequencer is
            self._proposal = (n, [], now + self._propose_wait)
            self._events.append(Event(Kind.CAS_INVOKE, gseq=n, detail={"keys": []}))
            self._out.append((wire.propose_frame(self.ev_id, n, []), Unicast(self.sequencer)))
        self._pump(now)

    # ------------------------------------------------------------------ silent while standing by
    def _propose(self, now: int) -> None:
        if not self.standby:
            super()._propose(now)

    def _send_complete(self, key: Key, pos: int, ntrades: int) -> None:
        if not self.standby:
            super()._send_complete(key, pos, ntrades)

    def _store_checkpoint(self, pos: int) -> None:
        if not self.standby:
            super()._store_checkpoint(pos)

    # ------------------------------------------------------------------ a missed HARDENED
    def _hardened(self, upto: int, entries: list[tuple[int, Request]], now: int) -> None:
        super()._hardened(upto, entries, now)
        if not self.standby or self.phase != "live" or self.hr_top < self.known_top:
            self._gap_at = None
        elif self._gap_at is None:
            self._gap_at = now + self.retry_ns   # more frames of this commit may still be on their way

    def get_timer(self) -> int | None:
        t = super().get_timer()
        if self._gap_at is None:
            return t
        return self._gap_at if t is None else min(t, self._gap_at)

    def handle_timer(self, now: int) -> None:
        if self._gap_at is not None and now >= self._gap_at and self.history is not None:
            if self.standby and self.hr_top >= self.known_top:
                self._gap_at = now + self.retry_ns
                self._events.append(Event(Kind.CTRL_SENT, gseq=self.known_top, detail={"type": "HARDENED_REQ"}))
                self._out.append((wire.range_frame(wire.T_HARDENED_REQ, self.known_top, -1),
                                  Unicast(self.history)))
            else:
                self._gap_at = None
        super().handle_timer(now)
