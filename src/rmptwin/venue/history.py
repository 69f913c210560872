"""History recorder (HR): store trade results durably, acknowledge by multicast.

Every EV sends STORE for the positions it processed; the HR keeps positions
contiguous from 0, ignores any position it already holds (the second EV's copy), and
commits in groups: whatever arrived while a commit was in flight goes in the next one
(``commit_ns`` models the fsync). Only after a commit does it multicast HARDENED with
copies of the requests, so followers can observe what the leader stored and a new EV
can listen in. It keeps the latest order-book checkpoint and serves checkpoints and
hardened requests to a recovering EV: its answer to a checkpoint request carries both.
The store itself is injected (stores.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, Group, JoinsNoGroup, Unicast
from rmptwin.venue import wire
from rmptwin.venue.orderbook import Trade
from rmptwin.venue.stores import HistoryStore

Entry = tuple[int, wire.Request, list[Trade]]   # (position, request, its trades)

HARDENED_PER_FRAME = 18   # keeps a HARDENED frame under one Ethernet MTU


@dataclass(frozen=True)
class HistoryConfig:
    commit_ns: int = 300_000   # modelled group-commit latency (0: the store's own commit is the cost)


class HistoryCore(JoinsNoGroup):
    def __init__(self, config: HistoryConfig, store: HistoryStore) -> None:
        self.config = config
        self.store = store
        self.commit_ns = config.commit_ns
        self.top = store.top()                     # highest position committed
        self._waiting: dict[int, tuple[wire.Request, list[Trade]]] = {}   # position -> (request, trades), not yet contiguous
        self._commit: tuple[int, list[Entry]] | None = None   # (done at, the batch being committed)
        self._ckpt_parts: dict[int, dict[int, bytes]] = {}
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.duplicates = self.malformed = 0

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        try:
            ftype, f = wire.decode(data)
        except wire.VenueWireError:
            self.malformed += 1
            return
        if ftype == wire.T_STORE:
            _, entries = f
            stale = False
            for n, req, trades in entries:
                if n <= self.top or n in self._waiting or self._in_commit(n):
                    self.duplicates += 1
                    stale = stale or n <= self.top
                    continue
                self._waiting[n] = (req, trades)
            if stale:   # a resend: its sender missed our HARDENED, tell it how far we are
                self._out.append((wire.hardened_frame(self.top, []), Unicast(src)))
            self._start_commit(now)
        elif ftype == wire.T_CKPT_STORE:
            n, part, parts, chunk = f
            got = self._ckpt_parts.setdefault(n, {})
            got[part] = chunk
            if len(got) == parts:
                del self._ckpt_parts[n]
                self.store.put_checkpoint(n, b"".join(got[i] for i in range(parts)))
                for old in [k for k in self._ckpt_parts if k < n]:
                    del self._ckpt_parts[old]
        elif ftype == wire.T_CKPT_REQ:
            # the latest checkpoint and, right behind it, every hardened request after it: a
            # recovering EV gets both in one round trip (HARDENED_REQ is its retry)
            ck = self.store.latest_checkpoint()
            n, blob = ck if ck is not None else (-1, b"")
            for fr in wire.ckpt_frames(wire.T_CKPT_PART, n, blob):
                self._out.append((fr, Unicast(src)))
            self._send_rows(n + 1, self.top, src)
        elif ftype == wire.T_HARDENED_REQ:
            first, last = f
            self._send_rows(first, self.top if last < 0 else min(last, self.top), src)

    def _send_rows(self, first: int, last: int, dest: str) -> None:
        rows = self.store.hardened(first, last)
        self._send_hardened([(n, wire.Request.decode_from(b, 0)) for n, b in rows], Unicast(dest))

    def _in_commit(self, n: int) -> bool:
        if self._commit is None or not self._commit[1]:
            return False
        batch = self._commit[1]
        return batch[0][0] <= n <= batch[-1][0]

    def _start_commit(self, now: int) -> None:
        if self._commit is not None:
            return
        batch, n = [], (self.top + 1)
        while n in self._waiting:
            req, trades = self._waiting.pop(n)
            batch.append((n, req, trades))
            n += 1
        if batch:
            self._commit = (now + self.commit_ns, batch)

    def get_timer(self) -> int | None:
        return self._commit[0] if self._commit else None

    def handle_timer(self, now: int) -> None:
        if self._commit is None:
            return
        now = max(now, self._commit[0])   # fired a little early by a real event loop
        _, batch = self._commit
        self._commit = None
        self.store.store([(n, req.encode_body(), trades) for n, req, trades in batch])
        self.top = batch[-1][0]
        for n, req, trades in batch:
            self._events.append(Event(Kind.HR_STORE, src=f"gw{req.gw}", src_seq=req.gw_seq, gseq=n,
                                      detail={"trades": len(trades)}))
        self._send_hardened([(n, req) for n, req, _ in batch], Group(wire.HARDENED_GROUP))
        self._start_commit(now)

    def _send_hardened(self, entries: list[tuple[int, wire.Request]], dest: Dest) -> None:
        if not entries:
            self._out.append((wire.hardened_frame(self.top, []), dest))
        for i in range(0, len(entries), HARDENED_PER_FRAME):
            self._out.append((wire.hardened_frame(self.top, entries[i:i + HARDENED_PER_FRAME]), dest))

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None
