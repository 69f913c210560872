"""Spark analysis throughput: events analysed per second by the full `rmptwin analyze`
metric set (latency, fairness, loss, correlation, MINC, control, token, throughput) in local
mode, after start-up, on a synthetic log of >= 10M events (quick: ~1M), for every metric and per
family of metrics (job.compute's steps). Start-up and warm-up reported apart."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

RUNS = 1       # one JVM and one log; the analysis itself is timed TIMINGS times in it
TIMINGS = 3


# The families of metrics job.compute times apart: its progress steps, in order.
FAMILIES = ("extract", "latency", "fairness", "loss", "minc", "control", "throughput")


def _timed_compute(job, spark, run_dir) -> tuple[float, dict[str, float]]:
    """Wall seconds of every metric, and per family (from job.compute's progress steps)."""
    marks: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    job.compute(spark, run_dir, lambda name: marks.append((name, time.perf_counter())))
    end = time.perf_counter()
    marks.append(("end", end))
    return end - t0, {marks[i][0]: marks[i + 1][1] - marks[i][1] for i in range(len(marks) - 1)}


def run(quick: bool) -> list[dict]:
    from ..analysis import job, synthetic
    from ..analysis.session import spark_session
    from ..rundir import RunDir

    packets = 36_000 if quick else 360_000   # ~28.6 events per packet on the synthetic tree
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-spark-") as tmp:
        t0 = time.perf_counter()
        run_dir = synthetic.write_run(Path(tmp) / "run", packets=packets, seed=1, rate=20_000.0)
        gen = time.perf_counter() - t0
        n_events = RunDir(run_dir).event_count()
        t0 = time.perf_counter()
        spark = spark_session()
        startup = time.perf_counter() - t0
        try:
            # Warm-up: one pass of every metric over a small log, so that JIT compilation and
            # query code generation (paid once per JVM) count as start-up, not as analysis.
            t0 = time.perf_counter()
            job.compute(spark, synthetic.write_run(Path(tmp) / "warmup", packets=2_000, seed=2, rate=20_000.0))
            warmup = time.perf_counter() - t0
            timed = [_timed_compute(job, spark, run_dir) for _ in range(TIMINGS)]
        finally:
            spark.stop()
    return _rows(n_events, packets, gen, startup, warmup, timed)


def _rows(n_events: int, packets: int, gen: float, startup: float, warmup: float,
          timed: list[tuple[float, dict[str, float]]]) -> list[dict]:
    walls = [w for w, _ in timed]
    cond = (f"embedded local[2], after start-up and warm-up; {n_events:,} synthetic events ({packets:,} packets, "
            f"8 receivers, 4 customers); {TIMINGS} timings in one JVM")
    rows = [{"metric": "events analysed/s (local[2])", "samples": [n_events / w for w in walls],
             "unit": "events/s", "goal": ">= 1M/s", "goal_min": 1_000_000, "better": "higher", "conditions": cond,
             "note": f"every metric in {min(walls):.1f} – {max(walls):.1f} s; log generated in {gen:.1f} s"}]
    for family in FAMILIES:
        secs = [steps.get(family, 0.0) for _, steps in timed]
        extra = "; reads, parses, lays out and caches the log once for every step" if family == "extract" else ""
        rows.append({"metric": f"events analysed/s, {family} step alone",
                     "samples": [n_events / max(s, 1e-9) for s in secs], "unit": "events/s", "better": "higher",
                     "conditions": cond,
                     "note": f"{family} step of `rmptwin analyze` in {min(secs):.1f} – {max(secs):.1f} s{extra}"})
    rows.append({"metric": "Spark session start-up", "value": startup, "unit": "s", "better": "lower",
                 "conditions": "embedded local[2], JVM start included; once per run (n = 1)"})
    rows.append({"metric": "Spark warm-up (every metric on a 2,000-packet log)", "value": warmup, "unit": "s",
                 "better": "lower", "conditions": "once per JVM (n = 1)",
                 "note": "JIT + query codegen paid once per JVM; not counted in events analysed/s"})
    return rows
