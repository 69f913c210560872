"""`rmptwin compare RUN_A RUN_B`: two runs' headline metrics side by side (terminal and HTML),
and the twin verdict (``twin_verdict``: A simulated, B emulated, one rule per metric with its
tolerance) with one final PASS/FAIL line."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rmptwin.analysis.report import CSS, fmt
from rmptwin.analysis.seed_spread import SPREAD_SEEDS, control_spread
from rmptwin.analysis.twin_verdict import FAIL, PASS, Rule, inputs_of, passed, twin_verdict
from rmptwin.errors import UserError
from rmptwin.rundir.run import RunDir


def load_metrics(run: Path) -> dict[str, Any]:
    try:
        return RunDir(run).read_metrics()
    except FileNotFoundError:
        raise UserError(f"{run}: not analysed yet (run `rmptwin analyze {run}` first)") from None


def rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, object, object, float | None]]:
    """(metric, value in A, value in B, B/A) for every headline metric of either run."""
    ha, hb = a.get("headline", {}), b.get("headline", {})
    out = []
    for k in list(ha) + [k for k in hb if k not in ha]:
        va, vb = ha.get(k), hb.get(k)
        ratio = vb / va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and va else None
        out.append((k, va, vb, ratio))
    return out


def _name(m: dict[str, Any], run: Path) -> str:
    """The run as the comparison names it; an emulated run with the time dilation factor its
    figures were made at (its virtual time is the simulator's time; the factor is the host's share)."""
    man = m.get("manifest") or {}
    exp = man.get("experiment") or {}
    how = ""
    if man.get("backend") == "emulation":
        auto = (man.get("time_dilation_plan") or {}).get("requested") == "auto"
        how = f", emulated at TDF {exp.get('time_dilation', 1.0):g}{' (auto)' if auto else ''}"
    return f"{exp.get('name', run.name)} ({run.name}{how})"


STYLE = {PASS: "green", FAIL: "bold red"}


def verdict_rules(run_a: Path, run_b: Path, seeds: int = SPREAD_SEEDS,
                  progress: Callable[[int, int], None] | None = None) -> list[Rule]:
    """The twin verdict of B (emulated) against A (simulated), one rule per metric. Where a run
    keeps no drop log (netem), A's experiment is simulated at ``seeds`` other seeds first: the
    spread control per data is judged by (``progress(done, total)`` after each; 0: none)."""
    dir_a = RunDir(run_a)
    a, b = inputs_of(dir_a), inputs_of(RunDir(run_b))
    simulated = dir_a.read_manifest().get("backend") == "sim"
    if seeds > 0 and simulated and (a.link_loss is None or b.link_loss is None):
        a = replace(a, control_spread=control_spread(dir_a, seeds, progress))
    return twin_verdict(a, b)


def verdict_line(rules: list[Rule]) -> str:
    """The final line: PASS or FAIL, how many rules passed and failed, which were not judged."""
    skipped = [r.metric for r in rules if r.status not in (PASS, FAIL)]
    tail = f" ({len(skipped)} not judged: {', '.join(skipped)})" if skipped else ""
    return (f"twin verdict: {'PASS' if passed(rules) else 'FAIL'} — {sum(r.status == PASS for r in rules)} pass, "
            f"{sum(r.status == FAIL for r in rules)} fail{tail}")


def print_verdict(rules: list[Rule], console: Console) -> bool:
    """Print the twin verdict (``verdict_rules``): a table of rules and one final PASS/FAIL line.
    Returns whether no rule failed."""
    console.print(verdict_table(rules))
    ok = passed(rules)
    # Unwrapped lines: a log's tail (CI shows only that) names what failed, whatever the width.
    console.print(f"[{STYLE[PASS if ok else FAIL]}]{verdict_line(rules)}[/]", highlight=False, soft_wrap=True)
    for line in failed_lines(rules):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    return ok


def failed_lines(rules: list[Rule]) -> list[str]:
    """One line per failed rule, after the final line: its metric, both values, its tolerance
    and its note (the table's cells, which a narrow terminal wraps)."""
    return [f"failed: {r.metric}: A {r.a}, B {r.b}, tolerance {r.tolerance}" + (f"; {r.note}" if r.note else "")
            for r in rules if r.status == FAIL]


def verdict_html(rules: list[Rule]) -> str:
    """The twin verdict as the compare page shows it: the same rules and final line as the terminal."""
    cell = html.escape
    body = "".join(f"<tr><td>{cell(r.metric)}</td><td class='n'>{cell(str(r.a))}</td><td class='n'>{cell(str(r.b))}"
                   f"</td><td>{cell(str(r.tolerance))}</td><td>{cell(r.status)}</td><td>{cell(str(r.note))}</td></tr>"
                   for r in rules)
    return (f"<h2>Twin verdict (A simulated, B emulated)</h2><p><b>{cell(verdict_line(rules))}</b></p><table><tr>"
            f"<th>metric</th><th>A</th><th>B</th><th>tolerance</th><th>verdict</th><th>note</th></tr>{body}</table>")


def verdict_table(rules: list[Rule]) -> Table:
    table = Table(title="twin verdict (A simulated, B emulated)")
    for col in ("metric", "A", "B", "tolerance", "verdict", "note"):
        table.add_column(col, justify="right" if col in ("A", "B") else "left")
    for r in rules:
        style = STYLE.get(r.status, "yellow")
        table.add_row(r.metric, r.a, r.b, r.tolerance, f"[{style}]{r.status}[/]", r.note)
    return table


def compare(run_a: Path, run_b: Path, console: Console, html_out: Path | None = None,
            rules: list[Rule] | None = None) -> Path:
    """Print the table on ``console`` (the command line's) and write the HTML page (default RUN_A's
    analysis/compare-<B>.html), with the twin verdict's ``rules`` when the two runs are twins;
    returns its path."""
    a, b = load_metrics(run_a), load_metrics(run_b)
    table = Table(title="rmptwin compare")
    table.add_column("metric")
    table.add_column(f"A: {_name(a, run_a)}", justify="right")
    table.add_column(f"B: {_name(b, run_b)}", justify="right")
    table.add_column("B / A", justify="right")
    data = rows(a, b)
    for k, va, vb, r in data:
        table.add_row(k, fmt(va), fmt(vb), fmt(r))
    console.print(table)
    out = html_out or RunDir(run_a).analysis_path(f"compare-{run_b.name}.html")
    report_a, report_b = (html.escape(str(RunDir(r.resolve()).report_path)) for r in (run_a, run_b))
    body = "".join(f"<tr><td>{html.escape(k)}</td><td class='n'>{fmt(va)}</td><td class='n'>{fmt(vb)}</td>"
                   f"<td class='n'>{fmt(r)}</td></tr>" for k, va, vb, r in data)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>rmptwin compare</title><style>{CSS}</style>"
        f"</head><body><h1>rmptwin compare</h1><p>A: <a href='{report_a}'>"
        f"{html.escape(_name(a, run_a))}</a><br>B: <a href='{report_b}'>"
        f"{html.escape(_name(b, run_b))}</a></p><table><tr><th>metric</th><th>A</th><th>B</th><th>B / A</th></tr>"
        f"{body}</table>{verdict_html(rules) if rules else ''}</body></html>")
    return out
