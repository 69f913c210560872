"""rmptwin.api's Spark paths: analyze a simulated run, then a small sweep, from Python (the
calls are conftest's line3_analysed and line3_sweep, which test_cluster compares with)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_analyze_and_sweep_from_python(line3_analysed, line3_sweep):
    run, report = line3_analysed
    assert report == run.report_path and report.exists()
    assert run.metrics["headline"]["events"] == run.summary["events"]

    sw = line3_sweep
    assert (sw.ran, sw.skipped, len(sw.table)) == (2, 0, 2)
    assert sorted(sw.table["protocol.delta_a_ms"]) == [20, 150] and sw.report_path.exists()
