"""Run every ``bench_*.py`` module (or ``--only NAME``) 3 times, print each figure (median,
min-max) beside the reference copy, flag regressions, write results/bench/bench.json and bench.md."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import time
import traceback
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import rmptwin.bench as pkg
from rmptwin.bench import harness
from rmptwin.bench.harness import BenchFiles
from rmptwin.cli.console import make_console, print_error
from rmptwin.errors import UserError
from rmptwin.rundir.provenance import git_commit

COLUMNS = ("bench", "metric", "value", "range", "n", "unit", "better", "floor", "x floor", "reference",
           "vs reference", "goal", "ok", "conditions", "note")
CONSOLE_COLUMNS = ("bench", "metric", "value", "range", "n", "unit", "floor", "x floor", "reference", "vs reference",
                   "goal", "ok", "conditions")


def discover() -> list[str]:
    return sorted(m.name.removeprefix("bench_") for m in pkgutil.iter_modules(pkg.__path__)
                  if m.name.startswith("bench_"))


def fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def cell(row: dict[str, Any], col: str) -> str:
    """A column of a compared row as text (plain: the console adds colour)."""
    if col == "range":
        return "" if row.get("min") is None else f"{fmt(row['min'])} – {fmt(row['max'])}"
    if col == "x floor":
        ratio = harness.floor_ratio(row)
        return "" if ratio is None else f"{ratio:.2f} x"
    if col == "floor" and row.get("floor") is not None and row.get("floor_what"):
        return f"{fmt(row['floor'])} ({row['floor_what']})"
    if col == "vs reference":
        w = row.get("worse_by")
        if w is None:
            return "no reference" if row.get("reference") is None else "not compared"
        verdict = "REGRESSION" if row.get("regression") else ("worse" if w > 0 else "better")
        return f"{abs(w):.0%} {verdict}"
    return fmt(row.get(col))


def run_one(name: str, quick: bool) -> list[dict[str, Any]]:
    """One run of one module: its rows (each tagged with the bench name) and its wall time."""
    t0 = time.perf_counter()
    try:
        rows = importlib.import_module(f"rmptwin.bench.bench_{name}").run(quick)
    except Exception as e:
        tb = traceback.format_exc().strip().splitlines()[-1]
        return [{"bench": name, "metric": "(failed)", "value": type(e).__name__, "ok": False, "note": tb}]
    wall = time.perf_counter() - t0
    out = [{"bench": name, **r} for r in rows]
    # informative, not compared: tiny and noisy for quick modules, dominated by set-up for others
    out.append({"bench": name, "metric": "benchmark wall time", "value": wall, "unit": "s"})
    return out


def run_module(name: str, quick: bool, runs: int | None = None) -> list[dict[str, Any]]:
    """``runs`` runs of a module (default: its RUNS, else harness.RUNS), one aggregated row per
    metric; a failing run ends the repetition (its failure row is kept)."""
    module = importlib.import_module(f"rmptwin.bench.bench_{name}")
    default: int = getattr(module, "RUNS", harness.RUNS)
    n = runs or default
    results = []
    for _ in range(n):
        rows = run_one(name, quick)
        results.append(rows)
        if any(r["metric"] == "(failed)" for r in rows):
            break
    return harness.merge_runs(results)


def header(quick: bool) -> dict[str, Any]:
    return {"run": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "mode": "quick" if quick else "full",
            "git_commit": git_commit() or "unknown",
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            # a shared machine makes every figure slower: say how busy it was
            "load_average_1min": round(os.getloadavg()[0], 1)}


def write_report(rows: list[dict[str, Any]], files: BenchFiles, meta: dict[str, Any]) -> None:
    lines = ["# rmptwin benchmarks", "",
             f"- run: {meta['run']} ({meta['mode']})", f"- git commit: {meta['git_commit']}",
             f"- machine: {meta['machine']}, load average {meta['load_average_1min']} at the end",
             f"- reference: {files.reference}",
             f"- value: median of n runs, range: min – max; a figure more than "
             f"{harness.TOLERANCE:.0%} worse than the reference is a REGRESSION", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r, c).replace("|", "/") for c in COLUMNS) + " |" for r in rows]
    files.out_dir.mkdir(parents=True, exist_ok=True)
    files.markdown_path.write_text("\n".join(lines) + "\n")
    files.json_path.write_text(json.dumps({**meta, "rows": rows}, indent=2, default=str) + "\n")


def print_table(console: Console, rows: list[dict[str, Any]], quick: bool) -> None:
    table = Table(title="rmptwin benchmarks" + (" (quick)" if quick else "") + ": median of n, min – max")
    for c in CONSOLE_COLUMNS:
        table.add_column(c, overflow="fold", max_width=40 if c == "conditions" else None)
    for r in rows:
        texts = [cell(r, c) for c in CONSOLE_COLUMNS]
        if r.get("regression"):
            texts = [f"[bold red]{t}[/]" for t in texts]
        table.add_row(*texts)
    console.print(table)
    bad = [r for r in rows if r.get("regression")]
    for r in bad:
        console.print(f"[bold red]REGRESSION[/] {r['bench']}: {r['metric']}: {fmt(r['value'])} {r.get('unit') or ''} "
                      f"vs reference {fmt(r['reference'])} ({r['worse_by']:.0%} worse, {r.get('better')} is better)")


PROG = "rmptwin bench:"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m rmptwin.bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (seconds, not minutes)")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this benchmark (repeatable)")
    ap.add_argument("--runs", type=int, metavar="N", help="runs per module (default: the module's, else 3)")
    ap.add_argument("--out", default="results/bench", help="directory for bench.json and bench.md")
    ap.add_argument("--reference", help="reference copy to compare with (default: bench/reference.json)")
    ap.add_argument("--write-reference", action="store_true",
                    help="store this run's figures as the reference for the benchmarks run (same mode)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    console = make_console()
    names = discover()
    if args.only:
        wanted = [n.removeprefix("bench_") for n in args.only]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            print_error(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(names)}", prefix=PROG)
            return 2
        names = wanted
    if args.runs is not None and args.runs < 1:
        print_error("--runs must be at least 1", prefix=PROG)
        return 2
    files = BenchFiles(args.out, args.reference)
    os.environ["RMPTWIN_BENCH_OUT"] = str(files.out_dir)  # bench_spark writes its query plans beside the table
    try:
        reference = files.read_reference()
    except UserError as e:
        print_error(str(e), prefix=PROG)
        return 2
    rows: list[dict[str, Any]] = []
    with Progress(TextColumn("[bold]bench[/] {task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("", total=len(names))
        for name in names:
            bar.update(task, description=name)
            rows.extend(run_module(name, args.quick, args.runs))
            bar.advance(task)
    meta = header(args.quick)
    rows = harness.compare_all(rows, reference, meta["mode"])
    print_table(console, rows, args.quick)
    write_report(rows, files, meta)
    console.print(f"written: {files.json_path}, {files.markdown_path}")
    if args.write_reference:
        ref_meta = {k: meta[k] for k in ("run", "git_commit", "machine", "load_average_1min")}
        new = harness.updated_reference(reference, rows, meta["mode"], discover(), ref_meta)
        files.reference.parent.mkdir(parents=True, exist_ok=True)
        files.reference.write_text(json.dumps(new, indent=2) + "\n")
        console.print(f"reference updated: {files.reference} ({meta['mode']}: {', '.join(names)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
