"""One experiment emulated at several time dilation factors, beside its simulated twin and its
plan: wall time, timer lateness, busy CPUs measured against predicted, the twin verdict
(``rmptwin plan EXPERIMENT --measure 1,2,auto``; docs/virtual-time.md's curve comes from it).

Every run keeps its run directory under ``out`` (sim/, tdf-N/), so any row can be opened,
compared or rerun; ``ladder.json`` holds the rows and ``ladder.png`` draws them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rmptwin.analysis.compare import verdict_rules
from rmptwin.analysis.twin_verdict import FAIL, PASS, passed
from rmptwin.model import LoadedExperiment
from rmptwin.model.overrides import dilated
from rmptwin.planning.ladder_plot import plot_ladder
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

Say = Callable[[str], None]


def _row(factor: float | str, summary: dict[str, Any], rules: list[Any]) -> dict[str, Any]:
    rt = summary.get("runtime") or {}
    load = rt.get("load") or {}
    plan = rt.get("time_dilation_plan") or {}
    return {"asked": factor, "tdf": rt.get("time_dilation"), "wall_s": rt.get("wall_s"),
            "predicted_wall_s": plan.get("predicted_wall_s"),
            "cpus": load.get("cpus"), "busy_cpus": load.get("busy_cpus"), "predicted_busy_cpus": plan.get("predicted_busy_cpus"),
            "error_pct": plan.get("error_pct"), "steal_cpus": load.get("steal_cpus"),
            "run_queue_p90": (load.get("run_queue") or {}).get("p90"),
            "lateness_p99_ms": load.get("timer_lateness_p99_ms"), "lateness_role": load.get("timer_lateness_role"),
            "overloaded": bool(rt.get("overloaded")), "enough_tdf": plan.get("enough_tdf"),
            "verdict": "PASS" if passed(rules) else "FAIL",
            "rules_passed": sum(r.status == PASS for r in rules), "rules_failed": sum(r.status == FAIL for r in rules),
            "failed": [r.metric for r in rules if r.status == FAIL]}


def measure_ladder(loaded: LoadedExperiment, factors: Sequence[float | str], out: Path,
                   options: EmulationOptions | None = None, say: Say = print) -> list[dict[str, Any]]:
    """Run ``loaded`` simulated once and emulated at each of ``factors``; the rows, written
    to ``out``/ladder.json and drawn in ``out``/ladder.png."""
    out.mkdir(parents=True, exist_ok=True)
    options = options or EmulationOptions()
    sim = run_experiment(loaded, "sim", out=out / "sim")
    rows = []
    for factor in factors:
        name = "tdf-auto" if factor == "auto" else f"tdf-{factor:g}"
        name += "" if not (out / name).exists() else f"-{sum(1 for _ in out.glob(name + '*')) + 1}"   # a repeat
        say(f"{loaded.experiment.name} emulated at time dilation {factor if factor == 'auto' else f'{factor:g}'}")
        at = dilated(loaded, factor)
        emu = run_experiment(at, "emulation", out=out / name, options=options, say=say)
        rows.append(_row(factor, emu.summary, verdict_rules(sim.run_dir.path, emu.run_dir.path)))
        (out / "ladder.json").write_text(json.dumps(rows, indent=1))   # a row at a time: an interrupted ladder keeps its runs
    plot_ladder(rows, out / "ladder.png", loaded.experiment.name)
    return rows
