"""One definition per metric, labs included: the pandas link-loss figures the labs' checks and
the sweep probe ``minc`` read (analysis.link_loss) are the Spark analysis' (analysis.job:
receiver_loss, correlation, minc) on the same run, to float rounding. The run is lab 2's
tree with a short workload and a crash, so that first copies, re-sends (the k_r warning
fires), repairs and a receiver's down time all occur."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.analysis import extract, job, link_loss, loss
from rmptwin.model import load_experiment
from rmptwin.model.overrides import make_point
from rmptwin.runner.pipeline import run_experiment
from rmptwin.studies.labs import LABS_DIR

pytestmark = pytest.mark.spark


def test_pandas_link_loss_equals_the_spark_analysis(spark, tmp_path: Path):
    base = load_experiment(LABS_DIR / "loss-minc" / "tree.yaml")
    loaded = make_point(base, {"workload.duration_s": 1.5, "duration_s": 2.0,
                               "faults": [{"at_s": 0.6, "action": "crash", "node": "rp3"},
                                          {"at_s": 1.0, "action": "recover", "node": "rp3"}]}).loaded
    run, _, _, _ = run_experiment(loaded, "sim", out=tmp_path / "run")
    rd = extract.load_run(spark, run.path)
    events = rd.events.cache()
    fate_sp = loss.fates(events, rd.hosts, job._receiver_windows(spark, rd)).cache()
    spark_loss = {r["node"]: r["first_loss"] for r in job.loss_metrics(events, fate_sp, run)["receiver_loss"]}
    spark_corr = {(r["a"], r["b"]): r for r in job.loss_metrics(events, fate_sp, run)["correlation"]}
    spark_minc = {(r["src"], r["stripe"], r["link"]): r
                  for r in job.minc_metrics(spark, rd, events, fate_sp, run)["minc"]}
    events.unpersist()

    fate = link_loss.fates(run.read_events().to_pandas(), loaded)
    assert link_loss.receiver_loss(fate) == pytest.approx(spark_loss, rel=1e-12)
    joint = link_loss.joint_loss(fate, "rp1", "rp2")
    theirs = spark_corr[("rp1", "rp2")]
    assert (joint["loss_a"], joint["loss_b"], joint["loss_both"]) == (theirs["loss_a"], theirs["loss_b"],
                                                                      theirs["loss_both"])
    rows = link_loss.minc_rows(fate, loaded, run.read_drops())
    assert len(rows) == len(spark_minc) > 10
    for r in rows:
        s = spark_minc[(r["src"], r["stripe"], r["link"])]
        assert (r["estimate"], r["truth"], r["packets"]) == pytest.approx((s["estimate"], s["truth"], s["packets"]),
                                                                          rel=1e-12)
