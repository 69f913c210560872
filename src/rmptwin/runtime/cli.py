"""`rmptwin run`: mounted by rmptwin.cli through ``register(app)``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        experiment: Path,
        seed: Optional[int] = typer.Option(None, help="overrides the experiment's seed"),
        out: Optional[Path] = typer.Option(None, help="run directory (default results/<experiment>/<run-id>)"),
        nodes: str = typer.Option("docker", help="host kind: docker (containers), ns (namespaces) or "
                                                 "flat (namespaces on one bridge, no switches or impairment)"),
        impair: str = typer.Option("auto", help="link impairment backend: auto, netem or relay"),
        capture: str = typer.Option("customers", help="hosts to capture into pcaps/: customers (customers and "
                                                      "retransmit servers), all, none, or names a,b,c"),
        strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds) "
                                                         "are errors: exit 2 before the network comes up"),
    ) -> None:
        """Run an experiment on the emulated network: every role its own process in its own host."""
        from rich.console import Console

        from ..bound_warnings import print_bound_warnings
        from ..spec import load_experiment
        from .runner import default_capture, run_experiment

        console = Console()
        loaded = load_experiment(experiment)
        print_bound_warnings(loaded, experiment, strict=strict)
        if capture == "customers":
            hosts = default_capture(loaded)
        elif capture == "all":
            hosts = [h.name for h in loaded.topology.hosts]
        elif capture == "none":
            hosts = []
        else:
            hosts = [c for c in capture.split(",") if c]
        run_dir, summary = _with_progress(console, loaded, seed, out, nodes, impair, hosts, run_experiment)
        print_summary(console, summary, run_dir)


def _with_progress(console, loaded, seed, out, nodes, impair, hosts, run_experiment):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    duration = loaded.experiment.duration_s
    with Progress(TextColumn("[bold]emulating[/] {task.description}"), BarColumn(),
                  TextColumn("{task.fields[what]}"), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(loaded.experiment.name, total=duration, what="")

        def progress(frac: float, what: str) -> None:
            shown = f"{frac * duration:.1f}/{duration:.1f} s" if what == "running" else what
            bar.update(task, completed=frac * duration, what=shown)
        return run_experiment(loaded, seed=seed, out=out, nodes=nodes, impair=impair, capture=hosts,
                              progress=progress)


def print_summary(console, s: dict, run_dir: Path) -> None:
    from ..summary import summary_table

    table = summary_table(s, title="summary (emulation)")
    rt = s.get("runtime", {})
    drained = f", drained {rt['drain_s']} s past the duration" if rt.get("drain_s", 0) >= 1 else ""
    table.add_row("runtime", f"{rt.get('nodes')} nodes, {rt.get('wall_s')} s wall{drained}")
    if rt.get("outstanding"):
        console.print(f"[yellow]not quiescent after the drain cap: {rt['outstanding']}[/yellow]")
    console.print(table)
    pcaps = sorted((run_dir / "pcaps").glob("*.pcap"))
    if pcaps:
        from ..groups import REGION_PORT, REREQUEST_PORT

        console.print(f"captures: {len(pcaps)} in {run_dir / 'pcaps'} (MoldUDP64: tshark -r FILE "
                      f"-d udp.port=={REGION_PORT},moldudp64 -d udp.port=={REREQUEST_PORT},moldudp64)")
    console.print(f"run directory: {run_dir}")
