"""Transforms: per receiver first-reception and residual loss, repair latency, and the
pairwise correlation of first-reception losses between receivers.

A packet is a distinct (src, stripe, src_seq) SEND (M_s counts per stripe). A receiver (R_P/R_S) expects every packet of
the stripes it joins. It *first-received* a packet when its RECV has repair false; a
packet that arrived only by repair is a first-reception loss.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmptwin.analysis.extract import RECEIVER_ROLES
from rmptwin.analysis.latency import sends
from rmptwin.core.events import Kind


def down_intervals(events: DataFrame) -> DataFrame:
    """Each CRASH with the node's first RECOVER after it (null: down to the end): node, down_ns, up_ns."""
    crash = events.filter(F.col("kind") == Kind.CRASH).select("node", F.col("t_ns").alias("down_ns"))
    up = events.filter(F.col("kind") == Kind.RECOVER).select(F.col("node").alias("n"), F.col("t_ns").alias("t"))
    return (
        crash.join(up, (F.col("n") == F.col("node")) & (F.col("t") >= F.col("down_ns")), "left")
        .groupBy("node", "down_ns").agg(F.min("t").alias("up_ns"))
    )


def expected(events: DataFrame, hosts: DataFrame) -> DataFrame:
    """(src, src_seq, stripe, send_ns, node) for every packet and every receiver of its stripe
    that was not crashed when the packet was sent (a crashed node expects nothing)."""
    receivers = hosts.filter(F.col("host_role").isin(*RECEIVER_ROLES)).select("node", "stripes")
    cond = F.col("stripes").isNull() | F.expr("array_contains(stripes, stripe)")
    exp = sends(events).join(F.broadcast(receivers), cond).drop("stripes")
    down = down_intervals(events).withColumnRenamed("node", "down_node")
    was_down = ((F.col("down_node") == F.col("node")) & (F.col("send_ns") >= F.col("down_ns"))
                & (F.col("up_ns").isNull() | (F.col("send_ns") < F.col("up_ns"))))
    return exp.join(F.broadcast(down), was_down, "left_anti")


def _earliest() -> list[Column]:
    """Aggregations giving the earliest row's t_ns (``recv_ns``) and, with ``_earliest_repair``,
    its repair flag (false if any row at that time has it false): what min(struct(t_ns,
    repair)) gives, but in long buffers, so that Spark hash-aggregates instead of sorting the
    rows (a struct minimum is a sort aggregate: millions of RECVs sorted twice)."""
    return [F.min("t_ns").alias("recv_ns"), F.min(F.when(~F.col("repair"), F.col("t_ns"))).alias("_plain_ns")]


def _earliest_repair() -> Column:
    return (~F.coalesce(F.col("_plain_ns") == F.col("recv_ns"), F.lit(False))).alias("repair")


def receptions(events: DataFrame) -> DataFrame:
    """First RECV per (packet, node): src, src_seq, node, recv_ns, repair."""
    return (
        events.filter(F.col("kind") == Kind.RECV)
        .groupBy("src", "stripe", "src_seq", "node")
        .agg(*_earliest())
        .select("src", "stripe", "src_seq", "node", "recv_ns", _earliest_repair())
    )


def fates(events: DataFrame, hosts: DataFrame, windows: DataFrame | None = None) -> DataFrame:
    """Every expected (packet, receiver) with how it arrived: first (bool), received (bool), delay_ns.

    ``windows`` (src, node, window_ns), if given, bounds a first reception: a copy without the
    repair flag that arrives later than that after the send is a source re-send (the source
    multicasts an unacknowledged message again), so a repair, not the first copy.
    """
    fate = (
        expected(events, hosts)
        .join(receptions(events), ["src", "stripe", "src_seq", "node"], "left")
        .withColumn("received", F.col("recv_ns").isNotNull())
        .withColumn("delay_ns", F.col("recv_ns") - F.col("send_ns"))
    )
    if windows is None:
        return fate.withColumn("first", F.col("received") & ~F.col("repair"))
    late = F.coalesce(F.col("delay_ns") > F.col("window_ns"), F.lit(False))
    return (
        fate.join(F.broadcast(windows), ["src", "node"], "left")
        .withColumn("repair", F.col("repair") | late)
        .withColumn("first", F.col("received") & ~F.col("repair"))
        .drop("window_ns")
    )


def losses(fate: DataFrame) -> DataFrame:
    """First-reception loss indicators that are 1: (src, src_seq, stripe, node)."""
    return fate.filter(~F.col("first")).select("src", "src_seq", "stripe", "node")


def receiver_loss(fate: DataFrame) -> DataFrame:
    """Per receiver: expected, first_received, received, first_loss, residual_loss, repaired,
    repair_median_ns (send -> arrival of the repair) and repair_extra_median_ns (that minus the
    receiver's median first-copy latency: how much later than normal a repaired packet arrived)."""
    med: Callable[[Column], Column] = lambda c: F.percentile_approx(c, 0.5, 10000).cast("double")
    per = fate.groupBy("node").agg(
        F.count("*").alias("expected"),
        F.sum(F.col("first").cast("long")).alias("first_received"),
        F.sum(F.col("received").cast("long")).alias("received"),
        F.sum((F.col("received") & F.col("repair")).cast("long")).alias("repaired"),
        med(F.when(F.col("first"), F.col("delay_ns"))).alias("first_median_ns"),
        med(F.when(F.col("received") & F.col("repair"), F.col("delay_ns"))).alias("repair_median_ns"),
    )
    return per.select(
        "node", "expected", "first_received", "received",
        (1 - F.col("first_received") / F.col("expected")).alias("first_loss"),
        (1 - F.col("received") / F.col("expected")).alias("residual_loss"),
        "repaired", "repair_median_ns",
        (F.col("repair_median_ns") - F.col("first_median_ns")).alias("repair_extra_median_ns"),
    )


def loss_correlation(fate: DataFrame) -> DataFrame:
    """Pearson correlation of first-reception loss indicators for every receiver pair a <= b
    (the coefficient is symmetric: one orientation, the diagonal included), over the packets
    both expect: (n*n_ab - n_a*n_b) / sqrt(n_a(n-n_a) n_b(n-n_b)); null when a receiver lost
    all or none of them. Rows sorted by (a, b), so two analyses of one run list them alike.

    Columns: a b packets loss_a loss_b loss_both correlation.
    """
    per_stripe = fate.groupBy("node", "stripe").agg(
        F.count("*").alias("n"), F.sum((~F.col("first")).cast("long")).alias("lost")
    )
    a = per_stripe.select(F.col("node").alias("a"), "stripe", "n", F.col("lost").alias("loss_a"))
    b = per_stripe.select(F.col("node").alias("b"), "stripe", F.col("lost").alias("loss_b"))
    totals = (
        a.join(b, "stripe")
        .filter(F.col("a") <= F.col("b"))
        .groupBy("a", "b")
        .agg(F.sum("n").alias("packets"), F.sum("loss_a").alias("loss_a"), F.sum("loss_b").alias("loss_b"))
    )
    lost = losses(fate)
    x = lost.select("src", "stripe", "src_seq", F.col("node").alias("a"))
    y = lost.select("src", "stripe", "src_seq", F.col("node").alias("b"))
    both = (x.join(y, ["src", "stripe", "src_seq"]).filter(F.col("a") <= F.col("b"))
            .groupBy("a", "b").agg(F.count("*").alias("loss_both")))
    # In double: n_a (n - n_a) n_b (n - n_b) overflows a long from ~200,000 packets on.
    n, na, nb = (F.col(c).cast("double") for c in ("packets", "loss_a", "loss_b"))
    nab = F.coalesce(F.col("loss_both"), F.lit(0)).cast("double")
    den = F.sqrt(na * (n - na) * nb * (n - nb))
    return (
        totals.join(both, ["a", "b"], "left")
        .withColumn("correlation", F.when(den > 0, (n * nab - na * nb) / den))
        .withColumn("loss_both", F.coalesce(F.col("loss_both"), F.lit(0)).cast("long"))
        .select("a", "b", "packets", "loss_a", "loss_b", "loss_both", "correlation")
        .orderBy("a", "b")
    )


def customer_loss(events: DataFrame) -> DataFrame:
    """Per customer: messages received, how many by repair, gaps detected and their size."""
    recv = (
        events.filter(F.col("kind") == Kind.CUST_RECV)
        .groupBy("node", "stripe", "gseq").agg(*_earliest()).select("node", _earliest_repair())
        .groupBy("node")
        .agg(F.count("*").alias("received"), F.sum(F.col("repair").cast("long")).alias("repaired"))
    )
    gaps = (
        events.filter(F.col("kind") == Kind.CUST_GAP)
        .groupBy("node")
        .agg(F.count("*").alias("gaps"), F.sum(F.coalesce(F.col("d_count"), F.lit(1))).alias("gap_messages"))
    )
    return (
        recv.join(gaps, "node", "full")
        .fillna(0, ["received", "repaired", "gaps", "gap_messages"])
        .withColumn("repaired_fraction",
                    F.when(F.col("received") > 0, F.col("repaired") / F.col("received")))
    )
