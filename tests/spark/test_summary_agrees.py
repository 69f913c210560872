"""One definition per metric: every figure summary.json (analysis.summary, pandas) and the
Spark jobs (analysis.job) both compute is the same number on the same simulated run.

The two implementations follow one written definition (analysis/summary.py's docstring);
this test is what keeps them one. Percentiles agree to float rounding only: the summary
interpolates between latencies in ms, Spark between latencies in ns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.analysis import extract, job
from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import run_experiment

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ROUNDING = 1e-12


def _same_percentiles(summary_ms: dict, n: int, p50_ns, p99_ns, max_ns) -> None:
    assert n == summary_ms["n"] > 0
    assert max_ns / 1e6 == summary_ms["max"]
    assert (p50_ns / 1e6, p99_ns / 1e6) == pytest.approx((summary_ms["p50"], summary_ms["p99"]), rel=ROUNDING)


@pytest.mark.parametrize("experiment", ["quickstart", "line3-crash", "binary-tree-loss"])
def test_summary_and_spark_agree_on_every_figure_both_compute(spark, tmp_path, experiment):
    loaded = load_experiment(REPO / "experiments" / f"{experiment}.yaml")
    run, s, _, _ = run_experiment(loaded, "sim", out=tmp_path / experiment)
    rd = extract.load_run(spark, run.path)
    events = rd.events.cache()
    m = {**job.overview(rd, events), **job.latency_metrics(events, rd.hosts, run),
         **job.fairness_metrics(events, run, bin_ns=100_000_000), **job.control_metrics(events, loaded.duration_s)}
    events.unpersist()

    assert s["events"] == m["events_total"]
    assert s["receivers"] == m["receivers"]
    [every] = [r for r in m["control"] if r["type"] == "all"]
    assert (every["data"], every["per_data"]) == (s["messages_sent"], s["control_per_data"])

    [release] = [r for r in m["latency"] if (r["stage"], r["region"]) == ("release", "all")]
    _same_percentiles(s["delivery_latency_ms"], release["n"], release["p50_ns"], release["p99_ns"],
                      release["max_ns"])
    [spread] = [r for r in m["fairness"] if r["scope"] == "release"]
    _same_percentiles(s["fairness_spread_ms"], spread["messages"], spread["p50_ns"], spread["p99_ns"],
                      spread["max_ns"])

    outages = [r["outage_ns"] / 1e6 for r in sorted(m["crashes"], key=lambda r: r["crash_ns"])
               if r["outage_ns"] is not None]
    assert outages == pytest.approx(s["reformation_ms"], rel=ROUNDING)
    if experiment == "line3-crash":
        assert s["reformation_ms"], "a ring member crashes: there is an outage to compare"
