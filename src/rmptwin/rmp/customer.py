"""Customers R (seed 4.1, 4.4, 7.1): the edge of the unified ticker.

A customer joins ``region/<r>/<k>`` for each of its regions r and stripes k, hears the
R_T remulticasts as MoldUDP64 (one session per stripe, Mold sequence = gseq), and hands
trade reports to its application in sequence order. Copies of the same sequence number
from overlapping regions are deduplicated. A missing sequence number is a gap; after
``dN`` (a copy may still come through the other region) a guaranteed-grade customer
re-requests it from its retransmit server R_x (retry every tau_r, give up after k_r tries
with CUST_SKIP reason ``retries_exhausted``), a best-effort customer skips it (CUST_SKIP
reason ``best_effort``): stale prices have no value to it (seed 7.1).

``SequenceTracker`` (in-order delivery with gap bookkeeping) is shared with the
retransmit server.
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from collections import deque
from collections.abc import Callable

from ..sansio import Dest, Unicast
from ..groups import region_group
from ..events import Event, Kind
from ..spec import LoadedExperiment
from ..trade_report import TickerDecodeError, TradeReport
from .moldudp64 import HEADER_SIZE, MoldDecodeError, MoldRequest, decode_packet, is_request
from .remulticast import runs, session_name, session_stripe

# The first Mold sequence number of every session: the first gseq the rings assign.
FIRST_MOLD_SEQ = 1  # the rings number messages from t = 1 (rmp.receiver)
# Most sequence numbers one gap may span before the tracker jumps ahead instead.
MAX_GAP = 1 << 16
# Most messages asked for in one re-request.
MAX_REQUEST = 512
# Requests a guaranteed customer sends its R_x before also asking the R_T of its regions.
RX_TRIES = 2


class SequenceTracker:
    """One MoldUDP64 session as received: in-order delivery, gaps, retry deadlines.

    ``next`` is the next sequence number to hand over; ``top`` is one past the highest
    sequence number known to exist (from data or heartbeats). A missing sequence number
    carries [tries, deadline]; the owner decides what a deadline means (request, skip).
    """

    def __init__(self, wait_ns: int, start: int | None) -> None:
        self.wait_ns = wait_ns
        self.next = start
        self.top = start
        self.buffer: dict[int, object] = {}
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

    def _extend(self, upto: int, now: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Learn that every sequence number below ``upto`` exists: (new gaps, jumped over)."""
        jumped: list[tuple[int, int]] = []
        if upto - self.top > MAX_GAP:
            # Too far behind to repair: start afresh near the head of the stream.
            new_next = upto - MAX_GAP
            lost = [s for s in range(self.next, min(new_next, self.top)) if s not in self.buffer]
            jumped = runs(lost) + ([(self.top, new_next - self.top)] if new_next > self.top else [])
            for s in list(self.buffer):
                if s < new_next:
                    del self.buffer[s]
            for s in list(self.missing):
                if s < new_next:
                    del self.missing[s]
            self.skipped = {s for s in self.skipped if s >= new_next}
            self.next = new_next
            self.top = max(self.top, new_next)
        gaps = self._notice(self.top, upto, now) if upto > self.top else []
        self.top = max(self.top, upto)
        return gaps, jumped

    def add(self, seq: int, item: object, now: int):
        """Record message ``seq``. Returns (new, gaps, jumped): ``new`` is False for a
        duplicate or a message already delivered or given up."""
        if self.next is None:
            self.next = self.top = seq
        if seq < self.next or seq in self.buffer or seq in self.skipped:
            return False, [], []
        gaps, jumped = self._extend(seq, now)
        if seq < self.next:
            return False, gaps, jumped
        self.top = max(self.top, seq + 1)
        self.missing.pop(seq, None)
        self.buffer[seq] = item
        return True, gaps, jumped

    def heartbeat(self, next_seq: int, now: int):
        """A heartbeat says every sequence number below ``next_seq`` was sent: (gaps, jumped)."""
        if self.next is None:
            self.next = self.top = next_seq
            return [], []
        return self._extend(next_seq, now)

    def deliverable(self) -> list[tuple[int, object]]:
        """Messages now in order, removed from the buffer; skipped numbers are passed over."""
        out = []
        while self.next is not None:
            if self.next in self.buffer:
                out.append((self.next, self.buffer.pop(self.next)))
            elif self.next in self.skipped:
                self.skipped.discard(self.next)
            else:
                break
            self.next += 1
        return out

    def due(self, now: int) -> list[int]:
        """Missing sequence numbers whose deadline has passed (their entries stay)."""
        out = []
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


class GapRepairer:
    """What customers and retransmit servers share: per-stripe ``tracks``, queued datagrams
    and events, and acting on the gaps whose deadline has passed (skip or re-request)."""

    def __init__(self, host, loaded: LoadedExperiment, rng: random.Random, stripes: list[int], *,
                 recovering: bool) -> None:
        proto = loaded.experiment.protocol
        self.name = host.name
        self.regions = list(host.regions)
        self.stripes = stripes
        self.rng = rng
        self.wait_ns = int(proto.dn_ms * 1e6)
        self.retry_ns = int(proto.tau_r * 1e6)
        self.k_r = proto.k_r
        self._groups = frozenset(region_group(r, k) for r in self.regions for k in self.stripes)
        start = None if recovering else FIRST_MOLD_SEQ
        self.tracks = {k: SequenceTracker(self.wait_ns, start) for k in self.stripes}
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.requests_sent = 0

    def groups(self) -> frozenset[str]:
        return self._groups

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def get_timer(self) -> int | None:
        deadlines = [d for d in (t.timer() for t in self.tracks.values()) if d is not None]
        return min(deadlines) if deadlines else None

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def _repair(self, stripe: int, track: SequenceTracker, due: list[int], now: int, *, max_tries: int,
                servers: list[str], server_for: Callable[[int], str], reason: str) -> int:
        """Give up the ``due`` numbers that had ``max_tries`` requests or have no server (CUST_SKIP
        ``reason``); re-request the others from ``server_for(attempt)`` and retry them after
        ``retry_ns``. Returns how many were given up."""
        ask: list[int] = []
        give_up: list[int] = []
        for s in due:
            (give_up if not servers or track.tries(s) >= max_tries else ask).append(s)
        for s in give_up:
            track.skip(s)
        for first, count in runs(sorted(give_up)):
            self._events.append(Event(Kind.CUST_SKIP, gseq=first, detail={
                "first": first, "count": count, "stripe": stripe, "reason": reason}))
        for s in ask:
            track.retry_at(s, now + self.retry_ns)
        for first, count in runs(sorted(ask)):
            self._request(stripe, first, count, server_for(track.tries(first)))
        return len(give_up)

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


def remulticasters(loaded: LoadedExperiment, regions: list[str], stripe: int) -> list[str]:
    """R_T hosts (primary/secondary) remulticasting ``stripe`` into any of ``regions``, in topology order."""
    want = set(regions)
    return [
        h.name for h in loaded.topology.hosts
        if h.role in ("primary", "secondary") and want & set(h.regions)
        and (h.stripes is None or stripe in h.stripes)
    ]


def customer_stripes(host, loaded: LoadedExperiment) -> list[int]:
    """The stripes a customer joins: ``host.stripes`` if given; else all, unless its access
    link's bandwidth cannot carry them (seed 4.4: a 56 Kbps modem selects one stripe),
    in which case as many as fit, from stripe 0, and at least one."""
    w = loaded.experiment.workload
    if host.stripes is not None:
        return sorted(set(host.stripes))
    total = w.stripes
    bw = host.link.bandwidth_mbps
    if bw is None:
        return list(range(total))
    n_sources = len(w.sources) if w.sources is not None else len(loaded.topology.hosts_with_role("source"))
    msgs_per_stripe = w.rate_per_source * n_sources / total
    # Each region delivers its own copy; 2-byte block header, ~1/8 of a 62-byte UDP/IP/Ethernet
    # + Mold header per message (packets batch messages), and 25 % headroom for bursts.
    bits = msgs_per_stripe * (w.message_bytes + 2 + 8) * 8 * len(host.regions) * 1.25
    fit = math.floor(bw * 1e6 / bits) if bits > 0 else total
    return list(range(max(1, min(total, fit))))


class CustomerCore(GapRepairer):
    """A customer R of one grade, in the regions and stripes of its host spec."""

    def __init__(self, host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> None:
        super().__init__(host, loaded, rng, customer_stripes(host, loaded), recovering=recovering)
        self.grade = host.grade
        # Where re-requests go: the configured R_x first; when it has not helped after
        # RX_TRIES attempts (it lost the message too and is still fetching it, or it is down),
        # the R_T of our regions in turn, then R_x again. Without an R_x: the R_T in turn.
        self.servers: dict[int, list[str]] = {}
        self.has_rx = host.retransmit is not None
        for k in self.stripes:
            rts = remulticasters(loaded, self.regions, k)
            self.servers[k] = ([host.retransmit] if self.has_rx else []) + rts
        hosts = {h.name: h for h in loaded.topology.hosts}
        self._region_of: dict[str, str] = {}
        for h in loaded.topology.hosts:
            common = [r for r in getattr(h, "regions", []) if r in self.regions]
            if common and h.role in ("primary", "secondary"):
                self._region_of[h.name] = common[0]
        self._repair_sources = {s for servers in self.servers.values() for s in servers
                                if hosts[s].role == "retransmit"}
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
            self._gaps(stripe, gaps, jumped)
        else:
            from_server = src in self.servers.get(stripe, ())
            region = self._region_of.get(src, "")
            for i, payload in enumerate(pkt.messages):
                seq = pkt.seq + i
                requested = seq in track.missing and track.tries(seq) > 0
                repair = from_server and (src in self._repair_sources or requested)
                new, gaps, jumped = track.add(seq, (payload, repair, "" if repair else region), now)
                self._gaps(stripe, gaps, jumped)
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

    def _gaps(self, stripe: int, gaps: list[tuple[int, int]], jumped: list[tuple[int, int]]) -> None:
        for first, count in gaps:
            self._events.append(Event(Kind.CUST_GAP, gseq=first, detail={
                "first": first, "count": count, "stripe": stripe, "session": session_name(stripe)}))
        for first, count in jumped:
            self.skipped += count
            self._events.append(Event(Kind.CUST_SKIP, gseq=first, detail={
                "first": first, "count": count, "stripe": stripe, "reason": "too_far_behind"}))

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
