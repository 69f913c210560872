"""Repair: noticing gaps in a MoldUDP64 stream and re-requesting them (seed 4.1, 7.1).

What customers (``customer``) and retransmit servers R_x (``retransmit``) share:
``SequenceTracker`` (one session as received: in-order delivery, gaps, retry deadlines)
and ``GapRepairer`` (per-stripe trackers; when a missing number's deadline passes, give it
up or re-request it, in runs of at most ``MAX_REQUEST``, from the server ``in_turn``).

A missing sequence number first waits ``wait_ns`` (dN: a copy may still come through
another region), then is re-requested every ``retry_ns`` (tau_r); the owner decides whom to
ask and when to give up (an R_x after ``k_r`` tries; a guaranteed customer only once the
stream is ``MAX_GAP`` past it: ``customer``).

On a slow access line the wait between re-requests also counts the line: the answer of n
messages must cross it behind a packet of the live feed already queued there
(``GapRepairer.answer_ns``). The seed's tau_r >= 2 dN + X + P counts delay only; on a 56 Kbps
modem an answer of 8 messages of 64 bytes (590 bytes on the wire) alone takes 84 ms, more
than the whole tau_r of 30 ms, so a customer that waited only tau_r re-requested (each
request one more answer on its full line) and gave up before its first answer arrived.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import region_group
from rmptwin.core.linkmodel import WIRE_HEADER_BYTES
from rmptwin.core.sansio import Dest, QueuedEvents, Unicast
from rmptwin.core.striping import session_name
from rmptwin.rmp.moldudp64 import DEFAULT_MAX_PACKET, HEADER_SIZE, LENGTH_SIZE, MoldRequest
from rmptwin.rmp.remulticast import runs

# The first Mold sequence number of every session: the first gseq the rings assign.
FIRST_MOLD_SEQ = 1  # the rings number messages from t = 1 (rmp.receiver)
# Most sequence numbers one gap may span before the tracker jumps ahead instead.
MAX_GAP = 1 << 16
# Most messages asked for in one re-request.
MAX_REQUEST = 512
# No gaps, nothing jumped: what ``add`` returns for a message in order (shared, never mutated).
_NONE: tuple[()] = ()
_ABSENT: Any = object()   # dict.pop default: a held item may be anything (typed Any: compared, never used)
Runs = Sequence[tuple[int, int]]   # (first, count) runs of sequence numbers (remulticast.runs)


@dataclass(frozen=True)
class RepairConfig:
    """What a gap repairer knows of itself and the protocol (built by ``factories.rmp``)."""

    name: str
    regions: tuple[str, ...]       # the regional groups it listens to
    stripes: tuple[int, ...]       # the stripes it tracks
    wait_ns: int                   # dN: a missing number may still arrive by itself until then
    retry_ns: int                  # tau_r: between re-requests of one number
    k_r: int                       # re-requests before a number is given up
    line_bps: float | None = None  # its access line (bits/s); None: fast enough not to count
    message_bytes: int = 0         # a message's payload as served (sealed, with keys): sizes an answer


Item = TypeVar("Item")   # what a tracker holds per message until it is delivered


class SequenceTracker(Generic[Item]):
    """One MoldUDP64 session as received: in-order delivery, gaps, retry deadlines.

    ``next`` is the next sequence number to hand over; ``top`` is one past the highest
    sequence number known to exist (from data or heartbeats). A missing sequence number
    carries [tries, deadline]; the owner decides what a deadline means (request, skip).
    """

    def __init__(self, wait_ns: int, start: int | None) -> None:
        self.wait_ns = wait_ns
        self.next = start
        self.top = start
        self.buffer: dict[int, Item] = {}
        self.missing: dict[int, list[int]] = {}
        self.skipped: set[int] = set()
        self._heap: list[tuple[int, int]] = []

    def _notice(self, lo: int, hi: int, now: int) -> list[tuple[int, int]]:
        fresh = []
        for s in range(lo, hi):
            if s not in self.buffer and s not in self.missing:
                deadline = now + self.wait_ns
                self.missing[s] = [0, deadline]
                heapq.heappush(self._heap, (deadline, s))
                fresh.append(s)
        return runs(fresh)

    def _extend(self, upto: int, now: int) -> tuple[Runs, Runs]:
        """Learn that every sequence number below ``upto`` exists: (new gaps, jumped over)."""
        top, nxt = self.top, self.next
        assert top is not None and nxt is not None   # add and heartbeat start the session first
        if upto <= top:
            return _NONE, _NONE  # nothing new: the common case of a message in order
        jumped: Runs = []
        if upto - top > MAX_GAP:
            # Too far behind to repair: start afresh near the head of the stream.
            new_next = upto - MAX_GAP
            lost = [s for s in range(nxt, min(new_next, top)) if s not in self.buffer]
            jumped = runs(lost) + ([(top, new_next - top)] if new_next > top else [])
            for s in list(self.buffer):
                if s < new_next:
                    del self.buffer[s]
            for s in list(self.missing):
                if s < new_next:
                    del self.missing[s]
            self.skipped = {s for s in self.skipped if s >= new_next}
            self.next = new_next
            top = self.top = max(top, new_next)
        gaps = self._notice(top, upto, now) if upto > top else []
        self.top = max(top, upto)
        return gaps, jumped

    def add(self, seq: int, item: Item, now: int) -> tuple[bool, Runs, Runs]:
        """Record message ``seq``. Returns (new, gaps, jumped): ``new`` is False for a
        duplicate or a message already delivered or given up."""
        if self.next is None or self.top is None:
            self.next = self.top = seq
        gaps: Runs
        jumped: Runs
        if seq < self.next or seq in self.buffer or seq in self.skipped:
            return False, _NONE, _NONE
        if seq > self.top:
            gaps, jumped = self._extend(seq, now)
            if seq < self.next:
                return False, gaps, jumped
        else:
            gaps = jumped = _NONE   # _extend's answer when nothing is new: inlined, once per message
        if seq >= self.top:
            self.top = seq + 1
        if self.missing:
            self.missing.pop(seq, None)
        self.buffer[seq] = item
        return True, gaps, jumped

    def heartbeat(self, next_seq: int, now: int) -> tuple[Runs, Runs]:
        """A heartbeat says every sequence number below ``next_seq`` was sent: (gaps, jumped)."""
        if self.next is None:
            self.next = self.top = next_seq
            return [], []
        return self._extend(next_seq, now)

    def deliverable(self) -> list[tuple[int, Item]]:
        """Messages now in order, removed from the buffer; skipped numbers are passed over."""
        out: list[tuple[int, Item]] = []
        nxt, buffer, skipped = self.next, self.buffer, self.skipped
        if nxt is None:
            return out
        while True:
            item = buffer.pop(nxt, _ABSENT)
            if item is not _ABSENT:
                out.append((nxt, item))
            elif nxt in skipped:
                skipped.discard(nxt)
            else:
                break
            nxt += 1
        self.next = nxt
        return out

    def due(self, now: int) -> list[int]:
        """Missing sequence numbers whose deadline has passed (their entries stay)."""
        out: list[int] = []
        while self._heap and self._heap[0][0] <= now:
            deadline, s = heapq.heappop(self._heap)
            entry = self.missing.get(s)
            if entry is not None and entry[1] == deadline:
                out.append(s)
        return out

    def retry_at(self, seq: int, deadline: int) -> None:
        entry = self.missing[seq]
        entry[0] += 1
        entry[1] = deadline
        heapq.heappush(self._heap, (deadline, seq))

    def tries(self, seq: int) -> int:
        return self.missing[seq][0]

    def skip(self, seq: int) -> None:
        self.missing.pop(seq, None)
        if self.next is not None and seq >= self.next:
            self.skipped.add(seq)

    def timer(self) -> int | None:
        while self._heap:
            deadline, s = self._heap[0]
            entry = self.missing.get(s)
            if entry is not None and entry[1] == deadline:
                return deadline
            heapq.heappop(self._heap)
        return None


def in_turn(servers: list[str], attempt: int) -> str:
    """The server for the ``attempt``-th request (1-based) when requests go round ``servers``."""
    return servers[(attempt - 1) % len(servers)]


class GapRepairer(QueuedEvents, Generic[Item]):
    """What customers and retransmit servers share: per-stripe ``tracks``, queued datagrams
    and events, reporting new gaps, and acting on the gaps whose deadline has passed (skip or
    re-request)."""

    def __init__(self, config: RepairConfig, rng: random.Random, *, recovering: bool) -> None:
        self.name = config.name
        self.regions = list(config.regions)
        self.stripes = list(config.stripes)
        self.rng = rng
        self.wait_ns = config.wait_ns
        self.retry_ns = config.retry_ns
        self.k_r = config.k_r
        self.line_bps = config.line_bps
        self.message_bytes = config.message_bytes
        self._groups = frozenset(region_group(r, k) for r in self.regions for k in self.stripes)
        start = None if recovering else FIRST_MOLD_SEQ
        self.tracks: dict[int, SequenceTracker[Item]] = {k: SequenceTracker(self.wait_ns, start) for k in self.stripes}
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.requests_sent = 0

    def groups(self) -> frozenset[str]:
        return self._groups

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        out = self._out
        if not out:
            return _NONE  # the common case, after every datagram: no new list
        self._out = []
        return out

    def get_timer(self) -> int | None:
        # called after every datagram: a plain loop, no lists
        earliest = None
        for t in self.tracks.values():
            if t._heap:
                d = t.timer()
                if d is not None and (earliest is None or d < earliest):
                    earliest = d
        return earliest

    def _note_gaps(self, stripe: int, gaps: Runs, jumped: Runs) -> int:
        """Log new ``gaps`` (CUST_GAP), then the numbers ``jumped`` over as too far behind to
        repair (CUST_SKIP). Returns how many were jumped over."""
        if not gaps and not jumped:
            return 0  # the common case, once per message
        for first, count in gaps:
            self._events.append(Event(Kind.CUST_GAP, gseq=first, detail={
                "first": first, "count": count, "stripe": stripe, "session": session_name(stripe)}))
        self._log_skips(stripe, jumped, "too_far_behind")
        return sum(count for _, count in jumped)

    def _repair(self, stripe: int, track: SequenceTracker[Item], due: list[int], now: int, *,
                max_tries: int | None, servers: list[str], server_for: Callable[[int], str], reason: str) -> int:
        """Give up the ``due`` numbers that had ``max_tries`` requests (None: never for the count
        of tries) or have no server (CUST_SKIP ``reason``); re-request the others from
        ``server_for(attempt)`` and retry them after ``retry_ns``. Returns how many were given up."""
        ask: list[int] = []
        give_up: list[int] = []
        for s in due:
            (give_up if not servers or (max_tries is not None and track.tries(s) >= max_tries)
             else ask).append(s)
        self._give_up(stripe, track, give_up, reason)
        # every answer of this round shares our line: wait for all of them before asking again
        deadline = now + self.retry_ns + self.answer_ns(len(ask)) if ask else now
        for s in ask:
            track.retry_at(s, deadline)
        for first, count in runs(sorted(ask)):
            self._request(stripe, first, count, server_for(track.tries(first)))
        return len(give_up)

    def _give_up(self, stripe: int, track: SequenceTracker[Item], seqs: list[int], reason: str) -> int:
        """Pass over ``seqs`` for good (CUST_SKIP ``reason``, a run at a time): how many."""
        for s in seqs:
            track.skip(s)
        self._log_skips(stripe, runs(sorted(seqs)), reason)
        return len(seqs)

    def _log_skips(self, stripe: int, skipped: Runs, reason: str) -> None:
        """One CUST_SKIP per run of numbers passed over for good."""
        for first, count in skipped:
            self._events.append(Event(Kind.CUST_SKIP, gseq=first, detail={
                "first": first, "count": count, "stripe": stripe, "reason": reason}))

    def answer_ns(self, count: int) -> int:
        """How long an answer of ``count`` messages takes to cross our access line, behind one
        full packet of the live feed queued there before it: 0 without a line rate."""
        line = self.line_bps
        if not line or count <= 0:
            return 0
        per_message = self.message_bytes + LENGTH_SIZE
        per_packet = max(1, (DEFAULT_MAX_PACKET - HEADER_SIZE) // per_message)
        packets = -(-count // per_packet)
        answer = count * per_message + packets * (HEADER_SIZE + WIRE_HEADER_BYTES)
        queued = DEFAULT_MAX_PACKET + WIRE_HEADER_BYTES
        return round((answer + queued) * 8 / line * 1e9)

    def _request(self, stripe: int, first: int, count: int, server: str) -> None:
        session = session_name(stripe)
        while count > 0:
            n = min(count, MAX_REQUEST)
            self._out.append((MoldRequest(session, first, n).encode(), Unicast(server)))
            self.requests_sent += 1
            self._events.append(Event(Kind.NACK_SENT, gseq=first, detail={
                "mold": True, "stripe": stripe, "first": first, "count": n, "to": server}))
            first += n
            count -= n
