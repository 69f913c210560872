"""Spark analysis throughput: events analysed per second by the full `rmptwin analyze`
metric set (latency, fairness, loss, correlation, MINC, control, token, throughput) in local
mode, after start-up, on a synthetic log of >= 10M events (quick: ~1M), for every metric and per
family of metrics (job.compute's steps). Start-up and warm-up reported apart."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from rmptwin.bench.harness import REPO

RUNS = 1       # one JVM and one log; the analysis itself is timed TIMINGS times in it
TIMINGS = 3
# The physical plan of the slowest Spark job of the last timing goes next to the bench table
# (spark_plan_after.txt), beside the plan of that job before the analysis was restructured
# (kept in the repository, copied there as spark_plan_before.txt).
PLAN_BEFORE = REPO / "bench" / "spark_plan_before.txt"


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


@contextlib.contextmanager
def _slowest_action(record: list):
    """Time every DataFrame.collect, toArrow and parquet write while inside; ``record`` then
    holds the slowest as [seconds, what, formatted physical plan]: for a collect the final
    adaptive plan as executed, formatted on the way out (formatting is not timed); for a write
    the plan formatted just before it runs (not timed either)."""
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    def plan(df) -> str:
        return df._sc._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted")

    def timed(orig, frame_of, what):
        def wrapper(self, *a, **kw):
            df = frame_of(self)
            # A write runs its frame in a query of its own: the frame's plan, taken while the
            # cached tables it reads exist, is the adaptive plan before execution.
            before = plan(df) if what == "parquet write" else None
            t0 = time.perf_counter()
            out = orig(self, *a, **kw)
            secs = time.perf_counter() - t0
            if not record or secs > record[0]:
                record[:] = [secs, what, before or df]
            return out
        return wrapper

    collect, arrow, parquet = DataFrame.collect, DataFrame.toArrow, DataFrameWriter.parquet
    DataFrame.collect = timed(collect, lambda df: df, "collect")
    DataFrame.toArrow = timed(arrow, lambda df: df, "toArrow")
    DataFrameWriter.parquet = timed(parquet, lambda w: w._df, "parquet write")
    try:
        yield record
    finally:
        DataFrame.collect, DataFrame.toArrow, DataFrameWriter.parquet = collect, arrow, parquet
    if record and not isinstance(record[2], str):
        record[2] = plan(record[2])   # the executed (final adaptive) plan of a collect


def _stage_shuffle_writes(spark) -> dict[int, int]:
    """Shuffle bytes written (compressed, as moved) per stage id, from Spark's status store
    (kept with the UI off; it holds the last spark.ui.retainedStages stages)."""
    sc = spark.sparkContext
    jvm = sc._jvm
    stages = sc._jsc.sc().statusStore().stageList(jvm.java.util.ArrayList(), False, False,
                                                  sc._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    out, it = {}, stages.iterator()   # a Scala Seq
    while it.hasNext():
        stage = it.next()
        out[stage.stageId()] = stage.shuffleWriteBytes()
    return out


def _write_plans(record: list) -> None:
    """spark_plan_after.txt (this code's slowest job) and spark_plan_before.txt next to the table."""
    if not record:
        return
    out = Path(os.environ.get("RMPTWIN_BENCH_OUT", "results/bench"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "spark_plan_after.txt").write_text(f"slowest job: {record[1]}, {record[0]:.2f} s\n{record[2]}")
    if PLAN_BEFORE.exists():
        shutil.copyfile(PLAN_BEFORE, out / "spark_plan_before.txt")


def run(quick: bool) -> list[dict]:
    from rmptwin.analysis import job, synthetic
    from rmptwin.analysis.session import spark_session
    from rmptwin.rundir import RunDir

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
            timed = [_timed_compute(job, spark, run_dir) for _ in range(TIMINGS - 1)]
            seen = set(_stage_shuffle_writes(spark))
            with _slowest_action([]) as slowest:
                timed.append(_timed_compute(job, spark, run_dir))
            _write_plans(slowest)
            shuffled = sum(b for sid, b in _stage_shuffle_writes(spark).items() if sid not in seen)
        finally:
            spark.stop()
    return _rows(n_events, packets, gen, startup, warmup, timed, shuffled)


def _rows(n_events: int, packets: int, gen: float, startup: float, warmup: float,
          timed: list[tuple[float, dict[str, float]]], shuffled: int) -> list[dict]:
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
    rows.append({"metric": "Spark shuffle written per event, every metric", "value": shuffled / n_events,
                 "unit": "B/event", "better": "lower", "conditions": f"{cond}; the last timing (n = 1)",
                 "note": f"{shuffled / 1e6:,.0f} MB written by every shuffle, compressed, from Spark's status store"})
    rows.append({"metric": "Spark session start-up", "value": startup, "unit": "s", "better": "lower",
                 "conditions": "embedded local[2], JVM start included; once per run (n = 1)"})
    rows.append({"metric": "Spark warm-up (every metric on a 2,000-packet log)", "value": warmup, "unit": "s",
                 "better": "lower", "conditions": "once per JVM (n = 1)",
                 "note": "JIT + query codegen paid once per JVM; not counted in events analysed/s"})
    return rows
