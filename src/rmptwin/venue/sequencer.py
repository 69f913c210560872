"""The compare-and-swap sequencer: a passive array of positions, a sliding window.

``CasLog`` is the whole algorithm (the seed's section 3 and the XCF list entries of
section 5): a proposal "my requests k_0..k_m at positions n..n+m" succeeds as a whole
exactly when n is the first free position; otherwise the caller learns what already
stands at n, n+1, ... (up to ``REPLY_MAX`` entries) and conforms. Positions below
``next - window`` are forgotten; a proposer asking for one is too far behind (soft
failure). Because every venue walks positions in order and a proposal lands only at
the first free position, the filled positions are always one contiguous prefix: no gap,
no position written twice. A request already placed (same [gw, gw seq]) is never placed
again: the index of keys inside the window refuses it.

``SequencerCore`` serves ``CasLog`` over datagrams (the simulator's in-memory
sequencer). ``CasProxyCore`` is the sequencer host whose CAS memory lives outside it (an
etcd cluster in a real run, ``rmptwin.node.etcd_client``, which gives the same answers
as ``CasLog``): it hands each proposal to the ``CasClient`` its driver gave it and turns
the answer, when the driver brings it back, into the DECIDE datagram. It never waits.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, NoTimerJoinsNoGroup, Unicast
from rmptwin.venue import wire

REPLY_MAX = 64
Key = tuple[int, int]


class CasLog:
    def __init__(self, window: int) -> None:
        self.window = window
        self.next = 0
        self._slots: deque[Key] = deque()     # positions [next - len, next)
        self._index: dict[Key, int] = {}

    @property
    def low(self) -> int:
        return self.next - len(self._slots)

    def get(self, n: int) -> Key | None:
        if self.low <= n < self.next:
            return self._slots[n - self.low]
        return None

    def propose(self, n: int, keys: list[Key]) -> tuple[int, int, list[Key]]:
        """(status, next, keys now standing at n, n+1, ...)."""
        if n < self.low:
            return wire.TOO_FAR, self.next, []
        if n == self.next and keys:
            placed = []
            for k in keys:
                if k in self._index or k in placed:
                    continue   # already ordered: a stale or duplicate proposal
                placed.append(k)
            for k in placed:
                self._index[k] = self.next
                self._slots.append(k)
                self.next += 1
            while len(self._slots) > self.window:
                del self._index[self._slots.popleft()]
            return wire.WON, self.next, placed
        if n > self.next:
            return wire.LOST, self.next, []
        last = min(self.next, n + max(len(keys), REPLY_MAX))
        return wire.LOST, self.next, [self._slots[i - self.low] for i in range(n, last)]


@dataclass(frozen=True)
class SequencerConfig:
    window: int   # positions kept; a proposer further behind is told TOO_FAR


class _ProposalServer(NoTimerJoinsNoGroup):
    """What both sequencer hosts share: they answer PROPOSE datagrams, keep no timer and
    join no group. ``on_propose`` is the host's own part."""

    def __init__(self) -> None:
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self.malformed = 0

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        try:
            ftype, fields = wire.decode(data)
        except wire.VenueWireError:
            self.malformed += 1
            return
        if ftype == wire.T_PROPOSE:
            owner, n, keys = fields
            self.on_propose(src, n, keys, owner)

    def on_propose(self, src: str, n: int, keys: list[Key], owner: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None


class SequencerCore(_ProposalServer):
    """In-memory sequencer reached by PROPOSE/DECIDE datagrams."""

    def __init__(self, config: SequencerConfig) -> None:
        super().__init__()
        self.config = config
        self.log = CasLog(config.window)

    def on_propose(self, src: str, n: int, keys: list[Key], owner: int) -> None:
        status, nxt, standing = self.log.propose(n, keys)
        if status == wire.TOO_FAR:
            self._events.append(Event(Kind.SEQ_TOO_FAR, src=src, gseq=n, detail={"low": self.log.low}))
        self._out.append((wire.decide_frame(status, n, nxt, standing), Unicast(src)))


class CasClient(Protocol):
    """A CAS memory outside the core. ``submit`` only starts the request (it must not block);
    the driver later hands the answer, ``(status, next, keys standing at n, ...)`` exactly as
    ``CasLog.propose`` gives it, to ``CasProxyCore.receive_answer`` with the same id."""

    def submit(self, request_id: int, n: int, keys: list[Key], owner: int) -> None: ...


class CasProxyCore(_ProposalServer):
    """The sequencer host of a real run: PROPOSE datagrams become requests to an outside CAS
    memory (``client``), and its answers DECIDE datagrams to the proposers."""

    def __init__(self, client: CasClient) -> None:
        super().__init__()
        self.client = client
        self._asked: dict[int, tuple[str, int]] = {}   # request id -> (proposer, position n)
        self._next_id = 0

    def on_propose(self, src: str, n: int, keys: list[Key], owner: int) -> None:
        request_id, self._next_id = self._next_id, self._next_id + 1
        self._asked[request_id] = (src, n)
        self.client.submit(request_id, n, keys, owner)

    def receive_answer(self, request_id: int, status: int, nxt: int, keys: list[Key], now: int) -> None:
        """The CAS memory's answer to request ``request_id`` (unknown ids are ignored)."""
        asked = self._asked.pop(request_id, None)
        if asked is not None:
            src, n = asked
            self._out.append((wire.decide_frame(status, n, nxt, keys), Unicast(src)))
