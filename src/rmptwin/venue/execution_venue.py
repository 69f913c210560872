"""Execution venue (EV), primary-primary: every EV executes every request, in one total order.

Requests arrive from the gateways in this EV's own local order. The EV proposes its
oldest unordered requests for the first position it does not know; the sequencer's
answer is either "yours stand" or the entries that already stand there, which the EV
adopts, moving them ahead of its own (the seed's p/q example). Ordering runs up to
``lookahead`` positions ahead of execution, so the EV goes at its own speed and the
fastest EV sets the pace. A sequencer answer TOO_FAR (fell out of the window) is a soft
failure: the EV drops its state and re-synchronizes like a restarted one.

Execution: one request at a time, each taking a service time drawn from ``service``
(the modelled CPU cost of a live request, driven by a timer; a recovering EV re-executing a
request the HR already hardened draws ``replay_service`` instead, see below); trades go to the HR (STORE) unless the HR
already acknowledged that position (a follower observes the leader's HARDENED copies
and skips them); completions go to the request's gateway once the HR holds the result
(``durable``) or at once. Every ``checkpoint_every`` positions it logs its state hash
and sends a checkpoint to the HR.

Recovery (a restarted EV, the seed's section 4), its steps at once: ask the HR for the
latest checkpoint (its answer carries the hardened requests after it too) and the
sequencer where it stands (a read, ``SEQ_PROBE``), while listening to the live request
stream and HR acknowledgements; then join the proposals. SYNC_DONE reports the time from
start until it has executed everything the sequencer had ordered when it first asked.

Replay cost. The backlog a restarted EV re-executes is everything after the HR's latest
checkpoint: up to ``checkpoint_every`` requests. The seed's EV tops out at 9000 req/s because
of per-message context switching in its messaging layer (section 6.2), not matching; its
recovered requests come from the HR many to a frame, are not stored again and are matched
only. Charging each of them the live per-request cost made the simulated sync the backlog
times 60 us (15-31 ms at 1,000-2,000 req/s, by where the restart fell in the checkpoint
cycle; docs/venue-sync.md has the trace), which the seed's under-5-ms Figure 4 with its
1024-request checkpoints rules out. So hardened positions replayed while recovering cost
``replay_service`` (the matching alone).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, Unicast
from rmptwin.venue import wire
from rmptwin.venue.evstate import Checkpoint, Key, ProcessedSet, apply_request, chain_trades
from rmptwin.venue.orderbook import OrderBook, Trade
from rmptwin.venue.wire import Request

REPLAY_RUN = 64       # hardened positions a recovering EV re-executes under one timer
SEQ_PROBE = 1 << 62   # a read-only proposal far beyond any position: every sequencer answers it with its next


def _placeholder(key: Key) -> Request:
    """A no-op request standing for a duplicate, so the HR's positions stay contiguous."""
    return Request(key[0], key[1], 0, wire.Order(wire.CANCEL, 0, 0, "", -1, 0, 0))


@dataclass(frozen=True)
class VenueConfig:
    ev_id: int
    symbols: tuple[str, ...]
    gateways: tuple[str, ...]     # gw id -> host name
    sequencer: str | None         # None: order = arrival order (one gateway, no sequencer)
    history: str | None           # the HR host, or None: no durability, no recovery source
    durable: bool = True          # complete a request only once the HR holds its result
    checkpoint_every: int = 1000  # positions between state hashes and checkpoints
    lookahead: int = 64           # positions ordered ahead of execution
    batch: int = 32               # requests proposed at once
    retry_ns: int = 20_000_000    # resend an unanswered question after this long


class VenueCore:
    """One EV. ``service()`` draws the modelled CPU cost of executing one request (ns)."""

    def __init__(self, config: VenueConfig, service: Callable[[], int], *, recovering: bool = False,
                 replay_service: Callable[[], int] | None = None) -> None:
        self.config = config
        self.ev_id = config.ev_id
        self.symbols = list(config.symbols)
        self.gateways = list(config.gateways)
        self.sequencer = config.sequencer
        self.history = config.history
        self.service = service
        self.replay_service = replay_service or service   # the cost of re-executing a hardened request
        self.durable = config.durable and config.history is not None
        self.checkpoint_every = config.checkpoint_every
        self.lookahead = config.lookahead
        self.batch = config.batch
        self.retry_ns = config.retry_ns
        self._propose_wait = self.retry_ns   # doubles on each unanswered proposal: a slow sequencer is not flooded
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.malformed = self.duplicates = 0
        self._reset()
        self.phase = "live"
        self._start_ns: int | None = None
        if recovering:
            self._begin_recovery()

    def _reset(self) -> None:
        self.books = {s: OrderBook(s) for s in self.symbols}
        self.next_pos = 0                             # first position not yet executed
        self.known_top = 0                            # first position whose entry is unknown
        self.known: dict[int, Key] = {}               # decided, not yet executed
        self.key_pos: dict[Key, int] = {}
        self.bodies: dict[Key, Request] = {}          # received, not yet executed
        self.unordered: OrderedDict[Key, None] = OrderedDict()
        self.processed = ProcessedSet()
        self.done_info: dict[Key, tuple[int, int]] = {}   # executed key -> (position, trades), for replays
        self.trade_hash = bytes(16)     # chained: evstate.chain_trades
        self.trade_count = 0
        self.hr_top = -1                              # highest position the HR acknowledged
        self.seq_next = 0                             # the sequencer's next free position, as last heard
        self._proposal: tuple[int, list[Key], int] | None = None
        self._busy: tuple[int, int, int] | None = None   # (first position, done at, positions)
        self._store: list[tuple[int, Request, list[Trade]]] = []   # to send to the HR
        self._stored: list[tuple[int, Request, list[Trade]]] = []  # sent, not yet acknowledged
        self._store_retry_at: int | None = None
        self._await_hr: OrderedDict[int, tuple[Key, int]] = OrderedDict()
        self._body_wait: dict[Key, int] = {}          # key -> resend deadline
        self._ckpt_parts: dict[int, bytes] = {}
        self._early: dict[int, Key] = {}              # HR copies beyond known_top
        self._sync_target: int | None = None
        self._recovering = False
        self._recovery_retry: int | None = None

    # ------------------------------------------------------------------ recovery
    def _begin_recovery(self) -> None:
        self._recovering = True
        self._start_ns = None
        if self.sequencer is not None:
            # where the sequencer stands now: the sync target (not retried: going live asks again)
            self._out.append((wire.propose_frame(self.ev_id, SEQ_PROBE, []), Unicast(self.sequencer)))
        if self.history:
            self.phase = "checkpoint"
            self._out.append((wire.ckpt_req_frame(self.ev_id), Unicast(self.history)))
            self._recovery_retry = -1   # armed with the first ``now``
        else:
            self._go_live()

    def _go_live(self) -> None:
        self.phase = "live"
        self._recovery_retry = None
        if self._recovering:
            self.seq_next = max(self.seq_next, self.known_top + 1)   # ask the sequencer where it stands

    def _install_checkpoint(self, n: int, blob: bytes, now: int) -> None:
        if n >= 0:
            ckpt = Checkpoint.decode(blob)
            self.books.update(ckpt.books)
            self.processed = ckpt.processed
            self.trade_hash = ckpt.trade_hash
            self.trade_count = ckpt.trade_count
        self.next_pos = self.known_top = n + 1
        for pos in [p for p in self.known if p <= n]:
            self.key_pos.pop(self.known.pop(pos), None)
        for key in [k for k in self.bodies if k in self.processed]:
            del self.bodies[key]
            self.unordered.pop(key, None)
        self.phase = "hardened"   # the HR's hardened requests follow its checkpoint; asked for only on a retry
        self._recovery_retry = now + self.retry_ns
        self._advance_known()

    # ------------------------------------------------------------------ input
    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if self._start_ns is None and self._recovering:
            self._start_ns = now
        if self._recovery_retry == -1:
            self._recovery_retry = now + self.retry_ns
        try:
            ftype, f = wire.decode(data)
        except wire.VenueWireError:
            self.malformed += 1
            return
        if ftype == wire.T_REQUEST:
            self._request(f, now)
        elif ftype == wire.T_DECIDE:
            status, n, nxt, keys = f
            self._decide(status, n, nxt, keys, now)
        elif ftype == wire.T_HARDENED:
            upto, entries = f
            self._hardened(upto, entries, now)
        elif ftype == wire.T_CKPT_PART and self.phase == "checkpoint":
            n, part, parts, chunk = f
            self._ckpt_parts[part] = chunk
            if len(self._ckpt_parts) >= parts:
                blob = b"".join(self._ckpt_parts[i] for i in range(parts))
                self._ckpt_parts = {}
                self._install_checkpoint(n, blob, now)
        self._pump(now)

    def _request(self, req: Request, now: int) -> None:
        key = req.key
        if key in self.processed:
            self.duplicates += 1
            info = self.done_info.get(key)
            if info is not None and self.phase == "live" and (not self.durable or info[0] <= self.hr_top):
                self._send_complete(key, *info)   # a gateway replay: complete it again
            return
        if key in self.bodies:
            self.duplicates += 1
            return
        self.bodies[key] = req
        self._body_wait.pop(key, None)
        if key not in self.key_pos:
            self.unordered[key] = None

    def _learn(self, pos: int, key: Key) -> None:
        if pos != self.known_top:
            return
        self.known[pos] = key
        self.key_pos[key] = pos
        self.unordered.pop(key, None)
        self.known_top = pos + 1

    def _decide(self, status: int, n: int, nxt: int, keys: list[Key], now: int) -> None:
        self.seq_next = max(self.seq_next, nxt)
        if n == SEQ_PROBE:
            if self._recovering and self._sync_target is None:
                self._sync_target = nxt
            return
        prop = self._proposal
        if prop is None or prop[0] != n:
            return   # the answer to an abandoned retry
        self._proposal = None
        self._propose_wait = self.retry_ns
        self._events.append(Event(Kind.CAS_OK, gseq=n, detail={"status": status, "next": nxt,
                                                                "keys": [list(k) for k in keys]}))
        if status == wire.TOO_FAR:
            self._events.append(Event(Kind.SEQ_TOO_FAR, gseq=n, detail={"next": nxt}))
            self._reset()
            self._begin_recovery()
            return
        for i, k in enumerate(keys):
            self._learn(n + i, k)
        if status == wire.WON:
            for k in prop[1]:
                if k not in self.key_pos:   # refused as already ordered: will come back as a duplicate
                    self.unordered.pop(k, None)
        if self._recovering and self.phase == "live" and self._sync_target is None:
            self._sync_target = nxt

    def _hardened(self, upto: int, entries: list[tuple[int, Request]], now: int) -> None:
        self.hr_top = max(self.hr_top, upto)
        if self.phase == "checkpoint":
            return   # positions are placed only after the checkpoint; the HR's answer brings these again
        for n, req in entries:
            key = req.key
            if n < self.next_pos or key in self.processed:
                continue
            if key not in self.bodies:
                self.bodies[key] = req
                self._body_wait.pop(key, None)
            if n == self.known_top:
                self._learn(n, key)
            elif n > self.known_top:
                self._early[n] = key
        self._advance_known()
        if self.phase == "hardened" and upto < self.known_top:
            self._go_live()
            if self.sequencer is None and self._recovering:
                self._sync_target = upto + 1
        self._store = [e for e in self._store if e[0] > self.hr_top]
        if self._stored and self._stored[0][0] <= self.hr_top:
            self._stored = [e for e in self._stored if e[0] > self.hr_top]
        if not self._stored:
            self._store_retry_at = None
        while self._await_hr:
            pos, (key, ntr) = next(iter(self._await_hr.items()))
            if pos > self.hr_top:
                break
            del self._await_hr[pos]
            self._send_complete(key, pos, ntr)

    def _advance_known(self) -> None:
        early = self._early
        while self.known_top in early:
            self._learn(self.known_top, early.pop(self.known_top))
        for p in [p for p in early if p < self.known_top]:
            del early[p]

    # ------------------------------------------------------------------ ordering
    def _propose(self, now: int) -> None:
        if self.phase != "live" or self._proposal is not None:
            return
        room = self.lookahead - (self.known_top - self.next_pos)
        if room <= 0:
            return
        if self.sequencer is None:
            for key in list(self.unordered)[:room]:
                self._learn(self.known_top, key)
            return
        keys = list(self.unordered)[:min(room, self.batch)]
        if not keys and self.seq_next <= self.known_top:
            return   # nothing to propose and nothing to learn (a read only when others are ahead)
        self._proposal = (self.known_top, keys, now + self._propose_wait)
        self._events.append(Event(Kind.CAS_INVOKE, gseq=self.known_top, detail={"keys": [list(k) for k in keys]}))
        self._out.append((wire.propose_frame(self.ev_id, self.known_top, keys), Unicast(self.sequencer)))

    # ------------------------------------------------------------------ execution
    def _pump(self, now: int) -> None:
        for _ in range(100_000):
            self._propose(now)
            self._check_sync(now)
            if self._busy is not None or self.phase == "checkpoint":
                return
            key = self.known.get(self.next_pos)
            if key is None:
                return
            if key not in self.bodies and key not in self.processed:
                self._await_bodies(now)
                return
            if self._recovering and self.next_pos <= self.hr_top:
                n, cost = self._replay_run()   # hardened positions re-executed: matching only (module docstring)
            else:
                n, cost = 1, self.service()
            self._busy = (self.next_pos, now + cost, n)
            if cost > 0:
                return
            self._execute(now)   # no modelled CPU cost (a real run): execute at once

    def _await_bodies(self, now: int) -> None:
        """The next position's request body is missing: wait for it, and for every other body
        missing among the positions ordered ahead, so that one timer asks the gateways for all of
        them at once. (Asked one at a time, an EV back from a partition repaired one position per
        timer, 43 a second against 300 arriving, and never caught up: measured emulated.)"""
        for pos in range(self.next_pos, self.known_top):
            key = self.known.get(pos)
            if key is not None and key not in self.bodies and key not in self.processed \
                    and key not in self._body_wait:
                self._body_wait[key] = now + self.retry_ns

    def _replay_run(self) -> tuple[int, int]:
        """(positions, their cost) of the run of hardened positions ready to re-execute from
        ``next_pos``: one timer for the run, not one per request (a real event loop's timer
        costs more than matching one request)."""
        n, cost, pos = 0, 0, self.next_pos
        while n < REPLAY_RUN and pos <= self.hr_top:
            key = self.known.get(pos)
            if key is None or (key not in self.bodies and key not in self.processed):
                break
            cost += self.replay_service()
            n += 1
            pos += 1
        return n, cost

    def _execute(self, now: int) -> None:
        assert self._busy is not None   # the deadline of a batch in progress
        pos, _, n = self._busy
        self._busy = None
        for p in range(pos, pos + n):
            self._execute_one(p, now)
        self._check_sync(now)

    def _execute_one(self, pos: int, now: int) -> None:
        key = self.known.pop(pos)
        self.key_pos.pop(key, None)
        req = self.bodies.pop(key, None)
        trades: list[Trade] = []
        if key not in self.processed and req is not None:
            trades = apply_request(self.books, req)
            self.processed.add(key)
        self.next_pos = pos + 1
        self.done_info[key] = (pos, len(trades))
        if len(self.done_info) > 200_000:
            for k in list(self.done_info)[:100_000]:
                del self.done_info[k]
        if trades:
            assert req is not None   # trades come from applying it
            self.trade_hash = chain_trades(self.trade_hash, pos, trades)
            for t in trades:
                self._events.append(Event(Kind.TRADE, src=req.order.symbol, src_seq=t[0], gseq=pos, bytes=t[3],
                                          detail={"maker": t[1], "price": t[2], "side": t[4]}))
        self.trade_count += len(trades)
        self._events.append(Event(Kind.SEQ_POSITION, src=self.gateways[key[0]] if key[0] < len(self.gateways)
                                  else str(key[0]), src_seq=key[1], gseq=pos, detail={"trades": len(trades)}))
        if self.history is not None and pos > self.hr_top:
            self._store.append((pos, req if req is not None else _placeholder(key), trades))
        if self.durable and pos > self.hr_top:
            self._await_hr[pos] = (key, len(trades))
        else:
            self._send_complete(key, pos, len(trades))
        if (pos + 1) % self.checkpoint_every == 0:
            self._events.append(Event(Kind.VENUE_STATE, gseq=pos, detail={
                "state_hash": self.state_hash(), "trade_hash": self.trade_hash.hex(),
                "trades": self.trade_count}))
            self._store_checkpoint(pos)

    def _store_checkpoint(self, pos: int) -> None:
        if self.history is not None:
            blob = Checkpoint(self.books, self.processed, self.trade_hash, self.trade_count).encode(self.symbols)
            for fr in wire.ckpt_frames(wire.T_CKPT_STORE, pos, blob):
                self._out.append((fr, Unicast(self.history)))

    def _check_sync(self, now: int) -> None:
        if self._recovering and self.phase == "live" and self._sync_target is not None \
                and self.next_pos >= self._sync_target:
            start = self._start_ns if self._start_ns is not None else now
            self._events.append(Event(Kind.SYNC_DONE, gseq=self.next_pos - 1, detail={
                "sync_ns": now - start, "position": self.next_pos - 1}))
            self._recovering = False
            self._sync_target = None

    def _send_complete(self, key: Key, pos: int, ntrades: int) -> None:
        gw = self.gateways[key[0]] if key[0] < len(self.gateways) else None
        if gw is not None:
            self._out.append((wire.complete_frame(wire.T_COMPLETE, key[1], pos, ntrades), Unicast(gw)))

    def state_hash(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for s in self.symbols:
            h.update(self.books[s].state_hash().encode())
        return h.hexdigest()

    # ------------------------------------------------------------------ timers and output
    def get_timer(self) -> int | None:
        ts = []
        if self._busy is not None:
            ts.append(self._busy[1])
        if self._proposal is not None:
            ts.append(self._proposal[2])
        if self._body_wait:
            ts.append(min(self._body_wait.values()))
        if self._recovery_retry is not None and self._recovery_retry >= 0:
            ts.append(self._recovery_retry)
        if self._store_retry_at is not None:
            ts.append(self._store_retry_at)
        return min(ts) if ts else None

    def handle_timer(self, now: int) -> None:
        due = self.get_timer()
        if due is not None and now < due:
            now = due   # a real event loop may fire a timer a little early; never stall on that
        if self._store_retry_at is not None and now >= self._store_retry_at:
            self._store_retry_at = None
            self._events.append(Event(Kind.CTRL_SENT, gseq=self.hr_top + 1, detail={"type": "STORE_RETRY"}))
            # the HR has not acknowledged these yet: a STORE or its HARDENED was lost
            self._store = [e for e in self._stored if e[0] > self.hr_top] + self._store
        if self._busy is not None and now >= self._busy[1]:
            self._execute(now)
        if self._proposal is not None and now >= self._proposal[2] and self.sequencer is not None:
            n, keys, _ = self._proposal   # the answer was lost: ask again, the same question
            self._propose_wait = min(2 * self._propose_wait, 50 * self.retry_ns)
            self._proposal = (n, keys, now + self._propose_wait)
            self._events.append(Event(Kind.CTRL_SENT, gseq=n, detail={"type": "PROPOSE_RETRY"}))
            self._events.append(Event(Kind.CAS_INVOKE, gseq=n, detail={"keys": [list(k) for k in keys]}))
            self._out.append((wire.propose_frame(self.ev_id, n, keys), Unicast(self.sequencer)))
        late = [key for key, t in self._body_wait.items() if now >= t]
        for key in late:
            self._body_wait[key] = now + self.retry_ns
        for gw, first, last in wire.seq_ranges(k for k in late if k[0] < len(self.gateways)):
            self._events.append(Event(Kind.CTRL_SENT, src=self.gateways[gw], src_seq=first,
                                      detail={"type": "RESEND_REQ", "last": last}))
            self._out.append((wire.range_frame(wire.T_RESEND_REQ, first, last), Unicast(self.gateways[gw])))
        if self._recovery_retry is not None and 0 <= self._recovery_retry <= now:
            self._recovery_retry = now + self.retry_ns   # the HR's answer was lost: ask again
            if self.phase == "checkpoint" and self.history is not None:   # (recovery phases: an HR)
                self._ckpt_parts = {}
                self._out.append((wire.ckpt_req_frame(self.ev_id), Unicast(self.history)))
            elif self.phase == "hardened" and self.history is not None:
                self._out.append((wire.range_frame(wire.T_HARDENED_REQ, self.known_top, -1), Unicast(self.history)))
        self._pump(now)

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        if self._start_ns is None and self._recovering:
            # The seed's sync time runs "from when a new EV is started": a driver flushes a new
            # core at once, so this is its start (not its first datagram, one round trip later).
            self._start_ns = now
        if self._store and self.history is not None:   # (only kept with an HR)
            for i in range(0, len(self._store), 16):
                self._out.append((wire.store_frame(self.ev_id, self._store[i:i + 16]), Unicast(self.history)))
            sent = {e[0] for e in self._stored}
            self._stored.extend(e for e in self._store if e[0] not in sent)
            self._store = []
            if self._store_retry_at is None:
                self._store_retry_at = now + 5 * self.retry_ns
        out, self._out = self._out, []
        return out

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def groups(self) -> frozenset[str]:
        g = {wire.REQUEST_GROUP}
        if self.history is not None:
            g.add(wire.HARDENED_GROUP)
        return frozenset(g)

