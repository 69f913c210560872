"""The report's plots (matplotlib), one function each: metrics dict in, PNG file out.
A plot with no data still renders, saying so, so the report never links a missing file.

Figures are made without pyplot (``plt`` below is this module's own): pyplot would keep every
figure in its registry and needs a backend, and switching the process's backend to Agg would
stop a notebook that called `rmptwin.api.analyze` or `sweep` from showing its own plots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


class plt:   # named for what the report modules call: plt.subplots
    """``subplots`` as pyplot's, for a figure no backend or registry holds."""

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] | None = None,
                 **kwargs: Any) -> tuple[Figure, Any]:  # Any: one Axes or an array of them, as pyplot's
        fig = Figure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **kwargs)


def save_figure(fig: Figure, path: Path, dpi: int = 90) -> Path:
    """Lay ``fig`` out, write it to ``path`` (PNG, its folder made if missing)."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def _empty(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in this run", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def latency_cdf(m: dict[str, Any], path: Path) -> Path:
    stages = [s for s in ("deliver", "release", "customer") if any(r["stage"] == s for r in m["latency_cdf"])]
    fig, axes = plt.subplots(1, max(1, len(stages)), figsize=(4.2 * max(1, len(stages)), 3.4), squeeze=False)
    if not stages:
        _empty(axes[0][0], "deliveries")
    for ax, stage in zip(axes[0], stages):
        for r in m["latency_cdf"]:
            if r["stage"] == stage and r["q"]:
                ax.plot(np.array(r["q"]) / 1e6, np.linspace(0, 1, len(r["q"])), label=r["region"])
        ax.set_title(f"latency to {stage}")
        ax.set_xlabel("ms after send")
        ax.set_ylabel("fraction of messages")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def fairness_series(m: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.4))
    rows = m["fairness_series"]
    if not rows:
        _empty(ax, "messages released at two or more places")
    for scope in sorted({r["scope"] for r in rows}):
        pts = [r for r in rows if r["scope"] == scope]
        t = [r["bin_ns"] / 1e9 for r in pts]
        ax.plot(t, [r["p50_ns"] / 1e6 for r in pts], label=f"{scope} median")
        ax.plot(t, [r["max_ns"] / 1e6 for r in pts], "--", label=f"{scope} max")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("spread (ms)")
    ax.set_title("fairness: latest minus earliest per message")
    ax.grid(alpha=0.3)
    if rows:
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def _undefined_correlation(rows: list[dict[str, Any]], names: list[str]) -> dict[str, str]:
    """The receivers whose loss correlation is undefined, each with why: one that lost no first
    copy (or every one) has a constant loss indicator, so its correlation with anyone is 0/0
    (``loss.loss_correlation``'s null). Read from its diagonal row (a == b, always present):
    name -> "no loss" or "lost every packet"."""
    defined = {n for r in rows if r["correlation"] is not None for n in (r["a"], r["b"])}
    why = {}
    for n in names:
        if n not in defined:
            own = next((r for r in rows if r["a"] == n and r["b"] == n), {})
            why[n] = "lost every packet" if own.get("loss_a") and own["loss_a"] == own.get("packets") else "no loss"
    return why


def correlation_matrix(m: dict[str, Any], path: Path) -> Path:
    """Receivers in tree order. A receiver whose correlation is undefined (it lost nothing) is
    named under the matrix rather than drawn as a blank row (a correlation it has none of) or as
    zeros (which would say its losses are independent of the others', and 0 on the diagonal)."""
    rows = m["correlation"]
    names = list(m.get("tree_order") or [])
    names += sorted({r["a"] for r in rows} - set(names))
    names = [n for n in names if any(r["a"] == n for r in rows)]
    undefined = _undefined_correlation(rows, names)
    names = [n for n in names if n not in undefined]
    # the rows hold each pair once (a <= b); the coefficient is symmetric
    fig, ax = plt.subplots(figsize=(5.5, 4.8))
    by_why: dict[str, list[str]] = {}
    for n, why in undefined.items():
        by_why.setdefault(why, []).append(n)
    # under the axes as its label, so that the layout makes room for it below the tick names
    note = "; ".join(f"{why}: {', '.join(ns)}" for why, ns in by_why.items())
    if not names:
        _empty(ax, "receiver losses")
        ax.set_xlabel(note, fontsize=8)
        return save_figure(fig, path)
    ix = {n: i for i, n in enumerate(names)}
    mat = np.full((len(names), len(names)), np.nan)
    for r in rows:
        if r["a"] in ix and r["b"] in ix and r["correlation"] is not None:
            mat[ix[r["a"]], ix[r["b"]]] = mat[ix[r["b"]], ix[r["a"]]] = r["correlation"]
    im = ax.imshow(mat, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_title("first-reception loss correlation\n(receivers in multicast-tree order)")
    if note:
        ax.set_xlabel(f"not in the matrix (correlation undefined): {note}", fontsize=8)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return save_figure(fig, path)


def minc_vs_truth(m: dict[str, Any], path: Path) -> Path:
    rows = m["minc"]
    pairs = sorted({(r["src"], r["stripe"]) for r in rows})
    first = [r for r in rows if pairs and (r["src"], r["stripe"]) == pairs[0]]
    fig, ax = plt.subplots(figsize=(min(14, max(6, 0.55 * len(first) + 2)), 4.2))
    if not pairs:
        _empty(ax, "multicast trees")
        return save_figure(fig, path)
    x = np.arange(len(first))
    val: Callable[[str], list[float]] = lambda k: [100 * (r[k] if r[k] is not None else np.nan) for r in first]
    ax.bar(x - 0.27, val("estimate"), 0.27, label="MINC estimate")
    ax.bar(x, val("truth"), 0.27, label="ground truth (drops)")
    ax.bar(x + 0.27, val("configured"), 0.27, label="configured")
    ax.set_xticks(x, [r["link"] for r in first], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("loss rate (%)")
    ax.set_title(f"MINC link-loss inference, source {pairs[0][0]} stripe {pairs[0][1]}")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def nacks_per_loss(m: dict[str, Any], path: Path) -> Path:
    rows = m["nacks_by_losers"]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    if not rows:
        _empty(ax, "first-reception losses")
        return save_figure(fig, path)
    x = [r["receivers_lost"] for r in rows]
    ax.plot(x, [r["mean_nacks"] for r in rows], "o-", label="mean NACKs")
    ax.plot(x, [r["max_nacks"] for r in rows], "s--", label="max NACKs")
    ax.plot(x, x, ":", color="grey", label="one NACK per loser")
    ax.set_xlabel("receivers that lost the packet")
    ax.set_ylabel("NACKs for the packet")
    # both axes count (receivers, NACKs): whole-number ticks, never 1.25 receivers
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("NACK implosion")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def throughput_timeline(m: dict[str, Any], path: Path) -> Path:
    dims = ["source", "stripe", "region"]
    fig, axes = plt.subplots(len(dims), 1, figsize=(8, 7), sharex=True)
    for ax, dim in zip(axes, dims):
        rows = [r for r in m["throughput"] if r["dimension"] == dim]
        if not rows:
            _empty(ax, f"{dim} throughput")
            continue
        for key in sorted({r["key"] for r in rows}):
            pts = [r for r in rows if r["key"] == key]
            ax.plot([r["bin_ns"] / 1e9 for r in pts], [r["rate_per_s"] for r in pts], label=str(key))
        ax.set_ylabel("msg/s")
        ax.set_title(f"throughput per {dim}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=4)
    axes[-1].set_xlabel("time (s)")
    return save_figure(fig, path)


def receiver_loss(m: dict[str, Any], path: Path) -> Path:
    rows = m["receiver_loss"]
    fig, ax = plt.subplots(figsize=(max(5, 0.45 * len(rows) + 2), 3.4))
    if not rows:
        _empty(ax, "receivers")
        return save_figure(fig, path)
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [100 * r["first_loss"] for r in rows], 0.4, label="first-reception loss")
    ax.bar(x + 0.2, [100 * r["residual_loss"] for r in rows], 0.4, label="residual loss (after repair)")
    ax.set_xticks(x, [r["node"] for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("%")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


PLOTS = {
    "latency_cdf.png": latency_cdf,
    "fairness.png": fairness_series,
    "correlation.png": correlation_matrix,
    "minc.png": minc_vs_truth,
    "nacks.png": nacks_per_loss,
    "throughput.png": throughput_timeline,
    "receiver_loss.png": receiver_loss,
}


def render_all(m: dict[str, Any], out: Path) -> list[Path]:
    return [fn(m, out / name) for name, fn in PLOTS.items()]
