"""Durable stores injected into the gateway and history-recorder cores.

The cores call these synchronously and model the fsync/commit *latency* themselves (a
timer), so the same core runs against an in-memory store in the simulator and against
a real file (gateway, fsync) or SQLite database in WAL mode (history recorder) where it
runs for real. A store object outlives the core that uses it: a crashed and restarted
core is handed the same store, as a restarted process finds its disk.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path


# ---------------------------------------------------------------------- gateway log
class MemoryGatewayLog:
    """Numbered requests and which are complete; survives core restarts, not the run."""

    def __init__(self) -> None:
        self.requests: dict[int, bytes] = {}
        self.done: set[int] = set()

    def append(self, batch: list[tuple[int, bytes]]) -> None:
        for seq, body in batch:
            self.requests[seq] = body

    def mark_done(self, seq: int) -> None:
        self.done.add(seq)

    def last_seq(self) -> int:
        return max(self.requests, default=-1)

    def get(self, seq: int) -> bytes | None:
        return self.requests.get(seq)

    def unfinished(self) -> list[tuple[int, bytes]]:
        return sorted((s, b) for s, b in self.requests.items() if s not in self.done)


_REC = struct.Struct("!BqI")   # kind (0 request, 1 done), seq, body length


class FileGatewayLog(MemoryGatewayLog):
    """Append-only file, fsync per batch: a request is acknowledged only once on disk."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        if self.path.exists():
            data = self.path.read_bytes()
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
        self._f = open(self.path, "ab")

    def append(self, batch: list[tuple[int, bytes]]) -> None:
        super().append(batch)
        self._f.write(b"".join(_REC.pack(0, s, len(b)) + b for s, b in batch))
        self._f.flush()
        os.fsync(self._f.fileno())

    def mark_done(self, seq: int) -> None:
        super().mark_done(seq)
        self._f.write(_REC.pack(1, seq, 0))   # no fsync: losing it only causes a replay

    def close(self) -> None:
        self._f.close()


# ---------------------------------------------------------------------- history store
class MemoryHistoryStore:
    """Hardened requests by position, trades, and order-book checkpoints."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[bytes, int]] = {}   # position -> (request body, trade count)
        self.trades: dict[int, list] = {}
        self.checkpoint: tuple[int, bytes] | None = None
        self.commits = 0

    def store(self, batch: list[tuple[int, bytes, list]]) -> None:
        """One group commit: (position, request body, trades)."""
        for n, body, trades in batch:
            self.entries[n] = (body, len(trades))
            self.trades[n] = list(trades)
        self.commits += 1

    def top(self) -> int:
        """Highest position stored (positions are stored contiguously from 0)."""
        return max(self.entries, default=-1)

    def hardened(self, first: int, last: int) -> list[tuple[int, bytes]]:
        return [(n, self.entries[n][0]) for n in range(first, last + 1) if n in self.entries]

    def put_checkpoint(self, n: int, blob: bytes) -> None:
        if self.checkpoint is None or n > self.checkpoint[0]:
            self.checkpoint = (n, blob)

    def latest_checkpoint(self) -> tuple[int, bytes] | None:
        return self.checkpoint

    def trade_count(self) -> int:
        return sum(c for _, c in self.entries.values())


class SqliteHistoryStore:
    """The same interface on SQLite in WAL mode: one transaction per group commit."""

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
        self.commits = 0

    def store(self, batch: list[tuple[int, bytes, list]]) -> None:
        cur = self.db.cursor()
        cur.execute("BEGIN")
        cur.executemany("INSERT OR IGNORE INTO requests VALUES (?, ?, ?)",
                        [(n, body, len(tr)) for n, body, tr in batch])
        cur.executemany("INSERT OR IGNORE INTO trades VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(n, i, *t) for n, _, tr in batch for i, t in enumerate(tr)])
        cur.execute("COMMIT")
        self.commits += 1

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
