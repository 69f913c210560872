"""Fault campaigns, measured: simulated schedules on quickstart (agreed delivery) and
quickstart-safe (safe delivery), one campaign per nemesis, and the table of violating runs
per delivery mode and nemesis. Violating schedules are shrunk
(``chaos.shrink``); the shrunk reproductions are listed in each row's note and copied to
<bench out>/chaos/ (agreed delivery's total-order splits are the regression experiments of
tests/chaos/regressions/).

Sizes: RUNS_PER_NEMESIS simulated schedules per (experiment, nemesis): 170 x 6 = 1,020 per
delivery mode (quick: 10 x 6). ``RMPTWIN_BENCH_CHAOS_RUNS`` overrides the count per nemesis;
``RMPTWIN_BENCH_CHAOS_RUNNER=loop`` runs them in this process instead of Spark tasks.
Emulated runs (10 on quickstart, every nemesis) are added as root with
``RMPTWIN_BENCH_CHAOS_EMULATED=1``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmptwin.chaos.campaign import CampaignOutcome
    from rmptwin.model import LoadedExperiment
    from rmptwin.sweeps.sweep_loop import Runner

RUNS = 1                    # one campaign per cell is the measurement; repeating it adds nothing
RUNS_PER_NEMESIS = 170
QUICK_RUNS_PER_NEMESIS = 10
EMULATED_RUNS = 10
SEED = 1
EXPERIMENTS = {"agreed": "quickstart.yaml", "safe": "quickstart-safe.yaml"}
REPO = Path(__file__).resolve().parents[3]


def _runner() -> Runner | None:
    if os.environ.get("RMPTWIN_BENCH_CHAOS_RUNNER") == "loop":
        from rmptwin.sweeps.sweep_loop import run_loop

        return run_loop
    return None   # Spark, the campaign's own path


def _campaign(loaded: LoadedExperiment, nemeses: tuple[str, ...], runs: int, out: Path,
              backend: str = "sim") -> CampaignOutcome:
    from rmptwin.chaos.campaign import Campaign, run_campaign
    from rmptwin.chaos.schedule import Plan

    c = Campaign(loaded, runs, SEED, Plan(nemeses), backend)
    return run_campaign(c, out=out, runner=_runner() if backend == "sim" else None)


def _row(mode: str, nemesis: str, outcome: CampaignOutcome, runs: int, kept: list[Path],
         backend: str = "sim") -> dict[str, Any]:
    rows = outcome.table.to_pylist()
    bad = [r for r in rows if r.get("checks.verdict") == "violation"]
    by: dict[str, int] = {}
    for r in bad:
        name = (r.get("checks.first") or "?").split(":")[0]
        by[name] = by.get(name, 0) + 1
    what = ", ".join(f"{k} {v}" for k, v in sorted(by.items())) or "none"
    emulated = " (emulated)" if backend != "sim" else ""
    return {"metric": f"chaos: violating runs, {mode} delivery, nemesis {nemesis}{emulated}",
            "value": len(bad), "unit": f"of {runs} runs", "better": "lower",
            "conditions": f"{EXPERIMENTS[mode] if backend == 'sim' else 'quickstart.yaml'}, {backend}, campaign seed "
                          f"{SEED}, 1-3 faults of this nemesis per run, majority of primaries up",
            "note": f"by checker: {what}; shrunk: " + ", ".join(str(p) for p in kept)[:400]}


def _keep(repros: list[Path], mode: str, nemesis: str) -> list[Path]:
    """The shrunk reproductions, copied beside the benchmark's table (the campaigns' own
    directories are temporary); where they now are."""
    out = os.environ.get("RMPTWIN_BENCH_OUT")
    if not out or not repros:
        return list(repros)
    dest = Path(out) / "chaos" / mode / nemesis
    dest.mkdir(parents=True, exist_ok=True)
    kept = []
    for p in repros:
        kept.append(Path(shutil.copy(p, dest / p.name)))
    return kept


def run(quick: bool) -> list[dict[str, Any]]:
    from rmptwin.chaos.schedule import NEMESES
    from rmptwin.model import load_experiment

    n = int(os.environ.get("RMPTWIN_BENCH_CHAOS_RUNS") or (QUICK_RUNS_PER_NEMESIS if quick else RUNS_PER_NEMESIS))
    rows = []
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-chaos-") as tmp:
        for mode, name in EXPERIMENTS.items():
            loaded = load_experiment(REPO / "experiments" / name)
            for nemesis in NEMESES:
                outcome = _campaign(loaded, (nemesis,), n, Path(tmp) / mode / nemesis)
                rows.append(_row(mode, nemesis, outcome, n, _keep(outcome.repros, mode, nemesis)))
        if os.environ.get("RMPTWIN_BENCH_CHAOS_EMULATED") == "1" and os.geteuid() == 0:
            loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
            outcome = _campaign(loaded, NEMESES, EMULATED_RUNS, Path(tmp) / "emulated", backend="emulation")
            kept = _keep(outcome.repros, "emulated", "all")
            rows.append(_row("agreed", "all", outcome, EMULATED_RUNS, kept, backend="emulation"))
    return rows
