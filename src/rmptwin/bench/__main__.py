"""Run every ``bench_*.py`` module (or ``--only NAME``), print a table, write results/bench/bench.md."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import rmptwin.bench as pkg
from rmptwin.provenance import git_commit

COLUMNS = ("bench", "metric", "value", "unit", "goal", "ok", "note")


def discover() -> list[str]:
    return sorted(m.name.removeprefix("bench_") for m in pkgutil.iter_modules(pkg.__path__)
                  if m.name.startswith("bench_"))


def fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def run_one(name: str, quick: bool) -> list[dict]:
    t0 = time.perf_counter()
    try:
        rows = importlib.import_module(f"rmptwin.bench.bench_{name}").run(quick)
    except Exception as e:  # noqa: BLE001 - one broken benchmark must not hide the others
        tb = traceback.format_exc().strip().splitlines()[-1]
        return [{"bench": name, "metric": "(failed)", "value": type(e).__name__, "ok": False, "note": tb}]
    wall = time.perf_counter() - t0
    out = [{"bench": name, **r} for r in rows]
    out.append({"bench": name, "metric": "benchmark wall time", "value": wall, "unit": "s"})
    return out


def write_markdown(rows: list[dict], path: Path, quick: bool) -> None:
    lines = [
        "# rmptwin benchmarks", "",
        f"- run: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}{' (quick)' if quick else ''}",
        f"- git commit: {git_commit() or 'unknown'}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}", "",
        "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c)).replace("|", "/") for c in COLUMNS) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    path.with_suffix(".json").write_text(json.dumps(rows, indent=2, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmptwin.bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (seconds, not minutes)")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this benchmark (repeatable)")
    ap.add_argument("--out", default="results/bench/bench.md", help="markdown report path")
    args = ap.parse_args(argv)
    console = Console()
    names = discover()
    if args.only:
        wanted = [n.removeprefix("bench_") for n in args.only]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            console.print(f"[bold red]rmptwin bench:[/] unknown benchmark {', '.join(unknown)}; "
                          f"known: {', '.join(names)}")
            return 2
        names = wanted
    rows: list[dict] = []
    with Progress(TextColumn("[bold]bench[/] {task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("", total=len(names))
        for name in names:
            bar.update(task, description=name)
            rows.extend(run_one(name, args.quick))
            bar.advance(task)
    table = Table(title="rmptwin benchmarks" + (" (quick)" if args.quick else ""))
    for c in COLUMNS:
        table.add_column(c, overflow="fold", max_width=60 if c == "note" else None)
    for r in rows:
        table.add_row(*(fmt(r.get(c)) for c in COLUMNS))
    console.print(table)
    out = Path(args.out)
    write_markdown(rows, out, args.quick)
    console.print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
