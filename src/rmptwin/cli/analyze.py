"""`rmptwin analyze` and `rmptwin compare`: a module-level typer app whose commands the root
CLI (rmptwin.cli.main) mounts at the top level.

PySpark is imported only inside the commands (``job``, ``session``): it is the heavy
optional dependency, and the rest of the CLI must start without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rmptwin.cli.console import make_console

from rmptwin.errors import UserError
from rmptwin.rundir.run import RunDir
from rmptwin.analysis.compare import compare as compare_runs
from rmptwin.analysis.compare import verdict as twin_verdict






from rmptwin.analysis.compare import verdict_rules

app = typer.Typer(add_completion=False, help="analysis of run directories with PySpark")
console = make_console()


def _analyze_with_spark(runs: list[Path], master: str | None, announce: bool) -> None:
    """Start one SparkSession and analyse each run in it (report.html, metrics.json, tables)."""
    from rmptwin.analysis.job import analyze as run_analysis
    from rmptwin.analysis.session import spark_session

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
    run_a: Path = typer.Argument(..., metavar="SIM_RUN", help="run A: the simulated run"),
    run_b: Path = typer.Argument(..., metavar="EMU_RUN", help="run B: the emulated run of the same experiment and seed"),
    html: Optional[Path] = typer.Option(None, help="HTML output (default RUN_A/analysis/compare-<B>.html)"),
    master: Optional[str] = typer.Option(None, help="Spark master for runs not analysed yet"),
    verdict: bool = typer.Option(True, "--verdict/--no-verdict",
                                 help="judge B against A (exit 1 on a failed rule); --no-verdict: side by side "
                                      "only, exit 0 (two runs that are not twins, e.g. different settings)"),
    analyze: bool = typer.Option(True, "--analyze/--no-analyze",
                                 help="analyse runs without metrics with Spark for the side-by-side table; "
                                      "--no-analyze: the verdict alone (summary.json and links/, no Spark)"),
) -> None:
    """Two runs' metrics side by side and the twin verdict: per metric its tolerance and pass or
    fail, then one PASS/FAIL line; exit code 1 if a rule failed."""
    for r in (run_a, run_b):
        RunDir(r).check()
    if not analyze and not verdict:
        raise UserError("--no-analyze --no-verdict leaves nothing to show; drop one of them")
    rules = verdict_rules(run_a, run_b) if verdict else None
    if analyze:
        todo = [r for r in (run_a, run_b) if not RunDir(r).metrics_path.exists()]
        if todo:
            _analyze_with_spark(todo, master, announce=False)
        console.print(f"comparison: {compare_runs(run_a, run_b, console, html, rules)}", highlight=False)
    if rules is not None and not twin_verdict(run_a, run_b, console=console):
        raise typer.Exit(1)
