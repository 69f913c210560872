"""Run a sweep: every (parameter point, seed) not yet in the sweep table, appended to it.

Simulated runs are Spark tasks (``run_spark``): one task per run, the experiment shipped as
JSON, rows collected to the driver. Rows are written after each batch of tasks, so an
interrupted sweep resumes from its last finished batch and a finished one reruns nothing.
``run_loop`` runs the same tasks one after another in this process (the benchmark's
baseline; also the emulated backend, through ``runner.pipeline.run_experiment``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pyarrow as pa

from rmptwin.model import LoadedExperiment
from rmptwin.model.overrides import Point, make_points
from rmptwin.rundir.sweep import SweepDir
from rmptwin.sweeps import probes as probe_mod
from rmptwin.sweeps.task import POINT, SEED, payload, run_simulated

if TYPE_CHECKING:
    from rmptwin.runner.pipeline import EmulationOptions

Progress = Callable[[int, int], None]   # (runs done, runs to do)
Task = dict[str, Any]                   # a run's payload (``sweeps.task.payload``)
Row = dict[str, Any]                    # a run's row in the sweep table
OnRows = Callable[[list[Row]], None]
Runner = Callable[[list[Task], OnRows], None]   # runner(tasks, on_rows)


class _State(TypedDict):
    table: pa.Table | None
    done: int


@dataclass
class SweepPlan:
    base: LoadedExperiment
    sets: dict[str, list[Any]]
    seeds: list[int]
    backend: str = "sim"
    probes: list[str] = field(default_factory=list)
    keep_runs: bool = False
    options: EmulationOptions | None = None   # emulated runs: how (servers, hosts); None: the defaults

    def spec(self) -> dict[str, Any]:
        # The resolved experiment's hash: editing the YAML starts a new sweep instead of mixing rows.
        resolved = {k: v for k, v in self.base.to_manifest().items() if k != "experiment_file"}
        digest = hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:16]
        spec = {"experiment": self.base.experiment.name, "experiment_file": str(self.base.path), "base": digest,
                "parameters": self.sets, "seeds": self.seeds, "backend": self.backend, "probes": self.probes}
        if self.options is not None and self.options.servers:   # only then: older sweeps resume as before
            spec["servers"] = {"names": list(self.options.servers), "placement": self.options.placement}
        return spec


@dataclass
class SweepOutcome:
    sweep: SweepDir
    table: pa.Table
    ran: int          # runs executed by this call
    skipped: int      # runs already in the table
    wall_s: float


def pending_tasks(plan: SweepPlan, points: list[Point], sweep: SweepDir, done: set[tuple[str, int]]) -> list[Task]:
    tasks = []
    for point in points:
        for seed in plan.seeds:
            if (point.key, seed) in done:
                continue
            keep = plan.keep_runs or plan.backend == "emulation"
            run_dir = str(sweep.run_dir(point.label, seed).path.resolve()) if keep else None
            tasks.append(payload(point.loaded, point.params, point.key, seed, plan.probes, run_dir))
    return tasks


def _done_keys(table: pa.Table | None) -> set[tuple[str, int]]:
    if table is None or POINT not in table.column_names:
        return set()
    return set(zip(table.column(POINT).to_pylist(), table.column(SEED).to_pylist()))


def _rows_to_table(rows: list[Row]) -> pa.Table:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows])


def append_rows(sweep: SweepDir, table: pa.Table | None, rows: list[Row]) -> pa.Table:
    if not rows:
        return table if table is not None else pa.table({})
    new = _rows_to_table(rows)
    merged = new if table is None else pa.concat_tables([table, new], promote_options="permissive")
    sweep.write_table(merged)
    return merged


def run_sweep(plan: SweepPlan, out: str | Path | None = None, master: str | None = None,
              progress: Progress | None = None, runner: Runner | None = None) -> SweepOutcome:
    """Run what the sweep table lacks; ``runner(tasks, on_rows)`` overrides how (default: Spark
    for simulated sweeps, a plain loop for emulated ones)."""
    probe_mod.check(plan.probes)
    points = make_points(plan.base, plan.sets)
    spec = plan.spec()
    sweep = SweepDir.for_sweep(plan.base.experiment.name, spec, out)
    sweep.check_spec(spec)
    sweep.write_spec(spec)
    table = sweep.read_table()
    tasks = pending_tasks(plan, points, sweep, _done_keys(table))
    total = len(points) * len(plan.seeds)
    skipped = total - len(tasks)
    state: _State = {"table": table, "done": skipped}
    if progress:
        progress(skipped, total)

    def on_rows(rows: list[Row]) -> None:
        state["table"] = append_rows(sweep, state["table"], rows)
        state["done"] += len(rows)
        if progress:
            progress(state["done"], total)

    t0 = time.perf_counter()
    if tasks:
        if runner is None:
            runner = (partial(run_emulated, options=plan.options) if plan.backend == "emulation"
                      else _spark_runner(master, progress, state, total))
        runner(tasks, on_rows)
    wall = time.perf_counter() - t0
    return SweepOutcome(sweep, state["table"] if state["table"] is not None else pa.table({}), len(tasks),
                        skipped, wall)


def run_loop(tasks: list[Task], on_rows: OnRows) -> None:
    """The same simulated tasks one after another in this process."""
    for task in tasks:
        on_rows([run_simulated(task)])


def run_emulated(tasks: list[Task], on_rows: OnRows, options: EmulationOptions | None = None) -> None:
    """Emulated points one after another (one network at a time), on this machine or over the
    servers ``options`` names."""
    from rmptwin.runner.pipeline import run_experiment
    from rmptwin.sweeps.probes import measure
    from rmptwin.sweeps.task import clear_run_dir, loaded_from, make_row

    for task in tasks:
        loaded = loaded_from(task["manifest"])
        clear_run_dir(task["run_dir"])
        t0 = time.perf_counter()
        outcome = run_experiment(loaded, "emulation", seed=task["seed"], out=task["run_dir"], options=options)
        extra = measure(task["probes"], outcome.run_dir.read_events(), loaded)
        on_rows([make_row(task, outcome.summary, extra, time.perf_counter() - t0)])


def _spark_runner(master: str | None, progress: Progress | None, state: _State, total: int) -> Runner:
    def runner(tasks: list[Task], on_rows: OnRows) -> None:
        from rmptwin.sweeps.spark import run_spark

        run_spark(tasks, on_rows, master=master,
                  tick=(lambda n: progress(state["done"] + n, total)) if progress else None)

    return runner


def describe(outcome: SweepOutcome) -> str:
    return (f"{outcome.ran} runs in {outcome.wall_s:.1f} s, {outcome.skipped} already done; "
            f"{outcome.table.num_rows} rows in {outcome.sweep.table_path}")
