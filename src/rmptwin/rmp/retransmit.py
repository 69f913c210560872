"""Retransmit servers R_x (seed 4.1, 7.1): guaranteed delivery inside a region.

An R_x joins its regions' remulticast groups for every stripe, caches the MoldUDP64
messages by (stripe, sequence number) and answers customers' MoldUDP64 re-requests by
unicast. It fills its own gaps the same way a customer would, by re-requesting from an
R_T that remulticasts the stripe into one of its regions (topology order; the next one on
each retry, so a crashed R_T does not stall repairs).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass

from ..sansio import Unicast
from ..events import Event, Kind
from .moldudp64 import MoldDecodeError, decode_packet, decode_request, is_request
from .remulticast import DEFAULT_HISTORY, DEFAULT_MAX_PACKET, MessageHistory
from .repair import MAX_REQUEST, GapRepairer, RepairConfig, in_turn
from .striping import session_stripe


@dataclass(frozen=True)
class RetransmitConfig:
    """A retransmit server's host spec and surroundings as plain values (built by ``factories.rmp``)."""

    repair: RepairConfig                      # its stripes: every stripe of the workload
    upstream: Mapping[int, tuple[str, ...]]   # per stripe: R_T into our regions, topology order
    history: int = DEFAULT_HISTORY            # messages cached per stripe


class RetransmitCore(GapRepairer):
    def __init__(self, config: RetransmitConfig, rng: random.Random, *, recovering: bool = False) -> None:
        super().__init__(config.repair, rng, recovering=recovering)
        self.caches = {k: MessageHistory(config.history) for k in self.stripes}
        self.upstream = {k: list(config.upstream[k]) for k in self.stripes}
        self.malformed = 0
        self.requests_served = 0
        self.messages_served = 0
        self.given_up = 0

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if is_request(data):
            self._serve(data, src, now)
            return
        try:
            pkt = decode_packet(data)
        except MoldDecodeError:
            self.malformed += 1
            return
        stripe = session_stripe(pkt.session)
        track = self.tracks.get(stripe) if stripe is not None else None
        if track is None or pkt.end_of_session:
            self.malformed += track is None
            return
        if pkt.is_heartbeat:
            gaps, jumped = track.heartbeat(pkt.seq, now)
        else:
            gaps, jumped = [], []
            cache = self.caches[stripe]
            for i, payload in enumerate(pkt.messages):
                seq = pkt.seq + i
                cache.put(seq, payload)
                _, g, j = track.add(seq, None, now)
                gaps += g
                jumped += j
        self.given_up += self._note_gaps(stripe, gaps, jumped)
        track.deliverable()  # the cache holds the data; the tracker only keeps count

    def _serve(self, data: bytes, src: str, now: int) -> None:
        try:
            req = decode_request(data)
        except MoldDecodeError:
            self.malformed += 1
            return
        stripe = session_stripe(req.session)
        if stripe not in self.caches:
            self.malformed += 1
            return
        track = self.tracks[stripe]
        if track.top is not None and req.seq + req.count <= track.top + MAX_REQUEST:
            # The customer saw these numbers exist; if we lack them too, start fetching them.
            self._note_gaps(stripe, track.heartbeat(req.seq + req.count, now)[0], [])
        packets = self.caches[stripe].answer(req.session, req.seq, req.count, DEFAULT_MAX_PACKET)
        served = sum(len(p.messages) for p in packets)
        self.requests_served += 1
        self.messages_served += served
        for p in packets:
            self._out.append((p.encode(), Unicast(src)))
        self._events.append(Event(Kind.RETX_SENT, gseq=req.seq, detail={
            "mold": True, "stripe": stripe, "first": req.seq, "asked": req.count, "served": served, "to": src}))

    def handle_timer(self, now: int) -> None:
        for stripe, track in self.tracks.items():
            due = track.due(now)
            if not due:
                continue
            # The next R_T in topology order on each retry, so a crashed R_T does not stall repairs.
            upstream = self.upstream[stripe]
            self.given_up += self._repair(
                stripe, track, due, now, max_tries=self.k_r, servers=upstream,
                server_for=functools.partial(in_turn, upstream),
                reason="retries_exhausted")
            track.deliverable()
