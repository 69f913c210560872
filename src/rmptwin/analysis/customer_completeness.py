"""Customers that are not complete, and why: the ``customers_incomplete`` key.

Registered in ``analysis.sections``: ``summarize`` adds the key to summary.json only when some
customer is incomplete (a run where every customer is complete has no such key, so its summary
is as before), ``spark_metrics`` computes the same figure by the same function on the same
events for metrics.json, ``report_html`` shows it, ``headline`` prints it under the run's table.

Definitions (simulated and emulated runs alike; the completeness of summary.py's
``customers.guaranteed_complete``):

- A customer's *missing* messages: per stripe it joins (``model.queries.customer_stripes``),
  the gseqs released there (RELEASE of an R_P/R_S; on an edge stripe, EDGE_RELEASE) that the
  customer has no CUST_RECV of: ``analysis.stripe_delivery``, the definition
  ``guaranteed_complete`` uses. A customer crashed at the end of the run is left out, as there.
- customers_incomplete: {customer: {grade, regions, missing, stripes, reason}} for every
  guaranteed-grade customer with missing messages, and every customer of either grade that
  raised a ``stale_feed`` alarm (``rmp.feed_watch``) and has missing messages. A best-effort
  customer that skipped gaps by design is not listed: skipping is its grade's contract.
- reason, the first that applies: ``stale_feed`` (the customer raised an ALARM stale_feed on a
  stripe with missing messages: its feed went silent; the entry adds ``rt``, the R_T it
  stopped hearing), ``gaps_unrepaired`` (a CUST_SKIP of the customer covers a missing gseq:
  it gave the message up, retries exhausted or too far behind), ``ended_before_repair``
  (neither: the run ended while the gap was still being repaired).
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.incarnations import lives_at_end
from rmptwin.analysis.stripe_delivery import RELEASE_KINDS, rt_names, stripe_delivery, stripe_of
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment
from rmptwin.model.queries import customer_stripes
from rmptwin.rmp.feed_watch import STALE_FEED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData

KINDS = (*RELEASE_KINDS, Kind.CUST_RECV, Kind.CUST_SKIP, Kind.ALARM, Kind.CRASH, Kind.RECOVER)
KEY = "customers_incomplete"


def _detail(d: str | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(d, dict):
        return d
    try:
        v = json.loads(d) if d else {}
    except (TypeError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


def incomplete_customers(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, dict[str, Any]]:
    """{customer: {grade, regions, missing, stripes, reason[, rt]}} (see the module docstring)."""
    topo = loaded.topology
    customers = topo.hosts_with_role("customer")
    if not customers:
        return {}
    crashed, _ = lives_at_end(df)
    delivery = stripe_delivery(df, rt_names(topo))
    names = {c.name for c in customers}
    mine = df[df.node.isin(names)]
    skipped: dict[tuple[str, int], list[tuple[int, int]]] = {}
    sk = mine[mine.kind == Kind.CUST_SKIP]
    for node, det in zip(sk.node, sk.detail):
        d = _detail(det)
        skipped.setdefault((node, stripe_of(d)), []).append((int(d.get("first", 0)), int(d.get("count", 0))))
    stale: dict[tuple[str, int], list[str]] = {}
    al = mine[mine.kind == Kind.ALARM]
    for node, det in zip(al.node, al.detail):
        d = _detail(det)
        if d.get("reason") == STALE_FEED:
            stale.setdefault((node, stripe_of(d)), list(d.get("rt") or []))
    out = {}
    for c in customers:
        if c.name in crashed:
            continue
        missing, stripes, reason, rt = 0, [], None, None
        for k in customer_stripes(c, loaded):
            lack = delivery.missing(c.name, k)
            if not lack:
                continue
            missing += len(lack)
            stripes.append(k)
            if (c.name, k) in stale:
                reason, rt = "stale_feed", stale[(c.name, k)]
            elif reason is None and any(f <= g < f + n for g in lack for f, n in skipped.get((c.name, k), ())):
                reason = "gaps_unrepaired"
        if not missing or (c.grade != "guaranteed" and rt is None):
            continue
        entry = {"grade": c.grade, "regions": list(c.regions), "missing": missing, "stripes": stripes,
                 "reason": reason or "ended_before_repair"}
        if rt is not None:
            entry["rt"] = rt
        out[c.name] = entry
    return out


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    found = incomplete_customers(df, loaded)
    return {KEY: found} if found else {}


def spark_metrics(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    """The same figure from the run's raw events (their detail is needed, which the parsed
    frame drops), filtered by Spark to the kinds it reads."""
    from rmptwin.analysis import schemas
    from rmptwin.model import Experiment
    from rmptwin.rundir.run import RunDir

    if not rd.topology.hosts_with_role("customer"):
        return {}
    loaded = LoadedExperiment(experiment=Experiment.model_validate(rd.manifest["experiment"]),
                              topology=rd.topology, path=rd.path)
    _, _, files = RunDir(rd.path).check()
    raw = spark.read.schema(schemas.EVENTS).parquet(*[str(f) for f in files])
    found = incomplete_customers(raw.where(raw.kind.isin(list(KINDS))).toPandas(), loaded)
    return {KEY: found} if found else {}


def report_html(m: dict[str, Any]) -> str:
    found = (m.get("customer_completeness") or {}).get(KEY)
    if not found:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{html.escape(e['grade'])}</td><td>{html.escape(', '.join(e['regions']))}"
        f"</td><td class='n'>{e['missing']}</td><td>{html.escape(e['reason'])}</td>"
        f"<td>{html.escape(', '.join(e.get('rt', [])))}</td></tr>" for name, e in sorted(found.items()))
    return ("<h2 id='customers-incomplete'>Customers not complete</h2><p>Guaranteed customers missing released "
            "messages, and customers whose feed went silent (stale_feed), with why.</p><table><tr><th>customer</th>"
            "<th>grade</th><th>regions</th><th>missing</th><th>reason</th><th>silent R_T</th></tr>" + rows + "</table>")


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    found = summary.get(KEY)
    if not found:
        return []
    return [(name, f"{e['reason']}: {e['missing']} missing") for name, e in sorted(found.items())]
