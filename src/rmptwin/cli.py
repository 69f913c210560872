"""`rmptwin`: the command line. Each subcommand is a thin call into a module.

Commands that belong to one layer live in that layer's ``cli`` module and are mounted
here (``net`` and ``image`` from emulation, ``analyze``/``compare`` from analysis), so
this file stays a table of contents.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="rmptwin: RMP and exchange-venue testbed")
console = Console()


@app.command()
def validate(file: Path) -> None:
    """Check a topology or experiment YAML; print one line saying it is valid or what to fix."""
    from .spec import _read_yaml, load_experiment, load_topology

    data, _ = _read_yaml(file)
    if "topology" in data:
        loaded = load_experiment(file)
        t = loaded.topology
        console.print(f"{file}: valid experiment '{loaded.experiment.name}' on topology '{t.name}' "
                      f"({len(t.switches)} switches, {len(t.links)} links, {len(t.hosts)} hosts)")
    else:
        t = load_topology(file)
        console.print(f"{file}: valid topology '{t.name}' ({len(t.switches)} switches, "
                      f"{len(t.links)} links, {len(t.hosts)} hosts)")


@app.command()
def schema() -> None:
    """Print the JSON Schema of topology and experiment specs."""
    from .spec import json_schemas

    print(json.dumps(json_schemas(), indent=2))


@app.command()
def sim(
    experiment: Path,
    seed: Optional[int] = typer.Option(None, help="overrides the experiment's seed"),
    out: Optional[Path] = typer.Option(None, help="run directory (default results/<experiment>/<run-id>)"),
) -> None:
    """Run an experiment in the deterministic discrete-event simulator."""
    from .sim.runner import run_experiment_cli

    run_experiment_cli(experiment, seed=seed, out=out, console=console)


def _mount_optional() -> None:
    """Mount sub-apps of layers that exist (they land issue by issue)."""
    import importlib

    for module in ("rmptwin.emulation.cli", "rmptwin.runtime.cli", "rmptwin.analysis.cli", "rmptwin.venue.cli"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith("rmptwin"):
                continue
            raise
        mod.register(app)


_mount_optional()


def main() -> None:
    try:
        app(standalone_mode=False)
    except UserError as e:
        Console(stderr=True).print(f"[bold red]rmptwin:[/] {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        Console(stderr=True).print("rmptwin: aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        Console(stderr=True).print("rmptwin: interrupted")
        sys.exit(130)
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
