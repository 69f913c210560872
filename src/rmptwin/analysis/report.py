"""report.html: one self-contained page per run (PNG plots beside it, relative links, no server).

matplotlib (through ``plots``) is imported only when a report is rendered: `rmptwin compare`
uses this module's table helpers without drawing anything.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rmptwin.analysis.sections import report_sections
from rmptwin.rundir.run import ANALYSIS, METRICS, RunDir

CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}h2{border-bottom:1px solid #ccc}
.caption{color:#555;font-size:13px;margin-bottom:1.5em}"""

CAPTIONS = {
    "latency_cdf.png": "Latency from the source's send to each receiver's delivery, each R_T's release and each "
                       "customer's reception, per region.",
    "fairness.png": "Fairness spread per message over time: latest minus earliest release across R_T, and "
                    "across customers.",
    "correlation.png": "Pairwise correlation of first-reception losses; receivers ordered by position in the "
                       "multicast tree, so shared upstream links show as blocks. A receiver that lost no first "
                       "copy has no correlation (0/0): it is named under the matrix as 'no loss'.",
    "minc.png": "MINC link-loss estimate from the receivers' joint losses, beside the ground truth (packets "
                "dropped on the link / packets that reached it) and the configured loss.",
    "nacks.png": "NACKs sent per lost packet against how many receivers lost it (implosion if it grows with "
                 "the number of losers).",
    "throughput.png": "Messages per second over time per source, per stripe, and received per region.",
    "receiver_loss.png": "Per receiver: loss at first reception and residual loss after repair.",
}


# Below this a float is rounding noise (a MINC error of 1.5e-14): shown as 0.
NEAR_ZERO = 1e-9


# From here on a number is shown whole with thousands separators (15,210), never in exponent
# form (4 significant digits would print 15210.0 as 1.521e+04).
LARGE = 10_000


def fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if v != v:
            return "–"
        if abs(v) < NEAR_ZERO:
            return "0"
        short = f"{v:.4g}"
        return f"{v:,.0f}" if abs(v) >= LARGE or "e+" in short else short   # 9999.6: 1e+04 in 4 digits
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= LARGE:
        return f"{v:,}"
    return html.escape(str(v))


def ms(ns: object) -> float | None:
    """ns -> ms with the precision a reader needs: 0.1 ms from 100 ms on, 0.01 from 1 ms, else 0.001."""
    if ns is None or not isinstance(ns, (int, float)) or ns != ns:
        return None
    v = ns / 1e6
    return round(v, 1 if abs(v) >= 100 else 2 if abs(v) >= 1 else 3)


def in_ms(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``*_ns`` column as ``*_ms`` (a nanosecond count is unreadable: 1.799e+09)."""
    return [{(k[:-3] + "_ms" if k.endswith("_ns") else k): (ms(v) if k.endswith("_ns") else v) for k, v in r.items()}
            for r in rows]


def table(rows: list[dict[str, Any]], cols: list[str] | None = None, limit: int = 60) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    rows = in_ms(rows)
    cols = [c[:-3] + "_ms" if c.endswith("_ns") else c for c in (cols or list(rows[0]))]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(
            f"<td class='n'>{fmt(r.get(c))}</td>" if isinstance(r.get(c), (int, float)) else f"<td>{fmt(r.get(c))}</td>"
            for c in cols) + "</tr>"
        for r in rows[:limit])
    more = f"<p>({len(rows) - limit} more rows in the parquet files)</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


REFORMATION_NOTE = ("A reformation is the reformation server's REFORM_START to its REFORM_DONE; its cause is what "
                    "started it (a member reported failed, a recovered member asking to join). A crash and the "
                    "member's rejoin are two reformations but one outage (rmptwin.analysis.reformations).")


CONTAINER_NOTE = ("Each Docker host's container as the engine measured it, one sample a second from the release "
                  "to the end of the drain: CPU in percent of one CPU (the run's limits.cpus caps it) and the "
                  "time that limit held it back; memory without the inactive file cache, as docker stats counts "
                  "it (the limit is limits.memory_mb).")


def container_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """summary.json's ``runtime.container_stats`` as table rows, one a node; none for a run
    without containers (namespace hosts, the simulator)."""
    stats = (summary.get("runtime") or {}).get("container_stats") or {}
    return [{"node": node, **figures} for node, figures in sorted(stats.items())]


def containers_html(m: dict[str, Any]) -> list[str]:
    rows = m.get("container_stats") or []
    if not rows:
        return []
    return ["<h2>Node containers: CPU and memory</h2>", f"<p class='caption'>{html.escape(CONTAINER_NOTE)}</p>",
            table(rows, ["node", "cpu_s", "cpu_mean_pct", "cpu_max_pct", "cpu_throttled_s", "mem_mean_mib",
                         "mem_max_mib", "window_s", "samples"], limit=200)]


def with_derived(protocol: dict[str, Any], derived: dict[str, Any]) -> dict[str, Any]:
    """The protocol as configured, a parameter the experiment left to the seed's formulas
    shown with the value this code derived (tau_r_ms 41 (derived)) rather than as empty."""
    out = dict(protocol)
    for k, v in derived.items():
        if out.get(k) is None and v is not None:
            out[k] = f"{fmt(float(v))} (derived)"
    return out


def kv_table(d: dict[str, Any]) -> str:
    return table([{"name": k, "value": v if not isinstance(v, (dict, list)) else json.dumps(v)} for k, v in d.items()])


def _span(lo: object, hi: object) -> str:
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def minc_note(m: dict[str, Any]) -> str:
    """What the MINC table rests on: packets per tree, first copies lost per link, the
    largest error and what bounds it (sampling: one drop is 1/packets of a link's rate)."""
    rows = [r for r in m.get("minc", []) if r.get("packets")]
    if not rows:
        return "No MINC estimate: no packet reached every receiver of a source's tree."
    n = sorted({int(r["packets"]) for r in rows})
    judged = [r for r in rows if r.get("truth") is not None and r.get("estimate") == r.get("estimate")]
    lost = [round(r["truth"] * r["packets"]) for r in judged]
    parts = [f"Each (source, stripe) tree has {_span(n[0], n[-1])} packets every receiver expected, so one "
             f"lost packet moves a link's rate by {_span(f'{100 / n[-1]:.2g}', f'{100 / n[0]:.2g}')} points"]
    slack = m.get("minc_first_copy_slack_ms")
    if slack is not None:
        parts.append(f"a copy counts as the first if it comes before a re-send could (the source re-sends "
                     f"{slack:g} ms after the send at the earliest, plus the path delay), so a first copy a "
                     "loaded node logs late is not taken for a loss")
    if lost:
        worst = max(judged, key=lambda r: abs(r["estimate"] - r["truth"]))
        err = abs(worst["estimate"] - worst["truth"])
        cause = ("within two packets of its tree: sampling" if err * worst["packets"] <= 2 + 1e-9 else
                 "more than two packets of its tree: not sampling alone")
        parts.append(f"the links' ground truth rests on {_span(min(lost), max(lost))} first copies lost per link; "
                     f"the largest error is {100 * err:.2f} points ({worst['link']}, source {worst['src']}, "
                     f"stripe {worst['stripe']}, {worst['packets']} packets), {cause}")
    return "; ".join(parts) + "."


def render(m: dict[str, Any], run: RunDir) -> Path:
    """Write the plots and report.html into the run's analysis directory; returns the report's path."""
    from rmptwin.analysis import plots  # matplotlib: only when drawing

    run.analysis_dir.mkdir(parents=True, exist_ok=True)
    plots.render_all(m, run.analysis_dir)
    return run.write_report(_page(m, plots.PLOTS))


def _page(m: dict[str, Any], plot_names: Iterable[str]) -> str:
    man = m.get("manifest") or {}
    exp = man.get("experiment") or {}
    title = html.escape(exp.get("name", Path(m.get("run", "run")).name))
    params = {"seed": man.get("seed"), "backend": man.get("backend"), "created": man.get("created_utc"),
              "git commit": man.get("git_commit"), "experiment file": man.get("experiment_file"),
              "duration_s": exp.get("duration_s")}
    if man.get("backend") == "emulation":   # the factor the run's figures are in (virtual time)
        plan = man.get("time_dilation_plan") or {}
        params["time_dilation"] = f"{exp.get('time_dilation', 1.0)}" + (" (auto)" if plan.get("requested") == "auto" else "")
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>rmptwin: {title}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>rmptwin analysis: {title}</h1>",
        f"<p>{html.escape(exp.get('description', ''))}</p>",
        f"<p>Run directory: <code>{html.escape(str(m.get('run', '')))}</code>; "
        f"{m.get('events_total', 0)} events analysed in {fmt(m.get('analysis_seconds'))} s.</p>",
        "<h2>Experiment</h2>", kv_table(params),
        "<h2>Headline</h2>", kv_table(m.get("headline") or {}),
        "<p>Protocol, workload and faults: see <a href='#configuration'>configuration</a>.</p>",
        "<h2>Plots</h2>",
    ]
    for name in plot_names:
        parts.append(f"<h3>{html.escape(name[:-4].replace('_', ' '))}</h3><img src='{name}' alt='{name}'>"
                     f"<div class='caption'>{html.escape(CAPTIONS.get(name, ''))}</div>")
    parts += [
        "<h2>Latency per region (ms)</h2>", table(m.get("latency", [])),
        "<h2>Fairness spread (ms)</h2>", table(m.get("fairness", [])),
        "<h2>Receivers: loss and repair</h2>", table(m.get("receiver_loss", [])),
        "<h2>Customers</h2>", table(m.get("customer_loss", [])),
        "<h2>MINC link-loss inference</h2>", f"<p class='caption'>{html.escape(minc_note(m))}</p>",
        table(m.get("minc", []), ["src", "stripe", "link", "packets", "gamma", "estimate", "truth", "configured"]),
        "<h2>Control messages per data message</h2>", table(m.get("control", [])),
        "<h2>NACKs</h2>", kv_table(m.get("nacks") or {}), table(m.get("nacks_by_losers", [])),
        "<h2>Token rotation (ms)</h2>", table(m.get("token", [])),
        "<h2>Reformations</h2>", f"<p class='caption'>{html.escape(REFORMATION_NOTE)}</p>",
        table(m.get("reformations", []), ["start_ms", "took_ms", "cause", "ring", "stripe"]),
        "<h3>Outages: each crash of a ring member until the next acknowledgement (the summary's "
        "reformation_ms)</h3>", table(m.get("crashes", [])),
        "<h3>Failure reports that led to no reformation</h3>", table(m.get("failure_reports_unanswered", [])),
        "<h3>Longest delivery silence per receiver (ms)</h3>", table(m.get("delivery_gaps", [])),
        *report_sections(m),
        *containers_html(m),
        "<h2 id='configuration'>Configuration</h2>",
        "<h3>Protocol</h3>", kv_table(with_derived(exp.get("protocol") or {}, man.get("protocol_derived") or {})),
        "<h3>Workload</h3>", kv_table(exp.get("workload") or {}),
        "<h3>Faults</h3>", table(exp.get("faults") or []),
        "<h2>Event counts</h2>", kv_table(m.get("events") or {}),
        f"<p>Tables: <code>{ANALYSIS}/*.parquet</code>; all figures: <code>{ANALYSIS}/{METRICS}</code>.</p>",
        "</body></html>",
    ]
    return "\n".join(parts)
