"""What makes a benchmark row trustworthy: repeated measurements reduced to median, min and
max; the goal judged on the median; each figure set beside a reference copy and flagged when
it is more than ``TOLERANCE`` worse, where "worse" follows the row's explicit direction.

Pure functions on row dicts (no I/O but ``BenchFiles``, which is the one place that names the
files of ``make bench``: results/bench/bench.json and bench.md, and the reference copy
bench/reference.json kept in the repository).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rmptwin.errors import UserError

RUNS = 3              # measurements per figure unless a module says otherwise (module.RUNS)
TOLERANCE = 0.20      # a figure more than 20 % worse than the reference is a regression
HIGHER, LOWER = "higher", "lower"
REPO = Path(__file__).resolve().parents[3]

# Keys a module's row may carry that the harness consumes (not written out as they are).
_INPUT_ONLY = ("samples", "goal_min", "goal_max")
# What the reference keeps of a row: enough to compare and to say what was measured.
_REFERENCE_KEYS = ("bench", "metric", "value", "min", "max", "n", "unit", "better", "floor", "conditions")


class BenchFiles:
    """results/bench/ belongs to ``make bench``: each run rewrites its two files there."""

    def __init__(self, out_dir: str | Path = "results/bench", reference: str | Path | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.reference = Path(reference) if reference else REPO / "bench" / "reference.json"

    @property
    def json_path(self) -> Path:
        return self.out_dir / "bench.json"

    @property
    def markdown_path(self) -> Path:
        return self.out_dir / "bench.md"

    def read_reference(self) -> dict[str, Any]:
        if not self.reference.exists():
            return {"modes": {}}
        try:
            doc = json.loads(self.reference.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{self.reference}: not valid JSON ({e}); fix it or delete it") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("modes"), dict):
            raise UserError(f"{self.reference}: expected an object with a 'modes' object; fix it or delete it")
        return doc


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _judge(row: dict[str, Any], value: Any) -> bool | None:
    lo, hi = row.get("goal_min"), row.get("goal_max")
    if (lo is None and hi is None) or not _is_number(value):
        return None
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def aggregate(measurements: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from the same metric's rows of several runs (or one row with ``samples``):
    value = median, min, max, n; goal judged on the median when the row gives goal_min/max,
    else ``ok`` and ``note`` are those of the run nearest the median."""
    first = measurements[0]
    samples: list[Any] = []
    rows: list[dict[str, Any]] = []
    for m in measurements:
        taken = m["samples"] if m.get("samples") is not None else [m.get("value")]
        samples += taken
        rows += [m] * len(taken)
    numeric = [(v, r) for v, r in zip(samples, rows) if _is_number(v)]
    out = {k: v for k, v in first.items() if k not in _INPUT_ONLY}
    if not numeric:                                   # "skipped", None, a failure: nothing to reduce
        out.update(value=samples[0] if samples else None, min=None, max=None, n=len(samples))
        return out
    values = [v for v, _ in numeric]
    median = statistics.median(values)
    nearest = min(numeric, key=lambda vr: abs(vr[0] - median))[1]
    out.update({k: v for k, v in nearest.items() if k not in _INPUT_ONLY and k != "value"})
    out.update(value=median, min=min(values), max=max(values), n=len(values))
    judged = _judge(first, median)
    if judged is not None:
        out["ok"] = judged
    return out


def floor_ratio(row: dict[str, Any]) -> float | None:
    """How many times its floor's cost a figure is (>= 1: slower than the floor), or None
    without a floor. A row names its floor in ``floor`` (same unit, measured in the same run);
    for a rate (better: higher) the cost is its inverse, so 2.0 always reads "twice the floor"."""
    value, floor = row.get("value"), row.get("floor")
    if not (_is_number(value) and _is_number(floor)) or not value or not floor:
        return None
    return float(floor) / float(value) if row.get("better") == "higher" else float(value) / float(floor)


def merge_runs(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of repeated runs of one module -> one aggregated row per (bench, metric), in the
    order the metrics first appeared (a metric missing from some runs has a smaller n)."""
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for rows in runs:
        for row in rows:
            groups.setdefault((row.get("bench"), row["metric"]), []).append(row)
    return [aggregate(g) for g in groups.values()]


def worse_by(value: float, ref: float, better: str) -> float:
    """How much worse ``value`` is than ``ref`` as a fraction of ``ref`` (negative: better)."""
    if ref == 0:
        return 0.0 if value == ref else float("inf") if (value < ref) == (better == HIGHER) else float("-inf")
    change = (value - ref) / abs(ref)
    return -change if better == HIGHER else change


def compare(row: dict[str, Any], ref: dict[str, Any] | None, tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The row with ``reference``, ``worse_by`` and ``regression`` set (regression None:
    not comparable: no reference, no direction, a unit change, or not a number)."""
    out = {**row, "reference": None, "worse_by": None, "regression": None}
    if ref is None or not _is_number(ref.get("value")) or not _is_number(row.get("value")):
        return out
    out["reference"] = ref["value"]
    better = row.get("better")
    if better not in (HIGHER, LOWER) or ref.get("unit") != row.get("unit"):
        return out
    w = worse_by(row["value"], ref["value"], better)
    out["worse_by"] = w
    out["regression"] = w > tolerance
    return out


def compare_all(rows: list[dict[str, Any]], reference: dict[str, Any], mode: str,
                tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    refs = {(r.get("bench"), r.get("metric")): r for r in reference.get("modes", {}).get(mode, {}).get("rows", [])}
    return [compare(r, refs.get((r.get("bench"), r["metric"])), tolerance) for r in rows]


def updated_reference(reference: dict[str, Any], rows: list[dict[str, Any]], mode: str, all_benches: list[str],
                      meta: dict[str, Any]) -> dict[str, Any]:
    """The reference with this mode's rows of the benchmarks just run replaced; rows of the
    others kept; benchmarks never measured in this mode listed under ``absent``."""
    modes = dict(reference.get("modes", {}))
    ran = {r["bench"] for r in rows}
    old = modes.get(mode, {})
    kept = [r for r in old.get("rows", []) if r.get("bench") not in ran]
    new_rows = kept + [{k: r.get(k) for k in _REFERENCE_KEYS} for r in rows if _is_number(r.get("value"))]
    present = {r["bench"] for r in new_rows}
    absent = {b: old.get("absent", {}).get(b, "not measured on the reference machine yet")
              for b in all_benches if b not in present}
    modes[mode] = {**meta, "rows": new_rows, "absent": absent}
    return {**reference, "modes": modes}
