"""Customers R (seed 4.1, 4.4, 7.1): the edge of the unified ticker.

A customer joins ``region/<r>/<k>`` for each of its regions r and stripes k, hears the
R_T remulticasts as MoldUDP64 (one session per stripe, Mold sequence = gseq), and hands
trade reports to its application in sequence order. Copies of the same sequence number
from overlapping regions are deduplicated. A missing sequence number is a gap; after
``dN`` (a copy may still come through the other region) a guaranteed-grade customer
re-requests it from its retransmit server R_x, failing over to the R_T of its regions in
turn (retry every tau_r), and keeps asking while it is up: guaranteed delivery "recovers all
of the messages" (seed 4.1), so it never skips a position for want of an answer; only one
the stream has left ``MAX_GAP`` behind is given up (CUST_SKIP ``too_far_behind``, as the
tracker does on a jump). A best-effort customer skips a gap (CUST_SKIP reason
``best_effort``): stale prices have no value to it (seed 7.1). The gap bookkeeping and
re-requests are ``repair``'s, shared with the retransmit server.

Forgeries (seed 6): a second, different payload under a sequence number already held or
recently delivered raises an ALARM ``conflicting_payload`` (src: the sending host) and is
never delivered. With keys (``CustomerConfig.keys``) every message is opened under the
region's remulticast key, or a repair's retransmit key (guaranteed grade only); one that
fails raises an ALARM ``mac_failed`` and is dropped; one sealed under a key the customer
does not hold (a best-effort customer hearing a repair) is skipped, counted in ``unreadable``;
a heartbeat (which carries nothing to seal) counts only from an R_T of our regions or our R_x.
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmptwin.core.events import Event, Kind
from rmptwin.core.striping import session_name, session_stripe
from rmptwin.core.trade_report import TickerDecodeError, TradeReport
from rmptwin.rmp.feed_watch import STALE_FEED, FeedWatch, FeedWatchConfig
from rmptwin.rmp.moldudp64 import HEADER_SIZE, MoldDecodeError, MoldPacket, decode_packet, is_request
from rmptwin.rmp.repair import MAX_GAP, MAX_REQUEST, GapRepairer, RepairConfig, SequenceTracker, in_turn
from rmptwin.rmp.seal import PURPOSE_REPAIR, KeySet, Reason, Sealer, SealError, alarm

# Requests a guaranteed customer sends its R_x before also asking the R_T of its regions.
RX_TRIES = 2
# Delivered payloads remembered per stripe to spot a conflicting copy arriving later.
RECENT = 4096
# Most entries in each decode cache below before it starts afresh.
DECODE_CACHE = 512

# Decoded packets and trade reports by content. A multicast packet reaches every customer of
# a region as equal bytes (in the simulator, the same object), so each is decoded once, not
# once per customer. Pure: a decode depends only on the bytes, and what it returns is
# immutable (MoldPacket, TradeReport, None for a payload that is not a trade report).
_PACKETS: dict[bytes, MoldPacket] = {}
_TRADES: dict[bytes, TradeReport | None] = {}
_UNCACHED: Any = object()   # _TRADES.get default: None is a cached answer (not a trade report)
# Session name -> stripe (None: not ours): once per packet. -1 is never a stripe: the .get default
# for a session not seen yet.
_SESSION_STRIPES: dict[str, int | None] = {}
_NEW_SESSION = -1
# What a customer holds of a message until it is handed over: (payload, a repair, the region
# it came through ("" for a repair)).
Held = tuple[bytes, bool, str]
# What handing a whole packet over does (``_batch``): (sequence numbers, (symbol, trade) pairs,
# payloads that are no trade report, CUST_RECV events).
Batch = tuple[tuple[int, ...], tuple[tuple[str, TradeReport], ...], int, tuple[Event, ...]]
# CUST_RECV events by content: every customer of a region hands over the same message with
# the same detail, so they share one immutable Event (the driver stamps node and time apart):
# no Event and no detail dict per message per customer. The detail is never mutated.
_RECV_EVENTS: dict[tuple[int, int, bool, int, str, str], Event] = {}
# A packet handed over whole, in order (``_batch``), by (bytes, stripe, repair, region).
_BATCHES: dict[tuple[bytes, int, bool, str], Batch] = {}


def _packet(data: bytes) -> MoldPacket:
    """``decode_packet(data)``, from the cache when these bytes were decoded already."""
    if type(data) is not bytes:  # bytearray, memoryview: unhashable or mutable, never cached
        return decode_packet(data)
    pkt = _PACKETS.get(data)
    if pkt is None:
        pkt = decode_packet(data)  # raises before anything is cached
        if len(_PACKETS) >= DECODE_CACHE:
            _PACKETS.clear()
        _PACKETS[data] = pkt
    return pkt


def _recv_event(seq: int, payload: bytes, repair: bool, stripe: int, region: str, symbol: str,
                session: str) -> Event:
    """The shared CUST_RECV event of message ``seq`` (see ``_RECV_EVENTS``)."""
    key = (seq, len(payload), repair, stripe, region, symbol)   # the session is the stripe's
    ev = _RECV_EVENTS.get(key)
    if ev is None:
        if len(_RECV_EVENTS) >= DECODE_CACHE * 8:
            _RECV_EVENTS.clear()
        ev = _RECV_EVENTS[key] = Event(Kind.CUST_RECV, "", -1, seq, len(payload), {
            "repair": repair, "mold_seq": seq, "session": session, "stripe": stripe,
            "region": region, "symbol": symbol})
    return ev


def _batch(data: bytes, pkt: MoldPacket, stripe: int, repair: bool, region: str, session: str) -> Batch:
    """What handing a whole packet over in order does, the same for every customer that
    does it: (sequence numbers, (symbol, trade) pairs, payloads that are no trade report,
    CUST_RECV events). Cached by content like the decodes above."""
    key = (data, stripe, repair, region)
    batch = _BATCHES.get(key) if type(data) is bytes else None
    if batch is not None:
        return batch
    seqs = tuple(range(pkt.seq, pkt.seq + len(pkt.messages)))
    trades: list[tuple[str, TradeReport]] = []
    events: list[Event] = []
    malformed = 0
    for seq, payload in zip(seqs, pkt.messages):
        trade = _trade(payload)
        symbol = ""
        if trade is not None:
            symbol = trade.symbol
            trades.append((symbol, trade))
        else:
            malformed += 1
        events.append(_recv_event(seq, payload, repair, stripe, region, symbol, session))
    batch = (seqs, tuple(trades), malformed, tuple(events))
    if type(data) is bytes:
        if len(_BATCHES) >= DECODE_CACHE:
            _BATCHES.clear()
        _BATCHES[key] = batch
    return batch


def _trade(payload: bytes) -> TradeReport | None:
    """The trade report in ``payload``, or None when it is not one."""
    try:
        return _TRADES[payload]
    except KeyError:
        pass
    except TypeError:  # an unhashable buffer
        payload = bytes(payload)
    try:
        trade = TradeReport.decode(payload)
    except TickerDecodeError:
        trade = None
    if len(_TRADES) >= DECODE_CACHE:
        _TRADES.clear()
    _TRADES[payload] = trade
    return trade


@dataclass(frozen=True)
class CustomerConfig:
    """A customer's host spec and surroundings as plain values (built by ``factories.rmp``)."""

    repair: RepairConfig
    grade: str                                    # "guaranteed" or "best_effort"
    retransmit: str | None                        # its R_x (guaranteed grade), if any
    remulticasters: Mapping[int, tuple[str, ...]]  # per stripe: R_T into our regions, topology order
    region_of: Mapping[str, str]                  # R_T -> the first of our regions it remulticasts into
    keys: KeySet | None = None                    # security on: our regions' keys (seal.KeySet)
    feed_watch: FeedWatchConfig | None = None     # stale_feed alarms (``feed_watch``); None: off


class CustomerCore(GapRepairer[Held]):
    """A customer R of one grade, in the regions and stripes of its host spec."""

    def __init__(self, config: CustomerConfig, rng: random.Random, *, recovering: bool = False) -> None:
        super().__init__(config.repair, rng, recovering=recovering)
        self.grade = config.grade
        # Where re-requests go: the configured R_x first; when it has not helped after
        # RX_TRIES attempts (it lost the message too and is still fetching it, or it is down),
        # the R_T of our regions in turn, then R_x again. Without an R_x: the R_T in turn.
        self.has_rx = config.retransmit is not None
        rx = [config.retransmit] if config.retransmit is not None else []
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
        self.sealer = Sealer(config.keys) if config.keys is not None else None
        self.rejected = 0       # dropped as forged (each also an ALARM event)
        self.unreadable = 0     # sealed under a key we do not hold (not an alarm)
        self._recent: dict[int, dict[int, bytes]] = {k: {} for k in self.stripes}
        # The delivered sequence numbers in ``_recent``, oldest first: evicting the oldest from a
        # deque is O(1), where deleting a dict's first key scans the slots freed before it.
        self._recent_order: dict[int, deque[int]] = {k: deque() for k in self.stripes}
        self._sessions = {k: session_name(k) for k in self.stripes}
        # A subclass with an application of its own (its ``_deliver``) hears message by message.
        self._whole_packets = type(self)._deliver is CustomerCore._deliver
        # Silence is an alarm: a stripe no R_T of ours is heard on for k heartbeats (``feed_watch``).
        self._watch = FeedWatch(config.feed_watch, recovering=recovering) if config.feed_watch else None
        self._feed_sources = self._watch.sources if self._watch is not None else frozenset()
        self.stale_polls = 0

    # ------------------------------------------------------------------ core API

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:  # noqa: C901 - one branch per frame kind a customer hears, in the order the seed lists them
        if len(data) == HEADER_SIZE and is_request(data):
            self.foreign += 1  # customers serve nobody
            return
        pkt = _PACKETS.get(data) if type(data) is bytes else None   # _packet's cache, inlined
        if pkt is None:
            try:
                pkt = _packet(data)
            except MoldDecodeError:
                self.malformed += 1
                return
        session = pkt.session
        stripe = _SESSION_STRIPES.get(session, _NEW_SESSION)
        if stripe == _NEW_SESSION:
            if len(_SESSION_STRIPES) >= DECODE_CACHE:   # hostile senders can invent sessions
                _SESSION_STRIPES.clear()
            stripe = _SESSION_STRIPES[session] = session_stripe(session)
        track = self.tracks.get(stripe) if stripe is not None else None
        if track is None or stripe is None:
            self.foreign += 1
            return
        if src in self._feed_sources and self._watch is not None:   # (the sources are the watch's)
            self._watch.heard(stripe, now)
        if pkt.end_of_session:
            return
        if not pkt.messages:   # a heartbeat (not the end of the session: that returned above)
            if self.sealer is not None and src not in self.servers[stripe]:
                # a heartbeat carries no message to seal: with keys, only our R_T may send one
                # (a forged one far ahead would make us skip the ticker as "too far behind")
                self._reject(Reason.UNAUTHORIZED, src, stripe, pkt.seq)
                return
            gaps, jumped = track.heartbeat(pkt.seq, now)
            self.skipped += self._note_gaps(stripe, gaps, jumped)
        else:
            from_server = src in self.servers.get(stripe, ())
            region = self._region_of.get(src, "")
            # Without keys, a copy of a message already handed over needs only the conflict
            # check against the copy we remember (the tracker's own answer would be "duplicate").
            done = track.next if self.sealer is None and track.next is not None else -1
            recent = self._recent[stripe]
            if done >= 0 and self._in_order_or_held(data, pkt, stripe, track, recent, done,
                                                    from_server and src in self._repair_sources, region):
                return
            seq = pkt.seq - 1
            for payload in pkt.messages:
                seq += 1
                if seq < done:
                    held = recent.get(seq)
                    if held is not None and held != payload:
                        self._reject(Reason.CONFLICTING_PAYLOAD, src, stripe, seq)
                    else:
                        self.duplicates += 1
                    continue
                self._add(stripe, track, seq, payload, src, from_server, region, now)
        if track.buffer or track.skipped:   # else nothing can be delivered or passed over
            self._deliver(stripe, track)

    def get_timer(self) -> int | None:
        deadline = super().get_timer()
        watch = self._watch
        if watch is not None and watch.check_at is not None and (deadline is None or watch.check_at < deadline):
            return watch.check_at
        return deadline

    def handle_timer(self, now: int) -> None:
        watch = self._watch
        if watch is not None and watch.check_at is not None and now >= watch.check_at:
            self._check_feeds(now)
        best_effort = self.grade == "best_effort"
        for stripe, track in self.tracks.items():
            due = track.due(now)
            if not due:
                continue
            if not best_effort and track.top is not None:
                # The one bound on a guaranteed customer's asking: a position the stream has
                # left MAX_GAP behind (what the tracker jumps over at once) is too far behind to
                # repair; until then the messages after it wait in the buffer.
                behind = [s for s in due if track.top - s > MAX_GAP]
                if behind:
                    self.skipped += self._give_up(stripe, track, behind, "too_far_behind")
                    due = [s for s in due if track.top - s <= MAX_GAP]
            # A best-effort customer never re-requests: stale prices have no value to it. A
            # guaranteed one never gives a position up for want of an answer (seed 4.1:
            # guaranteed delivery "recovers all of the messages"; a receiver "periodically
            # requests the message until it receives the message"). Its repair source may be
            # down (a crashed R_x) or cut off (a partition) for longer than k_r tries: it
            # fails over round the R_T of its regions (``_server``) and keeps asking, so the
            # position is repaired once any server holding it is reachable again. Giving up
            # after k_r tries (two to a crashed R_x, one to an R_T still rejoining after a
            # partition) skipped a position every other R_T held.
            self.skipped += self._repair(
                stripe, track, due, now, max_tries=0 if best_effort else None,
                servers=self.servers[stripe], server_for=functools.partial(self._server, stripe),
                reason="best_effort")
            self._deliver(stripe, track)

    # ------------------------------------------------------------------ internals

    def _check_feeds(self, now: int) -> None:
        """Alarm once per stripe whose feed went silent (ALARM ``stale_feed`` naming our regions
        and their R_T); a guaranteed customer then polls its R_x (else the R_T in turn) with a
        MoldUDP64 request from the next sequence number it expects."""
        watch = self._watch
        assert watch is not None   # on_timer checks feeds only with a watch
        fresh, poll = watch.due(now, {k: t.next for k, t in self.tracks.items()})
        for stripe, since in fresh:
            rts = watch.feeds.get(stripe, ())
            self._events.append(alarm(
                STALE_FEED, rts[0] if rts else "", rts[0] if rts else "", stripe=stripe,
                session=self._sessions[stripe], regions=list(self.regions), rt=list(rts),
                silent_ms=(now - since) / 1e6, next=self.tracks[stripe].next))
        if self.grade != "guaranteed":
            return
        for stripe in poll:
            first = self.tracks[stripe].next
            servers = self.servers[stripe]
            if first is None or not servers:
                continue   # a recovering customer that never heard the stripe: no position to ask from
            self.stale_polls += 1
            server = servers[0] if self.has_rx else in_turn(servers, self.stale_polls)
            self._request(stripe, first, MAX_REQUEST, server)

    def _in_order_or_held(self, data: bytes, pkt: MoldPacket, stripe: int, track: SequenceTracker[Held],
                          recent: dict[int, bytes], done: int, repair: bool, region: str) -> bool:
        """The two common cases without keys, a packet at a time instead of a message at a
        time; True when handled. Every message already handed over and equal to the copy we
        remember: all duplicates. Or the packet starts exactly where the tracker stands, with
        nothing buffered, skipped or known beyond it: every message is new and goes straight
        to the application, as ``_add`` then ``_deliver`` would do one by one (no gap, no
        conflict: nothing at or above ``next`` was held or delivered; not requested, so a
        repair only when it comes from the R_x)."""
        messages, first = pkt.messages, pkt.seq
        n = len(messages)
        if first + n <= done:
            if tuple(map(recent.get, range(first, first + n))) != messages:
                return False   # a copy we forgot or a conflicting one: message by message
            self.duplicates += n
            return True
        if first != done or track.top != done or track.buffer or track.skipped or not n or not self._whole_packets:
            return False
        batch = _batch(data, pkt, stripe, repair, "" if repair else region, self._sessions[stripe])
        seqs, trades, malformed, events = batch
        track.next = track.top = first + n
        self.delivered[stripe] += seqs
        order = self._recent_order[stripe]
        order += seqs
        recent.update(zip(seqs, messages))
        while len(recent) > RECENT:
            del recent[order.popleft()]
        self.last_trade.update(trades)
        self.malformed += malformed
        if repair:
            self.repaired += n
        self._events += events
        return True

    def _add(self, stripe: int, track: SequenceTracker[Held], seq: int, payload: bytes, src: str,
             from_server: bool, region: str, now: int) -> None:
        """Hold message ``seq`` for delivery unless it is unreadable, forged or a duplicate."""
        if self.sealer is None:
            # _readable without keys, inlined: this runs once per message per customer
            waiting = track.buffer.get(seq)
            held = waiting[0] if waiting is not None else self._recent[stripe].get(seq)
            if held is not None and held != payload:
                self._reject(Reason.CONFLICTING_PAYLOAD, src, stripe, seq)
                return
            repair = False
        else:
            opened = self._readable(stripe, track, seq, payload, src)
            if opened is None:
                return
            payload, repair = opened
        if not repair and from_server:
            entry = track.missing.get(seq)   # requested: missing and asked for at least once
            repair = src in self._repair_sources or (entry is not None and entry[0] > 0)
        new, gaps, jumped = track.add(seq, (payload, repair, "" if repair else region), now)
        if gaps or jumped:
            self.skipped += self._note_gaps(stripe, gaps, jumped)
        if not new:
            self.duplicates += 1

    def _readable(self, stripe: int, track: SequenceTracker[Held], seq: int, payload: bytes,
                  src: str) -> tuple[bytes, bool] | None:
        """(plaintext, sealed as a repair) of message ``seq``, or None when it is dropped:
        unreadable to us, failing its MAC, or conflicting with the copy we hold (ALARM)."""
        repair = False
        if self.sealer is not None:
            try:
                payload, purpose, _ = self.sealer.open_regional(stripe, seq, payload)
            except SealError as e:
                if e.reason == SealError.NOT_ENTITLED:
                    self.unreadable += 1
                else:
                    self._reject(e.reason, src, stripe, seq)
                return None
            repair = purpose == PURPOSE_REPAIR
        waiting = track.buffer.get(seq)
        held = waiting[0] if waiting is not None else self._recent[stripe].get(seq)
        if held is not None and held != payload:
            self._reject(Reason.CONFLICTING_PAYLOAD, src, stripe, seq)
            return None
        return payload, repair

    def _reject(self, reason: str, src: str, stripe: int, seq: int) -> None:
        self.rejected += 1
        self._events.append(alarm(reason, src, src, stripe=stripe, mold_seq=seq))

    def _server(self, stripe: int, attempt: int) -> str:
        """The server for the ``attempt``-th request (1-based) of a gap."""
        servers = self.servers[stripe]
        if not self.has_rx:
            return in_turn(servers, attempt)
        if attempt <= RX_TRIES or len(servers) == 1:
            return servers[0]
        return in_turn(servers[1:] + servers[:1], attempt - RX_TRIES)

    def _deliver(self, stripe: int, track: SequenceTracker[Held]) -> None:
        ready = track.deliverable()
        if not ready:
            return
        session = self._sessions[stripe]
        delivered, recent, events = self.delivered[stripe], self._recent[stripe], self._events
        order, last_trade, trades, recv_events = self._recent_order[stripe], self.last_trade, _TRADES, _RECV_EVENTS
        for seq, (payload, repair, region) in ready:
            symbol = ""
            trade = trades.get(payload, _UNCACHED) if type(payload) is bytes else _UNCACHED
            if trade is _UNCACHED:
                trade = _trade(payload)
            if trade is not None:
                symbol = trade.symbol
                last_trade[symbol] = trade
            else:
                self.malformed += 1
            delivered.append(seq)
            if seq not in recent:
                order.append(seq)
            recent[seq] = payload
            if len(recent) > RECENT:
                del recent[order.popleft()]
            repair = bool(repair)
            if repair:
                self.repaired += 1
            key = (seq, len(payload), repair, stripe, region, symbol)   # the session is the stripe's
            ev = recv_events.get(key)
            if ev is None:
                ev = _recv_event(seq, payload, repair, stripe, region, symbol, session)
            events.append(ev)
