"""Spark schemas, defined once: the twin of ``events.EVENT_SCHEMA`` / ``DROP_SCHEMA`` /
``LINK_COUNT_SCHEMA``, the parsed ``detail`` object, and the metric tables the jobs write."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from rmptwin.records import tables as ev

_ARROW_TO_SPARK = {pa.int64(): T.LongType(), pa.int32(): T.IntegerType(), pa.string(): T.StringType(),
                   pa.float64(): T.DoubleType(), pa.bool_(): T.BooleanType()}


def spark_schema(arrow_schema: pa.Schema) -> T.StructType:
    """The StructType of an Arrow schema of the event log (int64, int32, string, float64, bool columns)."""
    return T.StructType([T.StructField(f.name, _ARROW_TO_SPARK[f.type], True) for f in arrow_schema])


EVENTS = spark_schema(ev.EVENT_SCHEMA)
# Event files written before the typed detail columns (tables.DETAIL_COLUMNS): detail only.
LEGACY_EVENTS = T.StructType([f for f in EVENTS.fields if f.name in ev.LEGACY_EVENT_COLUMNS])
DROPS = spark_schema(ev.DROP_SCHEMA)
LINK_COUNTS = spark_schema(ev.LINK_COUNT_SCHEMA)

# The ``detail`` keys the analysis reads. Keys whose JSON type may vary between cores
# (a token id may be a number or a name) are read as strings: Spark keeps the raw text.
DETAIL = T.StructType(
    [
        T.StructField("repair", T.BooleanType()),
        T.StructField("stripe", T.LongType()),
        T.StructField("type", T.StringType()),
        T.StructField("token", T.StringType()),
        T.StructField("k", T.LongType()),
        T.StructField("ts_ns", T.LongType()),
        T.StructField("mold_seq", T.LongType()),
        T.StructField("session", T.StringType()),
        T.StructField("region", T.StringType()),
        T.StructField("first", T.LongType()),
        T.StructField("count", T.LongType()),
    ]
)

# The subset of DETAIL the transforms read (extract.parse_events parses only these).
DETAIL_USED = T.StructType([f for f in DETAIL.fields if f.name in ("repair", "stripe", "type", "count")])

# Hosts of the topology, one row each (built from the manifest by extract.hosts_frame).
HOSTS = T.StructType(
    [
        T.StructField("node", T.StringType(), False),
        T.StructField("host_role", T.StringType(), False),
        T.StructField("switch", T.StringType(), False),
        T.StructField("region", T.StringType(), False),   # region of its switch, "none" if none
        T.StructField("stripes", T.ArrayType(T.LongType()), True),  # None: every stripe
    ]
)

# --- metric tables (what analysis/*.parquet hold) ---------------------------------------

LATENCY = T.StructType(
    [
        T.StructField("src", T.StringType()), T.StructField("src_seq", T.LongType()),
        T.StructField("stripe", T.LongType()), T.StructField("gseq", T.LongType()),
        T.StructField("node", T.StringType()), T.StructField("role", T.StringType()),
        T.StructField("region", T.StringType()), T.StructField("stage", T.StringType()),
        T.StructField("send_ns", T.LongType()), T.StructField("latency_ns", T.LongType()),
    ]
)

FAIRNESS = T.StructType(
    [
        T.StructField("scope", T.StringType()), T.StructField("stripe", T.LongType()),
        T.StructField("gseq", T.LongType()), T.StructField("nodes", T.LongType()),
        T.StructField("first_ns", T.LongType()), T.StructField("spread_ns", T.LongType()),
    ]
)

RECEIVER_LOSS = T.StructType(
    [
        T.StructField("node", T.StringType()), T.StructField("expected", T.LongType()),
        T.StructField("first_received", T.LongType()), T.StructField("received", T.LongType()),
        T.StructField("first_loss", T.DoubleType()), T.StructField("residual_loss", T.DoubleType()),
        T.StructField("repaired", T.LongType()), T.StructField("repair_median_ns", T.DoubleType()),
        T.StructField("repair_extra_median_ns", T.DoubleType()),
    ]
)

CORRELATION = T.StructType(
    [
        T.StructField("a", T.StringType()), T.StructField("b", T.StringType()),
        T.StructField("packets", T.LongType()), T.StructField("loss_a", T.LongType()),
        T.StructField("loss_b", T.LongType()), T.StructField("loss_both", T.LongType()),
        T.StructField("correlation", T.DoubleType()),
    ]
)
