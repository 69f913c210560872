"""The venue stores of a real run, on disk: the gateway log and the history recorder's store,
each an append-only file with one fdatasync per group commit.

They keep the interfaces of ``rmptwin.venue.stores`` (the cores cannot tell them from the
in-memory ones). ``DurableStores`` is what a real node hands the venue factories: each
host's store is a file in the node's state directory, so a restarted process finds what
its predecessor wrote.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from pathlib import Path

from rmptwin.venue.orderbook import Trade
from rmptwin.venue.stores import MemoryGatewayLog

_HREC = struct.Struct("!BqIII")   # kind, position, body length, trades, crc32 (of the fields before it + payload)
_HTRADE = struct.Struct("!qqqqB")   # taker, maker, price, qty, taker side (as on the wire)
_HARDENED, _CHECKPOINT = 0x52, 0x43   # record kinds; a zero byte is the preallocated space after the last record
PREALLOC = 8 << 20                    # bytes of zeros written ahead of the log's end


class _PreallocatedFile:
    """An append-only file whose space ahead is already written (zeros, fsync'd once per
    ``PREALLOC`` bytes): an append then overwrites allocated blocks, so ``fdatasync`` flushes
    data only, with no journal commit for a new size or extent (ext4: 0.1-0.2 ms instead of
    1-2 ms when another process fsyncs the same file system)."""

    def __init__(self, path: Path, end: int) -> None:
        path.touch()
        self._f = open(path, "r+b", buffering=0)
        self.end = end                             # where the next append goes
        self._allocated = os.fstat(self._f.fileno()).st_size
        if self._allocated < end + PREALLOC:
            self._grow(end)   # now, not on the first append

    def append(self, data: bytes) -> None:
        if self.end + len(data) > self._allocated:
            self._grow(self.end + len(data))
        os.pwrite(self._f.fileno(), data, self.end)
        self.end += len(data)

    def _grow(self, need: int) -> None:
        zeros = bytes(1 << 20)
        while self._allocated < need + PREALLOC:
            os.pwrite(self._f.fileno(), zeros, self._allocated)
            self._allocated += len(zeros)
        os.fsync(self._f.fileno())   # the new size and extents, once

    def sync(self) -> None:
        os.fdatasync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


_REC = struct.Struct("!BqII")   # kind, seq, body length, crc32 (of the fields before it + body)
_REQUEST, _DONE = 0x51, 0x44     # record kinds; a zero byte is the preallocated space after the last record


def _crc_record(rec: struct.Struct, fields: tuple[int, ...], payload: bytes) -> bytes:
    """``rec`` packed with ``fields`` and, last, the CRC of them and ``payload``; then ``payload``."""
    head = rec.pack(*fields, 0)[:-4]
    return head + struct.pack("!I", zlib.crc32(payload, zlib.crc32(head))) + payload


def _crc_ok(data: bytes, off: int, head_size: int, end: int, crc: int) -> bool:
    return zlib.crc32(data[off + head_size:end], zlib.crc32(data[off:off + head_size - 4])) == crc


class FileGatewayLog(MemoryGatewayLog):
    """Append-only file (space written ahead: ``_PreallocatedFile``), one fdatasync per batch:
    a request is acknowledged only once on disk. Records carry a CRC: a torn one (never
    acknowledged) ends the log on reopen. ``append`` returns once its batch is on disk
    (0.1 ms into the space written ahead: less than handing it to a thread and being woken),
    so ``synced()`` is always true."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        good = self._replay(self.path.read_bytes()) if self.path.exists() else 0
        self._f = _PreallocatedFile(self.path, good)
        self.fsyncs = 0          # one per appended batch (group commit): what a benchmark reports
        self.fsync_s = 0.0

    def _replay(self, data: bytes) -> int:
        """Rebuild the log from the file; the length of its whole records."""
        off = 0
        while off + _REC.size <= len(data):
            kind, seq, n, crc = _REC.unpack_from(data, off)
            end = off + _REC.size + n
            if kind not in (_REQUEST, _DONE) or end > len(data) or not _crc_ok(data, off, _REC.size, end, crc):
                break   # the zeros after the last record, or a torn one: never acknowledged
            if kind == _REQUEST:
                self.requests[seq] = data[off + _REC.size:end]
            else:
                self.done.add(seq)
            off = end
        return off

    def append(self, batch: list[tuple[int, bytes]]) -> None:
        super().append(batch)
        self._f.append(b"".join(_crc_record(_REC, (_REQUEST, s, len(b)), b) for s, b in batch))
        t = time.perf_counter()
        self._f.sync()
        self.fsync_s += time.perf_counter() - t
        self.fsyncs += 1

    def mark_done(self, seq: int) -> None:
        super().mark_done(seq)
        self._f.append(_crc_record(_REC, (_DONE, seq, 0), b""))   # no fsync: losing it only causes a replay

    def close(self) -> None:
        self._f.close()


class FileHistoryStore:
    """The history store as one append-only file (its space written ahead, ``_PreallocatedFile``):
    a group commit is ONE write of its records and
    ONE ``fdatasync`` (a SQLite transaction measured 1.1-2 ms here, this 0.1 ms), and ``store``
    returns only after it, so a HARDENED sent after ``store`` names requests that are on disk.

    Each record carries a CRC: a torn tail (a crash mid-append, never acknowledged) is dropped
    on reopen. The reads a recovering EV asks for (hardened requests by position, the latest
    checkpoint) are served from an in-memory index rebuilt from the file on open: the same
    answers as ``venue.stores.MemoryHistoryStore``. Trades are on disk; only their count is kept in memory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.bodies: dict[int, bytes] = {}      # position -> request body (positions contiguous from 0)
        self._top = -1
        self._trades = 0
        self._checkpoint: tuple[int, bytes] | None = None
        good = self._replay(self.path.read_bytes()) if self.path.exists() else 0
        self._f = _PreallocatedFile(self.path, good)   # a torn tail is overwritten by the next append
        self.commits = 0         # one per group commit (one fdatasync each)
        self.commit_s = 0.0
        self.rows = 0

    def _replay(self, data: bytes) -> int:
        """Rebuild the index from the file; the length of its whole records."""
        off = 0
        while off + _HREC.size <= len(data):
            kind, n, blen, ntr, crc = _HREC.unpack_from(data, off)
            end = off + _HREC.size + blen + ntr * _HTRADE.size
            if kind not in (_HARDENED, _CHECKPOINT) or end > len(data) or not _crc_ok(data, off, _HREC.size, end, crc):
                break   # the zeros after the last record, or a torn one (never acknowledged)
            body = data[off + _HREC.size: off + _HREC.size + blen]
            if kind == _HARDENED:
                self._index(n, body, ntr)
            else:
                self._keep_checkpoint(n, body)
            off = end
        return off

    def _index(self, n: int, body: bytes, ntrades: int) -> None:
        self.bodies[n] = body
        self._top = max(self._top, n)
        self._trades += ntrades

    def _keep_checkpoint(self, n: int, blob: bytes) -> None:
        if self._checkpoint is None or n > self._checkpoint[0]:
            self._checkpoint = (n, blob)

    @staticmethod
    def _record(kind: int, n: int, body: bytes, trades: list[Trade]) -> bytes:
        return _crc_record(_HREC, (kind, n, len(body), len(trades)), body + b"".join(_HTRADE.pack(*t) for t in trades))

    def _append(self, data: bytes) -> float:
        """Write ``data`` and wait until it is on disk; the seconds that took."""
        t = time.perf_counter()
        self._f.append(data)
        self._f.sync()
        return time.perf_counter() - t

    def store(self, batch: list[tuple[int, bytes, list[Trade]]]) -> None:
        new = [(n, body, tr) for n, body, tr in batch if n not in self.bodies]   # a duplicate position is ignored
        if not new:
            return
        self.commit_s += self._append(b"".join(self._record(_HARDENED, n, body, tr) for n, body, tr in new))
        self.commits += 1
        for n, body, tr in new:
            self._index(n, body, len(tr))
        self.rows += len(new)

    def top(self) -> int:
        return self._top

    def hardened(self, first: int, last: int) -> list[tuple[int, bytes]]:
        got = self.bodies
        return [(n, got[n]) for n in range(max(first, 0), min(last, self._top) + 1) if n in got]

    def put_checkpoint(self, n: int, blob: bytes) -> None:
        """Keep a checkpoint newer than the latest (every EV sends each one). No fdatasync of its
        own: the next group commit's covers it, and until then a crash only leaves an older one
        (every hardened request after that is kept: recovery is the same, only longer)."""
        if self._checkpoint is not None and n <= self._checkpoint[0]:
            return
        self._f.append(self._record(_CHECKPOINT, n, blob, []))
        self._keep_checkpoint(n, blob)

    def latest_checkpoint(self) -> tuple[int, bytes] | None:
        return self._checkpoint

    def trade_count(self) -> int:
        return self._trades

    def close(self) -> None:
        self._f.close()


class DurableStores:
    """Each host's store as a file in ``state_dir``: ``<host>.gwlog`` for a gateway,
    ``<host>.hrlog`` for a history recorder. A fresh (first) start removes what an
    earlier run left there; a recovering one reopens it."""

    def __init__(self, state_dir: str | Path) -> None:
        self.state_dir = Path(state_dir)
        self._open: dict[Path, FileGatewayLog | FileHistoryStore] = {}

    def _path(self, name: str, *, fresh: bool) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / name
        old = self._open.pop(path, None)
        if old is not None:
            old.close()
        if fresh:
            path.unlink(missing_ok=True)
        return path

    def gateway_log(self, host: str, *, fresh: bool) -> FileGatewayLog:
        path = self._path(f"{host}.gwlog", fresh=fresh)
        log = self._open[path] = FileGatewayLog(path)
        return log

    def history_store(self, host: str, *, fresh: bool) -> FileHistoryStore:
        path = self._path(f"{host}.hrlog", fresh=fresh)
        store = self._open[path] = FileHistoryStore(path)
        return store

    def close(self) -> None:
        for store in self._open.values():
            store.close()
        self._open.clear()
