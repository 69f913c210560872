"""The bench's statement "Spark is faster than pandas from N events": where two straight lines
(fixed cost + cost per event, through each engine's two measured sizes) cross."""

from __future__ import annotations

import pytest

from rmptwin.bench.bench_spark import crossover


def test_fixed_cost_spark_overtakes_per_event_pandas():
    # pandas 1 us/event from 0; Spark 20 s of fixed cost + 0.1 us/event: equal at 20 / 0.9e-6 events
    assert crossover({"spark": {10**6: 20.1, 10**7: 21.0},
                      "pandas": {10**6: 1.0, 10**7: 10.0}}) == pytest.approx(20 / 0.9e-6)


def test_ahead_from_the_start_and_never():
    assert crossover({"spark": {10**6: 0.5, 10**7: 5.0}, "pandas": {10**6: 1.0, 10**7: 10.0}}) == 0.0
    assert crossover({"spark": {10**6: 5.0, 10**7: 50.0}, "pandas": {10**6: 1.0, 10**7: 10.0}}) is None
