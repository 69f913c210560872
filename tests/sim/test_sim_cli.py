"""`rmptwin sim` writes a complete run directory: manifest, events, drops, counts, summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import sim_stubs
from typer.testing import CliRunner

from rmptwin import factories
from rmptwin.cli.main import app
from rmptwin.records.tables import DROP_SCHEMA, EVENT_SCHEMA, LINK_COUNT_SCHEMA
from rmptwin.rundir.run import RunDir

REPO = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = {"receivers", "agreement", "messages_sent", "messages_delivered_min", "messages_lost",
                "control_per_data", "delivery_latency_ms", "fairness_spread_ms", "reformation_ms", "customers"}


def _check_run_dir(path: Path, seed: int) -> dict:
    run = RunDir(path)
    manifest = run.read_manifest()
    assert manifest["backend"] == "sim" and manifest["seed"] == seed
    assert manifest["experiment"]["name"] and manifest["topology"]["hosts"] and manifest["git_commit"]
    assert [f.name for f in run.event_files()] == ["events.parquet"]
    assert pq.read_schema(run.events_path()).equals(EVENT_SCHEMA)
    assert pq.read_schema(run.drops_path).equals(DROP_SCHEMA)
    counts = run.read_link_counts()
    assert counts.schema.equals(LINK_COUNT_SCHEMA) and counts.num_rows > 0
    summary = run.read_summary()
    assert SUMMARY_KEYS <= set(summary)
    return summary


def test_sim_command_writes_a_complete_run_dir(tmp_path, monkeypatch):
    # Stand-in cores (tests/sim/sim_stubs.py): this checks the driver and the run directory.
    monkeypatch.setattr(factories, "FACTORIES", {r: sim_stubs.build_stub for r in factories.FACTORIES})
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["sim", str(REPO / "experiments" / "line3.yaml"), "--seed", "4",
                                   "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert str(out) in res.output.replace("\n", "")
    summary = _check_run_dir(out, 4)
    events = RunDir(out).read_events().to_pandas()
    sent = (events.kind == "send").sum()
    assert summary["messages_sent"] == sent == 100  # line3: 50 msg/s, constant, for 2 s
    drops = RunDir(out).read_drops().to_pandas()
    assert len(drops) > 0 and set(drops.reason) == {"loss"}
    # A run directory is never overwritten.
    again = CliRunner().invoke(app, ["sim", str(REPO / "experiments" / "line3.yaml"), "--out", str(out)])
    assert again.exit_code != 0


def test_quickstart_through_the_real_cli(tmp_path):
    out = tmp_path / "qs"
    proc = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "sim", str(REPO / "experiments" / "quickstart.yaml"),
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = _check_run_dir(out, 1)
    assert summary["agreement"] is True and summary["messages_lost"] == 0
    # The command line, not the simulator, prints the summary table, the simulator's figures
    # and where the run went.
    printed = " ".join(proc.stdout.split())
    assert f"messages_sent │ {summary['messages_sent']}" in printed and "simulator │" in printed, proc.stdout
    assert f"run directory: {out}" in proc.stdout.replace("\n", "")
    assert summary["messages_sent"] > 0 and summary["messages_delivered_min"] == summary["messages_sent"]


def test_real_cores_same_seed_identical_run():
    from rmptwin.model import load_experiment
    from rmptwin.sim.simulate import simulate

    loaded = load_experiment(REPO / "experiments" / "line3-crash.yaml")
    a, b = simulate(loaded, seed=11), simulate(loaded, seed=11)
    assert a.events.num_rows > 1000
    assert a.events.equals(b.events) and a.drops.equals(b.drops) and a.link_counts.equals(b.link_counts)
    t = a.events.column("t_ns").to_numpy()
    assert (t[1:] >= t[:-1]).all()  # logged at true simulated time, in order
    kinds = set(a.events.column("kind").to_pylist())
    assert {"crash", "recover"} <= kinds
