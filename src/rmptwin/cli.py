"""`rmptwin`: the command line. Each subcommand is a thin call into a module.

Commands that belong to one layer live in that layer's ``cli`` module and are mounted
here (``net`` and ``image`` from emulation, ``analyze``/``compare`` from analysis), so
this file stays a table of contents.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="rmptwin: RMP and exchange-venue testbed")
console = Console()


@app.command()
def validate(
    file: Path,
    strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds) are "
                                                     "errors: exit 2"),
) -> None:
    """Check a topology or experiment YAML; print one line saying it is valid or what to fix, and for an
    experiment one warning line per seed bound its parameters break."""
    from .bound_warnings import print_bound_warnings
    from .spec import _read_yaml, load_experiment, load_topology

    data, _ = _read_yaml(file)
    if "topology" in data:
        loaded = load_experiment(file)
        print_bound_warnings(loaded, file, strict=strict)
        t = loaded.topology
        console.print(f"{file}: valid experiment '{loaded.experiment.name}' on topology '{t.name}' "
                      f"({len(t.switches)} switches, {len(t.links)} links, {len(t.hosts)} hosts)")
    else:
        t = load_topology(file)
        console.print(f"{file}: valid topology '{t.name}' ({len(t.switches)} switches, "
                      f"{len(t.links)} links, {len(t.hosts)} hosts)")


class SchemaKind(str, Enum):
    topology = "topology"
    experiment = "experiment"


@app.command()
def schema(kind: SchemaKind = typer.Argument(..., help="which YAML: topology or experiment")) -> None:
    """Print the JSON Schema (draft 2020-12) of a topology or an experiment YAML, for editors.

    schemas/KIND.schema.json is this output; regenerate it with `rmptwin schema KIND > schemas/KIND.schema.json`.
    """
    from .spec import json_schemas

    print(json.dumps(json_schemas()[kind.value], indent=2))


@app.command()
def sim(
    experiment: Path,
    seed: Optional[int] = typer.Option(None, help="overrides the experiment's seed"),
    out: Optional[Path] = typer.Option(None, help="run directory (default results/<experiment>/<run-id>)"),
    strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds) are "
                                                     "errors: exit 2 before running"),
) -> None:
    """Run an experiment in the deterministic discrete-event simulator."""
    from .bound_warnings import print_bound_warnings
    from .sim.runner import run_experiment_cli
    from .spec import load_experiment

    print_bound_warnings(load_experiment(experiment), experiment, strict=strict)
    run_experiment_cli(experiment, seed=seed, out=out, console=console)


@app.command()
def rerun(
    run_dir: Path = typer.Argument(..., help="a run directory written by `rmptwin sim` or `rmptwin run`"),
    out: Optional[Path] = typer.Option(None, help="new run directory (default results/<experiment>/<run-id>)"),
) -> None:
    """Repeat a run from its manifest.json alone: same spec, seed and backend, into a new run directory."""
    from .rerun import rerun_cli

    rerun_cli(run_dir, out=out, console=console)


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
    """Entry point. Typer's standalone mode owns the usage contract: ``--help`` exits 0; an
    unknown option, a missing argument or a bad value prints the usage line and the error
    and exits 2; a group given no subcommand prints its help and exits 2 (no_args_is_help);
    Ctrl-C exits 130; ``typer.Exit(n)`` exits n. What typer cannot know: a UserError is one
    red line on stderr and exit 2."""
    try:
        app(prog_name="rmptwin")
    except UserError as e:
        Console(stderr=True).print(f"[bold red]rmptwin:[/] {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except SystemExit as e:
        if e.code == 130:  # typer turned a Ctrl-C inside a command into Exit(130), silently
            Console(stderr=True).print("rmptwin: interrupted")
        raise
    except KeyboardInterrupt:  # Ctrl-C outside typer's own handler (while it builds the command tree)
        Console(stderr=True).print("rmptwin: interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
