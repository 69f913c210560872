"""The venue stores of a real run, on disk: the gateway log a file with fsync, the history
recorder a SQLite database in WAL mode.

They keep the interfaces of ``rmptwin.venue.stores`` (the cores cannot tell them from the
in-memory ones). ``DurableStores`` is what a real node hands the venue factories: each
host's store is a file in the node's state directory, so a restarted process finds what
its predecessor wrote.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import struct
import threading
import time
from pathlib import Path
from typing import Callable

from ..venue.stores import MemoryGatewayLog

_REC = struct.Struct("!BqI")   # kind (0 request, 1 done), seq, body length


class FileGatewayLog(MemoryGatewayLog):
    """Append-only file, fsync per batch: a request is acknowledged only once on disk.

    ``on_synced``, when given, moves the fsync off the caller's thread: ``append`` writes
    and returns, a worker thread fsyncs, ``synced()`` turns true, and ``on_synced()`` is
    called from the worker (a driver wakes its loop with it). The gateway core appends
    the next batch only once the last one is synced, so one fsync is in flight at most."""

    def __init__(self, path: str | Path, on_synced: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.path = Path(path)
        if self.path.exists():
            self._replay(self.path.read_bytes())
        self._f = open(self.path, "ab")
        self.fsyncs = 0          # one per appended batch (group commit): what a benchmark reports
        self.fsync_s = 0.0
        self._on_synced = on_synced
        self._synced = threading.Event()
        self._synced.set()
        self._jobs: queue.SimpleQueue | None = None
        if on_synced is not None:
            self._jobs = queue.SimpleQueue()
            self._worker = threading.Thread(target=self._fsync_worker, name="gw-fsync", daemon=True)
            self._worker.start()

    def _replay(self, data: bytes) -> None:
        off = 0
        while off + _REC.size <= len(data):
            kind, seq, n = _REC.unpack_from(data, off)
            body = data[off + _REC.size: off + _REC.size + n]
            if len(body) < n:
                break   # torn tail write: never acknowledged, drop it
            off += _REC.size + n
            if kind == 0:
                self.requests[seq] = body
            else:
                self.done.add(seq)

    def append(self, batch: list[tuple[int, bytes]]) -> None:
        super().append(batch)
        self._f.write(b"".join(_REC.pack(0, s, len(b)) + b for s, b in batch))
        self._f.flush()
        if self._jobs is None:
            self._fsync()
        else:
            self._synced.clear()
            self._jobs.put(True)

    def _fsync(self) -> None:
        t = time.perf_counter()
        os.fsync(self._f.fileno())
        self.fsync_s += time.perf_counter() - t
        self.fsyncs += 1

    def _fsync_worker(self) -> None:
        while self._jobs.get():
            self._fsync()
            self._synced.set()
            self._on_synced()

    def synced(self) -> bool:
        return self._synced.is_set()

    def mark_done(self, seq: int) -> None:
        super().mark_done(seq)
        self._f.write(_REC.pack(1, seq, 0))   # no fsync: losing it only causes a replay

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(False)
            self._worker.join(timeout=10)
            self._jobs = None
        self._f.close()


class SqliteHistoryStore:
    """The history store on SQLite in WAL mode: one transaction per group commit."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS requests (pos INTEGER PRIMARY KEY, body BLOB NOT NULL, ntrades INTEGER);
            CREATE TABLE IF NOT EXISTS trades (pos INTEGER, idx INTEGER, taker INTEGER, maker INTEGER,
                price INTEGER, qty INTEGER, side INTEGER, PRIMARY KEY (pos, idx));
            CREATE TABLE IF NOT EXISTS checkpoints (pos INTEGER PRIMARY KEY, blob BLOB NOT NULL);
            """
        )
        self.commits = 0         # one per group commit (one fsync of the WAL each)
        self.commit_s = 0.0
        self.rows = 0

    def store(self, batch: list[tuple[int, bytes, list]]) -> None:
        t = time.perf_counter()
        cur = self.db.cursor()
        cur.execute("BEGIN")
        cur.executemany("INSERT OR IGNORE INTO requests VALUES (?, ?, ?)",
                        [(n, body, len(tr)) for n, body, tr in batch])
        cur.executemany("INSERT OR IGNORE INTO trades VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(n, i, *t) for n, _, tr in batch for i, t in enumerate(tr)])
        cur.execute("COMMIT")
        self.commit_s += time.perf_counter() - t
        self.commits += 1
        self.rows += len(batch)

    def top(self) -> int:
        row = self.db.execute("SELECT MAX(pos) FROM requests").fetchone()
        return -1 if row[0] is None else row[0]

    def hardened(self, first: int, last: int) -> list[tuple[int, bytes]]:
        return [(n, bytes(b)) for n, b in self.db.execute(
            "SELECT pos, body FROM requests WHERE pos BETWEEN ? AND ? ORDER BY pos", (first, last))]

    def put_checkpoint(self, n: int, blob: bytes) -> None:
        self.db.execute("INSERT OR IGNORE INTO checkpoints VALUES (?, ?)", (n, blob))

    def latest_checkpoint(self) -> tuple[int, bytes] | None:
        row = self.db.execute("SELECT pos, blob FROM checkpoints ORDER BY pos DESC LIMIT 1").fetchone()
        return None if row is None else (row[0], bytes(row[1]))

    def trade_count(self) -> int:
        return self.db.execute("SELECT COALESCE(SUM(ntrades), 0) FROM requests").fetchone()[0]

    def close(self) -> None:
        self.db.close()


class DurableStores:
    """Each host's store as a file in ``state_dir``: ``<host>.gwlog`` for a gateway,
    ``<host>.sqlite`` for a history recorder. A fresh (first) start removes what an
    earlier run left there; a recovering one reopens it."""

    def __init__(self, state_dir: str | Path) -> None:
        self.state_dir = Path(state_dir)
        self._open: dict[Path, FileGatewayLog | SqliteHistoryStore] = {}

    def _path(self, name: str, *, fresh: bool) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / name
        old = self._open.pop(path, None)
        if old is not None:
            old.close()
        if fresh:
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                p.unlink(missing_ok=True)
        return path

    def gateway_log(self, host: str, *, fresh: bool) -> FileGatewayLog:
        path = self._path(f"{host}.gwlog", fresh=fresh)
        log = self._open[path] = FileGatewayLog(path)
        return log

    def history_store(self, host: str, *, fresh: bool) -> SqliteHistoryStore:
        path = self._path(f"{host}.sqlite", fresh=fresh)
        store = self._open[path] = SqliteHistoryStore(path)
        return store

    def close(self) -> None:
        for store in self._open.values():
            store.close()
        self._open.clear()
