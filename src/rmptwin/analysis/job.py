"""`rmptwin analyze`: extract a run directory, run every transform, load the results into
RUN/analysis/ (*.parquet, metrics.json) and render report.html with its plots."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import control, extract, latency, loss, minc, throughput

QUANTILES = [i / 100 for i in range(101)]


def _rows(df: DataFrame) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _write(df: DataFrame, out: Path, name: str) -> None:
    # One file per cached partition: coalesce(1) would encode millions of rows in one task
    # while the other core idles (6 s of the latency step on 10M events).
    df.write.mode("overwrite").parquet(str(out / f"{name}.parquet"))


def _write_rows(rows: list[dict], out: Path, name: str) -> None:
    if rows:
        pq.write_table(pa.Table.from_pylist(rows), out / f"{name}.parquet")


def _clean(x):
    """JSON-safe: NaN/inf -> None, recursively."""
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def compute(spark, run: Path, progress=None, bin_ns: int = 100_000_000) -> dict:
    """Every metric of one run; big per-message tables go to RUN/analysis/*.parquet on the way."""
    step = progress or (lambda name: None)
    out = run / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    step("extract")
    rd = extract.load_run(spark, run)
    events = rd.events.cache()
    m: dict = {"run": str(run), "manifest": {k: rd.manifest.get(k) for k in
               ("experiment", "seed", "backend", "created_utc", "git_commit", "experiment_file")}}
    counts = _rows(events.groupBy("kind").count())
    m["events"] = {r["kind"]: r["count"] for r in counts}
    m["events_total"] = sum(m["events"].values())

    step("latency")
    lat = latency.delivery_latency(events, rd.hosts).cache()
    # The aggregation fills the cache; _write comes last so that it only reads the cached rows.
    # p50 and p99 are the 50th and 99th of the CDF's quantiles, from the same summary.
    p50, p99 = QUANTILES.index(0.5), QUANTILES.index(0.99)
    summary = _rows(latency.latency_summary(lat, QUANTILES).orderBy("stage", "region"))
    m["latency"] = [{"stage": r["stage"], "region": r["region"], "n": r["n"], "mean_ns": r["mean_ns"],
                     "p50_ns": r["q"][p50], "p99_ns": r["q"][p99], "max_ns": r["max_ns"]} for r in summary]
    m["latency_cdf"] = [{"stage": r["stage"], "region": r["region"], "q": r["q"]} for r in summary if not r["overall"]]
    _write(lat, out, "latency")
    lat.unpersist()

    step("fairness")
    fair = latency.fairness_spread(events).cache()
    q = F.percentile_approx("spread_ns", [0.5, 0.99], 10000)
    m["fairness"] = _rows(fair.groupBy("scope").agg(
        F.count("*").alias("messages"), q.alias("q"), F.max("spread_ns").alias("max_ns"))
        .select("scope", "messages", F.col("q")[0].alias("p50_ns"), F.col("q")[1].alias("p99_ns"), "max_ns"))
    m["fairness_series"] = _rows(
        fair.withColumn("bin_ns", (F.floor(F.col("first_ns") / bin_ns) * bin_ns).cast("long"))
        .groupBy("scope", "bin_ns").agg(F.percentile_approx("spread_ns", 0.5, 1000).alias("p50_ns"),
                                        F.max("spread_ns").alias("max_ns")).orderBy("scope", "bin_ns"))
    _write(fair, out, "fairness")  # after the aggregations filled the cache (see latency)
    fair.unpersist()

    step("loss")
    dn = (rd.manifest.get("experiment") or {}).get("protocol", {}).get("dn_ms", 75.0)
    windows = spark.createDataFrame(minc.receiver_windows(rd.topology, dn), minc.RECEIVER_WINDOWS)
    fate = loss.fates(events, rd.hosts, windows).cache()
    m["receiver_loss"] = _rows(loss.receiver_loss(fate).orderBy("node"))
    _write_rows(m["receiver_loss"], out, "receiver_loss")
    m["correlation"] = _rows(loss.loss_correlation(fate))
    _write_rows(m["correlation"], out, "correlation")
    m["customer_loss"] = _rows(loss.customer_loss(events).orderBy("node"))

    step("minc")
    m["minc"] = minc.minc_links(spark, rd.topology, fate, latency.sends(events), rd.drops, rd.counts, dn)
    _write_rows(m["minc"], out, "minc")
    pairs = sorted({(r["src"], r["stripe"]) for r in m["minc"]})
    trees = minc.trees_for(rd.topology, pairs[:1])
    m["tree_order"] = next(iter(trees.values())).leaves_in_order() if trees else []

    step("control")
    m["control"] = _rows(control.control_per_data(events).orderBy("type"))
    m["nacks"] = _rows(control.nack_summary(events, fate))[0]
    per_packet = control.nacks_per_lost_packet(events, fate)
    m["nacks_by_losers"] = _rows(per_packet.groupBy("receivers_lost").agg(
        F.count("*").alias("packets"), F.mean("nacks").alias("mean_nacks"),
        F.max("nacks").alias("max_nacks")).orderBy("receivers_lost"))
    fate.unpersist()
    m["token"] = _rows(control.token_rotation(control.token_intervals(events)).orderBy("stripe"))
    m["reformation"] = _rows(control.reformation_outages(events).orderBy("start_ns"))
    m["crashes"] = _rows(control.crash_recovery(events).orderBy("crash_ns"))
    m["delivery_gaps"] = _rows(control.delivery_gaps(events).orderBy("node"))

    step("throughput")
    m["throughput"] = _rows(throughput.throughput(events, rd.hosts, bin_ns).orderBy("dimension", "key", "bin_ns"))
    _write_rows(m["throughput"], out, "throughput")
    events.unpersist()
    m["headline"] = headline(m)
    return _clean(m)


def _find(rows, **kv):
    for r in rows:
        if all(r.get(k) == v for k, v in kv.items()):
            return r
    return {}


def headline(m: dict) -> dict:
    """The figures a reader looks at first (times in ms, rates as fractions)."""
    ms = lambda x: None if x is None else x / 1e6  # noqa: E731
    dl = _find(m["latency"], stage="deliver", region="all")
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
        "packets": m["events"].get("send", 0),
        "events": m["events_total"],
        "receivers": len(rl),
        "deliver_latency_p50_ms": ms(dl.get("p50_ns")), "deliver_latency_p99_ms": ms(dl.get("p99_ns")),
        "customer_latency_p50_ms": ms(cu.get("p50_ns")), "customer_latency_p99_ms": ms(cu.get("p99_ns")),
        "release_spread_p50_ms": ms(rel.get("p50_ns")), "release_spread_max_ms": ms(rel.get("max_ns")),
        "customer_spread_p50_ms": ms(cf.get("p50_ns")), "customer_spread_max_ms": ms(cf.get("max_ns")),
        "first_loss_mean": (sum(r["first_loss"] for r in rl) / len(rl)) if rl else None,
        "residual_loss_max": max((r["residual_loss"] for r in rl), default=None),
        "control_per_data": allc.get("per_data"),
        "nacks_per_lost_packet": m["nacks"].get("nacks_per_lost_packet"),
        "token_pass_mean_ms": ms(tok.get("pass_mean_ns")), "token_pass_jitter_ms": ms(tok.get("pass_jitter_ns")),
        "token_rotation_mean_ms": ms(tok.get("rotation_mean_ns")),
        "reformations": len(m["reformation"]),
        "reformation_max_ms": ms(max((r["duration_ns"] for r in m["reformation"]), default=None)),
        "source_rate_mean_per_s": (sum(src_rates) / len(src_rates)) if src_rates else None,
        "minc_max_error_pp": (100 * max(minc_err)) if minc_err else None,
    }


def analyze(spark, run: str | Path, console=None) -> Path:
    """Analyse one run directory; returns the path of its report.html."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from . import report

    run = Path(run)
    steps = ["extract", "latency", "fairness", "loss", "minc", "control", "throughput", "report"]
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as prog:
        task = prog.add_task(f"analysing {run}", total=len(steps))

        def step(name: str) -> None:
            prog.update(task, description=f"{run.name}: {name}", completed=steps.index(name))

        t0 = time.perf_counter()
        m = compute(spark, run, step)
        m["analysis_seconds"] = round(time.perf_counter() - t0, 3)
        step("report")
        out = run / "analysis"
        (out / "metrics.json").write_text(json.dumps(m, indent=2, sort_keys=True, default=str) + "\n")
        path = report.render(m, out)
        prog.update(task, completed=len(steps))
    return path
