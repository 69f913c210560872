"""The classroom labs (labs/<name>/): each lab's expected outcome, as a check on what the
student produced (a run directory or a sweep directory), and a quick simulated version of the
lab that the tests run. ``labs/<name>/check.py [DIR]`` calls ``main``.

A check returns ``Check`` lines: what should be seen, whether it is, and what was observed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment, load_experiment
from rmptwin.rundir.run import RunDir
from rmptwin.rundir.sweep import SweepDir

LABS_DIR = Path(__file__).resolve().parents[3] / "labs"


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    observed: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.what}: {self.observed}"


# ----------------------------------------------------------------------------- lab 1: fairness


def check_fairness(df: pd.DataFrame, tau_t_ms: float) -> list[Check]:
    """A sweep over protocol.delta_a_ms (and optionally link loss): unfair below the recovery
    time, fair (spread 0) from tau_t on, latency growing with Delta_A."""
    key = "protocol.delta_a_ms"
    if key not in df:
        raise UserError(f"this sweep did not vary {key}; run the sweep in labs/fairness-delta-a/README.md")
    others = [c for c in df.columns if c.startswith(("protocol.", "workload.", "topology.")) and c != key]
    by = df.groupby(others + [key] if others else [key])
    spread = by["fairness_spread_ms.p99"].mean().reset_index()
    latency = by["delivery_latency_ms.p50"].mean().reset_index()
    fair = spread[spread[key] >= tau_t_ms]
    low = spread[spread[key] == spread[key].min()]
    rising = all(np.all(np.diff(part["delivery_latency_ms.p50"].to_numpy()) > 0)
                 for _, part in (latency.groupby(others) if others else [(None, latency)]))
    return [
        Check(f"spread p99 is 0 for every Delta_A >= tau_t ({tau_t_ms:g} ms)",
              bool(len(fair)) and bool((fair["fairness_spread_ms.p99"] == 0).all()),
              _pairs(fair, key, "fairness_spread_ms.p99")),
        Check("spread p99 > 0 at the smallest Delta_A (releases before every R_T recovered the message)",
              bool((low["fairness_spread_ms.p99"] > 0).all()), _pairs(low, key, "fairness_spread_ms.p99")),
        Check("latency p50 grows with Delta_A (about one for one)", rising,
              _pairs(latency, key, "delivery_latency_ms.p50")),
    ]


def _pairs(df: pd.DataFrame, key: str, metric: str) -> str:
    return ", ".join(f"{k:g} ms -> {v:.1f}" for k, v in zip(df[key], df[metric])) or "no such points"


# ----------------------------------------------------------------------------- lab 2: loss and MINC


def check_minc(run: RunDir, tolerance: float = 0.01) -> list[Check]:
    """Lab 2 on one run, from the project's definitions (``analysis.link_loss``: the first
    copies, per-receiver loss and MINC `rmptwin analyze` computes, by the same words)."""
    from rmptwin.analysis.link_loss import fates, joint_loss, minc_rows

    loaded = _loaded(run)
    fate = fates(run.read_events().to_pandas(), loaded)
    rows = minc_rows(fate, loaded, run.read_drops() if run.drops_path.exists() else None)
    if not rows:
        raise UserError(f"{run.path}: no multicast tree with receivers in this run; give the run of "
                        "labs/loss-minc/tree.yaml")
    joint = joint_loss(fate, "rp1", "rp2")
    p_b = joint["loss_b"] / joint["packets"] if joint["packets"] else 0.0
    p_cond = joint["loss_both"] / joint["loss_a"] if joint["loss_a"] else 0.0
    checks = []
    if all(r["truth"] is not None for r in rows):
        worst = max(rows, key=lambda r: abs(r["estimate"] - r["truth"]))
        err = abs(worst["estimate"] - worst["truth"])
        checks.append(Check(f"every link's MINC estimate within {tolerance * 100:g} point of its truth "
                            "(first copies the simulator dropped on it)", err <= tolerance,
                            f"largest error {err * 100:.2f} points on {worst['link']} "
                            f"({worst['estimate'] * 100:.2f} % vs {worst['truth'] * 100:.2f} %)"))
    far = max(rows, key=lambda r: abs(r["estimate"] - r["configured"]))
    checks.append(Check("every link's MINC estimate near its configured loss (within 3 points)",
                        abs(far["estimate"] - far["configured"]) <= 0.03,
                        f"largest difference {abs(far['estimate'] - far['configured']) * 100:.2f} points on "
                        f"{far['link']} ({far['estimate'] * 100:.2f} % vs {far['configured'] * 100:.2f} %)"))
    checks.append(Check("siblings' losses are correlated: P(rp2 missed | rp1 missed) >> P(rp2 missed)",
                        p_cond > 3 * p_b, f"{p_cond * 100:.1f} % vs {p_b * 100:.1f} %"))
    if run.metrics_path.exists():
        checks.append(_same_as_analysis(rows, run.read_metrics()))
    return checks


def _same_as_analysis(rows: list[dict[str, Any]], metrics: dict[str, Any]) -> Check:
    """The estimates above are `rmptwin analyze`'s (its metrics), to float rounding."""
    theirs = {(r["src"], r["stripe"], r["link"]): r["estimate"] for r in metrics.get("minc") or []}
    diffs = [abs(r["estimate"] - theirs[(r["src"], r["stripe"], r["link"])]) for r in rows
             if (r["src"], r["stripe"], r["link"]) in theirs]
    same = len(diffs) == len(rows) and all(d < 1e-9 for d in diffs)
    return Check("the estimates are those of `rmptwin analyze` (its metrics)", same,
                 f"{len(diffs)} of {len(rows)} links found, largest difference "
                 f"{max(diffs, default=0.0) * 100:.2g} points")


def check_minc_dir(path: Path) -> list[Check]:
    """A run directory, or a sweep directory written with --keep-runs: every run in it."""
    sweep = SweepDir(path)
    if not sweep.table_path.exists():
        return check_minc(RunDir(path))
    runs = sweep.kept_runs()
    if not runs:
        raise UserError(f"{path}: a sweep without run directories; run the sweep with --keep-runs")
    out = []
    for p in runs:
        out += [Check(f"{p.name}: {c.what}", c.ok, c.observed) for c in check_minc(RunDir(p))]
    return out


# ----------------------------------------------------------------------------- lab 3: ring crash


def check_ring_crash(s: dict[str, Any]) -> list[Check]:
    """Lab 3 from summary.json (analysis.reformations defines outages and reformations)."""
    outages = s.get("reformation_ms") or []
    reforms = s.get("reformations") or []
    causes = "; ".join(f"{r['start_ms']:.0f} ms: {r['cause']}" for r in reforms) or "none"
    return [
        Check("one outage: the crash stops acknowledgements until the re-formed ring's first", len(outages) == 1,
              f"outages {', '.join(f'{o:.0f} ms' for o in outages) or 'none'}"),
        Check("the ring re-forms without the crashed member, then again when it asks to join",
              any("reported" in r["cause"] for r in reforms) and any("join" in r["cause"] for r in reforms)
              and all(r.get("took_ms") is not None for r in reforms), causes),
        Check("nothing acknowledged is lost and the survivors agree",
              s.get("messages_lost") == 0 and bool(s.get("agreement")),
              f"messages_lost {s.get('messages_lost')}, agreement {s.get('agreement')}"),
    ]


# ----------------------------------------------------------------------------- lab 4: venue failover


def _no_dip(r: dict[str, Any]) -> bool:
    """The live EV executed, while the other was down and syncing, as many requests as before
    the crash, up to the noise of random (Poisson) arrivals: at most 3 standard deviations of
    the difference of two counts fewer (at 500 req/s over 1 s that is about 0.8, not 0.9)."""
    before: float = r["rate_before"] * r["window_ms"] / 1e3
    during: float = r["rate_during"] * r["window_ms"] / 1e3
    noise: float = 3 * (before + during) ** 0.5
    return before - during <= noise


def check_venue_failover(s: dict[str, Any]) -> list[Check]:
    ratios = s.get("live_throughput_ratio") or []
    return [
        Check("the restarted EV synchronizes (SYNC_DONE)", s.get("sync_ms") is not None,
              f"sync_ms {s.get('sync_ms'):.1f}" if s.get("sync_ms") is not None else "sync_ms none"),
        Check("the live EV's throughput does not dip while the other is down and syncing (beyond arrival noise)",
              bool(ratios) and all(_no_dip(r) for r in ratios),
              "rate during / before " + ", ".join(f"{r['ratio']:.2f}" for r in ratios)),
        Check("both EVs end with the same order and no trade is lost",
              bool(s.get("ev_agreement")) and s.get("trades_lost") == 0,
              f"ev_agreement {s.get('ev_agreement')}, trades_lost {s.get('trades_lost')}"),
    ]


# ----------------------------------------------------------------------------- running a lab


def _loaded(run: RunDir) -> LoadedExperiment:
    from rmptwin.runner.rerun import loaded_from_manifest

    return loaded_from_manifest(run.read_manifest(), str(run.manifest_path))


def summaries(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(label, summary) of a run directory (label ""), or of every row of a sweep directory
    (label: the row's point and seed; its lists, stored as JSON text, read back)."""
    sweep = SweepDir(path)
    if not sweep.table_path.exists():
        return [("", RunDir(path).read_summary())]
    out = []
    table = sweep.read_table()
    assert table is not None   # its file exists
    for row in table.to_pylist():
        summary = {k: json.loads(v) if isinstance(v, str) and v[:1] in "[{" else v for k, v in row.items()}
        params = {k: v for k, v in json.loads(row["point"]).items()}
        out.append((f"{', '.join(f'{k}={v}' for k, v in params.items())} seed {row['seed']}", summary))
    return out


def each_summary(check: Callable[[dict[str, Any]], list[Check]]) -> Callable[[Path], list[Check]]:
    """A check of one summary, run on a run directory or on every run of a sweep directory."""
    def run(path: Path) -> list[Check]:
        out = []
        for label, summary in summaries(path):
            out += [Check(f"{label}: {c.what}" if label else c.what, c.ok, c.observed) for c in check(summary)]
        return out
    return run


@dataclass(frozen=True)
class Lab:
    name: str
    experiment: str                  # file under labs/<name>/
    quick: dict[str, list[Any]]      # --set values for the quick (test) version
    check: Callable[[Path], list[Check]]


def _fairness_dir(path: Path) -> list[Check]:
    sweep = SweepDir(path)
    table = sweep.read_table()
    if table is None:
        raise UserError(f"{path}: no sweep table; give the sweep's --out directory")
    loaded = load_experiment(LABS_DIR / "fairness-delta-a" / "fairness.yaml")
    return check_fairness(table.to_pandas(), loaded.experiment.protocol.tau_t)


LABS = {
    "fairness-delta-a": Lab("fairness-delta-a", "fairness.yaml",
                            {"protocol.delta_a_ms": [0, 143], "topology.links.0.loss": [0.1]}, _fairness_dir),
    # the quick versions shorten the workload; the run's duration_s (auto) follows it
    "loss-minc": Lab("loss-minc", "tree.yaml", {"workload.duration_s": [2.0]}, check_minc_dir),
    "ring-crash": Lab("ring-crash", "crash.yaml", {}, each_summary(check_ring_crash)),
    "venue-failover": Lab("venue-failover", "failover.yaml",
                          {"venue.rate": [1000.0], "venue.duration_s": [2.8]},
                          each_summary(check_venue_failover)),
}


def run_quick(name: str, out: Path) -> list[Check]:
    """The lab's quick simulated version into ``out``, then its check (what the tests run)."""
    from rmptwin.model.overrides import make_point
    from rmptwin.runner.pipeline import run_experiment
    from rmptwin.sweeps.sweep_loop import SweepPlan, run_loop, run_sweep

    lab = LABS[name]
    base = load_experiment(LABS_DIR / name / lab.experiment)
    if name == "fairness-delta-a":
        run_sweep(SweepPlan(base, lab.quick, [1]), out=out, runner=run_loop)
    else:
        point = make_point(base, {k: v[0] for k, v in lab.quick.items()})
        run_experiment(point.loaded, "sim", out=out)
    return lab.check(out)


def main(name: str, argv: list[str]) -> int:
    """``labs/<name>/check.py [DIR]``: check DIR, or run the quick simulated lab and check it."""
    try:
        if argv:
            checks = LABS[name].check(Path(argv[0]))
        else:
            checks = run_quick(name, Path(tempfile.mkdtemp(prefix=f"rmptwin-lab-{name}-")) / "out")
    except UserError as e:
        print(f"rmptwin: {e}", file=sys.stderr)
        return 2
    for c in checks:
        print(c.line())
    return 0 if all(c.ok for c in checks) else 1
