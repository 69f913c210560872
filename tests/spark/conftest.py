"""One local SparkSession for every Spark test, a builder of parsed event DataFrames, and
line3's run, analysis and small sweep made once per session for the tests that read them
(test_api_spark, test_cluster): each cost a simulation, a Spark analysis (~100 Spark jobs)
and two simulated Spark tasks per test before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shared_runs import LINE3, LINE3_SWEEP


@pytest.fixture(scope="session")
def spark():
    from rmptwin.analysis.session import spark_session

    s = spark_session()
    yield s
    s.stop()


@pytest.fixture
def events_df(spark):
    """events_df(rows) -> a parsed events DataFrame (as extract.load_run gives)."""
    from rmptwin.analysis import schemas
    from rmptwin.analysis.extract import parse_events

    def make(rows):
        return parse_events(spark.createDataFrame(rows, schemas.LEGACY_EVENTS))

    return make


@pytest.fixture(scope="session")
def line3_run(tmp_path_factory) -> Path:
    """experiments/line3.yaml simulated (rmptwin.api.simulate, its own seed), not analysed:
    a test that analyses it works on a copy."""
    from rmptwin import api

    return api.simulate(LINE3, out=tmp_path_factory.mktemp("line3") / "run").path


@pytest.fixture(scope="session")
def line3_analysed(spark, line3_run, tmp_path_factory):
    """(Run, report path): a copy of line3_run analysed by rmptwin.api.analyze in the tests'
    session, the embedded local[2] analysis `rmptwin analyze` runs."""
    from rmptwin import api

    copy = tmp_path_factory.mktemp("line3-analysed") / "run"
    shutil.copytree(line3_run, copy)
    run = api.Run(copy)
    return run, api.analyze(run, spark=spark)   # the tests' session, left running


@pytest.fixture(scope="session")
def line3_sweep(spark, tmp_path_factory):
    """rmptwin.api.sweep of line3 over LINE3_SWEEP, one seed, embedded (in the tests' session)."""
    from rmptwin import api

    return api.sweep(LINE3, LINE3_SWEEP, seeds=1, out=tmp_path_factory.mktemp("line3-sweep") / "sweep")
