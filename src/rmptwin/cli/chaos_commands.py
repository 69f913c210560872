"""`rmptwin chaos EXPERIMENT --runs N --seed S`: a fault campaign (mounted by rmptwin.cli.main)."""

from __future__ import annotations

from pathlib import Path

import typer

from rmptwin import api
from rmptwin.cli.console import make_console
from rmptwin.cli.overrides import parse_tdf, tdf_option
from rmptwin.errors import UserError

app = typer.Typer(add_completion=False)
console = make_console()


def parse_nemeses(text: str) -> tuple[str, ...]:
    from rmptwin.chaos.schedule import NEMESES

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in NEMESES]
    if bad or not names:
        raise UserError(f"--nemesis {text!r}: choose from {','.join(NEMESES)} (comma-separated)")
    return names


@app.command()
def chaos(
    experiment: Path = typer.Argument(..., help="experiment YAML (its own faults are replaced by drawn ones)"),
    runs: int = typer.Option(30, "--runs", min=1, help="schedules to draw and run"),
    seed: int = typer.Option(1, "--seed", help="campaign seed: run i draws from (seed, i) and simulates seed + i"),
    backend: str = typer.Option("sim", "--backend", help="sim (Spark tasks, like sweeps) or emulation (as root)"),
    nemesis: str = typer.Option("crash,partition,pause,clock,flap,dup", "--nemesis",
                                help="nemeses to draw from, comma-separated"),
    max_faults: int = typer.Option(3, "--max-faults", min=1, help="faults per schedule: uniform in 1..this"),
    majority: bool = typer.Option(True, "--majority/--no-majority", help="keep fewer than half of the primaries "
                                  "down (crashed, paused or partitioned away) at every instant"),
    shrink: bool = typer.Option(True, "--shrink/--no-shrink", help="shrink each violating schedule (simulator)"),
    out: Path | None = typer.Option(None, "--out", help="campaign directory (default "
                                       "results/chaos/<experiment>/<id>)"),
    master: str | None = typer.Option(None, "--master", help="Spark master (default: embedded local[*])"),
    tdf: str | None = tdf_option(),
) -> None:
    """Draw random fault schedules, run each, check every run with every history checker, shrink
    each violating schedule to a minimal one and save it as an experiment YAML; write chaos.parquet
    and chaos.html. Exit 1 if any run violated an invariant."""
    from rmptwin.chaos.campaign import Campaign, run_campaign
    from rmptwin.chaos.schedule import Plan

    if backend not in ("sim", "emulation"):
        raise UserError(f"--backend {backend!r}: choose sim or emulation")
    time_dilation = parse_tdf(tdf)
    loaded = api.load_experiment(experiment)
    c = Campaign(loaded, runs, seed, Plan(parse_nemeses(nemesis), max_faults, majority), backend, shrink,
                 time_dilation)
    from rmptwin.cli.sweep_commands import sweep_progress

    with sweep_progress(f"chaos {loaded.experiment.name}") as progress:
        outcome = run_campaign(c, out=out, master=master, progress=progress)
    console.print(f"{runs} runs in {outcome.wall_s:.1f} s: {outcome.violations} violating; "
                  f"table {outcome.chaos.table_path}", highlight=False, soft_wrap=True)
    for path in outcome.repros:
        console.print(f"reproduction: {path}", highlight=False, soft_wrap=True)
    console.print(f"report: {outcome.chaos.report_path}", highlight=False, soft_wrap=True)
    if outcome.violations:
        raise typer.Exit(1)
