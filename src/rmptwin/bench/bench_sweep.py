"""Sweep throughput: simulated runs per second through Spark (embedded local[*], one task per
(point, seed)) against the same runs in a plain Python loop in this process, the honest
single-process baseline. Spark session start-up and a warm-up sweep (Python workers forked,
modules imported) are reported apart; each timed sweep writes its own fresh sweep table."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmptwin.sweeps.sweep_loop import Runner, SweepPlan

RUNS = 1        # one JVM; each figure is timed TIMINGS times inside it
TIMINGS = 3
EXPERIMENT = Path(__file__).resolve().parents[3] / "experiments" / "line3.yaml"


def _plan(quick: bool) -> SweepPlan:
    from rmptwin.model import load_experiment
    from rmptwin.sweeps.sweep_loop import SweepPlan

    rates = [50, 100, 200, 400] if quick else [50, 100, 200, 400, 800, 1200]
    sets: dict[str, list[Any]] = {"workload.rate_per_source": rates, "protocol.delta_a_ms": [150]}
    return SweepPlan(load_experiment(EXPERIMENT), sets, [1, 2])


def _timed(plan: SweepPlan, out: Path, runner: Runner | None = None) -> tuple[float, int]:
    from rmptwin.sweeps.sweep_loop import run_sweep

    t0 = time.perf_counter()
    outcome = run_sweep(plan, out=out, runner=runner)
    return time.perf_counter() - t0, outcome.ran


def run(quick: bool) -> list[dict[str, Any]]:
    from rmptwin.sweeps.spark import run_spark, sweep_session
    from rmptwin.sweeps.sweep_loop import run_loop

    plan = _plan(quick)
    n = len(plan.seeds) * len(plan.sets["workload.rate_per_source"])
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-sweep-") as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        spark = sweep_session()
        startup = time.perf_counter() - t0
        try:
            cores = spark.sparkContext.defaultParallelism
            on_spark = lambda tasks, on_rows: run_spark(tasks, on_rows, spark=spark)
            warmup, _ = _timed(plan, tmp / "warmup", on_spark)
            spark_walls = [_timed(plan, tmp / f"spark{i}", on_spark)[0] for i in range(TIMINGS)]
        finally:
            spark.stop()
        loop_walls = [_timed(plan, tmp / f"loop{i}", run_loop)[0] for i in range(TIMINGS)]
    runs = f"line3.yaml, {n} simulated runs (rate_per_source x 2 seeds, 2 s of load each); {os.cpu_count()} CPUs"
    cond = f"{runs}; Spark local[*] (default parallelism {cores}), after start-up and warm-up"
    rows: list[dict[str, Any]] = [
        {"metric": "sweep runner/s through Spark (local[*])", "samples": [n / w for w in spark_walls],
         "unit": "runner/s", "better": "higher", "conditions": cond, "note": "one task per (point, seed); rows "
         "written to sweep.parquet after each batch"},
        {"metric": "sweep runner/s, plain Python loop (same process)", "samples": [n / w for w in loop_walls],
         "unit": "runner/s", "better": "higher", "conditions": f"{runs}; this process, no Spark",
         "note": "the same runs, simulate + summarize, one after another"},
        {"metric": "sweep: Spark session start-up", "value": startup, "unit": "s", "better": "lower",
         "conditions": "embedded local[*], JVM start included; once per sweep command (n = 1)"},
        {"metric": "sweep: Spark warm-up sweep", "value": warmup, "unit": "s", "better": "lower",
         "conditions": f"the first {n}-run sweep in a fresh JVM: Python workers start and import rmptwin (n = 1)"},
    ]
    return rows
