"""The campaign directory, results/chaos/<experiment>/<campaign-id>/: the one place that names
its files (a ``SweepDir`` with files of its own; ``RunDir`` owns each run directory in it).

    chaos.parquet   one row per run: schedule, nemeses, verdict per checker, figures, repro path
    chaos.json      what was asked: experiment, runs, seed, backend, nemeses, bounds
    chaos.html      violations per nemesis and checker, then every run
    repro/run-<i>.yaml   a violating run's shrunk schedule as an experiment that reproduces it
    runner/run-<i>/   a run directory per run (emulated runs always; simulated ones never)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from rmptwin.errors import UserError
from rmptwin.rundir.run import RunDir
from rmptwin.rundir.sweep import SweepDir

TABLE = "chaos.parquet"
SPEC = "chaos.json"
REPORT = "chaos.html"
REPRO = "repro"
RUNS = "runs"


def campaign_id(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]


class ChaosDir(SweepDir):
    TABLE, SPEC, REPORT = TABLE, SPEC, REPORT

    @classmethod
    def for_campaign(cls, experiment: str, spec: dict[str, Any], out: str | Path | None = None,
                     base: str | Path = "results") -> ChaosDir:
        path = Path(out) if out else Path(base) / "chaos" / experiment / campaign_id(spec)
        if path.exists() and not path.is_dir():
            raise UserError(f"{path}: exists and is not a directory; choose another --out")
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    @property
    def repro_dir(self) -> Path:
        return self.path / REPRO

    def repro_path(self, run: int) -> Path:
        return self.repro_dir / f"run-{run}.yaml"

    def run_dir(self, run: int) -> RunDir:  # type: ignore[override]  # a campaign's runs are numbered
        return RunDir(self.path / RUNS / f"run-{run}")

    def relative_from_repro(self, target: Path) -> str:
        """``target`` as a path relative to repro/ (what a repro YAML's topology field holds)."""
        return os.path.relpath(Path(target).resolve(), self.repro_dir.resolve())

    def write_repro(self, run: int, text: str) -> Path:
        self.repro_dir.mkdir(parents=True, exist_ok=True)
        path = self.repro_path(run)
        path.write_text(text)
        return path
