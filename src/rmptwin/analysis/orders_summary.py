"""Unified orders (seed 7.2): summary keys, Spark metrics and the report section (see ``sections``).

Fair entry. Two traders of a pair decide at the same instant to make the same offer to the
same floor; one sits in the floor's city ("near"), the other ``d`` ms farther away ("far").

- Sent straight to the floor (``orders.entry: direct``), the near offer always arrives first:
  it has d ms less to travel (and, on lossy links, fewer tries), so the floor, executing in
  arrival order, executes it first: near_first_fraction ~ 1.0 at every distance.
- Through RMP (``entry: rmp``) each offer enters the ring at its trader's portal S_P and is
  given its place in the sequence by the token site that next acknowledges it, in the order
  that site received them (``token_ring.RingMember.choose_batch``). The token rotates: in
  ``orders-line.yaml`` its two R_P sit at the floor's end and at the far end of the line, and
  each holds it every other tau_t. Whichever of the two offers reaches the site holding the
  token first goes first: the near offer when the site is at the floor, the far one when it is
  at the far end. With decisions at uniformly random phases of the rotation that is about half
  of the decisions each: near_first_fraction ~ 0.5, whatever d. The rotating token site, not
  the floor's location, decides (seed: "the trader that gets into the system first depends on
  where the portal is located when the two traders decide").
  Exactly, for a two-site ring with period tau_t: a decision at phase u (of 2 tau_t) goes to
  the far offer when the far site's next ack comes after the far offer reaches it and before
  the floor site's next ack, i.e. near_first_fraction = 0.5 + (e_far - e_near) / (2 tau_t),
  where e is how far each trader is from the ring site at its own end. Traders midway along
  the line are thus favoured a little less than those at the far site (e_far / 2 tau_t: at
  most 0.027 in unified-orders.yaml, with tau_t = 1.4 s and e_far <= 75 ms).

Keys (each defined once, here; ``spark_metrics`` computes them with the same function):

- ``orders_entry``: ``rmp`` or ``direct``.
- ``offers_sent``: OFFER_SENT events (one per offer a trader sent, whatever its fate).
- ``offers_admitted``: OFFER_ADMIT events at portals S_P (entry rmp) or exchanges (entry
  direct): offers admitted into the sequence (or the floor's book).
- ``offers_forwarded``: OFFER_ADMIT events at brokers S_S: offers a broker admitted and passed
  to its S_P (which admits or refuses them in turn).
- ``offers_rejected``: {reason: OFFER_REJECT events with that reason} (``admission.REASONS``),
  wherever refused (broker, portal, direct exchange); ``offers_rejected_total`` their sum. An
  offer is refused at most once, so admitted + rejected = sent, less offers lost on the way.
- ``offers_admitted_twice``: (admitting node, trader, offer number) admitted more than once, plus
  (exchange, trader, offer number) executed more than once. 0: nothing enters twice.
- ``offers_executed``: {exchange: OFFER_EXEC events there}; ``trades``: {exchange: TRADE events}.
- ``exchanges_agree``: entry rmp only (None for direct): every exchange executed its offers in
  increasing ring position (global sequence number), and every two exchanges executed the
  offers both executed (the open ones) in the same relative order.
- ``pair_distance_ms``: {pair: far trader's minus near trader's one-way delay to the pair's
  exchange (``model.queries.path_delay_ms``), rounded to 0.1 ms}; the near trader is the one
  with the smaller delay.
- ``near_first_fraction``: {distance: over every decision of every pair at that distance in
  which the pair's exchange executed both offers, the fraction in which it executed the near
  trader's offer first}. Distances are the ``pair_distance_ms`` values, as strings ("%g").
- ``near_first_decisions``: {distance: how many decisions that fraction is over}.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment, Topology, TraderHost
from rmptwin.model.queries import path_delay_ms
from rmptwin.rundir.run import RunDir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData

PLOT = "near_first_fraction.png"
OFFER_KINDS = (Kind.OFFER_SENT, Kind.OFFER_ADMIT, Kind.OFFER_REJECT, Kind.OFFER_EXEC, Kind.TRADE)


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    if loaded.experiment.orders is None or not loaded.topology.hosts_with_role("trader"):
        return {}
    return figures(df, loaded.topology, loaded.experiment.orders.entry)


def _detail(d: str | dict[str, Any] | None) -> dict[str, Any]:
    return json.loads(d) if isinstance(d, str) else (d or {})


def figures(df: pd.DataFrame, topo: Topology, entry: str) -> dict[str, Any]:
    """Every key of the module docstring from the run's events (pandas; any backend)."""
    exchanges = {h.name for h in topo.hosts_with_role("exchange")}
    ev = df[df.kind.isin(OFFER_KINDS)]
    rejected = Counter(_detail(d).get("reason", "?") for d in ev[ev.kind == Kind.OFFER_REJECT].detail)
    all_admits = ev[ev.kind == Kind.OFFER_ADMIT]
    brokers = {h.name for h in topo.hosts_with_role("broker")}
    admits = all_admits[~all_admits.node.isin(brokers)]
    execs = ev[(ev.kind == Kind.OFFER_EXEC) & ev.node.isin(exchanges)]
    twice = int(all_admits.groupby(["node", "src", "src_seq"]).size().gt(1).sum()
                + execs.groupby(["node", "src", "src_seq"]).size().gt(1).sum())
    trades = ev[(ev.kind == Kind.TRADE) & ev.node.isin(exchanges)]
    distances, pairs = pair_distances(topo)
    fraction, decisions = near_first(execs, pairs, distances)
    return {
        "orders_entry": entry,
        "offers_sent": int((ev.kind == Kind.OFFER_SENT).sum()),
        "offers_admitted": int(len(admits)),
        "offers_forwarded": int(len(all_admits) - len(admits)),
        "offers_rejected": dict(sorted(rejected.items())),
        "offers_rejected_total": int(sum(rejected.values())),
        "offers_admitted_twice": twice,
        "offers_executed": {x: int((execs.node == x).sum()) for x in sorted(exchanges)},
        "trades": {x: int((trades.node == x).sum()) for x in sorted(exchanges)},
        "exchanges_agree": exchanges_agree(execs) if entry == "rmp" else None,
        "pair_distance_ms": {p: distances[p] for p in sorted(distances)},
        "near_first_fraction": fraction,
        "near_first_decisions": decisions,
    }


def pair_distances(topo: Topology) -> tuple[dict[str, float], dict[str, tuple[str, str, str]]]:
    """({pair: distance ms}, {pair: (near trader, far trader, exchange)}) of every complete pair."""
    members: dict[str, list[TraderHost]] = defaultdict(list)
    for t in topo.hosts_with_role("trader"):
        if t.pair is not None and t.exchange is not None:
            members[t.pair].append(t)
    distances: dict[str, float] = {}
    pairs: dict[str, tuple[str, str, str]] = {}
    for pair, ts in members.items():
        if len(ts) != 2 or ts[0].exchange != ts[1].exchange:
            continue
        floor = ts[0].exchange
        assert floor is not None   # only traders with an exchange are members
        near, far = sorted(ts, key=lambda t: (path_delay_ms(topo, t.name, floor), t.name))
        distances[pair] = round(path_delay_ms(topo, far.name, floor) - path_delay_ms(topo, near.name, floor), 1)
        pairs[pair] = (near.name, far.name, floor)
    return distances, pairs


def near_first(execs: pd.DataFrame, pairs: dict[str, tuple[str, str, str]],
               distances: dict[str, float]) -> tuple[dict[str, float], dict[str, int]]:
    """near_first_fraction and near_first_decisions (module docstring)."""
    position: dict[tuple[str, str, str, int], int] = {}   # (exchange, pair, trader, decision) -> position
    for node, src, gseq, det in zip(execs.node, execs.src, execs.gseq, execs.detail):
        d = _detail(det)
        if d.get("pair"):
            position.setdefault((node, d["pair"], src, int(d.get("decision", -1))), int(gseq))
    wins: dict[str, list[bool]] = defaultdict(list)
    decisions_of: dict[tuple[str, str], set[int]] = defaultdict(set)
    for node, pair, _, k in position:
        decisions_of[(node, pair)].add(k)
    for pair, (near, far, floor) in pairs.items():
        key = f"{distances[pair]:g}"
        for k in sorted(decisions_of.get((floor, pair), ())):
            pn, pf = position.get((floor, pair, near, k)), position.get((floor, pair, far, k))
            if pn is not None and pf is not None:
                wins[key].append(pn < pf)
    order = sorted(wins, key=float)
    return ({k: round(sum(wins[k]) / len(wins[k]), 4) for k in order}, {k: len(wins[k]) for k in order})


def exchanges_agree(execs: pd.DataFrame) -> bool:
    """Each exchange executed in increasing ring position; shared offers in one relative order."""
    orders: dict[str, list[tuple[str, int]]] = {}
    for node, grp in execs.sort_values("gseq").groupby("node"):
        ring = [int(_detail(d).get("ring_gseq", -1)) for d in grp.detail]
        if any(b <= a for a, b in zip(ring, ring[1:])):
            return False
        orders[node] = list(zip(grp.src, grp.src_seq.astype(int)))
    names = sorted(orders)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = set(orders[a]) & set(orders[b])
            if [o for o in orders[a] if o in shared] != [o for o in orders[b] if o in shared]:
                return False
    return True


# ----------------------------------------------------------------------------- Spark and report


def spark_metrics(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    """The same figures (one definition: ``figures``) over the run's raw event files, read with
    Spark (the parsed ``events`` frame drops the detail the offers carry), and the plot."""
    orders = (rd.manifest.get("experiment") or {}).get("orders")
    if not orders or not rd.topology.hosts_with_role("trader"):
        return {}
    run = RunDir(rd.path)
    raw = spark.read.parquet(*[str(f) for f in run.event_files()])
    rows = raw.filter(raw.kind.isin(list(OFFER_KINDS))).select("node", "kind", "src", "src_seq", "gseq",
                                                                "detail").toPandas()
    m = figures(rows, rd.topology, orders.get("entry", "rmp"))
    m["plot"] = plot_near_first(m, run.analysis_path(PLOT)).name
    return m


def plot_near_first(m: dict[str, Any], path: Path) -> Path:
    from rmptwin.analysis.plots import plt, save_figure  # matplotlib: only when drawing

    fr = sorted(((float(k), v) for k, v in (m.get("near_first_fraction") or {}).items()))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([d for d, _ in fr], [v for _, v in fr], "o-", label=f"entry: {m.get('orders_entry')}")
    ax.axhline(1.0, color="grey", ls=":", lw=1)
    ax.axhline(0.5, color="grey", ls="--", lw=1, label="fair (0.5)")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("pair distance: far minus near trader's delay to the floor (ms)")
    ax.set_ylabel("near_first_fraction")
    ax.legend(loc="lower left")
    return save_figure(fig, path)


def report_html(m: dict[str, Any]) -> str:
    o = m.get("unified_orders")
    if not o:
        return ""
    import html as _html
    fractions = sorted(o.get("near_first_fraction", {}).items(), key=lambda kv: float(kv[0]))
    rows = "".join(f"<tr><td>{k}</td><td>{v}</td><td>{o['near_first_decisions'].get(k, 0)}</td></tr>"
                   for k, v in fractions)
    rej = ", ".join(f"{k}: {v}" for k, v in o.get("offers_rejected", {}).items()) or "none"
    return (
        "<h2>Unified orders: fair entry</h2>"
        f"<p>Entry: <b>{_html.escape(str(o.get('orders_entry')))}</b>. Offers sent {o.get('offers_sent')}, "
        f"admitted {o.get('offers_admitted')}, rejected {o.get('offers_rejected_total')} ({_html.escape(rej)}), "
        f"admitted or executed twice {o.get('offers_admitted_twice')}; executed {o.get('offers_executed')}; "
        f"trades {o.get('trades')}; exchanges agree: {o.get('exchanges_agree')}.</p>"
        "<table><tr><th>pair distance (ms)</th><th>near_first_fraction</th><th>decisions</th></tr>"
        f"{rows}</table>"
        f"<img src='{o.get('plot', PLOT)}' alt='near_first_fraction against distance'>"
        "<div class='caption'>Fraction of a pair's simultaneous decisions in which the floor executed the "
        "near trader's offer first, per distance: ~1.0 sent directly, ~0.5 through the rotating token.</div>"
    )


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    """The rows `rmptwin sim` / `rmptwin run` print for a unified-orders run (``sections``)."""
    if "offers_admitted" not in summary:
        return []
    fractions = dict(sorted((summary.get("near_first_fraction") or {}).items(), key=lambda kv: float(kv[0])))
    rows: list[tuple[str, object]] = [
        ("offers admitted", summary["offers_admitted"]),
        ("offers rejected", summary.get("offers_rejected_total")),
        ("near_first_fraction by distance ms", fractions or "-"),
    ]
    if summary.get("exchanges_agree") is not None:
        rows.append(("exchanges_agree", summary["exchanges_agree"]))
    return rows
