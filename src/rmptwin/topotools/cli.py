"""`rmptwin topo gen` and `rmptwin topo import`: topologies nobody here wrote (mounted by rmptwin.cli)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
import yaml

from ..console import make_console
from ..errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="bring your own topology: generate a random one or import a GraphML/GML graph")
console = make_console()

TOPOLOGY_HEADER = "# yaml-language-server: $schema=../schemas/topology.schema.json\n"
EXPERIMENT_HEADER = "# yaml-language-server: $schema=../schemas/experiment.schema.json\n"


def dump_yaml(data: dict, header: str = "") -> str:
    """A spec dict as YAML in the field order given (links and hosts one flow mapping a line)."""

    class _Dumper(yaml.SafeDumper):
        pass

    def flow_row(dumper, row: dict):
        return dumper.represent_mapping("tag:yaml.org,2002:map", row.items(), flow_style=True)

    def block_map(dumper, m: dict):
        return dumper.represent_mapping("tag:yaml.org,2002:map", m.items())

    _Dumper.add_representer(dict, block_map)
    _Dumper.add_representer(_Row, flow_row)
    body = {k: ([_Row(r) for r in v] if k in ("links", "hosts") else v) for k, v in data.items()}
    if "regions" in body:
        body["regions"] = {r: _Flow(m) for r, m in body["regions"].items()}
    _Dumper.add_representer(_Flow, lambda d, seq: d.represent_sequence("tag:yaml.org,2002:seq", seq, flow_style=True))
    if isinstance(body.get("switches"), list):
        body["switches"] = _Flow(body["switches"])
    return header + yaml.dump(body, Dumper=_Dumper, sort_keys=False, width=100000)


class _Row(dict):
    pass


class _Flow(list):
    pass


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise UserError(f"{path}: cannot write ({e.strerror})") from None


def relative_ref(experiment: Path, topology: Path) -> str:
    """The experiment's ``topology:`` field: the topology's path relative to the experiment."""
    return os.path.relpath(topology.resolve(), experiment.resolve().parent)


@app.command("gen")
def gen(
    switches: int = typer.Option(..., "--switches", help="number of switches"),
    seed: int = typer.Option(..., "--seed", help="the same seed and options give the same topology"),
    regions: int = typer.Option(2, "--regions", help="regions (connected groups of switches)"),
    loss_max: float = typer.Option(0.02, "--loss-max", help="switch links lose uniformly in [0, P]"),
    mesh: float = typer.Option(0.0, "--mesh", help="extra links per switch beyond the spanning tree (0: a tree)"),
    sources: int = typer.Option(1, "--sources"),
    primaries: int = typer.Option(3, "--primaries", help="ring size (at least one per region)"),
    customers_per_region: int = typer.Option(2, "--customers-per-region"),
    stripes: int = typer.Option(1, "--stripes"),
    out: Optional[Path] = typer.Option(None, "--out", help="topology YAML (default: print it)"),
    experiment_out: Optional[Path] = typer.Option(
        None, "--experiment-out", help="also write an experiment fitted to it (needs --out)"),
) -> None:
    """Write a random valid topology: a tree (or a mesh with --mesh), connected regions, every RMP role
    placed (sources, primary ring, an R_T, an R_x and customers per region, a reformation server)."""
    from .generate import GenParams, generate

    if experiment_out is not None and out is None:
        raise UserError("--experiment-out needs --out (the experiment names the topology file)")
    params = GenParams(switches=switches, regions=regions, loss_max=loss_max, mesh=mesh, sources=sources,
                       primaries=max(primaries, regions), customers_per_region=customers_per_region,
                       stripes=stripes)
    ref = relative_ref(experiment_out, out) if experiment_out is not None else "topology.yaml"
    topology, experiment = generate(params, seed, ref)
    text = dump_yaml(topology, TOPOLOGY_HEADER + f"# rmptwin topo gen --switches {switches} --seed {seed} "
                     f"--regions {regions} --loss-max {loss_max} --mesh {mesh}\n")
    if out is None:
        print(text, end="")
        return
    write_text(out, text)
    console.print(f"{out}: topology '{topology['name']}' ({len(topology['switches'])} switches, "
                  f"{len(topology['links'])} links, {len(topology['hosts'])} hosts)", highlight=False)
    if experiment_out is not None:
        write_text(experiment_out, dump_yaml(experiment, EXPERIMENT_HEADER))
        console.print(f"{experiment_out}: experiment '{experiment['name']}' (k_r {experiment['protocol']['k_r']}, "
                      f"tau_t {experiment['protocol']['tau_t_ms']} ms, {experiment['duration_s']} s)",
                      highlight=False)


campaign_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="campaigns over generated inputs")


@campaign_app.command("twin")
def campaign_twin(
    count: int = typer.Option(..., "--count", help="generated experiments to run"),
    seed: int = typer.Option(1, "--seed", help="run i uses seed S + i (shape, topology, experiment, run)"),
    out: Optional[Path] = typer.Option(None, "--out", help="campaign directory (default "
                                       "results/campaigns/twin-<backend>-s<seed>-n<count>-<time>)"),
    backend: str = typer.Option("sim", "--backend", help="sim, or emulation: each run simulated and emulated "
                                "(relay links, as root) and judged by the twin verdict"),
    keep_runs: bool = typer.Option(False, "--keep-runs", help="sim: also write each run's directory under runs/"),
) -> None:
    """Run N generated topologies and experiments; write campaign.parquet and campaign.md (a row per run:
    valid or its error, agreement, lost, guaranteed customers complete, reformations, twin verdict)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .campaign import REPORT, TABLE, default_dir, run_campaign

    out = out or default_dir(seed, count, backend)
    columns = (TextColumn("[bold]campaign[/] twin"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=count)
        rows = run_campaign(count, seed, out, backend, keep_runs,
                            progress=lambda done, total: bar.update(task, completed=done))
    clean = sum(1 for r in rows if r["clean"])
    invalid = sum(1 for r in rows if not r["valid"])
    line = f"{len(rows)} runs: {clean} clean, {invalid} rejected by validation"
    judged = [r for r in rows if r["verdict"] is not None]
    if judged:
        line += f", twin verdict PASS {sum(r['verdict'] == 'PASS' for r in judged)}/{len(judged)}"
    console.print(line, highlight=False)
    console.print(f"table: {out / TABLE}\nreport: {out / REPORT}", highlight=False, soft_wrap=True)
