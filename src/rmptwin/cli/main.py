"""`rmptwin`: the command line. Each subcommand is a thin call into a module: into
``rmptwin.api`` where the Python API does the same (validate, sim, run, rerun, analyze,
compare, sweep), what it prints staying here.

The commands of one group live in a module of their own beside this one, each a
module-level typer app mounted below (``run``, ``analyze``/``compare``, ``net``/``image``/
``env``, ``venue``, ``taxonomy``, ``sweep``, ``claims``, ``keys``), so this file stays a
table of contents.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer

from rmptwin import api
from rmptwin.cli import analyze as analysis_cli
from rmptwin.cli import chaos_commands as chaos_cli
from rmptwin.cli import check as checkers_cli
from rmptwin.cli import claims as claims_cli
from rmptwin.cli import (
    flags,  # noqa: F401 - flags' help without a '<bool>' placeholder
)
from rmptwin.cli import (
    keys_commands as keys,
)
from rmptwin.cli import net as emulation_cli
from rmptwin.cli import plan_commands as planning_cli
from rmptwin.cli import run_commands as runtime_cli
from rmptwin.cli import spark_commands as cluster_cli
from rmptwin.cli import sweep_commands as sweeps_cli
from rmptwin.cli import taxonomy_commands as taxonomy_cli
from rmptwin.cli import topo_commands as topo_cli
from rmptwin.cli import venue_commands as venue_cli
from rmptwin.cli.bound_warnings import print_bound_warnings, print_topology_warnings, run_length
from rmptwin.cli.console import make_console, print_error
from rmptwin.cli.display import print_sim_summary, print_summary, progress_bar
from rmptwin.cli.overrides import SET_HELP, apply_set_options
from rmptwin.errors import UserError
from rmptwin.model import json_schemas
from rmptwin.runner.rerun import environment_line, replay_line, summary_line

app = typer.Typer(add_completion=False, no_args_is_help=True, help="rmptwin: RMP and exchange-venue testbed")
console = make_console()


@app.command()
def validate(
    file: Path,
    strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds, "
                                                     "likely unintended role placements) are errors: exit 2"),
    sets: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Check a topology or experiment YAML; print one line saying it is valid or what to fix, and for an
    experiment one warning line per seed bound its parameters break."""
    loaded = api.load(file)
    if sets and not isinstance(loaded, api.LoadedExperiment):
        raise UserError(f"{file}: --set changes an experiment; this is a topology")
    if isinstance(loaded, api.LoadedExperiment):
        loaded = apply_set_options(loaded, sets)
        print_bound_warnings(loaded, file, strict=strict)
        t = loaded.topology
        console.print(f"{file}: valid experiment '{loaded.experiment.name}' on topology '{t.name}' "
                      f"({len(t.switches)} switches, {len(t.links)} links, {len(t.hosts)} hosts); "
                      f"{run_length(loaded)}")
    else:
        t = loaded
        print_topology_warnings(t, file, strict=strict)
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
    print(json.dumps(json_schemas()[kind.value], indent=2))


@app.command()
def sim(
    experiment: Path,
    seed: int | None = typer.Option(None, help="overrides the experiment's seed"),
    out: Path | None = typer.Option(None, help="run directory (default results/<experiment>/<run-id>)"),
    strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds) are "
                                                     "errors: exit 2 before running"),
    sets: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP),
    pcap: bool = typer.Option(False, "--pcap", help="also write each host's packets, sent and received, to "
                                                 "pcaps/<host>.pcap, laid out as an emulated run's captures"),
) -> None:
    """Run an experiment in the deterministic discrete-event simulator."""
    loaded = apply_set_options(api.load_experiment(experiment), sets)
    print_bound_warnings(loaded, experiment, strict=strict)
    with progress_bar(console, loaded, "sim") as progress:
        run = api.simulate(loaded, seed=seed, out=out, progress=progress, pcap=pcap)
    print_sim_summary(console, run)


@app.command()
def rerun(
    run_dir: Path = typer.Argument(..., help="a run directory written by `rmptwin sim` or `rmptwin run`"),
    out: Path | None = typer.Option(None, help="new run directory (default results/<experiment>/<run-id>)"),
) -> None:
    """Repeat a run from its manifest.json alone: same spec, seed and backend, into a new run directory."""
    original = api.open_run(run_dir, check=False)   # its manifest is all a rerun reads
    manifest = original.manifest
    replay = api.replay_of(original)
    console.print(replay_line(replay, original.dir), highlight=False)
    with progress_bar(console, replay.loaded, replay.backend) as progress:
        run = api.rerun(original, out, progress)
    print_summary(console, run)
    console.print(environment_line(manifest, run.manifest), highlight=False, soft_wrap=True)
    console.print(summary_line(original.dir, run.dir), highlight=False, soft_wrap=True)


# Each layer's commands, from its own module-level typer apps. A sub-app mounted without a
# name gives its commands to the root itself, so `rmptwin run` stays `run`, not `runtime run`.
app.add_typer(runtime_cli.app)     # run
app.add_typer(planning_cli.app)    # plan
app.add_typer(analysis_cli.app)    # analyze, compare
app.add_typer(emulation_cli.net_app, name="net")
app.add_typer(emulation_cli.image_app, name="image")
app.add_typer(emulation_cli.servers_app, name="servers")
app.command("env")(emulation_cli.show_env)
app.add_typer(venue_cli.app, name="venue")
app.add_typer(taxonomy_cli.app, name="taxonomy")  # compare, measure
app.add_typer(sweeps_cli.app)      # sweep
app.add_typer(claims_cli.app)      # claims
app.add_typer(keys.app, name="keys")      # keys gen
app.add_typer(topo_cli.app, name="topo")   # gen, import
app.add_typer(topo_cli.campaign_app, name="campaign")   # twin
app.add_typer(topo_cli.trace_app, name="trace")   # fit
app.add_typer(checkers_cli.app)    # check
app.add_typer(chaos_cli.app)       # chaos
app.add_typer(cluster_cli.app, name="spark")   # spark up, down, status


def main() -> None:
    """Entry point. Typer's standalone mode owns the usage contract: ``--help`` exits 0; an
    unknown option, a missing argument or a bad value prints the usage line and the error
    and exits 2; a group given no subcommand prints its help and exits 2 (no_args_is_help);
    Ctrl-C exits 130; ``typer.Exit(n)`` exits n. What typer cannot know: a UserError is one
    red line on stderr and exit 2."""
    try:
        app(prog_name="rmptwin")
    except UserError as e:
        print_error(str(e))
        sys.exit(2)
    except SystemExit as e:
        if e.code == 130:  # typer turned a Ctrl-C inside a command into Exit(130), silently
            make_console(stderr=True).print("rmptwin: interrupted")
        raise
    except KeyboardInterrupt:  # Ctrl-C outside typer's own handler (while it builds the command tree)
        make_console(stderr=True).print("rmptwin: interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
