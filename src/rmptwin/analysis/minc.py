"""MINC link-loss inference (Cáceres, Duffield, Horowitz, Towsley 1999) on the logical
multicast tree of hosts: source host -> switches -> receiver hosts (access links count).

For each tree node k, gamma_k = P(some receiver below k first-received the packet). With
A_k = P(the packet reached k): A_leaf = gamma_leaf, and for an internal node A_k solves
1 - gamma_k/A_k = prod over children j (1 - gamma_j/A_k). The link into k passes with
alpha_k = A_k / A_parent(k) (A of the source host = 1); its loss rate is 1 - alpha_k.

A switch with one child in the tree makes its two links inseparable (losses on either look
the same to every receiver), so such switches are collapsed: the logical link is the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmptwin.core.striping import serves_stripe
from rmptwin.model import LinkParams, Topology
from rmptwin.model.tree import multicast_tree, path_links


@dataclass
class LogicalTree:
    root: str                                  # the source host
    parent: dict[str, str]                     # node -> parent (root absent)
    children: dict[str, list[str]]
    hops: dict[str, list[tuple[str, str]]]     # node -> physical hops of the link into it
    receivers: list[str] = field(default_factory=list)

    def nodes(self) -> list[str]:
        """Every node but the root, parents before children (DFS, children by name)."""
        out, todo = [], list(reversed(sorted(self.children.get(self.root, []))))
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(reversed(sorted(self.children.get(n, []))))
        return out

    def leaves_in_order(self) -> list[str]:
        return [n for n in self.nodes() if not self.children.get(n)]

    def ancestors(self, node: str) -> list[str]:
        """``node`` and every node above it, the root excluded."""
        out = []
        while node != self.root:
            out.append(node)
            node = self.parent[node]
        return out

    def label(self, node: str) -> str:
        hops = self.hops[node]
        return ">".join([hops[0][0]] + [v for _, v in hops])


def logical_tree(topo: Topology, source: str, receivers: list[str]) -> LogicalTree:
    """The tree a source's multicast took to ``receivers`` (host names), chains collapsed."""
    src = topo.host(source)
    rhosts = [topo.host(r) for r in receivers]
    st = multicast_tree(topo, src.switch, {h.switch for h in rhosts})
    parent: dict[str, str] = {src.switch: source}
    for p, c in st.edges():
        parent[c] = p
    for h in rhosts:
        if h.switch in parent:
            parent[h.name] = h.switch
    children: dict[str, list[str]] = {}
    for c, p in parent.items():
        children.setdefault(p, []).append(c)
    hops = {c: [(p, c)] for c, p in parent.items()}
    # Collapse every non-root node with exactly one child into its child's link.
    for node in list(parent):
        kids = children.get(node, [])
        if len(kids) == 1:
            (kid,) = kids
            up = parent.pop(node)
            children[up] = [kid if x == node else x for x in children[up]]
            parent[kid] = up
            hops[kid] = hops.pop(node) + hops[kid]
            children.pop(node)
    reached = [r for r in receivers if r in parent]
    return LogicalTree(root=source, parent=parent, children={k: sorted(v) for k, v in children.items()},
                       hops=hops, receivers=reached)


# ----------------------------------------------------------------------------- estimator


def solve_a(gamma_k: float, gamma_children: list[float], iterations: int = 200) -> float:
    """A_k from 1 - gamma_k/A = prod_j (1 - gamma_j/A), by bisection on [gamma_k, 1]."""
    if gamma_k <= 0:
        return 0.0

    def h(a: float) -> float:
        prod = 1.0
        for g in gamma_children:
            prod *= 1 - g / a
        return (1 - gamma_k / a) - prod

    lo, hi = gamma_k, 1.0
    if h(hi) <= 0:  # the data say nothing was lost above the children: clip at 1
        return 1.0
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if h(mid) > 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def estimate_loss(tree: LogicalTree, gamma: dict[str, float]) -> dict[str, float]:
    """Estimated loss rate 1 - alpha_k of the link into every node k of the tree."""
    a: dict[str, float] = {}
    for node in reversed(tree.nodes()):  # children before parents
        kids = tree.children.get(node, [])
        g = gamma.get(node, 0.0)
        a[node] = g if not kids else solve_a(g, [gamma.get(c, 0.0) for c in kids])
    out = {}
    for node in tree.nodes():
        up = tree.parent[node]
        a_up = 1.0 if up == tree.root else a[up]
        out[node] = float("nan") if a_up <= 0 else 1 - a[node] / a_up
    return out


# ----------------------------------------------------------------------------- transforms

# Receivers per mask word: bit 63 is the sign bit, so a word holds 63 receivers.
MASK_BITS = 63


def receiver_bits(receivers: list[str]) -> dict[str, tuple[int, int]]:
    """Receiver name -> (mask word, bit): the i-th receiver is bit i % 63 of word i // 63."""
    return {r: divmod(i, MASK_BITS) for i, r in enumerate(receivers)}


def packet_masks(fate: DataFrame, receivers: list[str]) -> DataFrame:
    """Per packet: n (receivers that expected it) and which receivers first-received it, as
    bitmasks first_0, first_1, ... (see receiver_bits). Columns: src stripe src_seq n first_0..

    One aggregation per packet replaces a join of every first reception with its receiver's
    tree ancestors (about four rows per reception) and a distinct over the result.
    """
    bits = receiver_bits(receivers)
    words = 1 + (len(receivers) - 1) // MASK_BITS if receivers else 1
    aggs = [F.count("*").alias("n")]
    for w in range(words):
        pairs = [x for r, (wr, b) in bits.items() if wr == w for x in (F.lit(r), F.lit(1 << b))]
        bit = F.create_map(*pairs)[F.col("node")] if pairs else F.lit(None).cast("long")
        # bit_or ignores nulls: receivers that lost the packet (or are unknown) add no bit.
        aggs.append(F.coalesce(F.bit_or(F.when(F.col("first"), bit)), F.lit(0)).cast("long").alias(f"first_{w}"))
    return fate.groupBy("src", "stripe", "src_seq").agg(*aggs)


def complete_packets(masks: DataFrame) -> DataFrame:
    """The packet_masks rows of packets every receiver of their (src, stripe) expected: none
    was crashed when it was sent. MINC reads only these (a crashed leaf would look like a
    lossy access link)."""
    most = masks.groupBy("src", "stripe").agg(F.max("n").alias("most"))
    return masks.join(F.broadcast(most), ["src", "stripe"]).filter(F.col("n") == F.col("most")).drop("most")


def first_patterns(complete: DataFrame) -> DataFrame:
    """Packets per (src, stripe) and first-reception pattern (first_0, first_1, ...)."""
    masks = [c for c in complete.columns if c.startswith("first_")]
    return complete.groupBy("src", "stripe", *masks).agg(F.count("*").alias("packets"))


def gamma(patterns: list[dict[str, Any]] | list[Row], trees: dict[tuple[str, int], LogicalTree],
          receivers: list[str]) -> tuple[dict[tuple[str, int], dict[str, float]], dict[tuple[str, int], int]]:
    """From first_patterns rows: gamma per (src, stripe) and tree node (the fraction of its
    packets some receiver below the node first-received), and the packets per (src, stripe).
    A tree node no packet reached has no gamma, and a (src, stripe) no packet reached anywhere
    has no packet count (callers read both as 0)."""
    bits = receiver_bits(receivers)
    by_pair: dict[tuple[str, int], list[dict[str, Any] | Row]] = {}
    for r in patterns:
        by_pair.setdefault((r["src"], int(r["stripe"])), []).append(r)
    gam: dict[tuple[str, int], dict[str, float]] = {}
    npk: dict[tuple[str, int], int] = {}
    for key, t in trees.items():
        rows = by_pair.get(key, [])
        packets = sum(r["packets"] for r in rows)
        below: dict[str, dict[int, int]] = {}   # tree node -> mask word -> receivers below it
        for rcv in t.receivers:
            w, b = bits[rcv]
            for node in t.ancestors(rcv):
                below.setdefault(node, {}).setdefault(w, 0)
                below[node][w] |= 1 << b
        for node, mask in below.items():
            reached = sum(r["packets"] for r in rows if any(r[f"first_{w}"] & m for w, m in mask.items()))
            if reached:
                gam.setdefault(key, {})[node] = reached / packets
                npk[key] = packets
    return gam, npk


def hop_drops(drops: DataFrame, sent: DataFrame, windows: DataFrame) -> DataFrame:
    """Distinct first-copy DATA packets dropped per (src, stripe, from_node, to_node).

    A drop counts as the first copy's if it happened within the hop's window after the send
    (see hop_windows); later drops of the same packet are the source's re-sends.
    """
    data = drops.filter(F.upper(F.col("frame")) == "DATA").withColumn(
        "stripe", F.regexp_extract("group", r"^rmp/(\d+)$", 1)
    ).filter(F.col("stripe") != "").withColumn("stripe", F.col("stripe").cast("long"))
    return (
        data.join(sent.select("src", "stripe", "src_seq", "send_ns"), ["src", "stripe", "src_seq"])
        .join(F.broadcast(windows), ["src", "from_node", "to_node"])
        .filter(F.col("t_ns") - F.col("send_ns") <= F.col("window_ns"))
        .groupBy("src", "stripe", "from_node", "to_node")
        .agg(F.countDistinct("src_seq").alias("dropped"))
    )


def hop_params(topo: Topology, u: str, v: str) -> LinkParams:
    names = {h.name for h in topo.hosts}
    link: LinkParams
    if u in names:
        link = topo.host(u).link
        return link
    if v in names:
        link = topo.host(v).link
        return link
    return topo.link(u, v)


def hop_windows(topo: Topology, trees: dict[tuple[str, int], LogicalTree],
                slack_ms: float) -> list[tuple[str, str, str, int]]:
    """(src, from_node, to_node, window_ns) for every physical hop of every tree: just under
    the earliest a re-send can get there, ``slack_ms`` (first_copy.first_copy_slack_ms) plus
    the path delay from the source without jitter, less 1 ms."""
    out: dict[tuple[str, str, str], int] = {}
    for (src, _), t in trees.items():
        dist = {t.root: 0.0}
        for node in t.nodes():
            for u, v in t.hops[node]:
                p = hop_params(topo, u, v)
                out[(src, u, v)] = int((dist[u] + slack_ms - 1.0) * 1e6)
                dist[v] = dist[u] + p.delay_ms
    return [(s, u, v, w) for (s, u, v), w in out.items()]


def receiver_windows(topo: Topology, slack_ms: float) -> list[tuple[str, str, int]]:
    """(src, node, window_ns) for every source and receiver: just under the earliest a
    re-send can arrive, ``slack_ms`` (first_copy.first_copy_slack_ms) plus the path delay
    without jitter, less 1 ms. Any copy before that is the first; later ones may be re-sends."""
    out: list[tuple[str, str, int]] = []
    for s in topo.hosts_with_role("source"):
        for r in topo.hosts:
            if r.role not in ("primary", "secondary"):
                continue
            delay = sum(p.delay_ms for p in path_links(topo, s, r))
            out.append((s.name, r.name, int((delay + slack_ms - 1.0) * 1e6)))
    return out


RECEIVER_WINDOWS = T.StructType(
    [T.StructField("src", T.StringType()), T.StructField("node", T.StringType()),
     T.StructField("window_ns", T.LongType())]
)

WINDOWS = T.StructType(
    [T.StructField("src", T.StringType()), T.StructField("from_node", T.StringType()),
     T.StructField("to_node", T.StringType()), T.StructField("window_ns", T.LongType())]
)


def receivers_of_stripe(topo: Topology, stripe: int) -> list[str]:
    return [h.name for h in topo.hosts if h.role in ("primary", "secondary")
            and serves_stripe(h.stripes, stripe)]


def trees_for(topo: Topology, pairs: list[tuple[str, int]]) -> dict[tuple[str, int], LogicalTree]:
    names = {h.name for h in topo.hosts}
    # a source that is itself a receiver (a trading-floor arbiter) hears its own messages
    # without the network: it is no leaf of its own tree
    return {(s, k): logical_tree(topo, s, [r for r in receivers_of_stripe(topo, k) if r != s])
            for s, k in pairs if s in names}


def configured_loss(topo: Topology, hops: list[tuple[str, str]]) -> float:
    keep = 1.0
    for u, v in hops:
        keep *= 1 - hop_params(topo, u, v).loss.mean
    return 1 - keep


def minc_links(spark: SparkSession, topo: Topology, fate: DataFrame, sent: DataFrame,
               drops: DataFrame | None, counts: DataFrame | None, slack_ms: float) -> list[dict[str, Any]]:
    """One row per logical link of every (source, stripe) tree: MINC estimate, configured
    loss, and ground truth (distinct first copies dropped on the link / copies that reached it)."""
    receivers = sorted(h.name for h in topo.hosts if h.role in ("primary", "secondary"))
    # Every (src, stripe) of the fates has a complete packet (the one most receivers expected).
    complete = complete_packets(packet_masks(fate, receivers)).cache()
    pairs = [(r["src"], int(r["stripe"])) for r in complete.select("src", "stripe").distinct().collect()]
    trees = {k: t for k, t in trees_for(topo, sorted(pairs)).items() if t.receivers}
    if not trees:
        complete.unpersist()
        return []
    gam, npk = gamma(first_patterns(complete).collect(), trees, receivers)
    dropped: dict[tuple[str, int, str, str], int] | None = None
    rates: dict[tuple[str, str], float] | None = None
    if drops is not None:
        windows = spark.createDataFrame(hop_windows(topo, trees, slack_ms), WINDOWS)
        sent = sent.join(complete.select("src", "stripe", "src_seq"), ["src", "stripe", "src_seq"], "left_semi")
        dropped = {(r["src"], r["stripe"], r["from_node"], r["to_node"]): r["dropped"]
                   for r in hop_drops(drops, sent, windows).collect()}
    elif counts is not None:
        agg = (counts.filter(F.upper(F.col("frame")) == "DATA").groupBy("from_node", "to_node")
               .agg(F.sum("packets").alias("p"), F.sum("dropped").alias("d")).collect())
        rates = {(r["from_node"], r["to_node"]): (r["d"] / r["p"] if r["p"] else 0.0) for r in agg}
    complete.unpersist()
    return link_rows(topo, trees, gam, npk, dropped, rates)


def link_rows(topo: Topology, trees: dict[tuple[str, int], LogicalTree],
              gam: dict[tuple[str, int], dict[str, float]], npk: dict[tuple[str, int], int],
              dropped: dict[tuple[str, int, str, str], int] | None = None,
              rates: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """The rows of ``minc_links`` from what ``gamma`` gives (plain Python: the pandas path,
    ``link_loss.minc_rows``, builds the same rows). The truth, where known: from ``dropped``
    (distinct first copies per (src, stripe, from_node, to_node), ``hop_drops``) the copies
    dropped on the link over those that reached it; else from ``rates`` (drop rate per
    (from_node, to_node), the link counts) the chance of a drop on one of its hops."""
    rows: list[dict[str, Any]] = []
    for (src, stripe), t in sorted(trees.items()):
        est = estimate_loss(t, gam.get((src, stripe), {}))
        n = npk.get((src, stripe), 0)
        reached = {t.root: float(n)}
        for node in t.nodes():
            truth = None
            if dropped is not None:
                lost = sum(dropped.get((src, stripe, u, v), 0) for u, v in t.hops[node])
                reached[node] = reached[t.parent[node]] - lost
                up = reached[t.parent[node]]
                truth = lost / up if up > 0 else None
            elif rates is not None:
                keep = 1.0
                for u, v in t.hops[node]:
                    keep *= 1 - rates.get((u, v), 0.0)
                truth = 1 - keep
            rows.append({
                "src": src, "stripe": stripe, "link": t.label(node), "parent": t.parent[node],
                "child": node, "depth": len(t.ancestors(node)), "packets": n,
                "gamma": gam.get((src, stripe), {}).get(node, 0.0), "estimate": est[node],
                "configured": configured_loss(topo, t.hops[node]), "truth": truth,
            })
    return rows
