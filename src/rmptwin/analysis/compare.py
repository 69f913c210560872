"""`rmptwin compare RUN_A RUN_B`: two runs' headline metrics side by side (terminal and HTML)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..errors import UserError
from .report import CSS, fmt


def load_metrics(run: Path) -> dict:
    path = run / "analysis" / "metrics.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{run}: not analysed yet (run `rmptwin analyze {run}` first)") from None


def rows(a: dict, b: dict) -> list[tuple[str, object, object, float | None]]:
    """(metric, value in A, value in B, B/A) for every headline metric of either run."""
    ha, hb = a.get("headline", {}), b.get("headline", {})
    out = []
    for k in list(ha) + [k for k in hb if k not in ha]:
        va, vb = ha.get(k), hb.get(k)
        ratio = vb / va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and va else None
        out.append((k, va, vb, ratio))
    return out


def _name(m: dict, run: Path) -> str:
    exp = (m.get("manifest") or {}).get("experiment") or {}
    return f"{exp.get('name', run.name)} ({run.name})"


def compare(run_a: Path, run_b: Path, html_out: Path | None = None, console=None) -> Path:
    from rich.console import Console
    from rich.table import Table

    a, b = load_metrics(run_a), load_metrics(run_b)
    table = Table(title="rmptwin compare")
    table.add_column("metric")
    table.add_column(f"A: {_name(a, run_a)}", justify="right")
    table.add_column(f"B: {_name(b, run_b)}", justify="right")
    table.add_column("B / A", justify="right")
    data = rows(a, b)
    for k, va, vb, r in data:
        table.add_row(k, fmt(va), fmt(vb), fmt(r))
    (console or Console()).print(table)
    out = html_out or run_a / "analysis" / f"compare-{run_b.name}.html"
    body = "".join(f"<tr><td>{html.escape(k)}</td><td class='n'>{fmt(va)}</td><td class='n'>{fmt(vb)}</td>"
                   f"<td class='n'>{fmt(r)}</td></tr>" for k, va, vb, r in data)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>rmptwin compare</title><style>{CSS}</style>"
        f"</head><body><h1>rmptwin compare</h1><p>A: <a href='{html.escape(str(run_a.resolve() / 'analysis' / 'report.html'))}'>"
        f"{html.escape(_name(a, run_a))}</a><br>B: <a href='{html.escape(str(run_b.resolve() / 'analysis' / 'report.html'))}'>"
        f"{html.escape(_name(b, run_b))}</a></p><table><tr><th>metric</th><th>A</th><th>B</th><th>B / A</th></tr>"
        f"{body}</table></body></html>")
    return out
