"""`rmptwin run`: an experiment on the emulated network. A module-level typer app whose one
command the root CLI (rmptwin.cli.main) mounts at the top level."""

from __future__ import annotations

from pathlib import Path

import typer

from rmptwin import api
from rmptwin.cli.bound_warnings import print_bound_warnings
from rmptwin.cli.console import make_console
from rmptwin.cli.display import print_emulation_summary, progress_bar
from rmptwin.cli.overrides import SET_HELP, apply_set_options, parse_tdf, tdf_option
from rmptwin.errors import UserError

app = typer.Typer(add_completion=False, help="emulated runs: every role its own process in its own host")
console = make_console()
DEFAULTS = api.EmulationOptions()   # the Docker hosts' CPU and memory limits
SERVERS_HELP = ("spread the network over these servers: a,b[,c], or a servers file (FILE.yaml: 'servers: [a, b]', "
                "optionally 'placement:'); namespace hosts, relay links; `rmptwin servers up --local N` makes local ones")
PLACEMENT_HELP = ("how switches go over --servers: regions (whole where the balance allows, few cut links; the "
                  "default) or bins (Mininet's SwitchBinPlacer); overrides a servers file's")


def capture_hosts(loaded: api.LoadedExperiment, capture: str) -> list[str] | None:
    """The hosts --capture names: customers (and retransmit servers: the emulation's default,
    None), all, none, or a,b,c."""
    if capture == "customers":
        return None
    if capture == "all":
        return [h.name for h in loaded.topology.hosts]
    if capture == "none":
        return []
    return [c for c in capture.split(",") if c]


def server_names(text: str, placement: str | None = None) -> tuple[tuple[str, ...], str]:
    """--servers a,b,c (or a servers file, FILE.yaml) as names, and the placement: --placement
    if given, else the file's, else regions."""
    names, listed = api.servers(text)
    return names, placement or listed or "regions"


def print_placement(loaded: api.LoadedExperiment, servers: tuple[str, ...], how: str) -> None:
    console.print(f"placement ({how}) over {len(servers)} servers:", highlight=False)
    for line in api.placement(loaded, servers, how):
        console.print(f"  {line}", highlight=False, soft_wrap=True)


@app.command("run")
def run(
    experiment: Path,
    seed: int | None = typer.Option(None, help="overrides the experiment's seed"),
    out: Path | None = typer.Option(None, help="run directory (default results/<experiment>/<run-id>)"),
    nodes: str = typer.Option("docker", help="host kind: docker (containers), ns (namespaces) or "
                                             "flat (namespaces on one bridge, no switches or impairment)"),
    impair: str = typer.Option("auto", help="link impairment backend: auto, netem or relay"),
    capture: str = typer.Option("customers", help="hosts to capture into pcaps/: customers (customers and "
                                                  "retransmit servers), all, none, or names a,b,c"),
    node_cpus: float = typer.Option(DEFAULTS.cpus, help="CPUs each Docker host may use (0: unlimited)"),
    node_memory_mb: int = typer.Option(DEFAULTS.memory_mb, help="memory each Docker host may use, MB (0: unlimited)"),
    event_loop: str = typer.Option(DEFAULTS.event_loop, help="the nodes' asyncio event loop: uvloop, or asyncio "
                                                             "(the standard library's)"),
    servers: str = typer.Option("", help=SERVERS_HELP),
    placement: str | None = typer.Option(None, help=PLACEMENT_HELP),
    strict: bool = typer.Option(False, "--strict", help="warnings (parameters outside the seed's bounds) "
                                                     "are errors: exit 2 before the network comes up"),
    sets: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP),
    tdf: str | None = tdf_option(),
) -> None:
    """Run an experiment on the emulated network: every role its own process in its own host."""
    time_dilation = parse_tdf(tdf, sets)
    names, how = server_names(servers, placement)
    loaded = apply_set_options(api.load_experiment(experiment), sets)
    print_bound_warnings(loaded, experiment, strict=strict)
    if node_cpus < 0 or node_memory_mb < 0:
        raise UserError("--node-cpus and --node-memory-mb must be >= 0 (0: unlimited)")
    options = api.EmulationOptions(nodes=nodes, impair=impair, capture=capture_hosts(loaded, capture),
                                  cpus=node_cpus or None, memory_mb=node_memory_mb or None, event_loop=event_loop,
                                  servers=names, placement=how)
    if options.servers:   # before anything starts: that they can run it, then where each part will run
        api.check_servers(options.servers)
        print_placement(loaded, options.servers, how)
    with progress_bar(console, loaded, "emulation") as progress:
        result = api.emulate(loaded, seed=seed, out=out, options=options, progress=progress,
                             time_dilation=time_dilation, say=lambda line: console.print(line, highlight=False))
    print_emulation_summary(console, result)
