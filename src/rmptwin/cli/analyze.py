"""`rmptwin analyze` and `rmptwin compare`: a module-level typer app whose commands the root
CLI (rmptwin.cli.main) mounts at the top level; both are ``rmptwin.api.analyze`` and
``rmptwin.api.compare`` printing on the command line's console.

The API imports PySpark only inside those calls: it is the heavy optional dependency, and
the rest of the CLI must start without it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rmptwin import api
from rmptwin.cli.console import make_console
from rmptwin.cli.display import counted_progress
from rmptwin.errors import UserError

app = typer.Typer(add_completion=False, help="analysis of run directories with PySpark")
console = make_console()


@app.command()
def analyze(
    runs: list[Path] = typer.Argument(..., help="run directories (results/<experiment>/<run-id>)"),
    master: str | None = typer.Option(None, help="Spark master URL; default embedded local[2]"),
) -> None:
    """Analyse runs with PySpark: metrics parquet, metrics.json and report.html in RUN/analysis/."""
    opened = [api.open_run(run) for run in runs]  # fail on a bad path before paying for Spark's start-up
    with api.spark_session(master) as spark:      # one session for every run
        for run in opened:
            console.print(f"report: {api.analyze(run, spark=spark, console=console)}")


@app.command()
def compare(
    run_a: Path = typer.Argument(..., metavar="SIM_RUN", help="run A: the simulated run"),
    run_b: Path = typer.Argument(..., metavar="EMU_RUN", help="run B: the emulated run of the same experiment and seed"),
    html: Path | None = typer.Option(None, help="HTML output (default RUN_A/analysis/compare-<B>.html)"),
    master: str | None = typer.Option(None, help="Spark master for runs not analysed yet"),
    verdict: bool = typer.Option(True, "--verdict/--no-verdict",
                                 help="judge B against A (exit 1 on a failed rule); --no-verdict: side by side "
                                      "only, exit 0 (two runs that are not twins, e.g. different settings)"),
    analyze: bool = typer.Option(True, "--analyze/--no-analyze",
                                 help="analyse runs without metrics with Spark for the side-by-side table; "
                                      "--no-analyze: the verdict alone (summary.json and links/, no Spark)"),
    spread_seeds: int | None = typer.Option(None, "--spread-seeds", min=0,
                                            help="where B's losses are not the simulator's draw (netem): other "
                                                 "seeds of A's experiment to simulate, the spread its control per "
                                                 "data is judged by (default 12; fewer than 4 or 0: not judged)"),
) -> None:
    """Two runs' metrics side by side and the twin verdict: per metric its tolerance and pass or
    fail, then one PASS/FAIL line; exit code 1 if a rule failed."""
    a, b = api.open_run(run_a), api.open_run(run_b)
    if not analyze and not verdict:
        raise UserError("--no-analyze --no-verdict leaves nothing to show; drop one of them")
    with counted_progress(console, "compare", "simulating other seeds", "seeds") as progress:
        result = api.compare(a, b, html, verdict=verdict, analyze_missing=analyze, master=master, console=console,
                             spread_seeds=spread_seeds, progress=progress)
    if result.passed is False:
        raise typer.Exit(1)
