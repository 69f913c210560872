"""How late a node's timers fire: a fixed-size log histogram, cheap to add to and to merge.

An emulated node records, for every timer it fires, the wall time its core's ``handle_timer``
ran minus the deadline the core asked for (ns, 0 when early or on time). Keeping every value
would cost memory and I/O per fire; the histogram keeps counts in buckets 1/16 of an octave
wide (about 4.4 % apart) above 1 us, so p50/p99 are within that of the exact figure, and the
maximum exactly, with the run time its fire was due (``max_at_ns``: is the worst one a burst
at the start, a fault, the end?). Each node logs its histogram once, at the end (``Kind.TIMER_LATENESS``), and
the summary merges the histograms of a role. Pure: no clock, no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, TypeVar

STEPS_PER_OCTAVE = 16

_K = TypeVar("_K")


def bucket_of(ns: int) -> int:
    """Bucket 0 holds 0-1 us; bucket b > 0 holds [2**((b-1)/16), 2**(b/16)) us."""
    us = ns / 1000.0
    if us < 1.0:
        return 0
    return int(math.log2(us) * STEPS_PER_OCTAVE) + 1


def bucket_value_ns(b: int) -> float:
    """The value a bucket stands for: its geometric middle (0 for bucket 0)."""
    if b <= 0:
        return 0.0
    return 1000.0 * 2 ** ((b - 0.5) / STEPS_PER_OCTAVE)


class LatenessHistogram:
    """Counts of timer lateness per bucket, with the exact maximum and count."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.max_ns = 0
        self.max_at_ns: int | None = None   # when the latest fire was due (run time), if told

    def add(self, ns: int, at_ns: int | None = None) -> None:
        if ns < 0:
            ns = 0
        b = bucket_of(ns)
        self.counts[b] = self.counts.get(b, 0) + 1
        self.n += 1
        if ns > self.max_ns:
            self.max_ns = ns
            self.max_at_ns = at_ns

    def merge(self, other: LatenessHistogram) -> None:
        for b, c in other.counts.items():
            self.counts[b] = self.counts.get(b, 0) + c
        self.n += other.n
        if other.max_ns > self.max_ns:
            self.max_ns, self.max_at_ns = other.max_ns, other.max_at_ns

    def quantile_ns(self, q: float) -> float | None:
        """The bucket value holding the q-th quantile (capped at the exact maximum)."""
        if not self.n:
            return None
        rank = q * (self.n - 1)
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen > rank:
                return min(bucket_value_ns(b), float(self.max_ns))
        return float(self.max_ns)

    def summary_ms(self) -> dict[str, float | None]:
        """{p50, p99, max, n} in ms, rounded to the us (None when nothing fired)."""
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v / 1e6, 3)
        return {"p50": ms(self.quantile_ns(0.5)), "p99": ms(self.quantile_ns(0.99)),
                "max": ms(float(self.max_ns)) if self.n else None, "n": self.n}

    def to_detail(self) -> dict[str, Any]:
        """JSON-able form for an event's detail (bucket keys become strings in JSON)."""
        d: dict[str, Any] = {"buckets": {str(b): c for b, c in sorted(self.counts.items())},
                             "max_ns": self.max_ns, "n": self.n}
        if self.max_at_ns is not None:
            d["max_at_ns"] = self.max_at_ns
        return d

    @classmethod
    def from_detail(cls, d: dict[str, Any]) -> LatenessHistogram:
        h = cls()
        h.counts = {int(b): int(c) for b, c in (d.get("buckets") or {}).items()}
        h.n = int(d.get("n", sum(h.counts.values())))
        h.max_ns = int(d.get("max_ns", 0))
        at = d.get("max_at_ns")
        h.max_at_ns = None if at is None else int(at)
        return h


def merge_by_key(rows: Iterable[tuple[_K, dict[str, Any]]]) -> dict[_K, LatenessHistogram]:
    """{key: merged histogram} from ``(key, detail dict)`` rows of TIMER_LATENESS events."""
    out: dict[_K, LatenessHistogram] = {}
    for key, detail in rows:
        out.setdefault(key, LatenessHistogram()).merge(LatenessHistogram.from_detail(detail))
    return out


def lateness_by_role(
        role_details: Iterable[tuple[str, str | dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """{role: {p50, p99, max, n}} in ms from the (role, detail) of TIMER_LATENESS events, the
    detail a histogram as a dict or its JSON: summary.json's ``timer_lateness_ms`` and the
    emulation's overload line, one definition."""
    merged = merge_by_key((role, json.loads(det) if isinstance(det, str) else det) for role, det in role_details)
    return {role: h.summary_ms() for role, h in sorted(merged.items())}
