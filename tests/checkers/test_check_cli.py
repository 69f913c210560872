"""`rmptwin check` on a real simulated run: clean, it passes (exit 0); with two deliveries
swapped at one receiver in its event file, it exits 1 and names the total-order violation."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from rmptwin.cli.main import app
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import run_experiment

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def short(name: str, **workload):
    """A shipped experiment with a shorter workload (1 s of publishing, 4 s in all)."""
    loaded = load_experiment(EXPERIMENTS / name)
    exp = loaded.experiment
    w = exp.workload.model_copy(update={"duration_s": 1.0, **workload})
    return loaded.model_copy(update={"experiment": exp.model_copy(update={"workload": w, "duration_s": 4.0})})


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "run"
    run_experiment(short("quickstart.yaml"), "sim", out=out)
    return RunDir(out)


def _check(run: RunDir):
    return CliRunner().invoke(app, ["check", str(run.path)], catch_exceptions=False)


def test_clean_run_passes(quick_run):
    result = _check(quick_run)
    assert result.exit_code == 0, result.output
    assert "total_order" in result.output and "violation" not in result.output


def test_two_deliveries_swapped_at_one_receiver_is_a_total_order_violation(quick_run, tmp_path):
    altered = RunDir(tmp_path / "altered")
    altered.replace_manifest(quick_run.read_manifest())
    table = quick_run.read_events()
    rows = table.to_pylist()
    at = [i for i, r in enumerate(rows) if r["kind"] == "deliver" and r["node"] == "rpny" and r["d_stripe"] == 0]
    i, j = at[3], at[4]
    for col in ("src", "src_seq"):
        rows[i][col], rows[j][col] = rows[j][col], rows[i][col]
    altered.write_events(pa.Table.from_pylist(rows, schema=table.schema))
    result = _check(altered)
    assert result.exit_code == 1, result.output
    assert "VIOLATION total_order" in result.output
    assert "rpny" in result.output


def test_not_a_run_directory_is_one_error_line(tmp_path):
    # main() turns a UserError into one line on stderr and exit 2 (not 1: that means a violation)
    result = CliRunner().invoke(app, ["check", str(tmp_path / "nope")])
    assert isinstance(result.exception, UserError) and "no such run directory" in str(result.exception)


def test_a_forged_cas_answer_in_a_venue_run_is_not_linearizable(tmp_path):
    loaded = load_experiment(EXPERIMENTS / "venue-failover.yaml")
    exp = loaded.experiment
    v = exp.venue.model_copy(update={"rate": 500, "duration_s": 1.0})
    loaded = loaded.model_copy(update={"experiment": exp.model_copy(update={"venue": v, "faults": [],
                                                                          "duration_s": 2.0})})
    run = run_experiment(loaded, "sim", out=tmp_path / "venue").run_dir
    assert _check(run).exit_code == 0
    table = run.read_events()
    rows = table.to_pylist()
    # one EV is told its proposal won, but with a request nobody proposed at that position
    i = next(k for k, r in enumerate(rows) if r["kind"] == "cas_ok" and '"status":0' in r["detail"]
             and r["gseq"] > 20)
    rows[i]["detail"] = rows[i]["detail"].replace('"keys":[[', '"keys":[[7,999999],[')
    forged = RunDir(tmp_path / "forged")
    forged.replace_manifest(run.read_manifest())
    forged.write_events(pa.Table.from_pylist(rows, schema=table.schema))
    result = _check(forged)
    assert result.exit_code == 1, result.output
    assert "VIOLATION cas_linearizable" in result.output
