"""Summary statistics every section of summary.json shares, defined once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def percentiles(values: Iterable[float]) -> dict[str, Any]:
    """p50, p99 (linear interpolation between the two nearest values), max, mean and n of
    ``values``; None for an empty set."""
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return {"p50": None, "p99": None, "max": None, "mean": None, "n": 0}
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max()), "mean": float(a.mean()), "n": int(a.size)}
