"""Venue experiment sweeps in the simulator: the seed's Table 1 (gap) and latency figures.

Each point is one seeded simulation of an experiment file with the ``venue:`` section
changed; results are a list of dict rows, written as a Markdown table and a plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..spec import LoadedExperiment, load_experiment

# The seed's Table 1 (IBM z990 prototype): req/s -> (max gap, max delay ms, avg gap, avg delay ms)
SEED_TABLE1 = {5000: (57, 6.3, 3, 0.3), 9000: (81, 9.0, 7, 0.8)}


def variant(loaded: LoadedExperiment, topology_file: str | None = None, **venue) -> LoadedExperiment:
    """The same experiment with venue fields replaced (and optionally another topology)."""
    from ..spec import load_topology

    exp = loaded.experiment
    v = exp.venue.model_copy(update=venue)
    duration = max(exp.duration_s, v.start_s + v.duration_s + 0.3)
    topo = loaded.topology
    if topology_file is not None:
        topo = load_topology(Path(loaded.path).parent / topology_file)
        exp = exp.model_copy(update={"topology": topology_file})
    return LoadedExperiment(experiment=exp.model_copy(update={"venue": v, "duration_s": duration}),
                            topology=topo, path=loaded.path)


def simulate_summary(loaded: LoadedExperiment) -> dict:
    from ..sim.runner import Simulation
    from .roles import forget_stores
    from .summary import venue_summary

    sim = Simulation(loaded)
    try:
        sim.start()
        sim.sched.run_until(sim.end_ns)
        return venue_summary(sim.event_table().to_pandas(), loaded)
    finally:
        forget_stores(loaded)


def gap_table(path: Path, rates=(5000, 9000), duration_s: float | None = None,
              progress: Callable[[str], None] | None = None) -> list[dict]:
    base = load_experiment(path)
    rows = []
    for rate in rates:
        upd = {"rate": float(rate)}
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


LATENCY_CONFIGS = [
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


def latency_sweep(path: Path, rates=(1000, 3000, 5000, 7000, 9000), duration_s: float = 1.0,
                  configs=LATENCY_CONFIGS, progress: Callable[[str], None] | None = None) -> list[dict]:
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


def markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])

    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def plot_latency(rows: list[dict], out: Path) -> Path:
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


def plot_gap(rows: list[dict], out: Path) -> Path:
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
