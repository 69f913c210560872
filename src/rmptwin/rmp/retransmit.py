"""Retransmit servers R_x (seed 4.1, 7.1): guaranteed delivery inside a region.

An R_x joins its regions' remulticast groups for every stripe, caches the MoldUDP64
messages by (stripe, sequence number) and answers customers' MoldUDP64 re-requests by
unicast. It fills its own gaps the same way a customer would, by re-requesting from an
R_T that remulticasts the stripe into one of its regions (topology order; the next one on
each retry, so a crashed R_T does not stall repairs).

With keys (``RetransmitConfig.keys``, seed 7.1) it opens what it hears under its regions'
keys (ALARM ``mac_failed`` / ``conflicting_payload`` for forgeries, which it never caches)
and repairs by MULTICAST to the requester's region (``requester_region``) sealed under that
region's retransmit key, so only guaranteed-grade customers read it, and a region's many
losers of one message get one repair: a message repaired into a region within the last
``retry_ns / 2`` is not sent again (``coalesced``); a customer whose copy of that repair was
lost too asks again after tau_r and is served then. Unknown requesters get nothing (``refused``).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import region_group
from rmptwin.core.sansio import Group, Unicast
from rmptwin.core.striping import session_name, session_stripe
from rmptwin.rmp.moldudp64 import (
    DEFAULT_MAX_PACKET,
    MoldDecodeError,
    decode_packet,
    decode_request,
    is_request,
    pack_messages,
)
from rmptwin.rmp.remulticast import DEFAULT_HISTORY, MAX_SERVE, MessageHistory, runs
from rmptwin.rmp.repair import MAX_REQUEST, GapRepairer, RepairConfig, in_turn
from rmptwin.rmp.seal import KeySet, Reason, Sealer, SealError, alarm


@dataclass(frozen=True)
class RetransmitConfig:
    """A retransmit server's host spec and surroundings as plain values (built by ``factories.rmp``)."""

    repair: RepairConfig                      # its stripes: every stripe of the workload
    upstream: Mapping[int, tuple[str, ...]]   # per stripe: R_T into our regions, topology order
    history: int = DEFAULT_HISTORY            # messages cached per stripe
    keys: KeySet | None = None                # security on: its regions' remulticast and retransmit keys
    requester_region: Mapping[str, str] = field(default_factory=dict)   # requester -> region to repair into


class RetransmitCore(GapRepairer[None]):   # the caches hold the data; the trackers only count
    def __init__(self, config: RetransmitConfig, rng: random.Random, *, recovering: bool = False) -> None:
        super().__init__(config.repair, rng, recovering=recovering)
        self.caches = {k: MessageHistory(config.history) for k in self.stripes}
        self.upstream = {k: list(config.upstream[k]) for k in self.stripes}
        self.malformed = 0
        self.requests_served = 0
        self.messages_served = 0
        self.given_up = 0
        self.duplicates = 0
        self.sealer = Sealer(config.keys) if config.keys is not None else None
        self.requester_region = dict(config.requester_region)
        self.rejected = 0        # forged messages dropped (each also an ALARM event)
        self.unreadable = 0
        self.refused = 0         # secure re-requests from hosts of no known region
        self.coalesced = 0       # messages not repaired again within the window
        self._repaired_at: dict[tuple[int, str, int], int] = {}   # (stripe, region, seq) -> when multicast

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
        if track is None or stripe is None or pkt.end_of_session:
            self.malformed += track is None
            return
        if pkt.is_heartbeat:
            if self.sealer is not None and src not in self.upstream[stripe]:
                self._reject(Reason.UNAUTHORIZED, src, stripe, pkt.seq)   # heartbeats are not sealed
                return
            gaps, jumped = track.heartbeat(pkt.seq, now)
        else:
            gaps, jumped = [], []
            cache = self.caches[stripe]
            for i, payload in enumerate(pkt.messages):
                seq = pkt.seq + i
                readable = self._readable(stripe, seq, payload, src)
                if readable is None:
                    continue
                cache.put(seq, readable)
                new, g, j = track.add(seq, None, now)
                self.duplicates += not new
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
        if self.sealer is not None:
            self._serve_sealed(self.sealer, stripe, req.seq, req.count, src, now)
            return
        packets = self.caches[stripe].answer(req.session, req.seq, req.count, DEFAULT_MAX_PACKET)
        served = sum(len(p.messages) for p in packets)
        self.requests_served += 1
        self.messages_served += served
        for p in packets:
            self._out.append((p.encode(), Unicast(src)))
        self._events.append(Event(Kind.RETX_SENT, gseq=req.seq, detail={
            "mold": True, "stripe": stripe, "first": req.seq, "asked": req.count, "served": served, "to": src}))

    def _readable(self, stripe: int, seq: int, payload: bytes, src: str) -> bytes | None:
        """The plaintext to cache, or None for a message we cannot or must not keep."""
        if self.sealer is not None:
            try:
                payload = self.sealer.open_regional(stripe, seq, payload)[0]
            except SealError as e:
                if e.reason == SealError.NOT_ENTITLED:
                    self.unreadable += 1
                else:
                    self._reject(e.reason, src, stripe, seq)
                return None
        held = self.caches[stripe].get(seq)
        if held is not None and held != payload:
            self._reject(Reason.CONFLICTING_PAYLOAD, src, stripe, seq)
            return None
        return payload

    def _reject(self, reason: str, src: str, stripe: int, seq: int) -> None:
        self.rejected += 1
        self._events.append(alarm(reason, src, src, stripe=stripe, mold_seq=seq))

    def _serve_sealed(self, sealer: Sealer, stripe: int, first: int, count: int, src: str, now: int) -> None:
        """One multicast repair into the requester's region under its retransmit key,
        leaving out what went there within the coalescing window."""
        region = self.requester_region.get(src)
        if region is None:
            self.refused += 1
            return
        window = self.retry_ns // 2
        cache = self.caches[stripe]
        msgs: list[tuple[int, bytes]] = []
        for seq in range(first, first + min(count, MAX_SERVE)):
            p = cache.get(seq)
            if p is None:
                continue
            key = (stripe, region, seq)
            if now - self._repaired_at.get(key, now - window) < window:
                self.coalesced += 1
                continue
            self._repaired_at[key] = now
            msgs.append((seq, sealer.seal_repair(region, stripe, seq, p)))
        self._forget_old_repairs(now - window)
        group = Group(region_group(region, stripe))
        by_seq = dict(msgs)
        for a, n in runs([s for s, _ in msgs]):
            for packet in pack_messages(session_name(stripe), a, [by_seq[s] for s in range(a, a + n)],
                                        DEFAULT_MAX_PACKET):
                self._out.append((packet.encode(), group))
        self.requests_served += 1
        self.messages_served += len(msgs)
        self._events.append(Event(Kind.RETX_SENT, gseq=first, detail={
            "mold": True, "stripe": stripe, "first": first, "asked": count, "served": len(msgs), "to": src,
            "region": region, "multicast": True}))

    def _forget_old_repairs(self, before: int) -> None:
        if len(self._repaired_at) > 4 * MAX_SERVE:
            self._repaired_at = {k: t for k, t in self._repaired_at.items() if t > before}

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
