"""The campaign directory, results/chaos/<experiment>/<campaign-id>/: the one place that names
its files (a sibling of ``sweepdir.SweepDir``; ``rundir.RunDir`` owns each run directory in it).

    chaos.parquet   one row per run: schedule, nemeses, verdict per checker, figures, repro path
    chaos.json      what was asked: experiment, runs, seed, backend, nemeses, bounds
    chaos.html      violations per nemesis and checker, then every run
    repro/run-<i>.yaml   a violating run's shrunk schedule as an experiment that reproduces it
    runs/run-<i>/   a run directory per run (emulated runs always; simulated ones never)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rmptwin.errors import UserError
from rmptwin.rundir.run import RunDir

TABLE = "chaos.parquet"
SPEC = "chaos.json"
REPORT = "chaos.html"
REPRO = "repro"
RUNS = "runs"


def campaign_id(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]


class ChaosDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    @classmethod
    def for_campaign(cls, experiment: str, spec: dict, out: str | Path | None = None,
                     base: str | Path = "results") -> ChaosDir:
        path = Path(out) if out else Path(base) / "chaos" / experiment / campaign_id(spec)
        if path.exists() and not path.is_dir():
            raise UserError(f"{path}: exists and is not a directory; choose another --out")
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    @property
    def table_path(self) -> Path:
        return self.path / TABLE

    @property
    def spec_path(self) -> Path:
        return self.path / SPEC

    @property
    def report_path(self) -> Path:
        return self.path / REPORT

    @property
    def repro_dir(self) -> Path:
        return self.path / REPRO

    def repro_path(self, run: int) -> Path:
        return self.repro_dir / f"run-{run}.yaml"

    def run_dir(self, run: int) -> RunDir:
        return RunDir(self.path / RUNS / f"run-{run}")

    def relative_from_repro(self, target: Path) -> str:
        """``target`` as a path relative to repro/ (what a repro YAML's topology field holds)."""
        return os.path.relpath(Path(target).resolve(), self.repro_dir.resolve())

    def write_spec(self, spec: dict) -> None:
        self.spec_path.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")

    def write_table(self, table: pa.Table) -> None:
        pq.write_table(table, self.table_path)

    def read_table(self) -> pa.Table:
        return pq.read_table(self.table_path)

    def write_report(self, page: str) -> Path:
        self.report_path.write_text(page)
        return self.report_path

    def write_repro(self, run: int, text: str) -> Path:
        self.repro_dir.mkdir(parents=True, exist_ok=True)
        path = self.repro_path(run)
        path.write_text(text)
        return path
