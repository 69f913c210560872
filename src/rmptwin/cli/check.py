"""`rmptwin check RUN_DIR`: every applicable checker on a run directory (mounted by rmptwin.cli.main).
Exit 0: no violation; 1: a violation (the first one printed with its events); 2: bad input."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from rmptwin.checkers import Verdict, first_violation
from rmptwin.cli.console import make_console
from rmptwin.rundir.run import RunDir

app = typer.Typer(add_completion=False)
console = make_console()


def verdict_table(verdicts: list[Verdict]) -> Table:
    table = Table(show_header=True, header_style="bold")
    for col in ("checker", "verdict", "checked"):
        table.add_column(col)
    for v in verdicts:
        style = {"ok": "green", "violation": "bold red", "short": "yellow"}.get(v.status, "dim")
        table.add_row(v.checker, f"[{style}]{v.status}[/]", v.note)
    return table


def event_table(events: Iterable[dict[str, Any]]) -> Table:
    table = Table(show_header=True, header_style="bold")
    for col in ("t_ns", "node", "kind", "src", "src_seq", "gseq", "detail"):
        table.add_column(col)
    for e in events:
        table.add_row(*(str(e.get(c, "")) for c in ("t_ns", "node", "kind", "src", "src_seq", "gseq", "detail")))
    return table


def print_verdicts(verdicts: list[Verdict]) -> bool:
    """The verdicts, and the first violation with its events; True if there is one."""
    console.print(verdict_table(verdicts))
    v = first_violation(verdicts)
    if v is None:
        return False
    console.print(f"VIOLATION {v.line()}", style="bold red", highlight=False, markup=False)
    if v.events:
        console.print(event_table(v.events))
    return True


@app.command()
def check(run_dir: Path = typer.Argument(..., help="a run directory (rmptwin sim / run / chaos)")) -> None:
    """Run every applicable history checker on a run (total order, messages, customers, CAS
    linearizability, venue, trading floor, unified orders); exit 1 on a violation."""
    from rmptwin.checkers.suite import check_run

    verdicts = check_run(RunDir(run_dir))
    if print_verdicts(verdicts):
        raise typer.Exit(1)
