"""Spark analysis throughput: events analysed per second by the full `rmptwin analyze`
metric set (latency, fairness, loss, correlation, MINC, control, token, throughput) in local
mode, after start-up, on a synthetic log of >= 10M events (quick: ~1M), for every metric and per
family of metrics (job.compute's steps). Start-up and warm-up reported apart.

Where Spark pays (``where_spark_pays``): on the same ~1 M and ~10 M event logs (quick: ~0.1 M
and ~1 M) the same analysis embedded and on a two-worker standalone cluster on loopback
(``analysis.cluster``, as `rmptwin spark up` starts it), beside the pandas summary of the
figures summary.json defines (``analysis.summary.summarize``, what every run computes without
Spark; parquet read included on both sides), and the event count from which Spark is faster
than pandas on this machine (from a straight line a + b n through each engine's two sizes)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rmptwin.bench.harness import REPO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RUNS = 1       # one JVM and one log; the analysis itself is timed TIMINGS times in it
TIMINGS = 3
SIZES = (36_000, 360_000)        # packets: ~1 M and ~10 M events
SIZES_QUICK = (3_600, 36_000)    # ~0.1 M and ~1 M events
# The physical plan of the slowest Spark job of the last timing goes next to the bench table
# (spark_plan_after.txt), beside the plan of that job before the analysis was restructured
# (kept in the repository, copied there as spark_plan_before.txt).
PLAN_BEFORE = REPO / "bench" / "spark_plan_before.txt"


# The families of metrics job.compute times apart: its progress steps, in order.
FAMILIES = ("extract", "latency", "fairness", "loss", "minc", "control", "throughput")
Log = tuple[Path, int, float, int]   # (run directory, packets, seconds to generate it, events)


def _timed_compute(job: ModuleType, spark: SparkSession, run_dir: Path) -> tuple[float, dict[str, float]]:
    """Wall seconds of every metric, and per family (from job.compute's progress steps)."""
    marks: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    job.compute(spark, run_dir, lambda name: marks.append((name, time.perf_counter())))
    end = time.perf_counter()
    marks.append(("end", end))
    return end - t0, {marks[i][0]: marks[i + 1][1] - marks[i][1] for i in range(len(marks) - 1)}


@contextlib.contextmanager
def _slowest_action(record: list[Any]) -> Iterator[list[Any]]:
    """Time every DataFrame.collect, toArrow and parquet write while inside; ``record`` then
    holds the slowest as [seconds, what, formatted physical plan]: for a collect the final
    adaptive plan as executed, formatted on the way out (formatting is not timed); for a write
    the plan formatted just before it runs (not timed either)."""
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    def plan(df: DataFrame) -> str:
        jvm = df._sc._jvm
        assert jvm is not None   # a running session's
        text: str = jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted")
        return text

    def timed(orig: Callable[..., Any], frame_of: Callable[[Any], DataFrame], what: str) -> Callable[..., Any]:
        def wrapper(self: Any, *a: Any, **kw: Any) -> Any:
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
    # patched while inside, restored on the way out
    DataFrame.collect = timed(collect, lambda df: df, "collect")  # type: ignore[method-assign]  # timed for the bench
    DataFrame.toArrow = timed(arrow, lambda df: df, "toArrow")  # type: ignore[method-assign]  # timed for the bench
    DataFrameWriter.parquet = timed(  # type: ignore[method-assign]  # timed for the bench
        parquet, lambda w: w._df, "parquet write")
    try:
        yield record
    finally:
        DataFrame.collect, DataFrame.toArrow, DataFrameWriter.parquet = (  # type: ignore[method-assign]  # restored
            collect, arrow, parquet)
    if record and not isinstance(record[2], str):
        record[2] = plan(record[2])   # the executed (final adaptive) plan of a collect


def _stage_shuffle_writes(spark: SparkSession) -> dict[int, int]:
    """Shuffle bytes written (compressed, as moved) per stage id, from Spark's status store
    (kept with the UI off; it holds the last spark.ui.retainedStages stages)."""
    sc = spark.sparkContext
    jvm, gateway = sc._jvm, sc._gateway
    assert jvm is not None and gateway is not None   # a running context's
    stages = sc._jsc.sc().statusStore().stageList(jvm.java.util.ArrayList(), False, False,
                                                  gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    out: dict[int, int]
    out, it = {}, stages.iterator()   # a Scala Seq
    while it.hasNext():
        stage = it.next()
        out[stage.stageId()] = stage.shuffleWriteBytes()
    return out


def _write_plans(record: list[Any]) -> None:
    """spark_plan_after.txt (this code's slowest job) and spark_plan_before.txt next to the table."""
    if not record:
        return
    out = Path(os.environ.get("RMPTWIN_BENCH_OUT", "results/bench"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "spark_plan_after.txt").write_text(f"slowest job: {record[1]}, {record[0]:.2f} s\n{record[2]}")
    if PLAN_BEFORE.exists():
        shutil.copyfile(PLAN_BEFORE, out / "spark_plan_before.txt")


def run(quick: bool) -> list[dict[str, Any]]:
    from rmptwin.analysis import synthetic
    from rmptwin.rundir.run import RunDir

    sizes = SIZES_QUICK if quick else SIZES   # packets; ~28.6 events per packet on the synthetic tree
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-spark-") as tmp:
        runs = []
        for packets in sizes:
            t0 = time.perf_counter()
            run_dir = synthetic.write_run(Path(tmp) / f"run-{packets}", packets=packets, seed=1, rate=20_000.0)
            runs.append((run_dir, packets, time.perf_counter() - t0, RunDir(run_dir).event_count()))
        # quick: one timing per log but the largest's (a check that it works, not a measure)
        extra = 1 if quick else None
        rows = _embedded(Path(tmp), runs[-1], runs[:-1], extra or TIMINGS)
        rows += where_spark_pays(Path(tmp), runs, rows.pop(), extra)
    return rows


def _embedded(tmp: Path, largest: Log, others: list[Log], others_timings: int = TIMINGS) -> list[dict[Any, Any]]:
    """The embedded rows on the largest log (every metric, per family, shuffle, plans), then a
    last item the caller pops: {events: [wall seconds of every metric]} for every log."""
    from rmptwin.analysis import job, synthetic
    from rmptwin.analysis.session import spark_session

    run_dir, packets, gen, n_events = largest
    t0 = time.perf_counter()
    spark = spark_session()
    startup = time.perf_counter() - t0
    try:
        # Warm-up: one pass of every metric over a small log, so that JIT compilation and
        # query code generation (paid once per JVM) count as start-up, not as analysis.
        t0 = time.perf_counter()
        job.compute(spark, synthetic.write_run(tmp / "warmup", packets=2_000, seed=2, rate=20_000.0))
        warmup = time.perf_counter() - t0
        walls = {n: [_timed_compute(job, spark, d)[0] for _ in range(others_timings)] for d, _, _, n in others}
        timed = [_timed_compute(job, spark, run_dir) for _ in range(TIMINGS - 1)]
        seen = set(_stage_shuffle_writes(spark))
        with _slowest_action([]) as slowest:
            timed.append(_timed_compute(job, spark, run_dir))
        _write_plans(slowest)
        shuffled = sum(b for sid, b in _stage_shuffle_writes(spark).items() if sid not in seen)
    finally:
        spark.stop()
    walls[n_events] = [w for w, _ in timed]
    return _rows(n_events, packets, gen, startup, warmup, timed, shuffled) + [walls]


def _rows(n_events: int, packets: int, gen: float, startup: float, warmup: float,
          timed: list[tuple[float, dict[str, float]]], shuffled: int) -> list[dict[str, Any]]:
    walls = [w for w, _ in timed]
    cond = (f"embedded local[2], after start-up and warm-up; {n_events:,} synthetic events ({packets:,} packets, "
            f"8 receivers, 4 customers); {TIMINGS} timings in one JVM")
    rows = [{"metric": "events analysed/s (local[2])", "samples": [n_events / w for w in walls],
             "unit": "events/s", "goal": ">= 1M/s", "goal_min": 1_000_000, "better": "higher", "conditions": cond,
             "note": f"every metric in {min(walls):.1f} – {max(walls):.1f} s; "
                     f"{n_events / _median(walls) / 1e6:.3g} x the goal; log generated in {gen:.1f} s"}]
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


# ----------------------------------------------------------------------------- where Spark pays

CLUSTER_TIMINGS = 2     # per log on the cluster (its JVMs share this machine's cores)
PANDAS_TIMINGS = 3
# Two workers of one core each on loopback, ports apart from Spark's defaults and the tests'.
CLUSTER: dict[str, Any] = {"workers": 2, "cores": 1, "memory": "2g", "port": 7277, "webui_port": 8281}
EXECUTOR_CONF = {"spark.executor.memory": "2g"}   # the cached log is ~150 B/event: spill little


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2


def _pandas_seconds(run_dir: Path) -> float:
    """Wall seconds of summary.json's figures by pandas: read the log, summarize."""
    from rmptwin.analysis.summary import summarize
    from rmptwin.model import Experiment, LoadedExperiment, Topology
    from rmptwin.rundir.run import RunDir

    rd = RunDir(run_dir)
    man = rd.read_manifest()
    loaded = LoadedExperiment(experiment=Experiment.model_validate(man["experiment"]),
                              topology=Topology.model_validate(man["topology"]), path=run_dir / "synthetic.yaml")
    t0 = time.perf_counter()
    summarize(rd.read_events(), loaded)
    return time.perf_counter() - t0


def _cluster_walls(tmp: Path, runs: list[Log], timings: int = CLUSTER_TIMINGS) -> tuple[float, dict[int, list[float]]]:
    """(cluster + session start-up seconds, events -> wall seconds of every metric) on a
    two-worker standalone cluster, stopped afterwards whatever happens."""
    from rmptwin.analysis import cluster, job, synthetic
    from rmptwin.analysis.session import spark_session

    t0 = time.perf_counter()
    state = tmp / "spark-cluster"
    c = cluster.up(directory=state, **CLUSTER)
    try:
        spark = spark_session(c.master_url, conf=EXECUTOR_CONF)
        startup = time.perf_counter() - t0
        try:
            job.compute(spark, synthetic.write_run(tmp / "warmup-cluster", packets=2_000, seed=2, rate=20_000.0))
            walls = {n: [_timed_compute(job, spark, d)[0] for _ in range(timings)] for d, _, _, n in runs}
        finally:
            spark.stop()
    finally:
        cluster.down(state)
    return startup, walls


def crossover(points: dict[str, dict[int, float]]) -> float | None:
    """Events from which Spark ("spark": events -> seconds, the faster engine at each size) beats
    pandas, from a line a + b n through each engine's two sizes; None if the lines never cross
    above zero events with Spark ahead (0.0: Spark is ahead from the start)."""
    (n1, n2) = sorted(points["pandas"])
    lines = {}
    for engine, p in points.items():
        b = (p[n2] - p[n1]) / (n2 - n1)
        lines[engine] = (p[n1] - b * n1, b)
    (a_s, b_s), (a_p, b_p) = lines["spark"], lines["pandas"]
    if b_s >= b_p:
        return 0.0 if a_s < a_p else None
    return max(0.0, (a_s - a_p) / (b_p - b_s))


def where_spark_pays(tmp: Path, runs: list[Log], embedded: dict[int, list[float]],
                     timings: int | None = None) -> list[dict[str, Any]]:
    """Rows: the analysis embedded (the smaller log: the larger is _rows'), on the cluster, the
    pandas summary, for each log; and the event count from which Spark is faster than pandas."""
    startup, on_cluster = _cluster_walls(tmp, runs, timings or CLUSTER_TIMINGS)
    pandas = {n: [_pandas_seconds(d) for _ in range(timings or PANDAS_TIMINGS)] for d, _, _, n in runs}
    rows = []
    for _, packets, _, n in runs:
        size = f"{n / 1e6:.1f} M events"
        common = f"{n:,} synthetic events ({packets:,} packets, 8 receivers, 4 customers); after start-up"
        if n != runs[-1][3]:
            rows.append(_rate_row(f"events analysed/s (local[2]), {size}", n, embedded[n],
                                  f"embedded local[2]; {common}; {len(embedded[n])} timings in one JVM"))
        rows.append(_rate_row(f"events analysed/s (standalone 2 workers x 1 core), {size}", n, on_cluster[n],
                              f"spark://127.0.0.1:{CLUSTER['port']}, 2 workers x 1 core x {CLUSTER['memory']} on "
                              f"loopback; {common}; {len(on_cluster[n])} timings"))
        rows.append({"metric": f"events summarized/s (pandas, the summary's definitions), {size}",
                     "samples": [n / w for w in pandas[n]], "unit": "events/s", "better": "higher",
                     "conditions": f"analysis.summary.summarize in this process, parquet read included; {common}; "
                                   f"{len(pandas[n])} timings",
                     "note": "the summary's figures (latency, fairness, agreement, losses, control per data, "
                             "customers), the definitions Spark's metrics share"})
    spark_best = {n: min(_median(embedded[n]), _median(on_cluster[n])) for _, _, _, n in runs}
    n_star = crossover({"spark": spark_best, "pandas": {n: _median(w) for n, w in pandas.items()}})
    seen = ", ".join(f"{n / 1e6:.1f} M: Spark {spark_best[n]:.1f} s, pandas {_median(pandas[n]):.1f} s"
                     for _, _, _, n in runs)
    rows.append({"metric": "events from which Spark is faster than pandas", "value": n_star, "unit": "events", "better": "lower",
                 "conditions": "the faster of embedded and cluster Spark (every metric) vs the pandas summary, "
                               "medians, a straight line a + b n through each engine's two sizes",
                 "note": (f"{seen}; " + ("Spark never catches up on this machine" if n_star is None
                                         else f"Spark ahead from ~{n_star / 1e6:.1f} M events"))})
    rows.append({"metric": "Spark standalone start-up (2 workers + session)", "value": startup, "unit": "s",
                 "better": "lower", "conditions": "master, 2 worker JVMs and the driver's session on loopback (n = 1)"})
    return rows


def _rate_row(metric: str, n: int, walls: list[float], conditions: str) -> dict[str, Any]:
    ratio = n / _median(walls) / 1_000_000
    return {"metric": metric, "samples": [n / w for w in walls], "unit": "events/s", "goal": ">= 1M/s",
            "goal_min": 1_000_000, "better": "higher", "conditions": conditions,
            "note": f"every metric in {min(walls):.1f} – {max(walls):.1f} s; {ratio:.3g} x the goal"}
