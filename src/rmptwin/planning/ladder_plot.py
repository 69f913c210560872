"""The dilation ladder's figure: wall time, timer lateness and busy CPUs against the factor."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_ladder(rows: list[dict[str, Any]], path: Path, name: str) -> Path | None:
    """Three panels sharing the factor axis; None when no row has a factor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((r for r in rows if r.get("tdf")), key=lambda r: r["tdf"])
    if not rows:
        return None
    x = [r["tdf"] for r in rows]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].plot(x, [r["wall_s"] for r in rows], "o-", label="measured")
    ax[0].plot(x, [r["predicted_wall_s"] for r in rows], "x--", label="planned")
    ax[0].set_ylabel("wall time of the run (s)")
    ax[1].plot(x, [r["lateness_p99_ms"] for r in rows], "o-", color="C3")
    ax[1].axhline(5.0, color="grey", ls=":", label="overload limit (5 ms)")
    ax[1].set_ylabel("timer lateness p99, latest role (virtual ms)")
    ax[1].set_yscale("log")
    ax[2].plot(x, [r["busy_cpus"] for r in rows], "o-", label="measured")
    ax[2].plot(x, [r["predicted_busy_cpus"] for r in rows], "x--", label="planned")
    cpus = next((r.get("cpus") for r in rows if r.get("cpus")), None)
    if cpus:
        ax[2].axhline(cpus, color="grey", ls=":", label=f"{cpus} CPUs")
    ax[2].set_ylabel("busy CPUs over the run")
    for a in ax:
        a.set_xlabel("time dilation factor")
        a.set_xscale("log", base=2)
        a.grid(alpha=0.3)
        for r in rows:
            if r.get("overloaded"):
                a.axvspan(r["tdf"] * 0.93, r["tdf"] * 1.07, color="red", alpha=0.12)
    ax[0].legend()
    ax[1].legend()
    ax[2].legend()
    fig.suptitle(f"{name}: virtual time on this host (red: runs flagged overloaded)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
