"""`rmptwin analyze` and `rmptwin compare`, mounted by rmptwin.cli."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def analyze(
        runs: List[Path] = typer.Argument(..., help="run directories (results/<experiment>/<run-id>)"),
        master: Optional[str] = typer.Option(None, help="Spark master URL; default embedded local[2]"),
    ) -> None:
        """Analyse runs with PySpark: metrics parquet, metrics.json and report.html in RUN/analysis/."""
        from .extract import check_run
        from .job import analyze as run_analysis
        from .session import spark_session

        for run in runs:
            check_run(run)  # fail on a bad path before paying for Spark's start-up
        console = Console()
        spark = spark_session(master)
        try:
            for run in runs:
                path = run_analysis(spark, run, console=console)
                console.print(f"report: {path}")
        finally:
            spark.stop()

    @app.command()
    def compare(
        run_a: Path, run_b: Path,
        html: Optional[Path] = typer.Option(None, help="HTML output (default RUN_A/analysis/compare-<B>.html)"),
        master: Optional[str] = typer.Option(None, help="Spark master for runs not analysed yet"),
    ) -> None:
        """Two runs' metrics side by side (analyses either run first if it has no metrics yet)."""
        from .compare import compare as do_compare

        from .extract import check_run

        for r in (run_a, run_b):
            check_run(r)
        console = Console()
        todo = [r for r in (run_a, run_b) if not (r / "analysis" / "metrics.json").exists()]
        if todo:
            from .job import analyze as run_analysis
            from .session import spark_session

            spark = spark_session(master)
            try:
                for r in todo:
                    run_analysis(spark, r, console=console)
            finally:
                spark.stop()
        console.print(f"comparison: {do_compare(run_a, run_b, html, console=console)}")
