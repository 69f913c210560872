"""chaos.html: violations per nemesis and checker, then one row per run."""

from __future__ import annotations

import html
import json
from typing import Any

import pyarrow as pa

from rmptwin.chaos.schedule import NEMESES
from rmptwin.checkers.suite import CHECKERS
from rmptwin.rundir.chaos import ChaosDir

STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
         ".violation{background:#fdd}.ok{background:#efe}")


def violations_by_nemesis(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """nemesis -> {'runs': n, checker: runs whose schedule used the nemesis and violated it}; a
    run with several nemeses counts under each."""
    out = {n: {"runs": 0, **{c: 0 for c in CHECKERS}} for n in NEMESES}
    for r in rows:
        for n in filter(None, (r.get("nemeses") or "").split(",")):
            out.setdefault(n, {"runs": 0, **{c: 0 for c in CHECKERS}})
            out[n]["runs"] += 1
            for c in CHECKERS:
                if r.get(f"checks.{c}") == "violation":
                    out[n][c] += 1
    return out


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.1f}"
    return html.escape("" if v is None else str(v))


def page(table: pa.Table, spec: dict[str, Any]) -> str:
    rows = table.to_pylist()
    bad = [r for r in rows if r.get("checks.verdict") == "violation"]
    by = violations_by_nemesis(rows)
    head = "".join(f"<th>{c}</th>" for c in ("nemesis", "runs", *CHECKERS))
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in (n, d["runs"], *(d[c] for c in CHECKERS)))
                   + "</tr>" for n, d in by.items() if d["runs"])
    cols = ("run", "seed", "nemeses", "faults", "checks.verdict", "checks.first", "checks.reformations",
            "checks.outage_ms", "delivery_latency_ms.p99", "shrunk_faults", "repro")
    runs = "".join(f"<tr class='{html.escape(str(r.get('checks.verdict')))}'>" +
                   "".join(f"<td>{_cell(r.get(c))}</td>" for c in cols) +
                   f"<td><code>{html.escape(r.get('schedule') or '')}</code></td></tr>" for r in rows)
    title = f"chaos campaign of {html.escape(str(spec.get('experiment')))}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style>"
            f"</head><body><h1>{title}</h1><p>{len(rows)} runs ({html.escape(str(spec.get('backend')))}, seed "
            f"{spec.get('seed')}, nemeses {html.escape(', '.join(spec.get('nemeses', [])))}, majority bound "
            f"{spec.get('majority')}): <b>{len(bad)} violating</b>.</p>"
            f"<h2>Violating runs per nemesis and checker</h2><table><tr>{head}</tr>{body}</table>"
            f"<h2>Runs</h2><table><tr>{''.join(f'<th>{c}</th>' for c in cols)}<th>schedule</th></tr>{runs}</table>"
            f"<p>spec: <code>{html.escape(json.dumps(spec, sort_keys=True))}</code></p></body></html>\n")


def write_report(cdir: ChaosDir, table: pa.Table, spec: dict[str, Any]) -> str:
    return str(cdir.write_report(page(table, spec)))
