"""Customers R (seed 4.1, 4.4, 7.1): the edge of the unified ticker.

A customer joins ``region/<r>/<k>`` for each of its regions r and stripes k, hears the
R_T remulticasts as MoldUDP64 (one session per stripe, Mold sequence = gseq), and hands
trade reports to its application in sequence order. Copies of the same sequence number
from overlapping regions are deduplicated. A missing sequence number is a gap; after
``dN`` (a copy may still come through the other region) a guaranteed-grade customer
re-requests it from its retransmit server R_x (retry every tau_r, give up after k_r tries
with CUST_SKIP reason ``retries_exhausted``), a best-effort customer skips it (CUST_SKIP
reason ``best_effort``): stale prices have no value to it (seed 7.1). The gap bookkeeping
and re-requests are ``repair``'s, shared with the retransmit server.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass

from ..events import Event, Kind
from ..trade_report import TickerDecodeError, TradeReport
from .moldudp64 import HEADER_SIZE, MoldDecodeError, decode_packet, is_request
from .repair import GapRepairer, RepairConfig, SequenceTracker, in_turn
from .striping import session_name, session_stripe

# Requests a guaranteed customer sends its R_x before also asking the R_T of its regions.
RX_TRIES = 2


@dataclass(frozen=True)
class CustomerConfig:
    """A customer's host spec and surroundings as plain values (built by ``factories.rmp``)."""

    repair: RepairConfig
    grade: str                                    # "guaranteed" or "best_effort"
    retransmit: str | None                        # its R_x (guaranteed grade), if any
    remulticasters: Mapping[int, tuple[str, ...]]  # per stripe: R_T into our regions, topology order
    region_of: Mapping[str, str]                  # R_T -> the first of our regions it remulticasts into


class CustomerCore(GapRepairer):
    """A customer R of one grade, in the regions and stripes of its host spec."""

    def __init__(self, config: CustomerConfig, rng: random.Random, *, recovering: bool = False) -> None:
        super().__init__(config.repair, rng, recovering=recovering)
        self.grade = config.grade
        # Where re-requests go: the configured R_x first; when it has not helped after
        # RX_TRIES attempts (it lost the message too and is still fetching it, or it is down),
        # the R_T of our regions in turn, then R_x again. Without an R_x: the R_T in turn.
        self.has_rx = config.retransmit is not None
        rx = [config.retransmit] if self.has_rx else []
        self.servers: dict[int, list[str]] = {k: rx + list(config.remulticasters[k]) for k in self.stripes}
        self._region_of = dict(config.region_of)
        # Copies from the R_x are repairs; copies from an R_T are repairs only when requested.
        self._repair_sources = frozenset(rx)
        # What the application saw: per stripe the delivered sequence numbers, latest trade per symbol.
        self.delivered: dict[int, list[int]] = {k: [] for k in self.stripes}
        self.last_trade: dict[str, TradeReport] = {}
        self.duplicates = 0
        self.malformed = 0
        self.foreign = 0
        self.repaired = 0
        self.skipped = 0

    # ------------------------------------------------------------------ core API

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if len(data) == HEADER_SIZE and is_request(data):
            self.foreign += 1  # customers serve nobody
            return
        try:
            pkt = decode_packet(data)
        except MoldDecodeError:
            self.malformed += 1
            return
        stripe = session_stripe(pkt.session)
        track = self.tracks.get(stripe) if stripe is not None else None
        if track is None:
            self.foreign += 1
            return
        if pkt.end_of_session:
            return
        if pkt.is_heartbeat:
            gaps, jumped = track.heartbeat(pkt.seq, now)
            self.skipped += self._note_gaps(stripe, gaps, jumped)
        else:
            from_server = src in self.servers.get(stripe, ())
            region = self._region_of.get(src, "")
            for i, payload in enumerate(pkt.messages):
                seq = pkt.seq + i
                requested = seq in track.missing and track.tries(seq) > 0
                repair = from_server and (src in self._repair_sources or requested)
                new, gaps, jumped = track.add(seq, (payload, repair, "" if repair else region), now)
                self.skipped += self._note_gaps(stripe, gaps, jumped)
                if not new:
                    self.duplicates += 1
        self._deliver(stripe, track)

    def handle_timer(self, now: int) -> None:
        best_effort = self.grade == "best_effort"
        for stripe, track in self.tracks.items():
            due = track.due(now)
            if not due:
                continue
            # A best-effort customer never re-requests: stale prices have no value to it.
            self.skipped += self._repair(
                stripe, track, due, now, max_tries=0 if best_effort else self.k_r,
                servers=self.servers[stripe], server_for=functools.partial(self._server, stripe),
                reason="best_effort" if best_effort else "retries_exhausted")
            self._deliver(stripe, track)

    # ------------------------------------------------------------------ internals

    def _server(self, stripe: int, attempt: int) -> str:
        """The server for the ``attempt``-th request (1-based) of a gap."""
        servers = self.servers[stripe]
        if not self.has_rx:
            return in_turn(servers, attempt)
        if attempt <= RX_TRIES or len(servers) == 1:
            return servers[0]
        return in_turn(servers[1:] + servers[:1], attempt - RX_TRIES)

    def _deliver(self, stripe: int, track: SequenceTracker) -> None:
        session = session_name(stripe)
        for seq, (payload, repair, region) in track.deliverable():
            symbol = ""
            try:
                trade = TradeReport.decode(payload)
                symbol = trade.symbol
                self.last_trade[symbol] = trade
            except TickerDecodeError:
                self.malformed += 1
            self.delivered[stripe].append(seq)
            self.repaired += bool(repair)
            self._events.append(Event(Kind.CUST_RECV, gseq=seq, bytes=len(payload), detail={
                "repair": bool(repair), "mold_seq": seq, "session": session, "stripe": stripe,
                "region": region, "symbol": symbol}))
