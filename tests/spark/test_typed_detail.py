"""Event files carry the detail keys the analysis reads as typed columns (tables.DETAIL_COLUMNS),
so it parses no JSON; a run written before them still analyses, by parsing ``detail``, and the
two readings of the same run give the very same metrics."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmptwin.analysis import extract, job
from rmptwin.model import load_experiment
from rmptwin.records.tables import DETAIL_COLUMNS, LEGACY_EVENT_COLUMNS
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import run_experiment

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def _as_written_before_typed_columns(run: Path, old: Path) -> Path:
    """A copy of ``run`` whose event files have only the columns written before DETAIL_COLUMNS."""
    shutil.copytree(run, old, ignore=shutil.ignore_patterns("analysis"))
    for f in RunDir(old).event_files():
        pq.write_table(pq.read_table(f, columns=list(LEGACY_EVENT_COLUMNS)), f)
    return old


def _comparable(m: dict) -> dict:
    """metrics.json without the run's path; correlation rows come in no particular order."""
    out = {k: v for k, v in m.items() if k != "run"}
    out["correlation"] = sorted(m["correlation"], key=lambda r: (r["a"], r["b"]))
    return out


def _sim(tmp_path: Path, experiment: str) -> Path:
    run, _, _, _ = run_experiment(load_experiment(REPO / "experiments" / f"{experiment}.yaml"), "sim",
                                  out=tmp_path / experiment)
    return run.path


def test_typed_detail_columns_read_as_the_parsed_detail_on_every_event(spark, tmp_path):
    files = RunDir(_sim(tmp_path, "quickstart")).event_files()
    assert extract.has_typed_detail(files)
    typed = pq.read_table(files[0], columns=list(DETAIL_COLUMNS))
    assert typed["d_stripe"].drop_null().to_pylist().count(1) > 0, "stripe 1's events carry their stripe"
    assert typed["d_type"].null_count < typed.num_rows and typed["d_repair"].null_count < typed.num_rows
    read, parsed = (sorted(map(tuple, extract.read_events(spark, files, parse=p).collect())) for p in (False, True))
    assert len(read) == RunDir(files[0].parent.parent).event_count() and read == parsed


def test_a_run_written_before_the_typed_columns_analyses_to_the_same_metrics(spark, tmp_path):
    run = _sim(tmp_path, "line3-crash")
    old = _as_written_before_typed_columns(run, tmp_path / "old")
    assert not extract.has_typed_detail(RunDir(old).event_files())

    new_way, old_way = job.compute(spark, run), job.compute(spark, old)

    assert new_way["events_total"] == old_way["events_total"] > 0
    assert new_way["receiver_loss"] and new_way["control"] and new_way["latency"] and new_way["crashes"]
    assert _comparable(new_way) == _comparable(old_way)
