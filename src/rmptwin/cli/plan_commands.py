"""`rmptwin plan`: the time dilation factor an experiment needs on this host, without running it.

The simulator predicts the run's work per role; this host's calibration (made once, by two
emulated runs of the quickstart, then cached) prices it; the plan is the smallest factor whose
busy CPUs stay within the planner's headroom (``planning.plan``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from rmptwin import api
from rmptwin.cli.console import make_console
from rmptwin.cli.overrides import SET_HELP, apply_set_options, parse_factors
from rmptwin.errors import UserError
from rmptwin.planning.plan import HEADROOM, LADDER, describe

app = typer.Typer(add_completion=False, help="plan an emulated run's time dilation on this host")
console = make_console()


@app.command("plan")
def plan(
    experiment: Path,
    nodes: str = typer.Option("docker", help="host kind the run would use: docker or ns"),
    impair: str = typer.Option("auto", help="link impairment backend: auto, netem or relay"),
    sets: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP),
    recalibrate: bool = typer.Option(False, "--recalibrate", help="measure this host again (~7 min: five "
                                     "emulated runs, the quickstart and line3 at two factors each, the venue at one), even if a "
                                     "calibration is cached"),
    at: float = typer.Option(0.0, "--at", help="also show the prediction at this factor"),
    measure: str = typer.Option("", "--measure", metavar="N,N,auto", help="then run it: simulated once and "
                                "emulated at each factor, beside the plan (wall time, lateness, busy CPUs, verdict)"),
    out: Path | None = typer.Option(None, help="--measure's directory (default results/<experiment>/ladder-<time>)"),
) -> None:
    """Per-role CPU demand, the time dilation factor on time, and the wall time, before running."""
    if nodes not in ("docker", "ns"):
        raise UserError(f"--nodes {nodes}: plan a run with docker or ns hosts (flat runs have no switches to plan)")
    factors = parse_factors(measure) if measure else []   # a typo fails now, not after a calibration
    options = api.EmulationOptions(nodes=nodes, impair=impair)
    loaded = apply_set_options(api.load_experiment(experiment), sets)
    with console.status("simulating the run's work"):
        p = api.plan(loaded, options=options, recalibrate=recalibrate, say=console.print)
    cal, demand, chosen = p.calibration, p.demand, p.chosen
    cpus = int(cal.identity.get("cpus") or os.cpu_count() or 1)
    console.print(f"host: {cpus} CPUs, {cal.identity.get('cpu') or 'unknown CPU'}, kernel {cal.identity['kernel']}, "
                  f"{nodes} hosts, {cal.identity['impair']} links; calibration {p.calibration_path} "
                  f"({len(cal.samples)} runs)", highlight=False)
    shown = sorted({1.0, chosen.tdf, *([at] if at >= 1 else [])})
    table = Table(title=f"{loaded.experiment.name}: {demand.run_s:g} s of run time", title_justify="left")
    table.add_column("role")
    table.add_column("hosts", justify="right")
    table.add_column("datagrams/s", justify="right")
    for n in shown:
        table.add_column(f"CPUs at {n:g}", justify="right")
    preds = {n: p.at(n) for n in shown}
    for role in sorted(demand.nodes):
        lent = " (costed as the dearest calibrated role)" if role in chosen.borrowed else ""
        table.add_row(role + lent, str(demand.nodes[role]), f"{demand.datagrams.get(role, 0.0):.0f}",
                      *(f"{preds[n].roles[role]:.2f}" for n in shown))
    table.add_row("switch links, switch, captures", str(demand.switch_links), f"{demand.switch_frames:.0f} frames",
                  *(f"{preds[n].other_cpus:.2f}" for n in shown))
    table.add_row("all", str(sum(demand.nodes.values())), "", *(f"{preds[n].busy_cpus:.2f}" for n in shown))
    table.add_row(f"path latency added (ms; median path {demand.path_delay_ms:.1f} ms)", f"{demand.path_hops:g} links", "",
                  *(f"{preds[n].path_excess_ms:.2f}" for n in shown))
    console.print(table)
    if chosen.tdf == LADDER[-1] and chosen.busy_cpus > HEADROOM * cpus:
        why = ("its idle costs alone fill this host" if chosen.idle_cpus > HEADROOM * cpus
               else f"at {LADDER[-1]:g} its work still keeps {chosen.busy_cpus - chosen.idle_cpus:.2f} CPUs busy")
        console.print(f"no factor up to {LADDER[-1]:g} keeps it within {HEADROOM * cpus:.1f} CPUs: {why}")
    console.print(describe(chosen, cpus), highlight=False)
    if not factors:
        console.print(f"run it so: rmptwin run {experiment} --tdf auto   (or --tdf {chosen.tdf:g})", highlight=False)
        return
    where = out or Path("results") / loaded.experiment.name / time.strftime("ladder-%Y%m%dT%H%M%SZ", time.gmtime())
    rows = api.measure_dilation(loaded, factors, where, options=options, say=console.print)
    print_ladder(rows)
    console.print(f"ladder: {where / 'ladder.json'}, figure {where / 'ladder.png'}", highlight=False)


def print_ladder(rows: list[dict[str, Any]]) -> None:
    table = Table(title="measured beside the plan", title_justify="left")
    for col in ("asked", "TDF", "wall s (plan)", "busy CPUs (plan)", "error", "lateness p99 ms", "run queue p90",
                "overloaded", "verdict"):
        table.add_column(col, justify="right")
    for r in rows:
        plan_wall = f" ({r['predicted_wall_s']:.0f})" if r.get("predicted_wall_s") is not None else ""
        plan_busy = f" ({r['predicted_busy_cpus']:.2f})" if r.get("predicted_busy_cpus") is not None else ""
        table.add_row(str(r["asked"]), f"{r['tdf']:g}", f"{r['wall_s']:.0f}{plan_wall}",
                      f"{r['busy_cpus']:.2f}{plan_busy}" if r.get("busy_cpus") is not None else "",
                      f"{r['error_pct']:+.0f} %" if r.get("error_pct") is not None else "",
                      f"{r['lateness_p99_ms']} ({r['lateness_role']})", f"{r['run_queue_p90']:.1f}",
                      "yes" + (f", {r['enough_tdf']:g} enough" if r.get("enough_tdf") else "") if r["overloaded"] else "no",
                      f"{r['verdict']} {r['rules_passed']}/{r['rules_passed'] + r['rules_failed']}"
                      + (f" ({', '.join(r['failed'])})" if r["failed"] else ""))
    console.print(table)
