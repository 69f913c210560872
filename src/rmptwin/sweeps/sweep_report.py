"""sweep.html: each numeric metric against each swept parameter, mean over seeds with a 95 %
confidence interval (Student's t over the seeds; the other swept parameters are held as
separate lines). A parameter given one value is listed as fixed, not plotted as swept.
matplotlib is imported only here."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from rmptwin.rundir.sweep import SweepDir
from rmptwin.sweeps.task import POINT, SEED, WALL

if TYPE_CHECKING:
    from rmptwin.sweeps.sweep_loop import SweepOutcome

# Student's t, two-sided 95 %, by degrees of freedom (beyond 30: the normal 1.96).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}
SKIP_METRICS = {SEED, WALL, "events"}


def t95(dof: int) -> float:
    if dof <= 0:
        return math.nan
    eligible = [d for d in _T95 if d <= dof]
    return _T95[max(eligible)] if dof <= 30 else 1.96


def mean_ci(values: Iterable[float | None]) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % CI, n) of the finite values."""
    a = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if a.size == 0:
        return math.nan, math.nan, 0
    half = t95(a.size - 1) * a.std(ddof=1) / math.sqrt(a.size) if a.size > 1 else 0.0
    return float(a.mean()), float(half), int(a.size)


def numeric_metrics(df: pd.DataFrame, params: list[str]) -> list[str]:
    out = []
    for col in df.columns:
        if col in params or col in SKIP_METRICS or col == POINT:
            continue
        series = df[col]
        if series.dtype == bool or not pd.api.types.is_numeric_dtype(series) or series.notna().sum() == 0:
            continue
        out.append(col)
    return out


def constant(df: pd.DataFrame, metrics: list[str]) -> list[str]:
    """Metrics with one value in every run: a table line, not a plot."""
    return [m for m in metrics if df[m].nunique(dropna=False) <= 1]


def value_range(values: Iterable[Any]) -> tuple[float, float]:
    """The range the quantity can take, judged from its runs: a metric never negative in any run
    (a count, a latency, a loss) cannot be below 0. No upper bound is inferred: a latency under
    1 ms in every run is no fraction."""
    a = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    low = 0.0 if len(a) and (a >= 0).all() else -math.inf
    return low, math.inf


def clipped_interval(mean: npt.ArrayLike, half: npt.ArrayLike, low: float,
                     high: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The 95 % interval mean +- half, clipped to the quantity's range (no negative latency)."""
    m, h = np.asarray(mean, dtype=float), np.asarray(half, dtype=float)
    return np.clip(m - h, low, high), np.clip(m + h, low, high)


def summarise(df: pd.DataFrame, param: str, others: list[str], metric: str) -> pd.DataFrame:
    """One row per (other parameters, param value): mean, CI half-width, n."""
    rows = []
    for keys, group in df.groupby(others + [param], dropna=False, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        mean, half, n = mean_ci(group[metric].tolist())
        rows.append({**dict(zip(others + [param], keys)), "mean": mean, "ci95": half, "n": n})
    return pd.DataFrame(rows)


def _plot(df: pd.DataFrame, param: str, others: list[str], metric: str, out: Path) -> None:
    from rmptwin.analysis.plots import plt  # figures without pyplot: the caller's backend is left alone

    stats = summarise(df, param, others, metric)
    low, high = value_range(df[metric])
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    lines = stats.groupby(others, dropna=False) if others else [((), stats)]
    for key, part in lines:
        label = ", ".join(f"{o}={v}" for o, v in zip(others, key if isinstance(key, tuple) else (key,)))
        x = part[param]
        numeric = pd.api.types.is_numeric_dtype(x)
        xs = x.to_numpy(dtype=float) if numeric else np.arange(len(x), dtype=float)
        # plain arrays, not Series: given a one-point Series as an error bar, matplotlib calls
        # float() on it, which pandas deprecates (a FutureWarning printed in the sweep's output)
        mean = part["mean"].to_numpy(dtype=float)
        lo, hi = clipped_interval(mean, part["ci95"], low, high)
        ax.errorbar(xs, mean, yerr=np.vstack([mean - lo, hi - mean]), marker="o", capsize=3, label=label or None)
        if not numeric:
            ax.set_xticks(list(range(len(x))), [str(v) for v in x])
    ax.set_xlabel(param)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if others:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def fixed_parameters(df: pd.DataFrame, params: list[str]) -> list[str]:
    """The parameters given one value (``--set KEY=V``): held fixed in every run, not swept."""
    return [p for p in params if p in df and df[p].nunique(dropna=False) <= 1]


# Each figure a block of its own in a wrapping grid: the image a block (no inline baseline gap
# under it), its caption right below it, and a wider gap between rows than between a plot and its
# caption, so a caption reads as its plot's and not as the next row's.
_GRID = "display:flex;flex-wrap:wrap;column-gap:12px;row-gap:28px;align-items:flex-start"
_FIGURE = "margin:0;width:440px"
_IMAGE = "display:block"
_CAPTION = "margin:2px 0 0;text-align:center;font-weight:bold"


def write_report(sweep: SweepDir, df: pd.DataFrame, params: list[str], title: str) -> str:
    sweep.plots_dir.mkdir(exist_ok=True)
    fixed = fixed_parameters(df, params)
    swept = [p for p in params if p not in fixed]
    every = numeric_metrics(df, params)
    flat = constant(df, every)
    metrics = [m for m in every if m not in flat]
    seeds = df[SEED].nunique() if SEED in df else 0
    held = "; fixed: " + html.escape(", ".join(f"{p} = {df[p].iloc[0]}" for p in fixed)) if fixed else ""
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{len(df)} runs; {seeds} seeds per point; swept: {html.escape(', '.join(swept) or 'nothing')}"
             f"{held}. Points are means over seeds; bars are 95 % confidence intervals (Student's t), clipped to "
             "the quantity's range (not below 0 for a quantity no run had negative).</p>"]
    for param in swept:
        others = [p for p in swept if p != param]
        parts.append(f'<h2>against {html.escape(param)}</h2><div style="{_GRID}">')
        for i, metric in enumerate(metrics):
            name = f"{_slug(param)}--{i:03d}.png"
            _plot(df, param, others, metric, sweep.plots_dir / name)
            parts.append(f'<figure style="{_FIGURE}"><img src="{sweep.plots_dir.name}/{name}" width="440" '
                         f'alt="{html.escape(metric)}" style="{_IMAGE}">'
                         f'<figcaption style="{_CAPTION}">{html.escape(metric)}</figcaption></figure>')
        parts.append("</div>")
    if flat:
        parts.append("<h2>the same in every run</h2><p>" + ", ".join(
            f"{html.escape(m)} = {df[m].iloc[0]}" for m in flat) + "</p>")
    page = ("<!doctype html><meta charset='utf-8'><title>" + html.escape(title) + "</title>"
            "<body style='font-family:sans-serif'>" + "".join(parts) + "</body>")
    sweep.write_report(page)
    return str(sweep.report_path)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def write_outcome_report(outcome: SweepOutcome) -> str:
    """sweep.html of a finished sweep (``engine.run_sweep``'s outcome), titled by its experiment."""
    return write_sweep_report(outcome.sweep.path, outcome.table.to_pandas())


def write_sweep_report(path: str | Path, df: pd.DataFrame) -> str:
    """sweep.html of the sweep directory ``path`` from its table ``df``, titled by its experiment."""
    sweep = SweepDir(path)
    spec = sweep.read_spec()
    return write_report(sweep, df, list(spec.get("parameters", {})), f"sweep of {spec.get('experiment')}")
