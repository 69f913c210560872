"""latency_summary reads percentiles from sorted arrays instead of Spark's percentile
aggregate (one pass instead of two over grouping sets): the figures must stay the very same
doubles Spark's percentile gives, and the CDF points the exact ranks percentile_approx
approximates."""

from __future__ import annotations

import math
import random

import pytest
from pyspark.sql import functions as F

from rmptwin.analysis import latency

pytestmark = pytest.mark.spark


def test_latency_summary_equals_sparks_percentile_and_mean_exactly(spark):
    rng = random.Random(5)
    rows = [(stage, region, rng.randrange(10**6, 10**10))
            for stage, region, n in (("deliver", "east", 997), ("deliver", "west", 1500), ("customer", "east", 2))
            for _ in range(n)]
    lat = spark.createDataFrame(rows, "stage string, region string, latency_ns long")
    got = {(r["stage"], r["region"]): r for r in latency.latency_summary(lat, [0.0, 0.3, 1.0])}
    spark_says = lambda df: df.agg(
        F.percentile("latency_ns", [0.5, 0.99]).alias("p"), F.mean("latency_ns").alias("m"),
        F.count("*").alias("n"), F.max("latency_ns").alias("max")).first()
    for stage, region in [("deliver", "east"), ("deliver", "west"), ("customer", "east"), ("deliver", "all")]:
        sub = lat.filter(F.col("stage") == stage)
        if region != "all":
            sub = sub.filter(F.col("region") == region)
        want, row = spark_says(sub), got[(stage, region)]
        assert (row["p50_ns"], row["p99_ns"]) == tuple(want["p"])  # equal doubles, not approximately
        assert (row["n"], row["mean_ns"], row["max_ns"]) == (want["n"], want["m"], want["max"])
        values = sorted(r[0] for r in sub.select("latency_ns").collect())
        assert row["q"] == [values[max(math.ceil(q * len(values)), 1) - 1] for q in (0.0, 0.3, 1.0)]
