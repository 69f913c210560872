"""Venue experiment sweeps in the simulator: the seed's Table 1 (gap) and latency figures.

Each point is one seeded simulation of an experiment file with the ``venue:`` section
changed; results are a list of dict rows, written as a Markdown table and a plot
(matplotlib is imported only where a plot is drawn).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rmptwin.analysis.venue_metrics import venue_summary
from rmptwin.core.events import Kind
from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment, load_experiment, load_topology
from rmptwin.sim.simulate import Simulation

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

# The seed's Table 1 (IBM z990 prototype): req/s -> (max gap, max delay ms, avg gap, avg delay ms)
SEED_TABLE1 = {5000: (57, 6.3, 3, 0.3), 9000: (81, 9.0, 7, 0.8)}


def variant(loaded: LoadedExperiment, topology_file: str | None = None, **venue: Any) -> LoadedExperiment:
    """The same experiment with venue fields replaced (and optionally another topology)."""
    exp = loaded.experiment
    assert exp.venue is not None   # a venue experiment's
    v = exp.venue.model_copy(update=venue)
    duration = max(exp.duration_s, v.start_s + v.duration_s + 0.3)
    topo = loaded.topology
    if topology_file is not None:
        topo = load_topology(Path(loaded.path).parent / topology_file)
        exp = exp.model_copy(update={"topology": topology_file})
    return LoadedExperiment(experiment=exp.model_copy(update={"venue": v, "duration_s": duration}),
                            topology=topo, path=loaded.path)


def simulate_summary(loaded: LoadedExperiment) -> dict[str, Any]:
    """The venue metrics of one simulation (its stores go with the ``Simulation``)."""
    sim = Simulation(loaded)
    sim.start()
    sim.sched.run_until(sim.end_ns)
    return venue_summary(sim.event_table().to_pandas(), loaded)


def gap_table(path: Path, rates: Iterable[int] = (5000, 9000), duration_s: float | None = None,
              progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    base = load_experiment(path)
    rows = []
    for rate in rates:
        upd: dict[str, Any] = {"rate": float(rate)}
        if duration_s:
            upd["duration_s"] = duration_s
        if progress:
            progress(f"gap at {rate} req/s")
        s = simulate_summary(variant(base, **upd))
        seed = SEED_TABLE1.get(rate)
        rows.append({
            "rate": rate, "max_gap": s["max_gap"], "max_delay_ms": s["max_gap_delay_ms"],
            "avg_gap": s["avg_gap"], "avg_delay_ms": s["avg_gap_delay_ms"],
            "seed_max_gap": seed[0] if seed else None, "seed_avg_gap": seed[2] if seed else None,
            "ev_agreement": s["ev_agreement"], "latency_p50_ms": s["latency_ms"]["p50"],
        })
    return rows


LatencyConfig = tuple[str, str, int, str, bool]   # (label, topology, symbols, sequencer, durable)
LATENCY_CONFIGS: list[LatencyConfig] = [
    # (label, topology, symbols, sequencer, durable)
    ("1GW 1sym cas durable", "../topologies/venue1.yaml", 1, "cas", True),
    ("1GW 1sym cas volatile", "../topologies/venue1.yaml", 1, "cas", False),
    ("1GW 1sym noseq durable", "../topologies/venue1.yaml", 1, "none", True),
    ("1GW 1sym noseq volatile", "../topologies/venue1.yaml", 1, "none", False),
    ("1GW 10sym cas durable", "../topologies/venue1.yaml", 10, "cas", True),
    ("1GW 10sym noseq durable", "../topologies/venue1.yaml", 10, "none", True),
    ("2GW 1sym cas durable", "../topologies/venue.yaml", 1, "cas", True),
    ("2GW 1sym cas volatile", "../topologies/venue.yaml", 1, "cas", False),
    ("2GW 10sym cas durable", "../topologies/venue.yaml", 10, "cas", True),
    ("2GW 10sym cas volatile", "../topologies/venue.yaml", 10, "cas", False),
]


def latency_sweep(path: Path, rates: Iterable[int] = (1000, 3000, 5000, 7000, 9000), duration_s: float = 1.0,
                  configs: Sequence[LatencyConfig] = LATENCY_CONFIGS,
                  progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    base = load_experiment(path)
    rows = []
    for label, topo, nsym, seq, durable in configs:
        for rate in rates:
            if progress:
                progress(f"{label} at {rate} req/s")
            symbols = ["IBM"] if nsym == 1 else [f"S{i:03d}" for i in range(nsym)]
            s = simulate_summary(variant(base, topology_file=topo, rate=float(rate), symbols=symbols,
                                         sequencer=seq, durable_history=durable, duration_s=duration_s))
            rows.append({"config": label, "rate": rate, "p50_ms": s["latency_ms"]["p50"],
                         "p99_ms": s["latency_ms"]["p99"], "mean_ms": s["latency_ms"]["mean"],
                         "completed": s["requests_completed"], "ev_agreement": s["ev_agreement"]})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])

    def fmt(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def plot_latency(rows: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for label in dict.fromkeys(r["config"] for r in rows):
        pts = [r for r in rows if r["config"] == label and r["mean_ms"] is not None]
        ax.plot([r["rate"] for r in pts], [r["mean_ms"] for r in pts], marker="o", label=label)
    ax.set_xlabel("requests/s")
    ax.set_ylabel("mean latency, GW send to completion (ms)")
    ax.set_title("venue latency vs throughput (simulated)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_gap(rows: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["max_gap"] or 0 for r in rows], 0.4, label="max gap (rmptwin)")
    ax.bar([i + 0.2 for i in x], [r["seed_max_gap"] or 0 for r in rows], 0.4, label="max gap (seed, z990)")
    ax.set_xticks(list(x), [f"{r['rate']} req/s" for r in rows])
    ax.set_ylabel("requests")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_timeline(events: pa.Table | pd.DataFrame, loaded_venues: list[str], out: Path,
                  bin_ms: float = 100.0) -> Path:
    """Per-EV executed requests/s over time (the seed's Figure 3) and the EV gap (Figure 6)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = events.to_pandas() if hasattr(events, "to_pandas") else events
    sp = df[(df.kind == Kind.SEQ_POSITION) & df.node.isin(loaded_venues)]
    if sp.empty:
        raise UserError("no venue executions (seq_position events) in this run")
    t_end = float(df.t_ns.max()) / 1e9
    edges = np.arange(0.0, t_end + bin_ms / 1e3, bin_ms / 1e3)
    fig, (ax, gx) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for ev in loaded_venues:
        ts = sp[sp.node == ev].t_ns.to_numpy() / 1e9
        counts, _ = np.histogram(ts, edges)
        ax.step(edges[:-1], counts / (bin_ms / 1e3), where="post", label=ev)
    for kind, style in ((Kind.CRASH, "r--"), (Kind.RECOVER, "g--"), (Kind.SYNC_DONE, "b:")):
        for node, t in zip(df[df.kind == kind].node, df[df.kind == kind].t_ns):
            if node in loaded_venues:
                ax.axvline(t / 1e9, color=style[0], linestyle=style[1:], alpha=0.7)
                ax.text(t / 1e9, ax.get_ylim()[1] * 0.02, f" {kind} {node}", rotation=90, fontsize=7)
    ax.set_ylabel("executed requests/s")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    if len(loaded_venues) >= 2:
        a, b = loaded_venues[:2]
        ta, pa_ = sp[sp.node == a].t_ns.to_numpy(), sp[sp.node == a].gseq.to_numpy()
        tb, pb = sp[sp.node == b].t_ns.to_numpy(), sp[sp.node == b].gseq.to_numpy()
        grid = np.arange(max(ta.min(), tb.min()), min(ta.max(), tb.max()), 10_000_000)
        ia = np.searchsorted(ta, grid, side="right") - 1
        ib = np.searchsorted(tb, grid, side="right") - 1
        gx.plot(grid / 1e9, pa_[ia] - pb[ib], lw=0.8)
        gx.set_ylabel(f"position {a} - {b}")
    gx.set_xlabel("time (s)")
    gx.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
