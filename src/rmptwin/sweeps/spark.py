"""Sweep runs as Spark tasks: one task per (point, seed), on any master.

The tasks run ``sweeps.task.run_simulated`` in Spark's Python workers. On a cluster the
executors need rmptwin's dependencies (pydantic, pyarrow, pandas, numpy); rmptwin itself is
shipped with the job as a zip (``SparkContext.addPyFile``), and each task carries its
experiment and topology as JSON, so no executor reads a file of this machine.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from rmptwin.errors import UserError
from rmptwin.sweeps.task import ERROR, run_task

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

SWEEP_MASTER = "local[*]"
POLL_S = 0.25


class _Box(TypedDict, total=False):
    """What a batch's Spark job hands back to the caller's thread."""

    rows: list[dict[str, Any]]
    error: BaseException


def sweep_session(master: str | None = None) -> SparkSession:
    from rmptwin.analysis.session import spark_session

    spark = spark_session(master or SWEEP_MASTER, app_name="rmptwin-sweep")
    if not cast(str, spark.sparkContext.master).startswith("local"):   # a running context has a master
        _ship_package(spark.sparkContext)
    return spark


def _ship_package(sc: SparkContext) -> None:
    """Give remote executors this checkout's rmptwin (its dependencies must be installed there)."""
    package = Path(__file__).resolve().parents[1]
    tmp = Path(tempfile.mkdtemp(prefix="rmptwin-sweep-"))
    # the driver serves the archive from this path for as long as the context lives: removed at
    # exit, not here (each cluster sweep left a 1.5 MB copy in /tmp before)
    atexit.register(shutil.rmtree, tmp, True)
    archive = shutil.make_archive(str(tmp / "rmptwin"), "zip", root_dir=package.parent, base_dir=package.name)
    sc.addPyFile(archive)


def run_spark(tasks: list[dict[str, Any]], on_rows: Callable[[list[dict[str, Any]]], None], master: str | None = None,
              tick: Callable[[int], None] | None = None, batch: int | None = None,
              spark: SparkSession | None = None) -> None:
    """Run ``tasks`` in batches; ``on_rows`` gets each batch's rows, ``tick(n)`` the number of
    tasks of the current batch finished so far (for a progress bar)."""
    spark = spark or sweep_session(master)
    sc = spark.sparkContext
    size = batch or max(4 * sc.defaultParallelism, 8)
    for start in range(0, len(tasks), size):
        chunk = tasks[start:start + size]
        rows = _run_batch(sc, chunk, tick)
        on_rows([r for r in rows if ERROR not in r])   # the finished runs are kept even if one failed
        failed = [r for r in rows if ERROR in r]
        if failed:
            raise UserError(f"{len(failed)} of {len(chunk)} sweep runs failed; first (point {failed[0]['point']}, "
                            f"seed {failed[0]['seed']}): {failed[0][ERROR]}")


def _run_batch(sc: SparkContext, chunk: list[dict[str, Any]],
               tick: Callable[[int], None] | None) -> list[dict[str, Any]]:
    group = f"rmptwin-sweep-{time.monotonic_ns()}"
    box: _Box = {}

    def collect() -> None:
        sc.setJobGroup(group, "rmptwin sweep", interruptOnCancel=True)
        try:
            box["rows"] = sc.parallelize(chunk, len(chunk)).map(run_task).collect()
        except BaseException as e:  # surfaced in the caller's thread
            box["error"] = e

    worker = threading.Thread(target=collect, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if tick:
                tick(_finished(sc, group))
    except KeyboardInterrupt:
        sc.cancelJobGroup(group)
        raise
    if "error" in box:
        raise UserError(f"the sweep's Spark job failed: {_first_line(box['error'])}") from None
    return box["rows"]


def _finished(sc: SparkContext, group: str) -> int:
    tracker = sc.statusTracker()
    done = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in (info.stageIds if info else ()):
            s = tracker.getStageInfo(stage)
            done += s.numCompletedTasks if s else 0
    return done


def _first_line(error: BaseException) -> str:
    text = str(error)
    # A Python exception inside a task arrives wrapped in the JVM's trace; its own last line says what.
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "Exception" in ln:
            return ln[:300]
    return (lines[0] if lines else type(error).__name__)[:300]
