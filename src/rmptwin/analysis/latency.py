"""Transforms: delivery latency per message and receiver; fairness spread per message."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..events import Kind


def sends(events: DataFrame) -> DataFrame:
    """One row per packet (distinct (src, stripe, src_seq) SEND; M_s counts per stripe): src, stripe,
    src_seq, send_ns."""
    return (
        events.filter(F.col("kind") == Kind.SEND)
        .groupBy("src", "stripe", "src_seq")
        .agg(F.min("t_ns").alias("send_ns"))
    )


def sequence_map(events: DataFrame, sent: DataFrame) -> DataFrame:
    """(stripe, gseq) -> the packet it numbers, from receivers' DELIVER events."""
    delivered = (
        events.filter((F.col("kind") == Kind.DELIVER) & (F.col("gseq") >= 0) & (F.col("src") != ""))
        .select("src", "stripe", "src_seq", "gseq").distinct()
    )
    return (
        delivered.join(sent, ["src", "stripe", "src_seq"])
        .groupBy("stripe", "gseq")
        .agg(F.min("src").alias("src"), F.min("src_seq").alias("src_seq"), F.min("send_ns").alias("send_ns"))
    )


def delivery_latency(events: DataFrame, hosts: DataFrame) -> DataFrame:
    """Latency from SEND to each node's first DELIVER (stage 'deliver', R_P/R_S), RELEASE
    (stage 'release', R_T) and CUST_RECV (stage 'customer'), with the node's region.

    Columns: src src_seq stripe gseq node role region stage send_ns latency_ns.
    """
    sent = sends(events)
    delivered = (
        events.filter((F.col("kind") == Kind.DELIVER) & (F.col("src") != ""))
        .groupBy("node", "role", "src", "stripe", "src_seq")
        .agg(F.min("t_ns").alias("t_ns"), F.min("gseq").alias("gseq"))
        .join(sent, ["src", "stripe", "src_seq"])
        .withColumn("stage", F.lit("deliver"))
    )
    seqmap = sequence_map(events, sent)
    later = (
        events.filter(F.col("kind").isin(Kind.RELEASE, Kind.CUST_RECV) & (F.col("gseq") >= 0))
        .withColumn("stage", F.when(F.col("kind") == Kind.RELEASE, "release").otherwise("customer"))
        .groupBy("node", "role", "stage", "stripe", "gseq")
        .agg(F.min("t_ns").alias("t_ns"))
        .join(seqmap, ["stripe", "gseq"])
    )
    cols = ["src", "src_seq", "stripe", "gseq", "node", "role", "stage", "send_ns", "t_ns"]
    both = delivered.select(*cols).unionByName(later.select(*cols))
    return (
        both.join(hosts.select("node", "region"), "node", "left")
        .withColumn("region", F.coalesce("region", F.lit("none")))
        .withColumn("latency_ns", F.col("t_ns") - F.col("send_ns"))
        .select("src", "src_seq", "stripe", "gseq", "node", "role", "region", "stage", "send_ns", "latency_ns")
    )


def latency_summary(latency: DataFrame, quantiles: list[float]) -> DataFrame:
    """Per stage and region, and per stage over every region (region 'all', overall true):
    n, mean_ns, q (latency at each of ``quantiles``; p50 and p99 for the table) and
    max_ns. One aggregation over grouping sets: the latency table is read once, and one
    quantile summary per group serves both the table (p50, p99) and the CDF plot.

    Columns: stage region overall n mean_ns q max_ns.
    """
    overall = F.grouping("region") == 1
    return (
        latency.groupingSets([["stage", "region"], ["stage"]], "stage", "region")
        .agg(F.count("*").alias("n"), F.mean("latency_ns").alias("mean_ns"),
             F.percentile_approx("latency_ns", quantiles, 10000).alias("q"), F.max("latency_ns").alias("max_ns"),
             overall.alias("overall"))
        .select("stage", F.when(F.col("overall"), F.lit("all")).otherwise(F.col("region")).alias("region"),
                "overall", "n", "mean_ns", "q", "max_ns")
    )


def fairness_spread(events: DataFrame) -> DataFrame:
    """Per message: latest minus earliest release across R_T (scope 'release') and latest
    minus earliest reception across customers (scope 'customer'); messages seen by >= 2 nodes.

    Columns: scope stripe gseq nodes first_ns spread_ns.
    """
    firsts = (
        events.filter(F.col("kind").isin(Kind.RELEASE, Kind.CUST_RECV) & (F.col("gseq") >= 0))
        .withColumn("scope", F.when(F.col("kind") == Kind.RELEASE, "release").otherwise("customer"))
        .groupBy("scope", "stripe", "gseq", "node")
        .agg(F.min("t_ns").alias("t_ns"))
    )
    return (
        firsts.groupBy("scope", "stripe", "gseq")
        .agg(F.count("*").alias("nodes"), F.min("t_ns").alias("first_ns"),
             (F.max("t_ns") - F.min("t_ns")).alias("spread_ns"))
        .filter(F.col("nodes") >= 2)
    )
