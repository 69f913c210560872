"""The unified-orders section under Spark: the same figures as summary.json (one definition,
``orders_summary.figures``), the near_first_fraction plot in the run's analysis directory, and
the report fragment that shows both."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.analysis import extract, orders_summary
from rmptwin.model import load_experiment
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import run_experiment

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def test_spark_figures_equal_the_summary_and_the_report_plots_them(spark, tmp_path):
    loaded = load_experiment(REPO / "experiments" / "unified-orders.yaml")
    orders = loaded.experiment.orders.model_copy(update={"decisions": 20})
    exp = loaded.experiment.model_copy(update={"orders": orders, "duration_s": 17.0})
    outcome = run_experiment(loaded.model_copy(update={"experiment": exp}), out=tmp_path / "run")
    run, summary = outcome.run_dir, outcome.summary
    m = orders_summary.spark_metrics(spark, None, extract.load_run(spark, run.path))
    for key in ("near_first_fraction", "near_first_decisions", "offers_sent", "offers_admitted",
                "offers_rejected", "offers_admitted_twice", "exchanges_agree", "trades"):
        assert m[key] == summary[key], key
    assert set(m["near_first_decisions"].values()) == {20}
    png = RunDir(run.path).analysis_path(m["plot"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = orders_summary.report_html({"unified_orders": m})
    assert f"src='{m['plot']}'" in html and "near_first_fraction" in html
    assert orders_summary.report_html({}) == ""
