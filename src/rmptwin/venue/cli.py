"""`rmptwin venue ...`: the exchange-venue sweeps (mounted by rmptwin.cli)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

venue_app = typer.Typer(no_args_is_help=True, help="exchange venues: gap table and latency sweep (simulator)")
console = Console()


def _show(title: str, rows: list[dict]) -> None:
    table = Table(title=title)
    for c in rows[0]:
        table.add_column(c)
    for r in rows:
        table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r.values()))
    console.print(table)


def _write(out: Path, name: str, rows: list[dict]) -> None:
    from .sweeps import markdown

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(markdown(rows))
    (out / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")


@venue_app.command()
def gap(experiment: Path = typer.Argument(Path("experiments/venue-gap.yaml")),
        out: Path = typer.Option(Path("results/venue-gap"), help="where table and plot go"),
        duration_s: float = typer.Option(0.0, help="load duration per rate; 0: the experiment's")) -> None:
    """Leader/follower gap at 5,000 and 9,000 req/s beside the seed's Table 1."""
    from .sweeps import gap_table, plot_gap

    with console.status("simulating") as st:
        rows = gap_table(experiment, duration_s=duration_s or None, progress=lambda m: st.update(m))
    _show("leader/follower gap (seed: 57/3 at 5,000; 81/7 at 9,000)", rows)
    _write(out, "gap", rows)
    console.print(f"wrote {out}/gap.md, {plot_gap(rows, out / 'gap.png')}")


@venue_app.command()
def latency(experiment: Path = typer.Argument(Path("experiments/venue-latency.yaml")),
            out: Path = typer.Option(Path("results/venue-latency")),
            quick: bool = typer.Option(False, help="three rates, 0.5 s each"),
            duration_s: float = typer.Option(1.0)) -> None:
    """Latency vs throughput: 1/2 gateways, 1/10 symbols, with/without sequencer and durable HR."""
    from rich.progress import Progress

    from .sweeps import LATENCY_CONFIGS, latency_sweep, plot_latency

    rates = (1000, 5000, 9000) if quick else (1000, 3000, 5000, 7000, 9000)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("latency sweep", total=len(rates) * len(LATENCY_CONFIGS))
        rows = latency_sweep(experiment, rates=rates, duration_s=0.5 if quick else duration_s,
                             progress=lambda m: bar.update(task, advance=1, description=m))
    _show("venue latency (ms)", rows)
    _write(out, "latency", rows)
    console.print(f"wrote {out}/latency.md, {plot_latency(rows, out / 'latency.png')}")


@venue_app.command()
def timeline(run: Path) -> None:
    """Plot a venue run's per-EV throughput and EV gap over time into RUN/analysis/venue-timeline.png."""
    from ..results import read_events, read_manifest
    from .sweeps import plot_timeline

    manifest = read_manifest(run)
    venues = [h["name"] for h in manifest["topology"]["hosts"] if h["role"] == "venue"]
    out = run / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    console.print(f"wrote {plot_timeline(read_events(run), venues, out / 'venue-timeline.png')}")


def register(app: typer.Typer) -> None:
    app.add_typer(venue_app, name="venue")
