"""One campaign: draw every run's schedule, run them all (simulated: Spark tasks through the
sweeps' path, ``sweeps.task`` with the ``checks`` probe; emulated: one after another), write
chaos.parquet, shrink each violating schedule (in the simulator) and save it as an experiment
YAML that reproduces it, and write chaos.html."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from rmptwin.chaos.schedule import Plan, draw, nemeses_of
from rmptwin.chaos.shrink import ddmin
from rmptwin.model import Experiment, LoadedExperiment
from rmptwin.model.drain import auto_duration_s, fault_drain_s, tenth_up, workload_end_s
from rmptwin.model.overrides import dilated
from rmptwin.rundir.chaos import ChaosDir
from rmptwin.sweeps.task import payload

RUN, VERDICT, FIRST = "run", "checks.verdict", "checks.first"
Progress = Callable[[int, int], None]
# runs the tasks, handing each batch of result rows on (sweeps.sweep_loop.run_loop, run_emulated; Spark)
Runner = Callable[[list[dict[str, Any]], Callable[[list[dict[str, Any]]], None]], None]


def with_faults(loaded: LoadedExperiment, faults: list[dict[str, Any]], seed: int | None = None) -> LoadedExperiment:
    """``loaded`` with its fault schedule replaced (validated like a YAML's) and, if given, its seed;
    lasting until the ring could have recovered from the schedule's last fault (``model.drain``)."""
    data = loaded.experiment.model_dump(mode="json")
    data["faults"] = faults
    if seed is not None:
        data["seed"] = seed
    exp = Experiment.model_validate(data)
    exp = exp.model_copy(update={"duration_s": max(loaded.duration_s, auto_duration_s(exp, loaded.topology))})
    return loaded.model_copy(update={"experiment": exp})


@dataclass
class Campaign:
    loaded: LoadedExperiment
    runs: int
    seed: int
    plan: Plan = field(default_factory=Plan)
    backend: str = "sim"
    shrink: bool = True
    # every emulated run's time dilation factor (`--tdf`: a number >= 1 or "auto"); None: the
    # experiment's own. The simulator ignores it, so a simulated campaign leaves the experiment be.
    time_dilation: float | str | None = None

    def __post_init__(self) -> None:
        if self.backend == "emulation":
            self.loaded = dilated(self.loaded, self.time_dilation)
        # Every run (and every repro it is shrunk to) lasts until the ring could have recovered
        # from a fault that ends with the workload (model.drain.recovery_s), on any experiment:
        # its own duration_s may be shorter (quickstart's 3.5 s of drain left 33 of 136 shrunk
        # runs "losing" messages that a run 4 s longer delivered). with_faults lengthens a run
        # whose own schedule ends later.
        e, t = self.loaded.experiment, self.loaded.topology
        need = tenth_up(workload_end_s(e, t) + fault_drain_s(e, t))
        if need > self.loaded.duration_s or e.duration_s == "auto":
            exp = e.model_copy(update={"duration_s": max(need, self.loaded.duration_s)})
            self.loaded = self.loaded.model_copy(update={"experiment": exp})

    def spec(self) -> dict[str, Any]:
        spec = {"experiment": self.loaded.experiment.name, "experiment_file": str(self.loaded.path),
                "duration_s": self.loaded.duration_s,
                "runs": self.runs, "seed": self.seed, "backend": self.backend, "nemeses": list(self.plan.nemeses),
                "max_faults": self.plan.max_faults, "majority": self.plan.majority}
        if self.backend == "emulation":   # a campaign at another factor is another campaign (directory)
            spec["time_dilation"] = self.loaded.experiment.time_dilation
        return spec

    def schedules(self) -> list[list[dict[str, Any]]]:
        return [draw(self.loaded, self.plan, self.seed, i) for i in range(self.runs)]


@dataclass
class CampaignOutcome:
    chaos: ChaosDir
    table: pa.Table
    violations: int
    repros: list[Path]
    wall_s: float


def tasks_for(c: Campaign, schedules: list[list[dict[str, Any]]], cdir: ChaosDir) -> list[dict[str, Any]]:
    out = []
    for i, faults in enumerate(schedules):
        params = {RUN: i, "schedule": json.dumps(faults, sort_keys=True), "nemeses": ",".join(nemeses_of(faults)),
                  "faults": len(faults)}
        run_dir = str(cdir.run_dir(i).path.resolve()) if c.backend == "emulation" else None
        out.append(payload(with_faults(c.loaded, faults), params, f"run{i}", c.seed + i, ["checks"], run_dir))
    return out


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    return pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in sorted(rows, key=lambda r: r[RUN])])


def violated_checker(row: dict[str, Any]) -> str | None:
    first = row.get(FIRST) or ""
    return first.split(":", 1)[0] if row.get(VERDICT) == "violation" and first else None


def simulated_violation(loaded: LoadedExperiment, faults: list[dict[str, Any]], seed: int, checker: str) -> bool:
    """Does the simulator, with ``faults`` and ``seed``, find ``checker`` violated?"""
    from rmptwin.checkers.suite import check_events
    from rmptwin.sim.simulate import simulate

    run = with_faults(loaded, faults)
    df = simulate(run, seed).events.to_pandas()
    return any(v.checker == checker and v.violated for v in check_events(df, run))


def repro_yaml(c: Campaign, cdir: ChaosDir, run: int, faults: list[dict[str, Any]], seed: int, line: str) -> str:
    exp = with_faults(c.loaded, faults, seed).experiment
    data = exp.model_dump(mode="json", exclude_defaults=True)
    data["name"] = f"{exp.name}-chaos-{c.seed}-{run}"
    data["description"] = f"shrunk by rmptwin chaos (campaign seed {c.seed}, run {run}): {line}"[:300]
    data["topology"] = cdir.relative_from_repro(Path(c.loaded.path).parent / exp.topology)
    data["seed"], data["faults"] = seed, faults
    head = (f"# Reproduces: {line}\n# rmptwin sim <this file> && rmptwin check <its run directory>\n")
    schema = Path(__file__).resolve().parents[3] / "schemas" / "experiment.schema.json"
    if schema.is_file():   # a source checkout: editors find the schema, like every shipped YAML
        head = f"# yaml-language-server: $schema={cdir.relative_from_repro(schema)}\n" + head
    text: str = yaml.safe_dump(data, sort_keys=False)
    return head + text


def shrink_row(c: Campaign, cdir: ChaosDir, row: dict[str, Any]) -> dict[str, Any]:
    """The shrunk schedule of a violating run and its repro YAML (simulated campaigns only)."""
    checker = violated_checker(row)
    faults = json.loads(row["schedule"])
    seed = int(row["seed"])
    if c.backend == "sim" and c.shrink:
        assert checker is not None   # the row is a violating run's
        small, tests = ddmin(faults, lambda sub: simulated_violation(c.loaded, sub, seed, checker))
    else:
        small, tests = faults, 0   # emulated: kept whole (a simulated shrink may not reproduce it)
    path = cdir.write_repro(int(row[RUN]), repro_yaml(c, cdir, int(row[RUN]), small, seed, row[FIRST]))
    return {"shrunk_schedule": json.dumps(small, sort_keys=True), "shrunk_faults": len(small),
            "shrink_tests": tests, "repro": str(path)}


def run_campaign(c: Campaign, out: str | Path | None = None, master: str | None = None,
                 progress: Progress | None = None, runner: Runner | None = None) -> CampaignOutcome:
    """Run the campaign; ``runner(tasks, on_rows)`` overrides how (default: Spark for simulated
    runs, ``sweeps.sweep_loop.run_emulated`` for emulated ones; tests pass ``sweeps.sweep_loop.run_loop``)."""
    from rmptwin.sweeps.sweep_loop import run_emulated

    t0 = time.perf_counter()
    spec = c.spec()
    cdir = ChaosDir.for_campaign(c.loaded.experiment.name, spec, out)
    cdir.write_spec(spec)
    tasks = tasks_for(c, c.schedules(), cdir)
    rows: list[dict[str, Any]] = []

    def on_rows(batch: list[dict[str, Any]]) -> None:
        rows.extend(batch)
        cdir.write_table(_table(rows))
        if progress:
            progress(len(rows), len(tasks))

    if runner is None:
        if c.backend == "emulation":
            runner = run_emulated
        else:
            from rmptwin.sweeps.spark import run_spark

            def runner(ts: list[dict[str, Any]], cb: Callable[[list[dict[str, Any]]], None]) -> None:
                run_spark(ts, cb, master=master)
    runner(tasks, on_rows)
    repros = []
    for row in rows:
        if violated_checker(row):
            row.update(shrink_row(c, cdir, row))
            repros.append(Path(row["repro"]))
    table = _table(rows)
    cdir.write_table(table)
    from rmptwin.chaos.campaign_report import write_report

    write_report(cdir, table, spec)
    return CampaignOutcome(cdir, table, len(repros), repros, time.perf_counter() - t0)
