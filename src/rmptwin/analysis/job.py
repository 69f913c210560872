"""`rmptwin analyze`: extract a run directory, run every transform, load the results into
its analysis directory (*.parquet, metrics.json) and render report.html with its plots.

Figures summary.json also has are defined once, in ``analysis.summary``; the transforms
compute them by the same words (see that module's table), and ``headline`` names them as
summary.json does where they are the same figure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from rmptwin.analysis import control, extract, latency, loss, minc, report, throughput
from rmptwin.analysis.first_copy import first_copy_slack_ms
from rmptwin.analysis.reformations import read_reformation_events, reformation_list
from rmptwin.analysis.sections import spark_sections
from rmptwin.rundir.run import RunDir

QUANTILES = [i / 100 for i in range(101)]
STEPS = ["extract", "latency", "fairness", "loss", "minc", "control", "throughput", "report"]


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _write(df: DataFrame, run: RunDir, name: str) -> None:
    # One file per cached partition: coalesce(1) would encode millions of rows in one task
    # while the other core idles (6 s of the latency step on 10M events).
    df.write.mode("overwrite").parquet(str(run.analysis_path(f"{name}.parquet")))


def _write_rows(rows: list[dict[str, Any]], run: RunDir, name: str) -> None:
    if rows:
        run.write_analysis_table(name, pa.Table.from_pylist(rows))


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf -> None, recursively."""
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def compute(spark: SparkSession, run: str | Path, progress: Callable[[str], None] | None = None,
            bin_ns: int = 100_000_000, parse: bool | None = None) -> dict[str, Any]:
    """Every metric of one run; big per-message tables go to its analysis directory on the way.
    ``parse`` True reads the events' detail JSON even where typed detail columns exist (tests)."""
    step = progress or (lambda name: None)
    out = RunDir(run)
    out.analysis_dir.mkdir(parents=True, exist_ok=True)
    step("extract")
    rd = extract.load_run(spark, run, parse)
    events = extract.packet_layout(rd.events, node_names=[h.name for h in rd.topology.hosts]).cache()
    m = overview(rd, events)
    step("latency")
    m.update(latency_metrics(events, rd.hosts, out))
    step("fairness")
    m.update(fairness_metrics(events, out, bin_ns))
    step("loss")
    fate = loss.fates(events, rd.hosts, _receiver_windows(spark, rd)).cache()
    m.update(loss_metrics(events, fate, out))
    step("minc")
    m.update(minc_metrics(spark, rd, events, fate, out))
    step("control")
    m.update(nack_metrics(events, fate))
    fate.unpersist()
    m.update(control_metrics(events, rd.manifest["experiment"].get("duration_s") or 0.0))
    m.update(reformation_list(read_reformation_events(out.event_files())))
    step("throughput")
    m["throughput"] = _rows(throughput.throughput(events, rd.hosts, bin_ns).orderBy("dimension", "key", "bin_ns"))
    _write_rows(m["throughput"], out, "throughput")
    m.update(spark_sections(spark, events, rd))
    events.unpersist()
    m["headline"] = headline(m)
    return cast(dict[str, Any], _clean(m))


def overview(rd: extract.RunData, events: DataFrame) -> dict[str, Any]:
    """The run, its manifest's headline keys, its receivers, and its events counted by kind."""
    m: dict[str, Any] = {"run": str(rd.path), "manifest": {k: rd.manifest.get(k) for k in
               ("experiment", "seed", "backend", "created_utc", "git_commit", "experiment_file", "protocol_derived")}}
    m["receivers"] = sum(1 for h in rd.topology.hosts if h.role in extract.RECEIVER_ROLES)
    m["events"] = {r["kind"]: r["count"] for r in _rows(events.groupBy("kind").count())}
    m["events_total"] = sum(m["events"].values())
    run = RunDir(rd.path)
    summary = run.read_summary() if run.summary_path.exists() else {}
    m["container_stats"] = report.container_rows(summary)   # Docker hosts' CPU and memory; [] otherwise
    return m


def latency_metrics(events: DataFrame, hosts: DataFrame, out: RunDir) -> dict[str, Any]:
    """Latency per stage and region (p50/p99 exact; the CDF's quantiles approximate)."""
    # Computed once, written, and the three columns the summary needs read back from the
    # written table (a cache of its millions of rows, or collecting them from Spark, cost more).
    # The per-packet sends and the sequence map are cached for the one job: each is read by
    # several joins, which would otherwise each recompute it from the events.
    sent = latency.sends(events).cache()
    seqmap = latency.sequence_map(events, sent).cache()
    _write(latency.delivery_latency(events, hosts, sent, seqmap), out, "latency")
    seqmap.unpersist()
    sent.unpersist()
    # stage and region read as dictionaries: two labels, not 5 M strings, for sorted_groups
    written = pq.read_table(out.analysis_path("latency.parquet"), columns=["stage", "region", "latency_ns"],
                            read_dictionary=["stage", "region"])
    summary = latency.latency_summary(written, QUANTILES)
    m = {"latency": [{k: r[k] for k in ("stage", "region", "n", "mean_ns", "p50_ns", "p99_ns", "max_ns")}
                     for r in summary],
         "latency_cdf": [{"stage": r["stage"], "region": r["region"], "q": r["q"]}
                         for r in summary if not r["overall"]]}
    return m


def fairness_metrics(events: DataFrame, out: RunDir, bin_ns: int) -> dict[str, Any]:
    """Fairness spread per scope (p50/p99 exact) and its median over time."""
    fair = latency.fairness_spread(events).cache()
    spreads = latency.sorted_groups(fair, ["scope"], "spread_ns")
    m = {"fairness": [{"scope": scope, "messages": x["n"], "p50_ns": x["p50_ns"], "p99_ns": x["p99_ns"],
                       "max_ns": x["max_ns"]}
                      for (scope,), v in sorted(spreads.items()) for x in [latency.exact_summary(v)]]}
    m["fairness_series"] = _rows(
        fair.withColumn("bin_ns", (F.floor(F.col("first_ns") / bin_ns) * bin_ns).cast("long"))
        .groupBy("scope", "bin_ns").agg(F.percentile_approx("spread_ns", 0.5, 1000).alias("p50_ns"),
                                        F.max("spread_ns").alias("max_ns")).orderBy("scope", "bin_ns"))
    _write(fair, out, "fairness")  # after the aggregations filled the cache (see latency)
    fair.unpersist()
    return m


def _slack_ms(rd: extract.RunData) -> float:
    """How late after its send a copy still counts as the first (first_copy.first_copy_slack_ms)."""
    return first_copy_slack_ms((rd.manifest.get("experiment") or {}).get("protocol"))


def _receiver_windows(spark: SparkSession, rd: extract.RunData) -> DataFrame:
    return spark.createDataFrame(minc.receiver_windows(rd.topology, _slack_ms(rd)), minc.RECEIVER_WINDOWS)


def loss_metrics(events: DataFrame, fate: DataFrame, out: RunDir) -> dict[str, Any]:
    """First-reception and residual loss per receiver, their correlation, customers' losses."""
    m = {"receiver_loss": _rows(loss.receiver_loss(fate).orderBy("node"))}
    _write_rows(m["receiver_loss"], out, "receiver_loss")
    m["correlation"] = _rows(loss.loss_correlation(fate))
    _write_rows(m["correlation"], out, "correlation")
    m["customer_loss"] = _rows(loss.customer_loss(events).orderBy("node"))
    return m


def minc_metrics(spark: SparkSession, rd: extract.RunData, events: DataFrame, fate: DataFrame,
                 out: RunDir) -> dict[str, Any]:
    """MINC link-loss estimates beside the ground truth, and the receivers in tree order."""
    rows = minc.minc_links(spark, rd.topology, fate, latency.sends(events), rd.drops, rd.counts, _slack_ms(rd))
    _write_rows(rows, out, "minc")
    pairs = sorted({(r["src"], r["stripe"]) for r in rows})
    trees = minc.trees_for(rd.topology, pairs[:1])
    return {"minc": rows, "tree_order": next(iter(trees.values())).leaves_in_order() if trees else [],
            "minc_first_copy_slack_ms": _slack_ms(rd)}


def nack_metrics(events: DataFrame, fate: DataFrame) -> dict[str, Any]:
    """NACKs per lost packet, and by how many receivers lost it (implosion)."""
    per_packet = control.nacks_per_lost_packet(events, fate)
    return {"nacks": _rows(control.nack_summary(events, fate))[0],
            "nacks_by_losers": _rows(per_packet.groupBy("receivers_lost").agg(
                F.count("*").alias("packets"), F.mean("nacks").alias("mean_nacks"),
                F.max("nacks").alias("max_nacks")).orderBy("receivers_lost"))}


def control_metrics(events: DataFrame, duration_s: float) -> dict[str, Any]:
    """Control per data message by type, token rotation, reformations, crashes, delivery gaps."""
    return {
        "control": _rows(control.control_per_data(events, round(duration_s * 1e9)).orderBy("type")),
        "token": _rows(control.token_rotation(control.token_intervals(events)).orderBy("stripe")),
        "reformation": _rows(control.reformation_outages(events).orderBy("start_ns")),
        "crashes": _rows(control.crash_recovery(events).orderBy("crash_ns", "node")),
        "delivery_gaps": _rows(control.delivery_gaps(events).orderBy("node")),
    }


def _find(rows: list[dict[str, Any]], **kv: object) -> dict[str, Any]:
    for r in rows:
        if all(r.get(k) == v for k, v in kv.items()):
            return r
    return {}


def headline(m: dict[str, Any]) -> dict[str, Any]:
    """The figures a reader looks at first (times in ms, rates as fractions). packets,
    events, receivers, control_per_data, release_latency_* and release_spread_* are
    summary.json's messages_sent, events, receivers, control_per_data, delivery_latency_ms
    and fairness_spread_ms."""
    ms: Callable[[float | None], float | None] = lambda x: None if x is None else x / 1e6
    dl = _find(m["latency"], stage="deliver", region="all")
    rl_lat = _find(m["latency"], stage="release", region="all")
    cu = _find(m["latency"], stage="customer", region="all")
    rel = _find(m["fairness"], scope="release")
    cf = _find(m["fairness"], scope="customer")
    rl = m["receiver_loss"]
    allc = _find(m["control"], type="all")
    minc_err = [abs(r["estimate"] - r["truth"]) for r in m["minc"]
                if r.get("truth") is not None and r.get("estimate") is not None and not math.isnan(r["estimate"])]
    src_rates = [r["rate_per_s"] for r in m["throughput"] if r["dimension"] == "source"]
    tok = m["token"][0] if m["token"] else {}
    return {
        "packets": allc.get("data", 0),
        "events": m["events_total"],
        "receivers": m["receivers"],
        "deliver_latency_p50_ms": ms(dl.get("p50_ns")), "deliver_latency_p99_ms": ms(dl.get("p99_ns")),
        "release_latency_p50_ms": ms(rl_lat.get("p50_ns")), "release_latency_p99_ms": ms(rl_lat.get("p99_ns")),
        "customer_latency_p50_ms": ms(cu.get("p50_ns")), "customer_latency_p99_ms": ms(cu.get("p99_ns")),
        "release_spread_p50_ms": ms(rel.get("p50_ns")), "release_spread_max_ms": ms(rel.get("max_ns")),
        "customer_spread_p50_ms": ms(cf.get("p50_ns")), "customer_spread_max_ms": ms(cf.get("max_ns")),
        "first_loss_mean": (sum(r["first_loss"] for r in rl) / len(rl)) if rl else None,
        "residual_loss_max": max((r["residual_loss"] for r in rl), default=None),
        "control_per_data": allc.get("per_data"),
        "nacks_per_lost_packet": m["nacks"].get("nacks_per_lost_packet"),
        "token_pass_mean_ms": ms(tok.get("pass_mean_ns")), "token_pass_jitter_ms": ms(tok.get("pass_jitter_ns")),
        "token_rotation_mean_ms": ms(tok.get("rotation_mean_ns")),
        # reformations.py's definitions, as summary.json has them: every reformation (a crash
        # and the member's rejoin are two), and the outage of each crashed member
        "reformations": len(m.get("reformations") or []),
        "outage_max_ms": ms(max((r["outage_ns"] for r in m["crashes"] if r.get("outage_ns") is not None),
                                default=None)),
        "source_rate_mean_per_s": (sum(src_rates) / len(src_rates)) if src_rates else None,
        "minc_max_error_pp": (100 * max(minc_err)) if minc_err else None,
    }


def analyze(spark: SparkSession, run: str | Path, console: Console | None = None) -> Path:
    """Analyse one run directory: metrics.json, tables, plots and report.html; returns the report's path."""
    out = RunDir(run)
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as prog:
        task = prog.add_task(f"analysing {out.path}", total=len(STEPS))

        def step(name: str) -> None:
            prog.update(task, description=f"{out.path.name}: {name}", completed=STEPS.index(name))

        t0 = time.perf_counter()
        m = compute(spark, out.path, step)
        seconds = round(time.perf_counter() - t0, 3)
        step("report")
        # metrics.json holds what the run measured only, so that two analyses of one run (any
        # master) write the same bytes; how long this analysis took is shown in the report.
        out.write_metrics(m)
        path = report.render({**m, "analysis_seconds": seconds}, out)
        prog.update(task, completed=len(STEPS))
    return path
