"""`rmptwin run`: an experiment on the emulated network. A module-level typer app whose one
command the root CLI (rmptwin.cli) mounts at the top level."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rmptwin.console import make_console
from rmptwin.bound_warnings import print_bound_warnings
from rmptwin.errors import UserError
from rmptwin.experiment_run import EmulationOptions, run_experiment
from rmptwin.run_display import print_emulation_summary, progress_bar
from rmptwin.spec import LoadedExperiment, load_experiment
from rmptwin.runtime.runner import NODE_CPUS, NODE_MEMORY_MB, default_capture

app = typer.Typer(add_completion=False, help="emulated runs: every role its own process in its own host")
console = make_console()


def capture_hosts(loaded: LoadedExperiment, capture: str) -> list[str]:
    """The hosts --capture names: customers (and retransmit servers), all, none, or a,b,c."""
    if capture == "customers":
        return default_capture(loaded)
    if capture == "all":
        return [h.name for h in loaded.topology.hosts]
    if capture == "none":
        return []
    return [c for c in capture.split(",") if c]


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
    node_cpus: float = typer.Option(NODE_CPUS, help="CPUs each Docker host may use (0: unlimited)"),
    node_memory_mb: int = typer.Option(NODE_MEMORY_MB, help="memory each Docker host may use, MB (0: unlimited)"),
    strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds) "
                                                     "are errors: exit 2 before the network comes up"),
) -> None:
    """Run an experiment on the emulated network: every role its own process in its own host."""
    loaded = load_experiment(experiment)
    print_bound_warnings(loaded, experiment, strict=strict)
    if node_cpus < 0 or node_memory_mb < 0:
        raise UserError("--node-cpus and --node-memory-mb must be >= 0 (0: unlimited)")
    options = EmulationOptions(nodes=nodes, impair=impair, capture=capture_hosts(loaded, capture),
                               cpus=node_cpus or None, memory_mb=node_memory_mb or None)
    with progress_bar(console, loaded, "emulation") as progress:
        outcome = run_experiment(loaded, "emulation", seed=seed, out=out, options=options, progress=progress)
    print_emulation_summary(console, outcome)
