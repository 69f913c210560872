"""One sweep run, as a Spark task ships it: a JSON-able payload in, one flat row out.

The payload carries the resolved experiment and topology (``LoadedExperiment.to_manifest``), not
file paths, so any executor that has rmptwin installed can run it. The row holds the swept
parameters, the seed, every summary key (nested keys flattened with dots, lists as JSON
strings) and the figures of any named probes (``sweeps.probes``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment

POINT, SEED, WALL = "point", "seed", "wall_s"   # bookkeeping columns of every row
ERROR = "__error__"   # a failed task's row carries only this (and where it ran), never a JVM trace


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """``run_simulated`` as a Spark task: a failure comes back as one line in the row."""
    try:
        return run_simulated(task)
    except Exception as e:
        return {ERROR: f"{type(e).__name__}: {e}".splitlines()[0][:300], POINT: task["point"], SEED: task["seed"]}


def payload(loaded: LoadedExperiment, params: dict[str, Any], point_key: str, seed: int, probes: list[str],
            run_dir: str | None) -> dict[str, Any]:
    return {"manifest": loaded.to_manifest(), "params": params, "point": point_key, "seed": seed,
            "probes": list(probes), "run_dir": run_dir}


def flatten(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}, 'c': [1, 2]} -> {'a.b': 1, 'c': '[1, 2]'}: one scalar per column."""
    out: dict[str, Any] = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, sort_keys=True)
        else:
            out[name] = value
    return out


def loaded_from(manifest: dict[str, Any]) -> LoadedExperiment:
    from rmptwin.model import LoadedExperiment

    return LoadedExperiment.from_manifest(manifest, Path("sweep"))


def run_simulated(task: dict[str, Any]) -> dict[str, Any]:
    """Simulate one (point, seed) and return its row; writes a run directory only if asked."""
    from rmptwin.analysis.summary import summarize
    from rmptwin.sim.simulate import simulate
    from rmptwin.sweeps.probes import measure

    loaded = loaded_from(task["manifest"])
    t0 = time.perf_counter()
    if task.get("run_dir"):
        from rmptwin.runner.pipeline import run_experiment

        clear_run_dir(task["run_dir"])

        outcome = run_experiment(loaded, "sim", seed=task["seed"], out=task["run_dir"])
        summary, events = outcome.summary, outcome.run_dir.read_events()
    else:
        result = simulate(loaded, task["seed"])
        events = result.events
        summary = summarize(events, loaded)
    extra = measure(task["probes"], events, loaded)
    return make_row(task, summary, extra, time.perf_counter() - t0)


def clear_run_dir(path: str) -> None:
    """A run directory left by an interrupted sweep (its row never written) is done again."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def make_row(task: dict[str, Any], summary: dict[str, Any], extra: dict[str, Any], wall_s: float) -> dict[str, Any]:
    params = {k: v if isinstance(v, (int, float, str, bool, type(None))) else json.dumps(v)
              for k, v in task["params"].items()}
    row = {**params, POINT: task["point"], SEED: task["seed"], WALL: wall_s}
    for key, value in {**flatten(summary), **flatten(extra)}.items():
        row.setdefault(key, value)   # a swept parameter's name wins over a summary key's
    return row
