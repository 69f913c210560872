"""customers_incomplete (issue 21) is one figure: summary.json (pandas) and metrics.json
(Spark, analysis.customer_completeness.spark_metrics) give the same on a run with a customer
whose feed went silent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from rmptwin.analysis import customer_completeness, extract
from rmptwin.model import Experiment, LoadedExperiment, Topology
from rmptwin.runner.pipeline import run_experiment

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def test_summary_and_spark_name_the_same_incomplete_customers(spark, tmp_path):
    spec = importlib.util.spec_from_file_location("stale", REPO / "tests" / "sim" / "test_stale_feed.py")
    stale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stale)
    loaded = LoadedExperiment(experiment=Experiment.model_validate(stale.EXPERIMENT),
                              topology=Topology.model_validate(yaml.safe_load(stale.TREE13)),
                              path=tmp_path / "tree13-stale.yaml")
    run, s, _, _ = run_experiment(loaded, "sim", out=tmp_path / "run")
    rd = extract.load_run(spark, run.path)
    m = customer_completeness.spark_metrics(spark, rd.events, rd)
    assert s["customers_incomplete"] and m == {"customers_incomplete": s["customers_incomplete"]}
    html = customer_completeness.report_html({"customer_completeness": m})
    assert "c4" in html and "stale_feed" in html
