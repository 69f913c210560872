"""Shrinking a violating schedule: delta debugging (Zeller's ddmin) over its fault list.

``ddmin(faults, violates)`` returns a 1-minimal sublist that still violates: removing any one
fault of it makes the violation go away. ``violates`` runs the simulator with a candidate
schedule (same experiment, same seed) and asks whether the SAME checker still finds a
violation; each answer is cached by the candidate. A fault whose partner was removed (a
recover without its crash, a heal without a partition) is harmless: the simulator ignores it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Faults = list[dict[str, Any]]


def ddmin(faults: Faults, violates: Callable[[Faults], bool], max_tests: int = 64) -> tuple[Faults, int]:
    """(a 1-minimal violating sublist of ``faults``, tests run). ``faults`` must violate."""
    cache: dict[tuple[int, ...], bool] = {}
    tests = 0

    def test(sub: Faults) -> bool:
        nonlocal tests
        key = tuple(id(f) for f in sub)
        if key not in cache:
            if tests >= max_tests:
                return False   # out of budget: treat as passing, keep what we have
            tests += 1
            cache[key] = violates(sub)
        return cache[key]

    current, n = list(faults), 2
    while len(current) >= 2:
        size = len(current) // n
        chunks = [current[i:i + size] for i in range(0, len(current), size)] if size else [[f] for f in current]
        reduced = False
        for chunk in chunks:                         # a chunk alone violates: keep only it
            if test(chunk):
                current, n, reduced = chunk, 2, True
                break
        if not reduced:
            for chunk in chunks:                     # without a chunk it still violates: drop it
                rest = [f for f in current if all(f is not g for g in chunk)]
                if rest and test(rest):
                    current, n, reduced = rest, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(current):
                break
            n = min(len(current), 2 * n)
    if len(current) == 1 and test([]):
        return [], tests                            # the run violates with no fault at all
    return current, tests
