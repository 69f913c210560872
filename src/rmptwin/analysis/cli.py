"""`rmptwin analyze` and `rmptwin compare`: a module-level typer app whose commands the root
CLI (rmptwin.cli) mounts at the top level.

PySpark is imported only inside the commands (``job``, ``session``): it is the heavy
optional dependency, and the rest of the CLI must start without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from ..rundir import RunDir
from .compare import compare as compare_runs

app = typer.Typer(add_completion=False, help="analysis of run directories with PySpark")
console = Console()


def _analyze_with_spark(runs: list[Path], master: str | None, announce: bool) -> None:
    """Start one SparkSession and analyse each run in it (report.html, metrics.json, tables)."""
    from .job import analyze as run_analysis
    from .session import spark_session

    spark = spark_session(master)
    try:
        for run in runs:
            path = run_analysis(spark, run, console=console)
            if announce:
                console.print(f"report: {path}")
    finally:
        spark.stop()


@app.command()
def analyze(
    runs: List[Path] = typer.Argument(..., help="run directories (results/<experiment>/<run-id>)"),
    master: Optional[str] = typer.Option(None, help="Spark master URL; default embedded local[2]"),
) -> None:
    """Analyse runs with PySpark: metrics parquet, metrics.json and report.html in RUN/analysis/."""
    for run in runs:
        RunDir(run).check()  # fail on a bad path before paying for Spark's start-up
    _analyze_with_spark(runs, master, announce=True)


@app.command()
def compare(
    run_a: Path, run_b: Path,
    html: Optional[Path] = typer.Option(None, help="HTML output (default RUN_A/analysis/compare-<B>.html)"),
    master: Optional[str] = typer.Option(None, help="Spark master for runs not analysed yet"),
) -> None:
    """Two runs' metrics side by side (analyses either run first if it has no metrics yet)."""
    for r in (run_a, run_b):
        RunDir(r).check()
    todo = [r for r in (run_a, run_b) if not RunDir(r).metrics_path.exists()]
    if todo:
        _analyze_with_spark(todo, master, announce=False)
    console.print(f"comparison: {compare_runs(run_a, run_b, html, console=console)}")
