"""`rmptwin sweep`: each (point, seed) a Spark task, one Parquet table, resumable, a report with
confidence intervals; a bad --set is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.model.overrides import make_points, parse_sets
from rmptwin.sweeps.spark import run_spark
from rmptwin.sweeps.sweep_loop import SweepPlan, run_sweep
from rmptwin.sweeps.sweep_report import write_report

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _plan():
    base = load_experiment(EXPERIMENTS / "line3.yaml")
    sets = parse_sets(["protocol.delta_a_ms=20,150"])
    return SweepPlan(base, sets, [1, 2], probes=["rmp"])


def test_sweep_through_spark_is_one_table_resumable_and_plotted(spark, tmp_path):
    calls = []

    def on_spark(tasks, on_rows):
        calls.append(len(tasks))
        run_spark(tasks, on_rows, spark=spark)

    first = run_sweep(_plan(), out=tmp_path / "sw", runner=on_spark)
    df = first.table.to_pandas()
    assert (first.ran, first.skipped, len(df)) == (4, 0, 4)
    assert set(zip(df["protocol.delta_a_ms"], df["seed"])) == {(20, 1), (20, 2), (150, 1), (150, 2)}
    # every summary key is a column, nested ones flattened, plus the probe's figures
    assert {"agreement", "fairness_spread_ms.p99", "customers.guaranteed", "rmp.acks_per_message"} <= set(df)
    spread = df.groupby("protocol.delta_a_ms")["fairness_spread_ms.p99"].mean()
    assert spread[150] < spread[20]          # Delta_A below the recovery time is unfair (seed 5.1)

    again = run_sweep(_plan(), out=tmp_path / "sw", runner=on_spark)
    assert (again.ran, again.skipped, again.table.num_rows) == (0, 4, 4)
    assert calls == [4]                      # the second call submitted no Spark job at all

    page = write_report(first.sweep, df, ["protocol.delta_a_ms"], "t")
    html = first.sweep.report_path.read_text()
    assert page.endswith("sweep.html") and "fairness_spread_ms.p99" in html and "95 %" in html
    assert any(first.sweep.plots_dir.glob("*.png"))


def test_bad_set_is_one_line_before_anything_runs(tmp_path):
    base = load_experiment(EXPERIMENTS / "line3.yaml")
    with pytest.raises(UserError, match="no field 'protocol.delta_aa_ms'"):
        make_points(base, parse_sets(["protocol.delta_aa_ms=1,2"]))
    with pytest.raises(UserError, match="greater than or equal to 0"):
        make_points(base, parse_sets(["protocol.delta_a_ms=-5"]))
    cmd = [sys.executable, "-m", "rmptwin.cli.main", "sweep", str(EXPERIMENTS / "line3.yaml"),
           "--set", "workload.rate_per_source=fast", "--out", str(tmp_path / "x")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "workload.rate_per_source" in done.stderr
    assert not (tmp_path / "x" / "sweep.parquet").exists()
