"""Transforms: delivery latency per message and receiver; fairness spread per message.

The release stage of the latency and the release scope of the fairness spread are
summary.json's ``delivery_latency_ms`` and ``fairness_spread_ms``, defined in
``analysis.summary`` and computed here by the same words (tests/spark/test_summary_agrees.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rmptwin.analysis.extract import RECEIVER_ROLES
from rmptwin.core.events import Kind

# p50 and p99 of every latency and spread table: exact, interpolated linearly between the two
# nearest values, as summary.json's (analysis.stats.percentiles).
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
        delivered.join(F.broadcast(sent), ["src", "stripe", "src_seq"])
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
    named = rel.filter(F.col("src") != "").join(F.broadcast(sent), ["src", "stripe", "src_seq"])
    numbered = rel.filter(F.col("src") == "").drop("src", "src_seq").join(F.broadcast(seqmap), ["stripe", "gseq"])
    return named.select(*cols).unionByName(numbered.select(*cols))


def delivery_latency(events: DataFrame, hosts: DataFrame, sent: DataFrame | None = None,
                     seqmap: DataFrame | None = None) -> DataFrame:
    """Latency from SEND to each node's first DELIVER (stage 'deliver', R_P/R_S), to every
    RELEASE (stage 'release', R_T; ``release_latency``) and to each customer's first CUST_RECV
    (stage 'customer'), with the node's region.

    The per-packet sends and the (stripe, gseq) -> packet map (one row per packet, tens of MB at
    10 M events) are broadcast to every join: hashing them once beats sorting millions of
    deliveries, releases and customer receptions for sort-merge joins. ``sent`` (``sends``) and
    ``seqmap`` (``sequence_map``) may be given cached: each is then computed once, not once per
    join that reads it (the plan re-derives them from the events otherwise: on 10 M events,
    four SEND aggregations and two DELIVER scans become one of each, ~1.5 s of the step).

    Columns: src src_seq stripe gseq node role region stage send_ns latency_ns.
    """
    sent = sends(events) if sent is None else sent
    delivered = (
        events.filter((F.col("kind") == Kind.DELIVER) & (F.col("src") != ""))
        .groupBy("node", "role", "src", "stripe", "src_seq")
        .agg(F.min("t_ns").alias("t_ns"), F.min("gseq").alias("gseq"))
        .join(F.broadcast(sent), ["src", "stripe", "src_seq"])
        .withColumn("stage", F.lit("deliver"))
    )
    seqmap = sequence_map(events, sent) if seqmap is None else seqmap
    received = (
        events.filter((F.col("kind") == Kind.CUST_RECV) & (F.col("gseq") >= 0))
        .withColumn("stage", F.lit("customer"))
        .groupBy("node", "role", "stage", "stripe", "gseq")
        .agg(F.min("t_ns").alias("t_ns"))
        .join(F.broadcast(seqmap), ["stripe", "gseq"])
    )
    cols = ["src", "src_seq", "stripe", "gseq", "node", "role", "stage", "send_ns", "t_ns"]
    every = (delivered.select(*cols).unionByName(release_latency(events, sent, seqmap))
             .unionByName(received.select(*cols)))
    return (
        every.join(F.broadcast(hosts.select("node", "region")), "node", "left")
        .withColumn("region", F.coalesce("region", F.lit("none")))
        .withColumn("latency_ns", F.col("t_ns") - F.col("send_ns"))
        .select("src", "src_seq", "stripe", "gseq", "node", "role", "region", "stage", "send_ns", "latency_ns")
    )


def interpolated_percentile(sorted_values: np.ndarray, p: float) -> float | None:
    """Spark's exact ``percentile(x, p)`` of values sorted ascending: linear between the two
    nearest ranks, by the same double arithmetic as Spark's Percentile (the same double, not
    merely close; tests/spark/test_latency_exact.py). None for no values."""
    n = len(sorted_values)
    if n <= 0:
        return None
    pos = float(n - 1) * float(p)
    lo, hi = math.floor(pos), math.ceil(pos)
    lo_v = float(sorted_values[lo])
    if lo == hi:
        return lo_v
    return lo_v + (pos - lo) * (float(sorted_values[hi]) - lo_v)


def ranked_quantiles(sorted_values: np.ndarray, quantiles: list[float]) -> list[int]:
    """The smallest sorted value with at least a fraction q of the values at or below it, for
    each q: what percentile_approx approximates, here exact."""
    n = len(sorted_values)
    return [int(sorted_values[max(math.ceil(float(q) * n) - 1, 0)]) for q in quantiles]


def sorted_groups(frame: DataFrame | pa.Table, keys: list[str], value: str) -> dict[tuple[Any, ...], np.ndarray]:
    """Every ``value`` of ``frame`` (a Spark frame, collected once as Arrow, or an Arrow table)
    per distinct ``keys``, sorted ascending by numpy.

    Exact percentiles need every value in order. Spark sorts a group's values in one task
    (array_sort of millions of values, or percentile's hash map of counts): 10 M events' latencies
    took most of the latency step that way; numpy sorts them in well under a second."""
    table = frame.select(*keys, value).toArrow() if isinstance(frame, DataFrame) else frame.select([*keys, value])
    if table.num_rows == 0:
        return {}
    codes, labels, width = np.zeros(table.num_rows, dtype=np.int64), [], 1
    for k in keys:
        enc = pc.dictionary_encode(table.column(k)).combine_chunks()
        codes = codes * len(enc.dictionary) + enc.indices.to_numpy(zero_copy_only=False)
        labels.append(enc.dictionary.to_pylist())
        width *= len(enc.dictionary)
    values = table.column(value).to_numpy()
    # Group first, then sort each group's values in place: a stable argsort of few small codes
    # is a radix sort, and sorting values directly beats lexsort's indirect sort of (code, value)
    # pairs (measured: 5M values in 6 groups, 1.75 s -> 0.42 s); the result is the same.
    order = np.argsort(codes.astype(np.uint16) if width <= 1 << 16 else codes, kind="stable")
    codes, values = codes[order], values[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    out: dict[tuple[Any, ...], np.ndarray] = {}
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(codes)
        values[start:end].sort()
        code, key = int(codes[start]), []
        for lab in reversed(labels):
            code, ix = divmod(code, len(lab))
            key.append(lab[ix])
        out[tuple(reversed(key))] = values[start:end]
    return out


def exact_summary(sorted_values: np.ndarray) -> dict[str, Any]:
    """n, mean_ns (the exact long sum over n, in double as Spark divides), p50_ns, p99_ns
    (``EXACT_QUANTILES``, interpolated) and max_ns of sorted values."""
    n = len(sorted_values)
    return {"n": n, "mean_ns": float(int(sorted_values.sum())) / float(n),
            "p50_ns": interpolated_percentile(sorted_values, EXACT_QUANTILES[0]),
            "p99_ns": interpolated_percentile(sorted_values, EXACT_QUANTILES[1]), "max_ns": int(sorted_values[-1])}


def latency_summary(latency: DataFrame | pa.Table, quantiles: list[float]) -> list[dict[str, Any]]:
    """Per stage and region, and per stage over every region (region 'all', overall true):
    n, mean_ns, p50_ns and p99_ns (exact, ``EXACT_QUANTILES``), max_ns, and q (the latency at
    each of ``quantiles``, for the CDF plot); rows in (stage, region) order.

    The latency table (a Spark frame, or an Arrow table of at least stage, region and
    latency_ns) is read once, its latencies sorted per (stage, region) on the driver
    (``sorted_groups``); a stage's overall figures merge its regions' sorted runs.
    """
    groups = sorted_groups(latency, ["stage", "region"], "latency_ns")
    rows: list[dict[str, Any]] = []
    for stage in sorted({s for s, _ in groups}):
        mine = {r: v for (s, r), v in groups.items() if s == stage}
        every = np.sort(np.concatenate(list(mine.values())), kind="stable")   # merges sorted runs
        for region, values, overall in [("all", every, True), *[(r, v, False) for r, v in mine.items()]]:
            rows.append({"stage": stage, "region": region, "overall": overall, **exact_summary(values),
                         "q": ranked_quantiles(values, quantiles)})
    return sorted(rows, key=lambda r: (r["stage"], r["region"]))


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
