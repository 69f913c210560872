"""Is the sequencer's compare-and-swap history linearizable? (Wing and Gong's search with
Lowe's memoisation, as in Porcupine and Knossos.)

The history is what the EVs recorded (``Kind.CAS_INVOKE`` when a proposal goes out,
``Kind.CAS_OK`` when its answer comes back): each operation ``propose(n, keys)`` with its
invocation time, its completion time and answer ``(status, next, keys standing at n..)``, or
no completion at all: a proposal whose answer never came (the EV gave up on it, crashed, or
the run ended) is INDETERMINATE, as Jepsen treats a timeout: it may have taken effect at any
instant after its invocation, or not at all, and its answer is unconstrained. A retry of a
proposal is a new operation, and the earlier copy becomes indeterminate; the answer that
came back may belong to either copy, so the answered operation spans both: it is invoked
when the first copy went out (``checkers.venue_checker.cas_history``).

The model is ``venue.sequencer.CasLog`` itself, as a sequential specification with the
sequencer's window: ``propose(n, keys)`` wins exactly when n is the first free position
(placing the keys not already standing in the window), is told ``TOO_FAR`` below the window,
and otherwise learns what stands at n, n + 1, ... The search linearizes an operation only
between its invocation and completion (indeterminate ones: any time after invocation) and
backtracks; a (set of linearized operations, model state) pair seen before is not tried
again. The model state is keyed by the log's length and a hash chain over it; the set of
linearized operations by its lowest gap and the bits above it (histories are nearly sequential).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from rmptwin.checkers import Violation
from rmptwin.venue import wire
from rmptwin.venue.sequencer import REPLY_MAX

NAME = "cas_linearizable"
INF = float("inf")

CasKey = tuple[Any, ...]                          # a request key as the history recorded it
CasOutput = tuple[int, int, tuple[CasKey, ...]]   # (status, next, keys standing at n..)


@dataclass(frozen=True)
class CasOp:
    """One proposal. ``output`` None: indeterminate (no answer seen)."""

    id: int
    process: str                      # the EV
    call_ns: int
    n: int
    keys: tuple[CasKey, ...]
    return_ns: float = INF
    output: CasOutput | None = None   # (status, next, keys tuple)
    evs: tuple[dict[str, Any], ...] = ()   # the events that recorded it


class _Model:
    """CasLog over a full log, with undo (the search is a stack)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.log: list[CasKey] = []
        self.chain: list[int] = [0]
        self.index: dict[CasKey, int] = {}

    def state(self) -> tuple[int, int]:
        return len(self.log), self.chain[-1]

    def answer(self, n: int, keys: tuple[CasKey, ...]) -> tuple[CasOutput, list[CasKey]]:
        """(the answer CasLog gives, the keys it would place)."""
        nxt = len(self.log)
        low = max(0, nxt - self.window)
        if n < low:
            return (wire.TOO_FAR, nxt, ()), []
        if n == nxt and keys:
            placed: list[CasKey] = []
            for k in keys:
                pos = self.index.get(k)
                if (pos is not None and pos >= low) or k in placed:
                    continue
                placed.append(k)
            return (wire.WON, nxt + len(placed), tuple(placed)), placed
        if n > nxt:
            return (wire.LOST, nxt, ()), []
        last = min(nxt, n + max(len(keys), REPLY_MAX))
        return (wire.LOST, nxt, tuple(self.log[n:last])), []

    def apply(self, placed: list[CasKey]) -> None:
        for k in placed:
            self.index[k] = len(self.log)
            self.log.append(k)
            self.chain.append(hash((self.chain[-1], k)))

    def undo(self, length: int) -> None:
        while len(self.log) > length:
            k = self.log.pop()
            self.chain.pop()
            if self.index.get(k) == len(self.log):
                del self.index[k]
        # a key placed twice (once evicted from the window) maps to its later position: restore the earlier
        for pos in range(max(0, length - self.window), length):
            self.index.setdefault(self.log[pos], pos)


class _Entry:
    __slots__ = ("is_call", "match", "next", "op", "prev")
    op: CasOp | None          # None: the list's head
    is_call: bool
    match: _Entry | None      # a call's return
    prev: _Entry | None
    next: _Entry | None

    def __init__(self, op: CasOp | None, is_call: bool) -> None:
        self.op, self.is_call, self.match, self.prev, self.next = op, is_call, None, None, None


def _entries(ops: list[CasOp]) -> _Entry:
    """The doubly linked list of calls and returns in time order (calls first at equal times)."""
    items: list[tuple[tuple[float, int, int], _Entry]] = []
    for op in ops:
        call, ret = _Entry(op, True), _Entry(op, False)
        call.match = ret
        items.append(((op.call_ns, 0, op.id), call))
        items.append(((op.return_ns, 1, op.id), ret))
    items.sort(key=lambda x: x[0])
    head = _Entry(None, False)
    prev = head
    for _, e in items:
        prev.next, e.prev = e, prev
        prev = e
    return head


def _lift(e: _Entry) -> None:
    m = e.match   # e is a call in the list: it has a match, and both have a prev
    assert e.prev is not None and m is not None and m.prev is not None
    e.prev.next = e.next
    if e.next:
        e.next.prev = e.prev
    m.prev.next = m.next
    if m.next:
        m.next.prev = m.prev


def _unlift(e: _Entry) -> None:
    m = e.match   # e is a call lifted from the list: it has a match, and both kept their prev
    assert e.prev is not None and m is not None and m.prev is not None
    m.prev.next = m
    if m.next:
        m.next.prev = m
    e.prev.next = e
    if e.next:
        e.next.prev = e


def linearizable(ops: list[CasOp], window: int = 1 << 62, max_steps: int = 2_000_000) -> Violation | None:
    """None if some linearization of ``ops`` agrees with the model; else the violation, naming the
    operation the deepest attempt could not place. A search over ``max_steps`` gives up with a
    violation saying so (never seen on the venue's histories, which are nearly sequential)."""
    if not ops:
        return None
    head = _entries(ops)
    model = _Model(window)
    cache: set[tuple[int, int, tuple[int, int]]] = set()
    calls: list[tuple[_Entry, int, bool]] = []   # (call linearized, log length before, forced)
    linearized = 0
    entry = head.next
    deepest = -1
    stuck: tuple[CasOp, CasOutput] | None = None
    steps = 0
    while head.next is not None:
        steps += 1
        if steps > max_steps:
            return Violation(NAME, f"undecided: the search gave up after {max_steps} steps ({len(ops)} operations)")
        # past the head every entry has its operation, and the list ends with a return
        assert entry is not None and entry.op is not None
        op = entry.op
        if entry.is_call:
            out, placed = model.answer(op.n, op.keys)
            if op.output is None or op.output == out:
                bit = linearized | (1 << op.id)
                length = len(model.log)
                model.apply(placed)
                # Lowe's cache, keyed compactly: every operation below the lowest unlinearized
                # one is linearized, so (that index, the bits above it) names the set
                low = ((bit + 1) & ~bit).bit_length() - 1
                key = (low, bit >> low, model.state())
                if key not in cache:
                    cache.add(key)
                    # An operation that changes nothing here and never could later (it has its
                    # answer, or the log has passed its n) is linearized here with no alternative
                    # to try: every operation that returned before it was invoked is already
                    # placed, so any valid order may move it to this point. (Without this the
                    # search tried each pending indeterminate copy both ways: 2^k branches.)
                    forced = not placed and (op.output is not None or op.n <= length)
                    calls.append((entry, length, forced))
                    linearized = bit
                    _lift(entry)
                    entry = head.next
                    continue
                model.undo(length)
            entry = entry.next
        else:
            if len(calls) > deepest:
                deepest, stuck = len(calls), (op, model.answer(op.n, op.keys)[0])
            forced = True
            while calls and forced:
                entry, length, forced = calls.pop()
                assert entry.op is not None
                linearized &= ~(1 << entry.op.id)
                model.undo(length)
                _unlift(entry)
            if forced:
                break   # nothing left to try
            entry = entry.next
    else:
        return None
    assert stuck is not None   # the search broke off at a return, which set it
    op, expected = stuck
    answered = cast(CasOutput, op.output)   # the stuck operation's answer (a None would fail here, as before)
    return Violation(NAME, f"{op.process} propose(n={op.n}, {len(op.keys)} keys) answered "
                           f"{_status(answered)} next={answered[1]} {list(answered[2])[:4]}, but no order of the "
                           f"operations before it gives that (at best: {_status(expected)} next={expected[1]} "
                           f"{list(expected[2])[:4]}; {deepest} operations linearized)", op.evs)


def _status(out: CasOutput) -> str:
    return {wire.WON: "WON", wire.LOST: "LOST", wire.TOO_FAR: "TOO_FAR"}.get(out[0], str(out[0]))
