"""`rmptwin sweep EXPERIMENT --set KEY=V1,V2 --seeds N`: many runs of one experiment (mounted by rmptwin.cli.main)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rmptwin.cli.console import make_console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rmptwin.errors import UserError
from rmptwin.spec import load_experiment
from rmptwin.sweeps.sweep_report import write_outcome_report

app = typer.Typer(add_completion=False)
console = make_console()


@contextmanager
def sweep_progress(title: str):
    """A rich bar over the sweep's runs; yields ``progress(done, total)``."""
    columns = (TextColumn("[bold]sweep[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("runs"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=min(done, total), total=total)

        yield progress


@app.command()
def sweep(
    experiment: Path = typer.Argument(..., help="experiment YAML"),
    sets: list[str] = typer.Option([], "--set", help="KEY=V1,V2,...: a dotted path into the experiment "
                                   "(protocol.delta_a_ms, workload.rate_per_source, topology.links.0.loss) and "
                                   "its values; several --set sweep their cross product"),
    seeds: int = typer.Option(3, "--seeds", min=1, help="seeds per point: the experiment's seed, +1, ..."),
    master: Optional[str] = typer.Option(None, "--master", help="Spark master (default: embedded local[*])"),
    out: Optional[Path] = typer.Option(None, "--out", help="sweep directory (default "
                                       "results/sweeps/<experiment>/<id>; the same sweep resumes there)"),
    keep_runs: bool = typer.Option(False, "--keep-runs", help="also write each run's directory under runs/"),
    backend: str = typer.Option("sim", "--backend", help="sim (Spark tasks) or emulation (one point after "
                                "another on the local network, as root)"),
    probes: list[str] = typer.Option([], "--probe", help="extra figures per run: rmp, ring, minc, venue_gap_sampled:MS"),
) -> None:
    """Run an experiment at every combination of parameter values, several seeds each: one Parquet
    table (sweep.parquet) and a report (sweep.html) of each metric against each parameter with 95 % CIs.
    A second call with the same --set values skips the runs already in the table."""
    from rmptwin.sweeps.engine import SweepPlan, describe, run_sweep
    from rmptwin.sweeps.points import parse_sets

    if backend not in ("sim", "emulation"):
        raise UserError(f"--backend {backend!r}: choose sim or emulation")
    if not sets:
        raise UserError("give at least one --set KEY=V1,V2,... (e.g. --set protocol.delta_a_ms=100,200)")
    loaded = load_experiment(experiment)
    base_seed = loaded.experiment.seed
    plan = SweepPlan(loaded, parse_sets(sets), [base_seed + i for i in range(seeds)], backend, list(probes),
                     keep_runs)
    with sweep_progress(loaded.experiment.name) as progress:
        outcome = run_sweep(plan, out=out, master=master, progress=progress)
    console.print(describe(outcome), highlight=False, soft_wrap=True)
    console.print(f"report: {write_outcome_report(outcome)}", highlight=False, soft_wrap=True)
