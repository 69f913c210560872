"""The run directory: results/<experiment>/<run-id>/, the same for every backend.

    manifest.json   resolved spec, seed, backend, versions, git commit
    events/*.parquet   one row per protocol event (events.EVENT_SCHEMA)
    links/drops.parquet, links/counts.parquet   ground-truth drops and packet counts
    summary.json    headline figures (rmptwin.summary)
    pcaps/          captures (emulation)
    analysis/       written by `rmptwin analyze`
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__
from .errors import UserError

REPO = Path(__file__).resolve().parents[2]


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def new_run_dir(experiment: str, out: str | Path | None = None, base: str | Path = "results") -> Path:
    """``out`` if given, else results/<experiment>/<UTC timestamp>; created, must be empty."""
    path = Path(out) if out else Path(base) / experiment / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    if path.exists() and any(path.iterdir()):
        raise UserError(f"{path}: run directory exists and is not empty; choose another --out")
    for sub in ("events", "links"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def write_manifest(run: Path, manifest: dict, backend: str, seed: int) -> None:
    import pydantic
    import pyarrow

    full = {
        **manifest,
        "backend": backend,
        "seed": seed,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_commit": git_commit(),
        "versions": {
            "rmptwin": __version__, "python": platform.python_version(),
            "pyarrow": pyarrow.__version__, "pydantic": pydantic.__version__,
        },
    }
    (run / "manifest.json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")


def write_table(run: Path, rel: str, table: pa.Table) -> Path:
    path = run / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def read_events(run: Path) -> pa.Table:
    files = sorted((run / "events").glob("*.parquet"))
    if not files:
        raise UserError(f"{run}: no events/*.parquet (is this a run directory?)")
    return pa.concat_tables([pq.read_table(f) for f in files])


def write_summary(run: Path, summary: dict) -> None:
    (run / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def read_manifest(run: Path) -> dict:
    try:
        return json.loads((run / "manifest.json").read_text())
    except FileNotFoundError:
        raise UserError(f"{run}: no manifest.json (is this a run directory?)") from None
