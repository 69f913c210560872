"""The sweep directory, results/sweeps/<experiment>/<sweep-id>/: the one place that names its
files (a sibling of ``rundir.RunDir``, which owns each run directory inside it).

    sweep.parquet   one row per (parameter point, seed): the parameters, the seed, every
                    summary key (nested keys flattened with dots, lists as JSON strings)
    sweep.json      what was swept: experiment, parameters and values, seeds, backend
    sweep.html      each numeric metric against each swept parameter, 95 % CI over seeds
    plots/          the report's PNG plots
    runs/<point>-s<seed>/   a run directory per run (with --keep-runs, and always when emulated)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rmptwin.errors import UserError
from rmptwin.rundir.run import RunDir

TABLE = "sweep.parquet"
SPEC = "sweep.json"
REPORT = "sweep.html"
PLOTS = "plots"
RUNS = "runs"


def sweep_id(spec: dict[str, Any]) -> str:
    """A stable id from what is swept (not the seed count): the same command resumes the same sweep."""
    what = {k: spec[k] for k in ("experiment", "base", "parameters", "backend") if k in spec}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:10]


class SweepDir:
    """One sweep directory; ``SweepDir.for_sweep`` names the default one for a sweep spec.
    A directory of many runs of another kind (``rundir.chaos.ChaosDir``) names its own files."""

    TABLE, SPEC, REPORT = TABLE, SPEC, REPORT

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    @classmethod
    def for_sweep(cls, experiment: str, spec: dict[str, Any], out: str | Path | None = None,
                  base: str | Path = "results") -> SweepDir:
        path = Path(out) if out else Path(base) / "sweeps" / experiment / sweep_id(spec)
        sweep = cls(path)
        sweep.path.mkdir(parents=True, exist_ok=True)
        return sweep

    @property
    def table_path(self) -> Path:
        return self.path / self.TABLE

    @property
    def spec_path(self) -> Path:
        return self.path / self.SPEC

    @property
    def report_path(self) -> Path:
        return self.path / self.REPORT

    @property
    def plots_dir(self) -> Path:
        return self.path / PLOTS

    def run_dir(self, point_label: str, seed: int) -> RunDir:
        """Where the run of one (point, seed) goes: a path any executor on this machine can write."""
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", point_label)[:120] or "base"
        return RunDir(self.path / RUNS / f"{safe}-s{seed}")

    def kept_runs(self) -> list[Path]:
        """The run directories a sweep kept (--keep-runs, or emulated), each with a manifest."""
        return sorted(p for p in (self.path / RUNS).glob("*") if RunDir(p).manifest_path.exists())

    def check_spec(self, spec: dict[str, Any]) -> None:
        """A directory holds one sweep: resuming with other parameters would mix two tables."""
        if self.spec_path.exists():
            old = json.loads(self.spec_path.read_text())
            if sweep_id(old) != sweep_id(spec):
                raise UserError(f"{self.path}: holds another sweep ({old.get('experiment')}, "
                                f"{sorted(old.get('parameters', {}))}), or the experiment file changed since; "
                                "choose another --out")

    def write_spec(self, spec: dict[str, Any]) -> None:
        self.spec_path.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")

    def read_spec(self) -> dict[str, Any]:
        return json.loads(self.spec_path.read_text()) if self.spec_path.exists() else {}

    def read_table(self) -> pa.Table | None:
        if not self.table_path.exists():
            return None
        try:
            return pq.read_table(self.table_path)
        except (OSError, pa.ArrowInvalid) as e:
            raise UserError(f"{self.table_path}: unreadable ({e}); delete it to start the sweep again") from None

    def write_table(self, table: pa.Table) -> Path:
        """Replace the table atomically: an interrupted sweep keeps the rows of its finished batches."""
        tmp = self.table_path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.table_path)
        return self.table_path

    def write_report(self, page: str) -> Path:
        self.report_path.write_text(page)
        return self.report_path
