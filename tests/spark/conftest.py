"""One local SparkSession for every Spark test, and small helpers to build event logs by hand."""

from __future__ import annotations

import json

import pytest

from rmptwin.spec import Topology


@pytest.fixture(scope="session")
def spark():
    from rmptwin.analysis.session import spark_session

    s = spark_session()
    yield s
    s.stop()


def ev(t, node, role, kind, src="", seq=-1, gseq=-1, **detail):
    return (int(t), node, role, kind, src, int(seq), int(gseq), 64, json.dumps(detail) if detail else "{}")


@pytest.fixture
def events_df(spark):
    """events_df(rows) -> a parsed events DataFrame (as extract.load_run gives)."""
    from rmptwin.analysis import schemas
    from rmptwin.analysis.extract import parse_events

    def make(rows):
        return parse_events(spark.createDataFrame(rows, schemas.EVENTS))

    return make


def small_topology(**stripes) -> Topology:
    """s1 - s2 (region west / east); source h0 at s1; receivers a,b at s1, c at s2; customers."""
    hosts = [{"name": "h0", "role": "source", "switch": "s1"},
             {"name": "a", "role": "primary", "switch": "s1", "regions": ["west"]},
             {"name": "b", "role": "primary", "switch": "s1"},
             {"name": "c", "role": "primary", "switch": "s2", "regions": ["east"]},
             {"name": "x", "role": "customer", "switch": "s1", "regions": ["west"]},
             {"name": "y", "role": "customer", "switch": "s2", "regions": ["east"]}]
    for h in hosts:
        if h["name"] in stripes:
            h["stripes"] = stripes[h["name"]]
    return Topology.model_validate({
        "name": "small", "switches": ["s1", "s2"], "regions": {"west": ["s1"], "east": ["s2"]},
        "links": [{"a": "s1", "b": "s2", "delay_ms": 5}], "hosts": hosts})
