"""`rmptwin venue ...`: the exchange-venue sweeps and a run's timeline (mounted by rmptwin.cli.main)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.progress import Progress
from rich.table import Table

from rmptwin.cli.console import make_console
from rmptwin.rundir.run import RunDir
from rmptwin.studies.venue_sweeps import (
    LATENCY_CONFIGS,
    gap_table,
    latency_sweep,
    markdown,
    plot_gap,
    plot_latency,
    plot_timeline,
)

app = typer.Typer(no_args_is_help=True, help="exchange venues: gap table and latency sweep (simulator)")
console = make_console()


def _show(title: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    for c in rows[0]:
        table.add_column(c)
    for r in rows:
        table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r.values()))
    console.print(table)


def _write(out: Path, name: str, rows: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(markdown(rows))
    (out / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")


@app.command()
def gap(experiment: Path = typer.Argument(Path("experiments/venue-gap.yaml")),
        out: Path = typer.Option(Path("results/venue-gap"), help="where table and plot go"),
        duration_s: float = typer.Option(0.0, help="load duration per rate; 0: the experiment's")) -> None:
    """Leader/follower gap at 5,000 and 9,000 req/s beside the seed's Table 1."""
    with console.status("simulating") as st:
        rows = gap_table(experiment, duration_s=duration_s or None, progress=lambda m: st.update(m))
    _show("leader/follower gap (seed: 57/3 at 5,000; 81/7 at 9,000)", rows)
    _write(out, "gap", rows)
    console.print(f"wrote {out}/gap.md, {plot_gap(rows, out / 'gap.png')}")


@app.command()
def latency(experiment: Path = typer.Argument(Path("experiments/venue-latency.yaml")),
            out: Path = typer.Option(Path("results/venue-latency")),
            quick: bool = typer.Option(False, help="three rates, 0.5 s each"),
            duration_s: float = typer.Option(1.0)) -> None:
    """Latency vs throughput: 1/2 gateways, 1/10 symbols, with/without sequencer and durable HR."""
    rates = (1000, 5000, 9000) if quick else (1000, 3000, 5000, 7000, 9000)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("latency sweep", total=len(rates) * len(LATENCY_CONFIGS))
        rows = latency_sweep(experiment, rates=rates, duration_s=0.5 if quick else duration_s,
                             progress=lambda m: bar.update(task, advance=1, description=m))
    _show("venue latency (ms)", rows)
    _write(out, "latency", rows)
    console.print(f"wrote {out}/latency.md, {plot_latency(rows, out / 'latency.png')}")


@app.command()
def timeline(run: Path) -> None:
    """Plot a venue run's per-EV throughput and EV gap over time into RUN/analysis/venue-timeline.png."""
    rundir = RunDir(run)
    manifest = rundir.read_manifest()
    venues = [h["name"] for h in manifest["topology"]["hosts"] if h["role"] == "venue"]
    rundir.analysis_dir.mkdir(parents=True, exist_ok=True)
    plot = rundir.analysis_path("venue-timeline.png")
    console.print(f"wrote {plot_timeline(rundir.read_events(), venues, plot)}")
