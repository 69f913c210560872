"""`rmptwin taxonomy compare`: the sequencer taxonomy, RMP and the CAS sequencer side by side.

Runs ``taxonomy_compare.run_point`` for every protocol over a sweep of group sizes and rates
(steady), and the receiver-loss and sequencer-crash scenarios at the first rate, and writes
``table.parquet``, ``table.md`` (with where RMP's rotating sequencer wins and loses, from the
numbers of this run) and PNG plots into ``--out``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rmptwin.cli.console import make_console
from rmptwin.errors import UserError
from rmptwin.rundir.run import RunDir
from rmptwin.studies.taxonomy_compare import PROTOCOLS, Point, measure_run, run_point

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Sequencer taxonomy (seed sequencer-taxonomy) beside RMP and the CAS sequencer")
console = make_console()

_Num = TypeVar("_Num", int, float)
_Key = tuple[str, int, float, str, int]   # a point: protocol, receivers, rate, scenario, seed

def _numbers(text: str, what: str, kind: Callable[[str], _Num] = int) -> list[_Num]:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--{what}: {text!r} is not a comma-separated list of numbers (e.g. 5,50,500)") from None
    if not values or any(v <= 0 for v in values):
        raise UserError(f"--{what}: give positive numbers, e.g. 5,50,500")
    return values


def plan(receivers: list[int], rates: list[float], fault_receivers: list[int], protocols: list[str],
         duration_s: float, seed: int) -> list[Point]:
    points = [Point(pr, n, r, "steady", seed, duration_s=duration_s)
              for n in receivers for r in rates for pr in protocols]
    points += [Point(pr, n, rates[0], sc, seed, duration_s=duration_s)
               for sc in ("lossy", "crash") for n in fault_receivers for pr in protocols]
    return sorted(points, key=lambda p: p.receivers)   # small groups first: the big ones take minutes


@app.command("compare")
def compare(
    receivers: str = typer.Option("5,50,500", help="group sizes (receivers) of the steady sweep"),
    rates: str = typer.Option("100,400", help="workload rates (messages/s over all senders)"),
    fault_receivers: str = typer.Option("5,50", help="group sizes of the loss and crash scenarios (first rate)"),
    protocols: str = typer.Option(",".join(PROTOCOLS), help="protocols to run"),
    duration: float = typer.Option(2.0, help="seconds of workload per run"),
    seed: int = typer.Option(1),
    quick: bool = typer.Option(False, help="5 and 20 receivers, 100 msg/s, 1 s: a minute, for a first look"),
    out: Path = typer.Option(Path("results/taxonomy"), help="where the table and plots go"),
    reuse: Path | None = typer.Option(None, help="rows.jsonl of an earlier run: its points are not run again"),
) -> None:
    """Same topology, same workload, every protocol: one table (Parquet + markdown) and plots."""
    try:
        chosen = [p.strip() for p in protocols.split(",") if p.strip()]
        unknown = [p for p in chosen if p not in PROTOCOLS]
        if unknown or not chosen:
            raise UserError(f"--protocols: unknown {', '.join(unknown) or '(none given)'}; "
                            f"choose from {', '.join(PROTOCOLS)}")
        if duration <= 0:
            raise UserError("--duration: give a positive number of seconds")
        if quick:
            sizes, rate_list, fault_sizes, duration = [5, 20], [100.0], [5], 1.0
        else:
            sizes = _numbers(receivers, "receivers")
            rate_list = _numbers(rates, "rates", float)
            fault_sizes = _numbers(fault_receivers, "fault-receivers")
        points = plan(sizes, rate_list, fault_sizes, chosen, duration, seed)
        rows = run_all(points, out / "rows.jsonl", _earlier(reuse))
        from rmptwin.analysis.taxonomy_report import write_outputs
        paths = write_outputs(rows, out)
    except UserError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    for p in paths:
        console.print(f"wrote {p}")


def _key(p: Point) -> _Key:
    return (p.protocol, p.receivers, float(p.rate), p.scenario, p.seed)


def _earlier(path: Path | None) -> dict[_Key, dict[str, Any]]:
    if path is None:
        return {}
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise UserError(f"--reuse {path}: cannot read it as JSON lines ({e})") from None
    return {(r["protocol"], r["receivers"], float(r["rate"]), r["scenario"], r["seed"]): r for r in rows}


def run_all(points: list[Point], journal: Path | None = None,
            earlier: dict[_Key, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Run every point (or take its row from ``earlier``); each row is also appended to
    ``journal`` (JSON lines) as it is measured."""
    rows: list[dict[str, Any]] = []
    earlier = earlier or {}
    if journal is not None:
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text("")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("taxonomy", total=len(points))
        for p in points:
            progress.update(task, description=f"{p.protocol:9} n={p.receivers:<4} {p.rate:g}/s {p.scenario}")
            rows.append(earlier.get(_key(p)) or run_point(p))
            if journal is not None:
                with journal.open("a") as f:
                    f.write(json.dumps(rows[-1]) + "\n")
            progress.advance(task)
    return rows


@app.command("measure")
def measure(runs: list[Path] = typer.Argument(..., help="run directories (simulated or emulated)")) -> None:
    """Latency p50/p99, messages lost, agreement and time to resume of taxonomy, RMP or CAS runs."""
    for run in runs:
        if not RunDir(run).manifest_path.exists():
            raise UserError(f"{run}: not a run directory (no {RunDir(run).manifest_path.name})")
        console.print(json.dumps(measure_run(run)), highlight=False, soft_wrap=True)
