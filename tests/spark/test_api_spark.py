"""rmptwin.api's Spark paths: analyze a simulated run, then a small sweep, from Python."""

from __future__ import annotations

from pathlib import Path

import pytest

import rmptwin.api as rt

pytestmark = pytest.mark.spark
LINE3 = Path(__file__).resolve().parents[2] / "experiments" / "line3.yaml"


def test_analyze_and_sweep_from_python(spark, tmp_path):
    run = rt.simulate(LINE3, out=tmp_path / "run")
    report = rt.analyze(run, spark=spark)   # the tests' session, left running
    assert report == run.report_path and report.exists()
    assert run.metrics["headline"]["events"] == run.summary["events"]

    sw = rt.sweep(LINE3, {"protocol.delta_a_ms": [20, 150]}, seeds=1, out=tmp_path / "sweep")
    assert (sw.ran, sw.skipped, len(sw.table)) == (2, 0, 2)
    assert sorted(sw.table["protocol.delta_a_ms"]) == [20, 150] and sw.report_path.exists()
