"""The store interfaces the gateway and history-recorder cores are given, and their in-memory kind.

The cores call a store synchronously and model the fsync/commit *latency* themselves (a
timer), so the same core runs against an in-memory store in the simulator and against a
real file (gateway, fsync) or SQLite database (history recorder) where it runs for real
(``rmptwin.node.durable_stores``). A store outlives the core that uses it: a crashed
and restarted core is handed the same store, as a restarted process finds its disk. The
driver owns the stores (``VenueStores``) and hands them to the factories.
"""

from __future__ import annotations

from typing import Protocol

from rmptwin.venue.orderbook import Trade


class GatewayLog(Protocol):
    """Numbered requests of one gateway and which of them are complete."""

    def append(self, batch: list[tuple[int, bytes]]) -> None: ...
    def synced(self) -> bool: ...   # the last append is on disk (a real log may fsync in the background)
    def mark_done(self, seq: int) -> None: ...
    def last_seq(self) -> int: ...
    def get(self, seq: int) -> bytes | None: ...
    def unfinished(self) -> list[tuple[int, bytes]]: ...


class HistoryStore(Protocol):
    """Hardened requests by position, their trades, and order-book checkpoints."""

    commits: int

    def store(self, batch: list[tuple[int, bytes, list[Trade]]]) -> None: ...
    def top(self) -> int: ...
    def hardened(self, first: int, last: int) -> list[tuple[int, bytes]]: ...
    def put_checkpoint(self, n: int, blob: bytes) -> None: ...
    def latest_checkpoint(self) -> tuple[int, bytes] | None: ...
    def trade_count(self) -> int: ...


class VenueStores(Protocol):
    """Where a driver keeps each host's store: ``fresh`` (a first start) begins with an empty
    one, otherwise (a recovering host) it gets back what that host had."""

    def gateway_log(self, host: str, *, fresh: bool) -> GatewayLog: ...
    def history_store(self, host: str, *, fresh: bool) -> HistoryStore: ...


# ---------------------------------------------------------------------- gateway log
class MemoryGatewayLog:
    """Numbered requests and which are complete; survives core restarts, not the run."""

    def __init__(self) -> None:
        self.requests: dict[int, bytes] = {}
        self.done: set[int] = set()

    def append(self, batch: list[tuple[int, bytes]]) -> None:
        for seq, body in batch:
            self.requests[seq] = body

    def synced(self) -> bool:
        return True

    def mark_done(self, seq: int) -> None:
        self.done.add(seq)

    def last_seq(self) -> int:
        return max(self.requests, default=-1)

    def get(self, seq: int) -> bytes | None:
        return self.requests.get(seq)

    def unfinished(self) -> list[tuple[int, bytes]]:
        return sorted((s, b) for s, b in self.requests.items() if s not in self.done)


# ---------------------------------------------------------------------- history store
class MemoryHistoryStore:
    """Hardened requests by position, trades, and order-book checkpoints."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[bytes, int]] = {}   # position -> (request body, trade count)
        self.trades: dict[int, list[Trade]] = {}
        self.checkpoint: tuple[int, bytes] | None = None
        self.commits = 0

    def store(self, batch: list[tuple[int, bytes, list[Trade]]]) -> None:
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


class MemoryStores:
    """Every host's store in memory, kept across crash and recovery (the simulator's disks).

    One of these belongs to one run: the stores go when it does."""

    def __init__(self) -> None:
        self.gateway_logs: dict[str, MemoryGatewayLog] = {}
        self.history_stores: dict[str, MemoryHistoryStore] = {}

    def gateway_log(self, host: str, *, fresh: bool) -> MemoryGatewayLog:
        if fresh or host not in self.gateway_logs:
            self.gateway_logs[host] = MemoryGatewayLog()
        return self.gateway_logs[host]

    def history_store(self, host: str, *, fresh: bool) -> MemoryHistoryStore:
        if fresh or host not in self.history_stores:
            self.history_stores[host] = MemoryHistoryStore()
        return self.history_stores[host]
