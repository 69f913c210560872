"""`rmptwin sweep EXPERIMENT --set KEY=V1,V2 --seeds N`: many runs of one experiment (mounted by
rmptwin.cli.main): ``rmptwin.api.sweep`` with a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import typer

from rmptwin import api
from rmptwin.cli.bound_warnings import print_sweep_run_length_warnings
from rmptwin.cli.console import make_console
from rmptwin.cli.display import counted_progress
from rmptwin.cli.overrides import parse_tdf, tdf_option
from rmptwin.errors import UserError

app = typer.Typer(add_completion=False)
console = make_console()


def sweep_progress(title: str) -> AbstractContextManager[Callable[[int, int], None]]:
    """A rich bar over the sweep's runs; yields ``progress(done, total)``."""
    return counted_progress(console, "sweep", title, "runs")


@app.command()
def sweep(
    experiment: Path = typer.Argument(..., help="experiment YAML"),
    sets: list[str] = typer.Option([], "--set", help="KEY=V1,V2,...: a dotted path into the experiment "
                                   "(protocol.delta_a_ms, workload.rate_per_source, topology.links.0.loss) and "
                                   "its values; several --set sweep their cross product"),
    seeds: int = typer.Option(3, "--seeds", min=1, help="seeds per point: the experiment's seed, +1, ..."),
    master: str | None = typer.Option(None, "--master", help="Spark master (default: embedded local[*])"),
    out: Path | None = typer.Option(None, "--out", help="sweep directory (default "
                                       "results/sweeps/<experiment>/<id>; the same sweep resumes there)"),
    keep_runs: bool = typer.Option(False, "--keep-runs", help="also write each run's directory under runs/"),
    backend: str = typer.Option("sim", "--backend", help="sim (Spark tasks) or emulation (one point after "
                                "another on the local network, as root)"),
    probes: list[str] = typer.Option([], "--probe", help="extra figures per run: rmp, ring, minc, venue_gap_sampled:MS"),
    servers: str = typer.Option("", "--servers", help="emulated runs over these servers: a,b[,c] or a servers "
                                "file (FILE.yaml); namespace hosts and relay links, as `rmptwin run --nodes ns "
                                "--impair relay --servers`"),
    tdf: str | None = tdf_option(),
) -> None:
    """Run an experiment at every combination of parameter values, several seeds each: one Parquet
    table (sweep.parquet) and a report (sweep.html) of each metric against each parameter with 95 % CIs.
    A second call with the same --set values skips the runs already in the table."""
    if backend not in ("sim", "emulation"):
        raise UserError(f"--backend {backend!r}: choose sim or emulation")
    if not sets:
        raise UserError("give at least one --set KEY=V1,V2,... (e.g. --set protocol.delta_a_ms=100,200)")
    time_dilation = parse_tdf(tdf, sets)
    options = None
    if servers:
        if backend != "emulation":
            raise UserError("--servers spreads emulated runs; add --backend emulation")
        names, how = api.servers(servers)
        options = api.EmulationOptions(nodes="ns", impair="relay", servers=names, placement=how or "regions")
    loaded = api.load_experiment(experiment)
    values = api.parse_sets(sets)
    print_sweep_run_length_warnings(loaded, values, experiment)
    with sweep_progress(loaded.experiment.name) as progress:
        # sweep.html after the summary line, as before the API: its plots take seconds
        result = api.sweep(loaded, values, seeds, master=master, out=out, probes=list(probes), keep_runs=keep_runs,
                          backend=backend, report=False, progress=progress, time_dilation=time_dilation,
                          options=options)
    console.print(result.text, highlight=False, soft_wrap=True)
    console.print(f"report: {result.write_report()}", highlight=False, soft_wrap=True)
