"""The CAS sequencer's memory on a real fault-tolerant store: etcd v3 through its JSON gateway.

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

Requests go over persistent HTTP/1.1 connections (``_Http``, a minimal client: the
standard library's costs four times the CPU) to one member, the leader when the driver
put it first (``leader_first``); on a refused or
broken connection or an etcd error the client moves to the next member and asks again.
Asking again is safe: if the first attempt was applied, the retry fails its compare, finds
the batch the first attempt wrote, with this proposer's id and keys, and answers WON.
(Answered LOST with its own keys, the EV would still adopt them, but the history would show a
proposal beaten by nobody: ``checkers.linearizable`` could not explain it.)
So one member's crash is invisible to the venues.

``EtcdCas`` blocks on each round trip. ``EtcdCasClient`` is what a real sequencer host
hands its ``venue.sequencer.CasProxyCore``: a worker thread runs the transactions, in
arrival order, and the answers go back to the core on the event loop, which never waits.
``serve_propose`` answers one PROPOSE datagram at once, for drivers with threads of their
own (tests; ``runtime.venue_node.EtcdProposer``, an EV's own worker thread).
"""

from __future__ import annotations

import base64
import http.client
import json
import queue
import socket
import struct
import sys
import threading
import time
from typing import Callable
from urllib.parse import urlsplit

from rmptwin.errors import UserError
from rmptwin.venue import wire
from rmptwin.venue.sequencer import REPLY_MAX

Key = tuple[int, int]


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def _b64b(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _unb64(s: str) -> str:
    return base64.b64decode(s).decode()


_HEAD = struct.Struct("!qH")      # a batch value: its first position and its proposer, then the keys
_KEY = struct.Struct("!Hq")       # (gw id, gw seq), as on the wire


NO_OWNER = 0xFFFF   # a proposer that did not say who it is (never recognised as the writer)
MAX_BATCH = 1000   # positions per transaction (one etcd key of 10 bytes each, far below etcd's request limit)


class EtcdError(RuntimeError):
    """etcd answered with an error (no leader, leader changed, ...): try another member."""


class _Http:
    """One kept-alive HTTP/1.1 connection, just enough for etcd's JSON gateway: a POST is one
    ``sendall`` of a prepared head and the body; the answer is read by Content-Length or
    chunks. A quarter of ``http.client``'s CPU per transaction (no header objects, no email
    parser), which on a 2-CPU machine is latency: the EVs' etcd clients run once per batch."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: ".encode()
        self._buf = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.sock.sendall(b"POST %s HTTP/1.1\r\n%s%d\r\n\r\n%s" % (path.encode(), self._head, len(body), body))
        head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
        if "content-length" in fields:
            return status, self._exactly(int(fields["content-length"]))
        if fields.get("transfer-encoding", "").lower() != "chunked":
            raise http.client.HTTPException("etcd answer without a length")
        parts = []
        while (size := int(self._until(b"\r\n").split(b";")[0], 16)) > 0:
            parts.append(self._exactly(size))
            self._exactly(2)
        self._until(b"\r\n")   # the (empty) trailer
        return status, b"".join(parts)

    def _fill(self) -> None:
        got = self.sock.recv(65536)
        if not got:
            raise ConnectionError("etcd closed the connection")
        self._buf += got

    def _until(self, mark: bytes) -> bytes:
        while (i := self._buf.find(mark)) < 0:
            self._fill()
        out, self._buf = self._buf[:i], self._buf[i + len(mark):]
        return out

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self) -> None:
        self.sock.close()


class EtcdCas:
    def __init__(self, endpoints: list[str], *, prefix: str = "rmptwin/seq", window: int = 1024,
                 timeout_s: float = 2.0, give_up_s: float = 30.0) -> None:
        self.endpoints = [urlsplit(e) for e in endpoints]
        self.prefix = prefix.rstrip("/")
        self.window = window
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self._i = 0
        self._conn: _Http | None = None
        self.failovers = 0
        self.round_trips = 0

    # ------------------------------------------------------------------ keys
    def _next_key(self) -> str:
        return f"{self.prefix}/next"

    def _batch_key(self, last: int) -> str:
        return f"{self.prefix}/b/{last:020d}"

    @staticmethod
    def _num(n: int) -> str:
        return f"{n:020d}"

    # ------------------------------------------------------------------ transport
    def _post(self, path: str, body: dict) -> dict:
        data = json.dumps(body).encode()
        deadline = time.monotonic() + self.give_up_s
        last = None
        while time.monotonic() < deadline:
            try:
                if self._conn is None:
                    ep = self.endpoints[self._i]
                    self._conn = _Http(ep.hostname, ep.port, self.timeout_s)
                status, raw = self._conn.post(path, data)
                payload = json.loads(raw or b"{}")
                if status == 400:   # a malformed request stays malformed on every member
                    raise UserError(f"etcd refused a sequencer request: {payload.get('message', payload)}")
                if status != 200 or "error" in payload:
                    raise EtcdError(payload.get("error") or payload.get("message") or f"HTTP {status}")
                self.round_trips += 1
                return payload
            except (OSError, http.client.HTTPException, EtcdError, ValueError, IndexError) as e:
                last = e
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.close()
                self._i = (self._i + 1) % len(self.endpoints)
                self.failovers += 1
                time.sleep(0.01)
        raise UserError(f"etcd sequencer unreachable for {self.give_up_s:.0f} s ({last})")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------ operations
    def init(self) -> None:
        """Create ``next = 0`` unless it exists (every proposer may call this)."""
        self._post("/v3/kv/txn", {
            "compare": [{"key": _b64(self._next_key()), "target": "CREATE", "result": "EQUAL",
                         "create_revision": "0"}],
            "success": [{"request_put": {"key": _b64(self._next_key()), "value": _b64(self._num(0))}}],
        })

    def _reads(self, n: int, count: int) -> list[dict]:
        return [
            {"request_range": {"key": _b64(self._next_key())}},
            {"request_range": {"key": _b64(self._batch_key(n)), "range_end": _b64(f"{self.prefix}/b0"),
                               "limit": str(count)}},   # each batch holds >= 1 position
        ]

    def propose(self, n: int, keys: list[Key], owner: int = NO_OWNER) -> tuple[int, int, list[Key]]:
        """(status, next, keys standing at n, n+1, ...), as ``CasLog.propose``, with one
        difference: a proposal that finds its OWN batch standing at n (the same proposer, the
        same keys: an earlier copy of it won, its answer lost, or this client's own retry after
        a broken connection) is told WON, which it did, not LOST to itself."""
        if len(keys) > MAX_BATCH:
            raise UserError(f"a proposal of {len(keys)} positions exceeds the etcd sequencer's {MAX_BATCH}")
        count = max(len(keys), REPLY_MAX)
        if keys:
            end = n + len(keys)
            value = _HEAD.pack(n, owner) + b"".join(_KEY.pack(g, s) for g, s in keys)
            success = [{"request_put": {"key": _b64(self._batch_key(end - 1)), "value": _b64b(value)}},
                       {"request_put": {"key": _b64(self._next_key()), "value": _b64(self._num(end))}}]
            cut = end - self.window   # positions below it may go: batches ending below it
            if cut > 0:
                success.append({"request_delete_range": {
                    "key": _b64(self._batch_key(max(0, cut - len(keys) - 64))), "range_end": _b64(self._batch_key(cut))}})
            body = {
                "compare": [{"key": _b64(self._next_key()), "target": "VALUE", "result": "EQUAL",
                             "value": _b64(self._num(n))}],
                "success": success,
                "failure": self._reads(n, count),
            }
            r = self._post("/v3/kv/txn", body)
            if r.get("succeeded"):
                return wire.WON, end, list(keys)
            batches = r["responses"][1].get("response_range", {}).get("kvs", [])
            if owner != NO_OWNER and batches and self._batch(batches[0]) == (n, owner, list(keys)):
                return wire.WON, end, list(keys)
        else:
            r = self._post("/v3/kv/txn", {"success": self._reads(n, count)})
        return self._answer(n, r["responses"], count)

    @staticmethod
    def _batch(kv: dict) -> tuple[int, int, list[Key]]:
        """(first position, proposer, keys) of one stored batch."""
        value = base64.b64decode(kv["value"])
        first, owner = _HEAD.unpack_from(value)
        return first, owner, [_KEY.unpack_from(value, _HEAD.size + i * _KEY.size)
                              for i in range((len(value) - _HEAD.size) // _KEY.size)]

    @classmethod
    def _positions(cls, kvs: list[dict]) -> dict[int, Key]:
        """Position -> key for every position of the batches in ``kvs``."""
        got = {}
        for kv in kvs:
            first, _, keys = cls._batch(kv)
            got.update(zip(range(first, first + len(keys)), keys))
        return got

    def _answer(self, n: int, responses: list[dict], count: int) -> tuple[int, int, list[Key]]:
        nxt_kvs = responses[0].get("response_range", {}).get("kvs", [])
        nxt = int(_unb64(nxt_kvs[0]["value"])) if nxt_kvs else 0
        got = self._positions(responses[1].get("response_range", {}).get("kvs", []))
        if n < nxt - self.window or (n < nxt and n not in got):
            return wire.TOO_FAR, nxt, []
        out = []   # as many as CasLog tells (the batches read may hold more positions)
        while n + len(out) in got and len(out) < count:
            out.append(got[n + len(out)])
        return wire.LOST, nxt, out

    def read_all(self) -> dict[int, Key]:
        """Every position still stored (tests and checks)."""
        r = self._post("/v3/kv/range", {"key": _b64(self._batch_key(0)), "range_end": _b64(f"{self.prefix}/b0")})
        return self._positions(r.get("kvs", []))


def leader_first(endpoints: list[str], timeout_s: float = 1.0) -> list[str]:
    """``endpoints`` with the raft leader's first (as it stands now; the order kept otherwise).
    A client of the leader saves the hop a follower adds by forwarding each proposal, and
    the follower's share of the work (about a fifth of etcd's CPU per transaction here)."""
    for i, ep in enumerate(endpoints):
        u = urlsplit(ep)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
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


def serve_propose(cas: EtcdCas, data: bytes,
                  timed: Callable[[int, float], None] | None = None) -> bytes | None:
    """Answer one PROPOSE datagram from a venue core with a DECIDE datagram (a driver's adapter).
    ``timed(positions, seconds)``, when given, hears each transaction's size and duration."""
    try:
        ftype, f = wire.decode(data)
    except wire.VenueWireError:
        return None
    if ftype != wire.T_PROPOSE:
        return None
    owner, n, keys = f
    t = time.perf_counter()
    status, nxt, standing = cas.propose(n, keys, owner)
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
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, request_id: int, n: int, keys: list[Key], owner: int = NO_OWNER) -> None:
        self._queue.put((request_id, n, keys, owner))

    def start(self, deliver: Callable[[int, Answer], None]) -> None:
        self._thread = threading.Thread(target=self._work, args=(deliver,), name="etcd-cas", daemon=True)
        self._thread.start()

    def _work(self, deliver: Callable[[int, Answer], None]) -> None:
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
