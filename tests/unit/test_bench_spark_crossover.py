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


def test_rows_name_each_engine_and_size_and_the_crossover(monkeypatch, tmp_path):
    from rmptwin.bench import bench_spark

    runs = [(tmp_path / "a", 3_600, 0.1, 1_000_000), (tmp_path / "b", 36_000, 1.0, 10_000_000)]
    monkeypatch.setattr(bench_spark, "_cluster_walls",
                        lambda tmp, runs, timings: (30.0, {10**6: [21.0], 10**7: [22.0]}))
    pandas = iter([1.0, 10.0])
    monkeypatch.setattr(bench_spark, "_pandas_seconds", lambda d: next(pandas))
    rows = bench_spark.where_spark_pays(tmp_path, runs, {10**6: [20.1], 10**7: [21.0]}, timings=1)
    metrics = [r["metric"] for r in rows]
    assert metrics == ["events analysed/s (local[2]), 1.0 M events",
                       "events analysed/s (standalone 2 workers x 1 core), 1.0 M events",
                       "events summarized/s (pandas, the summary's definitions), 1.0 M events",
                       "events analysed/s (standalone 2 workers x 1 core), 10.0 M events",
                       "events summarized/s (pandas, the summary's definitions), 10.0 M events",
                       "events from which Spark is faster than pandas",
                       "Spark standalone start-up (2 workers + session)"]
    cross = rows[-2]
    assert cross["value"] == pytest.approx(20 / 0.9e-6) and "Spark ahead from ~22.2 M events" in cross["note"]
    assert rows[0]["goal_min"] == 1_000_000 and "0.0498 x the goal" in rows[0]["note"]
