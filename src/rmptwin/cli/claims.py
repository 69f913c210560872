"""`rmptwin claims [--emulated] [--only NAME]`: the seed-claims report (mounted by rmptwin.cli.main)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rmptwin.cli.console import make_console
from rmptwin.cli.overrides import parse_tdf, tdf_option

app = typer.Typer(add_completion=False)
console = make_console()


@app.command()
def claims(
    emulated: bool = typer.Option(False, "--emulated", help="also run each claim's emulated sweep (root; minutes "
                                  "per claim)"),
    only: str | None = typer.Option(None, "--only", help="one claim: the name of experiments/claims/NAME.yaml"),
    out: Path = typer.Option(Path("results/claims"), "--out", help="where the sweeps, claims.html and claims.json go"),
    master: str | None = typer.Option(None, "--master", help="Spark master (default: embedded local[*])"),
    tdf: str | None = tdf_option(default="auto"),
) -> None:
    """Run one sweep per claim of the seeds (experiments/claims/*.yaml; simulated, resumable) and write one
    HTML table: the claim, the seed's figure, ours simulated, ours emulated, verdict."""
    from rmptwin.claims.evaluate import CLAIMS_DIR, run_claims, write_report
    from rmptwin.claims.model import load_claims

    # Emulated claims run at auto unless told: a claim judged on an overloaded host measures the host.
    time_dilation = parse_tdf(tdf) or "auto"
    chosen = load_claims(CLAIMS_DIR, only)
    columns = (TextColumn("[bold]claims[/] {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=len(chosen))
        rows = run_claims(chosen, out, emulated, master=master, time_dilation=time_dilation,
                          progress=lambda i, n, name: bar.update(task, completed=i, description=name))
    _stop_spark()
    table = Table(title="the seeds' claims")
    cols: tuple[str, ...] = ("claim", "seed", "ours (simulated)", "verdict")
    if emulated:
        cols += ("ours (emulated)", "emulated verdict", "twin")
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in rows:
        cells: tuple[str, ...] = (r.name, r.seed_figure, r.simulated, r.verdict)
        if emulated:
            cells += (r.emulated, r.emulated_verdict, r.twin)
        table.add_row(*cells)
    console.print(table)
    console.print(f"report: {write_report(rows, out)}", highlight=False, soft_wrap=True)


def _stop_spark() -> None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
