"""Transforms: delivery latency per message and receiver; fairness spread per message.

The release stage of the latency and the release scope of the fairness spread are
summary.json's ``delivery_latency_ms`` and ``fairness_spread_ms``, defined in
``analysis.summary`` and computed here by the same words (tests/spark/test_summary_agrees.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..events import Kind
from .extract import RECEIVER_ROLES

# p50 and p99 of every latency and spread table: exact, interpolated linearly between the two
# nearest values, as summary.json's (analysis.summary.percentiles).
EXACT_QUANTILES = [0.5, 0.99]


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


def release_latency(events: DataFrame, sent: DataFrame, seqmap: DataFrame) -> DataFrame:
    """Every RELEASE of an R_P/R_S (each one, not only a node's first) with its message: the
    RELEASE's own src and src_seq, or the message its stripe and gseq number. Columns as
    ``delivery_latency`` before the region: node role stage src src_seq stripe gseq send_ns t_ns."""
    rel = events.filter((F.col("kind") == Kind.RELEASE) & F.col("role").isin(*RECEIVER_ROLES)) \
        .withColumn("stage", F.lit("release"))
    cols = ["src", "src_seq", "stripe", "gseq", "node", "role", "stage", "send_ns", "t_ns"]
    named = rel.filter(F.col("src") != "").join(sent, ["src", "stripe", "src_seq"])
    numbered = rel.filter(F.col("src") == "").drop("src", "src_seq").join(seqmap, ["stripe", "gseq"])
    return named.select(*cols).unionByName(numbered.select(*cols))


def delivery_latency(events: DataFrame, hosts: DataFrame) -> DataFrame:
    """Latency from SEND to each node's first DELIVER (stage 'deliver', R_P/R_S), to every
    RELEASE (stage 'release', R_T; ``release_latency``) and to each customer's first CUST_RECV
    (stage 'customer'), with the node's region.

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
    received = (
        events.filter((F.col("kind") == Kind.CUST_RECV) & (F.col("gseq") >= 0))
        .withColumn("stage", F.lit("customer"))
        .groupBy("node", "role", "stage", "stripe", "gseq")
        .agg(F.min("t_ns").alias("t_ns"))
        .join(seqmap, ["stripe", "gseq"])
    )
    cols = ["src", "src_seq", "stripe", "gseq", "node", "role", "stage", "send_ns", "t_ns"]
    every = (delivered.select(*cols).unionByName(release_latency(events, sent, seqmap))
             .unionByName(received.select(*cols)))
    return (
        every.join(hosts.select("node", "region"), "node", "left")
        .withColumn("region", F.coalesce("region", F.lit("none")))
        .withColumn("latency_ns", F.col("t_ns") - F.col("send_ns"))
        .select("src", "src_seq", "stripe", "gseq", "node", "role", "region", "stage", "send_ns", "latency_ns")
    )


def _at(values, index):
    """The element at a 0-based ``index`` of an array column."""
    return F.element_at(values, (index + 1).cast("int"))


def interpolated_percentile(values, p: float):
    """Spark's exact ``percentile(x, p)`` read from the values sorted in an array: linear
    between the two nearest ranks, by the same arithmetic as Spark's Percentile, so the figure
    is the same double, not merely close. Null for no values."""
    n = F.size(values)
    pos = (n - 1).cast("double") * F.lit(float(p))
    lo, hi = F.floor(pos), F.ceil(pos)
    lo_v, hi_v = _at(values, lo).cast("double"), _at(values, hi).cast("double")
    return (F.when(n <= 0, F.lit(None).cast("double")).when(lo == hi, lo_v)
            .otherwise(lo_v + (pos - lo) * (hi_v - lo_v)))


def ranked_quantiles(values, quantiles: list[float]):
    """The smallest sorted value with at least a fraction q of the values at or below it, for
    each q: what percentile_approx approximates, here exact (array of longs)."""
    n = F.size(values)
    return F.transform(F.array(*[F.lit(float(q)) for q in quantiles]),
                       lambda q: _at(values, F.greatest(F.ceil(q * n) - 1, F.lit(0))))


def latency_summary(latency: DataFrame, quantiles: list[float]) -> DataFrame:
    """Per stage and region, and per stage over every region (region 'all', overall true):
    n, mean_ns, p50_ns and p99_ns (exact, ``EXACT_QUANTILES``), max_ns, and q (the latency at
    each of ``quantiles``, for the CDF plot).

    The latency table is read once: each (stage, region) collects its latencies, and a stage's
    overall figures merge those few arrays, instead of aggregating every row twice over
    grouping sets with a percentile hash map and a quantile sketch each (the slowest job).
    mean_ns is the exact sum over n, as Spark's mean is while the sum stays below 2^53 ns.

    Columns: stage region overall n mean_ns p50_ns p99_ns max_ns q.
    """
    per_region = latency.groupBy("stage", "region").agg(
        F.count("*").alias("n"), F.sum("latency_ns").alias("sum_ns"), F.collect_list("latency_ns").alias("values"))
    both = per_region.groupingSets([["stage", "region"], ["stage"]], "stage", "region").agg(
        F.sum("n").alias("n"), F.sum("sum_ns").alias("sum_ns"),
        F.array_sort(F.flatten(F.collect_list("values"))).alias("values"), (F.grouping("region") == 1).alias("overall"))
    v = F.col("values")
    return both.select(
        "stage", F.when(F.col("overall"), F.lit("all")).otherwise(F.col("region")).alias("region"), "overall",
        "n", (F.col("sum_ns") / F.col("n")).alias("mean_ns"),
        interpolated_percentile(v, EXACT_QUANTILES[0]).alias("p50_ns"),
        interpolated_percentile(v, EXACT_QUANTILES[1]).alias("p99_ns"),
        _at(v, F.size(v) - 1).alias("max_ns"), ranked_quantiles(v, quantiles).alias("q"))


def crashed_at_end(events: DataFrame) -> DataFrame:
    """Nodes whose last CRASH/RECOVER is a CRASH (column node): not operable at the end."""
    life = events.filter(F.col("kind").isin(Kind.CRASH, Kind.RECOVER))
    return (life.groupBy("node").agg(F.max_by("kind", "t_ns").alias("last"))
            .filter(F.col("last") == Kind.CRASH).select("node"))


def release_spread(events: DataFrame) -> DataFrame:
    """Per message (stripe, gseq): latest minus earliest RELEASE across the R_P/R_S operable at
    the end, every RELEASE counted, 0 for a message one R_T released (summary.json's
    fairness_spread_ms). Columns: scope stripe gseq nodes first_ns spread_ns."""
    return (
        events.filter((F.col("kind") == Kind.RELEASE) & F.col("role").isin(*RECEIVER_ROLES) & (F.col("gseq") >= 0))
        .join(F.broadcast(crashed_at_end(events)), "node", "left_anti")
        .groupBy("stripe", "gseq")
        .agg(F.countDistinct("node").alias("nodes"), F.min("t_ns").alias("first_ns"),
             (F.max("t_ns") - F.min("t_ns")).alias("spread_ns"))
        .select(F.lit("release").alias("scope"), "stripe", "gseq", "nodes", "first_ns", "spread_ns")
    )


def customer_spread(events: DataFrame) -> DataFrame:
    """Per message (stripe, gseq) two or more customers received: latest minus earliest first
    reception across them. Columns: scope stripe gseq nodes first_ns spread_ns."""
    firsts = (
        events.filter((F.col("kind") == Kind.CUST_RECV) & (F.col("gseq") >= 0))
        .groupBy("stripe", "gseq", "node")
        .agg(F.min("t_ns").alias("t_ns"))
    )
    return (
        firsts.groupBy("stripe", "gseq")
        .agg(F.count("*").alias("nodes"), F.min("t_ns").alias("first_ns"),
             (F.max("t_ns") - F.min("t_ns")).alias("spread_ns"))
        .filter(F.col("nodes") >= 2)
        .select(F.lit("customer").alias("scope"), "stripe", "gseq", "nodes", "first_ns", "spread_ns")
    )


def fairness_spread(events: DataFrame) -> DataFrame:
    """Per message: ``release_spread`` (scope 'release') and ``customer_spread`` (scope 'customer').

    Columns: scope stripe gseq nodes first_ns spread_ns.
    """
    return release_spread(events).unionByName(customer_spread(events))
