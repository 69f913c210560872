"""Per-node event logs on the node's own disk, and their merge into the run's Parquet.

A node appends one JSON line per event (the columns of ``tables.row``) and flushes every
fraction of a second, so a node killed by a crash fault keeps everything it logged before
the last flush; a torn last line is skipped when the run collects the logs.

Logging sits on every node's per-message path (a receiver logs about 2.4 events per
datagram), so a line is formatted from cached JSON pieces and ``detail`` is written as a
JSON object, one encoder call per event instead of two (``json.dumps`` of the row around a
``json.dumps`` of its detail cost ~5 us per event, a third of a receiver's CPU per datagram);
``merge_logs`` turns the object back into the detail string ``tables.row`` gives, and adds
the typed detail columns (``tables.DETAIL_COLUMNS``) from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from rmptwin.core.events import Event
from rmptwin.records.tables import DETAIL_COLUMNS, EVENT_SCHEMA, detail_arrays

_COMPACT = json.JSONEncoder(separators=(",", ":"))   # one encoder, not one per json.dumps call


class _Quoted(dict[str, str]):
    """str -> its JSON string literal, computed once per distinct string."""

    def __missing__(self, s: str) -> str:
        q = self[s] = json.dumps(s)
        return q


class EventWriter:
    def __init__(self, path: str | Path, flush_every: int = 512) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", buffering=1 << 16)
        self._pending = 0
        self.flush_every = flush_every
        self.count = 0
        self._q = _Quoted()

    def add(self, t_ns: int, node: str, role: str, ev: Event) -> None:
        q = self._q
        detail = _COMPACT.encode(ev.detail) if ev.detail else "{}"
        self._f.write(f'{{"t_ns":{int(t_ns)},"node":{q[node]},"role":{q[role]},"kind":{q[ev.kind]},'
                      f'"src":{q[ev.src]},"src_seq":{int(ev.src_seq)},"gseq":{int(ev.gseq)},'
                      f'"bytes":{int(ev.bytes)},"detail":{detail}}}\n')
        self.count += 1
        self._pending += 1
        if self._pending >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if self._pending and not self._f.closed:
            self._f.flush()
            self._pending = 0

    def close(self) -> None:
        # No fsync: the runner reads the log through the same kernel right after, and a node
        # killed by a crash fault leaves its written lines in the page cache all the same. Thirty
        # nodes fsyncing at STOP held ext4's journal, and the nodes not yet stopped blocked in
        # their own log writes: customers' timers fired up to 0.5 s late (quickstart, TDF 1).
        self._f.close()


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows of one node log and the number of torn or unreadable lines skipped."""
    rows: list[dict[str, Any]] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
                if isinstance(r, dict) and "kind" in r:
                    rows.append(r)
                    continue
            except ValueError:
                pass
            bad += 1
    return rows, bad


def _detail_object(detail: Any) -> dict[str, Any] | None:
    """A logged detail as a dict (a node writes an object; a string is parsed), None if not one."""
    if isinstance(detail, str):
        try:
            detail = json.loads(detail)
        except ValueError:
            return None
    return detail if isinstance(detail, dict) else None


def merge_logs(paths: list[Path]) -> tuple[pa.Table, int]:
    """All node logs as one ``EVENT_SCHEMA`` table in (t_ns, node) order; and lines skipped."""
    rows: list[dict[str, Any]] = []
    bad = 0
    for p in sorted(paths):
        r, b = read_jsonl(p)
        rows += r
        bad += b
    rows.sort(key=lambda r: (r["t_ns"], r["node"]))
    cols = {name: [r.get(name) for r in rows] for name in EVENT_SCHEMA.names if name not in DETAIL_COLUMNS}
    details = [_detail_object(d) for d in cols["detail"]]
    cols["detail"] = [d if isinstance(d, str) else _COMPACT.encode(d) for d in cols["detail"]]
    # the typed detail columns the analysis reads instead of parsing detail (tables.DETAIL_COLUMNS)
    cols.update(zip(DETAIL_COLUMNS, detail_arrays(details)))
    return pa.Table.from_pydict(cols, schema=EVENT_SCHEMA), bad
