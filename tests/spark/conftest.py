"""One local SparkSession for every Spark test, and a builder of parsed event DataFrames."""

from __future__ import annotations

import pytest


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
