"""Print what an experiment or topology likely did not mean as warning lines on stderr: the
seed bounds it breaks (``model.bounds``), the legal but likely unintended role placements
(``model.role_checks``: an unused region, an R_x nobody asks, ...) and a run too short for its
work (``model.drain``).

One function per file kind, called by ``rmptwin validate``, ``rmptwin sim`` and ``rmptwin
run`` before they start, so that the three commands warn alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.text import Text

from rmptwin.cli.console import make_console
from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment, Topology, read_yaml
from rmptwin.model.bounds import format_violation, violated_bounds
from rmptwin.model.drain import run_length_warnings, workload_end_s
from rmptwin.model.loading import finding_line
from rmptwin.model.overrides import make_points
from rmptwin.model.role_checks import Finding, experiment_warnings, topology_warnings


def print_bound_warnings(loaded: LoadedExperiment, file: Path, *, strict: bool = False) -> None:
    """One yellow ``warning:`` line per violated bound and per role warning; with ``strict``,
    then a UserError."""
    lines = [f"{file}: {format_violation(v)}" for v in violated_bounds(loaded)]
    n_bounds = len(lines)
    topo_file = Path(os.path.normpath(Path(file).parent / loaded.experiment.topology))
    lines += _finding_lines(topo_file, topology_warnings(loaded.topology))
    lines += _finding_lines(file, experiment_warnings(loaded.experiment, loaded.topology))
    lines += _finding_lines(file, run_length_warnings(loaded.experiment, loaded.topology))
    _print(lines)
    if strict and lines:
        n = len(lines)
        what = (f"{n} seed bound{'s' if n > 1 else ''} violated" if n == n_bounds else
                f"{n} warning{'s' if n > 1 else ''} ({n_bounds} seed bound{'s' if n_bounds != 1 else ''})")
        raise UserError(f"{file}: {what} (--strict makes warnings errors; fix the parameters or drop --strict)")


def print_topology_warnings(topo: Topology, file: Path, *, strict: bool = False) -> None:
    """The role warnings of a topology file alone (``rmptwin validate TOPOLOGY``)."""
    lines = _finding_lines(file, topology_warnings(topo))
    _print(lines)
    if strict and lines:
        n = len(lines)
        raise UserError(f"{file}: {n} warning{'s' if n > 1 else ''} (--strict makes warnings errors; fix the "
                        "topology or drop --strict)")


def _finding_lines(file: Path, findings: list[Finding]) -> list[str]:
    """``file:line: field: key: problem`` per finding (the line found in the file's YAML)."""
    if not findings:
        return []
    try:
        _, text = read_yaml(Path(file))
    except UserError:
        text = ""   # a topology built in memory: no line numbers
    return [finding_line(Path(file), text, Finding(f.path, f"{f.field}: {f.key}", f.message)) for f in findings]


def _print(lines: list[str]) -> None:
    err = make_console(stderr=True)
    for line in lines:
        err.print(Text.assemble(("warning:", "bold yellow"), f" {line}"), highlight=False)


def run_length(loaded: LoadedExperiment) -> str:
    """How long the run lasts, and for ``auto`` what it is made of: ``runs 10.6 s (auto: the work
    ends at 4.5 s, then 6.1 s of drain)``."""
    if loaded.experiment.duration_s != "auto":
        return f"runs {loaded.duration_s:g} s"
    work = workload_end_s(loaded.experiment, loaded.topology)
    return f"runs {loaded.duration_s:g} s (auto: the work ends at {work:g} s, then {loaded.duration_s - work:.1f} s of drain)"


def print_sweep_run_length_warnings(loaded: LoadedExperiment, values: dict[str, list[Any]], file: Path) -> None:
    """One ``duration_vs_drain`` warning line for the points of a sweep whose explicit
    ``duration_s`` ends before their work (a point's own workload and protocol decide)."""
    short = []
    for point in make_points(loaded, values):
        for f in run_length_warnings(point.loaded.experiment, point.loaded.topology):
            short.append(f"{point.label}: {f.message}")
    if short:
        more = f" (and {len(short) - 1} more points)" if len(short) > 1 else ""
        _print([f"{file}: duration_s: duration_vs_drain: {short[0]}{more}"])
