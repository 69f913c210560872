"""The taxonomy comparison's outputs: ``table.parquet``, ``table.md`` and PNG plots, and the
statement of where RMP's rotating sequencer wins and where it loses, from the rows' numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

COLUMNS = ("protocol", "receivers", "rate", "scenario", "sent", "delivered_pct", "lost", "agree",
           "msgs_per_delivered", "rx_per_delivered", "seq_node", "seq_msgs_per_s", "seq_bytes_per_s",
           "ordered_per_s", "latency_p50_ms", "latency_p99_ms", "lossy_p99_ms", "naks", "resume_ms")


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def _pick(rows: list[dict[str, Any]], protocol: str, scenario: str = "steady", receivers: int | None = None,
          rate: float | None = None) -> dict[str, Any] | None:
    for r in rows:
        if (r["protocol"] == protocol and r["scenario"] == scenario
                and (receivers is None or r["receivers"] == receivers) and (rate is None or r["rate"] == rate)):
            return r
    return None


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """Where RMP's rotating sequencer wins and loses, at the largest steady group of the first rate."""
    steady = [r for r in rows if r["scenario"] == "steady"]
    if not steady:
        return []
    n = max(r["receivers"] for r in steady)
    rate = steady[0]["rate"]
    rmp, ub = _pick(rows, "rmp_time", receivers=n, rate=rate), _pick(rows, "ub", receivers=n, rate=rate)
    ev = _pick(rows, "rmp_event", receivers=n, rate=rate)
    out: list[str] = []
    if rmp and ub:
        share = rmp["ordered_per_s"] / max(ub["ordered_per_s"], 1e-9)
        out.append(f"Wins (load spread), {n} receivers at {rate:g} msg/s: the busiest RMP primary ordered "
                   f"{rmp['ordered_per_s']:,.0f} msg/s, UB's one sequencer {ub['ordered_per_s']:,.0f} msg/s "
                   f"({share:.1%} of it: the token site rotates, so each primary orders ~1/n of the stream and "
                   f"no node is a bottleneck or a single point of failure).")
        out.append(f"Wins (messages): RMP time-driven sent {rmp['msgs_per_delivered']:.2f} datagrams per delivered "
                   f"message (one ack orders a batch) against UB's {ub['msgs_per_delivered']:.2f}.")
        worse = (rmp["latency_p50_ms"] or 0) / max(ub["latency_p50_ms"] or 1e-9, 1e-9)
        out.append(f"Loses (latency): RMP time-driven p50 {rmp['latency_p50_ms']:.1f} ms, p99 "
                   f"{rmp['latency_p99_ms']:.1f} ms against UB's {ub['latency_p50_ms']:.1f} / "
                   f"{ub['latency_p99_ms']:.1f} ms ({worse:.1f}x at p50): a message waits for the token "
                   f"(tau_t) where UB's sequencer is one hop away.")
        if ev:
            out.append(f"Event-driven RMP (the token moves as soon as there is something to ack): p50 "
                       f"{ev['latency_p50_ms']:.1f} ms, p99 {ev['latency_p99_ms']:.1f} ms, "
                       f"{ev['msgs_per_delivered']:.2f} datagrams per message.")
    crashes = [r for r in rows if r["scenario"] == "crash"]
    if crashes:
        m = max(r["receivers"] for r in crashes)
        parts = [f"{r['protocol']} {_fmt(r['resume_ms'])} ms (lost {r['lost']})"
                 for r in crashes if r["receivers"] == m]
        out.append(f"Sequencer crash, {m} receivers: time to resume " + "; ".join(parts) + ". "
                   "'lost' counts messages some operable receiver had not delivered when the run ended: "
                   "for a protocol that cannot carry the rate (GUP) that is its backlog.")
    return out


def _plot_steady(rows: list[dict[str, Any]], metric: str, ylabel: str, path: Path, against: str) -> None:
    """``metric`` of the steady rows against ``against`` on log-log axes, one line per protocol:
    against "receivers" at the first steady row's rate, against "rate" at the largest group."""
    from rmptwin.analysis.plots import plt, save_figure  # matplotlib: only when drawing
    steady = [r for r in rows if r["scenario"] == "steady"]
    if against == "receivers":
        held, at = "rate", steady[0]["rate"] if steady else None
        xlabel, title = "receivers", f"{ylabel} at {at:g} msg/s (simulated)"
    else:
        held, at = "receivers", max(r["receivers"] for r in steady)
        xlabel, title = "rate (messages/s over all senders)", f"{ylabel} against rate, {at} receivers (simulated)"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for proto in dict.fromkeys(r["protocol"] for r in steady):
        pts = sorted((r[against], r[metric]) for r in steady
                     if r["protocol"] == proto and r[held] == at and r[metric] is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=proto)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path, dpi=110)


def _plot_faults(rows: list[dict[str, Any]], path: Path) -> None:
    from rmptwin.analysis.plots import plt, save_figure  # matplotlib: only when drawing
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, scenario, metric, label in ((axes[0], "lossy", "lossy_p99_ms", "p99 latency at the lossy receiver (ms)"),
                                        (axes[1], "crash", "resume_ms", "time to resume after a sequencer crash (ms)")):
        sel = [r for r in rows if r["scenario"] == scenario]
        if not sel:
            continue
        n = max(r["receivers"] for r in sel)
        sel = [r for r in sel if r["receivers"] == n]
        ax.bar([r["protocol"] for r in sel], [r[metric] if r[metric] is not None else 0 for r in sel])
        ax.set_ylabel(label, fontsize=8)
        ax.set_title(f"{scenario}, {n} receivers", fontsize=9)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    save_figure(fig, path, dpi=110)


def write_outputs(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([{c: r.get(c) for c in (*COLUMNS, "seq_share", "seed", "wall_s")} for r in rows])
    paths = [out / "table.parquet", out / "table.md"]
    pq.write_table(table, paths[0])
    text = ["# Sequencer taxonomy beside RMP and the CAS sequencer (simulated)", "",
            "Definitions: rmptwin.studies.taxonomy_compare. Same generated topology and workload for every "
            "protocol; lossy: 5 % loss on receiver r1's access link; crash: the sequencing site crashes mid-run.",
            "", markdown_table(rows), "", "## Where RMP's rotating sequencer wins and loses", ""]
    text += [f"- {line}" for line in verdict(rows)]
    paths[1].write_text("\n".join(text) + "\n")
    for metric, label in (("latency_p50_ms", "latency p50 (ms)"), ("latency_p99_ms", "latency p99 (ms)"),
                          ("msgs_per_delivered", "datagrams per delivered message"),
                          ("seq_msgs_per_s", "busiest sequencer: datagrams/s"),
                          ("seq_bytes_per_s", "busiest sequencer: bytes/s"),
                          ("ordered_per_s", "busiest sequencer: messages ordered/s")):
        path = out / f"{metric}.png"
        _plot_steady(rows, metric, label, path, "receivers")
        paths.append(path)
    if len({r["rate"] for r in rows if r["scenario"] == "steady"}) > 1:
        for metric, label in (("latency_p99_ms", "latency p99 (ms)"),
                              ("seq_msgs_per_s", "busiest sequencer: datagrams/s")):
            path = out / f"{metric}_by_rate.png"
            _plot_steady(rows, metric, label, path, "rate")
            paths.append(path)
    _plot_faults(rows, out / "faults.png")
    paths.append(out / "faults.png")
    return paths
