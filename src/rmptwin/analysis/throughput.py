"""Transform: throughput over time per source, per stripe (SEND) and per region (customer
receptions, by the customer's region)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmptwin.core.events import Kind


def throughput(events: DataFrame, hosts: DataFrame, bin_ns: int = 100_000_000) -> DataFrame:
    """Columns: dimension ('source' | 'stripe' | 'region'), key, bin_ns (bin start), messages,
    rate_per_s. A region's messages are distinct (stripe, gseq) its customers received."""
    binned: Callable[[str], Column] = lambda c: (F.floor(F.col(c) / bin_ns) * bin_ns).cast("long")
    sent = events.filter(F.col("kind") == Kind.SEND).withColumn("bin_ns", binned("t_ns"))
    by_src = sent.groupBy(F.lit("source").alias("dimension"), F.col("src").alias("key"), "bin_ns").agg(
        F.count("*").alias("messages"))
    by_stripe = sent.groupBy(F.lit("stripe").alias("dimension"), F.col("stripe").cast("string").alias("key"),
                             "bin_ns").agg(F.count("*").alias("messages"))
    cust = (
        events.filter(F.col("kind") == Kind.CUST_RECV)
        .join(F.broadcast(hosts.select("node", "region")), "node")   # the topology's hosts: a few rows
        .groupBy("region", "stripe", "gseq").agg(F.min("t_ns").alias("t_ns"))
        .withColumn("bin_ns", binned("t_ns"))
        .groupBy(F.lit("region").alias("dimension"), F.col("region").alias("key"), "bin_ns")
        .agg(F.count("*").alias("messages"))
    )
    return (
        by_src.unionByName(by_stripe).unionByName(cust)
        .withColumn("rate_per_s", F.col("messages") * (1e9 / bin_ns))
    )
