"""Print the seed bounds an experiment breaks (``spec_bounds``) as warning lines on stderr.

One function, called by ``rmptwin validate``, ``rmptwin sim`` and ``rmptwin run`` before
they start, so that the three commands warn alike.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from rmptwin.console import make_console
from rmptwin.errors import UserError
from rmptwin.spec import LoadedExperiment
from rmptwin.spec_bounds import format_violation, violated_bounds


def print_bound_warnings(loaded: LoadedExperiment, file: Path, *, strict: bool = False) -> None:
    """One yellow ``warning:`` line per violated bound; with ``strict``, then a UserError."""
    violations = violated_bounds(loaded)
    err = make_console(stderr=True)
    for v in violations:
        err.print(Text.assemble(("warning:", "bold yellow"), f" {file}: {format_violation(v)}"), highlight=False)
    if strict and violations:
        n = len(violations)
        raise UserError(f"{file}: {n} seed bound{'s' if n > 1 else ''} violated "
                        f"(--strict makes warnings errors; fix the parameters or drop --strict)")
