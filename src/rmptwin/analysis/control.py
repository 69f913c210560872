"""Transforms: control messages per data message, NACKs per lost message (implosion),
token rotation period and jitter, reformation outages.

``control_per_data`` (type 'all') and ``crash_recovery``'s outage are summary.json's
``control_per_data`` and ``reformation_ms``, defined in ``analysis.summary`` and computed
here by the same words (tests/spark/test_summary_agrees.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rmptwin.analysis.extract import RECEIVER_ROLES
from rmptwin.analysis.summary import MESSAGE_WORK
from rmptwin.core.events import Kind


def control_per_data(events: DataFrame, duration_ns: int) -> DataFrame:
    """Per control type (and 'all'): messages sent and messages per distinct data message.
    Control counts up to the end of the run: ``duration_ns`` or the last MESSAGE_WORK event
    if later (analysis.summary: an emulated run's drain idles past the duration)."""
    data = events.filter(F.col("kind") == Kind.SEND).select("src", "stripe", "src_seq").distinct().agg(
        F.count("*").alias("data"))
    work = events.filter(F.col("kind").isin(*MESSAGE_WORK)).agg(F.max("t_ns").alias("work_end"))
    ctrl = (events.filter(F.col("kind") == Kind.CTRL_SENT).crossJoin(work)
            .filter(F.col("t_ns") <= F.greatest(F.lit(duration_ns), F.coalesce(F.col("work_end"), F.lit(0))))
            .withColumn("type", F.coalesce(F.col("d_type"), F.lit("?"))))
    by_type = ctrl.groupBy("type").agg(F.count("*").alias("messages"))
    total = ctrl.agg(F.count("*").alias("messages")).withColumn("type", F.lit("all"))
    return (
        by_type.unionByName(total).crossJoin(data)
        .withColumn("per_data", F.when(F.col("data") > 0, F.col("messages") / F.col("data")))
        .select("type", "messages", "data", "per_data")
    )


def nacks_per_lost_packet(events: DataFrame, fate: DataFrame) -> DataFrame:
    """Per packet that some receiver lost at first reception: how many receivers lost it and
    how many NACKs named it. Columns: src stripe src_seq receivers_lost nacks."""
    lost = fate.filter(~F.col("first")).groupBy("src", "stripe", "src_seq").agg(F.count("*").alias("receivers_lost"))
    nacks = (
        events.filter((F.col("kind") == Kind.NACK_SENT) & (F.col("src") != ""))
        .groupBy("src", "stripe", "src_seq").agg(F.count("*").alias("nacks"))
    )
    return lost.join(nacks, ["src", "stripe", "src_seq"], "left").fillna(0, ["nacks"])


def nack_summary(events: DataFrame, fate: DataFrame) -> DataFrame:
    """One row: nacks, lost packets, loss events (packet x receiver), nacks per lost packet and
    per loss event (NACK_SENT counted whether or not it names its packet)."""
    nacks = events.filter(F.col("kind") == Kind.NACK_SENT).agg(F.count("*").alias("nacks"))
    lost = fate.filter(~F.col("first")).agg(
        F.count("*").alias("loss_events"),
        F.countDistinct("src", "stripe", "src_seq").alias("lost_packets"))
    return nacks.crossJoin(lost).select(
        "nacks", "lost_packets", "loss_events",
        F.when(F.col("lost_packets") > 0, F.col("nacks") / F.col("lost_packets")).alias("nacks_per_lost_packet"),
        F.when(F.col("loss_events") > 0, F.col("nacks") / F.col("loss_events")).alias("nacks_per_loss_event"),
    )


def token_intervals(events: DataFrame) -> DataFrame:
    """Token passes (ACK_SENT, NULL_TOKEN) per ring (stripe) in time order: pass_ns is the time
    since the previous pass by any site, rotation_ns since the same site's previous pass."""
    passes = events.filter(F.col("kind").isin(Kind.ACK_SENT, Kind.NULL_TOKEN)).select("stripe", "node", "t_ns")
    ring = Window.partitionBy("stripe").orderBy("t_ns", "node")
    site = Window.partitionBy("stripe", "node").orderBy("t_ns")
    return (
        passes.withColumn("pass_ns", F.col("t_ns") - F.lag("t_ns").over(ring))
        .withColumn("rotation_ns", F.col("t_ns") - F.lag("t_ns").over(site))
    )


def token_rotation(intervals: DataFrame) -> DataFrame:
    """Per ring: passes, sites, mean and standard deviation (jitter) of the pass interval and
    of the rotation period (one full turn of the token back to a site)."""
    return intervals.groupBy("stripe").agg(
        F.count("*").alias("passes"), F.countDistinct("node").alias("sites"),
        F.mean("pass_ns").alias("pass_mean_ns"), F.stddev_pop("pass_ns").alias("pass_jitter_ns"),
        F.mean("rotation_ns").alias("rotation_mean_ns"), F.stddev_pop("rotation_ns").alias("rotation_jitter_ns"),
    )


def reformation_outages(events: DataFrame) -> DataFrame:
    """Each REFORM_DONE paired with the latest REFORM_START before it at the same node.
    Columns: node start_ns done_ns duration_ns."""
    starts = events.filter(F.col("kind") == Kind.REFORM_START).select("node", F.col("t_ns").alias("start_ns"))
    dones = events.filter(F.col("kind") == Kind.REFORM_DONE).select("node", F.col("t_ns").alias("done_ns"))
    return (
        dones.join(starts, "node").filter(F.col("start_ns") <= F.col("done_ns"))
        .groupBy("node", "done_ns").agg(F.max("start_ns").alias("start_ns"))
        .withColumn("duration_ns", F.col("done_ns") - F.col("start_ns"))
        .select("node", "start_ns", "done_ns", "duration_ns")
    )


def crash_recovery(events: DataFrame) -> DataFrame:
    """Each CRASH of a ring member (R_P/R_S) with the first REFORM_DONE (any node) at or after
    it, and the first ACK_SENT at or after that (after the crash if the ring never re-formed):
    outage_ns is crash to that ACK, the time the ring acknowledged nothing (summary.json's
    reformation_ms); null if no ACK followed. Columns: node crash_ns reformed_ns resumed_ns outage_ns."""
    crashes = events.filter((F.col("kind") == Kind.CRASH) & F.col("role").isin(*RECEIVER_ROLES)) \
        .select("node", F.col("t_ns").alias("crash_ns"))
    dones = events.filter(F.col("kind") == Kind.REFORM_DONE).select(F.col("t_ns").alias("done_ns"))
    acks = events.filter(F.col("kind") == Kind.ACK_SENT).select(F.col("t_ns").alias("ack_ns"))
    reformed = (
        crashes.join(dones, F.col("done_ns") >= F.col("crash_ns"), "left")
        .groupBy("node", "crash_ns").agg(F.min("done_ns").alias("reformed_ns"))
        .withColumn("from_ns", F.coalesce("reformed_ns", "crash_ns"))
    )
    return (
        reformed.join(acks, F.col("ack_ns") >= F.col("from_ns"), "left")
        .groupBy("node", "crash_ns", "reformed_ns").agg(F.min("ack_ns").alias("resumed_ns"))
        .withColumn("outage_ns", F.col("resumed_ns") - F.col("crash_ns"))
    )


def delivery_gaps(events: DataFrame) -> DataFrame:
    """Per receiver: the longest silence between consecutive DELIVERs and when it began."""
    w = Window.partitionBy("node").orderBy("t_ns")
    gaps = (
        events.filter(F.col("kind") == Kind.DELIVER).select("node", "t_ns")
        .withColumn("gap_ns", F.col("t_ns") - F.lag("t_ns").over(w))
        .withColumn("from_ns", F.lag("t_ns").over(w))
        .filter(F.col("gap_ns").isNotNull())
    )
    return gaps.groupBy("node").agg(F.max(F.struct("gap_ns", "from_ns")).alias("m")).select(
        "node", F.col("m.gap_ns").alias("max_gap_ns"), F.col("m.from_ns").alias("from_ns"))
