"""Verdicts: a claim's rule applied to its sweep table (one row per run). Each kind returns
(verdict, ours): verdict is "holds", "does not hold" or "partly"; ours says in one line what
we measured, per point (the mean over seeds).

- formula: ``metric`` within ``rel_tol`` of ``expect`` at every point
- within: ``low <= metric <= high`` at every point
- at_most / at_least: ``metric <= bound`` (``>=``), or per value of ``param`` with ``bounds``
- zero_from: ``metric`` is 0 at every point with ``param >= threshold``, and above 0 below it.
  With ``tolerance`` (a sweep column), 0 means at most that column's value at the point: an
  emulated R_T releases on its own timer, which fires up to its lateness after the agreed
  time, so a protocol-fair release spreads by the timer lateness. A sweep without the column
  (the simulator's, whose timers are exact) is held to 0 itself.
- trend: each ``trends`` entry: the metric's point means rise (up) or fall (down) with its param
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import numpy as np
import pandas as pd

from rmptwin.claims.model import Verdict

HOLDS, FAILS, PARTLY = "holds", "does not hold", "partly"
SAFE_NAMES = {"__builtins__": {}, "math": math, "abs": abs, "max": max, "min": min}


def _value(df: pd.DataFrame, v: Verdict, text: str | None) -> pd.Series:
    """A column, or an expression over ``vars`` (sweep columns) and ``constants``, per row.
    ``text`` None (a verdict naming no metric) fails in eval, a TypeError ``claims.evaluate`` reports."""
    if text in df.columns:
        return pd.to_numeric(df[text], errors="coerce")
    names = {**v.constants}
    out = []
    for _, row in df.iterrows():
        env = {**names, **{k: row[col] for k, col in v.vars.items()}}
        out.append(eval(cast(str, text), SAFE_NAMES, env))  # claim files are the project's own
    return pd.Series(out, index=df.index, dtype=float)


def point_means(df: pd.DataFrame, params: list[str], v: Verdict, metric: str | None) -> pd.DataFrame:
    work = df[params].copy()
    work["_m"] = _value(df, v, metric).to_numpy()
    return work.groupby(params, dropna=False, sort=True)["_m"].mean().reset_index()


def _label(row: pd.Series, params: list[str]) -> str:
    parts = []
    for p in params:
        value = row[p]
        value = str(value).rsplit("/", 1)[-1].removesuffix(".yaml") if isinstance(value, str) else value
        parts.append(f"{p.rsplit('.', 1)[-1]}={_num(value)}")
    return ",".join(parts)


def _num(x: Any) -> str:
    if isinstance(x, (float, np.floating)):
        if math.isnan(x):
            return "n/a"
        return f"{x:.3g}" if abs(cast(float, x)) < 1000 else f"{x:,.0f}"   # numpy's stubs: abs(the union) is object
    return str(x)


def _listing(means: pd.DataFrame, params: list[str], metric: str | None) -> str:
    return "; ".join(f"{_label(r, params)}: {_num(r['_m'])}" for _, r in means.iterrows()) + f" ({metric})"


def judge(df: pd.DataFrame, params: list[str], v: Verdict) -> tuple[str, str]:
    """The verdict and what we measured; parameters held at one value are left out of the labels."""
    varying = [p for p in params if df[p].nunique(dropna=False) > 1] or params[:1]
    verdict, ours = {"formula": _formula, "within": _within, "at_most": _bound, "at_least": _bound,
                     "zero_from": _zero_from, "trend": _trend}[v.kind](df, varying, v)
    extra = [_listing(point_means(df, varying, v, m), varying, m) for m in v.also if m in df.columns]
    return verdict, "; ".join([ours, *extra])


def _formula(df: pd.DataFrame, params: list[str], v: Verdict) -> tuple[str, str]:
    means = point_means(df, params, v, v.metric)
    expect = point_means(df, params, v, v.expect)["_m"].to_numpy()
    got = means["_m"].to_numpy()
    ok = bool(np.all(np.abs(got - expect) <= v.rel_tol * np.abs(expect)))
    pairs = "; ".join(f"{_label(r, params)}: {_num(g)} vs {_num(e)}" for (_, r), g, e in zip(means.iterrows(), got, expect))
    return (HOLDS if ok else FAILS), f"{pairs} (measured {v.metric} vs the formula, ±{v.rel_tol:.0%})"


def _within(df: pd.DataFrame, params: list[str], v: Verdict) -> tuple[str, str]:
    means = point_means(df, params, v, v.metric)
    ok = bool(((means["_m"] >= v.low) & (means["_m"] <= v.high)).all())
    return (HOLDS if ok else FAILS), _listing(means, params, v.metric)


def _bound(df: pd.DataFrame, params: list[str], v: Verdict) -> tuple[str, str]:
    means = point_means(df, params, v, v.metric)
    if v.bounds is not None:
        by_value = {float(k): b for k, b in v.bounds.items()}
        limits = means[v.param].map(lambda x: by_value.get(float(x), np.nan))
    else:
        limits = pd.Series(v.bound, index=means.index)
    cmp = means["_m"] <= limits if v.kind == "at_most" else means["_m"] >= limits
    ok = bool(cmp.all()) and means["_m"].notna().all()
    return (HOLDS if ok else FAILS), _listing(means, params, v.metric)


def _zero_from(df: pd.DataFrame, params: list[str], v: Verdict) -> tuple[str, str]:
    means = point_means(df, params, v, v.metric)
    measured = v.tolerance is not None and v.tolerance in df.columns
    tol = point_means(df, params, v, v.tolerance)["_m"].fillna(0.0) if measured else pd.Series(0.0, index=means.index)
    tol = tol + 1e-9
    high = means[v.param] >= v.threshold
    zero = bool(high.any()) and bool((means["_m"][high].abs() <= tol[high]).all())
    some_below = bool((~high).any()) and bool((means["_m"][~high] > tol[~high]).any())
    verdict = HOLDS if zero and (some_below or not (~high).any()) else PARTLY if zero else FAILS
    ours = _listing(means, params, v.metric)
    if measured:
        limits = ", ".join(_num(x) for x in tol[high] - 1e-9)
        ours += f"; 0 = at most {v.tolerance} ({limits} from {_num(v.threshold)} on)"
    return verdict, ours


def _trend(df: pd.DataFrame, params: list[str], v: Verdict) -> tuple[str, str]:
    results, texts = [], []
    for t in v.trends:
        keys = params if t.param in params else [*params, t.param]   # e.g. `receivers`, one value per point
        means = point_means(df, keys, v, t.metric)
        series = means.groupby(t.param, sort=True)["_m"].mean()
        steps = np.diff(series.to_numpy())
        ok = bool(np.all(steps < 0)) if t.direction == "down" else bool(np.all(steps > 0))
        results.append(ok)
        shown = ", ".join(f"{_num(x)}: {_num(y)}" for x, y in zip(_short(series.index), series.to_numpy()))
        texts.append(f"{t.metric} by {t.param.rsplit('.', 1)[-1]} {shown} "
                     f"({'falls' if t.direction == 'down' else 'rises'} as the seed says: {'yes' if ok else 'no'})")
    verdict = HOLDS if all(results) else PARTLY if any(results) else FAILS
    return verdict, "; ".join(texts)


def _short(values: Iterable[Any]) -> list[Any]:
    return [str(x).rsplit("/", 1)[-1].removesuffix(".yaml") if isinstance(x, str) else x for x in values]
