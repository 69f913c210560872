"""The run directory: results/<experiment>/<run-id>/, the same for every backend.

    manifest.json   resolved spec, seed, backend, environment (rmptwin.provenance), git commit
    events/*.parquet   one row per protocol event (events.EVENT_SCHEMA)
    links/drops.parquet, links/counts.parquet   ground-truth drops and packet counts
    summary.json    headline figures (rmptwin.summary)
    pcaps/          captures (emulation)
    analysis/       written by `rmptwin analyze`
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import UserError


def git_commit() -> str:
    from .provenance import git_commit as commit

    return commit() or "unknown"


def new_run_dir(experiment: str, out: str | Path | None = None, base: str | Path = "results") -> Path:
    """``out`` if given, else results/<experiment>/<UTC timestamp>; created, must be empty."""
    path = Path(out) if out else Path(base) / experiment / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    if path.exists() and any(path.iterdir()):
        raise UserError(f"{path}: run directory exists and is not empty; choose another --out")
    for sub in ("events", "links"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def write_manifest(run: Path, manifest: dict, backend: str, seed: int, emulation: dict | None = None) -> None:
    """``manifest`` (the resolved spec, ``LoadedExperiment.to_manifest()``, plus backend extras)
    with the seed, the timers the protocol derives from it, and where the run ran
    (``rmptwin.provenance``; ``emulation`` is ``provenance.emulation_facts`` for an emulated run)."""
    from . import provenance

    full = {
        **manifest,
        "backend": backend,
        "seed": seed,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **provenance.collect(emulation),
    }
    derived = _derived_timers(manifest.get("experiment"))
    if derived:
        full["protocol_derived"] = derived
    (run / "manifest.json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")


def _derived_timers(experiment: dict | None) -> dict | None:
    """tau_t, tau_r, Delta_A and the null-token interval as this code computed them where the
    experiment left them to the seed's formulas, so a reader of the manifest sees the numbers."""
    from .spec import Protocol

    try:
        p = Protocol.model_validate((experiment or {}).get("protocol") or {})
    except ValueError:
        return None
    return {"tau_t_ms": p.tau_t, "tau_r_ms": p.tau_r, "delta_a_ms": p.delta_a, "null_token_ms": p.null_token}


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
    """The run's manifest.json as a dict, or one UserError line saying what is wrong."""
    if not run.exists():
        raise UserError(f"{run}: no such run directory")
    if not run.is_dir():
        raise UserError(f"{run}: not a directory (expected a run directory with manifest.json)")
    try:
        data = json.loads((run / "manifest.json").read_text())
    except FileNotFoundError:
        raise UserError(f"{run}: no manifest.json (is this a run directory?)") from None
    except OSError as e:
        raise UserError(f"{run}/manifest.json: cannot read ({e.strerror})") from None
    except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
        raise UserError(f"{run}/manifest.json: not valid JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{run}/manifest.json: expected a JSON object at the top level")
    return data
