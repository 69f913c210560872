"""The CAS sequencer's memory on a real fault-tolerant store: etcd v3, through its native gRPC API or its
JSON gateway (``venue.etcd_api``; ``node.etcd_grpc``, ``node.etcd_json``).

Same answers as ``sequencer.CasLog`` (but one: a proposer that finds its own batch standing
at n is told WON, see ``EtcdCas.propose``). A batch of keys k_0..k_m proposed for positions
n..n+m is ONE etcd key, ``b/<n+m>`` (named by its LAST position; the value packs n, the
proposer and the keys), written in ONE transaction (one round trip)::

    compare: value(next) == n
    success: put b/<n+m>, put next = n+m+1, delete the batches leaving the window
    failure: get next, get b/<n> .. (ascending, up to 64 batches)

``next`` only grows and no batch exists at or above it, so a proposal lands only at the
first free position (filled positions stay one contiguous prefix: no gap, no position
written twice). The loser reads the winners' entries in the same round trip: the first
batch named at or after n is the one holding n. One key per batch, not per position,
keeps a 256-request transaction as cheap for etcd (raft entry, apply, JSON) as a
one-request one. A proposer below ``next - window`` is told TOO_FAR.

``EtcdCas`` holds what a transaction says and what its answer means; a subclass carries it to
etcd (``etcd_cas`` picks one by API). Requests go over one kept-alive connection to one member,
the leader when the driver put it first (``leader_first``); on a refused, broken or timed-out
connection or an etcd error the client moves to the next member and asks again (a timed-out
transaction may or may not have been applied: the retry tells which).
Asking again is safe: if the first attempt was applied, the retry fails its compare, finds
the batch the first attempt wrote, with this proposer's id and keys, and answers WON.
(Answered LOST with its own keys, the EV would still adopt them, but the history would show a
proposal beaten by nobody: ``checkers.linearizable`` could not explain it.)
So one member's crash is invisible to the venues.

``EtcdCas`` blocks on each round trip. ``EtcdCasClient`` is what a real sequencer host
hands its ``venue.sequencer.CasProxyCore``: a worker thread runs the transactions, in
arrival order, and the answers go back to the core on the event loop, which never waits.
``serve_propose`` answers one PROPOSE datagram at once, for drivers with threads of their
own (tests; ``bench.venue_node.EtcdProposer``, an EV's own worker thread).
"""

from __future__ import annotations

import http.client
import json
import queue
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from rmptwin.errors import UserError
from rmptwin.venue import wire
from rmptwin.venue.sequencer import REPLY_MAX

Key = tuple[int, int]
T = TypeVar("T")
# What a transaction says, in neither API's terms (each subclass spells it its own way):
# a compare is ("value", key, value) "key's value == value" or ("absent", key, b"") "key was never created";
# an op is ("put", key, value), ("range", key, range_end, limit, serializable) or ("delete", key, range_end)
Compare = tuple[str, bytes, bytes]
Op = tuple[Any, ...]
Reply = tuple[bool, list[list[bytes]]]   # succeeded?, and per op the values a range found ([] for the others)

ETCD_APIS = ("grpc", "json")   # venue.etcd_api; the first is the default (measured faster: docs/benchmarks.md)

_HEAD = struct.Struct("!qH")      # a batch value: its first position and its proposer, then the keys
_KEY = struct.Struct("!Hq")       # (gw id, gw seq), as on the wire


NO_OWNER = 0xFFFF   # a proposer that did not say who it is (never recognised as the writer)
MAX_BATCH = 1000   # positions per transaction (one etcd key of 10 bytes each, far below etcd's request limit)
CAS_TIMEOUT_S = 2.0    # a member that does not answer within this is passed over
CAS_GIVE_UP_S = 30.0   # no member answered within this: the request fails


class EtcdError(RuntimeError):
    """etcd answered with an error (no leader, leader changed, ...): try another member."""


class EtcdCas:
    """The sequencer's transactions on etcd; a subclass says how they travel (``api``): it opens a
    connection to one member (``_open``), runs a transaction or a range on it (``_txn_on``,
    ``_range_on``), raising EtcdError or one of its ``_transient`` errors to move on to the next
    member, UserError for a request no member would take."""

    api = ""
    _transient: tuple[type[BaseException], ...] = (OSError, EtcdError)

    def __init__(self, endpoints: list[str], *, prefix: str = "rmptwin/seq", window: int = 1024,
                 timeout_s: float = CAS_TIMEOUT_S, give_up_s: float = CAS_GIVE_UP_S) -> None:
        self.endpoints = [urlsplit(e) for e in endpoints]
        self.prefix = prefix.rstrip("/")
        self.window = window
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self._i = 0
        self._conn: Any = None
        self.failovers = 0
        self.round_trips = 0
        self._next = f"{self.prefix}/next".encode()
        self._batches_end = f"{self.prefix}/b0".encode()   # just above every b/<n>

    # ------------------------------------------------------------------ transport (the subclass's)
    def _open(self, host: str, port: int) -> Any:
        raise NotImplementedError

    def _txn_on(self, conn: Any, compare: list[Compare], success: list[Op], failure: list[Op]) -> Reply:
        raise NotImplementedError

    def _range_on(self, conn: Any, key: bytes, range_end: bytes) -> list[bytes]:
        raise NotImplementedError

    def _close_conn(self, conn: Any) -> None:
        conn.close()

    def _ask(self, call: Callable[[Any], T]) -> T:
        """``call(connection)`` on the current member, else on the next ones, for ``give_up_s``."""
        deadline = time.monotonic() + self.give_up_s
        last = None
        while time.monotonic() < deadline:
            try:
                if self._conn is None:
                    ep = self.endpoints[self._i]
                    self._conn = self._open(ep.hostname or "127.0.0.1", ep.port or 2379)
                out = call(self._conn)
                self.round_trips += 1
                return out
            except self._transient as e:
                last = e
                conn, self._conn = self._conn, None
                if conn is not None:
                    self._close_conn(conn)
                self._i = (self._i + 1) % len(self.endpoints)
                self.failovers += 1
                time.sleep(0.01)
        raise UserError(f"etcd sequencer unreachable for {self.give_up_s:.0f} s ({last})")

    def _txn(self, compare: list[Compare], success: list[Op], failure: list[Op]) -> Reply:
        return self._ask(lambda conn: self._txn_on(conn, compare, success, failure))

    def close(self) -> None:
        if self._conn is not None:
            self._close_conn(self._conn)
            self._conn = None

    # ------------------------------------------------------------------ keys
    def _batch_key(self, last: int) -> bytes:
        return f"{self.prefix}/b/{last:020d}".encode()

    @staticmethod
    def _num(n: int) -> bytes:
        return f"{n:020d}".encode()

    # ------------------------------------------------------------------ operations
    def init(self) -> None:
        """Create ``next = 0`` unless it exists (every proposer may call this)."""
        self._txn([("absent", self._next, b"")], [("put", self._next, self._num(0))], [])

    def _reads(self, n: int, count: int, serializable: bool = False) -> list[Op]:
        return [("range", self._next, b"", 0, serializable),
                ("range", self._batch_key(n), self._batches_end, count, serializable)]   # each batch holds >= 1 position

    def propose(self, n: int, keys: list[Key], owner: int = NO_OWNER, *,
                serializable: bool = False) -> tuple[int, int, list[Key]]:
        """(status, next, keys standing at n, n+1, ...), as ``CasLog.propose``, with one
        difference: a proposal that finds its OWN batch standing at n (the same proposer, the
        same keys: an earlier copy of it won, its answer lost, or this client's own retry after
        a broken connection) is told WON, which it did, not LOST to itself.

        ``serializable`` (a read only: no keys) asks the member this client talks to, from its
        own store, without the quorum round (and the wait for pending writes) of etcd's
        linearizable read: a promoted standby's one read (``bench.venue_procs``). At the leader,
        which every EV talks to (``leader_first``), it misses no acknowledged proposal (each was
        applied there before its answer), so it sees every position ordered before the
        promotion; at a follower or a deposed leader it may be stale, and then the reader's next
        proposal, at too low a position, is answered LOST with what stands there (the compare
        keeps the order): a round trip more, never a wrong order. A stale answer is not
        linearizable, though (``checkers.linearizable`` would flag it): every other read stays so."""
        if serializable and keys:
            raise ValueError("only a read (a proposal with no keys) can be serializable")
        if len(keys) > MAX_BATCH:
            raise UserError(f"a proposal of {len(keys)} positions exceeds the etcd sequencer's {MAX_BATCH}")
        count = max(len(keys), REPLY_MAX)
        if keys:
            end = n + len(keys)
            value = _HEAD.pack(n, owner) + b"".join(_KEY.pack(g, s) for g, s in keys)
            success: list[Op] = [("put", self._batch_key(end - 1), value), ("put", self._next, self._num(end))]
            cut = end - self.window   # positions below it may go: batches ending below it
            if cut > 0:
                success.append(("delete", self._batch_key(max(0, cut - len(keys) - 64)), self._batch_key(cut)))
            won, found = self._txn([("value", self._next, self._num(n))], success, self._reads(n, count))
            if won:
                return wire.WON, end, list(keys)
            if owner != NO_OWNER and found[1] and self._batch(found[1][0]) == (n, owner, list(keys)):
                return wire.WON, end, list(keys)
        else:
            _, found = self._txn([], self._reads(n, count, serializable), [])   # etcd: serializable if every range is
        return self._answer(n, found, count)

    @staticmethod
    def _batch(value: bytes) -> tuple[int, int, list[Key]]:
        """(first position, proposer, keys) of one stored batch."""
        first, owner = _HEAD.unpack_from(value)
        return first, owner, [_KEY.unpack_from(value, _HEAD.size + i * _KEY.size)
                              for i in range((len(value) - _HEAD.size) // _KEY.size)]

    @classmethod
    def _positions(cls, values: list[bytes]) -> dict[int, Key]:
        """Position -> key for every position of the batches stored as ``values``."""
        got: dict[int, Key] = {}
        for value in values:
            first, _, keys = cls._batch(value)
            got.update(zip(range(first, first + len(keys)), keys))
        return got

    def _answer(self, n: int, found: list[list[bytes]], count: int) -> tuple[int, int, list[Key]]:
        nxt = int(found[0][0]) if found[0] else 0
        got = self._positions(found[1])
        if n < nxt - self.window or (n < nxt and n not in got):
            return wire.TOO_FAR, nxt, []
        out: list[Key] = []   # as many as CasLog tells (the batches read may hold more positions)
        while n + len(out) in got and len(out) < count:
            out.append(got[n + len(out)])
        return wire.LOST, nxt, out

    def warm(self) -> None:
        """Open the connection to the current member and make one serializable read (no quorum
        round), so that a client's first real question does not pay the channel's set-up. Measured
        (bench_venue, 21 promotions): a standby that had never asked etcd took 30 ms for its
        promotion's read on the cold gRPC channel, where the warm ones took 1-5 ms."""
        self._txn([], self._reads(0, 1, serializable=True), [])

    def read_all(self) -> dict[int, Key]:
        """Every position still stored (tests and checks)."""
        return self._positions(self._ask(lambda conn: self._range_on(conn, self._batch_key(0), self._batches_end)))


def etcd_cas_class(api: str) -> type[EtcdCas]:
    """The ``EtcdCas`` subclass that talks ``api`` (one of ``ETCD_APIS``), its module imported
    here, so a JSON client never loads grpc (a parent that forks clients calls this first)."""
    if api == "grpc":
        from rmptwin.node.etcd_grpc import GrpcEtcdCas
        return GrpcEtcdCas
    if api == "json":
        from rmptwin.node.etcd_json import JsonEtcdCas
        return JsonEtcdCas
    raise UserError(f"unknown etcd API {api!r} (one of {', '.join(ETCD_APIS)})")


def etcd_cas(endpoints: list[str], *, api: str = ETCD_APIS[0], **kwargs: Any) -> EtcdCas:
    """An ``EtcdCas`` that talks ``api``; ``kwargs`` as ``EtcdCas``'s."""
    return etcd_cas_class(api)(endpoints, **kwargs)


def leader_first(endpoints: list[str], timeout_s: float = 1.0) -> list[str]:
    """``endpoints`` with the raft leader's first (as it stands now; the order kept otherwise).
    A client of the leader saves the hop a follower adds by forwarding each proposal, and
    the follower's share of the work (about a fifth of etcd's CPU per transaction here)."""
    for i, ep in enumerate(endpoints):
        u = urlsplit(ep)
        conn = http.client.HTTPConnection(cast(str, u.hostname), u.port, timeout=timeout_s)   # an http:// URL: a host
        try:
            conn.request("POST", "/v3/maintenance/status", body=b"{}", headers={"Content-Type": "application/json"})
            st = json.loads(conn.getresponse().read() or b"{}")
        except (OSError, http.client.HTTPException, ValueError):
            continue
        finally:
            conn.close()
        if st.get("leader") and st.get("leader") == st.get("header", {}).get("member_id"):
            return [ep] + endpoints[:i] + endpoints[i + 1:]
    return list(endpoints)


def serve_propose(cas: EtcdCas, data: bytes, timed: Callable[[int, float], None] | None = None, *,
                  serializable: bool = False) -> bytes | None:
    """Answer one PROPOSE datagram from a venue core with a DECIDE datagram (a driver's adapter).
    ``timed(positions, seconds)``, when given, hears each transaction's size and duration;
    ``serializable``: the PROPOSE is a read, to be asked as ``EtcdCas.propose`` says."""
    try:
        ftype, f = wire.decode(data)
    except wire.VenueWireError:
        return None
    if ftype != wire.T_PROPOSE:
        return None
    owner, n, keys = f
    t = time.perf_counter()
    status, nxt, standing = cas.propose(n, keys, owner, serializable=serializable)
    if timed is not None:
        timed(len(keys), time.perf_counter() - t)
    return wire.decide_frame(status, n, nxt, standing)


Answer = tuple[int, int, list[Key]]   # (status, next, keys standing at n, n+1, ...)


class EtcdCasClient:
    """A ``venue.sequencer.CasClient`` on etcd: ``submit`` queues, one worker thread asks etcd.

    ``start(deliver)`` starts the worker; ``deliver(request_id, answer)`` is called from the
    worker thread, so it must hand the answer over to the driver's own thread (the runtime
    passes ``loop.call_soon_threadsafe``). A request etcd never answers (the cluster gone for
    ``give_up_s``) is reported on stderr and dropped: the EV asks again, as after a lost DECIDE.
    """

    def __init__(self, cas: EtcdCas) -> None:
        self.cas = cas
        self._queue: queue.SimpleQueue[tuple[int, int, list[Key], int] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, request_id: int, n: int, keys: list[Key], owner: int = NO_OWNER) -> None:
        self._queue.put((request_id, n, keys, owner))

    def start(self, deliver: Callable[[int, Answer], object]) -> None:
        self._thread = threading.Thread(target=self._work, args=(deliver,), name="etcd-cas", daemon=True)
        self._thread.start()

    def _work(self, deliver: Callable[[int, Answer], object]) -> None:
        try:
            self.cas.init()
        except UserError as e:
            sys.stderr.write(f"rmptwin: {e}\n")
        while (item := self._queue.get()) is not None:
            request_id, n, keys, owner = item
            try:
                deliver(request_id, self.cas.propose(n, keys, owner))
            except UserError as e:
                sys.stderr.write(f"rmptwin: {e}\n")

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=self.cas.timeout_s + 1.0)
            self._thread = None
        self.cas.close()
