"""`rmptwin topo gen` and `rmptwin topo import`: topologies nobody here wrote (mounted by ``cli.main``)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from rmptwin.cli.console import make_console
from rmptwin.errors import UserError
from rmptwin.topotools.yaml_files import dump_yaml, schema_header, write_text

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="bring your own topology: generate a random one or import a GraphML/GML graph")
console = make_console()



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
    out: Path | None = typer.Option(None, "--out", help="topology YAML (default: print it)"),
    experiment_out: Path | None = typer.Option(
        None, "--experiment-out", help="also write an experiment fitted to it (needs --out)"),
) -> None:
    """Write a random valid topology: a tree (or a mesh with --mesh), connected regions, every RMP role
    placed (sources, primary ring, an R_T, an R_x and customers per region, a reformation server)."""
    from rmptwin.topotools.generate import GenParams, generate

    if experiment_out is not None and out is None:
        raise UserError("--experiment-out needs --out (the experiment names the topology file)")
    params = GenParams(switches=switches, regions=regions, loss_max=loss_max, mesh=mesh, sources=sources,
                       primaries=max(primaries, regions), customers_per_region=customers_per_region,
                       stripes=stripes)
    # out is not None with experiment_out (checked above)
    ref = relative_ref(experiment_out, out) if experiment_out is not None and out is not None else "topology.yaml"
    topology, experiment = generate(params, seed, ref)
    text = dump_yaml(topology, schema_header("topology", out) + f"# rmptwin topo gen --switches {switches} "
                     f"--seed {seed} --regions {regions} --loss-max {loss_max} --mesh {mesh}\n")
    if out is None:
        print(text, end="")
        return
    write_text(out, text)
    console.print(f"{out}: topology '{topology['name']}' ({len(topology['switches'])} switches, "
                  f"{len(topology['links'])} links, {len(topology['hosts'])} hosts)", highlight=False)
    if experiment_out is not None:
        write_text(experiment_out, dump_yaml(experiment, schema_header("experiment", experiment_out)))
        console.print(f"{experiment_out}: experiment '{experiment['name']}' (k_r {experiment['protocol']['k_r']}, "
                      f"tau_t {experiment['protocol']['tau_t_ms']} ms, duration_s {experiment['duration_s']})",
                      highlight=False)



@app.command("import")
def import_(
    file: Path = typer.Argument(..., help="a GraphML or GML graph (Internet Topology Zoo style: Latitude, Longitude)"),
    out: Path | None = typer.Option(None, "--out", help="topology YAML (default: print it)"),
    region_by: str | None = typer.Option(None, "--region-by", help="node attribute (e.g. Country): a region per "
                                            "connected group of nodes sharing its value; default one region"),
    sources: int = typer.Option(1, "--sources", help="sources, on the highest-degree switches"),
    primaries: int = typer.Option(3, "--primaries", help="ring size (raised to one R_T per region)"),
    customers_per_region: int = typer.Option(2, "--customers-per-region", help="0: no customers and no R_x"),
    route_factor: float = typer.Option(1.0, "--route-factor", help="fibre length / great-circle distance"),
    overhead_ms: float = typer.Option(0.1, "--overhead-ms", help="added to every link's delay"),
    loss: float = typer.Option(0.0, "--loss", help="Bernoulli loss on every switch link"),
    drop_uncoordinated: bool = typer.Option(False, "--drop-uncoordinated",
                                            help="leave out nodes without coordinates (default: an error)"),
    largest_component: bool = typer.Option(False, "--largest-component",
                                           help="keep the largest connected part (default: an error)"),
    experiment_out: Path | None = typer.Option(
        None, "--experiment-out", help="also write an experiment fitted to it (needs --out)"),
    seed: int = typer.Option(1, "--seed", help="the experiment's seed"),
) -> None:
    """Import a GraphML/GML graph: link delays from the great-circle distance at 2/3 c (+ overhead), bandwidth
    where given, regions from a node attribute, roles placed by a fixed rule set (docs/bring-your-own-topology.md)."""
    from rmptwin.topotools.generate import GenParams, generate_experiment
    from rmptwin.topotools.zoo_import import FIBRE_KM_PER_MS, ImportOptions, import_graph

    if experiment_out is not None and out is None:
        raise UserError("--experiment-out needs --out (the experiment names the topology file)")
    opts = ImportOptions(region_by=region_by, sources=sources, primaries=primaries,
                         customers_per_region=customers_per_region, route_factor=route_factor,
                         overhead_ms=overhead_ms, loss=loss, drop_uncoordinated=drop_uncoordinated,
                         largest_component=largest_component)
    topology, notes = import_graph(file, opts)
    err = make_console(stderr=True)
    for note in notes:
        err.print(f"note: {file}: {note}", highlight=False, soft_wrap=True)
    header = (schema_header("topology", out) + f"# Imported from {file.name} by `rmptwin topo import`"
              + (f" --region-by {region_by}" if region_by else "")
              + f" --sources {sources} --primaries {primaries} --customers-per-region {customers_per_region}"
              + (f" --loss {loss:g}" if loss else "") + "\n"
              + f"# delay_ms = {route_factor:g} x great-circle km / {FIBRE_KM_PER_MS:.4f} km/ms (2/3 c) + "
              f"{overhead_ms:g} ms per link\n")
    text = dump_yaml(topology, header)
    if out is None:
        print(text, end="")
        return
    write_text(out, text)
    console.print(f"{out}: topology '{topology['name']}' ({len(topology['switches'])} switches, "
                  f"{len(topology['links'])} links, {len(topology['regions'])} regions, {len(topology['hosts'])} hosts)",
                  highlight=False)
    if experiment_out is not None:
        params = GenParams(switches=len(topology["switches"]), regions=len(topology["regions"]), sources=sources,
                           rate_per_source=50.0, workload_s=3.0)
        exp = generate_experiment(params, seed, topology, relative_ref(experiment_out, out))
        exp["description"] = f"{topology['name']} imported from {file.name} by `rmptwin topo import`"
        exp_header = schema_header("experiment", experiment_out)
        write_text(experiment_out, dump_yaml(exp, exp_header))
        console.print(f"{experiment_out}: experiment '{exp['name']}' (dN {exp['protocol']['dn_ms']} ms, k_r "
                      f"{exp['protocol']['k_r']}, tau_t {exp['protocol']['tau_t_ms']} ms, duration_s {exp['duration_s']})",
                      highlight=False)

campaign_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="campaigns over generated inputs")


@campaign_app.command("twin")
def campaign_twin(
    count: int = typer.Option(..., "--count", help="generated experiments to run"),
    seed: int = typer.Option(1, "--seed", help="run i uses seed S + i (shape, topology, experiment, run)"),
    out: Path | None = typer.Option(None, "--out", help="campaign directory (default "
                                       "results/campaigns/twin-<backend>-s<seed>-n<count>-<time>)"),
    backend: str = typer.Option("sim", "--backend", help="sim, or emulation: each run simulated and emulated "
                                "(relay links, as root) and judged by the twin verdict"),
    keep_runs: bool = typer.Option(False, "--keep-runs", help="sim: also write each run's directory under runs/"),
    nodes: str = typer.Option("ns", "--nodes", help="emulation: ns (namespace hosts) or docker"),
) -> None:
    """Run N generated topologies and experiments; write campaign.parquet and campaign.md (a row per run:
    valid or its error, agreement, lost, guaranteed customers complete, reformations, twin verdict)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rmptwin.studies.twin_campaign import REPORT, TABLE, default_dir, run_campaign

    out = out or default_dir(seed, count, backend)
    columns = (TextColumn("[bold]campaign[/] twin"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=count)
        rows = run_campaign(count, seed, out, backend, keep_runs, nodes,
                            progress=lambda done, total: bar.update(task, completed=done))
    clean = sum(1 for r in rows if r["clean"])
    invalid = sum(1 for r in rows if not r["valid"])
    line = f"{len(rows)} runs: {clean} clean, {invalid} rejected by validation"
    judged = [r for r in rows if r["verdict"] is not None]
    if judged:
        line += f", twin verdict PASS {sum(r['verdict'] == 'PASS' for r in judged)}/{len(judged)}"
    console.print(line, highlight=False)
    console.print(f"table: {out / TABLE}\nreport: {out / REPORT}", highlight=False, soft_wrap=True)


trace_app = typer.Typer(add_completion=False, no_args_is_help=True, help="measured loss traces")


@trace_app.command("fit")
def trace_fit(file: Path = typer.Argument(..., help="a loss trace: 0/1 per packet, or 'start_ms end_ms' per line")) -> None:
    """Print the Bernoulli and Gilbert-Elliott parameters that fit a trace (maximum likelihood), each with its
    log-likelihood, and the loss: line to paste into a topology."""
    from rmptwin.model.traces import read_trace
    from rmptwin.topotools.trace_fit import fit, interval_lines, report_lines

    trace = read_trace(file)
    lines = interval_lines(trace["intervals_ms"]) if "intervals_ms" in trace else report_lines(fit(trace["packets"]))
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
